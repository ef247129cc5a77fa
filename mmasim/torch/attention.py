"""Attention through emulated GEMMs: ``torch.nn.functional.scaled_dot_product_attention`` and
``torch.nn.functional.multi_head_attention_forward`` (``nn.MultiheadAttention``).

``scaled_dot_product_attention(q, k, v)`` is two emulated batched GEMMs, one per (batch, head):
``S = Q K^T`` (part ``"QK^T"``), then in float32 by torch ``S * scale`` (the softmax scale applied
to S, as FlashAttention and cuDNN apply it, not to Q and K), the causal or given mask, the
softmax (a row with every key masked gives zeros, as torch's math path does) and dropout; then
``O = P V`` (part ``"PV"``) with P quantized into the PV GEMM's A format by the emulation's
recipe like any operand.  The backward runs through those GEMMs' backward GEMMs and torch's
float32 softmax backward.

With ``Emulation(attention="fa3-fp8")`` (the ``H100-fp8-fa3`` preset) the forward is
FlashAttention-3's FP8 forward (:func:`fa3_fp8`) in one key block; with ``"cudnn-mxfp8"``
(``B200-mxfp8-sdpa``) cuDNN's MXFP8 SDPA as Transformer Engine calls it, with ``"sage3-nvfp4"``
(``RTX5090-nvfp4-sage3``) SageAttention3's FP4 forward (:func:`scaled`,
:mod:`mmasim.torch.scaled_attention`).

CUDA tensors under ``backend="cuda"``: the plain path and every mode (``"fa3-fp8"`` and
``"fa3-fp8-flash"`` bring one amax a matrix to the host) stay on the device (their GEMMs on device
words, the steps between torch ops and :mod:`mmasim.torch.attention_steps`).

``multi_head_attention_forward`` is run as torch wrote it, its own calls (``linear``, ``bmm``,
``baddbmm``, ``scaled_dot_product_attention``) each emulated: :func:`unguarded` gives it without
the ``__torch_function__`` check that would hand the whole call back to the mode.
"""

from __future__ import annotations

import math
import types

import attrs
import numpy as np

from mmasim.errors import EmulationError
from mmasim.torch import attention_steps as steps
from mmasim.torch.contract import contract
from mmasim.torch.function import torch_

#: FlashAttention-3's FP8 exponent offset (hopper/softmax.h, ``Max_offset``; flash_fwd_kernel_sm90.h
#: instantiates ``Softmax<..., Max_offset = Is_FP8 ? 8 : 0>``): P = exp2(x - max + 8), at most 2^8
FA3_MAX_OFFSET = 8


def sdpa_args(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    return query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa


def _softmax(s):
    torch = torch_()
    safe = getattr(torch, "_safe_softmax", None)
    if safe is not None:
        return safe(s, -1)
    p = torch.softmax(s, -1)        # pragma: no cover - torch before _safe_softmax
    return torch.nan_to_num(p, nan=0.0)


def _masked(s, attn_mask, is_causal, length, keys):
    """``s`` with the causal mask (top-left aligned, as torch's) and ``attn_mask`` (boolean:
    -inf where false; float: added) applied."""
    torch = torch_()
    if is_causal:
        keep = torch.ones(length, keys, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            s = s.masked_fill(~attn_mask, float("-inf"))
        else:
            s = s + attn_mask.to(torch.float32)
    return s


def sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, em, record_qk, record_pv):
    """The attention (see the module): float32 ``(..., L, Ev)``."""
    if enable_gqa and q.dim() >= 3 and k.size(-3) != q.size(-3):
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    rank = max(q.dim(), k.dim(), v.dim())
    q, k, v = (t.reshape((1,) * (rank - t.dim()) + tuple(t.shape)) for t in (q, k, v))
    bl = [f"x{i}" for i in range(rank - 2)]
    scale = 1.0 / math.sqrt(q.size(-1)) if scale is None else scale
    if em.attention == "fa3-fp8":
        return fa3_fp8(q, k, v, bl, attn_mask, dropout_p, is_causal, scale, em, record_qk, record_pv)
    if em.attention == "fa3-fp8-flash":
        return fa3_fp8_flash(q, k, v, attn_mask, dropout_p, is_causal, scale, em, record_qk, record_pv)
    if em.attention in SCALED:
        return scaled(q, k, v, attn_mask, dropout_p, is_causal, scale, em, record_qk, record_pv)
    s = contract(q, k, bl + ["l", "e"], bl + ["s", "e"], bl + ["l", "s"], em, record_qk) * scale
    p = _softmax(_masked(s, attn_mask, is_causal, q.size(-2), k.size(-2)))
    if dropout_p > 0:
        p = torch_().dropout(p, dropout_p, True)
    return contract(p, v, bl + ["l", "s"], bl + ["s", "v"], bl + ["l", "v"], em, record_pv)


def _per_matrix_scaled(t, fmt):
    """``t`` times its per-matrix FP8 scale (Transformer Engine's current scaling,
    :func:`mmasim.quantization.quantize.current_scale`, of each matrix's amax) in binary32, and
    the decode scales ``RN(1 / scale)`` (shaped to broadcast over the matrices)."""
    torch = torch_()
    from mmasim.quantization.quantize import current_scale
    t = t.to(torch.float32)
    amax = t.detach().abs().amax(dim=(-2, -1)).cpu().numpy()
    scales = np.array([current_scale(a, fmt) for a in amax.ravel()], np.float32).reshape(amax.shape)
    s = torch.from_numpy(scales[..., None, None]).to(t.device)
    return t * s, (1 / s)


def _fa3_checks(em, dropout_p, attn_mask, mode):
    """The FP8 instruction FA3's forward needs, and what FA3 does not take (``mode``: the attention mode)."""
    torch = torch_()
    fwd = em.model()
    if fwd.a_format.key not in ("e4m3", "e5m2") or fwd.b_format.key not in ("e4m3", "e5m2"):
        raise EmulationError(f"attention={mode!r} needs an FP8 instruction (e4m3 / e5m2 operands), not "
                             f"{em.instruction} ({fwd.a_format.key} x {fwd.b_format.key})")
    if dropout_p:
        raise EmulationError(f"attention={mode!r}: FlashAttention-3 has no dropout; call with dropout_p=0")
    if attn_mask is not None and (mode != "fa3-fp8" or attn_mask.dtype != torch.bool):
        raise EmulationError(f"attention={mode!r}: FlashAttention-3 takes no additive mask (" +
                             ("a boolean mask or is_causal only)" if mode == "fa3-fp8" else "is_causal only)"))
    return fwd


def _forward_only(mode, q, k, v, advice=""):
    """Refuse inputs that need a gradient: the kernel of attention ``mode`` is modelled forward only."""
    torch = torch_()
    if torch.is_grad_enabled() and any(t.requires_grad for t in (q, k, v)):
        raise EmulationError(f"attention={mode!r} models the kernel's forward only: call it under torch.no_grad() "
                             f"(or on tensors that need no gradient){advice}")


def _matrices(q, k, v):
    """The broadcast batch shape of ``q``, ``k``, ``v`` and each as ``(matrices, rows, columns)``."""
    batch = torch_().broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2])
    return batch, [t.expand(*batch, *t.shape[-2:]).reshape(-1, *t.shape[-2:]) for t in (q, k, v)]


def _recorded(record_qk, record_pv, count, qk, pv):
    """The forward's two GEMMs recorded: ``count`` matrices, ``qk`` and ``pv`` their ``(M, N, K)``."""
    for record, shape in ((record_qk, qk), (record_pv, pv)):
        if record is not None and count:
            record("forward", count, *shape)


def fa3_fp8_flash(q, k, v, attn_mask, dropout_p, is_causal, scale, em, record_qk, record_pv):
    """FlashAttention-3's FP8 forward block by block (:mod:`mmasim.torch.flash_attention`), Q, K
    and V scaled per matrix as :func:`fa3_fp8` scales them: float32 ``(..., L, Ev)``, forward only."""
    torch = torch_()
    from mmasim.torch import flash_attention
    from mmasim.torch.function import as_numpy
    from mmasim.torch.matmul import on_device
    fwd = _fa3_checks(em, dropout_p, attn_mask, "fa3-fp8-flash")
    if em.scaling not in ("cast", "tensor"):
        raise EmulationError(f"attention='fa3-fp8-flash' scales Q, K and V per matrix; it needs scaling 'cast' or "
                             f"'tensor', not {em.scaling!r}")
    _forward_only("fa3-fp8-flash", q, k, v, ", or use 'fa3-fp8'")
    batch, matrices = _matrices(q, k, v)
    (qs, dq), (ks, dk), (vs, dv) = (_per_matrix_scaled(t, fwd.a_format) for t in matrices)
    length, keys, width = q.size(-2), k.size(-2), v.size(-1)
    cast = attrs.evolve(em, scaling="cast", saturate=True, attention="softmax")
    device = qs.size(0) and on_device(qs[0], ks[0], cast, None)     # CUDA tensors, backend cuda
    descales = [x.reshape(-1).cpu().tolist() for x in (dq, dk, dv)]    # one scalar a matrix
    out = []
    for i in range(qs.size(0)):
        qi, ki, vi = (t[i] if device else torch.from_numpy(as_numpy(t[i])) for t in (qs, ks, vs))
        o = flash_attention.fa3_flash(qi, ki, vi, *(d[i] for d in descales), scale, is_causal, fwd, device)
        out.append(o)
    _recorded(record_qk, record_pv, qs.size(0), (length, keys, q.size(-1)), (length, width, keys))
    return _stacked(out, q, batch, (length, width), device)


def _stacked(out, q, batch, shape, device):
    """The per-matrix outputs ``out`` (float32 tensors) as one ``(*batch, *shape)`` tensor on
    ``q``'s device (``device``: they lie there already)."""
    torch = torch_()
    if not out:
        return q.new_zeros((*batch, *shape), dtype=torch.float32)
    out = torch.stack(out).reshape(*batch, *shape)
    return out if device else out.to(q.device)


def fa3_fp8(q, k, v, bl, attn_mask, dropout_p, is_causal, scale, em, record_qk, record_pv):
    """FlashAttention-3's FP8 forward (Dao-AILab/flash-attention, ``hopper/``) in one key block,
    as its source fixes it:

    - Q, K and V are e4m3 with one descale per batch and head (``q_descale`` ...,
      ``flash.h``); here each matrix is scaled as Transformer Engine's current scaling does and
      cast (RNE, saturating), its descale ``RN(1 / scale)`` (assumed: FA3 takes the tensors
      already quantized);
    - ``S`` = the QK^T GEMM; ``c = RN(RN(softmax_scale * log2(e)) * RN(q_descale * k_descale))``
      (``softmax_scale_log2 *= q_descale * k_descale``, ``flash_fwd_kernel_sm90.h``);
    - ``P = exp2(S * c - (max * c - 8))`` per row (``scale_apply_exp2`` with ``Max_offset = 8``:
      P up to 2^8), ``S * c - m`` one rounding (FA3's FFMA), a row with every key masked gives 0;
      exp2 is :func:`mmasim.torch.attention_steps.ex2` (assumed: 2^x correctly rounded, ftz; the
      GPU's ``ex2.approx`` may differ in the last bits); the row sum ``l`` of the unrounded P adds
      in pairwise halves (:func:`~mmasim.torch.attention_steps.tree_sum`; assumed: FA3's thread
      and quad reduction order differs);
    - P cast to e4m3 (RNE, saturating) and the PV GEMM with V;
    - ``O = acc * RN(RN(1 / l) * v_descale)`` (``finalize(v_descale)`` then ``rescale_o``).

    Not modelled (assumed one block): the key blocks of ``kBlockN`` and the running max with its
    rescaling of O (``"fa3-fp8-flash"``, :func:`fa3_fp8_flash`, models them, forward only).  No
    dropout (FA3 has none) and no additive mask."""
    torch = torch_()
    fwd = _fa3_checks(em, dropout_p, attn_mask, "fa3-fp8")
    cast = attrs.evolve(em, scaling="cast", saturate=True, attention="softmax")
    (qs, dq), (ks, dk), (vs, dv) = (_per_matrix_scaled(t, fwd.a_format) for t in (q, k, v))
    s = contract(qs, ks, bl + ["l", "e"], bl + ["s", "e"], bl + ["l", "s"], cast, record_qk)
    s = _masked(s, attn_mask, is_causal, q.size(-2), k.size(-2))
    log2 = np.float32(np.float64(np.float32(scale)) * math.log2(math.e))
    c = (torch.tensor(float(log2)) * (dq * dk)).to(torch.float32)
    m = s.detach().amax(dim=-1, keepdim=True)
    shift = torch.where(m == float("-inf"), torch.zeros_like(m), m * c - FA3_MAX_OFFSET)
    p = steps.ex2(steps.ffma(s, c.to(s.dtype), -shift))                 # FFMA, then ex2
    total = steps.tree_sum(p).unsqueeze(-1)
    inv = torch.where((total == 0) | torch.isnan(total), torch.zeros_like(total), 1 / total)
    acc = contract(p, vs, bl + ["l", "s"], bl + ["s", "v"], bl + ["l", "v"], cast, record_pv)
    return acc * (inv * dv)


#: the block-scaled attention modes: (A format keys, scale format) of the instruction each needs
SCALED = {"cudnn-mxfp8": (("e4m3",), "ue8m0"), "sage3-nvfp4": (("e2m1", "e2m1x"), "ue4m3")}


def scaled(q, k, v, attn_mask, dropout_p, is_causal, scale, em, record_qk, record_pv):
    """The forward of a block-scaled attention kernel, one ``(batch, head)`` matrix at a time
    (:mod:`mmasim.torch.scaled_attention`): float32 ``(..., L, Ev)``, without a graph (the
    kernels' backward is not modelled: inputs that need a gradient are refused)."""
    torch = torch_()
    from mmasim.torch import scaled_attention
    from mmasim.torch.function import as_numpy
    from mmasim.torch.matmul import on_device
    mode = em.attention
    model = em.model()
    elements, scale_format = SCALED[mode]
    scales = getattr(model.scale_format, "key", None)
    if model.a_format.key not in elements or model.b_format.key not in elements or scales != scale_format:
        raise EmulationError(f"attention={mode!r} needs a block-scaled instruction with {elements[0]} operands and "
                             f"{scale_format} scales, not {em.instruction}")
    _forward_only(mode, q, k, v)
    if mode == "sage3-nvfp4" and (attn_mask is not None or dropout_p):
        raise EmulationError("attention='sage3-nvfp4': SageAttention3 takes no attn_mask and no dropout "
                             "(is_causal only)")
    batch, (qs, ks, vs) = _matrices(q, k, v)
    length, keys, width = q.size(-2), k.size(-2), v.size(-1)
    masks = None if attn_mask is None else attn_mask.expand(*batch, length, keys).reshape(-1, length, keys)
    # the forward stays on the device where its QK^T GEMM does (CUDA tensors, backend cuda)
    gemm_em = scaled_attention.cudnn_qk(em) if mode == "cudnn-mxfp8" else em
    device = qs.size(0) and on_device(qs[0], ks[0], gemm_em, None)
    out = []
    shape_qk, shape_pv = (length, keys, q.size(-1)), (length, width, keys)
    for i in range(qs.size(0)):
        qi, ki, vi = (t[i].float() if device else as_numpy(t[i]) for t in (qs, ks, vs))
        if mode == "sage3-nvfp4":
            fmt = "f16" if q.dtype == torch.float16 else "bf16"
            qi, ki, vi = (t if device else torch.from_numpy(t) for t in (qi, ki, vi))
            o, shape_qk, shape_pv = scaled_attention.sage3(qi, ki, vi, is_causal, scale, model, fmt, bool(device))
        else:
            mask = None if masks is None else masks[i]

            def softmax(s, mask=mask):      # float32 torch ops, where S lies
                t = s if torch.is_tensor(s) else torch.from_numpy(s)
                p = _softmax(_masked(t * scale, mask, is_causal, length, keys))
                p = torch.dropout(p, dropout_p, True) if dropout_p > 0 else p
                return p if torch.is_tensor(s) else as_numpy(p)
            o, shape_qk, shape_pv = scaled_attention.cudnn_mxfp8(qi, ki, vi, em, softmax)
        out.append(o if device or torch.is_tensor(o) else torch.from_numpy(o))
    _recorded(record_qk, record_pv, qs.size(0), shape_qk, shape_pv)
    return _stacked(out, q, batch, (length, width), device)


_UNGUARDED: dict = {}


def _never(*args, **kwargs):
    return False


def unguarded(func):
    """``func`` (a function of torch.nn.functional written in Python) with its
    ``has_torch_function`` check always false, so that its body runs under the mode and every
    torch call it makes is seen (the original function is untouched)."""
    f = _UNGUARDED.get(func)
    if f is None:
        scope = dict(func.__globals__)
        for name in ("has_torch_function", "has_torch_function_unary", "has_torch_function_variadic"):
            scope[name] = _never
        f = types.FunctionType(func.__code__, scope, func.__name__, func.__defaults__, func.__closure__)
        f.__kwdefaults__ = func.__kwdefaults__
        _UNGUARDED[func] = f
    return f
