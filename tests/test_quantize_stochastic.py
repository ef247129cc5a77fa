"""Stochastic rounding (``rounding="stochastic"``): ``cvt.rs`` worked by hand from the PTX ISA
(section 9.7.9.21, "cvt"): the result "is rounded in the direction toward zero or away from zero
based on the carry out of the integer addition of the supplied random bits (rbits) to the truncated
off (discarded) bits of mantissa from the input".  Each element has k random bits (e2m1: 8, one
byte of rbits per operand of .e2m1x4; e4m3 / e5m2: 16, a 16-bit half of rbits; bf16: 16; f16: 13),
added right below the kept significand: with |x| = (n + f) * q (q the destination's quantum at
|x|), the magnitude is n * q, or (n + 1) * q when floor(f * 2**k) + r >= 2**k.

e2m1 codes: 0, 0.5, 1, 1.5, 2, 3, 4, 6 are 0..7, bit 3 the sign; quanta 0.5 below 2, 1 in [2, 4),
2 in [4, 6].  e4m3 1 = 0x38, 1.125 = 0x39, 448 = 0x7E; e5m2 1 = 0x3C, 1.25 = 0x3D, 57344 = 0x7B.
"""

import numpy as np
import pytest

import mmasim
from mmasim.quantization.rounding import random_bits

F32 = np.float32


def rs(x, fmt, r, **kw):
    x = np.atleast_1d(np.asarray(x, dtype=F32))
    r = np.broadcast_to(np.asarray(r), x.shape).copy()
    return mmasim.quantize(x, fmt, rounding="stochastic", rbits=r, **kw).words.tolist()


def f32(bits):
    return np.array([bits], dtype=np.uint32).view(F32)


# --------------------------------------------------------------- both sides of the boundary
def test_e2m1_rounds_up_when_the_random_byte_carries():
    # 1.25 = (2 + 0.5) * 0.5: the discarded half is 0.5 * 256 = 128 in the byte's units;
    # 128 + 127 = 255 has no carry (1.0, code 2), 128 + 128 = 256 carries (1.5, code 3)
    assert rs([1.25, 1.25], "e2m1x", [127, 128]) == [0x2, 0x3]
    # 1.3 (binary32 1.29999995...) = (2 + 0.59999990) * 0.5: floor(0.5999999 * 256) = 153, so the
    # carry needs r >= 256 - 153 = 103
    assert rs([1.3, 1.3], "e2m1x", [102, 103]) == [0x2, 0x3]
    # the sign is kept: -1.25 rounds to -1 or -1.5 (codes 0xA, 0xB)
    assert rs([-1.25, -1.25], "e2m1x", [127, 128]) == [0xA, 0xB]
    # below 1 the quantum is e2m1's subnormal 0.5: 0.1 = 0.2000000030 * 0.5, floor(0.2 * 256) = 51,
    # the carry needs r >= 205: 0 or 0.5 (code 1)
    assert rs([0.1, 0.1], "e2m1x", [204, 205]) == [0x0, 0x1]
    # in [4, 6] the quantum is 2: 5.5 = (2 + 0.75) * 2, 0.75 * 256 = 192, the carry needs r >= 64
    assert rs([5.5, 5.5], "e2m1x", [63, 64]) == [0x6, 0x7]


def test_an_exact_value_never_moves():
    # f = 0: r < 2**k never carries
    assert rs([1.5, -6.0, 0.0], "e2m1x", 255) == [0x3, 0xF, 0x0]
    assert rs([1.125, 448.0], "e4m3", 0xFFFF) == [0x39, 0x7E]


def test_e4m3_uses_sixteen_random_bits_right_below_its_three_fraction_bits():
    # 1.0625 = (8 + 0.5) * 2**-3: 0.5 * 2**16 = 0x8000, the carry needs r >= 0x8000
    assert rs([1.0625, 1.0625], "e4m3", [0x7FFF, 0x8000]) == [0x38, 0x39]
    # 1 + 2**-19 = (8 + 2**-16) * 2**-3: floor(2**-16 * 2**16) = 1, the carry needs r = 0xFFFF
    assert rs([1 + 2.0 ** -19, 1 + 2.0 ** -19], "e4m3", [0xFFFE, 0xFFFF]) == [0x38, 0x39]
    # 1 + 2**-20: the discarded part 2**-17 lies below the 16 random bits (floor(0.5) = 0): never
    # rounds up
    assert rs([1 + 2.0 ** -20], "e4m3", [0xFFFF]) == [0x38]
    # e4m3's subnormals (quantum 2**-9): 3 * 2**-11 = 0.75 * 2**-9, the carry needs r >= 0x4000
    assert rs([3 * 2.0 ** -11, 3 * 2.0 ** -11], "e4m3", [0x3FFF, 0x4000]) == [0x00, 0x01]


def test_e5m2_uses_sixteen_random_bits_right_below_its_two_fraction_bits():
    # 1.125 = (4 + 0.5) * 2**-2
    assert rs([1.125, 1.125], "e5m2", [0x7FFF, 0x8000]) == [0x3C, 0x3D]


def test_bf16_adds_the_random_half_word_to_the_sixteen_discarded_bits():
    # binary32 0x3F801234: the discarded bits are 0x1234; 0x1234 + r carries out of 16 bits from
    # r = 0x10000 - 0x1234 = 0xEDCC: bf16 0x3F80 or 0x3F81
    x = f32(0x3F801234)[0]
    assert rs([x, x], "bf16", [0xEDCB, 0xEDCC]) == [0x3F80, 0x3F81]
    assert rs([-x, -x], "bf16", [0xEDCB, 0xEDCC]) == [0xBF80, 0xBF81]
    # a binary32 subnormal 0x00001234 has the same 16 discarded bits above bf16's subnormal 0x0001
    s = f32(0x00001234)[0]
    assert rs([s, s], "bf16", [0xEDCB, 0xEDCC]) == [0x0000, 0x0001]


def test_f16_uses_thirteen_random_bits():
    # 1 + 2**-11 = (1024 + 0.5) * 2**-10: 0.5 * 2**13 = 4096, the carry needs r >= 4096
    assert rs([1 + 2.0 ** -11, 1 + 2.0 ** -11], "f16", [4095, 4096]) == [0x3C00, 0x3C01]
    with pytest.raises(mmasim.QuantizeError, match="13 random bits"):
        rs([1.0], "f16", [8192])


# --------------------------------------------------------------- .satfinite, infinity, NaN
def test_satfinite_clamps_to_max_norm():
    # e2m1: 5.9 = (2 + 0.95) * 2 with r = 255 carries to 8, past 6: 6 (code 7); 6.5 and infinity
    # are past MAX_NORM: 6 with their sign
    assert rs([5.9, 6.5, -np.inf], "e2m1x", 255) == [0x7, 0x7, 0xF]
    # e4m3: 460 > 448 whatever the bits; e5m2: 60000 > 57344
    assert rs([460.0, 460.0], "e4m3", [0, 0xFFFF]) == [0x7E, 0x7E]
    assert rs([60000.0, np.inf], "e5m2", 0) == [0x7B, 0x7B]


def test_bf16_without_satfinite_carries_into_infinity():
    # binary32 0x7F7F8000 is halfway between bf16's largest 0x7F7F and 2**128: a carry gives inf
    # (0x7F80) without .satfinite, the largest with it
    x = f32(0x7F7F8000)[0]
    assert rs([x, x], "bf16", [0x7FFF, 0x8000]) == [0x7F7F, 0x7F80]
    assert rs([x, x], "bf16", [0x7FFF, 0x8000], saturate=True) == [0x7F7F, 0x7F7F]


def test_nan_under_satfinite():
    # a format with NaN keeps NaN; e2m1, which has none, gives +MAX_NORM (PTX ISA, .satfinite)
    assert rs([np.nan], "e4m3", 0, nan="propagate") == [0x7F]
    assert rs([np.nan], "e2m1x", 0, nan="propagate") == [0x7]
    with pytest.raises(mmasim.NonFiniteError, match="NaN"):
        rs([np.nan], "e4m3", 0)


# --------------------------------------------------------------- in the recipes
def test_nvfp4_elements_take_their_random_bytes():
    # global amax 2688 (S_enc = 1); the second block's amax 6 gives scale 1 (0x38) and encode 1
    # (tests/test_quantize_nvfp4.py), so its 1.25 is converted as 1.25: r = 127 -> 1 (code 2),
    # r = 128 -> 1.5 (code 3)
    x = np.zeros(32, dtype=F32)
    x[0], x[16], x[17] = 2688, 6, 1.25
    r = np.zeros(32, dtype=np.uint8)
    lo = mmasim.quantize(x, "nvfp4", rounding="stochastic", rbits=r)
    r[17] = 128
    hi = mmasim.quantize(x, "nvfp4", rounding="stochastic", rbits=r)
    assert lo.scales.tolist() == hi.scales.tolist() == [0x7E, 0x38]
    assert (lo.words[17], hi.words[17]) == (0x2, 0x3)


def test_mx_elements_take_their_random_bits():
    # mxfp8_e4m3, amax 1.0625: FLOOR X = 2**-8, 1.0625 * 2**8 = 272 = (8 + 0.5) * 2**5: the carry
    # needs r >= 0x8000 (272 -> 256 = 0x78 or 288 = 0x79); RCEIL: v = RN(1.0625 / 448) -> 2**-8 as
    # well (w = 119)
    x = np.zeros(32, dtype=F32)
    x[0] = 1.0625
    for mode in ("floor", "rceil"):
        got = [mmasim.quantize(x, "mxfp8_e4m3", scale_rounding=mode, rounding="stochastic",
                               rbits=np.full(32, r)).words[0] for r in (0x7FFF, 0x8000)]
        assert got == [0x78, 0x79], mode


# --------------------------------------------------------------- the seed
def test_a_seed_draws_the_documented_generator():
    """seed=s: element i (C order) gets the top k bits of the i-th 64-bit word of
    numpy.random.PCG64(s).random_raw."""
    x = np.full((4, 8), 1.25, dtype=F32)
    raw = np.random.PCG64(7).random_raw(32)
    expect = mmasim.quantize(x, "e2m1x", rounding="stochastic", rbits=(raw >> np.uint64(56)).reshape(4, 8))
    got = mmasim.quantize(x, "e2m1x", rounding="stochastic", seed=7)
    assert np.array_equal(got.words, expect.words)
    assert np.array_equal(random_bits(7, (4, 8), 16), (raw >> np.uint64(48)).reshape(4, 8))
    # 1.25 rounds up when the byte is >= 128: about half of 4096 elements
    many = mmasim.quantize(np.full(4096, 1.25, dtype=F32), "e2m1x", rounding="stochastic", seed=1).words
    assert 1900 < int((many == 0x3).sum()) < 2200 and set(many.tolist()) == {0x2, 0x3}


def test_stochastic_rounding_options_are_checked():
    x = np.ones(4, dtype=F32)
    with pytest.raises(mmasim.QuantizeError, match="exactly one"):
        mmasim.quantize(x, "e4m3", rounding="stochastic")
    with pytest.raises(mmasim.QuantizeError, match="exactly one"):
        mmasim.quantize(x, "e4m3", rounding="stochastic", rbits=np.zeros(4, int), seed=1)
    with pytest.raises(mmasim.QuantizeError, match="rounding='stochastic'"):
        mmasim.quantize(x, "e4m3", rbits=np.zeros(4, int))
    with pytest.raises(mmasim.QuantizeError, match="shape"):
        mmasim.quantize(x, "e4m3", rounding="stochastic", rbits=np.zeros(3, int))
    with pytest.raises(mmasim.QuantizeError, match="integers"):
        mmasim.quantize(x, "e4m3", rounding="stochastic", rbits=np.zeros(4))
    with pytest.raises(mmasim.QuantizeError, match="8 random bits"):
        mmasim.quantize(x, "e2m1x", rounding="stochastic", rbits=np.full(4, 256))
    with pytest.raises(mmasim.QuantizeError, match="cvt.rs converts to"):
        mmasim.quantize(x, "f32", rounding="stochastic", seed=0)
    with pytest.raises(mmasim.QuantizeError, match="mandatory"):
        mmasim.quantize(x, "e4m3", rounding="stochastic", seed=0, saturate=False)
    with pytest.raises(mmasim.QuantizeError, match="rounding must be one of"):
        mmasim.quantize(x, "e4m3", rounding="rs")
    with pytest.raises(mmasim.QuantizeError, match="seed"):
        mmasim.quantize(x, "e4m3", rounding="stochastic", seed=-1)
    with pytest.raises(mmasim.QuantizeError, match="DeepGEMM"):
        mmasim.quantize(np.ones((1, 128), dtype=F32), "deepseek_fp8", rounding="stochastic", seed=0)
    with pytest.raises(mmasim.DtypeError, match="binary32"):
        mmasim.quantize(np.array([0.1]), "e4m3", rounding="stochastic", seed=0)
