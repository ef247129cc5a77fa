"""The row flow of the per-row bodies (:mod:`.rows`), written once for both targets (:mod:`.arrays`).

The D words of rows of a plan: the plan's body and the arrays it reads put on the target
(:func:`prepare`), the operands' words put there, the sparse selection run there
(:func:`select`: the stored elements of each row, and whether its selectors are legal), the
body over the rows (:func:`body_rows`), D and the flags brought back, and the rows a body flags (a
sum beyond int64, an illegal selector) computed by the numpy reference, one level
(:func:`compute`).  :class:`mmasim.backends.cuda.backend.CudaBackend` runs it on
:class:`~.arrays.CudaArrays` (keeping each plan's :class:`Prepared`), :class:`CpuRows` on
:class:`~.arrays.CpuArrays`.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from mmasim.backends.cuda import rows as bodies
from mmasim.backends.cuda.arrays import CpuArrays, Driver, put_all
from mmasim.errors import UnsupportedDatapath

#: the per-row bodies' drivers: ``out[d], flags[d] = body(d, ...)``, and the sparse selection's
ROWS = Driver(bodies.cpu_driver, "cuda_driver")
SELECT = Driver(lambda select_row: bodies.select_cpu, "select_cuda")

#: What a plan needs on a target, made once per plan: its body (``None``: no body takes it,
#: ``reason`` says why), the arrays the body reads besides the operands (on the target), the
#: sparse selection table (on the target; ``None`` for a dense plan).
Prepared = namedtuple("Prepared", "body arrays reason sel")


def prepare(plan, target, specialise: bool = False) -> Prepared:
    """The :class:`Prepared` of ``plan`` on ``target`` (``specialise``: the body compiled with the
    plan's constants, :func:`.rows.choose`)."""
    body, arrays, reason = bodies.choose(plan, specialise)
    if body is None:
        return Prepared(None, None, reason, None)
    sel = None if plan.sparse_rule is None else target.put(bodies.selection(plan.sparse_rule))
    return Prepared(body, put_all(target, arrays), "", sel)


def select(plan, target, prep: Prepared, wa, wb, md):
    """``(da, db, legal)`` on ``target``: the stored elements of each row of the logical rows
    ``wa`` / ``wb`` by the metadata words ``md`` (target arrays, a row each)."""
    n, k = wa.shape[0], plan.datapath.stored_k
    da, db, legal = target.empty((n, k), wa.dtype), target.empty((n, k), wb.dtype), target.empty(n, np.bool_)
    target.drive(SELECT, bodies.select_row, n, wa, wb, md, prep.sel, np.int64(plan.sparse_rule.chunk), da, db, legal)
    return da, db, legal


def body_rows(target, body, n: int, args, arrays, dtype):
    """``(out, flags)`` on ``target``: ``body`` over ``n`` rows of the driver arguments ``args``
    (:func:`.rows.dense_args`'s order) and the body's ``arrays`` (:func:`.rows.choose`), D in ``dtype``."""
    out, flags = target.empty(n, dtype), target.empty(n, np.bool_)
    target.drive(ROWS, body, n, *args, *arrays, out, flags)
    return out, flags


def compute(plan, rows, target, prepared, dtypes=None) -> np.ndarray:
    """D words (numpy) of ``rows`` (:class:`mmasim.backends.plan.Rows`) of ``plan``, a plan that a
    body takes, on ``target``: ``prepared(plan, n)`` gives the :class:`Prepared` of a call of
    ``n`` rows; ``dtypes``: the words' dtype per operand (``None``: the plan's containers)."""
    from mmasim.backends.numba import kernel_args
    from mmasim.backends.numpy import reference_rows

    n = len(rows)
    legal = None
    if plan.sparse_rule is not None:
        ops = [rows.words(i) for i in range(len(rows.operands))]
        host = bodies.dense_args(plan, *ops[:-1], dtypes=dtypes)      # the rows materialized: no row index
        wa, wb = put_all(target, host[:2])
        da, db, legal = select(plan, target, prepared(plan, 0), wa, wb,
                               target.put(np.ascontiguousarray(ops[-1], np.uint32)))
        args = (da, db, *put_all(target, host[2:]))
    else:
        args = put_all(target, kernel_args(plan, rows, dtypes))
    prep = prepared(plan, n)
    out, flags = body_rows(target, prep.body, n, args, prep.arrays, plan.encoding.dtype)
    out, flags = target.get(out), target.get(flags)
    if legal is not None:
        flags |= ~target.get(legal)
    redo = np.flatnonzero(flags)
    if redo.size:
        out[redo] = reference_rows(plan, rows.take(redo))
    return out


def cpu_run(body, args, arrays, dtype):
    """``(out, flags)`` of ``body`` by its CPU driver on the driver arguments ``args``
    (:func:`.rows.dense_args`) and ``arrays`` (:func:`.rows.choose`), D in ``dtype``."""
    return body_rows(CpuArrays, body, len(args[2]), args, arrays, dtype)


class CpuRows:
    """The per-row bodies run by their CPU drivers, as a backend computes rows
    (``compute(plan, rows)``, :func:`mmasim.backends.plan.compute`): :func:`compute` on
    :class:`~.arrays.CpuArrays`.  ``dtype``: the words' dtype for every operand (``None``: the
    plan's containers); ``specialise``: the bodies compiled with each plan's constants
    (:func:`.rows.choose`).  A plan no body takes is an :class:`~mmasim.errors.UnsupportedDatapath`."""

    name = "cuda rows on the cpu"

    def __init__(self, dtype=None, specialise: bool = False):
        self.dtype, self.specialise = dtype, specialise

    def takes_matrices(self, plan) -> bool:
        """No: :meth:`compute` reads rows (a broadcast batch is as good)."""
        return False

    def compute(self, plan, rows):
        prep = prepare(plan, CpuArrays, self.specialise)
        if prep.body is None:
            raise UnsupportedDatapath(f"no per-row body takes this {plan.datapath.accumulator!r} datapath "
                                      f"({prep.reason}); the families with bodies: {', '.join(sorted(bodies.BODIES))}")
        dtypes = None if self.dtype is None else (np.dtype(self.dtype),) * len(plan.word_dtypes)
        return compute(plan, rows, CpuArrays, lambda plan, n: prep, dtypes)
