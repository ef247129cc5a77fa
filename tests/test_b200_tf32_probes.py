"""The TF32 probe ladder of the B200 write-up (T1; docs/datapaths.md section 6).

Each test is one measured fact about tcgen05.mma kind::tf32 on a real B200.
Expected words follow from the fact itself (IEEE encodings computed with struct).
"""

import numpy as np
import pytest

import mmasim
from helpers import f32

ONE = f32(1.0)
ZERO = 0


@pytest.fixture(scope="module")
def tf32():
    return mmasim.MMA("B200", "tcgen05.mma.kind::tf32")


def dot(m, pairs, c):
    a = [p[0] for p in pairs] + [ZERO] * (8 - len(pairs))
    b = [p[1] for p in pairs] + [ZERO] * (8 - len(pairs))
    return int(m.dot(np.array(a), np.array(b), c))


def test_bits_0_to_12_of_a_and_b_are_ignored(tf32):
    for low in (0x1, 0x1000, 0x1FFF, 0x0AAA):
        assert dot(tf32, [(ONE | low, ONE)], 0) == ONE
        assert dot(tf32, [(ONE, ONE | low)], 0) == ONE
    # bit 13 is the last tf32 mantissa bit: it is read
    assert dot(tf32, [(ONE | 0x2000, ONE)], 0) == f32(1.0 + 2.0**-10)


def test_one_plus_2_pow_minus_23_is_visible(tf32):
    assert dot(tf32, [(f32(2.0**-23), ONE)], ONE) == f32(1.0 + 2.0**-23)


def test_one_plus_2_pow_minus_24_is_not_visible(tf32):
    assert dot(tf32, [(f32(2.0**-24), ONE)], ONE) == ONE


def test_minus_one_plus_one_plus_2_pow_minus_25_survives_exactly(tf32):
    pairs = [(f32(-1.0), ONE), (ONE, ONE), (f32(2.0**-25), ONE)]
    assert dot(tf32, pairs, 0) == f32(2.0**-25)


def test_internal_window_is_25_fraction_bits_below_the_largest_term(tf32):
    # 2^-26 lies below the quantum 2^(0-25) of a window anchored at 1.0: truncated away
    pairs = [(f32(-1.0), ONE), (ONE, ONE), (f32(2.0**-26), ONE)]
    assert dot(tf32, pairs, 0) == 0


@pytest.mark.parametrize("quarters", [1, 2, 3])
def test_fractional_ulp_of_c_is_truncated_not_rounded(tf32, quarters):
    # 1 + 0.25/0.5/0.75 ulp: RNE would round 0.75 ulp up; the hardware truncates
    eps = quarters * 2.0**-25
    assert dot(tf32, [(f32(eps), ONE)], ONE) == ONE


def test_fractional_ulps_are_summed_exactly_before_truncation(tf32):
    # two half-ulps inside the window make one whole ulp
    half = f32(2.0**-24)
    assert dot(tf32, [(half, ONE), (half, ONE)], ONE) == f32(1.0 + 2.0**-23)


def test_nan_result_is_canonical_0x7fffffff(tf32):
    for nan in (0x7FC00000, 0xFFC00000, 0x7FA00000, 0xFF802000):
        assert dot(tf32, [(nan, ONE)], 0) == 0x7FFFFFFF
    assert dot(tf32, [(ONE, ONE)], 0x7FC00001) == 0x7FFFFFFF


def test_zero_times_inf_is_nan(tf32):
    assert dot(tf32, [(0, f32(float("inf")))], 0) == 0x7FFFFFFF


def test_plus_inf_plus_minus_inf_is_nan(tf32):
    inf, ninf = f32(float("inf")), f32(float("-inf"))
    assert dot(tf32, [(inf, ONE), (ninf, ONE)], 0) == 0x7FFFFFFF
    assert dot(tf32, [(inf, ONE)], ninf) == 0x7FFFFFFF


def test_inf_propagates_with_its_sign(tf32):
    assert dot(tf32, [(f32(float("-inf")), ONE), (ONE, ONE)], ONE) == 0xFF800000


def test_underflow_gives_plus_zero(tf32):
    tiny = f32(2.0**-100)
    assert dot(tf32, [(tiny, tiny)], 0) == 0
    assert dot(tf32, [(tiny, f32(-(2.0**-100)))], 0) == 0  # +0, not -0


def test_cancellation_gives_plus_zero(tf32):
    assert dot(tf32, [(ONE, ONE), (f32(-1.0), ONE)], 0) == 0
    assert dot(tf32, [(f32(-1.0), ONE)], ONE) == 0
    assert dot(tf32, [], 0x80000000) == 0  # C = -0 and no products


def test_nan_payload_only_in_truncated_bits_reads_as_inf(tf32):
    # 0x7F800001 is an f32 NaN, but after clearing bits 0-12 it is +inf
    assert dot(tf32, [(0x7F800001, ONE)], 0) == 0x7F800000
    assert dot(tf32, [(ONE, 0xFF801FFF)], 0) == 0xFF800000
    assert dot(tf32, [(0x7F800001, 0)], 0) == 0x7FFFFFFF  # then inf x 0 is NaN


def test_overflow_gives_inf(tf32):
    big = f32(2.0**127)
    assert dot(tf32, [(big, f32(4.0))], 0) == 0x7F800000
