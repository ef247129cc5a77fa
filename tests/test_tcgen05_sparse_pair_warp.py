"""tcgen05.mma beyond cta_group::1 dense: the sparse metadata in Tensor Memory, the CTA pair
(cta_group::2), A in Tensor Memory and 16-bit accumulators (mmasim/warp/tensor_memory.py,
archs/layouts/ptx_tcgen05_sparse.toml; docs/layouts.md).

Expectations come from the PTX ISA 9.1 text (§9.7.16.10.4.1 "Packing format for matrix D in
Tensor Memory", §9.7.16.10.8.4 "Sparsity selector", §9.7.16.10.2 Table 53), from the
corroborating layouts evaluated here by hand (CUTLASS's ``tmem_e_frg`` CuTe atoms and 2-SM
``ALayout`` / ``BLayout`` / ``CLayout``, JAX's ``format_tcgen05_sparse_metadata``), and, for
``warp``, from the matrix form ``m(A, B, C, sparse_metadata=...)`` (no registers, no images).
"""

import numpy as np
import pytest

import mmasim
from mmasim.errors import OperandError, ScaleError, ShapeError, SparseMetadataError
from mmasim.harness import nv_async as nv
from mmasim.placement import a_tmem_layout, compress, metadata_words
from mmasim.warp.tensor_memory import tcgen05_mma

from cute_layouts import at as cute_at

F16_SP = "tcgen05.mma.sp.cta_group::1.kind::f16.m128n16k32.f32.f16.f16"
TF32_SP = "tcgen05.mma.sp.cta_group::1.kind::tf32.m128n16k16.f32.tf32.tf32"
I8_SP = "tcgen05.mma.sp.cta_group::1.kind::i8.m128n16k64.s32.s8.u8"
F8_SP = "tcgen05.mma.sp.cta_group::1.kind::f8f6f4.m128n16k64.f32.e4m3.e5m2"
MXF4_SP = "tcgen05.mma.sp.cta_group::1.kind::mxf4.block_scale.m128n8k128"


def _m(ins, backend="numpy"):
    return mmasim.MMA("B200", ins, backend=backend)


def _words(rng, shape, bits):
    return rng.integers(0, 1 << bits, shape, dtype=np.uint64)


def _metadata(m, rows, rng):
    nib = rng.choice(sorted(m.sparse_rule.selectors), size=(rows, m.sparse_rule.chunks(m.datapath.k)))
    return metadata_words(nib)


def _image(m, X, operand):
    fmt = m.a_format if operand == "a" else m.b_format
    img, lay = nv.operand_image(X, nv.packing(m.datapath.kind, fmt))
    return img, lay.descriptor(0, "tcgen05")


def _run(m, seed, selector=0, a_in_tmem=False, c_upper=0):
    """warp() on images built here from random words, and the matrix form's D."""
    rng = np.random.default_rng(seed)
    dp, L = m.datapath, m.layout("d")
    M, N, K = L.rows, L.cols, dp.k
    A = _words(rng, (M, K), m.a_format.container_bits)
    B = _words(rng, (K, N), m.b_format.container_bits)
    C = _words(rng, (M, N), m.d_format.container_bits)
    kw, Ause = {}, A
    if dp.sparse:
        md = _metadata(m, M, rng)
        Ause = compress(m.placement, A, md)
        kw = dict(sparse_metadata=m.fragments("sparse_metadata", md, selector=selector), sparsity_selector=selector)
        expected = m(A, B, C, sparse_metadata=md)
    else:
        expected = m(A, B, C)
    pair = "cta_group::2" in dp.qualifiers
    ncta = 2 if pair else 1
    a_parts = [_image(m, Ause[c * M // ncta:(c + 1) * M // ncta], "a") for c in range(ncta)]
    b_parts = [_image(m, B.T[c * N // ncta:(c + 1) * N // ncta], "b") for c in range(ncta)]
    b = tuple(p[0] for p in b_parts) if pair else b_parts[0][0]
    if a_in_tmem:
        a, kw["b_descriptor"] = a_tmem_layout(m.placement).pack(Ause), b_parts[0][1]
    else:
        a = tuple(p[0] for p in a_parts) if pair else a_parts[0][0]
        kw.update(a_descriptor=a_parts[0][1], b_descriptor=b_parts[0][1])
    c = m.fragments("c", C) | np.uint32(c_upper)
    d = m.warp(a, b, c, **kw)
    assert d.shape == (L.lanes, L.registers)
    return m.unfragment("d", d), expected, d


# ---------------------------------------------------------------- 16-bit accumulators
def test_ptx_9_7_16_10_4_1_f16_accumulator_is_one_element_per_tmem_word_in_its_lower_16_bits():
    # "if the type of elements of the matrix D is 16 bits then a Tensor Memory word would contain a
    # single 16-bit element in its lower 16 bits"
    m = _m("tcgen05.mma.cta_group::1.kind::f16.m128n16k16.f16.f16.f16")
    L = m.layout("d")
    assert (L.lanes, L.registers, L.elements, L.bits) == (128, 16, 16, 32)
    C = np.arange(128 * 16, dtype=np.uint64).reshape(128, 16) * 7 + 0x3C00
    img = m.fragments("c", C)
    assert img[5, 3] == C[5, 3] and (img >> 16 == 0).all()      # layout D: row r in lane r, column j
    got, expected, d = _run(m, seed=1, c_upper=0xABCD0000)        # C's upper 16 bits are not the element
    np.testing.assert_array_equal(got, expected)
    assert (d >> 16 == 0).all()


@pytest.mark.parametrize("ins", ["tcgen05.mma.cta_group::1.kind::f8f6f4.m64n16k32.f16.e4m3.e4m3",
                                 "tcgen05.mma.cta_group::2.kind::f16.m256n32k16.f16.f16.f16"])
def test_tcgen05_warp_with_f16_accumulator_equals_matrix_form(ins):
    got, expected, _ = _run(_m(ins), seed=2)
    np.testing.assert_array_equal(got, expected)


# ---------------------------------------------------------------- sparse metadata layouts
@pytest.mark.parametrize("ins,m_shape,k_shape,bits_per_k", [
    # CUTLASS tmem_e_frg (cute/atom/mma_traits_sm100_frag.hpp): FP16 128x32 atom, 1 bit per logical A
    # element of K; TF32 128x16 atom addressed in 2-bit units (upcast<2>)
    (F16_SP, ((8, 2, 8), (1, 2048, 16)), ((16, 2), (128, 8)), 1),
    (TF32_SP, ((8, 2, 8), (1, 1024, 16)), ((8, 2), (128, 8)), 2),
])
def test_cutlass_tmem_e_frg_16_and_32_bit_atoms_place_each_chunk_as_mmasim(ins, m_shape, k_shape, bits_per_k):
    m = _m(ins)
    K = m.datapath.k
    chunk = m.sparse_rule.chunk
    for sel in (0, 1):
        L = m.layout("sparse_metadata", selector=sel)
        assert (L.lanes, L.registers, L.rows, L.cols) == (128, 2, 128, 8)
        for row in range(128):
            for k in range(0, K, chunk):
                v = cute_at(m_shape[0], m_shape[1], row) + cute_at(k_shape[0], k_shape[1], k)
                lane, bit = v % 128, (v // 128) * bits_per_k        # virtual address: lane + 128 * bit unit
                assert L.owner(row, k // chunk) == (lane, 8 * sel + bit // 4), (row, k)


@pytest.mark.parametrize("ins,per_bit", [(I8_SP, 1), (F8_SP, 1), (MXF4_SP, 2)])
def test_cutlass_tmem_e_frg_8_and_4_bit_atoms_place_row_in_lane_and_k_along_bits(ins, per_bit):
    # S8 / F8F6F4: (128, 64):(1, 128), one bit per element of K; F4: (128, 128), half a bit each
    m = _m(ins)
    L = m.layout("sparse_metadata")
    chunk = m.sparse_rule.chunk
    assert (L.registers, L.cols) == (2, 16)
    for row in range(0, 128, 7):
        for k in range(0, m.datapath.k, chunk):
            bit = k // per_bit
            assert L.owner(row, k // chunk) == (row, bit // 4)
            assert L.register(bit // 4) == (bit // 32, bit % 32)


def test_jax_format_tcgen05_sparse_metadata_16_bit_tiles_match_the_column_the_selector_picks():
    """JAX (jax/_src/pallas/mosaic_gpu/helpers.py) writes the 2-bit indices (M, K/4, 2) of 16-bit
    operands as rows (8, 2, 8) x entries (4, 2, 8) reordered to (lanes 8 x 2 x 8, 128 bits), copied
    to TMEM as 4 columns, and its tcgen05.mma gives step q the address + 2 * (q // 2) with selector
    q % 2: step q's metadata is column q of the tile."""
    m = _m(F16_SP)
    rng = np.random.default_rng(3)
    K_total = 128                                    # four K = 32 steps
    nib = rng.choice(sorted(m.sparse_rule.selectors), size=(128, K_total // 4))
    two = np.stack([nib & 3, nib >> 2], axis=-1)     # (M, K/4, 2) 2-bit indices, low pair first
    e = two.reshape(128, K_total // 2)               # entry j = 2 * chunk + half
    # lane 16 a + 8 h + c holds row 16 a + 8 b + c's entries 16 q + 8 h + f at bits 32 q + 16 b + 2 f
    tile = e.reshape(8, 2, 8, 4, 2, 8).transpose(0, 4, 2, 3, 1, 5).reshape(128, 64)
    words = np.zeros((128, 4), np.uint64)
    for x in range(64):
        words[:, x // 16] |= tile[:, x].astype(np.uint64) << np.uint64(2 * (x % 16))
    for q in range(4):
        md = metadata_words(nib[:, 8 * q:8 * q + 8])
        img = m.fragments("sparse_metadata", md, selector=q % 2)
        np.testing.assert_array_equal(img[:, q % 2], words[:, q])
        assert (img[:, 1 - q % 2] == 0).all()


def test_ptx_9_7_16_10_8_4_selector_must_be_0_for_i8_and_f8f6f4_and_picks_a_column_for_f16():
    # "The value of the sparsity selector: must be 0 for .kind::i8 and .kind::f8f6f4"
    for ins in (I8_SP, F8_SP):
        with pytest.raises(OperandError, match="selector"):
            _m(ins).layout("sparse_metadata", selector=1)
    # .kind::f16: the selector picks which column of the pair holds the metadata
    m = _m(F16_SP)
    md = _metadata(m, 128, np.random.default_rng(4))
    a, b = m.fragments("sparse_metadata", md, selector=0), m.fragments("sparse_metadata", md, selector=1)
    np.testing.assert_array_equal(a[:, 0], b[:, 1])
    assert (a[:, 1] == 0).all() and (b[:, 0] == 0).all()
    with pytest.raises(OperandError, match="selector"):
        m.layout("sparse_metadata", selector=2)


@pytest.mark.parametrize("ins", [F16_SP, TF32_SP, I8_SP, MXF4_SP,
                                 "tcgen05.mma.sp.cta_group::1.kind::f16.m64n16k32.f32.bf16.bf16",
                                 "tcgen05.mma.sp.cta_group::1.kind::i8.m64n16k64.s32.u8.u8",
                                 "tcgen05.mma.ws.sp.cta_group::1.kind::f16.m128n64k32.f32.f16.f16",
                                 "tcgen05.mma.sp.cta_group::2.kind::f16.m256n32k32.f32.f16.f16",
                                 "tcgen05.mma.sp.cta_group::2.kind::tf32.m128n32k16.f32.tf32.tf32",
                                 "tcgen05.mma.sp.cta_group::2.kind::i8.m128n32k64.s32.s8.s8"])
def test_tcgen05_sparse_metadata_and_a_tmem_layouts_round_trip(ins):
    m = _m(ins)
    rng = np.random.default_rng(5)
    sels = (0, 1) if m.a_format.container_bits >= 16 else (0,)
    for sel in sels:
        L = m.layout("sparse_metadata", selector=sel)
        rows, cols, valid = L.table()
        assert sorted(zip(rows[valid], cols[valid])) == [(r, c) for r in range(L.rows) for c in range(L.cols)]
        for lane, i in zip(*np.nonzero(valid)):
            assert L.owner(*L.coords(int(lane), int(i))) == (lane, i)
        md = _metadata(m, L.rows, rng)
        np.testing.assert_array_equal(m.unfragment("sparse_metadata", m.fragments("sparse_metadata", md,
                                                                                    selector=sel), selector=sel), md)
    La = a_tmem_layout(m.placement)       # .ws and packed 4-bit codes too (tests/test_warp_coverage.py)
    assert La.shape == (L.rows, m.datapath.stored_k) and La.storage == "tmem"
    X = _words(rng, La.shape, m.a_format.container_bits)
    np.testing.assert_array_equal(La.unpack(La.pack(X)).astype(np.uint64), X)


def test_half_datapath_metadata_sits_in_the_lanes_of_layout_f():
    # PTX §9.7.16.10.8.5: layouts F and C use the same lane alignment for A, D and the metadata
    m = _m("tcgen05.mma.sp.cta_group::1.kind::f16.m64n16k32.f32.f16.f16")
    used = lambda L: sorted({L.owner(r, c)[0] for r in range(L.rows) for c in range(L.cols)})
    assert used(m.layout("sparse_metadata")) == used(m.layout("d")) == used(a_tmem_layout(m.placement)) \
        == [32 * w + x for w in range(4) for x in range(16)]


# ---------------------------------------------------------------- A in Tensor Memory
def test_ptx_table_53_a_in_tensor_memory_is_row_major_packed_along_the_columns():
    m = _m("tcgen05.mma.cta_group::1.kind::f16.m128n16k16.f32.f16.f16")
    L = a_tmem_layout(m.placement)
    assert (L.lanes, L.registers, L.shape) == (128, 8, (128, 16))       # two 16-bit elements a column
    assert L.owner(9, 5) == (9, 5) and L.register(5) == (2, 16)
    m8 = _m("tcgen05.mma.cta_group::1.kind::i8.m128n16k32.s32.s8.s8")  # four 8-bit containers a word (§9.7.16.10.4.3)
    assert a_tmem_layout(m8.placement).registers == 8 and a_tmem_layout(m8.placement).register(6) == (1, 16)


# ---------------------------------------------------------------- warp == matrix form
@pytest.mark.parametrize("ins,selector", [
    (F16_SP, 0), (F16_SP, 1), (TF32_SP, 1), (I8_SP, 0), (F8_SP, 0),
    ("tcgen05.mma.sp.cta_group::1.kind::f16.m64n8k32.f32.bf16.bf16", 1),
    ("tcgen05.mma.sp.cta_group::1.kind::i8.m64n16k64.s32.u8.s8", 0),
    ("tcgen05.mma.ws.sp.cta_group::1.kind::tf32.m128n64k16.f32.tf32.tf32", 0),
])
def test_tcgen05_sparse_warp_on_compressed_a_and_tmem_metadata_equals_matrix_form(ins, selector):
    got, expected, _ = _run(_m(ins), seed=6, selector=selector)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("ins,selector", [
    ("tcgen05.mma.cta_group::2.kind::f16.m256n32k16.f32.bf16.bf16", 0),
    ("tcgen05.mma.cta_group::2.kind::tf32.m128n16k8.f32.tf32.tf32", 0),
    ("tcgen05.mma.cta_group::2.kind::i8.m128n32k32.s32.s8.u8", 0),
    ("tcgen05.mma.sp.cta_group::2.kind::f16.m256n16k32.f32.f16.f16", 1),
    ("tcgen05.mma.sp.cta_group::2.kind::f8f6f4.m128n16k64.f32.e4m3.e4m3", 0),
])
def test_tcgen05_cta_pair_warp_on_both_ctas_images_equals_matrix_form(ins, selector):
    got, expected, _ = _run(_m(ins), seed=7, selector=selector)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("ins", [
    "tcgen05.mma.cta_group::1.kind::f16.m128n16k16.f32.f16.f16",
    "tcgen05.mma.cta_group::1.kind::tf32.m64n8k8.f32.tf32.tf32",
    "tcgen05.mma.cta_group::2.kind::i8.m256n32k32.s32.s8.s8",
    F16_SP,
    "tcgen05.mma.sp.cta_group::2.kind::f16.m128n16k32.f32.f16.f16",
])
def test_tcgen05_warp_with_a_in_tensor_memory_equals_matrix_form(ins):
    got, expected, _ = _run(_m(ins), seed=8, selector=0, a_in_tmem=True)
    np.testing.assert_array_equal(got, expected)


def test_tcgen05_warp_both_backends_agree_with_matrix_form():
    for backend in ("numpy", "numba"):
        for ins in (F16_SP, "tcgen05.mma.cta_group::2.kind::f16.m256n16k16.f32.f16.f16"):
            got, expected, _ = _run(_m(ins, backend), seed=9, selector=1 if "sp" in ins else 0)
            np.testing.assert_array_equal(got, expected)


def test_cutlass_2sm_split_cta_c_holds_rows_and_columns_c_half():
    """CUTLASS SM100_MMA_*_2x1SM: ALayout (2, (M/2, K)), BLayout (2, (N/2, K)), CLayout (2, (M/2, N)):
    CTA c's A rows c * M/2 .. and B columns c * N/2 ..; D row r in the pair image's lane r."""
    m = _m("tcgen05.mma.cta_group::2.kind::i8.m256n32k32.s32.s8.s8")
    rng = np.random.default_rng(10)
    A = _words(rng, (256, 32), 8)
    A[128:] = 0                                       # CTA 1's rows of A are zero ...
    B = _words(rng, (32, 32), 8)
    B[:, 16:] = 0                                     # ... and CTA 1's columns of B
    C = _words(rng, (256, 32), 16)
    a = [_image(m, A[128 * c:128 * (c + 1)], "a") for c in (0, 1)]
    b = [_image(m, B.T[16 * c:16 * (c + 1)], "b") for c in (0, 1)]
    d = m.warp((a[0][0], a[1][0]), (b[0][0], b[1][0]), m.fragments("c", C), a_descriptor=a[0][1],
               b_descriptor=b[0][1])
    D = m.unfragment("d", d)
    np.testing.assert_array_equal(D[128:], C[128:])               # rows of CTA 1: A * B = 0
    np.testing.assert_array_equal(D[:, 16:], C[:, 16:])           # columns from CTA 1's B: 0
    assert (D[:128, :16] != C[:128, :16]).any()
    np.testing.assert_array_equal(d[128:], m.fragments("c", C)[128:])   # CTA 1's TMEM: lanes 128..255


# ---------------------------------------------------------------- clear errors
def test_tcgen05_sparse_warp_errors_are_specific():
    m = _m(F16_SP)
    rng = np.random.default_rng(11)
    A = _words(rng, (128, 16), 16)
    a_img, da = _image(m, A, "a")
    b_img, db = _image(m, _words(rng, (16, 32), 16), "b")
    c = np.zeros((128, 16), np.uint32)
    with pytest.raises(SparseMetadataError, match="sparse metadata"):
        m.warp(a_img, b_img, c, a_descriptor=da, b_descriptor=db)
    with pytest.raises(ShapeError, match=r"\(128, 2\)"):
        m.warp(a_img, b_img, c, a_descriptor=da, b_descriptor=db, sparse_metadata=np.zeros((128, 1), np.uint32))
    with pytest.raises(OperandError, match="selector"):
        m.warp(a_img, b_img, c, a_descriptor=da, b_descriptor=db, sparse_metadata=np.zeros((128, 2), np.uint32),
               sparsity_selector=3)
    with pytest.raises(SparseMetadataError, match="illegal sparse selector"):     # 0b0000 is not a legal index pair
        m.warp(a_img, b_img, c, a_descriptor=da, b_descriptor=db, sparse_metadata=np.zeros((128, 2), np.uint32))
    dense = _m("tcgen05.mma.cta_group::2.kind::f16.m256n32k16.f32.f16.f16")
    with pytest.raises(SparseMetadataError, match="dense"):
        dense.warp((a_img, a_img), (b_img, b_img), np.zeros((256, 32), np.uint32), a_descriptor=da,
                   b_descriptor=db, sparse_metadata=np.zeros((256, 2), np.uint32))


def test_tcgen05_unmodelled_forms_are_refused_clearly():
    m = _m("tcgen05.mma.sp.cta_group::2.kind::mxf8f6f4.block_scale.m256n16k64.f32.e4m3.e4m3")
    with pytest.raises(ScaleError, match="pass the scale_a and scale_b"):
        tcgen05_mma(m, np.zeros(8, np.uint32), np.zeros(8, np.uint32), np.zeros(8, np.uint32), b_descriptor=0)
    m = _m("tcgen05.mma.cta_group::1.kind::f16.m128n16k16.f32.f16.f16")
    with pytest.raises(OperandError, match="row-major"):
        m.warp(np.zeros((128, 8), np.uint32), np.zeros(8, np.uint32), np.zeros((128, 16), np.uint32),
               b_descriptor=0, a_major="MN")
