"""Block-scaled attention forwards as two public kernels' sources fix them (the attention modes
``"cudnn-mxfp8"`` and ``"sage3-nvfp4"`` of :class:`~mmasim.torch.Emulation`; docs/torch.md,
"Attention"), one ``(batch, head)`` matrix at a time, called by
:func:`mmasim.torch.attention.scaled`: numpy in, numpy out, but :func:`cudnn_mxfp8` of CUDA
tensors whose GEMMs the device takes, which stay on the device (:func:`_cudnn_pv_on_device`).

``"cudnn-mxfp8"``: cuDNN's MXFP8 SDPA graph as Transformer Engine builds it
(NVIDIA/TransformerEngine ``transformer_engine/common/fused_attn/fused_attn_fp8.cu`` at
d0067d0da6cb01811b8072a7d304f0e00344ce2b; NVIDIA/cudnn-frontend
``include/cudnn_frontend/node/scaled_dot_product_flash_attention.h`` at
3929da2ef4c1dba1bb8acb68727b9134f26f40c0): :func:`cudnn_mxfp8`.

``"sage3-nvfp4"``: SageAttention3's microscaling FP4 forward (thu-ml/SageAttention
``sageattention3_blackwell/`` at d1a57a546c3d395b1ffcbeecc66d81db76f3b4b5): :func:`sage3`.
"""

from __future__ import annotations

import math

import numpy as np

from mmasim.errors import EmulationError

F32 = np.float32

#: SageAttention3's key and query blocks (``launch.h``: ``Flash_fwd_kernel_traits<Headdim, 128, 128, ...>``)
SAGE3_BLOCK = 128
#: SageAttention3's block of one FP4 scale (``kernel_traits.h``: ``SFVectorSize = 16``)
SAGE3_SF_BLOCK = 16
#: ``log2(1 / (448 * 6))`` and ``log2(1 / 6)`` as ``softmax_fused.h`` writes them (float literals)
SAGE3_FP8XFP4_LOG2 = F32(-11.392317422778762)
SAGE3_FP4_LOG2 = F32(-2.584962500721156)
#: the e8m0 word of 2^0: the block scale of P under ``"cudnn-mxfp8"``
E8M0_ONE = 127


def _fmt(key):
    from mmasim.registry.build import get_registry
    return get_registry().formats[key]


def _cast(key, x):
    """RN(x) into format ``key``, saturating (``cvt.rn.satfinite``): its words."""
    from mmasim.quantization import casts
    return casts.cast(_fmt(key), np.asarray(x, np.float64), saturate=True, what=f"attention {key}")


def _values(key, words):
    from mmasim.quantization import casts
    return casts.values(_fmt(key), words)


def _fma(a, b, c):
    """``a * b + c`` rounded once to binary32 (FFMA), through binary64 (the product is exact there)."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(F32)


def _ex2(x):
    """``ex2.approx.ftz.f32``: 2^x in binary32, a subnormal input or result flushed to zero (the
    approximation's last bits are assumed to be those of numpy's binary32 ``exp2``)."""
    tiny = F32(2.0 ** -126)
    x = np.where(np.abs(x) < tiny, F32(0), x).astype(F32)
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.exp2(x).astype(F32)
    return np.where(y < tiny, F32(0), y).astype(F32)


def _bf16(x):
    """``x`` rounded to bfloat16 (RNE), as float32."""
    return _values("bf16", _cast("bf16", x)).astype(F32)


def _round_up(n, q):
    return -(-n // q) * q


def _pad(x, rows, cols, value=0):
    out = np.full((rows, cols), value, dtype=x.dtype)
    out[:x.shape[0], :x.shape[1]] = x
    return out


def _quantized(words, scales, fmt, container, scale_format, block, axis, scheme):
    from mmasim.quantization.quantize import Quantized
    return Quantized(words, scales, fmt, container, scale_format, block, axis, None, scheme, "instruction")


def _gemm(a, b, model, c=None):
    """``a @ b (+ c)`` of the block-scaled instruction ``model`` (quantized operands): float32."""
    from mmasim import gemm
    return np.asarray(gemm(a, b, c, model=model, words=False), F32)


def _tiles(model):
    """(M, N, K) multiples a GEMM of ``model`` takes."""
    ms, ns = model.legal_m, model.legal_n
    m, n = (min(ms) if ms else 1), (min(ns) if ns else 1)
    if model.shape:
        m, n = model.shape
    return m, n, model.datapath.k


# ---------------------------------------------------------------- SageAttention3 (NVFP4)

def sage3_quantize(x, axis):
    """SageAttention3's ``scaled_fp4_quant`` (``quantization/fp4_quantization_4d.cu``) of a matrix,
    blocks of 16 along ``axis``: per block ``sf = e4m3(RN(amax / 6))`` (``__nv_fp8_e4m3``, RN,
    saturating), each element ``e2m1(RN(x * RN(1 / sf)))`` (``cvt.rn.satfinite.e2m1x2.f32``;
    0 where ``sf`` is 0).  No per-tensor scale.  A :class:`~mmasim.quantization.quantize.Quantized`
    (element container ``e2m1x``, ``ue4m3`` scales) for a ``kind::mxf4nvf4`` ``scale_vec::4X``
    instruction."""
    x = np.moveaxis(np.asarray(x, F32), axis, -1)
    blocks = x.reshape(*x.shape[:-1], -1, SAGE3_SF_BLOCK)
    amax = np.abs(blocks).max(-1)
    sf_words = _cast("ue4m3", (amax / F32(6)).astype(F32))
    sf = _values("ue4m3", sf_words).astype(F32)
    with np.errstate(divide="ignore"):
        inv = np.where(sf == 0, F32(0), F32(1) / sf).astype(F32)
    words = _cast("e2m1x", (blocks * inv[..., None]).astype(F32)).reshape(x.shape)
    return _quantized(np.moveaxis(words, -1, axis), np.moveaxis(sf_words, -1, axis), "e2m1", "e2m1x", "ue4m3",
                      SAGE3_SF_BLOCK, axis % 2, "sage3_fp4")


def sage3_p(s, max_scaled, c):
    """SageAttention3's P of one key block (``softmax_fused.h``, ``online_softmax_with_quant``, and
    ``mainloop_tma_ws.h``'s ``quantize``): ``s`` the scores ``(rows, keys)`` (keys a multiple of
    16), ``max_scaled = row_max * c + log2(1 / (448 * 6))`` per row, ``c`` the softmax scale
    times log2(e).

    - ``P~ = ex2(s * c - max_scaled)``: up to 448 * 6 = 2688 (the row maximum's element);
    - per 16 keys, from the block's largest score ``g``: ``sf = ex2((g * c - max_scaled) + log2(1/6))``
      (up to 448: the block maximum's ``P~ / 6``), unrounded;
    - ``P~ / sf`` (binary32 division by the unrounded ``sf``) cast to e2m1
      (``cvt.rn.satfinite.e2m1x2.f32``), ``sf`` cast to e4m3 (``cvt.rn.satfinite.e4m3x2.f32``),
      the instruction's scale.

    Returns ``(P~ (float32, what the row sum adds), the e2m1x words, the ue4m3 scale words)``."""
    s = np.asarray(s, F32)
    rows, keys = s.shape
    neg = (-np.asarray(max_scaled, F32)).reshape(rows, 1)
    p = _ex2(_fma(s, c, neg))
    g = s.reshape(rows, keys // SAGE3_SF_BLOCK, SAGE3_SF_BLOCK).max(-1)
    sf = _ex2((_fma(g, c, neg) + SAGE3_FP4_LOG2).astype(F32))
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = (p.reshape(rows, -1, SAGE3_SF_BLOCK) / sf[..., None]).astype(F32)
    scaled = np.where(np.isnan(scaled), F32(0), scaled)        # an all-masked block: 0 / 0
    return p, _cast("e2m1x", scaled).reshape(rows, keys), _cast("ue4m3", sf)


def sage3(q, k, v, is_causal, scale, model, out_format="bf16"):
    """SageAttention3's forward of one ``(batch, head)`` matrix (``q`` ``(L, D)``, ``k`` ``(S, D)``,
    ``v`` ``(S, Dv)``, float32): ``(O float32 (L, Dv), (QK^T M, N, K), (PV M, N, K))``.

    As ``sageattn3/api.py`` prepares the operands: q, k, v in bf16 (assumed: float32 inputs
    rounded to bf16, the kernel reads bf16 or fp16); ``k -= mean(k)`` over the keys; the tokens
    padded with zeros to a multiple of 128; ``per_block_mean``: each 128 queries less their mean
    ``qm``, and ``delta_s = bf16(qm K^T)`` the start (C) of the QK^T GEMM; Q and K quantized along
    the head dimension, V along the keys (:func:`sage3_quantize`).  Then (``mainloop_tma_ws.h``)
    per key block of 128, from the last to the first: S = the NVFP4 GEMM from ``delta_s``, the
    padded keys masked, the running max, P (:func:`sage3_p`), the row sum rescaled by
    ``ex2((m_prev - m) * c)`` and added P~, O rescaled the same way and the block's PV GEMM (from
    zero) added (FFMA); at the end O times ``1 / l`` (0 where l is 0 or NaN), rounded to
    ``out_format`` (the kernel's output type)."""
    L, D = q.shape
    S, Dv = v.shape
    if is_causal and (L != S or S > SAGE3_BLOCK):
        raise EmulationError(f"attention='sage3-nvfp4': causal attention is modelled for as many queries as keys "
                             f"and one key block of {SAGE3_BLOCK} (got {L} queries, {S} keys): SageAttention3 "
                             "aligns its causal mask to the bottom right and its masking steps are not modelled")
    tm, tn, tk = _tiles(model)
    q, k, v = _bf16(q), _bf16(k), _bf16(v)
    k = _bf16(k - _bf16(k.mean(0, dtype=F32)))
    Lp, Sp = _round_up(L, SAGE3_BLOCK), _round_up(S, SAGE3_BLOCK)
    Dp, Dvp = _round_up(D, math.lcm(tk, SAGE3_SF_BLOCK)), _round_up(Dv, tn)
    q, k, v = _pad(q, Lp, Dp), _pad(k, Sp, Dp), _pad(v, Sp, Dvp)
    groups = q.reshape(Lp // SAGE3_BLOCK, SAGE3_BLOCK, Dp)
    qm32 = (groups.sum(1, dtype=F32) / F32(SAGE3_BLOCK)).astype(F32)
    q = _bf16(groups - qm32[:, None, :]).reshape(Lp, Dp)
    delta = _bf16(_bf16(qm32) @ k.T)                       # (groups, Sp)
    c_start = np.repeat(delta, SAGE3_BLOCK, axis=0).astype(F32)
    s = _gemm(sage3_quantize(q, 1), sage3_quantize(k.T, 0), model, c_start)
    cols = np.arange(Sp)[None, :]
    masked = cols >= S
    if is_causal:
        masked = masked | (cols >= np.arange(Lp)[:, None] + 1 + S - L)
    s = np.where(masked, F32(-np.inf), s).astype(F32)
    vq = sage3_quantize(v, 0)
    c = F32(np.float64(F32(scale)) * math.log2(math.e))      # params.scale_softmax_log2 (api.cu)
    o = row_sum = row_max = None
    for n in reversed(range(Sp // SAGE3_BLOCK)):
        blk = slice(n * SAGE3_BLOCK, (n + 1) * SAGE3_BLOCK)
        sb = s[:, blk]
        bmax = sb.max(-1)
        if row_max is None:
            row_max = bmax
        else:
            prev, row_max = row_max, np.maximum(row_max, bmax)
            rescale = _ex2(((prev - row_max).astype(F32) * c).astype(F32))
            row_sum = (row_sum * rescale).astype(F32)
        max_scaled = _fma(row_max, c, SAGE3_FP8XFP4_LOG2)
        p, words, sf = sage3_p(sb, max_scaled, c)
        row_sum = p.sum(-1, dtype=F32) if o is None else (row_sum + p.sum(-1, dtype=F32)).astype(F32)
        pq = _quantized(words, sf, "e2m1", "e2m1x", "ue4m3", SAGE3_SF_BLOCK, 1, "sage3_fp4")
        vb = _quantized(vq.words[blk], vq.scales[n * SAGE3_BLOCK // SAGE3_SF_BLOCK:(n + 1) * SAGE3_BLOCK
                                                 // SAGE3_SF_BLOCK], "e2m1", "e2m1x", "ue4m3", SAGE3_SF_BLOCK,
                        0, "sage3_fp4")
        part = _gemm(pq, vb, model)
        o = part if o is None else _fma(o, rescale[:, None], part)
    with np.errstate(divide="ignore"):
        inv = np.where((row_sum == 0) | np.isnan(row_sum), F32(0), F32(1) / row_sum).astype(F32)
    o = (o * inv[:, None]).astype(F32)
    o = _values(out_format, _cast(out_format, o)).astype(F32)
    return o[:L, :Dv], (L, S, D), (L, Dv, S)


# ---------------------------------------------------------------- cuDNN MXFP8 (Transformer Engine)

def cudnn_mxfp8_p(p):
    """P as cuDNN's MXFP8 SDPA graph takes it to the PV GEMM: the softmax's output given the
    e4m3 data type of Q (``last_output->set_data_type(Q's)``), no ``Scale_S`` (Transformer Engine
    passes none for MXFP8): each element cast to e4m3 (RN, saturating: assumed), its block scale
    2^0 (e8m0 word 127, assumed: the graph gives P no block scale).  Returns ``(words, scale
    words)`` for blocks of 32 along the keys."""
    p = np.asarray(p, F32)
    words = _cast("e4m3", p)
    return words, np.full((p.shape[0], p.shape[1] // 32), E8M0_ONE, np.uint8)


def cudnn_qk(em):
    """The emulation of cuDNN's MXFP8 QK^T GEMM on ``em``'s instruction: Q and K quantized by
    Transformer Engine's ``MXFP8Quantizer`` (``mxfp8_e4m3``, blocks of 32 along the head
    dimension, e8m0 scales rounded up: RCEIL), a :func:`mmasim.torch.matmul.matmul`."""
    from mmasim.torch.emulation import Emulation
    return Emulation(em.arch, em.instruction, qualifiers=em.qualifiers, scaling="scheme", scheme="mxfp8_e4m3",
                     scale_rounding="rceil")


def cudnn_mxfp8(q, k, v, em, softmax):
    """cuDNN's MXFP8 SDPA forward of one matrix (``q`` ``(L, D)``, ``k`` ``(S, D)``, ``v``
    ``(S, Dv)``: float32 numpy matrices, or CUDA tensors whose QK^T GEMM the device takes, which
    stay there): ``S`` = the MXFP8 GEMM of Q and K (:func:`cudnn_qk`); ``softmax(S)`` the caller's
    float32 function (the scale, the masks, the softmax and dropout, as the graph's nodes do
    them); P by :func:`cudnn_mxfp8_p`; ``O`` = the MXFP8 GEMM of P and V (V quantized along the
    keys as Q and K are).  ``(O, (QK^T M, N, K), (PV M, N, K))``."""
    from mmasim import quantize
    from mmasim.torch.matmul import matmul
    model = em.model()
    L, D = q.shape
    S, Dv = v.shape
    tm, tn, tk = _tiles(model)
    Lp, Sp, Dvp = _round_up(L, tm), _round_up(S, math.lcm(tn, tk, 32)), _round_up(Dv, tn)
    p = softmax(matmul(q, k.T, cudnn_qk(em)))
    shapes = (L, S, D), (L, Dv, S)
    if not isinstance(p, np.ndarray):
        return _cudnn_pv_on_device(p, v, model, (Lp, Sp, Dvp)), *shapes
    words, scales = cudnn_mxfp8_p(_pad(p, Lp, Sp))
    pq = _quantized(words, scales, "e4m3", "e4m3", "ue8m0", 32, 1, "mxfp8_e4m3")
    vq = quantize(_pad(np.asarray(v, F32), Sp, Dvp), "mxfp8_e4m3", axis=0, scale_rounding="rceil")
    return _gemm(pq, vq, model)[:L, :Dv], *shapes


def _cudnn_pv_on_device(p, v, model, padded):
    """The PV GEMM of :func:`cudnn_mxfp8` on the device: P's words cast there with unit block
    scales (:func:`cudnn_mxfp8_p`), V quantized along the keys there (its transpose along its
    rows), both padded with zeros to ``padded`` ``(L', S', Dv')``; O float32 on the device."""
    from mmasim import gemm
    from mmasim.backends.cuda import device
    from mmasim.quantization import compiled
    from mmasim.torch import on_device
    Lp, Sp, Dvp = padded
    pw = compiled.quantize(p, "e4m3", target="cuda", saturate=True, pad=(Lp, Sp)).words
    ps = device.cuda_module().to_device(np.full((Lp, Sp // 32), E8M0_ONE, np.uint8))
    vq = compiled.quantize(v.T, "mxfp8_e4m3", -1, target="cuda", pad=(Dvp, Sp), scale_rounding="rceil")
    d = gemm(pw, vq.words.T, None, model=model, backend="cuda", scale_a=ps, scale_b=vq.scales.T)
    return on_device.values(d, model, p.shape[0], v.shape[1], np.float32(1), p)
