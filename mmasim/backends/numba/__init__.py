"""The numba backend: compiled kernels per accumulator family (:mod:`.kernels`).

Importing this package does not import numba; the built-in kernels are
registered through the ``mmasim_kernels`` hook (this module is a built-in
plugin) and compiled on first use.  Rows a kernel leaves (flags) are computed
by the numpy backend, so their words (or errors) are the reference's.
"""

from __future__ import annotations

import numpy as np

from ...plugins import hookimpl
from .. import kernel_for, numba_available

_NO_INDEX = np.zeros(0, dtype=np.int64)
_NO_SCALE = np.zeros((1, 1), dtype=np.uint8)


@hookimpl
def mmasim_kernels():
    if not numba_available():
        return {}
    from .kernels import BUILDERS

    return BUILDERS


def kernel_args(plan, rows) -> tuple:
    """The arrays a kernel reads for ``rows`` (dense): ``(wa, wb, wc, sa, sb, ia, ib,
    ic, isa, isb, ncols)``: contiguous container words of A, B, C and the scales, a
    row index per operand (empty: row d is array row d), and ``ncols`` (> 0: the
    matrix form, row d is A row d // ncols against B row d % ncols)."""
    dtypes = plan.word_dtypes
    words, index = [], []
    for i, dt in enumerate(dtypes):
        if rows.ncols:
            arr, idx = np.ascontiguousarray(rows.operands[i].flat, dtype=dt), None
        else:
            arr, idx = rows.indexed(i, dt)
        words.append(arr)
        index.append(_NO_INDEX if idx is None else idx)
    if not plan.scaled:
        words += [_NO_SCALE, _NO_SCALE]
        index += [_NO_INDEX, _NO_INDEX]
    return (*words, *index, rows.ncols)


class NumbaBackend:
    """Compiled kernels; datapaths without one are computed by numpy."""

    name = "numba"

    def takes_matrices(self, plan) -> bool:
        """Whether :meth:`compute` reads the matrix form (``Rows.outer``) in place."""
        return plan.sparse_rule is None and kernel_for(plan) is not None

    def compute(self, plan, rows):
        """D words of ``rows`` (:class:`mmasim.plan.Rows`) of ``plan``."""
        from .. import get

        kern = kernel_for(plan)
        if kern is None:
            return get("numpy").compute(plan, rows)
        rows = rows.dense(plan)
        words, flags = kern(kernel_args(plan, rows), len(rows))
        if flags is not None:   # rows the kernel leaves to the reference
            idx = np.flatnonzero(flags)
            words[idx] = get("numpy").compute(plan, rows.take(idx))
        return words
