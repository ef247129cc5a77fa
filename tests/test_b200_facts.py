"""B200 tcgen05.mma facts beyond the TF32 ladder (T1; docs/datapaths.md section 6).

Expected words come from the stated rules, worked by hand in the comments, or
from independent decoders (ml_dtypes) — never from running mmasim.
"""

import itertools

import ml_dtypes
import numpy as np
import pytest

import mmasim
from helpers import f16, f32, f32_value

E4M3_ONE = 0x38          # 1.0 in e4m3
UE8M0_ONE = 0x7F         # 2^0
UE4M3_ONE = 0x38         # 1.0 in ue4m3
FP4 = {0.0: 0x0, 0.5: 0x1, 1.0: 0x2, 1.5: 0x3, 2.0: 0x4, 3.0: 0x5, 4.0: 0x6, 6.0: 0x7}


def fp4(x):
    return FP4[abs(x)] | (0x8 if x < 0 else 0)


# ------------------------------------------------------------------- integer
def test_i8_wraps_or_saturates_the_exact_s32_sum():
    a = np.full(32, 127)
    b = np.full(32, 127)
    c = 0x7FFFFFFF                               # 2^31 - 1
    total = (2**31 - 1) + 32 * 127 * 127         # exact: 2^31 - 1 + 516128
    wrap = mmasim.MMA("B200", "tcgen05.mma.kind::i8", a_type="s8", b_type="s8")
    sat = mmasim.MMA("B200", "tcgen05.mma.kind::i8", a_type="s8", b_type="s8", saturate=True)
    assert int(wrap.dot(a, b, c)) == total % 2**32 == 0x8007E01F
    assert int(sat.dot(a, b, c)) == 0x7FFFFFFF
    low = 0x80000000                             # -2^31
    neg = np.full(32, 0x81)                      # s8 -127
    assert int(sat.dot(neg, b, low)) == 0x80000000
    assert int(wrap.dot(neg, b, low)) == (-(2**31) - 516128) % 2**32


def test_i8_signedness_of_each_operand():
    ff = np.full(32, 0xFF)
    one = np.full(32, 1)
    assert int(mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.u8.u8").dot(ff, ff, 0)) == 32 * 255 * 255
    assert int(mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.u8").dot(ff, one, 0)) == (-32) % 2**32
    assert int(mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.u8.s8").dot(one, ff, 0)) == (-32) % 2**32
    assert int(mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.s8").dot(ff, ff, 5)) == 37


# ------------------------------------------------------------------- sparse
@pytest.mark.parametrize("kind,fmt,one,k,unit", [
    ("tf32", "tf32", f32(1.0), 16, 2),
    ("f16", "f16", f16(1.0), 32, 4),
    ("f8f6f4", "e4m3", E4M3_ONE, 64, 4),
])
def test_sparse_equals_masked_dense_even_with_nan_in_unselected_lanes(kind, fmt, one, k, unit):
    rng = np.random.default_rng(7)
    sparse = mmasim.MMA("B200", f"tcgen05.mma.sp.kind::{kind}", a_type=fmt, b_type=fmt, d_type="f32")
    dense = mmasim.MMA("B200", f"tcgen05.mma.kind::{kind}", a_type=fmt, b_type=fmt, d_type="f32")
    nan = {"tf32": 0x7FC00000, "f16": 0x7E00, "e4m3": 0x7F}[fmt]
    selectors = [0x4, 0xE] if unit == 2 else [0x4, 0x8, 0xC, 0x9, 0xD, 0x6, 0xE]
    for trial in range(20):
        sels = rng.choice(selectors, size=k // unit)
        keep = np.zeros(k, dtype=bool)
        for i, s in enumerate(sels):
            picks = [0] if (unit == 2 and s == 0x4) else [1] if unit == 2 else [s & 3, s >> 2]
            keep[[i * unit + p for p in picks]] = True
        vals = rng.integers(-4, 5, size=k) * 0.25
        to_word = {"tf32": f32, "f16": f16, "e4m3": lambda x: int(np.array(x, ml_dtypes.float8_e4m3fn).view(np.uint8))}[fmt]
        a = np.array([to_word(float(v)) for v in vals])
        b = np.full(k, one)
        a_nan = np.where(keep, a, nan)            # NaN only where unselected
        md = 0
        for i, s in enumerate(sels):
            md |= int(s) << (4 * i)
        words = [(md >> (32 * w)) & 0xFFFFFFFF for w in range((k // unit + 7) // 8)]
        got = sparse.dot(a_nan, b, f32(1.0), sparse_metadata=np.array(words))
        masked = np.where(keep, a, 0)
        stored = a[keep]
        expected = dense.dot(masked[:dense.k] if dense.k == k else masked, b[:k], f32(1.0)) if dense.k == k else None
        # dense K is half the sparse logical K: compare with the compacted dense vector
        expected = dense.dot(stored, b[: k // 2], f32(1.0))
        assert int(got) == int(expected)
        # and against the exact value (small multiples of 1/4 sum exactly)
        assert f32_value(int(got)) == 1.0 + float(vals[keep].sum())


def test_illegal_sparse_selector_is_an_error():
    m = mmasim.MMA("B200", "tcgen05.mma.sp.kind::f16", a_type="f16", b_type="f16", d_type="f32")
    for bad in (0x0, 0x1, 0x5, 0xF, 0x3):
        with pytest.raises(mmasim.SparseMetadataError, match="illegal sparse selector"):
            m.dot(np.zeros(32, dtype=np.uint16), np.zeros(32, dtype=np.uint16), 0,
                  sparse_metadata=[0x44444440 | bad])


def test_sparse_tf32_selectors_pick_one_of_two():
    m = mmasim.MMA("B200", "tcgen05.mma.sp.kind::tf32")
    a = np.array([f32(float(i + 1)) for i in range(16)])
    b = np.full(16, f32(1.0))
    # chunks of 2: 0x4 keeps element 0, 0xE element 1
    md_first = int("".join(["4"] * 8), 16)
    md_second = int("".join(["E"] * 8), 16)
    assert f32_value(int(m.dot(a, b, 0, sparse_metadata=[md_first]))) == sum(range(1, 16, 2))
    assert f32_value(int(m.dot(a, b, 0, sparse_metadata=[md_second]))) == sum(range(2, 17, 2))
    with pytest.raises(mmasim.SparseMetadataError):
        m.dot(a, b, 0, sparse_metadata=[0x44444448])


def test_sparse_block_scaled_compacts_and_scales_count_compacted_positions():
    # logical K 64 of mxf8f6f4 uses ONE ue8m0 scale per operand (32 compacted elements)
    m = mmasim.MMA("B200", "tcgen05.mma.sp.kind::mxf8f6f4", a_type="e4m3", b_type="e4m3")
    assert m.datapath.blocks == 1
    a = np.full(64, E4M3_ONE)
    b = np.full(64, E4M3_ONE)
    md = [0x44444444, 0x44444444]          # keep elements 0,1 of every chunk of 4
    d = m.dot(a, b, 0, scale_a=[0x80], scale_b=[0x7F], sparse_metadata=md)   # scale 2 * 1
    assert f32_value(int(d)) == 32 * 2.0
    with pytest.raises(mmasim.ScaleError):
        m.dot(a, b, 0, scale_a=[0x80, 0x7F], scale_b=[0x7F, 0x7F], sparse_metadata=md)


# ------------------------------------------------------------- block scaled
def test_nan_scale_in_a_used_block_gives_canonical_nan():
    mx = mmasim.MMA("B200", "tcgen05.mma.kind::mxf8f6f4", a_type="e4m3", b_type="e4m3")
    a = np.full(32, E4M3_ONE)
    assert int(mx.dot(a, a, 0, scale_a=[0xFF], scale_b=[UE8M0_ONE])) == 0x7FFFFFFF
    nv = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    x = np.full(64, fp4(1.0))
    scales = [UE4M3_ONE] * 4
    assert int(nv.dot(x, x, 0, scale_a=[UE4M3_ONE, 0x7F, UE4M3_ONE, UE4M3_ONE], scale_b=scales)) == 0x7FFFFFFF
    # ue4m3 ignores bit 7: 0xFF is the same NaN, 0xB8 is 1.0
    assert int(nv.dot(x, x, 0, scale_a=[0xFF] + scales[1:], scale_b=scales)) == 0x7FFFFFFF
    assert f32_value(int(nv.dot(x, x, 0, scale_a=[0xB8] * 4, scale_b=scales))) == 64.0


@pytest.mark.parametrize("instruction,qual,scale", [
    ("tcgen05.mma.kind::mxf8f6f4", {"a_type": "e4m3", "b_type": "e2m1"}, 0x7F),
    ("tcgen05.kind::mxf4.block_scale", {}, 0x7F),
    ("tcgen05.kind::mxf4nvf4.2X", {}, 0x7F),
    ("tcgen05.kind::mxf4nvf4.4X", {"scale_type": "ue8m0"}, 0x7F),
    ("tcgen05.kind::mxf4nvf4.4X", {}, UE4M3_ONE),
])
def test_block_scaled_with_no_nonzero_product_returns_c(instruction, qual, scale):
    m = mmasim.MMA("B200", instruction, **qual)
    zeros = np.zeros(m.k, dtype=np.uint8)
    s = [scale] * m.datapath.blocks
    # all-zero products and C = -0 give +0
    assert int(m.dot(zeros, zeros, 0x80000000, scale_a=s, scale_b=s)) == 0
    # ...and any C comes back unchanged, even one far below the scale floor
    for c in (0x00000001, 0x80000001, f32(-3.5), f32(2.0**-140)):
        assert int(m.dot(zeros, zeros, c, scale_a=s, scale_b=s)) == c


def test_mxf8f6f4_folds_scales_into_products():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::mxf8f6f4", a_type="e4m3", b_type="e5m2")
    a = np.full(32, E4M3_ONE)                 # 1.0
    b = np.full(32, 0x3C)                     # e5m2 1.0
    # scales 2^3 and 2^-5: every product is 2^-2
    assert f32_value(int(m.dot(a, b, f32(1.0), scale_a=[0x82], scale_b=[0x7A]))) == 1.0 + 32 * 0.25


def test_nvfp4_products_are_summed_in_aligned_groups_of_4_before_truncation():
    """Hand-derived from the NVFP4 rule (docs/datapaths.md section 6).

    Block 0 (scales 448 x 448) holds +0.5*0.5 and -0.5*0.5: they cancel but set
    the max product raw 0+0+8+8 = 16 and the max scale raw 8+8 = 16, so the
    quantum is max(16-39, 16-35) = -19.  Block 1 (scales 2^-9 x 2^-9) holds
    three products 0.5*0.5*2^-18 = 2^-20 at k = 16, 17, 18 (one aligned group
    of four) and one more at k = 20 (the next group).  Group sums: 3*2^-20 =
    1.5 quanta -> 1; 2^-20 -> 0.  D = 2^-19.  (Groups of 16 would give
    2 quanta = 2^-18; truncating each product alone would give 0.)
    """
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    a = np.zeros(64, dtype=np.uint8)
    b = np.zeros(64, dtype=np.uint8)
    a[0], b[0] = fp4(0.5), fp4(0.5)
    a[1], b[1] = fp4(-0.5), fp4(0.5)
    for k in (16, 17, 18, 20):
        a[k], b[k] = fp4(0.5), fp4(0.5)
    scales = [0x7E, 0x01, 0x01, 0x01]         # 448, 2^-9, 2^-9, 2^-9
    d = int(m.dot(a, b, 0, scale_a=scales, scale_b=scales))
    assert d == f32(2.0**-19)


def test_nvfp4_c_dominant_merge_truncates_k16_group_sums_at_rc_minus_35():
    """Hand-derived from the C-dominant rule (docs/datapaths.md section 6).

    C = 2^17 (r_c = 17) reaches every product raw, so quantum = 17 - 35 = -18.
    With scale_a = 2^-9 everywhere, scale_b = 2^-9 (block 0) and 7*2^-9
    (block 1), block 0's exact sum is 1201 * 2^-20 (0.5*0.5 + 3*4 + 8 * 6*6 =
    300.25, times 2^-18) and block 1's is 7 * 2169 * 2^-20 = 15183 * 2^-20
    (1.5*1.5 + 15 * 6*6 = 542.25, times 7*2^-18).  In quanta of 2^-18 = 4 units:
    1201 -> 1200 and 15183 -> 15180, total 16380 units < 2^-6 = 16384 units,
    one ulp of C: D = C.  Exactly (and with the non-dominant quantum
    max(17-39, -12-35) = -22) the sum is 16384 units and D would be C + 1 ulp.
    """
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    a = np.zeros(64, dtype=np.uint8)
    b = np.zeros(64, dtype=np.uint8)
    block0 = [(0.5, 0.5), (3.0, 4.0)] + [(6.0, 6.0)] * 8
    block1 = [(1.5, 1.5)] + [(6.0, 6.0)] * 15
    for k, (x, y) in enumerate(block0):
        a[k], b[k] = fp4(x), fp4(y)
    for k, (x, y) in enumerate(block1):
        a[16 + k], b[16 + k] = fp4(x), fp4(y)
    sa = [0x01, 0x01, 0x01, 0x01]
    sb = [0x01, 0x07, 0x01, 0x01]
    c = f32(2.0**17)
    assert int(m.dot(a, b, c, scale_a=sa, scale_b=sb)) == c
    # without C dominance (C below the products' reach) nothing is lost: C = 0
    exact = 16384 * 2.0**-20
    assert f32_value(int(m.dot(a, b, 0, scale_a=sa, scale_b=sb))) == exact


# ------------------------------------------------------------ mixed formats
F8F6F4 = {
    "e4m3": (ml_dtypes.float8_e4m3fn, 0),
    "e5m2": (ml_dtypes.float8_e5m2, 0),
    "e3m2": (ml_dtypes.float6_e3m2fn, 0),
    "e2m3": (ml_dtypes.float6_e2m3fn, 0),
    "e2m1": (ml_dtypes.float4_e2m1fn, 2),   # bits 5:2 of the byte
}


def _codes(fmt):
    dtype, shift = F8F6F4[fmt]
    bits = {"e4m3": 8, "e5m2": 8, "e3m2": 6, "e2m3": 6, "e2m1": 4}[fmt]
    codes = np.arange(2**bits, dtype=np.uint8)
    values = codes.view(dtype).astype(np.float64) if bits == 8 else np.array(
        [float(np.array(c, dtype=np.uint8).view(dtype)) for c in codes])
    ok = np.isfinite(values)
    return (codes[ok].astype(np.uint64) << np.uint64(shift)), values[ok]


@pytest.mark.parametrize("fa,fb", list(itertools.product(F8F6F4, repeat=2)))
@pytest.mark.parametrize("d", ["f32", "f16"])
def test_mixed_pair_agrees_with_each_decoders_standalone_values(fa, fb, d):
    """Every ordered A/B pair of kind::f8f6f4: a single product a*b (C = 0)
    equals the product of the values ml_dtypes decodes, wherever that product
    is exactly representable in D."""
    m = mmasim.MMA("B200", f"tcgen05.mma.kind::f8f6f4.{d}.{fa}.{fb}")
    wa, va = _codes(fa)
    wb, vb = _codes(fb)
    rng = np.random.default_rng(len(fa) * 31 + len(fb))
    ia = rng.integers(0, len(wa), 400)
    ib = rng.integers(0, len(wb), 400)
    a = np.zeros((400, 32), dtype=np.uint64)
    b = np.zeros((400, 32), dtype=np.uint64)
    pos = rng.integers(0, 32, 400)
    a[np.arange(400), pos] = wa[ia]
    b[np.arange(400), pos] = wb[ib]
    exact = va[ia] * vb[ib]                     # exact in float64 (<= 8-bit significands)
    dt = np.float32 if d == "f32" else np.float16
    with np.errstate(over="ignore"):
        rounded = exact.astype(dt)
    rep = rounded.astype(np.float64) == exact
    rep &= np.abs(exact) >= (2.0**-126 if d == "f32" else 2.0**-14)
    rep |= exact == 0
    got = m.dot(a, b, 0)
    expected = np.where(exact == 0, 0, rounded.view(np.uint32 if d == "f32" else np.uint16))
    assert rep.sum() > 100
    assert np.array_equal(got[rep], expected[rep].astype(got.dtype))


@pytest.mark.parametrize("instruction,qual", [
    ("tcgen05.kind::mxf4.block_scale", {}),
    ("tcgen05.kind::mxf4nvf4.2X", {}),
])
def test_mxf4_ue8m0_group_at_or_below_c_is_truncated_relative_to_c(instruction, qual):
    """Hand-derived from the ue8m0 MXF4 rule (docs/datapaths.md section 6).

    C = 2^-9 (r_c = -9).  Block 0 (scales 2^-5 x 2^-5): 2.0*2.0 -> 2^-8, raw
    1+1-10 = -8 > r_c, so C is not dominant; quantum = max(-8-39, -10-35) = -45.
    Block 1 (scales 2^-22 x 2^-22): -1.0*0.5 -> -2^-45, raw 0+0-44 = -44 <= r_c:
    its group is truncated at max(-45, r_c-35 = -44), giving 0.  D = 2^-9 + 2^-8
    = 0x3BC00000 exactly (truncating that group at -45 would give one ulp less).
    """
    m = mmasim.MMA("B200", instruction, **qual)
    a = np.zeros(64, dtype=np.uint8)
    b = np.zeros(64, dtype=np.uint8)
    a[0], b[0] = fp4(2.0), fp4(2.0)
    a[32], b[32] = fp4(-1.0), fp4(0.5)
    s = [0x7A, 0x69]                          # 2^-5, 2^-22
    assert int(m.dot(a, b, f32(2.0**-9), scale_a=s, scale_b=s)) == 0x3BC00000


def test_mxf4_ue8m0_subnormal_result_is_redone_without_tiny_lower_scale_groups():
    """Hand-derived from the ue8m0 MXF4 subnormal rule (docs/datapaths.md section 6).

    Block 0 (scales 2^-70 x 2^-70): 1.0*1.0 -> 2^-140 (raw -140).  Block 1
    (scales 2^-87 x 2^-88): -1.0*1.0 -> -2^-175.  quantum = max(-140-39,
    -140-35) = -175; the sum is 2^35 - 1 quanta, an f32 subnormal that would
    truncate to 511 * 2^-149.  The result being subnormal, the sum is redone
    without block 1's group: its scale raw -175 is below the max -140 and its
    contribution (1 quantum) is below 2^(-174+175) = 2 quanta.  D = 2^-140 =
    512 * 2^-149 = 0x00000200.
    """
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4.block_scale")
    a = np.zeros(64, dtype=np.uint8)
    b = np.zeros(64, dtype=np.uint8)
    a[0], b[0] = fp4(1.0), fp4(1.0)
    a[32], b[32] = fp4(-1.0), fp4(1.0)
    assert int(m.dot(a, b, 0, scale_a=[0x39, 0x28], scale_b=[0x39, 0x27])) == 0x00000200
