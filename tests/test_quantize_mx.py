"""OCP MX v1.0 (``mxfp8_e4m3``, ``mxfp8_e5m2``, ``mxfp6_e3m2``, ``mxfp6_e2m3``, ``mxfp4``):
scales and element words worked out by hand from the specification's section 6.3:

    X = 2^(floor(log2(max_i |V_i|)) - emax_elem)      (an e8m0 word: exponent + 127)
    P_i = V_i / X rounded to nearest even, normals past the largest clamped to it

emax_elem, the exponent of the element format's largest normal: e4m3 8 (448 = 1.75 * 2^8),
e5m2 15 (57344), e3m2 4 (28), e2m3 2 (7.5), e2m1 2 (6).  e8m0 holds 2^-127 .. 2^127.

Then the words go to the B200's block-scaled instructions, and the result must be the exact dot
product of the (exactly representable) inputs, computed here with integers and Fractions.
"""

from fractions import Fraction

import numpy as np
import pytest

import mmasim
from helpers import f32

MXF8F6F4 = "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.{}.{}.ue8m0"
MXF4 = "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X.block32.f32.e2m1.e2m1.ue8m0"


def block(*head, n=32):
    return np.array(list(head) + [0.0] * (n - len(head)))


# --------------------------------------------------------------- hand-worked blocks
@pytest.mark.parametrize("scheme, scale, three, one", [
    # amax 3.0: floor(log2 3) = 1.  e4m3: X = 2^(1-8) = 2^-7, word 127-7 = 0x78; 3 / 2^-7 = 384 =
    # 1.5 * 2^8 -> exponent field 15, fraction 100: 0x7C; 1 / 2^-7 = 128 = 2^7 -> field 14: 0x70.
    ("mxfp8_e4m3", 0x78, 0x7C, 0x70),
    # e5m2: X = 2^(1-15) = 2^-14 (0x71); 3 * 2^14 = 1.5 * 2^15 -> field 30, fraction 10: 0x7A;
    # 2^14 -> field 29: 0x74.
    ("mxfp8_e5m2", 0x71, 0x7A, 0x74),
    # e3m2: X = 2^(1-4) = 2^-3 (0x7C); 3 * 8 = 24 = 1.5 * 2^4 -> field 7, fraction 10: 0x1E;
    # 8 = 2^3 -> field 6: 0x18.
    ("mxfp6_e3m2", 0x7C, 0x1E, 0x18),
    # e2m3: X = 2^(1-2) = 2^-1 (0x7E); 3 * 2 = 6 = 1.5 * 2^2 -> field 3, fraction 100: 0x1C;
    # 2 = 2^1 -> field 2: 0x10.
    ("mxfp6_e2m3", 0x7E, 0x1C, 0x10),
    # e2m1: X = 2^-1 (0x7E); 6 is code 7, 2 is code 4 (4-bit codes, kind::mxf4's container)
    ("mxfp4", 0x7E, 0x7, 0x4),
])
def test_a_block_with_amax_three(scheme, scale, three, one):
    q = mmasim.quantize(block(3.0, 1.0, -0.0), scheme)
    assert q.scales.tolist() == [scale]
    sign = {"mxfp4": 0x8, "mxfp6_e3m2": 0x20, "mxfp6_e2m3": 0x20}.get(scheme, 0x80)
    assert q.words[:4].tolist() == [three, one, sign, 0]          # -0.0 keeps its sign
    assert (q.scale_format, q.block, q.axis, q.scale_use) == ("ue8m0", 32, 0, "instruction")
    assert np.array_equal(q.dequantize(), block(3.0, 1.0, -0.0))


def test_normals_past_the_largest_are_clamped():
    # mxfp4, amax 7: floor(log2 7) = 2, X = 2^0 (0x7F); 7 rounds past 6: clamped to 6 (code 7);
    # 5 is a tie of 4 (code 6, even) and 6: 4; -5.5 rounds to -6 (code 0xF)
    q = mmasim.quantize(block(7.0, 5.0, -5.5), "mxfp4")
    assert q.scales.tolist() == [0x7F] and q.words[:3].tolist() == [0x7, 0x6, 0xF]
    # mxfp8_e4m3, amax 31 = 1.9375 * 2^4: X = 2^(4-8) = 2^-4 (0x7B); 31 * 16 = 496 > 448: clamped
    # to 448 (0x7E); 30 * 16 = 480 as well; 29 * 16 = 464 is the tie of 448 and 480: 448
    q = mmasim.quantize(block(31.0, -30.0, 29.0), "mxfp8_e4m3")
    assert q.scales.tolist() == [0x7B] and q.words[:3].tolist() == [0x7E, 0xFE, 0x7E]


def test_zero_and_tiny_blocks_take_the_smallest_scale():
    # an all-zero block has no log2: it gets the smallest e8m0 scale 2^-127 (0x00), elements zero
    q = mmasim.quantize(np.zeros(64), "mxfp8_e4m3")
    assert q.scales.tolist() == [0, 0] and not q.words.any()
    # amax 2^-130: floor = -130, 2^(-130-8) is below 2^-127, so X = 2^-127 (0x00);
    # 2^-130 / 2^-127 = 2^-3 -> e4m3 field 4: 0x20; 2^-200 / 2^-127 = 2^-73 rounds to +0
    q = mmasim.quantize(block(2.0**-130, 2.0**-200), "mxfp8_e4m3")
    assert q.scales.tolist() == [0x00] and q.words[:2].tolist() == [0x20, 0x00]


def test_nan_infinity_and_out_of_range_blocks():
    x = np.concatenate([block(1.0, np.nan), block(np.inf), block(2.0**200), block(1.0)])
    with pytest.raises(mmasim.NonFiniteError, match="block"):
        mmasim.quantize(x, "mxfp8_e4m3")
    with pytest.raises(mmasim.NonFiniteError, match="2\\*\\*127"):
        mmasim.quantize(block(2.0**200), "mxfp8_e4m3")
    # nan='propagate': each such block gets the NaN scale 0xFF; its elements the NaN word where the
    # element format has one (e4m3 0x7F), else 0; the last block is ordinary (amax 1: X = 2^-8)
    q = mmasim.quantize(x, "mxfp8_e4m3", nan="propagate")
    assert q.scales.tolist() == [0xFF, 0xFF, 0xFF, 0x77]
    assert set(q.words[:96].tolist()) == {0x7F} and q.words[96] == 0x78     # 1 / 2^-8 = 2^8
    d = q.dequantize()
    assert np.isnan(d[:96]).all() and d[96] == 1.0
    q4 = mmasim.quantize(block(np.nan, 1.0), "mxfp4", nan="propagate")
    assert q4.scales.tolist() == [0xFF] and not q4.words.any() and np.isnan(q4.dequantize()).all()


def test_blocks_run_along_axis():
    # B (K = 64, N = 2) quantized along K (axis 0): scales (K / 32, N) as gemm's scale_b
    B = np.zeros((64, 2))
    B[0, 0], B[32, 0], B[5, 1], B[40, 1] = 3.0, 1.0, 6.0, 0.5
    q = mmasim.quantize(B, "mxfp4", axis=0)
    # column 0: amax 3 -> X = 2^-1 (0x7E), amax 1 -> X = 2^-2 (0x7D); column 1: amax 6 -> 2^0
    # (0x7F), amax 0.5 -> 2^-3 (0x7C)
    assert q.scales.shape == (2, 2) and q.scales.tolist() == [[0x7E, 0x7F], [0x7D, 0x7C]]
    assert q.words.shape == (64, 2) and q.axis == 0
    # 3 / 2^-1 = 6 (code 7), 1 / 2^-2 = 4 (code 6), 6 / 1 = 6, 0.5 / 2^-3 = 4
    assert (q.words[0, 0], q.words[32, 0], q.words[5, 1], q.words[40, 1]) == (0x7, 0x6, 0x7, 0x6)
    assert np.array_equal(q.dequantize(), B)


def test_round_trip_of_exactly_representable_blocks():
    """A block built as element values times 2^s, its largest element in the top binade of the
    element format, comes back as those element words and the scale word s + 127."""
    rng = np.random.default_rng(3)
    for scheme, elem in (("mxfp8_e4m3", "e4m3"), ("mxfp8_e5m2", "e5m2"), ("mxfp6_e3m2", "e3m2"),
                         ("mxfp6_e2m3", "e2m3"), ("mxfp4", "e2m1x")):
        top = {"e4m3": [256.0, 320.0, 448.0], "e5m2": [32768.0, 57344.0], "e3m2": [16.0, 28.0],
               "e2m3": [4.0, 7.5], "e2m1x": [4.0, 6.0]}[elem]
        small = {"e4m3": [0.0, 2.0**-9, -1.5, 96.0], "e5m2": [2.0**-16, -3.0, 1024.0], "e3m2": [0.0625, -3.5],
                 "e2m3": [0.125, -1.875], "e2m1x": [0.5, -1.5, 3.0]}[elem]
        for s in (-127, -20, 0, 5, 100):
            elements = rng.choice(small + [-v for v in small], size=32)
            elements[rng.integers(32)] = rng.choice(top)
            q = mmasim.quantize(np.ldexp(elements, s), scheme)
            assert q.scales.tolist() == [s + 127], (scheme, s)
            assert np.array_equal(q.element_values(), elements), (scheme, s)
            assert np.array_equal(q.dequantize(), np.ldexp(elements, s))


def test_axis_must_fit_the_blocks():
    with pytest.raises(mmasim.BlockShapeError, match="multiple of the block of 32"):
        mmasim.quantize(np.ones(48), "mxfp8_e4m3")
    with pytest.raises(mmasim.BlockShapeError, match="out of range"):
        mmasim.quantize(np.ones((2, 32)), "mxfp4", axis=2)
    with pytest.raises(mmasim.BlockShapeError, match="integer"):
        mmasim.quantize(np.ones(32), "mxfp4", axis=True)
    with pytest.raises(mmasim.BlockShapeError, match="scalar"):
        mmasim.quantize(1.0, "mxfp4")
    with pytest.raises(mmasim.QuantizeError, match="saturate"):
        mmasim.quantize(np.ones(32), "mxfp4", saturate=True)
    with pytest.raises(mmasim.QuantizeError, match="tile"):
        mmasim.quantize(np.ones(32), "mxfp4", tile=(1, 32))


# --------------------------------------------------------------- on the B200's instructions
def _exact_f32(*pairs) -> int:
    total = sum(Fraction(a) * Fraction(b) for a, b in pairs)
    assert f32(float(total)) is not None and Fraction(float(total)) == total
    return f32(float(total))


def test_mxfp8_words_feed_tcgen05_mxf8f6f4():
    # A: amax 3 -> X = 2^-7; elements x * 128: 384, 128, -64, 32, 1 and 2^-9 (e4m3's smallest)
    # B: amax 1 -> X = 2^-8; elements x * 256: 256, 192, -128, 32, 256 (all e4m3 values)
    a = block(3.0, 1.0, -0.5, 0.25, 2.0**-7, 2.0**-16)
    b = block(1.0, 0.75, -0.5, 0.125, 1.0, 1.0)
    qa, qb = mmasim.quantize(a, "mxfp8_e4m3"), mmasim.quantize(b, "mxfp8_e4m3")
    assert qa.scales.tolist() == [0x78] and qb.scales.tolist() == [0x77]
    m = mmasim.MMA("B200", MXF8F6F4.format("e4m3", "e4m3"))
    d = m.dot(qa.words, qb.words, 0, scale_a=qa.scales, scale_b=qb.scales)
    # 3 + 0.75 + 0.25 + 0.03125 + 2^-7 + 2^-16: 23 bits from 2^1 to 2^-16, exact in f32 and in the
    # datapath's 25-bit window
    assert int(d) == _exact_f32(*zip(a, b)) == f32(4.03125 + 2.0**-7 + 2.0**-16)


def test_mxfp6_and_mxfp4_in_the_byte_container_feed_mxf8f6f4():
    a = block(3.5, -0.25, 1.0)             # e3m2: amax 3.5 -> X = 2^-3; 28, -2, 8
    b = block(1.5, 2.0, 0.75)              # e2m1 (byte container): amax 2 -> X = 2^-1; 3, 4, 1.5
    qa = mmasim.quantize(a, "mxfp6_e3m2")
    qb = mmasim.quantize(b, "mxfp4", container="e2m1")
    assert qb.container == "e2m1" and qb.words[:3].tolist() == [0x5 << 2, 0x6 << 2, 0x3 << 2]
    m = mmasim.MMA("B200", MXF8F6F4.format("e3m2", "e2m1"))
    d = m.dot(qa.words, qb.words, 0, scale_a=qa.scales, scale_b=qb.scales)
    assert int(d) == _exact_f32(*zip(a, b)) == f32(5.25 - 0.5 + 0.75)


def test_mxfp4_words_feed_tcgen05_mxf4():
    # K = 64, two blocks.  A block 0: amax 6 -> X = 1; block 1: amax 0.75 -> X = 2^-3 (x * 8 = 6, 2,
    # -0.5).  B block 0: amax 1 -> X = 2^-2 (4, 2, 0.5, 4); block 1: amax 4 -> X = 1.
    a = np.concatenate([block(6.0, -3.0, 1.5, 0.5), block(0.75, 0.25, -0.0625)])
    b = np.concatenate([block(1.0, 0.5, 0.125, 1.0), block(4.0, -3.0, 1.5)])
    qa, qb = mmasim.quantize(a, "mxfp4"), mmasim.quantize(b, "mxfp4")
    assert qa.scales.tolist() == [0x7F, 0x7C] and qb.scales.tolist() == [0x7D, 0x7F]
    d = mmasim.MMA("B200", MXF4).dot(qa.words, qb.words, 0, scale_a=qa.scales, scale_b=qb.scales)
    assert int(d) == _exact_f32(*zip(a, b)) == f32(5.1875 + 2.15625)


def test_mx_matrices_feed_gemm_with_scale_a_and_scale_b():
    """A (M, K) along axis -1 and B (K, N) along axis 0: their scales are gemm's scale_a
    (M, K / 32) and scale_b (K / 32, N).  Integers in [-7, 7] are exact in mxfp8_e4m3 whatever the
    block's amax (x * 2^(8 - floor(log2 amax)) <= 7 * 64 = 448), so D is the integer product."""
    rng = np.random.default_rng(11)
    A = rng.integers(-7, 8, size=(128, 64))
    B = rng.integers(-7, 8, size=(64, 8))
    qa = mmasim.quantize(A.astype(np.float64), "mxfp8_e4m3")
    qb = mmasim.quantize(B.astype(np.float64), "mxfp8_e4m3", axis=0)
    assert qa.scales.shape == (128, 2) and qb.scales.shape == (2, 8)
    D = mmasim.gemm(qa.words, qb.words, np.zeros((128, 8), dtype=np.uint32), arch="B200",
                    instruction=MXF8F6F4.format("e4m3", "e4m3"), scale_a=qa.scales, scale_b=qb.scales)
    expect = (A @ B).astype(np.float32).view(np.uint32)
    assert np.array_equal(D, expect)
