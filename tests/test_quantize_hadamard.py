"""The random Hadamard transform (``hadamard=``) as Transformer Engine applies it before NVFP4
quantization, worked by hand.  Sources: ``transformer_engine/pytorch/tensor/nvfp4_tensor.py``
(the sign vector s = [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1], its mask
``get_sign_from_vector``: bit i set where s_i = -1, and ``diag(s) @ H16 / 4`` in bf16) and
``transformer_engine/common/hadamard_transform/hadamard_transform_utils.cuh`` (each 16-element
group times that matrix on the tensor cores, ``wmma ... m16n16k16.f32.bf16.bf16.f32`` with a zero
accumulator, then ``cvt.rn.bf16x2.f32``):

    out_n = bf16_RNE( D ),   D = the B200 mma.sync m16n8k16 bf16 datapath's f32 word of
                                 sum_k x_k * (s_k * (-1)**popcount(k & n) / 4),  C = +0

That datapath (docs/datapaths.md section 3) sums the exact products in a window of 25 bits below
the largest (quantum 2**(E - 25)) and truncates the sum to f32 toward zero: not binary32's RN.
"""

import numpy as np
import pytest

import mmasim
from mmasim.quantization.hadamard import Hadamard, sign_mask, transform

F32 = np.float32


def group(**at):
    x = np.zeros(16, dtype=F32)
    for k, v in at.items():
        x[int(k[1:])] = v
    return x


def bf16_bits(v):
    return (np.asarray(v, dtype=F32).view(np.uint32) >> 16).tolist()


def test_te_signs_mask_and_matrix():
    # s_i = -1 at i = 3, 5, 6, 7, 8, 9, 10, 12, 14, 15: 0b1101_0111_1110_1000 = 0xD7E8
    h = Hadamard()
    assert h.mask == 0xD7E8 == sign_mask([1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1])
    m = h.matrix()
    # row k, column n: s_k (-1)**popcount(k & n) / 4
    assert (m[0, 0], m[1, 1], m[3, 0], m[3, 3], m[2, 3]) == (0.25, -0.25, -0.25, -0.25, -0.25)
    assert np.array_equal(m @ m.T, np.eye(16))          # orthogonal: diag(s) H H^T diag(s) / 16 = I
    assert Hadamard.of(0).matrix()[3, 0] == 0.25          # mask 0: TE's with_random_sign_mask=False


def test_a_unit_group_gives_a_signed_hadamard_row():
    # x = e_3: out_n = s_3 (-1)**popcount(3 & n) / 4 = -(-1)**popcount(3 & n) / 4
    out = transform(group(x3=1.0), 0, Hadamard(), "t")
    expect = [-0.25 * (-1) ** bin(3 & n).count("1") for n in range(16)]
    assert out.tolist() == expect


def test_a_group_where_the_tensor_cores_truncation_decides_the_bf16_word():
    """x_0 = 1, x_1 = 2**-7, x_2 = 2**-8, x_3 = 2**-25 (all bf16), s_0..s_2 = +1, s_3 = -1; the
    products are 0.25, +-2**-9, +-2**-10, +-2**-27, the window quantum 2**(-2 - 25) keeps them all.

    n = 0: 0.25 + 2**-9 + 2**-10 - 2**-27.  The f32 word truncates toward zero: 0.25 + 2**-9 + 2**-10
    - 2**-25 (f32 ulp 2**-25), below the bf16 midpoint 0.25 + 1.5 * 2**-9: 0.25 + 2**-9 = 0x3E81.
    binary32's RN would give 0.25 + 2**-9 + 2**-10 (2**-27 is a quarter ulp), the exact tie, and
    bf16 RNE would make it 0.25 + 2**-8 (0x3E82).
    n = 1: H[1][1] = H[3][1] = -1: 0.25 - 2**-9 + 2**-10 + 2**-27 = 0.25 - 2**-10 + 2**-27, in
    [1/8, 1/4) (f32 ulp 2**-26) truncated to 0.25 - 2**-10, a bf16 value: 0x3E7F.
    n = 2: H[2][2] = H[3][2] = -1: 0.25 + 2**-10 + 2**-27 truncated to 0.25 + 2**-10, the bf16 tie
    of 0.25 (even) and 0.25 + 2**-9: 0x3E80 (the exact sum would round up to 0x3E81).
    n = 3: H[1][3] = H[2][3] = -1, H[3][3] = +1: 0.25 - 3 * 2**-10 - 2**-27, truncated to
    0.25 - 3 * 2**-10 - 2**-26, nearest bf16 0.25 - 3 * 2**-10: 0x3E7D."""
    x = group(x0=1.0, x1=2.0 ** -7, x2=2.0 ** -8, x3=2.0 ** -25)
    out = transform(x, 0, Hadamard(), "t")
    assert bf16_bits(out[:4]) == [0x3E81, 0x3E7F, 0x3E80, 0x3E7D]
    # n = 0 is one instruction of the model, then bf16 RNE (the f32 word 0.25 + 2**-9 + 2**-10 - 2**-25)
    m = mmasim.MMA("B200", "mma.sync.m16n8k16.f32.bf16.bf16")
    d = m.dot(x.astype(np.float64), Hadamard().matrix()[:, 0], 0.0)
    assert float(d) == 0.25 + 2.0 ** -9 + 2.0 ** -10 - 2.0 ** -25


def test_groups_run_along_axis():
    # a (16, 2) matrix transformed along axis 0: each column is a group
    x = np.zeros((16, 2), dtype=F32)
    x[3, 0], x[0, 1] = 1.0, 2.0
    out = transform(x, 0, Hadamard(), "t")
    assert out[:, 0].tolist() == transform(group(x3=1.0), 0, Hadamard(), "t").tolist()
    assert out[:, 1].tolist() == [0.5] * 16                # 2 * s_0 * H[0][n] / 4


def test_nvfp4_quantizes_the_transformed_tensor_with_its_own_amax():
    """quantize(x, "nvfp4", hadamard=True) is NVFP4 of the transformed values (TE's
    ``with_post_rht_amax``: the tensor amax is the transformed tensor's).  x = 8 * e_3: the
    transform is +-2 everywhere, amax 2: S_enc = RN(2688 / 2) = 1344, the block scale
    RN(2 * RN(1344 * RN(1/6))) = 448 (0x7E), and every element RN(+-2 * encode) = +-6 (codes 7, 0xF)."""
    x = group(x3=8.0)
    q = mmasim.quantize(x, "nvfp4", hadamard=True)
    assert q.amax == 2.0 and q.scales.tolist() == [0x7E]
    assert q.words.tolist() == [0xF if (-1) ** bin(3 & n).count("1") > 0 else 0x7 for n in range(16)]
    direct = mmasim.quantize(transform(x, 0, Hadamard(), "t"), "nvfp4")
    assert np.array_equal(q.words, direct.words) and q.tensor_scale == direct.tensor_scale
    # mask 0 (no random signs): out_n = 2 (-1)**popcount(3 & n): the signs flip
    q0 = mmasim.quantize(x, "nvfp4", hadamard=0)
    assert q0.words.tolist() == [0x7 if (-1) ** bin(3 & n).count("1") > 0 else 0xF for n in range(16)]


def test_hadamard_inputs_are_checked():
    with pytest.raises(mmasim.DtypeError, match="bf16 values"):
        mmasim.quantize(group(x0=1 + 2.0 ** -10), "nvfp4", hadamard=True)
    with pytest.raises(mmasim.BlockShapeError, match="groups of 16"):
        transform(np.ones(8, dtype=F32), 0, Hadamard(), "t")
    with pytest.raises(mmasim.QuantizeError, match="hadamard= is for nvfp4"):
        mmasim.quantize(np.ones(32, dtype=F32), "mxfp8_e4m3", hadamard=True)
    with pytest.raises(mmasim.QuantizeError, match="16-bit sign mask"):
        mmasim.quantize(group(x0=1.0), "nvfp4", hadamard=[1, -1])
    with pytest.raises(mmasim.QuantizeError, match="bf16 x bf16"):
        mmasim.quantize(group(x0=1.0), "nvfp4", hadamard=Hadamard(instruction="mma.sync.m16n8k16.f32.f16.f16"))
