"""``Emulation(attention="fa3-fp8-flash")``: FlashAttention-3's FP8 forward block by block
(docs/torch.md, "Attention"; Dao-AILab/flash-attention ``hopper/``).  The expectation of a case
with two key blocks is composed of single ``mmasim.gemm`` calls (H100 ``wgmma`` e4m3) and the
float32 online-softmax steps written out here, compared word for word."""

from __future__ import annotations

import math

import attrs
import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import mmasim  # noqa: E402
import mmasim.torch as mt  # noqa: E402
from mmasim.torch import flash_attention as fl  # noqa: E402
from mmasim.arith.ex2 import ex2  # noqa: E402
from torch_direct import H100_E4M3, ffma, host, rand, same, tree_sum  # noqa: E402

pytestmark = pytest.mark.filterwarnings("error")

f32 = np.float32


def _flash():
    return attrs.evolve(mt.preset("H100-fp8-fa3"), attention="fa3-fp8-flash")


def test_fa3_fp8_blocks_are_tile_size_fwd_sm90s_for_one_byte_elements():
    # hopper/tile_size.h, element_size 1: {192, 160} up to 64, {192, 128} up to 96, {128, 224} up to 128,
    # {128, 160} up to 192, {128, 128} beyond
    assert [fl.block_n(d) for d in (32, 64, 96, 128, 192, 256)] == [160, 160, 128, 224, 160, 128]
    assert [fl.block_m(d) for d in (32, 64, 96, 128, 192, 256)] == [192, 192, 192, 128, 128, 128]


def _words(x, rows, cols):
    out = np.zeros((rows, cols), f32)
    out[:x.shape[0], :x.shape[1]] = x
    return mmasim.quantize(out, "e4m3", saturate=True).words


def _gemm(a, b, m, c=None):
    cw = None if c is None else np.ascontiguousarray(c, f32).view(np.uint32)
    return np.asarray(mmasim.gemm(a, b, cw, model=m)).view(f32)


def test_fa3_fp8_flash_over_two_key_blocks_is_the_online_softmax_composed_by_hand():
    # head dimension 32: kBlockN = 160, kBlockM = 192; 200 keys: block 1 (keys 160..199) first, then block 0
    q, k, v = rand((1, 1, 8, 32), 110), rand((1, 1, 200, 32), 111), rand((1, 1, 200, 16), 112)
    with torch.no_grad(), mt.emulate(None, _flash()) as trace:
        y = F.scaled_dot_product_attention(q, k, v)
    m = mmasim.Model.lookup(*H100_E4M3)
    qh, kh, vh = (host(t)[0, 0] for t in (q, k, v))
    sq, sk, sv = (f32(f32(448) / f32(np.abs(t).max())) for t in (qh, kh, vh))     # current scaling per matrix
    dq, dk, dv = (f32(f32(1) / s) for s in (sq, sk, sv))
    qw = _words((qh * sq).astype(f32), 192, 32)
    kw = _words((kh * sk).astype(f32), 320, 32)
    vw = _words((vh * sv).astype(f32), 320, 16)
    c = f32(f32(np.float64(f32(1 / math.sqrt(32))) * math.log2(math.e)) * f32(dq * dk))
    rowsum = lambda p: tree_sum(p, 1)                                                # noqa: E731

    def p_of(s, mx):        # P = ex2(RN(S * c - (RN(max * c) - 8))), one rounding as FFMA
        shift = ((mx * c).astype(f32) - f32(8)).astype(f32)
        return ex2(ffma(s, c, -shift[:, None]))

    s1 = _gemm(qw, kw[160:].T, m)
    s1[:, 40:] = -np.inf                                      # keys 200..319 are past the end
    m1 = s1.max(-1)
    p1 = p_of(s1, m1)
    l1 = rowsum(p1)
    s0 = _gemm(qw, kw[:160].T, m)
    o = _gemm(mmasim.quantize(p1, "e4m3", saturate=True).words, vw[160:], m, np.zeros((192, 16), f32))
    m0 = np.maximum(m1, s0.max(-1))
    scores_scale = ex2(((m1 - m0).astype(f32) * c).astype(f32))
    p0 = p_of(s0, m0)
    l0 = ((l1 * scores_scale).astype(f32) + rowsum(p0)).astype(f32)
    o = (o * scores_scale[:, None]).astype(f32)               # rescale_o after the previous block's PV
    o = _gemm(mmasim.quantize(p0, "e4m3", saturate=True).words, vw[:160], m, o)
    want = (o * (f32(1) / l0 * dv).astype(f32)[:, None]).astype(f32)[:8]
    assert same(y, want[None, None])
    assert float(np.abs(scores_scale - 1).max()) > 0          # the max grew: O was rescaled
    assert [(c.part, c.m, c.n, c.k) for c in trace.calls] == [("QK^T", 8, 200, 32), ("PV", 8, 16, 200)]


def test_fa3_fp8_flash_in_one_whole_key_block_is_the_one_block_fa3_fp8():
    # 160 keys = one kBlockN: the same GEMMs (K = 160 in both) and softmax steps as attention="fa3-fp8"
    q, k, v = rand((2, 2, 24, 32), 113), rand((2, 2, 160, 32), 114), rand((2, 2, 160, 8), 115)
    with torch.no_grad():
        with mt.emulate(None, _flash()):
            y = F.scaled_dot_product_attention(q, k, v)
        with mt.emulate(None, "H100-fp8-fa3"):
            want = F.scaled_dot_product_attention(q, k, v)
    assert same(y, want)


def test_fa3_fp8_flash_causal_skips_the_key_blocks_past_the_diagonal():
    # 200 queries and keys: query block 0 (rows 0..191) and 1 (rows 192..199) each run key blocks 1 then 0
    q, k, v = rand((1, 1, 200, 32), 116), rand((1, 1, 200, 32), 117), rand((1, 1, 200, 16), 118)
    with torch.no_grad(), mt.emulate(None, _flash()):
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert bool(torch.isfinite(y).all()) and float((y - ref).norm() / ref.norm()) < 0.2


def test_fa3_fp8_flash_refuses_what_its_source_does_not_do():
    q = rand((1, 1, 4, 32), 119)
    with pytest.raises(mt.EmulationError, match="forward only"):
        with mt.emulate(None, _flash()):
            F.scaled_dot_product_attention(q.clone().requires_grad_(), q, q)
    with torch.no_grad(), mt.emulate(None, _flash()):
        with pytest.raises(mt.EmulationError, match="no additive mask"):
            F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(4, 4, dtype=torch.bool))
        with pytest.raises(mt.EmulationError, match="no dropout"):
            F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
        with pytest.raises(mt.EmulationError, match="as many queries as keys"):
            F.scaled_dot_product_attention(q, rand((1, 1, 6, 32), 120), rand((1, 1, 6, 32), 121), is_causal=True)
    with pytest.raises(mt.EmulationError, match="needs scaling 'cast' or 'tensor'"):
        with torch.no_grad(), mt.emulate(None, attrs.evolve(mt.preset("B200-mxfp8"), attention="fa3-fp8-flash")):
            F.scaled_dot_product_attention(q, q, q)
