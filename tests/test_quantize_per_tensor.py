"""FP8 per-tensor ("current") scaling's scale, as Transformer Engine's compute_scale_from_amax
computes it: RN(max_finite / amax) in binary32, 1 for amax 0, FLT_MAX where the quotient
overflows (transformer_engine/common/recipe/recipe_common.cuh).  Hand-worked values."""

import numpy as np
import pytest

import mmasim
from mmasim.quantization.quantize import current_scale

FLT_MAX = np.float32(np.finfo(np.float32).max)


def test_the_scale_is_the_binary32_quotient_of_the_largest_finite_value_by_amax():
    assert current_scale(np.float32(448), "e4m3") == 1
    assert current_scale(np.float32(0.5), "e5m2") == 114688          # 57344 / 0.5, exact
    # 448 / 3 = 149.0101 0101 ...b: 16 fraction bits fit beside 149's 8; the rest (0101...) rounds down
    assert current_scale(np.float32(3), "e4m3") == np.float32(149 + 0x5555 / 2 ** 16)


def test_an_all_zero_tensor_has_scale_one():
    assert current_scale(0.0, "e4m3") == 1 and current_scale(np.float32(-0.0), "e5m2") == 1


@pytest.mark.parametrize("amax, fmt", [(2.0 ** -130, "e5m2"), (2.0 ** -149, "e4m3"), (2.0 ** -120, "e4m3")])
def test_a_scale_past_binary32_is_flt_max(amax, fmt):
    # 57344 * 2^130 = 1.75 * 2^145, 448 * 2^149, 448 * 2^120 = 1.75 * 2^128: all past FLT_MAX (< 2^128)
    assert current_scale(np.float32(amax), fmt) == FLT_MAX


def test_a_quotient_at_two_to_the_128_overflows_and_one_below_does_not():
    # e4m3: 448 / (1.75 * 2^-120) = 2^128, past FLT_MAX: clamped; 448 / (1.75 * 2^-119) = 2^127, exact
    assert current_scale(np.float32(1.75 * 2.0 ** -120), "e4m3") == FLT_MAX
    assert current_scale(np.float32(1.75 * 2.0 ** -119), "e4m3") == np.float32(2.0 ** 127)


def test_amax_must_be_a_finite_binary32_value():
    with pytest.raises(mmasim.NonFiniteError):
        current_scale(np.inf, "e4m3")
    with pytest.raises(mmasim.NonFiniteError):
        current_scale(np.nan, "e4m3")
    with pytest.raises(mmasim.QuantizeError, match="binary32"):
        current_scale(0.1, "e4m3")                                   # float64 0.1 is no binary32 value


def test_a_tiny_tensor_under_per_tensor_scaling_is_scaled_by_flt_max():
    # the campaign's case: one tiny value among zeros raised an error about a NaN (0 * inf) that
    # is not in the input.  a: 2^-130 at (0, 0), zeros elsewhere: scale FLT_MAX = (2 - 2^-23) 2^127,
    # a * scale = (2 - 2^-23) 2^-3 rounds to e5m2 0.25; decode RN(1 / FLT_MAX) = 2^-128 (2^-128 (1 +
    # 2^-24 + ...) rounds to the subnormal grid of 2^-149).  b: all 57344 (scale 1).  D[0, :] =
    # 0.25 * 57344 = 14336 = 1.75 * 2^13, times 2^-128 * 1: 1.75 * 2^-115, the exact a @ b.
    from mmasim.torch.emulation import Emulation
    from mmasim.torch.matmul import matmul

    a = np.zeros((1, 32), np.float32)
    a[0, 0] = 2.0 ** -130
    b = np.full((32, 8), 57344.0, np.float32)
    em = Emulation("H100", "wgmma.mma_async.k32.f32.e5m2.e5m2", scaling="tensor")
    y = matmul(a, b, em, backend="numpy")
    assert y.shape == (1, 8) and (y == np.float32(1.75 * 2.0 ** -115)).all()
    # e4m3: 1e-45 (2^-149) among zeros: (2 - 2^-23) 2^-22 rounds to e4m3's 0 (its least is 2^-9)
    a[0, 0] = np.float32(1e-45)
    em4 = Emulation("H100", "wgmma.mma_async.k32.f32.e4m3.e4m3", scaling="tensor")
    assert (matmul(a, np.ones((32, 8), np.float32), em4, backend="numpy") == 0).all()
