"""The numpy backend: sparse selection, then the lean path for the common window
datapaths where it applies (:mod:`.lean`), else the reference (:mod:`.reference`).

A built-in plugin of the ``mmasim_backends`` hook (``numpy``).  Its lean path of a plan is
its own preparation, kept here by plan (:func:`lean_path`), never on the plan.
:func:`reference_rows` is the one rung below every compiled kernel: the rows a kernel flags,
and the datapaths no kernel takes, go to it directly.
"""

from __future__ import annotations

import numpy as np

from mmasim.arith.sparse import select
from mmasim.backends.plan import PlanMap
from mmasim.backends.numpy.reference import reference
from mmasim.registry.hookspecs import hookimpl

__all__ = ["NumpyBackend", "reference", "reference_rows", "lean_path"]

#: plan -> its lean path (or None): this backend's preparation, gone with the plan
_LEAN = PlanMap()
_UNBUILT = object()


def lean_path(plan):
    """The lean numpy path of ``plan`` (a :class:`~.lean.LeanWindow` or
    :class:`~.lean.LeanGrouped`), or ``None`` where the reference computes it."""
    lean = _LEAN.get(plan, _UNBUILT)
    if lean is _UNBUILT:
        from mmasim.backends.numpy.lean import LeanGrouped, LeanWindow

        lean = LeanWindow(plan)
        if not lean.ok:
            lean = LeanGrouped(plan)
        lean = _LEAN[plan] = lean if lean.ok else None
    return lean


def _materialized(plan, rows, native: int = 0) -> tuple:
    """``(wa, wb, wc, sa, sb)`` of ``rows``: uint64 words (the first ``native`` operands in their
    own dtype), the sparse selection applied (A and B at the stored K), scales ``None`` unscaled."""
    ops = [rows.words(i) if i < native else rows.words(i).astype(np.uint64) for i in range(len(rows.operands))]
    wa, wb, wc = ops[:3]
    sa, sb = (ops[3], ops[4]) if plan.scaled else (None, None)
    if plan.sparse_rule is not None:
        wa, wb = select(plan.sparse_rule, plan.datapath.k, ops[-1], wa, wb)
    return wa, wb, wc, sa, sb


def reference_rows(plan, rows):
    """D words of ``rows`` (:class:`mmasim.backends.plan.Rows`, sparse ones selected here) by
    the reference alone (:func:`~.reference.reference`)."""
    return reference(plan, *_materialized(plan, rows))


class NumpyBackend:
    """Vectorized int64 numpy: every datapath, the reference of every other backend."""

    name = "numpy"

    def takes_matrices(self, plan) -> bool:
        """Whether :meth:`compute` is better given the matrix form itself (no: it
        gathers rows, so a broadcast batch is as good)."""
        return False

    def compute(self, plan, rows):
        """D words of ``rows`` (:class:`mmasim.backends.plan.Rows`) of ``plan``: its lean path
        where one applies, else the reference."""
        lean = lean_path(plan)
        # A / B words in their own dtype where the lean path takes them so (no uint64 copy)
        native = 2 if getattr(lean, "native_words", False) and plan.sparse_rule is None else 0
        words = _materialized(plan, rows, native)
        if lean is not None and words[0].shape[0]:
            return lean(*words)
        return reference(plan, *words)


@hookimpl
def mmasim_backends():
    return {"numpy": NumpyBackend}
