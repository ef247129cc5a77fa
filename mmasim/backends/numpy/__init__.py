"""The numpy backend: sparse selection, then the lean path for the common window
datapaths where it applies (:mod:`.lean`), else the reference (:mod:`.reference`).
"""

from __future__ import annotations

import numpy as np

from mmasim.arith.sparse import select
from mmasim.backends.numpy.reference import reference

__all__ = ["NumpyBackend", "reference", "lean_path"]


def lean_path(plan):
    """The lean numpy path of ``plan`` (a :class:`~.lean.LeanWindow` or
    :class:`~.lean.LeanGrouped`), or ``None`` where the reference computes it."""
    try:
        return plan.cache["numpy lean"]
    except KeyError:
        from mmasim.backends.numpy.lean import LeanGrouped, LeanWindow

        lean = LeanWindow(plan)
        if not lean.ok:
            lean = LeanGrouped(plan)
        plan.cache["numpy lean"] = lean if lean.ok else None
        return plan.cache["numpy lean"]


def steps(plan, wa, wb, wc, sa=None, sb=None):
    """D words of materialized (compacted) rows: the lean path where it applies, else the reference."""
    lean = lean_path(plan)
    if lean is not None and wa.shape[0]:
        return lean(wa, wb, wc, sa, sb)
    return reference(plan, wa, wb, wc, sa, sb)


class NumpyBackend:
    """Vectorized int64 numpy: every datapath, the reference of every other backend."""

    name = "numpy"

    def takes_matrices(self, plan) -> bool:
        """Whether :meth:`compute` is better given the matrix form itself (no: it
        gathers rows, so a broadcast batch is as good)."""
        return False

    def compute(self, plan, rows):
        """D words of ``rows`` (:class:`mmasim.backends.plan.Rows`) of ``plan``."""
        lean = lean_path(plan)
        # A / B words in their own dtype where the lean path takes them so (no uint64 copy)
        native = 2 if getattr(lean, "native_words", False) and plan.sparse_rule is None else 0
        ops = [rows.words(i) if i < native else rows.words(i).astype(np.uint64) for i in range(len(rows.operands))]
        wa, wb, wc = ops[:3]
        sa, sb = (ops[3], ops[4]) if plan.scaled else (None, None)
        if plan.sparse_rule is not None:
            wa, wb = select(plan.sparse_rule, plan.datapath.k, ops[-1], wa, wb)
        return steps(plan, wa, wb, wc, sa, sb)
