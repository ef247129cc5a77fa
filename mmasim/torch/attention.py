"""Attention through emulated GEMMs: ``torch.nn.functional.scaled_dot_product_attention`` and
``torch.nn.functional.multi_head_attention_forward`` (``nn.MultiheadAttention``).

``scaled_dot_product_attention(q, k, v)`` is two emulated batched GEMMs, one per (batch, head):
``S = Q K^T`` (part ``"QK^T"``), then in float32 by torch ``S * scale`` (the softmax scale applied
to S, as FlashAttention and cuDNN apply it, not to Q and K), the causal or given mask, the
softmax (a row with every key masked gives zeros, as torch's math path does) and dropout; then
``O = P V`` (part ``"PV"``) with P quantized into the PV GEMM's A format by the emulation's
recipe like any operand.  The backward runs through those GEMMs' backward GEMMs and torch's
float32 softmax backward.

``multi_head_attention_forward`` is run as torch wrote it, its own calls (``linear``, ``bmm``,
``baddbmm``, ``scaled_dot_product_attention``) each emulated: :func:`unguarded` gives it without
the ``__torch_function__`` check that would hand the whole call back to the mode.
"""

from __future__ import annotations

import math
import types

from mmasim.torch.contract import contract
from mmasim.torch.function import torch_


def sdpa_args(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    return query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa


def _softmax(s):
    torch = torch_()
    safe = getattr(torch, "_safe_softmax", None)
    if safe is not None:
        return safe(s, -1)
    p = torch.softmax(s, -1)        # pragma: no cover - torch before _safe_softmax
    return torch.nan_to_num(p, nan=0.0)


def sdpa(q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa, em, record_qk, record_pv):
    """The attention (see the module): float32 ``(..., L, Ev)``."""
    torch = torch_()
    if enable_gqa and q.dim() >= 3 and k.size(-3) != q.size(-3):
        k = k.repeat_interleave(q.size(-3) // k.size(-3), -3)
        v = v.repeat_interleave(q.size(-3) // v.size(-3), -3)
    rank = max(q.dim(), k.dim(), v.dim())
    q, k, v = (t.reshape((1,) * (rank - t.dim()) + tuple(t.shape)) for t in (q, k, v))
    bl = [f"x{i}" for i in range(rank - 2)]
    s = contract(q, k, bl + ["l", "e"], bl + ["s", "e"], bl + ["l", "s"], em, record_qk)
    s = s * (1.0 / math.sqrt(q.size(-1)) if scale is None else scale)
    length, keys = q.size(-2), k.size(-2)
    if is_causal:
        keep = torch.ones(length, keys, dtype=torch.bool, device=s.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            s = s.masked_fill(~attn_mask, float("-inf"))
        else:
            s = s + attn_mask.to(torch.float32)
    p = _softmax(s)
    if dropout_p > 0:
        p = torch.dropout(p, dropout_p, True)
    return contract(p, v, bl + ["l", "s"], bl + ["s", "v"], bl + ["l", "v"], em, record_pv)


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
