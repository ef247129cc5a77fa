"""The K loop of a GEMM kernel: the instruction chained over K tiles (the D of one tile is the
C of the next, docs/datapaths.md section 3, "Chaining"; :func:`chain`, :func:`plain_chain`),
split into split-K slices and promotion chunks whose partial sums the CUDA cores add in
binary32 (:func:`accumulate`, :func:`reduce`; the rules and their sources are on those functions,
docs/quantize.md).  Each K tile is ``Model.tile`` on words the GEMM checked once
(:func:`mmasim.composition.operands.check`): no tile checks an operand again.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.arith import binary32
from mmasim.composition import operands
from mmasim.errors import DtypeError, GemmOptionError
from mmasim.execution import threads as _threads

SPLIT_REDUCE = ("sequential", "tree")


@attrs.frozen
class Loop:
    """How the K loop runs (see the module); ``scale_a`` ``(M, K / bk)`` and ``scale_b``
    ``(K / bk, N / bn)`` are promotion scales as binary32 values (float64 arrays; float32 device
    arrays for device operands), or ``None``."""

    split_k: int = 1
    reduce: str = "sequential"
    promote_every: int | None = None
    scale_a: np.ndarray | None = None
    scale_b: np.ndarray | None = None
    block_k: int | None = None
    block_n: int | None = None
    c_starts: bool = True


def _host_tile(model, A, B, C, scale_a, scale_b, sparse_metadata, backend, threads):
    kw = {name: x for name, x in (("scale_a", scale_a), ("scale_b", scale_b), ("sparse_metadata", sparse_metadata))
          if x is not None}
    return model.tile(A, B, C, backend=backend, threads=threads, **kw)


@attrs.frozen
class Arith:
    """The elementwise binary32 operations of the K loop (:func:`accumulate`, :func:`reduce`) and
    its instruction per K tile, where its arrays lie: :data:`HOST` (numpy, float64 arrays that
    hold binary32 values: :mod:`mmasim.arith.binary32`) or the device's
    (:func:`mmasim.composition.on_device.device_arith`, the same operations as CUDA kernels).
    ``zeros(shape, dtype)``; ``values(fmt, words)``: words of a format binary32 holds (the
    instruction's C or D format, an epilogue's output format) as values; ``add`` / ``mul`` /
    ``fma``: FADD / FMUL / FFMA (RNE, operands broadcast, a scalar too); ``widen(scale_b, bn)``:
    B's promotion scales ``(K / bk, N / bn)`` as ``(K / bk, N)``; ``tile(model, A, B, C,
    scale_a, scale_b, sparse_metadata, backend, threads)``: one instruction; ``words(x)``:
    binary32 values as f32 words (NaN ``0x7FFFFFFF``); ``cast(x, fmt, saturate)``: binary32
    values as words of ``fmt`` (the epilogue's conversion,
    :func:`mmasim.composition.epilogue.convert`)."""

    zeros: object
    values: object
    add: object
    mul: object
    fma: object
    widen: object
    tile: object
    words: object
    cast: object


HOST = Arith(zeros=np.zeros, values=binary32.values, add=binary32.add, mul=binary32.mul, fma=binary32.fma,
             widen=lambda sb, bn: np.repeat(sb, bn, axis=1), tile=_host_tile, words=binary32.to_words,
             cast=binary32.cast)


#: blocks of rows per thread of a gemm on several threads (each block chains every K tile)
GEMM_CHUNKS_PER_THREAD = 2


def chain(model, A, B, C, order, scale_a, scale_b, sparse_metadata, backend, threads, bar, tile=_host_tile):
    """D of rows of A and C against B (words checked by the GEMM): the instruction chained
    over the K tiles in ``order`` (each tile ``tile``, :attr:`Arith.tile`: ``Model.tile`` on
    ``threads``); ``bar`` advanced by one per tile."""
    dp = model.datapath
    k = dp.k
    nwords = model.sparse_rule.words(k) if dp.sparse else 0
    per_tile = k // dp.block if dp.scale else 0
    D = C
    for t in order:
        cut = slice(t * k, (t + 1) * k)
        blocks = slice(t * per_tile, (t + 1) * per_tile)
        D = tile(model, A[:, cut], B[cut, :], D, scale_a[:, blocks] if dp.scale else None,
                 scale_b[blocks, :] if dp.scale else None,
                 sparse_metadata[:, t * nwords:(t + 1) * nwords] if dp.sparse else None, backend, threads)
        if bar is not None:
            bar.update(1)
    return D


def plain_chain(model, ops: operands.Checked, C, backend, threads, bar=None):
    """D words ``(M, N)`` of the plain chain of the checked ``ops`` from the C words ``C``: on
    this thread where one is enough, else on blocks of rows on several threads
    (:func:`~mmasim.execution.threads.by_rows`), each block chaining every K tile."""
    A, B, sa, sb, md, order = ops.a.words, ops.b.words, ops.scale_a, ops.scale_b, ops.sparse_metadata, ops.order
    nworkers = _threads.workers(threads, ops.M, ops.K * ops.N)
    if nworkers <= 1:
        return chain(model, A, B, C, order, sa, sb, md, backend, threads, bar)

    def block(rows, order=order):
        return chain(model, A[rows], B, C[rows], order, None if sa is None else sa[rows], sb,
                     None if md is None else md[rows], backend, 1, None)

    # the warm-up, the first K tile of one row, compiles the kernel and fills the caches once;
    # an error is raised as one thread raises it (threads.run_chunks computes again on one thread)
    return _threads.by_rows(ops.M, ops.K * ops.N, block, nworkers, bar, len(order),
                            warm=lambda: block(slice(0, 1), order[:1]), per_thread=GEMM_CHUNKS_PER_THREAD)


def count_option(value, what: str, default: int | None):
    """``split_k`` / ``promote_every`` as an int (``default`` for ``None``); else a :class:`GemmOptionError`."""
    if value is None:
        return default
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or value < 1:
        raise GemmOptionError(f"gemm: {what} must be a positive integer, not {value!r}")
    return int(value)


def promotion_scale(x, what: str):
    """Host promotion scales (float32) as float64 values; ``None`` as it is."""
    if x is None:
        return None
    arr = np.asarray(x)
    if arr.dtype != np.float32:
        raise DtypeError(f"gemm: {what} must be float32 (binary32) values, not {arr.dtype}")
    return arr.astype(np.float64)


def check_composition(model, k_order, options: list) -> None:
    """The checks of a GEMM with ``options`` beyond the plain chain (named by
    :func:`mmasim.composition.gemm.requested`; none: nothing to check), wherever its operands
    lie: its K tiles run forward, and its D is one binary32 holds (:func:`check_binary32_d`)."""
    if not options:
        return
    if not (isinstance(k_order, str) and k_order == "forward"):
        raise GemmOptionError("gemm: k_order applies to the plain chain; with promotion, split-K or an "
                              f"epilogue the K tiles run forward (got k_order={k_order!r})")
    check_binary32_d(model, options)


def check_binary32_d(model, options: list) -> None:
    """Every composition accumulates D in binary32: refuse one whose D it cannot hold."""
    fmt = model.d_format
    if fmt.integer or fmt.exp_bits > 8 or fmt.man_bits > 23:
        raise GemmOptionError(
            f"gemm: {', '.join(options)}: promotion, split-K, the epilogue and quantized operands accumulate "
            f"in binary32, which cannot hold {model.instruction}'s {fmt.name} D exactly; its GEMM is the plain "
            "chain (container words, none of these options)")


def check(model, loop: Loop, K: int, N: int) -> None:
    """Check ``loop`` against the instruction and ``K`` (raises :class:`GemmOptionError`)."""
    k = model.datapath.k
    name = model.instruction
    S, P = loop.split_k, loop.promote_every
    if loop.reduce not in SPLIT_REDUCE:
        raise GemmOptionError(f"gemm: split_reduce must be one of {', '.join(map(repr, SPLIT_REDUCE))}, "
                              f"not {loop.reduce!r}")
    if K % (S * k):
        raise GemmOptionError(f"gemm: split_k = {S} cuts K = {K} into slices that are not multiples of "
                              f"{name}'s K = {k}; K must be a multiple of split_k * {k} = {S * k}")
    if P is not None and (P <= 0 or P % k):
        raise GemmOptionError(f"gemm: promote_every = {P} is not a positive multiple of {name}'s K = {k} "
                              f"(promotion adds whole chains of instructions)")
    if loop.scale_a is not None:
        bk, bn = loop.block_k, loop.block_n
        if P is None:
            raise GemmOptionError("gemm: promotion scales are applied at promotion: give promote_every "
                                  f"(a divisor of the scale block's K = {bk} that is a multiple of {k})")
        if bk % P:
            raise GemmOptionError(f"gemm: promote_every = {P} must divide the promotion scales' K block {bk}: "
                                  "each promoted chunk takes one scale")
        if (K // S) % bk:
            raise GemmOptionError(f"gemm: split_k = {S} slices of K = {K} do not hold whole scale blocks of {bk}")
        if N % bn:
            raise GemmOptionError(f"gemm: N = {N} is not a multiple of the promotion scales' N block {bn}")


def _part(ops: dict, model, t0: int, t1: int) -> dict:
    """The operands of K tiles ``t0 .. t1 - 1``."""
    dp = model.datapath
    k = dp.k
    out = dict(A=ops["A"][:, t0 * k:t1 * k], B=ops["B"][t0 * k:t1 * k, :])
    if dp.scale:
        per = k // dp.block
        out["scale_a"] = ops["scale_a"][:, t0 * per:t1 * per]
        out["scale_b"] = ops["scale_b"][t0 * per:t1 * per, :]
    else:
        out["scale_a"] = out["scale_b"] = None
    if dp.sparse:
        nw = model.sparse_rule.words(k)
        out["sparse_metadata"] = ops["sparse_metadata"][:, t0 * nw:t1 * nw]
    else:
        out["sparse_metadata"] = None
    return out


def _chain_tiles(model, ops, t0, t1, C, backend, bar, arith):
    p = _part(ops, model, t0, t1)
    return chain(model, p["A"], p["B"], C, range(t1 - t0), p["scale_a"], p["scale_b"], p["sparse_metadata"],
                 backend, 1, bar, arith.tile)


def accumulate(model, loop: Loop, ops: dict, C, rows: slice, backend=None, bar=None, arith: Arith = HOST):
    """The binary32 accumulator (float64 values, ``(rows, N)``) of the K loop for ``rows``
    of ``ops`` (``A``, ``B``, ``scale_a``, ``scale_b``, ``sparse_metadata`` words of the
    whole GEMM, already cut to ``rows`` where they have rows); ``C``: words of the
    instruction's C format for those rows (the accumulator's start) or ``None`` (zero).

    **Promotion** (``promote_every = P``, DeepSeek-V3's FP8 recipe, DeepGEMM, CUTLASS's FP8
    "2xAcc"): K in chunks of P elements (the last one shorter when P does not divide K),
    each chunk chained through the instruction from a zero accumulator, and its D (read
    as a binary32 value: f32 D, or an f16 / bf16 D, which binary32 holds exactly) added
    into a binary32 accumulator with one RNE operation:

    * without promotion scales: ``acc = acc + partial`` (one FADD; CUTLASS
      ``include/cutlass/gemm/collective/fp8_accumulation.hpp``, ``promote_core``, line 74);
    * with promotion scales (fine-grained FP8 scaling: a binary32 scale per 1 x ``bk``
      tile of A and per ``bk`` x ``bn`` block of B): ``s = sa[row, kb] * sb[kb, col // bn]``
      (one FMUL), then ``acc = fma(partial, s, acc)`` (one FFMA).  DeepGEMM
      ``deep_gemm/include/deep_gemm/impls/sm90_fp8_gemm_1d2d.cuh`` (deepseek-ai/DeepGEMM at
      54e2261) forms ``scale_0_0 = scale_a_0 * scale_b_0`` (line 333) and then
      ``shifted_accum[i] += scale * accum[i]`` (line 343), which nvcc contracts into one
      FFMA (its default ``--fmad=true``); CUTLASS's blockwise-scaled mainloop
      (``sm90_mma_tma_gmma_ss_warpspecialized_fp8_blockwise_scaling.hpp`` line 933:
      ``tCrSFA(0) = tCrSFA(0) * tCrSFB(0)``) hands the same product to ``scale_core``
      (``fp8_accumulation.hpp`` line 85: ``accum_(i) += accum_temp_(i) * scale``, "FFMA").
      A chunk must lie inside one scale block: ``bk`` a multiple of P.

    The accumulator starts at C (no epilogue) or at +0 (with an epilogue, whose source C
    is, as in CUTLASS).  Its arrays lie where ``arith`` computes (:class:`Arith`: the host, or the
    CUDA device for device operands); the rule is this one loop.
    """
    k = model.datapath.k
    M, N = ops["A"].shape[0], ops["B"].shape[1]
    K = ops["A"].shape[1]
    zero_words = arith.zeros((M, N), model.encoding.dtype)
    scale_b = None if loop.scale_b is None else arith.widen(loop.scale_b, loop.block_n)
    S = loop.split_k
    tiles = K // k // S
    results = []
    for s in range(S):
        t0 = s * tiles
        start = C if (s == 0 and C is not None) else None
        if loop.promote_every is None:
            words = _chain_tiles(model, ops, t0, t0 + tiles, zero_words if start is None else start, backend, bar,
                                 arith)
            results.append(arith.values(model.d_format, words))
            continue
        acc = arith.zeros((M, N), np.float64) if start is None else arith.values(model.c_format, start)
        per = loop.promote_every // k
        for c0 in range(t0, t0 + tiles, per):
            c1 = min(c0 + per, t0 + tiles)
            partial = arith.values(model.d_format, _chain_tiles(model, ops, c0, c1, zero_words, backend, bar,
                                                                       arith))
            if loop.scale_a is None:
                acc = arith.add(acc, partial)
            else:
                kb = c0 * k // loop.block_k
                scale = arith.mul(loop.scale_a[rows, kb:kb + 1], scale_b[kb:kb + 1, :])
                acc = arith.fma(partial, scale, acc)
        results.append(acc)
    return reduce(results, loop.reduce, arith)


def reduce(parts: list, how: str, arith: Arith = HOST):
    """The split-K reduction of the slices' binary32 results.

    **Split-K** (``split_k = S``): K in S equal slices (multiples of the instruction's K),
    each computed as in :func:`accumulate` (chained, or promoted), the first from C (no epilogue) and the
    others from zero; their binary32 results reduced with one RNE FADD per step:

    * ``"sequential"``: ``acc = +0; acc = acc + slice_s`` for s = 0 .. S-1, CUTLASS's
      parallel split-K reduction (``include/cutlass/reduction/kernel/reduce_split_k.h``:
      ``accumulator.clear()`` line 171, ``accumulator = reduction_op(accumulator,
      workspace_frag[i])`` line 207, then the epilogue ``output_op(accumulator, source)``
      line 231);
    * ``"tree"``: pairwise, ``(s0 + s1) + (s2 + s3)``, ...; an odd last slice is carried
      to the next level unchanged.
    """
    if len(parts) == 1:
        return parts[0]
    if how == "sequential":
        acc = arith.zeros(tuple(parts[0].shape), np.float64)
        for p in parts:
            acc = arith.add(acc, p)
        return acc
    while len(parts) > 1:
        nxt = [arith.add(parts[i], parts[i + 1]) for i in range(0, len(parts) - 1, 2)]
        parts = nxt + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


__all__ = ["Loop", "Arith", "HOST", "count_option", "promotion_scale", "check_binary32_d", "chain", "plain_chain",
           "check", "check_composition", "accumulate", "reduce", "SPLIT_REDUCE", "GEMM_CHUNKS_PER_THREAD"]
