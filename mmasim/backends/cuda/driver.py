"""The CUDA driver of a per-row body (:mod:`.rows`): a thread per row.

Apart from :mod:`.target` so that numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``, where
``numba.cuda`` has no compiler) can run it too.
"""

from __future__ import annotations

from numba import cuda


def cuda_driver(body):
    """The CUDA driver of ``body``: ``out[d] = body(d, ...)`` in the thread of row ``d``, as a
    Python function for numba-cuda (:func:`mmasim.backends.cuda.target.compile_ptx`, ``cuda.jit``)."""

    def rows_cuda(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block, out):
        d = cuda.grid(1)
        if d < out.shape[0]:
            out[d] = body(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block)

    return rows_cuda
