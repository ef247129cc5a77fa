"""Block-scaled attention forwards as two public kernels' sources fix them (the attention modes
``"cudnn-mxfp8"`` and ``"sage3-nvfp4"`` of :class:`~mmasim.torch.Emulation`; docs/torch.md,
"Attention"), one ``(batch, head)`` matrix at a time, called by
:func:`mmasim.torch.attention.scaled`.  :func:`cudnn_mxfp8` takes numpy matrices, or CUDA
tensors whose GEMMs the device takes, which stay on the device (:func:`_cudnn_pv_on_device`);
:func:`sage3` takes float32 tensors and runs its steps as torch ops where they lie
(:mod:`mmasim.torch.attention_steps`), on the device for CUDA tensors.

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
from mmasim.torch import attention_steps as steps
from mmasim.torch.function import torch_

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


def _quantized(words, scales, fmt, container, scale_format, block, axis, scheme):
    from mmasim.quantization.quantize import Quantized
    return Quantized(words, scales, fmt, container, scale_format, block, axis, None, scheme, "instruction")


def _gemm(a, b, model, c=None):
    """``a @ b (+ c)`` of the block-scaled instruction ``model`` (quantized operands): float32."""
    from mmasim import gemm
    return np.asarray(gemm(a, b, c, model=model, words=False), F32)


# ---------------------------------------------------------------- SageAttention3 (NVFP4)

def sage3_quantize(x, on_device=False):
    """SageAttention3's ``scaled_fp4_quant`` (``quantization/fp4_quantization_4d.cu``) of a float32
    matrix (a torch tensor), blocks of 16 along its last axis: per block ``sf = e4m3(RN(amax / 6))``
    (``__nv_fp8_e4m3``, RN, saturating), each element ``e2m1(RN(x * RN(1 / sf)))``
    (``cvt.rn.satfinite.e2m1x2.f32``; 0 where ``sf`` is 0).  No per-tensor scale.  ``(element
    words (container e2m1x), ue4m3 scale words)`` for a ``kind::mxf4nvf4`` ``scale_vec::4X``
    instruction: numpy arrays, or device arrays ``on_device``."""
    torch = torch_()
    rows, cols = x.shape
    blocks = x.reshape(rows, cols // SAGE3_SF_BLOCK, SAGE3_SF_BLOCK)
    amax = blocks.abs().amax(-1)
    # the scale's words: e4m3's (ue4m3's words are e4m3's for values >= 0)
    sf_words = steps.words_of("e4m3", amax / 6, tuple(amax.shape), on_device)
    sf = steps.values_of("e4m3", sf_words, x if on_device else None)
    inv = torch.where(sf == 0, 0.0, 1 / sf)
    words = steps.words_of("e2m1x", (blocks * inv[..., None]).reshape(rows, cols), (rows, cols), on_device)
    return words, sf_words


def sage3_p(s, max_scaled, c, on_device=False):
    """SageAttention3's P of one key block (``softmax_fused.h``, ``online_softmax_with_quant``, and
    ``mainloop_tma_ws.h``'s ``quantize``): ``s`` the scores ``(rows, keys)`` (a float32 tensor,
    keys a multiple of 16), ``max_scaled = row_max * c + log2(1 / (448 * 6))`` per row, ``c`` the
    softmax scale times log2(e).

    - ``P~ = ex2(s * c - max_scaled)`` (FFMA, then :func:`mmasim.arith.ex2.ex2`): up to
      448 * 6 = 2688 (the row maximum's element);
    - per 16 keys, from the block's largest score ``g``: ``sf = ex2((g * c - max_scaled) + log2(1/6))``
      (up to 448: the block maximum's ``P~ / 6``), unrounded;
    - ``P~ / sf`` (binary32 division by the unrounded ``sf``) cast to e2m1
      (``cvt.rn.satfinite.e2m1x2.f32``), ``sf`` cast to e4m3 (``cvt.rn.satfinite.e4m3x2.f32``),
      the instruction's scale.

    Returns ``(P~ (float32, what the row sum adds), the e2m1x words, the ue4m3 scale words)``
    (numpy arrays, or device arrays ``on_device``)."""
    ex2 = steps.ex2
    torch = torch_()
    rows, keys = s.shape
    neg = -max_scaled.reshape(rows, 1)
    p = ex2(steps.ffma(s, s.new_tensor(c), neg))
    g = s.reshape(rows, keys // SAGE3_SF_BLOCK, SAGE3_SF_BLOCK).amax(-1)
    sf = ex2(steps.ffma(g, s.new_tensor(c), neg) + float(SAGE3_FP4_LOG2))
    scaled = p.reshape(rows, -1, SAGE3_SF_BLOCK) / sf[..., None]
    scaled = torch.where(torch.isnan(scaled), 0.0, scaled).reshape(rows, keys)   # an all-masked block: 0 / 0
    return (p, steps.words_of("e2m1x", scaled, (rows, keys), on_device),
            steps.words_of("e4m3", sf, tuple(sf.shape), on_device))


def _qm_kt(qm, k):
    """``qm K^T`` in float32 (``qm`` ``(groups, D)``, ``k`` ``(S, D)``, bf16 values: each product
    exact), each sum in :func:`~mmasim.torch.attention_steps.tree_sum`'s order; the products of
    as many groups at a time as :data:`~mmasim.backends.plan.CHUNK_ELEMENTS` holds."""
    from mmasim.backends.plan import CHUNK_ELEMENTS
    torch = torch_()
    step = max(1, CHUNK_ELEMENTS // max(1, k.numel()))
    return torch.cat([steps.tree_sum(qm[g:g + step, None, :] * k[None, :, :], -1)
                      for g in range(0, qm.shape[0], step)]) if qm.shape[0] else qm.new_zeros((0, k.shape[0]))


def sage3(q, k, v, is_causal, scale, model, out_format="bf16", on_device=False):
    """SageAttention3's forward of one ``(batch, head)`` matrix (``q`` ``(L, D)``, ``k`` ``(S, D)``,
    ``v`` ``(S, Dv)``, float32 tensors): ``(O float32 (L, Dv), (QK^T M, N, K), (PV M, N, K))``.
    Every step a torch op where the tensors lie; ``on_device``: CUDA tensors, whose casts and
    GEMMs run on the device too (else host copies).

    As ``sageattn3/api.py`` prepares the operands: q, k, v in bf16 (assumed: float32 inputs
    rounded to bf16, the kernel reads bf16 or fp16); ``k -= mean(k)`` over the keys; the tokens
    padded with zeros to a multiple of 128; ``per_block_mean``: each 128 queries less their mean
    ``qm``, and ``delta_s = bf16(qm K^T)`` the start (C) of the QK^T GEMM (the means and
    ``qm K^T`` float32 sums in :func:`~mmasim.torch.attention_steps.tree_sum`'s order, assumed);
    Q and K quantized along the head dimension, V along the keys (:func:`sage3_quantize`).  Then
    (``mainloop_tma_ws.h``) per key block of 128, from the last to the first: S = the NVFP4 GEMM
    from ``delta_s``, the padded keys masked, the running max, P (:func:`sage3_p`), the row sum
    rescaled by ``ex2((m_prev - m) * c)`` and added P~, O rescaled the same way and the block's
    PV GEMM (from zero) added (FFMA); at the end O times ``1 / l`` (0 where l is 0 or NaN),
    rounded to ``out_format`` (bf16 or f16, the kernel's output type; RNE)."""
    ex2 = steps.ex2
    torch = torch_()
    L, D = q.shape
    S, Dv = v.shape
    if is_causal and (L != S or S > SAGE3_BLOCK):
        raise EmulationError(f"attention='sage3-nvfp4': causal attention is modelled for as many queries as keys "
                             f"and one key block of {SAGE3_BLOCK} (got {L} queries, {S} keys): SageAttention3 "
                             "aligns its causal mask to the bottom right and its masking steps are not modelled")
    like = q if on_device else None
    tm, tn, tk = steps.tiles(model)
    bf16 = steps.bf16
    q, k, v = bf16(q), bf16(k), bf16(v)
    k = bf16(k - bf16(steps.tree_sum(k, 0) / S))
    Lp, Sp = steps.round_up(L, SAGE3_BLOCK), steps.round_up(S, SAGE3_BLOCK)
    Dp, Dvp = steps.round_up(D, math.lcm(tk, SAGE3_SF_BLOCK)), steps.round_up(Dv, tn)
    q, k, v = steps.pad(q, Lp, Dp), steps.pad(k, Sp, Dp), steps.pad(v, Sp, Dvp)
    groups = q.reshape(Lp // SAGE3_BLOCK, SAGE3_BLOCK, Dp)
    qm32 = steps.tree_sum(groups, 1) / SAGE3_BLOCK
    q = bf16(groups - qm32[:, None, :]).reshape(Lp, Dp)
    delta = bf16(_qm_kt(bf16(qm32), k))                       # (groups, Sp)
    c_start = delta.repeat_interleave(SAGE3_BLOCK, 0)
    qw, qs = sage3_quantize(q, on_device)
    kw, ks = sage3_quantize(k, on_device)
    s = steps.block_gemm(qw, kw.T, model, c_start, like, qs, ks.T)
    cols = torch.arange(Sp, device=s.device)[None, :]
    masked = cols >= S
    if is_causal:
        masked = masked | (cols >= torch.arange(Lp, device=s.device)[:, None] + 1 + S - L)
    s = s.masked_fill(masked, -math.inf)
    vw, vs = sage3_quantize(v.T.contiguous(), on_device)     # V along the keys: its transpose along its rows
    c = F32(np.float64(F32(scale)) * math.log2(math.e))      # params.scale_softmax_log2 (api.cu)
    o = row_sum = row_max = None
    for n in reversed(range(Sp // SAGE3_BLOCK)):
        blk = slice(n * SAGE3_BLOCK, (n + 1) * SAGE3_BLOCK)
        sb = s[:, blk]
        bmax = sb.amax(-1)
        if row_max is None:
            row_max = bmax
        else:
            prev, row_max = row_max, torch.maximum(row_max, bmax)
            rescale = ex2((prev - row_max) * float(c))
            row_sum = row_sum * rescale
        max_scaled = steps.ffma(row_max, s.new_tensor(c), s.new_tensor(SAGE3_FP8XFP4_LOG2))
        p, pw, ps = sage3_p(sb, max_scaled, c, on_device)
        row_sum = steps.tree_sum(p) if o is None else row_sum + steps.tree_sum(p)
        sfb = slice(n * SAGE3_BLOCK // SAGE3_SF_BLOCK, (n + 1) * SAGE3_BLOCK // SAGE3_SF_BLOCK)
        part = steps.block_gemm(pw, vw[:, blk].T, model, None, like, ps, vs[:, sfb].T)
        o = part if o is None else steps.ffma(o, rescale[:, None], part)
    inv = torch.where((row_sum == 0) | torch.isnan(row_sum), 0.0, 1 / row_sum)
    o = o * inv[:, None]
    o = o.to(torch.float16 if out_format == "f16" else torch.bfloat16).float()
    return o[:L, :Dv], (L, S, D), (L, Dv, S)


# ---------------------------------------------------------------- cuDNN MXFP8 (Transformer Engine)

def cudnn_mxfp8_p(p):
    """P as cuDNN's MXFP8 SDPA graph takes it to the PV GEMM: the softmax's output given the
    e4m3 data type of Q (``last_output->set_data_type(Q's)``), no ``Scale_S`` (Transformer Engine
    passes none for MXFP8): each element cast to e4m3 (RN, saturating: assumed), its block scale
    2^0 (e8m0 word 127, assumed: the graph gives P no block scale).  Returns ``(words, scale
    words)`` for blocks of 32 along the keys."""
    p = np.asarray(p, F32)
    words = steps.cast_words("e4m3", p)
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
    tm, tn, tk = steps.tiles(model)
    Lp, Sp, Dvp = steps.round_up(L, tm), steps.round_up(S, math.lcm(tn, tk, 32)), steps.round_up(Dv, tn)
    p = softmax(matmul(q, k.T, cudnn_qk(em)))
    shapes = (L, S, D), (L, Dv, S)
    if not isinstance(p, np.ndarray):
        return _cudnn_pv_on_device(p, v, model, (Lp, Sp, Dvp)), *shapes
    words, scales = cudnn_mxfp8_p(steps.pad(p, Lp, Sp))
    pq = _quantized(words, scales, "e4m3", "e4m3", "ue8m0", 32, 1, "mxfp8_e4m3")
    vq = quantize(steps.pad(np.asarray(v, F32), Sp, Dvp), "mxfp8_e4m3", axis=0, scale_rounding="rceil")
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
