"""Which fast path computes a plan, and why each fast path is exact: one module per
accumulator family.

The reference accumulators (:mod:`mmasim.accumulators`) are the spec.  Beside them the numpy
backend's lean paths (:mod:`mmasim.backends.numpy.lean`), the numba backend's kernels
(:mod:`mmasim.backends.numba.kernels`) and the per-row bodies of the CUDA target
(:mod:`mmasim.backends.cuda.rows`) compute the same words in fewer operations, where their
arithmetic is proved exact.  Each family's module owns, for its paths:

- **eligibility**: one function per fast path, returning a
  :class:`~mmasim.backends.fastpaths.shared.Decision` (truthy where the path applies; else
  ``reason`` says why not);
- **the bound proofs**: one function per proof, returning a
  :class:`~mmasim.backends.fastpaths.shared.Bound` (the values it compares and whether it
  holds), the proof its docstring.

:mod:`.shared` holds what they share (the records, the word tables and their facts, the joint
A x B table, the packed decode table's bound).  :data:`KERNELS` names each family's compiled
kernel decision: the numba builder asks it, and the CUDA bodies take exactly those plans.
Nothing here imports numba or a backend.
"""

from __future__ import annotations

from mmasim.backends.fastpaths import exact_sum, group_scaled, ieee_chains, integer, shared, two_stage, window

__all__ = ["KERNELS", "exact_sum", "group_scaled", "ieee_chains", "integer", "shared", "two_stage", "window"]

#: accumulator family -> the decision of its compiled kernel (the numba builder's first question;
#: the CUDA bodies of :data:`mmasim.backends.cuda.rows.BODIES` take the same plans)
KERNELS = {
    "window": window.numba_window,
    "integer": integer.numba_integer,
    "group_scaled_window": group_scaled.numba_group_scaled,
    "two_stage_window": two_stage.numba_two_stage,
    "exact_sum": exact_sum.numba_exact_sum,
    "fma": ieee_chains.numba_fma,
    "mul_add_chain": ieee_chains.numba_mul_add,
    "ftz_mul_add": ieee_chains.numba_ftz,
}
