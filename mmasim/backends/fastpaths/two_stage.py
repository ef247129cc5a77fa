"""The two-stage window's fast path (``two_stage_window``: TR / GTR-FDPA, CDNA): the numba kernel's decision."""

from __future__ import annotations

from mmasim.backends.fastpaths.shared import Decision, builtin_decision

def numba_two_stage(plan) -> Decision:
    """The numba two-stage window kernel: unscaled."""
    return builtin_decision(plan, "two_stage_window", "numba two_stage", scaled=False)
