"""GEMM emulation: a full ``(M x K) @ (K x N) + C`` computed as the hardware would,
by chaining one matrix instruction over the K tiles, and the GEMM a kernel runs around it:
promotion, split-K and the binary32 epilogue (:mod:`mmasim.composition.mainloop`,
:mod:`mmasim.composition.epilogue`), on quantized tensors or plain operands.

The D of one K tile is the C of the next, already rounded into D's format by
the instruction's own output rounding; the tiles of M and N are independent
(each D element depends only on its row of A, its column of B and its C), so
only K is chunked.  ``k_order`` chooses the order of the K tiles: a real
kernel's loop order, or an explicit permutation to study its effect.

One path: the model and the backend are chosen once, the operands checked once
(:func:`mmasim.composition.operands.check`), then each K tile is ``Model.tile`` on
those words, by blocks of rows on every core (:func:`mmasim.execution.threads.by_rows`).
"""

from __future__ import annotations

import contextlib

import numpy as np

from mmasim.composition.dask import any_dask, dask_gemm
from mmasim.composition import epilogue as ep
from mmasim.composition import mainloop, operands
from mmasim.errors import GemmOptionError, OperandError, ScaleError
from mmasim.execution import threads as _threads
from mmasim.execution.model import Model
from mmasim.execution.progress import bar as _tqdm_bar
from mmasim.operands.tensors import accepts_tensors
from mmasim.backends.cuda.device import on_device
from mmasim.composition.on_device import gemm_of_device_operands

#: with ``progress=None`` a bar appears on a terminal only once the work has run this long (seconds)
PROGRESS_DELAY = 2.0


def progress_bar(progress, tiles: int, desc: str, unit: str = " K tile"):
    """A tqdm bar on stderr, or ``None``: ``progress=True`` always, ``False`` never,
    ``None`` only on a terminal and only once the work has run :data:`PROGRESS_DELAY` s."""
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise OperandError(f"gemm: progress must be None (automatic), True or False, not {progress!r}")
    return _tqdm_bar(tiles, desc, unit, None if progress is None else bool(progress), PROGRESS_DELAY)


@on_device("gemm", gemm_of_device_operands)     # CUDA arrays under backend cuda
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

    Operands on a CUDA device under ``backend="cuda"`` (``__cuda_array_interface__``, CUDA
    torch tensors; container words): the plain chain, promotion, split-K and the epilogue run on
    the device, no operand is copied to the host and D stays there: words, or with
    ``words=False`` a view of them as values where the device array has their dtype
    (:func:`mmasim.composition.on_device.gemm_of_device_operands`).

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
    model = operands.gemm_model(model, arch, instruction, qualifiers)
    backend = _whole_job_backend(model, backend, A, B)
    words = operands.words_option(words)
    options = operands.requested_options(A, B, promote_every, split_k, split_reduce, promotion_scale_a, promotion_scale_b,
                        alpha, beta, out_format, saturate)
    if any_dask(A, B, C, scale_a, scale_b, sparse_metadata):
        if options:
            raise GemmOptionError("gemm on dask arrays chains the instruction only: promotion, split-K, the "
                                  f"epilogue and quantized operands need numpy arrays (got {', '.join(options)})")
        return dask_gemm(model, A, B, operands.zero_c(model, A, B) if C is None else C, k_order=k_order,
                              scale_a=scale_a, scale_b=scale_b, sparse_metadata=sparse_metadata, backend=backend,
                              progress=progress, threads=threads, words=words)
    mainloop.check_composition(model, k_order, options)
    threads = _threads.check(threads)
    ops = operands.check(model, A, B, C, scale_a, scale_b, sparse_metadata, k_order)
    as_words = ops.returns_words(words)
    if options:
        d, fmt = _composed(model, ops, C, promote_every=promote_every, split_k=split_k, split_reduce=split_reduce,
                           promotion_scale_a=promotion_scale_a, promotion_scale_b=promotion_scale_b, alpha=alpha,
                           beta=beta, out_format=out_format, saturate=saturate, backend=backend, threads=threads,
                           progress=progress)
        return operands.result(d, fmt, as_words)
    C = operands.zero_c(model, A, B) if C is None else operands.words(C, model.c_format, "C", ops.c_read)
    with _progress(progress, ops) as bar:
        d = mainloop.plain_chain(model, ops, C, backend, threads, bar)
    return operands.result(d, model.d_format, as_words)


@contextlib.contextmanager
def _progress(progress, ops):
    """The GEMM's :func:`progress_bar` (one step per K tile), closed however the work ends."""
    bar = progress_bar(progress, len(ops.order), f"mmasim.gemm {ops.M}x{ops.N}x{ops.K}")
    try:
        yield bar
    finally:
        if bar is not None:
            bar.close()


def _composed(model, ops, C, *, promote_every, split_k, split_reduce, promotion_scale_a, promotion_scale_b,
              alpha, beta, out_format, saturate, backend, threads, progress):
    """The composed GEMM of the checked ``ops`` (see :func:`gemm`): ``(D words, their format)``."""
    M, K, N = ops.M, ops.K, ops.N
    qa, qb = ops.a, ops.b
    psa = mainloop.promotion_scale(promotion_scale_a, "promotion_scale_a")
    psb = mainloop.promotion_scale(promotion_scale_b, "promotion_scale_b")
    if (qa.promotion is not None or qb.promotion is not None) and (psa is not None or psb is not None):
        raise ScaleError("gemm: promotion scales come from the quantized operands or from promotion_scale_a / "
                         "promotion_scale_b, not both")
    if psa is None and psb is None:
        psa, psb = qa.promotion, qb.promotion

    epi = ep.of_gemm(alpha, beta, out_format, saturate, C,
                     [q.tensor_scale for q in (qa, qb) if q.tensor_scale is not None])
    source = start = None
    if epi is not None:
        if C is not None:       # checked whether read or not, as every operand is
            source = operands.words(C, epi.out, "C", ops.c_read)
    elif C is not None:
        start = operands.words(C, model.c_format, "C", ops.c_read).astype(model.encoding.dtype)

    bk, bn = operands.promotion_blocks(psa, psb, M, K, N)
    loop = mainloop.Loop(split_k=mainloop.count_option(split_k, "split_k", 1), reduce=split_reduce,
                         promote_every=mainloop.count_option(promote_every, "promote_every", None),
                         scale_a=psa, scale_b=psb, block_k=bk, block_n=bn, c_starts=epi is None)
    mainloop.check(model, loop, K, N)
    whole = dict(A=qa.words, B=qb.words, scale_a=ops.scale_a, scale_b=ops.scale_b,
                 sparse_metadata=ops.sparse_metadata)

    def block(rows, bar_=None):
        cut = {name: (None if x is None else x[rows]) if name in ("A", "scale_a", "sparse_metadata") else x
               for name, x in whole.items()}
        return mainloop.accumulate(model, loop, cut, None if start is None else start[rows], rows, backend, bar_)

    nworkers = _threads.workers(threads, M, K * N)
    with _progress(progress, ops) as bar:
        if nworkers <= 1:
            acc = block(slice(0, M), bar)
        else:
            acc = _threads.by_rows(M, K * N, block, nworkers, bar, len(ops.order), warm=lambda: block(slice(0, 1)),
                                   per_thread=mainloop.GEMM_CHUNKS_PER_THREAD)
    return ep.output(epi, acc, source, mainloop.HOST)


def _whole_job_backend(model: Model, backend, A, B):
    """The backend of every call of one GEMM, chosen once by its ``M * N * K`` products (under
    ``auto``, a small first job of a datapath is numpy's: see :meth:`Model.backend_name`)."""
    try:
        (m, k), n = np.shape(A), np.shape(B)[1]
        products = int(m) * int(k) * int(n)
    except (TypeError, ValueError, IndexError, OverflowError):
        return backend                  # not a matrix, or of unknown size (dask): the checks below decide
    return model.backend_name(backend, products)
