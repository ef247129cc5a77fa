"""The block-scaled attention presets (docs/torch.md, "Attention"): ``B200-mxfp8-sdpa`` (cuDNN's
MXFP8 SDPA as Transformer Engine calls it) and ``RTX5090-nvfp4-sage3`` (SageAttention3's FP4
forward).  The quantization of P (and of Q, K, V) is worked by hand from each source's rule;
whole attentions are compositions of those steps, single ``mmasim.gemm`` calls and the float32
softmax steps written out here, compared word for word."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import mmasim  # noqa: E402
from mmasim.arith.ex2 import ex2  # noqa: E402
import mmasim.torch as mt  # noqa: E402
from mmasim.torch import scaled_attention as sa  # noqa: E402
from torch_direct import ffma, host, rand, same, tree_sum  # noqa: E402

pytestmark = pytest.mark.filterwarnings("error")

f32 = np.float32
NVFP4_RTX = ("sm_120a", "mma.sync.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.m16n8k64.f32.e2m1.e2m1.ue4m3")
MXFP8_B200 = ("B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.f32.e4m3.e4m3.ue8m0")


# ------------------------------------------------------------------ SageAttention3: P by hand
def test_sage3_p_is_scaled_to_448_times_6_and_divided_by_its_unrounded_block_scale():
    # softmax_fused.h with c = 1 and a row maximum of 0: max_scaled = 0 * 1 + log2(1 / 2688);
    # P~ = 2^(s - max_scaled) = 2688 * 2^s; per 16 keys sf = 2^(g - max_scaled + log2(1 / 6)) = 448 * 2^g
    # (g: the block's largest score); the elements P~ / sf (sf unrounded) to e2m1, sf to e4m3.
    s = np.full((1, 32), -5.0, f32)
    s[0, :8] = [0, -0.5, -1, -1.5, -2, -2.5, -4, -np.inf]
    # block 0 (g = 0, sf = 448): 6, 4.24, 3, 2.12, 1.5, 1.06, 0.375, 0 and 0.1875 (s = -5)
    # block 1 (g = -0.25, sf = 448 * 2^-0.25 = 376.7, e4m3 384):
    #   s = -0.25: 6; s = -1.5015: 6 * 2^-1.2515 = 2.517 -> 3 (divided by e4m3(sf) = 384 it would be 2.47 -> 2);
    #   s = -2.25: 1.5; s = -5: 6 * 2^-4.75 = 0.22 -> 0
    s[0, 16:19] = [-0.25, -1.5015, -2.25]
    max_scaled = f32(f32(0) * f32(1) + sa.SAGE3_FP8XFP4_LOG2)
    p, words, scales = sa.sage3_p(torch.from_numpy(s), torch.tensor([max_scaled]), f32(1))
    p = p.numpy()
    assert abs(float(p[0, 0]) - 2688.0) < 2688.0 * 2 ** -20                 # 448 * 6: the row maximum's P~
    assert words[0, :16].tolist() == [7, 6, 5, 4, 3, 2, 1, 0] + [0] * 8   # e2m1 codes of 6, 4, 3, 2, 1.5, 1, 0.5, 0
    assert words[0, 16:].tolist() == [7, 5, 3] + [0] * 13                 # 6, 3 (not 2), 1.5, then 0
    assert scales.tolist() == [[0x7E, 0x7C]]                               # e4m3 448 and 384
    # the row sum adds P~ itself (before the division and the casts)
    assert p.dtype == np.float32 and float(p[0, 7]) == 0.0


def test_sage3_quantize_scales_each_16_by_amax_over_6_in_e4m3_and_multiplies_by_its_reciprocal():
    # fp4_quantization_4d.cu: sf = e4m3(amax / 6), elements e2m1(x * RN(1 / sf)), no tensor scale
    x = np.zeros((1, 32), f32)
    x[0, :4] = [3.0, -1.5, 0.2, 1.0]           # amax 3: sf = 0.5 (e4m3 0x30), x * 2 = 6, -3, 0.4, 2
    x[0, 16:19] = [1.3, 0.6, -0.5]             # amax 1.3: 1.3 / 6 = 0.2167 -> e4m3 0.21875 (0x26),
    #                                            x * (1 / 0.21875) = 5.94, 2.74, -2.29 -> 6, 3, -2
    words, scales = sa.sage3_quantize(torch.from_numpy(x))
    assert words[0, :4].tolist() == [7, 8 | 5, 1, 4]
    assert words[0, 16:19].tolist() == [7, 5, 8 | 4]
    assert scales.tolist() == [[0x30, 0x26]]


# ------------------------------------------------------------------ cuDNN MXFP8: P by hand
def test_cudnn_mxfp8_p_is_the_softmax_cast_to_e4m3_with_unit_block_scales():
    # TE passes no Scale_S for MXFP8 and the graph gives P Q's data type (e4m3): RN to e4m3, scale 2^0
    p = np.zeros((1, 64), f32)
    p[0, :5] = [1.0, 0.5, 0.3, 2.0 ** -9, 2.0 ** -11]
    words, scales = sa.cudnn_mxfp8_p(p)
    # 1 = 0x38; 0.5 = 0x30; 0.3 = 1.2 * 2^-2 -> 1.25 * 2^-2 = 0x2A; 2^-9 the least subnormal 0x01; 2^-11 -> 0
    assert words[0, :5].tolist() == [0x38, 0x30, 0x2A, 0x01, 0x00]
    assert scales.tolist() == [[127, 127]]                                  # e8m0 2^0, one per 32 keys


# ------------------------------------------------------------------ whole attentions, composed
def _pad(x, rows, cols):
    out = np.zeros((rows, cols), f32)
    out[:x.shape[0], :x.shape[1]] = x
    return out


def _mx(x, axis):
    return mmasim.quantize(x, "mxfp8_e4m3", axis=axis, scale_rounding="rceil")


def test_b200_mxfp8_sdpa_is_mxfp8_qk_float32_softmax_and_e4m3_p_composed_by_hand():
    # per head: S = GEMM(MXFP8 Q, MXFP8 K^T) (RCEIL scales along the head dimension); P = softmax(S * scale)
    # with the causal mask; O = GEMM(e4m3(P) with scales 2^0, MXFP8 V with scales along the keys)
    q, k, v = rand((1, 2, 5, 40), 90), rand((1, 2, 40, 40), 91), rand((1, 2, 40, 16), 92)
    with torch.no_grad(), mt.emulate(None, "B200-mxfp8-sdpa") as trace:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    m = mmasim.Model.lookup(*MXFP8_B200)
    want = np.zeros((2, 5, 16), f32)
    for h in range(2):
        qh, kh, vh = (host(t)[0, h] for t in (q, k, v))
        s = np.asarray(mmasim.gemm(_mx(_pad(qh, 128, 64), -1), _mx(_pad(kh, 64, 64).T, 0), None, model=m))[:5, :40]
        s = torch.from_numpy(s.astype(f32)) * (1 / math.sqrt(40))
        s = s.masked_fill(~torch.ones(5, 40, dtype=torch.bool).tril(), float("-inf"))
        p = host(torch.softmax(s, -1))
        pw = mmasim.quantize(_pad(p, 128, 64), "e4m3", saturate=True).words
        pq = mmasim.Quantized(pw, np.full((128, 2), 127, np.uint8), "e4m3", "e4m3", "ue8m0", 32, 1, None,
                              "mxfp8_e4m3", "instruction")
        want[h] = np.asarray(mmasim.gemm(pq, _mx(_pad(vh, 64, 16), 0), None, model=m))[:5, :16]
    assert same(y, want[None])
    assert [(c.part, c.step, c.m, c.n, c.k) for c in trace.calls] == [("QK^T", "forward", 5, 40, 40),
                                                                       ("PV", "forward", 5, 16, 40)]


def _sage3_by_hand(qh, kh, vh, blocks, instruction=NVFP4_RTX):
    """SageAttention3's forward of one head composed of its steps: bf16 operands, K less its mean,
    Q less its mean per 128 queries with delta_s = bf16(bf16(qm) K^T) as the QK^T GEMM's C, the
    NVFP4 GEMMs (sage3_quantize, sage3_p), the online softmax over ``blocks`` key blocks of 128
    from the last to the first, O * (1 / l) rounded to bf16.  The sums in pairwise halves, ex2
    correctly rounded (mmasim.arith.ex2, checked against mpmath in tests/test_ex2.py), FFMA once rounded."""
    m = mmasim.Model.lookup(*instruction)
    bf = lambda x: mmasim.quantize(np.asarray(x, f32), "bf16").dequantize().astype(f32)   # noqa: E731
    t = lambda x: torch.from_numpy(np.ascontiguousarray(x, f32))                          # noqa: E731
    L, D = qh.shape
    S = kh.shape[0]
    q, k, v = bf(qh), bf(kh), bf(vh)
    k = bf(k - bf((tree_sum(k, 0) / f32(S)).astype(f32)))
    q, k, v = _pad(q, 128, 64), _pad(k, 128 * blocks, 64), _pad(v, 128 * blocks, 8)
    qm = (tree_sum(q, 0) / f32(128)).astype(f32)
    q = bf(q - qm)
    delta = bf(tree_sum(bf(qm)[None, :] * k, 1))                  # qm K^T: each key's products, summed
    qw, qs = sa.sage3_quantize(t(q))
    kw, ks = sa.sage3_quantize(t(k))
    s = np.asarray(mmasim.gemm(qw, kw.T, np.repeat(delta[None, :], 128, axis=0).astype(f32).view(np.uint32),
                               model=m, scale_a=qs, scale_b=ks.T)).view(f32).copy()
    s[:, S:] = -np.inf
    c = f32(np.float64(f32(1 / math.sqrt(D))) * math.log2(math.e))
    vw, vs = sa.sage3_quantize(t(v.T))
    o = row_sum = row_max = None
    for n in reversed(range(blocks)):
        sb = s[:, 128 * n:128 * (n + 1)]
        new_max = sb.max(-1) if row_max is None else np.maximum(row_max, sb.max(-1))
        if row_max is not None:            # scores_scale = ex2((m_prev - m) * c); row_sum *= it
            rescale = ex2(((row_max - new_max).astype(f32) * c).astype(f32))
            row_sum = (row_sum * rescale).astype(f32)
        row_max = new_max
        max_scaled = ffma(row_max, c, sa.SAGE3_FP8XFP4_LOG2)
        p, words, scales = sa.sage3_p(t(sb), t(max_scaled), c)
        p = p.numpy()
        row_sum = tree_sum(p, 1) if o is None else (row_sum + tree_sum(p, 1)).astype(f32)
        part = np.asarray(mmasim.gemm(words, vw[:, 128 * n:128 * (n + 1)].T, None, model=m, scale_a=scales,
                                      scale_b=vs[:, 8 * n:8 * (n + 1)].T)).view(f32)
        o = part if o is None else ffma(o, rescale[:, None], part)
    o = (o * (f32(1) / row_sum)[:, None]).astype(f32)
    return bf(o)[:L, :vh.shape[1]]


@pytest.mark.parametrize("keys, blocks", [(40, 1), (200, 2)])
def test_rtx5090_nvfp4_sage3_is_sageattention3s_forward_composed_by_hand(keys, blocks):
    q, k, v = rand((1, 1, 6, 32), 93), rand((1, 1, keys, 32), 94), rand((1, 1, keys, 8), 95)
    with torch.no_grad(), mt.emulate(None, "RTX5090-nvfp4-sage3") as trace:
        y = F.scaled_dot_product_attention(q, k, v)
    want = _sage3_by_hand(host(q)[0, 0], host(k)[0, 0], host(v)[0, 0], blocks)
    assert same(y, want[None, None])
    assert [(c.part, c.m, c.n, c.k) for c in trace.calls] == [("QK^T", 6, keys, 32), ("PV", 6, 8, keys)]
    ref = F.scaled_dot_product_attention(q, k, v)
    assert 0 < float((y - ref).norm() / ref.norm()) < 0.5         # FP4 attention, near the float32 one


# ------------------------------------------------------------------ what the kernels do not do
def test_block_scaled_attention_refuses_what_its_kernel_does_not_do():
    q = rand((1, 1, 4, 32), 96)
    with pytest.raises(mt.EmulationError, match="forward only"):
        with mt.emulate(None, "RTX5090-nvfp4-sage3"):
            F.scaled_dot_product_attention(q.requires_grad_(), q, q)
    q = q.detach()
    with torch.no_grad(), mt.emulate(None, "RTX5090-nvfp4-sage3"):
        with pytest.raises(mt.EmulationError, match="no attn_mask and no dropout"):
            F.scaled_dot_product_attention(q, q, q, attn_mask=torch.ones(4, 4, dtype=torch.bool))
        with pytest.raises(mt.EmulationError, match="causal attention is modelled for as many queries as keys"):
            F.scaled_dot_product_attention(q, rand((1, 1, 6, 32), 97), rand((1, 1, 6, 32), 98), is_causal=True)
    with pytest.raises(mt.EmulationError, match="needs a block-scaled instruction with e4m3 operands"):
        with torch.no_grad(), mt.emulate(None, mt.Emulation("A100", "mma.sync.m16n8k16.f32.bf16.bf16.f32",
                                                             attention="cudnn-mxfp8")):
            F.scaled_dot_product_attention(q, q, q)


def test_b200_nvfp4_sage3_is_the_same_forward_on_the_b200s_tcgen05():
    # the steps of _sage3_by_hand with the B200's kind::mxf4nvf4 in place of sm_120a's mma.sync
    q, k, v = rand((1, 1, 6, 32), 99), rand((1, 1, 40, 32), 100), rand((1, 1, 40, 8), 101)
    with torch.no_grad(), mt.emulate(None, "B200-nvfp4-sage3"):
        y = F.scaled_dot_product_attention(q, k, v)
    b200 = ("B200", mt.preset("B200-nvfp4-sage3").instruction)
    assert same(y, _sage3_by_hand(host(q)[0, 0], host(k)[0, 0], host(v)[0, 0], 1, b200)[None, None])
