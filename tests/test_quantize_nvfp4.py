"""NVFP4 (``mmasim.quantize(x, "nvfp4")``), worked by hand from NVIDIA Transformer Engine's
kernel (``transformer_engine/common/cast/nvfp4/core_nvfp4.cuh`` and
``quantize_transpose_nvfp4.cuh``), every step a binary32 operation RN():

    S_enc = RN(448 * 6 / amax)   (at most FLT_MAX; 1 when amax is 0)      S_dec = RN(1 / S_enc)
    per 16 elements: scale = e4m3_satfinite(RN(block_amax * RN(S_enc * RN(1 / 6))))
                     encode = min(RN(1 / RN(scale * S_dec)), FLT_MAX)
                     element = e2m1_satfinite(RN(x * encode))      (cvt.rn.satfinite)

RN(1/6) = 11184811 * 2^-26 (0x3E2AAAAB).  Where a step is not obvious, ``rn32`` (an
independent IEEE reference, tests/ieee_reference.py) does it with Fractions.
e2m1 codes: 0, 0.5, 1, 1.5, 2, 3, 4, 6 are 0..7, bit 3 the sign.  ue4m3 0x7E = 448,
0x38 = 1, 0x30 = 0.5, 0x28 = 0.25, 0x00 = 0.
"""

from fractions import Fraction

import numpy as np
import pytest

import mmasim
from helpers import f32, f32_value
from ieee_reference import F32, round_rne

NVFP4 = "tcgen05.kind::mxf4nvf4.4X"


def rn32(x: Fraction) -> Fraction:
    """x rounded to nearest even in binary32, as an exact value."""
    return Fraction(f32_value(round_rne(x, F32)))


def blocks(*heads):
    out = []
    for head in heads:
        out += list(head) + [0.0] * (16 - len(head))
    return np.array(out, dtype=np.float32)


# A and B: global amax 2688 = 448 * 6, so S_enc = RN(2688 / 2688) = 1 and S_dec = 1.
# block amax 2688: RN(2688 * RN(1/6)) = RN(448 + 896 * 2^-26) = 448 (half an ulp of 448 is 2^-16);
#   encode RN(1 / 448); each x * encode is q * (1 + d) with |d| <= 2^-23, so it rounds to q.
# block amax 6: RN(6 * RN(1/6)) = RN(1 + 2^-25) = 1 (0x38), encode 1.
# block amax 3: RN(3 * RN(1/6)) = RN(0.5 + 2^-26) = 0.5 (0x30), encode 2.
# block amax 1.5: RN(1.5 * RN(1/6)) = RN(0.25 + 2^-27) = 0.25 (0x28), encode 4.
# an all-zero block: scale 0 (0x00), encode min(1 / 0, FLT_MAX) = FLT_MAX, elements 0.
A = blocks([2688, -1344, 672, 0, 224], [6, 4, -2, 1, 0.5], [3, -1.5, 0.25, 0.75], [])
B = blocks([0, 0, 0, 2688, 224], [1, 0.5, -1, 2, 6], [1.5, -0.75, 0.125], [5])


def test_scales_and_elements_of_exactly_representable_blocks():
    q = mmasim.quantize(A, "nvfp4")
    assert (q.format, q.container, q.scale_format, q.block, q.scale_use) == ("e2m1", "e2m1x", "ue4m3", 16,
                                                                              "instruction")
    assert q.scales.tolist() == [0x7E, 0x38, 0x30, 0x00]
    assert f32(q.tensor_scale) == f32(1.0) and q.amax == 2688
    # 2688 / 448 = 6 (code 7), -3 (0xD), 1.5 (3), 0, 0.5 (1); 6, 4, -2, 1, 0.5; 3 * 2 = 6, -3, 0.5, 1.5
    assert q.words[:5].tolist() == [0x7, 0xD, 0x3, 0x0, 0x1]
    assert q.words[16:21].tolist() == [0x7, 0x6, 0xC, 0x2, 0x1]
    assert q.words[32:36].tolist() == [0x7, 0xD, 0x1, 0x3]
    assert not q.words[48:].any()
    assert np.array_equal(q.dequantize(), A.astype(np.float64))


def test_a_block_scale_rounds_and_an_element_saturates():
    q = mmasim.quantize(B, "nvfp4")
    # block 3, amax 5: RN(5 * RN(1/6)) = 0.8333333 -> e4m3 (steps of 2^-4 in [0.5, 1)): 13/16 =
    # 0.8125 = 1.625 * 2^-1, field 6, fraction 101: 0x35.  encode = RN(1 / 0.8125) = RN(16/13);
    # 5 * 16/13 = 6.15 > 6: the element saturates to 6 (code 7), which stands for 6 * 0.8125 = 4.875
    assert q.scales.tolist() == [0x7E, 0x38, 0x28, 0x35]
    assert q.words[48] == 0x7 and q.dequantize()[48] == 4.875
    assert q.words[:5].tolist() == [0, 0, 0, 0x7, 0x1]
    assert q.words[32:35].tolist() == [0x7, 0xD, 0x1]          # x * 4: 6, -3, 0.5


def test_a_block_of_ones_gets_scale_0x23():
    # global amax 2688 (S_enc = 1); block 1 is sixteen 1.0: RN(1 * RN(1/6)) = 0.16666667 -> e4m3
    # (steps of 2^-6 in [0.125, 0.25)): 10.67 steps -> 11 * 2^-6 = 0.171875 = 1.375 * 2^-3, field 4,
    # fraction 011: 0x23.  encode = RN(64 / 11) = 5.818..., each 1.0 becomes 5.818 -> e2m1 6 (code 7)
    x = np.concatenate([blocks([2688]), np.ones(16, dtype=np.float32)])
    q = mmasim.quantize(x, "nvfp4")
    assert q.scales.tolist() == [0x7E, 0x23]
    assert set(q.words[16:].tolist()) == {0x7}
    assert set(q.dequantize()[16:].tolist()) == {6 * 0.171875}


def test_the_per_tensor_scale_of_a_tensor_with_amax_one():
    # amax 1: S_enc = RN(2688 / 1) = 2688 exactly; S_dec = RN(1 / 2688) (not exact).
    # block amax 1: RN(1 * RN(2688 * RN(1/6))) = 448 (as above): scale 0x7E.
    # encode = RN(1 / RN(448 * S_dec)) is within a few ulps of 6: 1.0 -> 6 (code 7), 0.5 -> 3 (5),
    # -0.25 -> -1.5 (0xB).  The values represented are q * 448 * S_dec.
    x = blocks([1.0, 0.5, -0.25])
    q = mmasim.quantize(x, "nvfp4")
    s_dec = rn32(Fraction(1, 2688))
    assert Fraction(float(q.tensor_scale)) == s_dec and q.amax == 1.0
    assert q.scales.tolist() == [0x7E] and q.words[:3].tolist() == [0x7, 0x5, 0xB]
    encode = rn32(1 / rn32(448 * s_dec))
    assert rn32(encode) == encode and abs(encode - 6) < Fraction(1, 2**20)
    d = q.dequantize()
    assert [Fraction(v) for v in d[:3]] == [6 * 448 * s_dec, 3 * 448 * s_dec, Fraction(-3, 2) * 448 * s_dec]


def test_a_block_far_below_the_tensor_amax_gets_scale_zero():
    # block amax 2^-10 with S_enc = 1: RN(2^-10 * RN(1/6)) = 1.6e-4 is below half of e4m3's smallest
    # 2^-9: the scale is 0; encode = FLT_MAX, 2^-10 * FLT_MAX saturates to 6 (code 7): the block
    # stands for zero, as in Transformer Engine
    x = np.concatenate([blocks([2688]), blocks([2.0**-10, -(2.0**-11)])])
    q = mmasim.quantize(x, "nvfp4")
    assert q.scales.tolist() == [0x7E, 0x00]
    assert q.words[16:18].tolist() == [0x7, 0xF] and not q.dequantize()[16:].any()


def test_an_all_zero_tensor():
    # amax 0: the kernel's rule is S_enc = 1; every scale 0, every element 0
    q = mmasim.quantize(np.zeros(32, dtype=np.float32), "nvfp4")
    assert f32(q.tensor_scale) == f32(1.0) and not q.scales.any() and not q.words.any()


def test_along_axis_zero_is_the_transposed_layout():
    rng = np.random.default_rng(5)
    Bm = rng.standard_normal((64, 8)).astype(np.float32)
    q0 = mmasim.quantize(Bm, "nvfp4", axis=0)
    q1 = mmasim.quantize(Bm.T, "nvfp4")
    assert q0.scales.shape == (4, 8) and q0.words.shape == (64, 8)
    assert np.array_equal(q0.words, q1.words.T) and np.array_equal(q0.scales, q1.scales.T)
    assert np.array_equal(q0.dequantize(), q1.dequantize().T)


def test_nvfp4_words_feed_tcgen05_mxf4nvf4():
    qa, qb = mmasim.quantize(A, "nvfp4"), mmasim.quantize(B, "nvfp4")
    d = mmasim.MMA("B200", NVFP4).dot(qa.words, qb.words, 0, scale_a=qa.scales, scale_b=qb.scales)
    # the products of the words: block 0: 224 * 224 = 50176 (the other nonzeros of A and B sit at
    # different positions); block 1: 6 + 2 + 2 + 2 + 3 = 15; block 2: 4.5 + 1.125 + 0.03125 =
    # 5.65625; block 3: A is zero.  50196.65625 = 1606293 * 2^-5 is exact in f32 (the tensor scales,
    # both 1 here, multiply D outside the instruction)
    exact = sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(qa.dequantize(), qb.dequantize()))
    assert exact == Fraction(1606293, 32)
    assert int(d) == f32(50196.65625)


def test_nvfp4_refuses_what_its_recipe_does_not_define():
    with pytest.raises(mmasim.DtypeError, match="binary32"):
        mmasim.quantize(np.full(16, 0.1), "nvfp4")              # 0.1 as float64 is not an f32 value
    with pytest.raises(mmasim.NonFiniteError):
        mmasim.quantize(blocks([np.nan]), "nvfp4")
    with pytest.raises(mmasim.NonFiniteError):
        mmasim.quantize(blocks([np.inf]), "nvfp4")
    with pytest.raises(mmasim.QuantizeError, match="nan must be 'raise'"):
        mmasim.quantize(blocks([1.0]), "nvfp4", nan="propagate")
    with pytest.raises(mmasim.BlockShapeError, match="block of 16"):
        mmasim.quantize(np.ones(24, dtype=np.float32), "nvfp4")
    assert mmasim.quantize(np.full(16, 0.1).astype(np.float32), "nvfp4").words.shape == (16,)
