"""AMD CDNA v_mfma datapath facts (docs/datapaths.md section 8, source MMA-Sim 2.1.1).

One test per fact, named for it.  Expected words are worked by hand in the
comments from the datapath definitions (and agree with MMA-Sim 2.1.1), or come
from the independent Fraction reference in ieee_reference.py -- never from
running mmasim.
"""

from fractions import Fraction

import numpy as np

import mmasim
from helpers import bf16, f16, f32
from ieee_reference import F32, NAN, round_rne, value
from ieee_reference import fnuz as _fnuz

ONE = f32(1.0)


def fp8(x):   # e4m3fnuz
    return _fnuz(x, 4, 3)


def bf8(x):   # e5m2fnuz
    return _fnuz(x, 5, 2)


def pad(xs, k, fill=0):
    return list(xs) + [fill] * (k - len(xs))


def run(arch, instruction, a, b, c):
    m = mmasim.MMA(arch, instruction)
    return int(m.dot(pad(a, m.k), pad(b, m.k), c))


# ------------------------------------------------------------ CDNA1: E-FDPA
def test_cdna1_f16_exact_sum_breaks_ties_to_even():
    # 1 + 2^-24 is the midpoint of 1 and 1 + 2^-23: ties to even -> 1.0
    assert run("MI100", "f32_4x4x4f16", [f16(1), f16(2**-12)], [f16(1), f16(2**-12)], 0) == 0x3F800000
    # 1 + 3*2^-24 is the midpoint of 1 + 2^-23 and 1 + 2^-22: ties to even -> 1 + 2^-22
    assert run("MI100", "f32_4x4x4f16", [f16(1), f16(1.5 * 2**-12)], [f16(1), f16(2**-11)], 0) == 0x3F800002


def test_cdna1_f16_exact_sum_keeps_a_tiny_term_past_the_tie():
    # 1 + 2^-24 + 2^-40 (2^-20 is an f16 subnormal) is above the midpoint -> 1 + 2^-23
    a = [f16(1), f16(2**-12), f16(2**-20)]
    assert run("MI100", "f32_4x4x4f16", a, a, 0) == 0x3F800001


def test_cdna1_f16_rounds_once_per_chunk_of_four():
    # K = 8 is two chunks: 1 + 2^-24 -> 1.0, then 1.0 + 2^-24 -> 1.0 (one exact sum would give 1 + 2^-23)
    a = [f16(1), f16(2**-12), 0, 0, f16(2**-12)]
    assert run("MI100", "f32_32x32x8f16", a, a, 0) == 0x3F800000


def test_cdna1_bf16_exact_sum_has_no_window():
    # 2^100 - 2^100 + (1 + 2^-23): exact, where any truncating window would lose C
    assert run("MI100", "f32_4x4x2bf16", [bf16(2.0**100), bf16(-(2.0**100))], [bf16(1), bf16(1)],
               f32(1 + 2**-23)) == 0x3F800001


def test_cdna1_bf16_exact_sum_over_240_binades():
    # 2^100 - 2^-140 - 2^100 = -2^-140: an f32 subnormal (2^9 units of 2^-149)
    a, b = [bf16(2.0**100), bf16(-(2.0**-70))], [bf16(1), bf16(2.0**-70)]
    assert run("MI100", "f32_4x4x2bf16", a, b, f32(-(2.0**100))) == 0x80000200


def test_cdna1_nonzero_sum_rounding_to_zero_keeps_its_sign_exact_zero_is_plus():
    a, b = [bf16(2.0**100), bf16(-(2.0**-80))], [bf16(1), bf16(2.0**-80)]
    assert run("MI100", "f32_4x4x2bf16", a, b, f32(-(2.0**100))) == 0x80000000   # -2^-160
    nz = 0x8000
    assert run("MI100", "f32_4x4x2bf16", [nz, nz], [bf16(1), bf16(1)], 0x80000000) == 0  # -0 sums to +0


def test_cdna1_bf16_sum_past_f32_range_is_inf():
    assert run("MI100", "f32_4x4x2bf16", [bf16(2.0**127)] * 2, [bf16(2.0**127), 0], 0) == 0x7F800000


def _ref_efdpa_chain(a, b, c, L):
    """Independent E-FDPA: exact Fraction sum per chunk, one RNE rounding, IEEE-style specials."""
    bfmt = dict(p=8, emin=-126, emax=127, width=16)
    for s in range(0, len(a), L):
        terms = [(value(x, bfmt), value(y, bfmt)) for x, y in zip(a[s:s + L], b[s:s + L])]
        vc = NAN if c == NAN else value(c, F32)
        prods = []
        for x, y in terms:
            if NAN in (x, y):
                prods.append(NAN)
            elif isinstance(x, float) or isinstance(y, float):
                prods.append(NAN if x == 0 or y == 0 else float("inf") * (1 if (x > 0) == (y > 0) else -1))
            else:
                prods.append(x * y)
        allv = prods + [vc]
        infs = {v for v in allv if isinstance(v, float)}
        if NAN in allv or infs == {float("inf"), -float("inf")}:
            c = NAN
        elif infs:
            c = 0x7F800000 if infs == {float("inf")} else 0xFF800000
        else:
            c = round_rne(sum(allv, Fraction(0)), F32)
    return c


def test_cdna1_bf16_matches_exact_fraction_reference():
    rng = np.random.default_rng(908)
    n, k = 2000, 4
    e = np.where(rng.random((n, k)) < 0.5, rng.integers(0, 256, (n, k)), 127 + rng.integers(-60, 60, (n, k)))
    words = lambda e: (rng.integers(0, 2, e.shape) << 15) | (e << 7) | rng.integers(0, 128, e.shape)
    a, b = words(e), words(np.where(rng.random((n, k)) < 0.5, rng.integers(0, 256, (n, k)), 127 + rng.integers(-60, 60, (n, k))))
    ce = np.where(rng.random(n) < 0.5, rng.integers(0, 256, n), 127 + rng.integers(-100, 100, n))
    c = (rng.integers(0, 2, n) << 31) | (ce << 23) | rng.integers(0, 1 << 23, n)
    got = mmasim.MMA("CDNA1", "f32_32x32x4bf16").dot(a, b, c)
    bad = [i for i in range(n)
           if (want := _ref_efdpa_chain([int(x) for x in a[i]], [int(x) for x in b[i]], int(c[i]), 2)) != int(got[i])
           and not (want == NAN and value(int(got[i]), F32) == NAN)]
    assert not bad, f"{len(bad)} mismatches, first row {bad[0]}"


# ------------------------------------------------------------ CDNA2: FTZ mul-add
def test_cdna2_subnormal_inputs_read_as_zero():
    # f16 2^-15 is subnormal: 2^-15 * 2^15 would be 1, but reads as 0
    assert run("MI250X", "f32_4x4x4f16", [f16(2**-15)], [f16(2**15)], 0) == 0x00000000


def test_cdna2_subnormal_product_is_flushed():
    # bf16 2^-63 * 2^-64 = 2^-127 is an f32 subnormal: flushed, the sum stays +0 (not 0x00400000)
    assert run("MI250X", "f32_4x4x2bf16", [bf16(2.0**-63)], [bf16(2.0**-64)], 0) == 0x00000000


def test_cdna2_subnormal_sum_flushes_to_zero_of_its_sign():
    # -2^-125 + 1.5*2^-126 = -2^-127, subnormal: flushed to -0 (not 0x80400000)
    assert run("MI250X", "f32_4x4x2bf16", [bf16(1.5 * 2.0**-63)], [bf16(2.0**-63)], f32(-(2.0**-125))) == 0x80000000


def test_cdna2_f16_adds_products_in_pairs_of_pairs():
    # P = 4: c + ((2^-24 + 0) + (2^-24 + 0)) = 1 + 2^-23; a left-to-right chain would tie back to 1.0
    t = f16(2**-12)
    assert run("MI250X", "f32_16x16x4f16", [t, 0, t, 0], [t, 0, t, 0], ONE) == 0x3F800001


def test_cdna2_plain_bf16_adds_pairs_but_bf16_1k_adds_pairs_of_pairs():
    # P = 2: c = (1 + 2^-24) -> 1, then again 1 -> 1.0;  P = 4 (the _1k encoding): 1 + 2^-23
    t = bf16(2.0**-12)
    assert run("MI250X", "f32_32x32x4bf16", [t, 0, t, 0], [t, 0, t, 0], ONE) == 0x3F800000
    assert run("MI250X", "f32_32x32x4bf16_1k", [t, 0, t, 0], [t, 0, t, 0], ONE) == 0x3F800001


def test_cdna2_runs_cdna1_encodings_with_its_own_arithmetic():
    cdna1 = mmasim.MMA("CDNA1", "f32_32x32x8f16").datapath
    cdna2 = mmasim.MMA("CDNA2", "f32_32x32x8f16").datapath
    assert (cdna1.accumulator, cdna2.accumulator) == ("exact_sum", "ftz_mul_add")
    # 1 + 2^-24 + 2^-40 with the tiny term's inputs subnormal: CDNA1 rounds up, CDNA2 flushes them
    a = [f16(1), f16(2**-12), f16(2**-20)]
    assert run("CDNA1", "f32_32x32x8f16", a, a, 0) == 0x3F800001
    assert run("CDNA2", "f32_32x32x8f16", a, a, 0) == 0x3F800000


# ------------------------------------------------------------ CDNA3: TR-FDPA
Z8 = [0] * 8


def test_cdna3_tr_products_truncate_toward_zero_in_the_window():
    # window E = 0, F = 24: -2^-30 truncates toward zero to 0 (a floor would give 1 - 2^-24)
    assert run("MI300X", "f32_32x32x8_f16", [f16(1), f16(-(2**-15))], [f16(1), f16(2**-15)], 0) == 0x3F800000


def test_cdna3_tr_dot_is_floored_at_32_fraction_bits_of_the_larger_exponent():
    # dot = 2^-24 + 2^-40; e = max(-24, r_c = 0) = 0: floored to 2^-32 -> 2^-24;
    # 1 + 2^-24 is a tie -> 1.0 (the exact sum would round up to 1 + 2^-23)
    a = [f16(2**-12), f16(2**-20)]
    assert run("MI300X", "f32_32x32x8_f16", a, a, ONE) == 0x3F800000


def test_cdna3_tr_floor_goes_toward_minus_infinity():
    # dot = 2^-24 - 2^-40 floors to 2^-24 - 2^-32; with C = 1 + 2^-23 the sum is just
    # below the midpoint -> 1 + 2^-23 (truncation toward zero would tie to 1 + 2^-22)
    assert run("MI300X", "f32_32x32x8_f16", [f16(2**-12), f16(-(2**-20))], [f16(2**-12), f16(2**-20)],
               f32(1 + 2**-23)) == 0x3F800001


def test_cdna3_tr_product_past_2_128_is_inf():
    assert run("MI300X", "f32_32x32x8_bf16", [bf16(2.0**127)], [bf16(2.0)], 0) == 0x7F800000
    d = run("MI300X", "f32_32x32x8_bf16", [bf16(2.0**127)], [bf16(2.0)], 0xFF800000)
    assert value(d, F32) == NAN


def test_cdna3_tr_negative_sum_rounding_to_zero_is_minus_zero():
    # -2^-100 * 2^-60 = -2^-160, floored to -2^-157, rounds to -0
    assert run("MI300X", "f32_32x32x8_bf16", [bf16(-(2.0**-100))], [bf16(2.0**-60)], 0) == 0x80000000


def test_cdna3_xf32_ignores_the_low_13_bits():
    assert run("MI300X", "f32_16x16x8_xf32", [0x3F801FFF], [0x3F801FFF], 0) == ONE
    # a NaN whose payload lies only in bits 12:0 reads as inf
    assert run("MI300X", "f32_16x16x8_xf32", [0x7F800001], [ONE], 0) == 0x7F800000


# ------------------------------------------------------------ CDNA3: GTR-FDPA
Z = [0] * 32


def test_cdna3_gtr_drops_c_below_the_window():
    # products 2^14: e = 14; C = -2^-12 has r_c = -12 < e - F - 1 = -11: dropped -> 2^14
    assert run("MI300X", "f32_16x16x32_fp8_fp8", [fp8(2**7)], [fp8(2**7)], f32(-(2.0**-12))) == 0x46800000
    # C = -2^-11 (r_c = -11) is kept: floored to -2^-10 -> 2^14 - 2^-10
    assert run("MI300X", "f32_16x16x32_fp8_fp8", [fp8(2**7)], [fp8(2**7)], f32(-(2.0**-11))) == 0x467FFFFF


def test_cdna3_gtr_sums_even_and_odd_k_separately():
    # k=0: 2^20, k=1: -2^-10 (odd group, exact there), then floored to 2^(20-24) -> 2^20 - 2^-4
    assert run("MI300X", "f32_16x16x32_bf8_bf8", [bf8(2**10), bf8(-(2**-5))], [bf8(2**10), bf8(2**-5)], 0) == 0x497FFFFF
    # k=0 and k=2 share the even window: -2^-10 truncates toward zero -> 2^20
    assert run("MI300X", "f32_16x16x32_bf8_bf8", [bf8(2**10), 0, bf8(-(2**-5))], [bf8(2**10), 0, bf8(2**-5)], 0) == 0x49800000


def test_cdna3_gtr_peer_drops_an_infinite_c_next_to_products_of_2_25():
    # MMA-Sim 2.1.1 counts an inf/NaN C with exponent -1 in the drop rule:
    # products 2^26 (e = 26 > F) drop C = inf and give 2^26; products 2^24 keep it
    assert run("MI300X", "f32_16x16x32_bf8_bf8", [bf8(2**14)], [bf8(2**12)], 0x7F800000) == 0x4C800000
    assert run("MI300X", "f32_16x16x32_bf8_bf8", [bf8(2**12)], [bf8(2**12)], 0x7F800000) == 0x7F800000


def test_fnuz_0x80_is_nan_and_there_is_no_negative_zero():
    d = run("MI300X", "f32_16x16x32_fp8_fp8", [0x80], [fp8(1)], 0)
    assert value(d, F32) == NAN
    assert fp8(-0.0) == 0 and bf8(-0.0) == 0


# ------------------------------------------------------------ core helper
def test_exact_sum_rounds_like_the_exact_rational_sum_at_any_spread():
    from mmasim.arith.intmath import exact_sum
    from mmasim.registry.build import get_registry

    enc = get_registry().encodings["rne-f32"]
    rng = np.random.default_rng(4)
    n, t = 3000, 5
    mag = rng.integers(0, 1 << 24, (n, t))
    q = np.where(rng.random((n, t)) < 0.5, rng.integers(-300, 300, (n, t)), rng.integers(-40, 0, (n, t)))
    neg = rng.random((n, t)) < 0.5
    # exact cancellation in some rows: term 1 = -term 0
    mag[::5, 1], q[::5, 1], neg[::5, 1] = mag[::5, 0], q[::5, 0], ~neg[::5, 0]
    sneg, smag, e0 = exact_sum(neg, mag, q)
    got = enc.pack(sneg, smag, e0, zero_neg=sneg)
    for i in range(n):
        exact = sum((-1 if s else 1) * Fraction(int(m)) * Fraction(2) ** int(e) for s, m, e in zip(neg[i], mag[i], q[i]))
        assert int(got[i]) == round_rne(exact, F32), i
