"""The composed :func:`mmasim.gemm`: promotion, split-K and the epilogue around the
instruction chain (:mod:`mmasim.composition.mainloop`, :mod:`mmasim.composition.epilogue`), on quantized
tensors or plain operands (:mod:`mmasim.composition.operands`), by blocks of rows on every
core as the plain chain runs."""

from __future__ import annotations

import numpy as np

from mmasim.arith import binary32
from mmasim.composition import epilogue as ep
from mmasim.composition import mainloop
from mmasim.execution import threads as _threads
from mmasim.errors import DtypeError, GemmOptionError, ScaleError, ShapeError
from mmasim.composition.operands import is_quantized, operand, promotion_blocks, words
from mmasim.registry.build import get_registry
from mmasim.operands.words import as_array, from_words, is_value_dtype


def requested(A, B, promote_every, split_k, split_reduce, psa, psb, alpha, beta, out_format, saturate) -> list:
    """The options of a call beyond the plain chain, named as its caller wrote them (empty: the
    plain chain)."""
    shown = [f"{name}={value!r}" for name, value in (("promote_every", promote_every), ("split_k", split_k),
                                                     ("out_format", out_format), ("saturate", saturate))
             if value is not None]
    if not (isinstance(split_reduce, str) and split_reduce == "sequential"):
        shown.append(f"split_reduce={split_reduce!r}")
    shown += [name for name, value in (("promotion_scale_a", psa), ("promotion_scale_b", psb), ("alpha", alpha),
                                       ("beta", beta)) if value is not None]
    return shown + [f"a quantized {what}" for what, x in (("A", A), ("B", B)) if is_quantized(x)]


def zero_c(model, A, B):
    """A zero C for the plain chain: words, or values when A is given as values."""
    matrices(np.shape(A), np.shape(B))
    shape = (np.shape(A)[0], np.shape(B)[1])
    dtype = getattr(A, "dtype", None)
    if dtype is None:
        dtype = as_array(A, "A")[0].dtype
    if is_value_dtype(np.dtype(dtype)):
        return np.zeros(shape, dtype=from_words(np.zeros(1, dtype=np.uint64), model.c_format).dtype)
    return np.zeros(shape, dtype=model.encoding.dtype)


def matrices(a_shape, b_shape) -> None:
    """Refuse an A that is not ``(M, K)`` or a B that is not ``(K, N)`` (:class:`ShapeError`)."""
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise ShapeError(f"gemm: A must be (M, K) and B (K, N); got {tuple(a_shape)} and {tuple(b_shape)}")


def _count(value, what: str, default: int | None):
    if value is None:
        return default
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise GemmOptionError(f"gemm: {what} must be a positive integer, not {value!r}")
    return int(value)


def _promotion_scale(x, what: str):
    if x is None:
        return None
    arr = np.asarray(x)
    if arr.dtype != np.float32:
        raise DtypeError(f"gemm: {what} must be float32 (binary32) values, not {arr.dtype}")
    return arr.astype(np.float64)


def _binary32_d(model, options: list) -> None:
    """Every composition accumulates D in binary32: refuse one whose D it cannot hold."""
    fmt = model.d_format
    if fmt.integer or fmt.exp_bits > 8 or fmt.man_bits > 23:
        raise GemmOptionError(
            f"gemm: {', '.join(options)}: promotion, split-K, the epilogue and quantized operands accumulate "
            f"in binary32, which cannot hold {model.instruction}'s {fmt.name} D exactly; its GEMM is the plain "
            "chain (container words, none of these options)")


def gemm(model, A, B, C, *, options, scale_a, scale_b, sparse_metadata, promote_every, split_k, split_reduce,
         promotion_scale_a, promotion_scale_b, alpha, beta, out_format, saturate, backend, progress, threads,
         check, bar, by_rows):
    """:func:`mmasim.gemm` with a composition (see its docstring): ``(D words, their format)``.
    ``options``: the composition options given (:func:`requested`); ``check``, ``bar`` and
    ``by_rows`` are :mod:`mmasim.gemm`'s (passed in, so that this module does not import it)."""
    _binary32_d(model, options)
    threads = _threads.check(threads)
    dp = model.datapath
    formats = get_registry().formats
    qa = operand(model, A, "A", model.a_format)
    qb = operand(model, B, "B", model.b_format)
    if dp.scale:
        scale_a = _instruction_scales(model, qa, scale_a, "scale_a", "A")
        scale_b = _instruction_scales(model, qb, scale_b, "scale_b", "B")
    elif qa.scales is not None or qb.scales is not None:
        raise ScaleError(f"{model.instruction} is not block-scaled, but a quantized operand carries instruction scales")
    if sparse_metadata is not None and dp.sparse:
        sparse_metadata = as_array(sparse_metadata, "sparse_metadata")[0]
    M, K, N, order = check(model, qa.words.shape, qb.words.shape, None if C is None else np.shape(C), "forward",
                           *(None if x is None else np.shape(x) for x in (scale_a, scale_b, sparse_metadata)))
    psa = _promotion_scale(promotion_scale_a, "promotion_scale_a")
    psb = _promotion_scale(promotion_scale_b, "promotion_scale_b")
    if (qa.promotion is not None or qb.promotion is not None) and (psa is not None or psb is not None):
        raise ScaleError("gemm: promotion scales come from the quantized operands or from promotion_scale_a / "
                         "promotion_scale_b, not both")
    if psa is None and psb is None:
        psa, psb = qa.promotion, qb.promotion

    ts = [q.tensor_scale for q in (qa, qb) if q.tensor_scale is not None]
    epi = ep.build(formats, alpha, beta, out_format, saturate)
    if ts and epi is None:
        epi = ep.build(formats, alpha=1.0)
    if epi is not None and ts:
        t = ts[0] if len(ts) == 1 else float(binary32.mul(ts[0], ts[1]))
        epi = ep.Epilogue(alpha=float(binary32.mul(epi.alpha, t)), beta=epi.beta, out=epi.out, saturate=epi.saturate)
    source = start = None
    if epi is not None:
        if C is not None and beta is None:
            raise GemmOptionError("gemm: with an epilogue C is its source, beta * C: pass beta (beta=0 leaves C "
                                  "unread), or C=None")
        if epi.reads_source:
            if C is None:
                raise GemmOptionError(f"gemm: beta = {epi.beta} reads the source C, but C is None")
            source = words(C, epi.out, "C")
        elif C is not None:
            words(C, epi.out, "C")      # unread, but checked as every operand is
    elif C is not None:
        start = words(C, model.c_format, "C").astype(model.encoding.dtype)

    bk, bn = promotion_blocks(psa, psb, M, K, N)
    loop = mainloop.Loop(split_k=_count(split_k, "split_k", 1), reduce=split_reduce,
                         promote_every=_count(promote_every, "promote_every", None),
                         scale_a=psa, scale_b=psb, block_k=bk, block_n=bn, c_starts=epi is None)
    mainloop.check(model, loop, K, N)
    ops = dict(A=qa.words, B=qb.words, scale_a=scale_a, scale_b=scale_b, sparse_metadata=sparse_metadata)

    def block(rows, bar_=None):
        cut = {name: (None if x is None else x[rows]) if name in ("A", "scale_a", "sparse_metadata") else x
               for name, x in ops.items()}
        return mainloop.run(model, loop, cut, None if start is None else start[rows], rows, backend, bar_)

    progress_bar = bar(progress, len(order), f"mmasim.gemm {M}x{N}x{K}")
    try:
        nworkers = _threads.workers(threads, M, K * N)
        if nworkers <= 1:
            acc = block(slice(0, M), progress_bar)
        else:
            acc = by_rows(M, K * N, block, nworkers, progress_bar, len(order), warm=lambda: block(slice(0, 1)))
    finally:
        if progress_bar is not None:
            progress_bar.close()
    if epi is None:
        return binary32.to_words(acc), binary32.F32
    return epi.apply(acc, source), epi.out


def _instruction_scales(model, q, given, name: str, what: str):
    if q.scales is not None:
        if given is not None:
            raise ScaleError(f"gemm: {what} is a quantized tensor that carries its scales; {name} must be None")
        return q.scales
    if given is None:
        return None
    return operand(model, given, name, model.scale_format).words


__all__ = ["gemm", "requested", "zero_c", "matrices"]
