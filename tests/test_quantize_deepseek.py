"""DeepSeek-style fine-grained FP8 (``mmasim.quantize(x, "deepseek_fp8", tile=...)``), worked
by hand from DeepGEMM's ``per_token_cast_to_fp8`` / ``per_block_cast_to_fp8``
(``deep_gemm/utils/math.py``, ``use_ue8m0=False``), every step a binary32 operation RN():

    amax = max(max |x| over the tile, RN(1e-4))      sf = RN(amax * RN(1 / 448))
    element = e4m3(RN(x * RN(1 / sf)))                (round to nearest even)

``x_amax / 448.0`` is ``amax * RN(1 / 448)`` because DeepGEMM runs on CUDA tensors, where PyTorch
turns a division by a Python number into a multiplication by its reciprocal
(``aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu``, ``div_true_kernel_cuda``).

``rn32`` (an independent IEEE reference, tests/ieee_reference.py) does the binary32 steps
with Fractions.  The scales are applied outside the tensor core, at promotion.
"""

from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import mmasim
from helpers import f32, f32_value
from ieee_reference import F32, round_rne


def rn32(x: Fraction) -> Fraction:
    return Fraction(f32_value(round_rne(x, F32)))


EPS = Fraction(float(np.float32(1e-4)))         # torch's clamp(1e-4) on a float32 tensor


def test_one_by_128_tiles_of_activations():
    x = np.zeros((2, 256), dtype=np.float32)
    x[0, :3] = [448, -3, 0.1]          # tile (0, 0): amax 448 -> sf = RN(448 * RN(1 / 448)) = 1 (see below)
    x[0, 128:130] = [1.0, 0.5]         # tile (0, 1): amax 1 -> sf = RN(1 / 448)
    x[1, 128] = 2.0**-20               # tile (1, 1): amax below 1e-4 -> clamped; tile (1, 0): zeros
    q = mmasim.quantize(x, "deepseek_fp8")
    assert (q.format, q.scale_format, q.block, q.axis, q.scale_use) == ("e4m3", "f32", (1, 128), 1, "promotion")
    assert q.scales.dtype == np.float32 and q.scales.shape == (2, 2)
    inv448 = rn32(Fraction(1, 448))
    assert rn32(448 * inv448) == 1
    sf_one = inv448
    sf_eps = rn32(EPS * inv448)
    assert [[Fraction(float(s)) for s in row] for row in q.scales] == [[1, sf_one], [sf_eps, sf_eps]]
    # 448 -> 0x7E; -3 = -1.5 * 2 -> 0xC4; f32(0.1) = 12.8 steps of 2^-7 in [2^-4, 2^-3) -> 13 * 2^-7 =
    # 1.625 * 2^-4: field 3, fraction 101: 0x1D
    assert q.words[0, :3].tolist() == [0x7E, 0xC4, 0x1D]
    # 1.0 * RN(1 / sf) is within an ulp of 448 -> 448 (0x7E); 0.5 * RN(1 / sf) within an ulp of 224 =
    # 1.75 * 2^7 -> field 14, fraction 110: 0x76
    inv = rn32(1 / sf_one)
    assert abs(inv - 448) < Fraction(1, 2**10)
    assert q.words[0, 128:130].tolist() == [0x7E, 0x76]
    # 2^-20 * RN(1 / sf_eps) = 4.27..., between e4m3's 4.0 and 4.5 (steps of 0.5 in [4, 8)), nearer 4.5
    # = 1.125 * 2^2: field 9, fraction 001: 0x49
    y = rn32(Fraction(1, 2**20) * rn32(1 / sf_eps))
    assert Fraction(17, 4) < y < Fraction(19, 4)
    assert q.words[1, 128] == 0x49 and not q.words[1, :128].any()
    assert np.array_equal(q.dequantize()[0, :3], [448.0, -3.0, 13 * 2.0**-7])
    assert Fraction(q.dequantize()[0, 129]) == 224 * sf_one


def test_128_by_128_blocks_of_weights():
    rng = np.random.default_rng(2)
    W = rng.standard_normal((256, 384)).astype(np.float32)
    q = mmasim.quantize(W, "deepseek_fp8", tile=(128, 128))
    assert q.scales.shape == (2, 3) and q.block == (128, 128)
    for i in range(2):
        for j in range(3):
            amax = Fraction(float(np.abs(W[128 * i:128 * (i + 1), 128 * j:128 * (j + 1)]).max()))
            assert Fraction(float(q.scales[i, j])) == rn32(max(amax, EPS) * rn32(Fraction(1, 448)))
    # one element by hand through the binary32 steps, then e4m3 by the grid
    sf = Fraction(float(q.scales[1, 2]))
    y = rn32(Fraction(float(W[200, 300])) * rn32(1 / sf))
    value = Fraction(float(np.float32(y).astype(ml_dtypes.float8_e4m3fn)))     # e4m3 round to nearest even
    assert Fraction(float(q.element_values()[200, 300])) == value
    assert np.array_equal(q.dequantize(), q.element_values() * np.repeat(np.repeat(q.scales.astype(np.float64),
                                                                                     128, 0), 128, 1))


def test_default_tile_follows_axis():
    x = np.ones((256, 4), dtype=np.float32)
    q = mmasim.quantize(x, "deepseek_fp8", axis=0)          # B (K, N): 128 along K, one column each
    assert q.block == (128, 1) and q.scales.shape == (2, 4) and q.axis == 0


def test_promotion_scales_with_an_fp8_instruction():
    """The words go to the tensor core unscaled; the scales multiply its result. Tiles with
    amax 448 have sf = 1 and elements e4m3(x), so Hopper's fp8 dot of small integers is exact."""
    a = np.zeros((1, 128), dtype=np.float32)
    b = np.zeros((1, 128), dtype=np.float32)
    a[0, :4], b[0, :4] = [448, 3, -2, 1], [1, 448, 5, -7]
    qa, qb = mmasim.quantize(a, "deepseek_fp8"), mmasim.quantize(b, "deepseek_fp8")
    assert qa.scales.tolist() == [[1.0]] and qb.scales.tolist() == [[1.0]]
    m = mmasim.MMA("H100", "wgmma.mma_async.m64n8k32.f32.e4m3.e4m3")
    d = m.dot(qa.words[0, :32], qb.words[0, :32], 0)
    assert int(d) == f32(448 + 3 * 448 - 10 - 7)


def test_deepseek_refuses_bad_shapes_and_values():
    with pytest.raises(mmasim.BlockShapeError, match="2-D"):
        mmasim.quantize(np.ones(128, dtype=np.float32), "deepseek_fp8")
    with pytest.raises(mmasim.BlockShapeError, match="does not divide"):
        mmasim.quantize(np.ones((2, 200), dtype=np.float32), "deepseek_fp8")
    with pytest.raises(mmasim.BlockShapeError, match="two positive integers"):
        mmasim.quantize(np.ones((2, 256), dtype=np.float32), "deepseek_fp8", tile=(0, 128))
    with pytest.raises(mmasim.BlockShapeError, match="two positive integers"):
        mmasim.quantize(np.ones((2, 256), dtype=np.float32), "deepseek_fp8", tile=128)
    with pytest.raises(mmasim.DtypeError, match="binary32"):
        mmasim.quantize(np.full((1, 128), 0.1), "deepseek_fp8")
    with pytest.raises(mmasim.NonFiniteError):
        mmasim.quantize(np.full((1, 128), np.nan, dtype=np.float32), "deepseek_fp8")
