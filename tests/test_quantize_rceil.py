"""MX with the shared exponent rounded up (``scale_rounding="rceil"``), worked by hand from
NVIDIA Transformer Engine's MXFP8 kernel (``transformer_engine/common/cast/mxfp8/quantize_mxfp8.cuh``)
and the PTX ISA's ``cvt.rp.satfinite.ue8m0x2.f32`` (``ptx_arch_spec.cuh``, ``float_to_e8m0``), every
step one binary32 operation RN():

    v = RN(amax * r),  r = RN(1 / max_elem)            scale word w = cvt.rp.satfinite.ue8m0(v)
    P_i = cvt.rn.satfinite(RN(x_i * 2**(127 - w)))

r for e4m3: 1/448 = 2**-9 * 8/7 = 2**-9 * 1.001001001...b; rounded to 24 bits it is 0x3B124925 =
(1/448) * (1 + 0.75 * 2**-24), so 448 * r = 1 + 0.75 * 2**-24, which RN() makes exactly 1 (half an
ulp above 1 is 2**-24).  cvt.rp gives the smallest power of two >= v.  e4m3: 448 = 1.75 * 2**8 is
0x7E, 240 = 1.875 * 2**7 is 0x77, 224 = 1.75 * 2**7 is 0x76, 256 = 2**8 is 0x78, 1 is 0x38,
0.5 is 0x30.  FLOOR is OCP MX's 2**(floor(log2 amax) - 8).
"""

import numpy as np
import pytest

import mmasim
from mmasim.quantization.rounding import ue8m0_rceil

F32 = np.float32
E4M3 = "mxfp8_e4m3"


def block(*head):
    x = np.zeros(32, dtype=F32)
    x[:len(head)] = head
    return x


def test_480_and_ones_takes_scale_128_under_rceil_and_127_under_floor():
    """The issue's block [480, 1 x 31] in e4m3.

    RCEIL: v = RN(480 * r) = RN(1.0714...) lies in (1, 2], so cvt.rp gives 2**1: w = 127 + 1 = 128.
    The elements are RN(x * 2**-1): 480 -> 240 = 1.875 * 2**7, exponent field 7 + 7 = 14 (1110),
    fraction 111: 0 1110 111 = 0x77; 1 -> 0.5 = 2**-1, field 6: 0x30.
    FLOOR: floor(log2 480) = 8, 8 - 8 = 0: w = 127; 480 / 1 = 480 rounds past 448 and is clamped to
    448 (0x7E); 1 is 0x38."""
    x = block(480, *[1] * 31)
    rceil = mmasim.quantize(x, E4M3, scale_rounding="rceil")
    assert rceil.scales.tolist() == [128] and rceil.words[:2].tolist() == [0x77, 0x30]
    assert set(rceil.words[1:].tolist()) == {0x30}
    floor = mmasim.quantize(x, E4M3, scale_rounding="floor")
    assert floor.scales.tolist() == [127] and floor.words[:2].tolist() == [0x7E, 0x38]
    assert mmasim.quantize(x, E4M3).scales.tolist() == [127]           # FLOOR stays the default
    assert rceil.dequantize()[0] == 480.0 and floor.dequantize()[0] == 448.0


@pytest.mark.parametrize("k", [0, -20, 30])
def test_an_amax_of_448_times_a_power_of_two_keeps_that_power(k):
    # 448 * 2**k * r = 2**k * (1 + 0.75 * 2**-24): RN gives exactly 2**k, cvt.rp keeps it:
    # w = 127 + k, and 448 * 2**k * 2**-k = 448 (0x7E), as under FLOOR (floor(log2) = 8 + k)
    x = block(np.ldexp(448.0, k), -1.0 * 2.0 ** k)
    for mode in ("rceil", "floor"):
        q = mmasim.quantize(x, E4M3, scale_rounding=mode)
        assert q.scales.tolist() == [127 + k] and q.words[:2].tolist() == [0x7E, 0xB8], mode


def test_just_above_448_the_scale_rounds_up():
    # amax = 448 + 2**-15 (the next binary32; ulps in [256, 512) are 2**-15):
    # v = (1 + 2**-15 / 448)(1 + 0.75 * 2**-24) = 1 + 0.946 * 2**-23 -> RN: 1 + 2**-23 (0x3F800001),
    # cvt.rp: 2**1, w = 128; the element RN((448 + 2**-15) / 2) = 224 + 2**-16 -> e4m3 (steps of 16
    # in [128, 256)): 224 = 0x76.  FLOOR: w = 127, the element rounds to 448 (0x7E).
    a = np.nextafter(F32(448), F32(512))
    assert float(a) == 448 + 2.0 ** -15
    assert mmasim.quantize(block(a), E4M3, scale_rounding="rceil").scales.tolist() == [128]
    assert mmasim.quantize(block(a), E4M3, scale_rounding="rceil").words[0] == 0x76
    assert mmasim.quantize(block(a), E4M3).words[0] == 0x7E


def test_just_below_448_the_scale_stays():
    # amax = 448 - 2**-15: v = (1 - 2**-15 / 448)(1 + 0.75 * 2**-24) = 1 - 0.39 * 2**-24, nearer 1
    # than 1 - 2**-24 (ulps below 1 are 2**-24): RN gives 1, cvt.rp keeps 2**0: w = 127, and
    # 448 - 2**-15 rounds to 448 (0x7E)
    a = np.nextafter(F32(448), F32(0))
    q = mmasim.quantize(block(a), E4M3, scale_rounding="rceil")
    assert q.scales.tolist() == [127] and q.words[0] == 0x7E


def test_a_subnormal_v_is_rounded_to_the_binary32_grid_before_cvt_rp():
    """amax = 448 * 2**-127 = 1.75 * 2**-119: v = 2**-127 (1 + 0.75 * 2**-24) is a binary32
    subnormal (ulp 2**-149, 2**-127 is 2**22 ulps): RN gives 2**-127 (fraction 0x400000), which
    cvt.rp keeps: w = 0 (2**-127); the element 448 * 2**-127 * 2**127 = 448 (0x7E).

    The next amax (1 ulp, 2**-23 / 1.75 relative, above): v = 2**-127 + 0.47 ulp still rounds to
    2**-127, w = 0, although amax / 448 is above 2**-127 (binary32 arithmetic, not the exact
    ceil): its element 448 + 2**-15 saturates to 448.  One more ulp: v = 2**-127 + 0.76 ulp rounds
    to fraction 0x400001 > 0x400000, which cvt.rp takes up to 2**-126: w = 1 and the element
    RN(amax * 2**126) = 224 + 2**-15 -> 224 (0x76)."""
    t = F32(448 * 2.0 ** -127)
    t2 = np.nextafter(t, F32(1))
    t3 = np.nextafter(t2, F32(1))
    got = [mmasim.quantize(block(a), E4M3, scale_rounding="rceil") for a in (t, t2, t3)]
    assert [q.scales.tolist()[0] for q in got] == [0, 0, 1]
    assert [int(q.words[0]) for q in got] == [0x7E, 0x7E, 0x76]


def test_a_zero_block_takes_the_smallest_scale():
    # v = 0: cvt.rp gives the smallest ue8m0, 2**-127 (0x00); the elements are 0 (and -0 keeps its sign)
    q = mmasim.quantize(block(0.0, -0.0), E4M3, scale_rounding="rceil")
    assert q.scales.tolist() == [0] and q.words[:3].tolist() == [0x00, 0x80, 0x00]


def test_the_largest_binary32_block():
    # amax = FLT_MAX = 2**128 (1 - 2**-24): v = 2**119.19 -> cvt.rp 2**120, w = 247 (FLOOR: 127 - 8
    # = 119, w = 246); the element FLT_MAX * 2**-120 = 256 (1 - 2**-24) rounds to 256 = 0x78
    q = mmasim.quantize(block(np.finfo(F32).max), E4M3, scale_rounding="rceil")
    assert q.scales.tolist() == [247] and q.words[0] == 0x78
    assert mmasim.quantize(block(np.finfo(F32).max), E4M3).scales.tolist() == [246]


def test_cvt_rp_satfinite_ue8m0():
    """cvt.rp.satfinite.ue8m0x2.f32 on chosen binary32 values: 1 -> 2**0 (127); 1.5 and 2 -> 2**1
    (128); 2**127 -> 0xFE; 1.5 * 2**127 and infinity saturate to 2**127 (0xFE, .satfinite's
    positive MAX_NORM); NaN -> 0xFF; 0, 2**-149 and 2**-127 (fraction 0x400000) -> 2**-127 (0x00);
    2**-127 + 2**-149 (fraction 0x400001) -> 2**-126 (0x01)."""
    v = np.array([1, 1.5, 2, 2.0 ** 127, 1.5 * 2.0 ** 127, np.inf, np.nan, 0, 2.0 ** -149, 2.0 ** -127,
                  2.0 ** -127 + 2.0 ** -149], dtype=F32)
    assert ue8m0_rceil(v).tolist() == [127, 128, 128, 0xFE, 0xFE, 0xFE, 0xFF, 0, 0, 0, 1]


@pytest.mark.parametrize("scheme, amax, rceil, floor", [
    # mxfp4: r = RN(1/6) = 0x3E2AAAAB.  amax 7: v = 1.1667 -> 2**1 (128); 7 / 2 = 3.5 is the tie of
    # 3 (code 5) and 4 (code 6, even): 4; FLOOR: floor(log2 7) - 2 = 0 (127), 7 clamps to 6 (code 7)
    ("mxfp4", 7.0, (128, 0x6), (127, 0x7)),
    # mxfp8_e5m2: max 57344 = 1.75 * 2**15.  amax 61440 = 1.875 * 2**15: v = 1.0714 -> 2**1 (128),
    # 61440 / 2 = 1.875 * 2**14 is the tie of 1.75 * 2**14 (fraction 11) and 2**15 (even): 2**15,
    # field 30: 0x78; FLOOR 15 - 15 = 0 (127), 61440 is the tie of 57344 (odd) and 2**16: it rounds
    # past the largest and is clamped to 57344 (0x7B)
    ("mxfp8_e5m2", 61440.0, (128, 0x78), (127, 0x7B)),
    # mxfp6_e2m3: max 7.5 = 1.875 * 2**2.  amax 7.75: v = 1.033 -> 2**1 (128); 3.875 = 1.9375 * 2**1:
    # field 2, fraction 111 (1.875) or 2 (field 3, 000): the tie goes to even, 4 = 0x18; FLOOR: 127,
    # 7.75 clamps to 7.5 (0x1F)
    ("mxfp6_e2m3", 7.75, (128, 0x18), (127, 0x1F)),
])
def test_rceil_of_the_other_element_formats(scheme, amax, rceil, floor):
    for mode, (w, word) in (("rceil", rceil), ("floor", floor)):
        q = mmasim.quantize(block(amax), scheme, scale_rounding=mode)
        assert (q.scales.tolist(), int(q.words[0])) == ([w], word), mode


def test_rceil_words_feed_the_b200_block_scaled_instruction():
    # the [480, 1 x 31] block against B = [1, 0.5 x 31] (FLOOR, X = 2**-8): A's elements 240, 0.5 x 31
    # with 2**1, B's 256, 128 x 31 with 2**-8: 480 + 31 * 0.5 = 495.5, exact in f32
    a = block(480, *[1] * 31)
    b = block(1, *[0.5] * 31)
    qa = mmasim.quantize(a, E4M3, scale_rounding="rceil")
    qb = mmasim.quantize(b, E4M3)
    m = mmasim.MMA("B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e4m3.e4m3.ue8m0")
    d = m.dot(qa.words, qb.words, 0, scale_a=qa.scales, scale_b=qb.scales)
    assert int(d) == int(np.array(495.5, dtype=F32).view(np.uint32))


def test_rceil_takes_finite_binary32_values():
    with pytest.raises(mmasim.DtypeError, match="binary32"):
        mmasim.quantize(block(0.1).astype(np.float64) + 1e-12, E4M3, scale_rounding="rceil")
    with pytest.raises(mmasim.NonFiniteError):
        mmasim.quantize(block(np.inf), E4M3, scale_rounding="rceil")
    with pytest.raises(mmasim.QuantizeError, match="scale_rounding must be one of"):
        mmasim.quantize(block(1.0), E4M3, scale_rounding="ceil")
    with pytest.raises(mmasim.QuantizeError, match="scale_rounding= is for mxfp8_e4m3, .*mxfp4"):
        mmasim.quantize(np.ones(16, dtype=F32), "nvfp4", scale_rounding="rceil")
    with pytest.raises(mmasim.QuantizeError, match="plain cast"):
        mmasim.quantize(np.ones(4, dtype=F32), "e4m3", scale_rounding="rceil")
