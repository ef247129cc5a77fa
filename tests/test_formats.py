"""Decoders and output encoders against independent references (ml_dtypes, numpy casts, struct)."""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from mmasim.arith.decode import FINITE, INF, NAN, ZERO, decode_float, decode_int
from mmasim.arith.encode import BUILTIN_ENCODINGS
from mmasim.arith.formats import BUILTIN_FORMATS
from mmasim.arith.intmath import bit_length

FMT = {f.key: f for f in BUILTIN_FORMATS}
ENC = {e.key: e for e in BUILTIN_ENCODINGS}


def values(dec):
    v = dec.m.astype(np.float64) * np.exp2(dec.q.astype(np.float64))
    return np.where(dec.sign == 1, -v, v)


@pytest.mark.parametrize("key,dtype,bits,shift", [
    ("f16", np.float16, 16, 0), ("bf16", ml_dtypes.bfloat16, 16, 0),
    ("e4m3", ml_dtypes.float8_e4m3fn, 8, 0), ("e5m2", ml_dtypes.float8_e5m2, 8, 0),
    ("e3m2", ml_dtypes.float6_e3m2fn, 6, 0), ("e2m3", ml_dtypes.float6_e2m3fn, 6, 0),
    ("e2m1", ml_dtypes.float4_e2m1fn, 4, 2), ("e2m1x", ml_dtypes.float4_e2m1fn, 4, 0),
    ("e4m3fnuz", ml_dtypes.float8_e4m3fnuz, 8, 0), ("e5m2fnuz", ml_dtypes.float8_e5m2fnuz, 8, 0),
    ("ue8m0", ml_dtypes.float8_e8m0fnu, 8, 0),
])
def test_decoder_matches_ml_dtypes_on_every_code(key, dtype, bits, shift):
    codes = np.arange(2**bits, dtype=np.uint64)
    dec = decode_float(FMT[key], codes << np.uint64(shift))
    ref = codes.astype(np.uint16 if bits == 16 else np.uint8).view(dtype).astype(np.float64) if bits in (8, 16) else \
        np.array([float(np.array(c, np.uint8).view(dtype)) for c in codes])
    assert np.array_equal(dec.cls == NAN, np.isnan(ref))
    assert np.array_equal(dec.cls == INF, np.isinf(ref))
    fin = np.isfinite(ref)
    assert np.array_equal(values(dec)[fin], ref[fin])
    assert np.array_equal((dec.cls == ZERO)[fin], ref[fin] == 0)


def test_padding_bits_are_ignored():
    codes = np.arange(16, dtype=np.uint64) << np.uint64(2)
    for pad in (0x1, 0x2, 0x3, 0x40, 0x80, 0xC3):
        a = decode_float(FMT["e2m1"], codes)
        b = decode_float(FMT["e2m1"], codes | np.uint64(pad))
        assert np.array_equal(values(a), values(b))
    six = np.arange(64, dtype=np.uint64)
    for key in ("e3m2", "e2m3"):
        assert np.array_equal(values(decode_float(FMT[key], six)), values(decode_float(FMT[key], six | np.uint64(0xC0))))


def test_raw_exponent_is_leading_position_or_min_normal():
    d = decode_float(FMT["f16"], np.array([0x3C00, 0x0001, 0x0000, 0x7BFF]))
    assert list(d.r) == [0, -14, -14, 15]
    assert list(d.q) == [-10, -24, -24, 5]
    s = decode_float(FMT["ue4m3"], np.array([0x01, 0x38, 0xB8, 0x7F, 0x00]))
    assert list(s.r[:3]) == [-6, 0, 0] and list(s.cls) == [FINITE, FINITE, FINITE, NAN, ZERO]


def test_tf32_reads_bits_31_13_and_classifies_after_truncation():
    d = decode_float(FMT["tf32"], np.array([0x3F801FFF, 0x7F800001, 0x7F802000, 0xFFFFFFFF]))
    assert values(d)[0] == 1.0
    assert list(d.cls) == [FINITE, INF, NAN, NAN]


def test_f64_and_f32_decode_like_struct():
    rng = np.random.default_rng(1)
    w = rng.integers(0, 2**63, 2000, dtype=np.uint64) | (rng.integers(0, 2, 2000).astype(np.uint64) << np.uint64(63))
    ref = w.view(np.float64)
    d = decode_float(FMT["f64"], w)
    fin = np.isfinite(ref)
    exact = [Fraction(int(m)) * Fraction(2) ** int(q) * (-1 if s else 1) for m, q, s in zip(d.m[fin], d.q[fin], d.sign[fin])]
    assert exact == [Fraction(x) for x in ref[fin]]


def test_integer_decoding():
    d = decode_int(FMT["s8"], np.array([0x00, 0x7F, 0x80, 0xFF]))
    assert list(d.signed_m()) == [0, 127, -128, -1]
    u = decode_int(FMT["u8"], np.array([0x80, 0xFF]))
    assert list(u.signed_m()) == [128, 255]


def test_bit_length_is_exact_near_powers_of_two():
    xs = [0, 1, 2, 3, 2**52, 2**53 - 1, 2**53, 2**53 + 1, 2**62 - 1, 2**62, 2**63 - 1]
    assert list(bit_length(np.array(xs, dtype=np.int64))) == [x.bit_length() for x in xs]
    # around every power of two (where a 53-bit float rounds up into the next one),
    # random values, and 0 for negative values
    p = [1 << s for s in range(63)]
    rng = np.random.default_rng(7)
    xs = p + [x - 1 for x in p] + [x + 1 for x in p[:-1]] + [x - 2 for x in p[2:]] + \
        [int(v) for v in rng.integers(0, 1 << 62, 2000)] + [-1, -(1 << 62), -(1 << 63)]
    assert list(bit_length(np.array(xs, dtype=np.int64))) == [max(x, 0).bit_length() for x in xs]


def test_rne_f16_matches_numpy_rounding_of_exact_values():
    rng = np.random.default_rng(2)
    mag = rng.integers(1, 2**40, 5000)
    e0 = rng.integers(-70, 10, 5000)
    neg = rng.integers(0, 2, 5000).astype(bool)
    words = ENC["rne-f16"].pack(neg, mag, e0)
    # numpy's float64 -> float16 cast rounds to nearest even from the exact double
    exact = mag.astype(np.float64) * np.exp2(e0.astype(np.float64))   # exact: mag < 2^53
    with np.errstate(over="ignore"):
        ref = np.where(neg, -exact, exact).astype(np.float16).view(np.uint16)
    ref = np.where((ref & 0x7FFF) == 0, 0, ref)   # fixed-point results give +0
    assert np.array_equal(words, ref)


def test_rne_f32_matches_numpy_rounding():
    rng = np.random.default_rng(4)
    mag = rng.integers(1, 2**52, 5000)
    e0 = rng.integers(-200, 80, 5000)
    words = ENC["rne-f32"].pack(np.zeros(5000, bool), mag, e0)
    exact = mag.astype(np.float64) * np.exp2(e0.astype(np.float64))
    with np.errstate(over="ignore"):
        ref = exact.astype(np.float32).view(np.uint32)
    assert np.array_equal(words, ref)


def _rz_ref(mag, e0, frac):
    q = Fraction(mag) * Fraction(2) ** e0
    if q == 0:
        return 0
    e = max(q.numerator.bit_length() - q.denominator.bit_length(), -200)
    while Fraction(2) ** e > q:
        e -= 1
    while Fraction(2) ** (e + 1) <= q:
        e += 1
    if e > 127:
        return 0x7F800000
    e = max(e, -126)
    unit = Fraction(2) ** (e - frac)
    kept = int(q / unit)                       # truncation
    if e == -126 and kept < 2**frac:
        field = kept << (23 - frac)
        return field
    return ((e + 127) << 23) | ((kept - 2**frac) << (23 - frac))


@pytest.mark.parametrize("key,frac", [("rz-f32", 23), ("rz-e8m13", 13)])
def test_rz_encoders_truncate_like_exact_rationals(key, frac):
    rng = np.random.default_rng(5)
    mag = rng.integers(1, 2**45, 3000)
    e0 = rng.integers(-200, 100, 3000)
    words = ENC[key].pack(np.zeros(3000, bool), mag, e0)
    assert [int(w) for w in words] == [_rz_ref(int(m), int(e), frac) for m, e in zip(mag, e0)]


def test_specials_override_and_zero_is_positive():
    enc = ENC["rz-f32"]
    w = enc.pack(np.array([True, True, False]), np.array([0, 5, 5]), np.array([0, 0, 0]),
                 nan=np.array([False, False, True]), inf=np.array([False, True, False]),
                 inf_neg=np.array([False, True, False]))
    assert [int(x) for x in w] == [0, 0xFF800000, 0x7FFFFFFF]


def test_s32_wrap_and_saturate():
    t = np.array([2**31, -(2**31) - 1, 5, -5])
    assert [int(x) for x in ENC["s32-wrap"].pack_int(t)] == [0x80000000, 0x7FFFFFFF, 5, 0xFFFFFFFB]
    assert [int(x) for x in ENC["s32-sat"].pack_int(t)] == [0x7FFFFFFF, 0x80000000, 5, 0xFFFFFFFB]
