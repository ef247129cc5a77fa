"""tcgen05 operands that each lane group of a data path reads in full (FragmentRule.copies:
archs/layouts/ptx_tcgen05_ws.toml), the lane alignment 16 of the half-data-path layouts C and F,
and sub-byte shared-memory operands in the .sp / CTA-pair / A-in-TMEM forms.

Expectations: PTX ISA §9.7.16.10.5's data path table (layouts E, G, B: 2x2 / 1x4 data paths; F and
C: lane alignment 0 or 16, the same for A, D and the metadata), CUTLASS's layout numbers
evaluated here by hand (cute/atom/mma_traits_sm100_frag.hpp: ``tmem_e_frg_ws`` and
``TmemAllocMode::Duplicated``; corroboration, not the document), and for ``warp`` the matrix
form ``m(A, B, C, ...)``, which no register or image enters.
"""

import numpy as np
import pytest

import mmasim
from mmasim.errors import CopyMismatch, OperandError, TableError, UnsupportedDatapath
from mmasim.harness import nv_async as nv
from mmasim.placement import FragmentRule, a_tmem_layout, compress, load_layouts, metadata_words
from cute_layouts import at as cute_at, size as cute_size
from test_warp_coverage import run_case

WS_F16 = "tcgen05.mma.ws.sp.kind::f16.m{m}n64k32.f32.f16.f16"
WS_TF32 = "tcgen05.mma.ws.sp.kind::tf32.m{m}n64k16.f32.tf32.tf32"
WS_I8 = "tcgen05.mma.ws.sp.kind::i8.m{m}n64k64.s32.s8.s8"


def _m(ins, backend="numpy"):
    return mmasim.MMA("B200", ins, backend=backend)


def _nibble(img, lane, nib):
    return (int(img[lane, nib // 8]) >> (4 * (nib % 8))) & 0xF


# ------------------------------------------------------------------ .ws sparse metadata: copies per lane group
@pytest.mark.parametrize("ins,M,m_shape,k_shape,per_k", [
    (WS_F16, 64, ((8, 2, 4), (1, 2048, 16)), ((16, 2), (128, 8)), 1),
    (WS_F16, 32, ((8, 2, 2), (1, 2048, 16)), ((16, 2), (128, 8)), 1),
    (WS_TF32, 64, ((8, 2, 4), (1, 1024, 16)), ((8, 2), (128, 8)), 2),
    (WS_TF32, 32, ((8, 2, 2), (1, 1024, 16)), ((8, 2), (128, 8)), 2),
])
def test_cutlass_tmem_e_frg_ws_16_and_32_bit_atoms_place_each_chunk_in_every_lane_group(ins, M, m_shape, k_shape,
                                                                                      per_k):
    """tmem_e_frg_ws M_MMA = 64 / 32: the M = 128 atom for M rows plus a mode (2 : 64) / (4 : 32) that
    repeats it; virtual address v = lane + 128 * (bit unit), upcast 2 for tf32."""
    m = _m(ins.format(m=M))
    copies, step = 128 // M, M
    rng = np.random.default_rng(M)
    chunk = m.sparse_rule.chunk
    for sel in (0, 1):
        L = m.layout("sparse_metadata", selector=sel)
        assert (L.lanes, L.registers, L.rows, L.cols) == (128, 2, M, 8) and L.copies == tuple(
            step * c for c in range(1, copies))
        nib = rng.choice(sorted(m.sparse_rule.selectors), size=(M, 8))
        img = m.fragments("sparse_metadata", metadata_words(nib), selector=sel)
        for row in range(M):
            for k in range(0, m.datapath.k, chunk):
                base = cute_at(*m_shape, row) + cute_at(*k_shape, k)
                for d in range(copies):
                    v = base + step * d
                    lane, bit = v % 128, (v // 128) * per_k
                    assert _nibble(img, lane, 8 * sel + bit // 4) == nib[row, k // chunk], (row, k, d)
                assert L.owner(row, k // chunk)[0] == base % 128


@pytest.mark.parametrize("M,atom", [(64, ((64, (64, 2)), (1, (128, 64)))), (32, ((32, (64, 4)), (1, (128, 32))))])
def test_cutlass_tmem_e_frg_ws_8_bit_atoms_place_row_in_lane_k_along_bits_in_every_lane_group(M, atom):
    m = _m(WS_I8.format(m=M))
    (ms, ks), (md, kd) = atom
    rng = np.random.default_rng(8)
    nib = rng.choice(sorted(m.sparse_rule.selectors), size=(M, 16))
    img = m.fragments("sparse_metadata", metadata_words(nib))
    chunk = m.sparse_rule.chunk
    for row in range(M):
        for kk in range(cute_size(ks)):       # the K mode with its copy mode folded in
            v = cute_at(ms, md, row) + cute_at(ks, kd, kk)
            k = kk % 64
            lane, bit = v % 128, v // 128
            assert _nibble(img, lane, bit // 4) == nib[row, k // chunk]


def test_ws_metadata_round_trips_and_a_disagreeing_copy_is_a_copy_mismatch():
    m = _m(WS_F16.format(m=32))
    rng = np.random.default_rng(2)
    md = metadata_words(rng.choice(sorted(m.sparse_rule.selectors), size=(32, 8)))
    img = m.fragments("sparse_metadata", md, selector=1)
    np.testing.assert_array_equal(m.unfragment("sparse_metadata", img, selector=1), md)
    bad = img.copy()
    bad[96 + 5, 1] ^= 0x10                  # lane 5's copy in the fourth lane group
    with pytest.raises(CopyMismatch, match="lane 101"):
        m.unfragment("sparse_metadata", bad, selector=1)
    bad = img.copy()
    bad[64 + 5, 0] ^= 0x10                  # the other column of the pair: not this instruction's
    np.testing.assert_array_equal(m.unfragment("sparse_metadata", bad, selector=1), md)


# ------------------------------------------------------------------ A in Tensor Memory: copies
def test_cutlass_tmem_alloc_duplicated_m128_cta_group_2_dense_a_repeats_in_sub_partitions_2_and_3():
    """TmemAllocMode::Duplicated (UMMA_2SM_128xNx16_TS): 'SM0: Subpart0 = A[0:32], Subpart1 =
    A[32:64], Subpart2 = A[0:32], Subpart3 = A[32:64]; SM1: Subpart0 = A[64:96], Subpart1 =
    A[96:128], Subpart2 = A[64:96], Subpart3 = A[96:128]' (32-lane sub-partitions)."""
    m = _m("tcgen05.mma.cta_group::2.kind::f16.m128n32k16.f32.f16.f16")
    L = a_tmem_layout(m.placement)
    assert (L.lanes, L.registers, L.rows, L.cols) == (256, 8, 128, 16)
    A = np.arange(128 * 16, dtype=np.uint64).reshape(128, 16)
    img = L.pack(A)
    for sm in (0, 1):
        for sub, first in ((0, 0), (1, 32), (2, 0), (3, 32)):
            for r in range(32):
                lane = 128 * sm + 32 * sub + r
                row = 64 * sm + first + r
                assert img[lane, 0] == int(A[row, 0]) | int(A[row, 1]) << 16, (sm, sub, r)


@pytest.mark.parametrize("M,groups", [(128, 1), (64, 2), (32, 4)])
def test_ws_a_in_tensor_memory_holds_every_row_in_each_lane_group_of_layouts_d_e_g(M, groups):
    """§9.7.16.10.5: M = 128 .ws is layout D (row r in lane r); M = 64 / 32 .ws are layouts E / G,
    whose 64- / 32-lane groups each compute all rows (D's N halves / quarters), so each holds A."""
    m = _m(f"tcgen05.mma.ws.kind::i8.m{M}n64k32.s32.s8.s8")
    L = a_tmem_layout(m.placement)
    A = np.random.default_rng(M).integers(0, 256, (M, 32)).astype(np.uint64)
    img = L.pack(A)
    word = lambda row: sum(int(A[row, j]) << (8 * j) for j in range(4))       # four 8-bit per column
    for g in range(groups):
        for r in range(M):
            assert img[g * M + r, 0] == word(r)
    np.testing.assert_array_equal(L.unpack(img), A)
    bad = img.copy()
    if groups > 1:
        bad[M + 3, 2] ^= 1
        with pytest.raises(CopyMismatch):
            L.unpack(bad)


@pytest.mark.parametrize("ins", ["tcgen05.mma.ws.sp.kind::f16.m64n64k32.f32.bf16.bf16",
                                 "tcgen05.mma.ws.sp.kind::i8.m32n64k64.s32.u8.s8",
                                 "tcgen05.mma.ws.kind::tf32.m32n64k8.f32.tf32.tf32",
                                 "tcgen05.mma.cta_group::2.kind::f16.m128n32k16.f32.f16.f16"])
@pytest.mark.parametrize("a_in_tmem", [False, True])
def test_ws_and_cta_pair_warp_equals_matrix_form(ins, a_in_tmem):
    got, want = run_case("B200", ins, a_in_tmem, seed=7)
    np.testing.assert_array_equal(got, want)


def test_ws_sparse_warp_both_backends_agree_with_matrix_form():
    for backend in ("numpy", "numba"):
        got, want = run_case("B200", WS_F16.format(m=64), True, seed=4, backend=backend)
        np.testing.assert_array_equal(got, want)


def test_warp_refuses_a_tmem_a_whose_copies_disagree():
    m = _m("tcgen05.mma.ws.kind::f16.m64n64k16.f32.f16.f16")
    rng = np.random.default_rng(1)
    A = rng.integers(0, 0x3C00, (64, 16)).astype(np.uint16)
    B = rng.integers(0, 0x3C00, (16, 64)).astype(np.uint16)
    b_img, lay = nv.operand_image(B.T, ("bytes", 16))
    a = a_tmem_layout(m.placement).pack(A)
    a[70, 0] ^= 1
    with pytest.raises(CopyMismatch, match="lane 70"):
        m.warp(a, b_img, m.fragments("c", np.zeros((64, 64), np.uint32)), b_descriptor=lay.descriptor(0, "tcgen05"))


# ------------------------------------------------------------------ FragmentRule.copies in tables
def test_a_copies_row_loads_and_bad_copies_are_table_errors():
    row = """
[[layout]]
name = "toy.tmem.copies"
op = "tcgen05.mma"
operands = ["d"]
m = 32
n = 8
lanes = 128
storage = "tmem"
elements = "N"
row = "lane"
col = "i"
valid = "lane < 32"
copies = %s
evidence = "unverified: a test row"
"""
    (rule,) = load_layouts(row % "[32, 64, 96]")
    assert rule.copies == (32, 64, 96)
    for bad in ("[16]", "[128]", "[32, 32]", "[0]"):
        with pytest.raises(TableError, match="cop"):
            load_layouts(row % bad)
    with pytest.raises(TableError, match="copies"):
        FragmentRule("x", "tcgen05.mma", "d", row="lane", col="i", elements=1, copies=(-1,), evidence="unverified")


# ------------------------------------------------------------------ lane alignment 16 (layouts C and F)
F16_M64 = "tcgen05.mma.kind::f16.m64n16k16.f32.f16.f16"
F16_M64_SP = "tcgen05.mma.sp.kind::f16.m64n16k32.f32.f16.f16"
I8_M128_PAIR_SP = "tcgen05.mma.sp.cta_group::2.kind::i8.m128n32k64.s32.s8.s8"


@pytest.mark.parametrize("ins", [F16_M64, F16_M64_SP, I8_M128_PAIR_SP])
def test_ptx_9_7_16_10_5_layouts_f_and_c_at_lane_alignment_16_use_the_upper_16_lanes_of_each_sub_partition(ins):
    """The table: layouts F and C have 'Tensor Memory Datapath Lane Alignment' '0 or 16', and
    'must use the same Tensor Memory lane alignment across matrices A, D and the sparsity metadata'."""
    m = _m(ins)
    for align in (0, 16):
        used = lambda L: sorted({L.owner(r, c)[0] for r in range(L.rows) for c in range(L.cols)})
        ld = used(m.layout("d", lane_alignment=align))
        assert ld == [32 * w + align + x for w in range(len(ld) // 16) for x in range(16)]
        assert used(a_tmem_layout(m.placement, align)) == ld
        if m.datapath.sparse:
            assert used(m.layout("sparse_metadata", lane_alignment=align)) == ld


@pytest.mark.parametrize("ins", [F16_M64, F16_M64_SP, I8_M128_PAIR_SP])
@pytest.mark.parametrize("a_in_tmem", [False, True])
def test_warp_at_lane_alignment_16_equals_matrix_form(ins, a_in_tmem):
    m = _m(ins)
    dp = m.datapath
    rng = np.random.default_rng(16)
    M, N, K = m.layout("d").rows, m.layout("d").cols, dp.k
    A = rng.integers(0, 1 << m.a_format.container_bits, (M, K)).astype(np.uint64)
    if m.a_format.name in ("f16", "bf16"):
        A &= np.uint64(0x3BFF)
    B = (rng.integers(0, 0x3C00, (K, N)) if m.b_format.container_bits == 16 else rng.integers(0, 256, (K, N)))
    C = np.zeros((M, N), np.uint32)
    kw, ekw, Ause = {"lane_alignment": 16}, {}, A
    if dp.sparse:
        md = metadata_words(rng.choice(sorted(m.sparse_rule.selectors), size=(M, m.sparse_rule.chunks(K))))
        Ause = compress(m.placement, A, md)
        kw["sparse_metadata"] = m.fragments("sparse_metadata", md, lane_alignment=16)
        ekw["sparse_metadata"] = md
    pair = "cta_group::2" in dp.qualifiers
    nc = 2 if pair else 1
    imgs = lambda X, fmt: [nv.operand_image(X[i * X.shape[0] // nc:(i + 1) * X.shape[0] // nc],
                                            ("bytes", fmt.container_bits)) for i in range(nc)]
    bi = imgs(np.asarray(B).T, m.b_format)
    b = tuple(x[0] for x in bi) if pair else bi[0][0]
    kw["b_descriptor"] = bi[0][1].descriptor(0, "tcgen05")
    if a_in_tmem:
        a = a_tmem_layout(m.placement, 16).pack(Ause)
    else:
        ai = imgs(Ause, m.a_format)
        a = tuple(x[0] for x in ai) if pair else ai[0][0]
        kw["a_descriptor"] = ai[0][1].descriptor(0, "tcgen05")
    c = m.fragments("c", C, lane_alignment=16)
    d = m.warp(a, b, c, **kw)
    np.testing.assert_array_equal(m.unfragment("d", d, lane_alignment=16), m(A, B, C, **ekw))
    # the same images read at alignment 0 are other lanes: the image is not what alignment 0 reads
    assert not np.array_equal(m.layout("d").pack(m(A, B, C, **ekw)), d)


def test_lane_alignment_other_than_0_or_16_or_on_a_full_data_path_is_refused():
    m = _m(F16_M64)
    with pytest.raises(OperandError, match="lane_alignment"):
        m.layout("d", lane_alignment=8)
    with pytest.raises(OperandError, match="no such selector"):
        _m("tcgen05.mma.kind::f16.m128n16k16.f32.f16.f16").layout("d", lane_alignment=16)
    mma = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16")
    z = lambda o: np.zeros((32, mma.layout(o).registers), np.uint32)
    with pytest.raises(OperandError, match="no such selector"):
        mma.warp(z("a"), z("b"), z("c"), lane_alignment=16)
    with pytest.raises(OperandError, match="no such selector"):
        a_tmem_layout(_m("tcgen05.mma.ws.kind::f16.m64n64k16.f32.f16.f16").placement, 16)


# ------------------------------------------------------------------ sub-byte operands beyond cta_group::1 dense
@pytest.mark.parametrize("ins", [
    "tcgen05.mma.cta_group::2.kind::f8f6f4.m256n32k32.f32.e2m1.e3m2",          # §9.7.16.10.4.4: padded
    "tcgen05.mma.sp.kind::f8f6f4.m128n16k64.f32.e2m3.e4m3",
    "tcgen05.mma.ws.sp.kind::f8f6f4.m64n64k64.f32.e3m2.e2m1",
])
def test_ptx_9_7_16_10_4_4_padded_sub_byte_operands_in_the_sparse_pair_and_ws_forms_equal_matrix_form(ins):
    m = _m(ins)
    assert nv.packing(m.datapath.kind, m.a_format)[0] == "padded"
    for a_in_tmem in (False, True):
        got, want = run_case("B200", ins, a_in_tmem, seed=3)
        np.testing.assert_array_equal(got, want)


def test_mn_major_sub_byte_smem_operands_are_refused_naming_the_reason():
    m = _m("tcgen05.mma.cta_group::2.kind::f8f6f4.m256n32k32.f32.e2m1.e4m3")
    b_img, lay = nv.operand_image(np.zeros((16, 32), np.uint64), ("bytes", 8))
    desc = lay.descriptor(0, "tcgen05")
    with pytest.raises(UnsupportedDatapath, match="MN-major sub-byte"):
        m.warp((np.zeros(4096, np.uint8),) * 2, (b_img, b_img), np.zeros((256, 16), np.uint32),
               a_descriptor=desc, b_descriptor=desc, a_major="MN")


def test_cli_layout_takes_the_lane_alignment_of_layout_f(capsys):
    import json

    from mmasim.cli.main import main

    assert main(["layout", "B200", F16_M64, "--operand", "d", "--lane-alignment", "16", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["selectors"] == {"lane_alignment": 16}
    assert sorted({e["lane"] for e in doc["entries"]}) == [32 * w + 16 + x for w in range(4) for x in range(16)]
    assert main(["layout", "B200", "tcgen05.mma.kind::f16.m128n16k16.f32.f16.f16", "--operand", "d",
                 "--lane-alignment", "16"]) == 1
    assert "no such selector" in capsys.readouterr().err
