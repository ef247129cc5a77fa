"""NVFP4 with 16 x 16 weight tiles (``tile=(16, 16)``), worked by hand from Transformer Engine's
2D kernel (``transformer_engine/common/cast/nvfp4/quantize_transpose_nvfp4.cuh``,
``quantize_transpose_nvfp4_2D_kernel``) and its Python reference
(``transformer_engine/pytorch/custom_recipes/reference_nvfp4.py``,
``_quantize_blockwise_reference`` with ``quant_tile_shape=(16, 16)``): the 1 x 16 rule of
tests/test_quantize_nvfp4.py with each block's amax replaced by its 16 x 16 tile's amax, so the
16 rows of a tile share one scale; the columnwise (transposed) copy has the same tile amaxes and
the same tensor amax, hence the same scales and the transposed words.

Every tensor here has amax 2688 = 448 * 6: S_enc = 1, S_dec = 1.  A tile of amax 2688 gets
scale 448 (0x7E, encode RN(1/448) = (1/448)(1 + 0.75 * 2**-24)); amax 6 gets 1 (0x38, encode 1);
amax 3 gets 0.5 (0x30, encode 2); amax 1.5 gets 0.25 (0x28); an all-zero tile 0 (0x00).
"""

import numpy as np
import pytest

import mmasim

F32 = np.float32


def matrix():
    x = np.zeros((32, 32), dtype=F32)
    x[0, 0], x[5, 3], x[15, 15] = 2688, 1344, 224       # tile (0, 0): amax 2688
    x[10, 20], x[0, 16], x[3, 31] = 6, 1.5, -2          # tile (0, 1): amax 6
    x[31, 0], x[16, 15] = 3, 0.25                        # tile (1, 0): amax 3; tile (1, 1): zero
    return x


def test_a_tile_shares_one_scale_across_its_sixteen_rows():
    q = mmasim.quantize(matrix(), "nvfp4", tile=(16, 16))
    # tile scales [[448, 1], [0.5, 0]]; along axis -1 each row holds its tiles' scales
    assert q.tile_scales.tolist() == [[0x7E, 0x38], [0x30, 0x00]]
    assert q.scales.shape == (32, 2)
    assert q.scales[:16].tolist() == [[0x7E, 0x38]] * 16 and q.scales[16:].tolist() == [[0x30, 0x00]] * 16
    # row 0 of tile (0, 1) holds only 1.5: a 1 x 16 block would take 0.25 (0x28); the tile takes 1
    assert mmasim.quantize(matrix(), "nvfp4").scales[0].tolist() == [0x7E, 0x28]
    # elements: 2688 * RN(1/448) = 6 (1 + 0.75 * 2**-24) -> 6 (code 7), 1344 -> 3 (5), 224 -> 0.5 (1);
    # encode 1: 6 (7), 1.5 (3), -2 (0xC); encode 2: 3 -> 6 (7), 0.25 -> 0.5 (1)
    w = q.words
    assert (w[0, 0], w[5, 3], w[15, 15]) == (0x7, 0x5, 0x1)
    assert (w[10, 20], w[0, 16], w[3, 31]) == (0x7, 0x3, 0xC)
    assert (w[31, 0], w[16, 15]) == (0x7, 0x1)
    assert int(np.count_nonzero(w)) == 8
    assert np.array_equal(q.dequantize(), matrix().astype(np.float64))


def test_the_transposed_read_uses_the_same_tile_scales_and_the_transposed_words():
    q = mmasim.quantize(matrix(), "nvfp4", tile=(16, 16))
    t = q.transposed()
    # x.T's rows 0-15 are x's columns 0-15: tiles (0, 0) and (1, 0): scales 448, 0.5
    assert t.tile_scales.tolist() == [[0x7E, 0x30], [0x38, 0x00]]
    assert t.scales[:16].tolist() == [[0x7E, 0x30]] * 16 and t.scales[16:].tolist() == [[0x38, 0x00]] * 16
    assert np.array_equal(t.words, q.words.T)
    # what quantizing the transpose itself gives (TE's columnwise copy): the same words and scales
    direct = mmasim.quantize(matrix().T.copy(), "nvfp4", tile=(16, 16))
    assert np.array_equal(direct.words, t.words) and np.array_equal(direct.scales, t.scales)
    assert np.array_equal(t.dequantize(), matrix().T.astype(np.float64))


def test_tiles_along_axis_0_lay_the_scales_out_for_b():
    # the same tiles, scales laid out (K / 16, N) for a (K, N) B: row k // 16, column n
    q = mmasim.quantize(matrix(), "nvfp4", tile=(16, 16), axis=0)
    assert q.scales.shape == (2, 32)
    assert q.scales[0].tolist() == [0x7E] * 16 + [0x38] * 16 and q.scales[1].tolist() == [0x30] * 16 + [0] * 16
    assert np.array_equal(q.words, mmasim.quantize(matrix(), "nvfp4", tile=(16, 16)).words)


def test_tile_scales_feed_the_b200_nvfp4_instruction():
    # row 3 holds only -2 (column 31, tile (0, 1), scale 1: code 0xC); its first block is zero under
    # scale 448.  Row 3 against itself on kind::mxf4nvf4 (K = 64 is two rows here: 32 + 32 of zeros)
    # is (-2 * 1) * (-2 * 1) = 4, exact, and S_dec = 1 leaves it as it is
    q = mmasim.quantize(matrix(), "nvfp4", tile=(16, 16))
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    k = m.datapath.k
    a = np.zeros(k, dtype=np.uint8)
    a[:32] = q.words[3]
    s = np.zeros(k // 16, dtype=np.uint8)
    s[:2] = q.scales[3]
    assert int(m.dot(a, a, 0, scale_a=s, scale_b=s)) == int(np.array(4.0, dtype=F32).view(np.uint32))


def test_tile_shapes_are_checked():
    with pytest.raises(mmasim.BlockShapeError, match="16, 16"):
        mmasim.quantize(matrix(), "nvfp4", tile=(8, 8))
    with pytest.raises(mmasim.BlockShapeError, match="multiples of 16"):
        mmasim.quantize(np.ones((24, 32), dtype=F32), "nvfp4", tile=(16, 16))
    with pytest.raises(mmasim.BlockShapeError, match="multiples of 16"):
        mmasim.quantize(np.ones(32, dtype=F32), "nvfp4", tile=(16, 16))
    with pytest.raises(mmasim.QuantizeError, match="not both"):
        mmasim.quantize(matrix(), "nvfp4", tile=(16, 16), hadamard=True)
    with pytest.raises(mmasim.QuantizeError, match="transposed read"):
        mmasim.quantize(matrix(), "nvfp4").transposed()
    with pytest.raises(mmasim.QuantizeError, match="tile="):
        mmasim.quantize(np.ones(32, dtype=F32), "mxfp4", tile=(16, 16))
