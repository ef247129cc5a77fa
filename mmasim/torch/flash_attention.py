"""FlashAttention-3's FP8 forward block by block (the attention mode ``"fa3-fp8-flash"`` of
:class:`~mmasim.torch.Emulation`; docs/torch.md, "Attention"), as Dao-AILab/flash-attention's
``hopper/`` (at 0251105a2fb19d2957484b7f023cd8c115286ced) fixes it.  One ``(batch, head)`` matrix
at a time, its steps torch ops where the tensors lie; every QK^T and PV block is one
:func:`mmasim.gemm` of the emulation's instruction (``wgmma`` e4m3 on the ``H100-fp8-fa3``
preset), on the device for CUDA tensors under ``backend="cuda"``.

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
from mmasim.torch.function import torch_
from mmasim.torch import attention_steps as steps

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


def fa3_flash(q, k, v, dq, dk, dv, scale, is_causal, model, on_device=False):
    """FA3's FP8 forward of one matrix (see the module): ``q`` ``(L, D)``, ``k`` ``(S, D)``, ``v``
    ``(S, Dv)`` float32 tensors of the values to cast to the instruction's formats (already
    times their scales), ``dq``, ``dk``, ``dv`` their float32 descales.  ``O`` float32 ``(L, Dv)``.
    Every step is a torch op where the tensors lie or one of
    :mod:`mmasim.torch.attention_steps` (``exp2`` as :func:`~mmasim.torch.attention_steps.ex2`,
    the row sums in :func:`~mmasim.torch.attention_steps.tree_sum`'s order); ``on_device``: CUDA tensors, whose casts and GEMMs run on the device too (else host copies)."""
    torch = torch_()
    L, D = q.shape
    S, Dv = v.shape
    if is_causal and L != S:
        raise EmulationError(f"attention='fa3-fp8-flash': FlashAttention-3 aligns its causal mask to the bottom "
                             f"right; modelled for as many queries as keys (got {L} queries, {S} keys)")
    bm, bn = block_m(D), block_n(D)
    tm, tn, tk = steps.tiles(model)
    Lp, Sp = steps.round_up(L, math.lcm(bm, tm)), steps.round_up(S, math.lcm(bn, tk, tn))
    Dp, Dvp = steps.round_up(D, tk), steps.round_up(Dv, tn)
    fa, fb = model.a_format.key, model.b_format.key
    like = q if on_device else None
    qw = steps.words_of(fa, q, (Lp, Dp), on_device)
    ktw = steps.words_of(fb, k, (Sp, Dp), on_device).T
    vw = steps.words_of(fb, v, (Sp, Dvp), on_device)
    log2 = F32(np.float64(F32(scale)) * math.log2(math.e))
    c = float(F32(log2 * F32(F32(dq) * F32(dk))))            # softmax_scale_log2 *= q_descale * k_descale
    out = []
    for mb in range(Lp // bm):
        rows = slice(mb * bm, (mb + 1) * bm)
        n_max = -(-S // bn)
        if is_causal:
            n_max = min(n_max, -(-((mb + 1) * bm + S - L) // bn))
        o = q.new_zeros((bm, Dvp))
        row_max = row_sum = prev = None
        for n in reversed(range(n_max)):
            keys = slice(n * bn, (n + 1) * bn)
            s = steps.block_gemm(qw[rows], ktw[:, keys], model, None, like)
            col = torch.arange(n * bn, (n + 1) * bn, device=s.device)[None, :]
            masked = col >= S
            if is_causal:
                masked = masked | (col > torch.arange(mb * bm, (mb + 1) * bm, device=s.device)[:, None] + S - L)
            s = s.masked_fill(masked, -math.inf)
            if prev is not None:                             # the previous block's P V, into O
                o = steps.block_gemm(prev[0], prev[1], model, o, like)
            new_max = s.amax(-1) if row_max is None else torch.maximum(row_max, s.amax(-1))
            if row_max is not None:
                cur = torch.where(new_max == -math.inf, 0.0, new_max)
                scores_scale = steps.ex2((row_max - cur) * c)
                scores_scale = torch.where(torch.isnan(scores_scale), 0.0, scores_scale)
                row_sum = row_sum * scores_scale
            row_max = new_max
            max_scaled = torch.where(row_max == -math.inf, 0.0, row_max * c - float(MAX_OFFSET))
            p = steps.ex2(steps.ffma(s, s.new_tensor(c), -max_scaled[:, None]))     # FFMA, then ex2
            row_sum = steps.tree_sum(p) if row_sum is None else row_sum + steps.tree_sum(p)
            prev = (steps.words_of(fa, p, tuple(p.shape), on_device), vw[keys])
            if n != n_max - 1:
                o = o * scores_scale[:, None]
        if prev is not None:
            o = steps.block_gemm(prev[0], prev[1], model, o, like)
            inv = torch.where((row_sum == 0) | torch.isnan(row_sum), 0.0, 1 / row_sum)
            o = o * (inv * float(F32(dv)))[:, None]
        out.append(o)
    return torch.cat(out)[:L, :Dv]
