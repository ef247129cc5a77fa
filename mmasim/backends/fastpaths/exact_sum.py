"""The exact sum's fast path (``exact_sum``: E-FDPA): the numba kernel's decision."""

from __future__ import annotations

from mmasim.backends.fastpaths.shared import Decision, builtin_decision

def numba_exact_sum(plan) -> Decision:
    """The numba exact-sum kernel: unscaled (rows past int64 are flagged when computed)."""
    return builtin_decision(plan, "exact_sum", "numba exact_sum", scaled=False)
