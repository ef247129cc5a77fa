"""The CUDA driver of a per-row body (:mod:`.rows`): a thread per row.

Apart from :mod:`.target` so that numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``, where
``numba.cuda`` has no compiler) can run it too.
"""

from __future__ import annotations

from numba import cuda


def cuda_driver(body):
    """The CUDA driver of ``body``: ``out[d], flags[d] = body(d, ...)`` in the thread of row ``d``,
    as a Python function for numba-cuda (:func:`mmasim.backends.cuda.target.compile_ptx`, ``cuda.jit``)."""

    def rows_cuda(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block, out, flags):
        d = cuda.grid(1)
        if d < out.shape[0]:
            out[d], flags[d] = body(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step,
                                    block)

    return rows_cuda


def select_cuda(select_row):
    """The CUDA driver of :func:`mmasim.backends.cuda.rows.select_row`: row ``d``'s stored
    elements in the thread of row ``d``."""

    def select_rows_cuda(wa, wb, md, SEL, chunk, da, db, ok):
        d = cuda.grid(1)
        if d < da.shape[0]:
            ok[d] = select_row(d, wa, wb, md, SEL, chunk, da, db)

    return select_rows_cuda


# kernels with no arithmetic, for operands on the device (:mod:`.device`); ``fn`` unused
def gather_cuda(fn=None):
    """``dst[d, k] = src[rows[d], cols[k]]`` (empty ``rows`` / ``cols``: the identity) in the
    thread of row ``d``: rows of a broadcast batch, K in a plan's order, a contiguous copy."""

    def gather(src, rows, cols, dst):
        d = cuda.grid(1)
        if d < dst.shape[0]:
            r = rows[d] if rows.shape[0] > 0 else d
            for k in range(dst.shape[1]):
                dst[d, k] = src[r, cols[k] if cols.shape[0] > 0 else k]

    return gather


def range_cuda(fn=None):
    """``bad[0] = 1`` where a word of row ``d`` of ``w`` is negative or above ``top``, in the thread of row ``d``."""

    def check(w, top, bad):
        d = cuda.grid(1)
        if d < w.shape[0]:
            for k in range(w.shape[1]):
                x = w[d, k]
                if x < 0 or x > top:
                    bad[0] = 1

    return check


def elementwise_cuda(fn):
    """``fn(d, x, y, z, out)`` in the thread of element ``d`` of the 2-D ``out`` (the binary32
    operations of :mod:`.arith32`)."""

    def elementwise(x, y, z, out):
        d = cuda.grid(1)
        if d < out.shape[0] * out.shape[1]:
            fn(d, x, y, z, out)

    return elementwise


def quantize_cuda(body):
    """The CUDA driver of a quantization body (:mod:`mmasim.backends.cuda.quantize`): work item
    ``b`` in thread ``b``; ``status[0]`` the status of one that is not OK."""

    def quantize_items_cuda(n, x, rb, CS, TAB, P, out, scales, status):
        b = cuda.grid(1)
        if b < n:
            st = body(b, x, rb, CS, TAB, P, out, scales)
            if st != 0:
                status[0] = st

    return quantize_items_cuda


def add_c_cuda(body):
    """The CUDA driver of :func:`mmasim.backends.cuda.c_add.add_c_body`: ``out[d]`` (D + C of
    row ``d``) in the thread of row ``d``."""

    def add_c_rows(dw, cw, ic, FM, TAB, ENC, out):
        d = cuda.grid(1)
        if d < out.shape[0]:
            out[d] = body(d, dw, cw, ic, FM, TAB, ENC)

    return add_c_rows
