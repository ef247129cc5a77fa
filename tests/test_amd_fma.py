"""The "fma" accumulator: chains of correctly rounded fused multiply-adds (docs/datapaths.md section 5).

Expected words come from IEEE 754 worked by hand (comments) or from the
independent Fraction reference in ieee_reference.py -- never from mmasim.
The models are AMD's f32/f64 MFMA instructions, which are pure FMA chains.
"""

import struct

import numpy as np
import pytest

import mmasim
from helpers import f32
from ieee_reference import F32, F64, NAN, fma as ref_fma, round_rne, value


def f64(x: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def F32_FMA(k=1):
    return mmasim.MMA("CDNA3", {1: "f32_32x32x1_2b_f32", 2: "f32_32x32x2_f32", 4: "f32_16x16x4_f32"}[k])


def F64_FMA(k=4):
    return mmasim.MMA("CDNA3", "f64_16x16x4_f64")


def fma32(a, b, c):
    return int(F32_FMA().dot([a], [b], c))


def fma64(a, b, c):
    nz, one = f64(-0.0), f64(1.0)
    # one real step, then three steps that add -0 * 1 (x + -0 = x for every x, -0 and +0 included)
    words = lambda xs: np.array(xs, dtype=np.uint64)
    return int(F64_FMA().dot(words([a, nz, nz, nz]), words([b, one, one, one]), words(c)))


# ------------------------------------------------------------ hand-worked facts
def test_f32_fma_is_not_f64_rounding_then_f32_rounding():
    # a = 1 + 2^-23, b = 2^-24 (1 - 2^-23), c = 1 + 2^-23:
    # a*b + c = 1 + 2^-23 + 2^-24 - 2^-70, just below the midpoint of
    # 1 + 2^-23 and 1 + 2^-22: RNE gives 1 + 2^-23 (0x3F800001).  Rounding
    # to f64 first lands exactly on the midpoint, then ties-to-even gives 0x3F800002.
    a, b, c = 1 + 2.0**-23, 2.0**-24 * (1 - 2.0**-23), 1 + 2.0**-23
    naive = np.float32(np.float64(a) * np.float64(b) + np.float64(c)).view(np.uint32)
    assert int(naive) == 0x3F800002
    assert fma32(f32(a), f32(b), f32(c)) == 0x3F800001


def test_f32_fma_product_overflow_is_not_intermediate():
    # a*b = 1.5*2^127 * 2 = 3*2^127 is past f32, but c = -(2^128 - 2^104)
    # brings the exact sum back to 2^127 + 2^104 = 0x7F000001.
    assert fma32(0x7F400000, f32(2.0), 0xFF7FFFFF) == 0x7F000001


def test_f32_fma_overflow_gives_inf():
    assert fma32(0x7F400000, f32(2.0), 0) == 0x7F800000
    assert fma32(0x7F400000, f32(-2.0), 0) == 0xFF800000


def test_f32_fma_subnormal_results_round_to_nearest_even():
    # 2^-100 * 1.5*2^-49 = 1.5*2^-149: midway between 2^-149 and 2^-148 -> 2^-148 (word 2)
    assert fma32(f32(2.0**-100), f32(1.5 * 2.0**-49), 0) == 0x00000002
    # 2^-150 is midway between 0 and 2^-149: ties to the even 0, keeping the sign
    assert fma32(f32(2.0**-100), f32(2.0**-50), 0) == 0x00000000
    assert fma32(f32(-(2.0**-100)), f32(2.0**-50), 0) == 0x80000000
    # 2^-150 + 2^-173 is just above the midpoint -> 2^-149
    assert fma32(f32(2.0**-100), f32(2.0**-50 * (1 + 2.0**-23)), 0) == 0x00000001


def test_f32_fma_signed_zeros():
    assert fma32(f32(1.0), 0x80000000, 0x80000000) == 0x80000000   # -0 + -0 = -0
    assert fma32(f32(1.0), 0x80000000, 0x00000000) == 0x00000000   # -0 + +0 = +0
    assert fma32(f32(1.0), f32(1.0), f32(-1.0)) == 0x00000000      # exact cancellation: +0
    assert fma32(f32(-1.0), f32(1.0), f32(1.0)) == 0x00000000


def test_f32_fma_specials():
    inf, ninf = 0x7F800000, 0xFF800000
    nan_out = lambda w: (w & 0x7F800000) == 0x7F800000 and w & 0x7FFFFF
    assert nan_out(fma32(inf, 0, f32(1.0)))            # inf x 0
    assert nan_out(fma32(inf, f32(1.0), ninf))         # inf - inf
    assert nan_out(fma32(0x7FC00001, f32(1.0), f32(1.0)))
    assert fma32(inf, f32(-2.0), f32(1.0)) == ninf
    assert fma32(0x7F7FFFFF, 0x7F7FFFFF, ninf) == ninf  # finite product, inf C


def test_f32_chain_rounds_every_step():
    # K = 2: c = fma(1, 2^-24, 1) = 1 (tie to even), then fma(1, 2^-24, 1) = 1 again;
    # one exact sum would be 1 + 2^-23.
    m = F32_FMA(2)
    assert int(m.dot([f32(1.0)] * 2, [f32(2.0**-24)] * 2, f32(1.0))) == f32(1.0)


def test_f64_fma_product_overflow_is_not_intermediate():
    # (1.5 * 2^1023) * 2 - (2^1024 - 2^971) = 2^1023 + 2^971: word 0x7FE0000000000001
    big = f64(1.5 * 2.0**1023)
    assert fma64(big, f64(2.0), f64(-1.7976931348623157e308)) == 0x7FE0000000000001
    assert fma64(big, f64(2.0), 0) == 0x7FF0000000000000


def test_f64_fma_is_not_double_rounded():
    # a = 1 + 2^-52, b = 2^-53 (1 - 2^-52), c = 1 + 2^-52: just below the
    # midpoint of 1 + 2^-52 and 1 + 2^-51 -> 1 + 2^-52.
    a, b, c = 1 + 2.0**-52, 2.0**-53 * (1 - 2.0**-52), 1 + 2.0**-52
    assert fma64(f64(a), f64(b), f64(c)) == f64(1 + 2.0**-52)


def test_f64_fma_subnormal_and_tiny_products():
    # 2^-600 * 2^-475 = 2^-1075: midway between 0 and 2^-1074 -> +0;
    # 1.5 * 2^-1075 is 0.75 of 2^-1074 -> 2^-1074 (word 1)
    assert fma64(f64(2.0**-600), f64(2.0**-475), 0) == 0
    assert fma64(f64(2.0**-600), f64(1.5 * 2.0**-475), 0) == 1
    # a product far below the subnormal range next to a subnormal C: C, exactly
    assert fma64(f64(2.0**-600), f64(2.0**-600), 5) == 5
    # subnormal operands: 2^-1074 * 2^60 = 2^-1014, plus -2^-1014 -> +0
    assert fma64(1, f64(2.0**60), f64(-(2.0**-1014))) == 0


def test_f64_fma_signed_zeros():
    nz = 1 << 63
    assert fma64(f64(1.0), nz, nz) == nz
    assert fma64(f64(-(2.0**-600)), f64(2.0**-600), nz) == nz  # -2^-1200 rounds to -0


# ------------------------------------------------------- Fraction reference sweep
def _random_words(rng, n, fmt, centre=None):
    """Random words: a sixth special exponent fields, 45 % of exponents near
    ``centre`` (a biased exponent; default 1.0), the rest uniform."""
    p, w = fmt["p"], fmt["width"]
    ebits = w - p
    top = (1 << ebits) - 1
    centre = fmt["emax"] if centre is None else centre
    e = rng.integers(0, top + 1, n)
    pick = rng.random(n)
    e = np.where(pick < 0.15, rng.choice([0, 1, 2, top, top - 1, top - 2], n), e)
    e = np.where((pick > 0.15) & (pick < 0.6), np.clip(centre + rng.integers(-40, 40, n), 0, top), e)
    frac = rng.integers(0, 1 << (p - 1), n, dtype=np.int64).astype(object)
    frac = np.where(rng.random(n) < 0.1, 0, frac)
    sign = rng.integers(0, 2, n)
    return [int(s) << (w - 1) | int(x) << (p - 1) | int(f) for s, x, f in zip(sign, e, frac)]


def _same(got: int, want, fmt) -> bool:
    if want == NAN:
        return value(got, fmt) == NAN
    return got == want


@pytest.mark.parametrize("fmt,model,k", [(F32, F32_FMA, 4), (F64, F64_FMA, 4)], ids=["f32", "f64"])
def test_fma_chain_matches_exact_fraction_reference(fmt, model, k):
    rng = np.random.default_rng(20261130 + fmt["width"])
    n = 1500
    a = np.array([_random_words(rng, n, fmt) for _ in range(k)], dtype=object).T
    b = np.array([_random_words(rng, n, fmt) for _ in range(k)], dtype=object).T
    c = _random_words(rng, n, fmt)
    # a quarter of the rows: products near the subnormal range, C tiny or subnormal
    tiny = slice(1, n, 4)
    half = (fmt["emax"] - fmt["p"]) // 2
    a[tiny] = np.array([_random_words(rng, len(c[tiny]), fmt, half) for _ in range(k)], dtype=object).T
    b[tiny] = np.array([_random_words(rng, len(c[tiny]), fmt, half) for _ in range(k)], dtype=object).T
    c[tiny] = _random_words(rng, len(c[tiny]), fmt, 2)
    # cancellation-heavy third: C = -(a0*b0) rounded, nudged by a few ulps
    for i in range(0, n, 3):
        va, vb = value(int(a[i, 0]), fmt), value(int(b[i, 0]), fmt)
        if NAN not in (va, vb) and not isinstance(va, float) and not isinstance(vb, float):
            w = round_rne(-va * vb, fmt)
            c[i] = (w + int(rng.integers(-2, 3))) % (1 << fmt["width"])
    dtype = np.uint64
    got = model(k).dot(np.array(a.astype(np.uint64), dtype=dtype), np.array(b.astype(np.uint64), dtype=dtype),
                      np.array(c, dtype=np.uint64))
    bad = []
    for i in range(n):
        acc = c[i]
        for j in range(k):
            acc = ref_fma(int(a[i, j]), int(b[i, j]), acc if acc != NAN else (1 << fmt["width"]) - 1, fmt)
        if not _same(int(got[i]), acc, fmt):
            bad.append(i)
    assert not bad, f"{len(bad)} mismatches, first row {bad[0]}"
