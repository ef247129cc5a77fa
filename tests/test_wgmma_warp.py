"""Model.warp on wgmma.mma_async: B (and optionally A) as shared-memory images read through
their 64-bit matrix descriptors, A otherwise in the warpgroup's registers, C / D the
accumulator registers; and on tcgen05.mma (cta_group::1): A and B images, C / D the Tensor
Memory image in the data path layout of ``m.layout("d")``.

Expectations: the matrix form ``m(A, B, C)`` (an independent path: no registers, no images),
and, for the descriptor reader, images written here by hand from the PTX ISA 9.0 canonical
layout formulas (§9.7.15.5.1.2 "Shared Memory Matrix Layout") with byte arithmetic.
"""

import numpy as np
import pytest

import mmasim
from mmasim import MMAError
from mmasim.errors import OperandError, ShapeError, UnsupportedDatapath
from mmasim.harness import nv_async as nv
from mmasim.placement import SmemLayout, compress, encode_descriptor, metadata_words, read_operand

# every wgmma.mma_async dense kind (f16, bf16, tf32, e4m3 / e5m2, s8 / u8), each at two N
INSTRUCTIONS = [
    "wgmma.mma_async.m64n8k16.f32.f16.f16",
    "wgmma.mma_async.m64n256k16.f16.f16.f16",
    "wgmma.mma_async.m64n24k16.f32.bf16.bf16",
    "wgmma.mma_async.m64n8k16.f32.bf16.bf16",
    "wgmma.mma_async.m64n8k8.f32.tf32.tf32",
    "wgmma.mma_async.m64n16k8.f32.tf32.tf32",
    "wgmma.mma_async.m64n16k32.f32.e4m3.e5m2",
    "wgmma.mma_async.m64n8k32.f16.e5m2.e4m3",
    "wgmma.mma_async.m64n8k32.s32.s8.u8",
    "wgmma.mma_async.m64n32k32.s32.u8.s8",
]


def _words(rng, shape, bits):
    return rng.integers(0, 1 << bits, shape, dtype=np.uint64)


def _operands(m, seed=0):
    rng = np.random.default_rng(seed)
    dp = m.datapath
    N = m.layout("d").cols
    A = _words(rng, (64, dp.k), m.a_format.container_bits)
    B = _words(rng, (dp.k, N), m.b_format.container_bits)
    C = _words(rng, (64, N), m.d_format.container_bits)
    return A, B, C


def _image(m, X, operand):
    """The harness's shared-memory image of a (rows, K) operand and its descriptor."""
    fmt = m.a_format if operand == "a" else m.b_format
    img, lay = nv.operand_image(X, ("bytes", fmt.container_bits))
    return img, lay.descriptor(0, "wgmma")


@pytest.mark.parametrize("a_source", ["registers", "smem"])
@pytest.mark.parametrize("ins", INSTRUCTIONS)
def test_wgmma_warp_on_smem_b_equals_matrix_form(ins, a_source):
    m = mmasim.MMA("H100", ins, backend="numpy")
    A, B, C = _operands(m)
    b_img, b_desc = _image(m, B.T, "b")
    kw = {"b_descriptor": b_desc}
    if a_source == "smem":
        a, kw["a_descriptor"] = _image(m, A, "a")
    else:
        a = m.fragments("a", A)
        assert a.shape[0] == 128          # the warpgroup
    d = m.warp(a, b_img, m.fragments("c", C), **kw)
    assert d.shape == (128, m.layout("d").registers)
    np.testing.assert_array_equal(m.unfragment("d", d), m(A, B, C))


def test_wgmma_warp_both_backends_agree_with_matrix_form():
    for backend in ("numpy", "numba"):
        m = mmasim.MMA("H100", "wgmma.mma_async.m64n16k16.f32.f16.f16", backend=backend)
        A, B, C = _operands(m, seed=3)
        a_img, a_desc = _image(m, A, "a")
        b_img, b_desc = _image(m, B.T, "b")
        d = m.warp(a_img, b_img, m.fragments("c", C), a_descriptor=a_desc, b_descriptor=b_desc)
        np.testing.assert_array_equal(m.unfragment("d", d), m(A, B, C))


def test_wgmma_warp_reads_a_128_byte_swizzled_b_at_a_nonzero_start_address():
    m = mmasim.MMA("H100", "wgmma.mma_async.m64n16k16.f32.bf16.bf16", backend="numpy")
    A, B, C = _operands(m, seed=1)
    # 16 rows (N) x 32 bytes of K, 128-byte swizzle: 8-row groups 1024 bytes apart (SBO)
    lay = SmemLayout("b", major="K", swizzle=128, sbo=1024, element_bits=16)
    img = np.concatenate([np.full(1024, 0xFFFF, dtype=np.uint16), lay.to_image(B.T.astype(np.uint16))])
    desc = encode_descriptor(2048, 0, 1024, 128)           # start 1024 elements = 2048 bytes in
    d = m.warp(m.fragments("a", A), img.view(np.uint8), m.fragments("c", C), b_descriptor=desc)
    np.testing.assert_array_equal(m.unfragment("d", d), m(A, B, C))


def test_wgmma_warp_reads_mn_major_f16_operands_when_transposed():
    m = mmasim.MMA("H100", "wgmma.mma_async.m64n8k16.f32.f16.f16", backend="numpy")
    A, B, C = _operands(m, seed=2)
    # MN-major, no swizzle: 8 MN elements (16 bytes) x 8 K per core matrix; SBO along MN, LBO along K
    la = SmemLayout("a", major="MN", lbo=128 * 8, sbo=128, element_bits=16)
    lb = SmemLayout("b", major="MN", lbo=128, sbo=256, element_bits=16)
    a_img = la.to_image(A.astype(np.uint16)).view(np.uint8)
    b_img = lb.to_image(B.T.astype(np.uint16)).view(np.uint8)
    d = m.warp(a_img, b_img, m.fragments("c", C), a_descriptor=encode_descriptor(0, 1024, 128),
               b_descriptor=encode_descriptor(0, 128, 256), a_major="MN", b_major="MN")
    np.testing.assert_array_equal(m.unfragment("d", d), m(A, B, C))


def test_read_operand_follows_ptx_k_major_no_swizzle_formula():
    # PTX K-major, no swizzle, in bytes: (r % 8) * 16 + (r // 8) * SBO + kb % 16 + (kb // 16) * LBO,
    # written here element by element: 16 rows x 16 f16 (kb = 2k), LBO = 128, SBO = 512, start 64
    rows, K, lbo, sbo, start = 16, 16, 128, 512, 64
    img = np.zeros(start + 1024, dtype=np.uint8)
    for r in range(rows):
        for k in range(K):
            kb = 2 * k
            at = start + (r % 8) * 16 + (r // 8) * sbo + kb % 16 + (kb // 16) * lbo
            v = 0x100 * r + k + 0x8000
            img[at], img[at + 1] = v & 0xFF, v >> 8
    X = read_operand(img, encode_descriptor(start, lbo, sbo), rows, K, 16)
    assert X.dtype == np.uint64
    assert X.tolist() == [[0x8000 + 0x100 * r + k for k in range(K)] for r in range(rows)]


def test_read_operand_follows_ptx_128_byte_swizzle_chunk_xor_row():
    # 128-byte swizzle, K-major: row r of 8 holds 128 bytes; its 16-byte chunk c sits at chunk c ^ r
    rows, K = 8, 32                            # 32 tf32 words = 128 bytes per row
    img = np.zeros(1024, dtype=np.uint32)
    for r in range(rows):
        for k in range(K):
            chunk, within = divmod(4 * k, 16)
            img[(r * 128 + (chunk ^ r) * 16 + within) // 4] = 1000 * r + k
    X = read_operand(img, encode_descriptor(0, 0, 1024, 128), rows, K, 32)
    assert X.tolist() == [[1000 * r + k for k in range(K)] for r in range(rows)]


def test_wgmma_warp_without_b_descriptor_is_an_operand_error():
    m = mmasim.MMA("H100", "wgmma.mma_async.m64n8k16.f32.f16.f16", backend="numpy")
    A, B, C = _operands(m)
    img, _ = _image(m, B.T, "b")
    with pytest.raises(OperandError, match="b_descriptor"):
        m.warp(m.fragments("a", A), img, m.fragments("c", C))


def test_wgmma_transpose_of_an_8_bit_operand_is_an_operand_error():
    m = mmasim.MMA("H100", "wgmma.mma_async.m64n8k32.f32.e4m3.e4m3", backend="numpy")
    A, B, C = _operands(m)
    img, desc = _image(m, B.T, "b")
    with pytest.raises(OperandError, match="MN"):
        m.warp(m.fragments("a", A), img, m.fragments("c", C), b_descriptor=desc, b_major="MN")


def test_wgmma_image_too_small_for_its_descriptor_is_a_shape_error():
    m = mmasim.MMA("H100", "wgmma.mma_async.m64n8k16.f32.f16.f16", backend="numpy")
    A, B, C = _operands(m)
    img, desc = _image(m, B.T, "b")
    with pytest.raises(ShapeError, match="needs"):
        m.warp(m.fragments("a", A), img[: img.size // 2], m.fragments("c", C), b_descriptor=desc)


def test_read_operand_of_a_swizzled_start_off_the_pattern_repeat_is_a_shape_error():
    with pytest.raises(ShapeError, match="multiple of 1024"):
        read_operand(np.zeros(4096, dtype=np.uint8), encode_descriptor(128, 0, 1024, 128), 8, 16, 16)


def test_read_operand_takes_only_flat_uint8_or_uint32_images():
    with pytest.raises(ShapeError, match="uint8"):
        read_operand(np.zeros(256, dtype=np.int64), encode_descriptor(0, 128, 256), 8, 8, 16)


def test_descriptors_on_mma_sync_are_an_operand_error():
    m = mmasim.MMA("H100", "mma.sync.m16n8k16.f32.f16.f16.f32", backend="numpy")
    z = np.zeros((32, 4), dtype=np.uint32)
    with pytest.raises(OperandError, match="registers"):
        m.warp(z, z[:, :2], z, b_descriptor=encode_descriptor(0, 128, 256))


TCGEN05 = [
    "tcgen05.mma.cta_group::1.kind::f16.m128n64k16.f32.f16.f16",
    "tcgen05.mma.cta_group::1.kind::f16.m64n16k16.f32.bf16.bf16",
    "tcgen05.mma.cta_group::1.kind::tf32.m64n24k8.f32.tf32.tf32",
    "tcgen05.mma.cta_group::1.kind::tf32.m128n8k8.f32.tf32.tf32",
    "tcgen05.mma.cta_group::1.kind::i8.m128n16k32.s32.s8.u8",
    "tcgen05.mma.cta_group::1.kind::f8f6f4.m128n16k32.f32.e4m3.e5m2",
]


@pytest.mark.parametrize("ins", TCGEN05)
def test_tcgen05_warp_on_smem_a_and_b_and_tmem_c_equals_matrix_form(ins):
    m = mmasim.MMA("B200", ins, backend="numpy")
    L = m.layout("d")                       # the TMEM data path layout: (TMEM lanes, columns)
    rng = np.random.default_rng(7)
    K = m.datapath.k
    A = _words(rng, (L.rows, K), m.a_format.container_bits)
    B = _words(rng, (K, L.cols), m.b_format.container_bits)
    C = _words(rng, (L.rows, L.cols), m.d_format.container_bits)
    kind = m.datapath.kind
    a_img, la = nv.operand_image(A, nv.packing(kind, m.a_format))
    b_img, lb = nv.operand_image(B.T, nv.packing(kind, m.b_format))
    d = m.warp(a_img, b_img, m.fragments("c", C), a_descriptor=la.descriptor(0, "tcgen05"),
               b_descriptor=lb.descriptor(0, "tcgen05"))
    assert d.shape == (L.lanes, L.registers)
    np.testing.assert_array_equal(m.unfragment("d", d), m(A, B, C))


def test_tcgen05_warp_without_a_descriptor_reads_a_as_its_tensor_memory_image():
    # PTX tcgen05.mma [a-tmem]: no a_descriptor means A in TMEM (mmasim.placement.a_tmem_layout:
    # 16 .f16 of K packed two per 32-bit column, 128 lanes); a wrong-shaped image is a ShapeError
    m = mmasim.MMA("B200", TCGEN05[0], backend="numpy")
    b_img, lb = nv.operand_image(np.zeros((64, 16), np.uint16), nv.packing("f16", m.b_format))
    with pytest.raises(ShapeError, match=r"\(128, 8\)"):
        m.warp(np.zeros(8, np.uint32), b_img, m.fragments("c", np.zeros((128, 64), np.uint32)),
               b_descriptor=lb.descriptor(0, "tcgen05"))


def test_tcgen05_warp_of_cta_pair_takes_a_pair_of_images():
    # cta_group::2: each CTA's shared memory holds its half of A and of B (tests/test_tcgen05_sparse_pair_warp.py)
    m = mmasim.MMA("B200", "tcgen05.mma.cta_group::2.kind::f16.m256n64k16.f32.f16.f16", backend="numpy")
    with pytest.raises(OperandError, match="pair of shared-memory images"):
        m.warp(np.zeros(8, np.uint32), np.zeros(8, np.uint32), np.zeros(8, np.uint32),
               b_descriptor=encode_descriptor(0, 128, 256, target="tcgen05"))
    assert issubclass(UnsupportedDatapath, MMAError)


def test_tcgen05_warp_of_mn_major_sub_byte_e2m1_operand_is_refused_as_not_modelled():
    m = mmasim.MMA("B200", "tcgen05.mma.cta_group::1.kind::f8f6f4.m128n16k32.f32.e2m1.e4m3", backend="numpy")
    desc = encode_descriptor(0, 128, 256, target="tcgen05")
    with pytest.raises(UnsupportedDatapath, match="MN-major sub-byte"):
        m.warp(np.zeros(4096, np.uint32), np.zeros(4096, np.uint32), m.fragments("c", np.zeros((128, 16), np.uint32)),
               a_descriptor=desc, b_descriptor=desc, a_major="MN")


@pytest.mark.parametrize("a_source", ["registers", "smem"])
@pytest.mark.parametrize("ins", ["wgmma.mma_async.sp.m64n16k32.f32.f16.f16",
                                 "wgmma.mma_async.sp.m64n8k64.f32.e4m3.e4m3"])
def test_wgmma_sp_warp_on_compressed_a_and_smem_b_equals_matrix_form(ins, a_source):
    m = mmasim.MMA("H100", ins, backend="numpy")
    A, B, C = _operands(m, seed=5)
    rng = np.random.default_rng(6)
    md = metadata_words(rng.choice(sorted(m.sparse_rule.selectors), size=(64, m.sparse_rule.chunks(m.datapath.k))))
    Ac = compress(m.placement, A, md)                           # (64, K/2): what the instruction holds
    b_img, b_desc = _image(m, B.T, "b")
    kw = {"b_descriptor": b_desc, "sparse_metadata": m.fragments("sparse_metadata", md)}
    if a_source == "smem":
        a, kw["a_descriptor"] = _image(m, Ac, "a")
    else:
        a = m.fragments("a", Ac)
    d = m.warp(a, b_img, m.fragments("c", C), **kw)
    np.testing.assert_array_equal(m.unfragment("d", d), m(A, B, C, sparse_metadata=md))
