"""The integer family's fast path (``integer``): the numba kernels' decision."""

from __future__ import annotations

from mmasim.backends.fastpaths.shared import Decision, builtin_decision

def numba_integer(plan) -> Decision:
    """The numba integer kernels: s32 wrap / saturate, products or ``bitop`` xor."""
    d = builtin_decision(plan, "integer", "numba integer", modes=("wrap", "sat"))
    if d and plan.parameters.get("bitop") not in (None, "xor"):
        return Decision(d.path, f"bitop {plan.parameters['bitop']!r} (xor only)")
    return d
