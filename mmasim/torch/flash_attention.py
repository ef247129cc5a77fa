"""FlashAttention-3's FP8 forward block by block (the attention mode ``"fa3-fp8-flash"`` of
:class:`~mmasim.torch.Emulation`; docs/torch.md, "Attention"), as Dao-AILab/flash-attention's
``hopper/`` (at 0251105a2fb19d2957484b7f023cd8c115286ced) fixes it.  numpy in, numpy out, one
``(batch, head)`` matrix at a time; every QK^T and PV block is one :func:`mmasim.gemm` of the
emulation's instruction (``wgmma`` e4m3 on the ``H100-fp8-fa3`` preset).

- The blocks (``tile_size.h``, ``tile_size_fwd_sm90`` for 1-byte elements): ``kBlockN`` keys
  (160 for a head dimension up to 64, 128 up to 96, 224 up to 128, 160 up to 192, else 128) and
  ``kBlockM`` queries (192 up to 96, else 128); per query block the key blocks from the last
  (``n_block_max - 1``, ``block.h``: fewer under the causal mask) to the first.
- Per key block (``mainloop_fwd_sm90_tma_gmma_ws.hpp``, ``IntraWGOverlap``, ``fwd_step``):
  ``S = Q K_n^T`` from zero; the previous block's ``P V`` accumulated into O (the PV GEMM's C is
  O); the row maximum and ``scores_scale = exp2((m_old - m) * c)``, the row sum times it
  (``softmax.h``, ``max_get_scale``); ``P = exp2(S * c - (m * c - 8))`` (``online_softmax``,
  ``Max_offset = 8``), the row sum plus P (unrounded); P cast to e4m3; O times
  ``scores_scale`` (``rescale_o`` after the GEMM: ``RescaleOBeforeGemm`` is false for FP8).
- At the end the last ``P V`` into O, and O times ``RN(RN(1 / l) * v_descale)`` (``finalize``).
"""

from __future__ import annotations

import math

import numpy as np

from mmasim.errors import EmulationError
from mmasim.torch.scaled_attention import _cast, _pad, _round_up, _tiles

F32 = np.float32
#: FlashAttention-3's FP8 exponent offset (``Max_offset``)
MAX_OFFSET = F32(8)


def block_n(head_dim: int) -> int:
    """``kBlockN`` of FA3's FP8 forward on sm90 (``tile_size_fwd_sm90``, element size 1, no
    paged KV, V row-major, no softcap)."""
    for bound, n in ((64, 160), (96, 128), (128, 224), (192, 160)):
        if head_dim <= bound:
            return n
    return 128


def block_m(head_dim: int) -> int:
    """``kBlockM`` of FA3's FP8 forward on sm90."""
    return 192 if head_dim <= 96 else 128


def _exp2(x):
    """``exp2f`` in binary32: torch's ``exp2`` (assumed, as for ``"fa3-fp8"``: the GPU's
    ``ex2.approx`` may differ in the last bits)."""
    import torch
    return torch.from_numpy(np.ascontiguousarray(x, F32)).exp2().numpy()


def _row_sum(p):
    """The row sums of ``p`` in binary32: torch's ``sum`` (assumed: FA3 sums per thread, then across a quad)."""
    import torch
    return torch.from_numpy(np.ascontiguousarray(p, F32)).sum(-1).numpy()


def _gemm(a_words, b_words, model, c=None):
    """``a @ b (+ c)`` of ``model`` on words, ``c`` float32 values or ``None`` (zero): float32."""
    from mmasim import gemm
    cw = None if c is None else np.ascontiguousarray(c, F32).view(np.uint32)
    d = np.asarray(gemm(a_words, b_words, cw, model=model))
    return np.ascontiguousarray(d).view(F32) if d.dtype == np.uint32 else d.astype(F32)


def fa3_flash(q, k, v, dq, dk, dv, scale, is_causal, model):
    """FA3's FP8 forward of one matrix (see the module): ``q`` ``(L, D)``, ``k`` ``(S, D)``, ``v``
    ``(S, Dv)`` the float32 values to cast to the instruction's formats (already times their
    scales), ``dq``, ``dk``, ``dv`` their float32 descales.  ``O`` float32 ``(L, Dv)``."""
    L, D = q.shape
    S, Dv = v.shape
    if is_causal and L != S:
        raise EmulationError(f"attention='fa3-fp8-flash': FlashAttention-3 aligns its causal mask to the bottom "
                             f"right; modelled for as many queries as keys (got {L} queries, {S} keys)")
    bm, bn = block_m(D), block_n(D)
    tm, tn, tk = _tiles(model)
    Lp, Sp = _round_up(L, math.lcm(bm, tm)), _round_up(S, math.lcm(bn, tk, tn))
    Dp, Dvp = _round_up(D, tk), _round_up(Dv, tn)
    fa, fb = model.a_format.key, model.b_format.key
    qw = _cast(fa, _pad(np.asarray(q, F32), Lp, Dp))
    ktw = _cast(fb, _pad(np.asarray(k, F32), Sp, Dp).T)
    vw = _cast(fb, _pad(np.asarray(v, F32), Sp, Dvp))
    log2 = F32(np.float64(F32(scale)) * math.log2(math.e))
    c = F32(log2 * F32(F32(dq) * F32(dk)))                   # softmax_scale_log2 *= q_descale * k_descale
    out = np.zeros((Lp, Dvp), F32)
    for mb in range(Lp // bm):
        rows = slice(mb * bm, (mb + 1) * bm)
        n_max = -(-S // bn)
        if is_causal:
            n_max = min(n_max, -(-((mb + 1) * bm + S - L) // bn))
        o = np.zeros((bm, Dvp), F32)
        row_max = row_sum = prev = None
        for n in reversed(range(n_max)):
            keys = slice(n * bn, (n + 1) * bn)
            s = _gemm(qw[rows], ktw[:, keys], model)
            col = np.arange(n * bn, (n + 1) * bn)[None, :]
            masked = col >= S
            if is_causal:
                masked = masked | (col > np.arange(mb * bm, (mb + 1) * bm)[:, None] + S - L)
            s = np.where(masked, F32(-np.inf), s).astype(F32)
            if prev is not None:                             # the previous block's P V, into O
                o = _gemm(prev[0], prev[1], model, o)
            new_max = s.max(-1) if row_max is None else np.maximum(row_max, s.max(-1))
            if row_max is not None:
                cur = np.where(new_max == -np.inf, F32(0), new_max).astype(F32)
                with np.errstate(invalid="ignore"):
                    scores_scale = _exp2(((row_max - cur).astype(F32) * c).astype(F32))
                scores_scale = np.where(np.isnan(scores_scale), F32(0), scores_scale).astype(F32)
                row_sum = (row_sum * scores_scale).astype(F32)
            row_max = new_max
            max_scaled = np.where(row_max == -np.inf, F32(0), ((row_max * c).astype(F32) - MAX_OFFSET)).astype(F32)
            x = (s.astype(np.float64) * np.float64(c) - max_scaled[:, None].astype(np.float64)).astype(F32)
            p = _exp2(x)
            row_sum = _row_sum(p) if row_sum is None else (row_sum + _row_sum(p)).astype(F32)
            prev = (_cast(fa, p), vw[keys])
            if n != n_max - 1:
                o = (o * scores_scale[:, None]).astype(F32)
        if prev is not None:
            o = _gemm(prev[0], prev[1], model, o)
            with np.errstate(divide="ignore"):
                inv = np.where((row_sum == 0) | np.isnan(row_sum), F32(0), F32(1) / row_sum).astype(F32)
            o = (o * (inv * F32(dv)).astype(F32)[:, None]).astype(F32)
        out[rows] = o
    return out[:L, :Dv]
