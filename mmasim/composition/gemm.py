"""GEMM emulation: a full ``(M x K) @ (K x N) + C`` computed as the hardware would,
by chaining one matrix instruction over the K tiles.

The D of one K tile is the C of the next, already rounded into D's format by
the instruction's own output rounding; the tiles of M and N are independent
(each D element depends only on its row of A, its column of B and its C), so
only K is chunked.  ``k_order`` chooses the order of the K tiles: a real
kernel's loop order, or an explicit permutation to study its effect.
"""

from __future__ import annotations

import threading

import numpy as np

from mmasim.composition import compose, operands
from mmasim.composition import dask as dask_gemm
from mmasim.errors import (
    GemmOptionError,
    OperandError,
    ScaleError,
    ShapeError,
    SparseMetadataError,
    UnsupportedDatapath,
)
from mmasim.composition.mainloop import chain
from mmasim.execution.model import Model, matrix_shapes
from mmasim.execution.progress import bar as _tqdm_bar
from mmasim.operands.tensors import accepts_tensors
from mmasim.execution import threads as _threads
from mmasim.execution.threads import check as check_threads
from mmasim.operands.words import as_array

#: with ``progress=None`` a bar appears on a terminal only once the work has run this long (seconds)
PROGRESS_DELAY = 2.0

#: blocks of rows per thread of a gemm on several threads (each block chains every K tile)
GEMM_CHUNKS_PER_THREAD = 2


def _order(k_order, tiles: int):
    if isinstance(k_order, str):
        if k_order == "forward":
            return list(range(tiles))
        if k_order == "reverse":
            return list(range(tiles))[::-1]
        raise OperandError(f"gemm: k_order must be 'forward', 'reverse' or a permutation of the K tiles, not {k_order!r}")
    try:
        order = list(k_order)
    except TypeError:
        raise OperandError(
            f"gemm: k_order must be 'forward', 'reverse' or a permutation of the K-tile indices 0..{tiles - 1}, "
            f"not {k_order!r}"
        ) from None
    for t in order:
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise OperandError(f"gemm: k_order entries are K-tile indices (integers); got {t!r} in {order!r}")
    order = [int(t) for t in order]
    if sorted(order) != list(range(tiles)):
        raise OperandError(f"gemm: k_order {order} is not a permutation of the {tiles} K tiles 0..{tiles - 1}")
    return order


def progress_bar(progress, tiles: int, desc: str, unit: str = " K tile"):
    """A tqdm bar on stderr, or ``None``: ``progress=True`` always, ``False`` never,
    ``None`` only on a terminal and only once the work has run :data:`PROGRESS_DELAY` s."""
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise OperandError(f"gemm: progress must be None (automatic), True or False, not {progress!r}")
    return _tqdm_bar(tiles, desc, unit, None if progress is None else bool(progress), PROGRESS_DELAY)


@accepts_tensors
def gemm(A, B, C=None, arch=None, instruction=None, *, k_order="forward", scale_a=None, scale_b=None,
         sparse_metadata=None, promote_every=None, split_k=None, split_reduce="sequential",
         promotion_scale_a=None, promotion_scale_b=None, alpha=None, beta=None, out_format=None, saturate=None,
         backend=None, progress=None, model: Model | None = None, threads=None, words=None, **qualifiers):
    """``A @ B + C`` as ``instruction`` on ``arch`` computes it, K tile after K tile.

    ``A``: ``(M, K)``, ``B``: ``(K, N)``, ``C``: ``(M, N)``, all container words
    or all values (see :meth:`~mmasim.execution.model.Model.dot`); ``M``, ``N`` must be
    multiples of the instruction's M and N (those the instruction string names,
    else legal ones) and ``K`` a multiple of its K.  Block-scaled instructions
    take ``scale_a`` ``(M, K / block)`` and ``scale_b`` ``(K / block, N)``.
    ``k_order``: ``"forward"``, ``"reverse"`` or a permutation of the K-tile
    indices.  ``model``: an :class:`~mmasim.execution.model.Model` instead of ``arch`` and
    ``instruction``.  ``progress``: one tqdm bar on stderr; ``None`` (default):
    only when stderr is a terminal and the work runs longer than
    :data:`PROGRESS_DELAY` seconds; ``True``: always; ``False``: never.  Returns
    D ``(M, N)``: ``words=None`` (default) as the operands are held: container words for
    words, values of D's format (typed, e.g. float32) for values and for quantized tensors;
    ``words=True``: always words, ``words=False``: always values (an integer D stays words).  ``C`` is
    ``(M, N)`` or ``None`` on every path.  Sparse instructions
    (A is the sparse operand, ``K`` its logical K) take ``sparse_metadata``
    ``(M, (K / k) * words)``: for each K tile ``t`` in turn, the ``words``
    metadata words of each row that one instruction takes (``Model.dot``).
    ``threads``: threads of each instruction step (default: ``MMASIM_THREADS``,
    else every core; :mod:`mmasim.execution.threads`); the words do not depend on it.

    Dask arrays in (any operand): a dask array out, a graph of one task per
    ``(M, N)`` block, each chaining its K tiles as above (:mod:`mmasim.composition.dask`;
    ``threads`` then defaults to 1 per task).

    The GEMM a kernel runs (docs/user-guide.md, "Whole GEMMs"), composable:

    * ``promote_every=P``: K in chunks of P elements (a multiple of the instruction's
      K), each chained from a zero accumulator and added into a binary32 accumulator
      that starts at C (:mod:`mmasim.composition.mainloop`); ``promotion_scale_a`` ``(M, K / bk)``
      and ``promotion_scale_b`` ``(K / bk, N / bn)``: float32 scales applied at
      promotion (``acc = fma(partial, sa * sb, acc)``);
    * ``split_k=S``, ``split_reduce="sequential"`` or ``"tree"``: S slices of K, the
      first from C, reduced in binary32;
    * an epilogue (any of ``alpha``, ``beta``, ``out_format``, ``saturate``):
      ``D = convert(alpha * acc + beta * C)`` as CUTLASS's linear combination computes
      it (:mod:`mmasim.composition.epilogue`): the K loop then starts from zero, C is the source,
      in ``out_format`` (``"f32"`` (default), ``"f16"``, ``"bf16"``, ``"e4m3"``,
      ``"e5m2"``), and ``beta`` must be given with C.

    ``A`` and ``B`` may be quantized tensors (:mod:`mmasim.composition.operands`): their words,
    their instruction or promotion scales, and their tensor scales (which multiply
    ``alpha``: ``alpha * (ts_a * ts_b)``, binary32; they imply the epilogue).  Without an epilogue the result is
    the binary32 accumulator's f32 words (float32 values for values or quantized tensors in);
    with one, words (or values) of ``out_format``.  ``C`` may be ``None``: a zero start,
    or no source.  Every composition accumulates in binary32: a D binary32 cannot hold (integer,
    f64) takes the plain chain only (any option is a :class:`~mmasim.GemmOptionError`).
    """
    model = _model(model, arch, instruction, qualifiers)
    backend = _whole_job_backend(model, backend, A, B)
    words = operands.words_option(words)
    options = compose.requested(A, B, promote_every, split_k, split_reduce, promotion_scale_a, promotion_scale_b,
                                alpha, beta, out_format, saturate)
    if dask_gemm.any_dask(A, B, C, scale_a, scale_b, sparse_metadata):
        if options:
            raise GemmOptionError("gemm on dask arrays chains the instruction only: promotion, split-K, the "
                                  f"epilogue and quantized operands need numpy arrays (got {', '.join(options)})")
        return dask_gemm.gemm(model, A, B, compose.zero_c(model, A, B) if C is None else C, k_order=k_order,
                              scale_a=scale_a, scale_b=scale_b, sparse_metadata=sparse_metadata, backend=backend,
                              progress=progress, threads=threads, words=words, check=check, in_process=gemm)
    as_words = operands.returns_words(model, words, A, B, C, scale_a, scale_b)
    if options:
        if not (isinstance(k_order, str) and k_order == "forward"):
            raise GemmOptionError("gemm: k_order applies to the plain chain; with promotion, split-K or an "
                                  f"epilogue the K tiles run forward (got k_order={k_order!r})")
        d, fmt = compose.gemm(model, A, B, C, options=options, scale_a=scale_a, scale_b=scale_b,
                              sparse_metadata=sparse_metadata, promote_every=promote_every, split_k=split_k,
                              split_reduce=split_reduce, promotion_scale_a=promotion_scale_a,
                              promotion_scale_b=promotion_scale_b, alpha=alpha, beta=beta, out_format=out_format,
                              saturate=saturate, backend=backend, progress=progress, threads=threads,
                              check=check, bar=progress_bar, by_rows=by_rows)
        return operands.result(d, fmt, as_words)
    threads = check_threads(threads)
    A, B = operands.words(A, model.a_format, "A"), operands.words(B, model.b_format, "B")
    C = compose.zero_c(model, A, B) if C is None else operands.words(C, model.c_format, "C")
    if scale_a is not None and scale_b is not None and model.datapath.scale:
        scale_a = operands.words(scale_a, model.scale_format, "scale_a")
        scale_b = operands.words(scale_b, model.scale_format, "scale_b")
    if sparse_metadata is not None and model.datapath.sparse:
        sparse_metadata = as_array(sparse_metadata, "sparse_metadata")[0]
    M, K, N, order = check(model, A.shape, B.shape, C.shape, k_order,
                           *(None if x is None else np.shape(x) for x in (scale_a, scale_b, sparse_metadata)))
    if model.datapath.sparse:       # checked whole, in the order the tiles run: an error names row and K tile
        tiles = np.swapaxes(sparse_metadata.reshape(M, len(order), -1)[:, list(order)], 0, 1)
        model._metadata(tiles, lambda at: f"row {at[1]}, K tile {order[at[0]]} of sparse_metadata")
    bar = progress_bar(progress, len(order), f"mmasim.gemm {M}x{N}x{K}")
    try:
        nworkers = _threads.workers(threads, M, K * N)
        if nworkers <= 1:
            d = chain(model, A, B, C, order, scale_a, scale_b, sparse_metadata, backend, threads, bar)
        else:   # an error is raised as one thread raises it (threads.run computes again on one thread)
            d = _chains(model, A, B, C, order, scale_a, scale_b, sparse_metadata, backend, nworkers, bar, M)
    finally:
        if bar is not None:
            bar.close()
    return operands.result(d, model.d_format, as_words)


def _chains(model, A, B, C, order, scale_a, scale_b, sparse_metadata, backend, nworkers, bar, M):
    """:func:`~mmasim.composition.mainloop.chain` on blocks of rows, on ``nworkers`` threads."""
    def block(rows):
        return chain(model, A[rows], B, C[rows], order, None if scale_a is None else scale_a[rows], scale_b,
                     None if sparse_metadata is None else sparse_metadata[rows], backend, 1, None)

    def warm():     # the first K tile of one row: compiles the kernel and fills the caches once
        chain(model, A[:1], B, C[:1], order[:1], None if scale_a is None else scale_a[:1], scale_b,
              None if sparse_metadata is None else sparse_metadata[:1], backend, 1, None)

    return by_rows(M, A.shape[1] * B.shape[1], block, nworkers, bar, len(order), warm)


def by_rows(M: int, per_row: int, block, nworkers: int, bar, tiles: int, warm=None):
    """``block(rows)`` on blocks of rows, on ``nworkers`` threads: each block does all of its
    work (one hand-off per block, not one per K tile) and writes its rows of the result, so
    that a block computed again (:func:`mmasim.execution.threads.run` redoes a failed attempt on
    one thread, in blocks of another size) only writes the same rows again.
    ``bar`` is advanced by ``tiles`` per row's worth of work, in whole steps, at most ``tiles``."""
    out, lock, rows_done = [None], threading.Lock(), [0]

    def work(s, e):
        d = block(slice(s, e))
        with lock:
            if out[0] is None:
                out[0] = np.empty((M,) + d.shape[1:], dtype=d.dtype)
            out[0][s:e] = d
            if bar is not None:     # whole K tiles' worth of rows done, in whole steps
                before = tiles * rows_done[0] // M
                rows_done[0] = min(M, rows_done[0] + e - s)
                bar.update(tiles * rows_done[0] // M - before)

    _threads.run(M, M, work, nworkers, per_row, warm=warm, per_thread=GEMM_CHUNKS_PER_THREAD)
    return out[0]


def _model(model, arch, instruction, qualifiers) -> Model:
    if model is None:
        if arch is None or instruction is None:
            raise OperandError("gemm needs arch= and instruction= (or model=)")
        return Model.lookup(arch, instruction, **qualifiers)
    if qualifiers or arch is not None or instruction is not None:
        raise OperandError("gemm: pass either model= or arch=/instruction= (with qualifiers), not both")
    return model


def check(model: Model, a_shape, b_shape, c_shape, k_order="forward", scale_a=None, scale_b=None,
          sparse_metadata=None):
    """Check a GEMM's shapes (``c_shape``: C's, ``None`` where C is not given; ``scale_a``,
    ``scale_b``, ``sparse_metadata``: their shapes, or ``None`` where not given) against
    ``model``: every path of :func:`gemm` (the plain chain, each composition, dask) checks its
    operands' shapes here.  Returns ``(M, K, N, K-tile order)``."""
    dp = model.datapath
    name = model.instruction
    if model.c_format.key != model.d_format.key:
        raise UnsupportedDatapath(
            f"gemm chains D into C, but {name} reads C as {model.c_format.name} and writes D as "
            f"{model.d_format.name}; use the variant whose C and D formats agree"
        )
    compose.matrices(a_shape, b_shape)
    if c_shape is None:         # no C: D is (M, N)
        c_shape = (a_shape[0], b_shape[1])
    M, K, N = matrix_shapes(a_shape, b_shape, c_shape, "gemm")
    model.check_tiles(a_shape, b_shape, "gemm", grid=True)
    k = dp.k
    if K == 0 or K % k:
        raise ShapeError(f"gemm: A is {tuple(a_shape)}: K = {K} is not a positive multiple of the instruction's "
                         f"K = {k} ({name})")
    tiles = K // k
    order = _order(k_order, tiles)
    if dp.scale:
        if scale_a is None or scale_b is None:
            raise ScaleError(f"gemm with {name} needs scale_a (M, K/{dp.block}) and scale_b (K/{dp.block}, N)")
        nb = K // dp.block
        if tuple(scale_a) != (M, nb) or tuple(scale_b) != (nb, N):
            raise ScaleError(f"gemm: scale_a must be ({M}, {nb}) and scale_b ({nb}, {N}); "
                             f"got {tuple(scale_a)} and {tuple(scale_b)}")
    elif scale_a is not None or scale_b is not None:
        raise ScaleError(f"{name} is not block-scaled: scale_a/scale_b must be None")
    nwords = model.sparse_rule.words(k) if dp.sparse else 0
    if dp.sparse:
        if sparse_metadata is None:
            raise SparseMetadataError(
                f"gemm with the sparse {name} needs sparse_metadata (M, K/{k} * {nwords}) = ({M}, {tiles * nwords}): "
                f"{nwords} metadata word(s) per row for each K tile")
        if tuple(sparse_metadata) != (M, tiles * nwords):
            raise SparseMetadataError(
                f"gemm: sparse_metadata must be (M, K/{k} * {nwords}) = ({M}, {tiles * nwords}); "
                f"got {tuple(sparse_metadata)}")
    elif sparse_metadata is not None:
        raise SparseMetadataError(f"{name} is dense: sparse_metadata must be None")
    return M, K, N, order


def _whole_job_backend(model: Model, backend, A, B):
    """The backend of every call of one GEMM, chosen once by its ``M * N * K`` products (under
    ``auto``, a small first job of a datapath is numpy's: see :meth:`Model._backend_name`)."""
    try:
        (m, k), n = np.shape(A), np.shape(B)[1]
        products = int(m) * int(k) * int(n)
    except (TypeError, ValueError, IndexError, OverflowError):
        return backend                  # not a matrix, or of unknown size (dask): the checks below decide
    return model._backend_name(backend, products)
