"""Register layouts of the block-scale factors of mma.sync (kind::mxf8f6f4 / mxf4 / mxf4nvf4)
and of sparse mma.sp (the compressed A, the metadata and the sparsity selector).

Expectations are written from the PTX ISA text (docs.nvidia.com/cuda/parallel-thread-execution,
section numbers of the 9.x releases), quoted in each docstring: §9.7.14.3 "Block Scaling for
mma.sync" and Table 37; §9.7.14.6.1 "Sparse matrix storage"; §9.7.14.6.2.1-8 "Matrix Fragments
for sparse mma.m16n8kK".  Where the ISA draws a placement only in a figure, the expectation
comes from NVIDIA's CUTLASS (CuTe) (thread, value) layouts instead, as corroboration, and the
test says so."""

import numpy as np
import pytest

import mmasim
from mmasim.placement import compress, expand, metadata_words
from wordgen import words

RTX = "RTX Blackwell"
MXF8 = "mma.sync.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.m16n8k32.f32.e4m3.e4m3.ue8m0"
MXF4_2X = "mma.sync.kind::mxf4.block_scale.scale_vec::2X.block32.m16n8k64.f32.e2m1.e2m1.ue8m0"
NVF4_4X = "mma.sync.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.m16n8k64.f32.e2m1.e2m1.ue4m3"
ADA = "Ada Lovelace"


def _holders(L):
    """{lane: [element indices it holds]} of a layout."""
    rows, cols, valid = L.table()
    return {lane: [i for i in range(L.elements) if valid[lane, i]] for lane in range(L.lanes)
            if valid[lane].any()}


# ------------------------------------------------------------------ §9.7.14.3 block scaling
@pytest.mark.parametrize("thread_id", [0, 1])
@pytest.mark.parametrize("ins,V,byte_ids", [(MXF8, 1, [0, 1, 2, 3]), (MXF4_2X, 2, [0, 2]), (NVF4_4X, 4, [0])])
def test_ptx_block_scaling_thread_id_a_and_byte_id_a_select_sf_a(ins, V, byte_ids, thread_id):
    """§9.7.14.3: "when thread-id-a set to 0, thread-pair satisfying: %laneid % 4 == 0 or 1
    provides the SF_A. In contrast when thread-id-a set to 1, thread-pair satisfying: %laneid % 4
    == 2 or 3 provides the SF_A"; .scale_vec::1X: "One byte ... determined by byte-id-a";
    ::2X: "One byte-pair ... The value of 0 selects lower two bytes whereas value of 2 selects
    upper two bytes"; ::4X: "All four bytes ... contribute".  Table 35: scale_A is M x 1 / 2 / 4."""
    m = mmasim.MMA(RTX, ins)
    for byte_id in byte_ids:
        L = m.layout("scale_a", byte_id=byte_id, thread_id=thread_id)
        assert (L.rows, L.cols, L.lanes, L.registers, L.bits) == (16, V, 32, 1, 8)
        want = {lane: list(range(byte_id, byte_id + V)) for lane in range(32) if lane % 4 in (2 * thread_id,
                                                                                             2 * thread_id + 1)}
        assert _holders(L) == want
        # the pair's two threads of a quad hold different rows, every row once per scale block
        assert sorted(L.coords(lane, byte_id)[0] for lane in want) == list(range(16))


@pytest.mark.parametrize("ins,V,byte_ids", [(MXF8, 1, [0, 1, 2, 3]), (MXF4_2X, 2, [0, 2]), (NVF4_4X, 4, [0])])
def test_ptx_block_scaling_thread_id_b_selects_one_thread_per_quad(ins, V, byte_ids):
    """§9.7.14.3: "One thread within the quad, determined by thread-id-b, contributes the SF_B
    value. In other words, each thread satisfying: %laneid % 4 == thread-id-b provides the SF_B";
    Table 35: scale_B is 1 / 2 / 4 x N."""
    m = mmasim.MMA(RTX, ins)
    for thread_id in range(4):
        for byte_id in byte_ids:
            L = m.layout("scale_b", byte_id=byte_id, thread_id=thread_id)
            assert (L.rows, L.cols) == (V, 8)
            assert _holders(L) == {lane: list(range(byte_id, byte_id + V)) for lane in range(32)
                                   if lane % 4 == thread_id}


@pytest.mark.parametrize("ins,operand,bad", [
    (MXF8, "scale_a", dict(thread_id=2)), (MXF8, "scale_a", dict(byte_id=4)),
    (MXF8, "scale_b", dict(thread_id=4)), (MXF4_2X, "scale_a", dict(byte_id=1)),
    (MXF4_2X, "scale_b", dict(byte_id=3)), (NVF4_4X, "scale_a", dict(byte_id=2)),
    (NVF4_4X, "scale_b", dict(byte_id=1)),
])
def test_ptx_table_37_invalid_selector_values_are_refused(ins, operand, bad):
    """Table 37 "Valid values for various selector components": scale_vec::1X byte-id-a
    [0, 1, 2, 3], thread-id-a [0, 1], byte-id-b [0, 1, 2, 3], thread-id-b [0, 1, 2, 3];
    scale_vec::2X byte-id [0, 2]; scale_vec::4X byte-id 0. "Any other value results in an
    undefined behavior" - refused here."""
    m = mmasim.MMA(RTX, ins)
    with pytest.raises(mmasim.OperandError, match="not a valid selector value"):
        m.layout(operand, **bad)


def test_ptx_table_37_valid_corners_are_accepted():
    """Table 37: thread-id-b 3 and byte-id 3 (1X), byte-id 2 (2X) are valid."""
    mmasim.MMA(RTX, MXF8).layout("scale_b", byte_id=3, thread_id=3)
    mmasim.MMA(RTX, MXF8).layout("scale_a", byte_id=3, thread_id=1)
    mmasim.MMA(RTX, MXF4_2X).layout("scale_a", byte_id=2, thread_id=1)


# CUTLASS cute/atom/mma_traits_sm120.hpp, SM120 block-scaled m16n8k32 / k64 atoms:
#   SFALayout = ((2,2,8),K):((8,0,1),16)   thread -> row m of (M16, K) (stride 0: the thread-id pair)
#   SFBLayout = ((4,8),K):((0,1),8)        thread -> column n of (N8, K)
def test_scale_rows_agree_with_cutlass_sm120_sfa_sfb_layouts():
    """Figures 43 / 44 (not read here) place SF_A of row m and SF_B of column n; CUTLASS's
    SFALayout gives lane l the row (l % 2) * 8 + l // 4 (for both thread-id pairs) and its
    SFBLayout lane l the column l // 4."""
    m = mmasim.MMA(RTX, MXF8)
    for tid in (0, 1):
        L = m.layout("scale_a", thread_id=tid)
        for lane in _holders(L):
            a, c = lane % 2, lane // 4           # thread mode (2, 2, 8): strides 8, 0, 1
            assert L.coords(lane, 0) == (8 * a + c, 0)
    for tid in range(4):
        L = m.layout("scale_b", thread_id=tid)
        for lane in _holders(L):
            assert L.coords(lane, 0) == (0, lane // 4)


# ------------------------------------------------------------------ §9.7.14.6.2 sparse A
def _chunk(m):
    """Logical elements per stored element group: the chunk a compressed column's element sits in."""
    rule = m.sparse_rule
    kept = rule.chunk // 2              # stored elements per chunk
    return rule.chunk, kept


@pytest.mark.parametrize("ins,regs,per_reg,row_g,firstcol", [
    # §9.7.14.6.2.1 .f16/.bf16 m16n8k16: two .b32, each two non-zero of 4 consecutive;
    # row = groupID for a0 and a1, groupID + 8 for a2 and a3; firstcol = threadID_in_group * 4
    ("mma.sync.sp.m16n8k16.f32.f16.f16", 2, 2, lambda i: i < 2, lambda t, i: t * 4),
    # §9.7.14.6.2.2 m16n8k32: four .b32; row = groupID for ai, 0 <= i < 2 || 4 <= i < 6;
    # firstcol = threadID_in_group * 4 for i < 4, (threadID_in_group * 4) + 16 for i >= 4
    ("mma.sync.sp.m16n8k32.f32.bf16.bf16", 4, 2, lambda i: 0 <= i < 2 or 4 <= i < 6,
     lambda t, i: t * 4 + (16 if i >= 4 else 0)),
    # §9.7.14.6.2.3 .tf32 m16n8k16: four .b32, one non-zero of 2 consecutive; row = groupID for a0
    # and a2; firstcol = threadID_in_group * 2 for a0 and a1, (threadID_in_group * 2) + 8 for a2 and a3
    ("mma.sync.sp.m16n8k16.f32.tf32.tf32", 4, 1, lambda i: i in (0, 2), lambda t, i: t * 2 + (8 if i >= 2 else 0)),
    # §9.7.14.6.2.4 .tf32 m16n8k8: two .b32; row = groupID for a0; firstcol = threadID_in_group * 2
    ("mma.sync.sp.m16n8k8.f32.tf32.tf32", 2, 1, lambda i: i == 0, lambda t, i: t * 2),
    # §9.7.14.6.2.5 .u8/.s8 m16n8k32: two .b32, four non-zero of 8; row = groupID for 0 <= i < 4;
    # firstcol = threadID_in_group * 8
    ("mma.sync.sp.m16n8k32.s32.s8.s8", 2, 4, lambda i: i < 4, lambda t, i: t * 8),
    # §9.7.14.6.2.6 m16n8k64 .u8/.s8/.e4m3/...: four .b32, four non-zero of 8; row = groupID for
    # 0 <= i < 4 || 8 <= i < 12; firstcol = threadID_in_group * 8, + 32 for i >= 8
    ("mma.sync.sp.m16n8k64.f32.e4m3.e5m2", 4, 4, lambda i: 0 <= i < 4 or 8 <= i < 12,
     lambda t, i: t * 8 + (32 if i >= 8 else 0)),
    # §9.7.14.6.2.7 .u4/.s4 m16n8k64: two .b32, eight non-zero of 16; row = groupID for 0 <= i < 8;
    # firstcol = threadID_in_group * 16
    ("mma.sync.sp.m16n8k64.s32.u4.s4", 2, 8, lambda i: i < 8, lambda t, i: t * 16),
    # §9.7.14.6.2.8 m16n8k128 .u4/.s4/.e2m1: four .b32, eight non-zero of 16; row = groupID for
    # 0 <= i < 8 || 16 <= i < 24; firstcol = threadID_in_group * 16, + 64 for i >= 16
    ("mma.sync.sp.m16n8k128.s32.s4.s4", 4, 8, lambda i: 0 <= i < 8 or 16 <= i < 24,
     lambda t, i: t * 16 + (64 if i >= 16 else 0)),
])
def test_ptx_sparse_a_fragment_rows_and_chunks(ins, regs, per_reg, row_g, firstcol):
    """The compressed A (M x K/2): element a_i of a lane is row groupID or groupID + 8 as the
    section says, and is a stored element of the chunk(s) [firstcol, lastcol] of the logical
    row; a register's stored elements are in K order (lowest first)."""
    m = mmasim.MMA(ADA, ins)
    L = m.layout("a")
    chunk, kept = _chunk(m)
    assert (L.rows, L.cols) == (16, m.datapath.k // 2)
    assert L.registers == regs and L.elements == regs * per_reg
    span = per_reg * chunk // kept              # logical columns a register's elements come from
    for lane in range(32):
        g, t = lane >> 2, lane % 4
        for i in range(L.elements):
            row, col = L.coords(lane, i)
            assert row == (g if row_g(i) else g + 8), (lane, i)
            logical_chunk = col // kept            # compressed col q is stored element q % kept of chunk q // kept
            assert firstcol(t, i) <= logical_chunk * chunk < firstcol(t, i) + span, (lane, i, col)
        for r in range(regs):       # within a register: consecutive stored elements, in order
            cols = [L.coords(lane, i)[1] for i in range(r * per_reg, (r + 1) * per_reg)]
            assert cols == list(range(cols[0], cols[0] + per_reg))


# ------------------------------------------------------------------ §9.7.14.6.1 sparsity selector
@pytest.mark.parametrize("ins,threads", [
    # "m16n8k16: One thread within a group of four consecutive threads contributes the metadata
    # for the entire group. This thread is indicated by a value in {0, 1, 2, 3}."
    ("mma.sync.sp.m16n8k16.f32.f16.f16", {0: [0], 1: [1], 2: [2], 3: [3]}),
    # "m16n8k32: ... the sparsity selector must be either 0 (threads T0, T1) or 1 (threads T2, T3)"
    ("mma.sync.sp.m16n8k32.f32.f16.f16", {0: [0, 1], 1: [2, 3]}),
    # .tf32: "m16n8k8: One thread ... {0, 1, 2, 3}"; "m16n8k16: ... 0 (threads T0, T1) or 1 (T2, T3)"
    ("mma.sync.sp.m16n8k8.f32.tf32.tf32", {0: [0], 1: [1], 2: [2], 3: [3]}),
    ("mma.sync.sp.m16n8k16.f32.tf32.tf32", {0: [0, 1], 1: [2, 3]}),
    # "m16n8k32 with .u8/.s8 type and m16n8k64 with .u4/.s4 type: A thread-pair ..."
    ("mma.sync.sp.m16n8k32.s32.u8.u8", {0: [0, 1], 1: [2, 3]}),
    ("mma.sync.sp.m16n8k64.s32.u4.u4", {0: [0, 1], 1: [2, 3]}),
    # "m16n8k64 with .u8/.s8 type and m16n8k128 with .u4/.s4 type: All threads ... must be 0"
    ("mma.sync.sp.m16n8k64.s32.s8.u8", {0: [0, 1, 2, 3]}),
    ("mma.sync.sp.m16n8k128.s32.s4.u4", {0: [0, 1, 2, 3]}),
    # .e4m3/.e5m2/...: "m16n8k64: All threads within a group of four ... must be 0"
    ("mma.sync.sp.m16n8k64.f32.e5m2.e5m2", {0: [0, 1, 2, 3]}),
])
def test_ptx_sparsity_selector_picks_the_metadata_threads(ins, threads):
    """§9.7.14.6.1: which threads of each group of four hold the metadata, per selector value;
    §9.7.14.6.2: the metadata is one .b32 register (16 2-bit or 8 4-bit indices); every chunk
    of A's logical K has one 4-bit selector."""
    m = mmasim.MMA(ADA, ins)
    for sel, ts in threads.items():
        L = m.layout("sparse_metadata", selector=sel)
        assert (L.rows, L.cols) == (16, m.sparse_rule.chunks(m.datapath.k))
        assert (L.registers, L.bits) == (1, 4)
        assert sorted(_holders(L)) == [lane for lane in range(32) if lane % 4 in ts]
    bad = max(threads) + 1
    with pytest.raises(mmasim.OperandError, match="not a valid selector value"):
        m.layout("sparse_metadata", selector=bad)


# CUTLASS corroboration of the metadata bit placement (the ISA draws it only in figures).
def _split(x, shape):
    out = []
    for s in shape:
        out.append(x % s)
        x //= s
    return out


def _off(shape, stride, x):
    return sum(c * d for c, d in zip(_split(x, shape), stride))


@pytest.mark.parametrize("ins,M,thr,val", [
    # cute/atom/mma_traits_sm90_gmma_sparse.hpp, warp 0 of the warpgroup (the ISA: §9.7.15.6.2
    # Figures 176 / 178 / 180-181 are the images of mma.sp's Figures 122 / 125 / 136-137):
    # ELayout_64x32 = ((2,2,8,4),(16,2)):((1024,0,1,16),(64,8))   .f16 m16n8k32
    ("mma.sync.sp.m16n8k32.f32.f16.f16", 64, ((2, 2, 8, 4), (1024, 0, 1, 16)), ((16, 2), (64, 8))),
    # ELayout_64x16 = ((2,2,8,4),(8,2)):((512,0,1,16),(64,8))      .tf32 m16n8k16
    ("mma.sync.sp.m16n8k16.f32.tf32.tf32", 64, ((2, 2, 8, 4), (512, 0, 1, 16)), ((8, 2), (64, 8))),
    # ELayout_64x64 = ((2,2,8,4),32):((8,2048,1,16),64)            8-bit m16n8k64
    ("mma.sync.sp.m16n8k64.s32.s8.s8", 64, ((2, 2, 8, 4), (8, 2048, 1, 16)), ((32,), (64,))),
    # cute/atom/mma_traits_sm120_sparse.hpp: SM120_SPARSE_16x8x64 ELayout = ((2,2,8),32):((8,512,1),16)
    ("mma.sync.sp.m16n8k64.f32.e4m3.e4m3", 16, ((2, 2, 8), (8, 512, 1)), ((32,), (16,))),
    # SM120_SPARSE_16x8x128 ELayout = ((2,2,8),64):((8,1024,1),16)
    ("mma.sync.sp.m16n8k128.s32.u4.u4", 16, ((2, 2, 8), (8, 1024, 1)), ((64,), (16,))),
])
def test_sparse_metadata_agrees_with_cutlass_elayouts(ins, M, thr, val):
    """A CuTe ELayout maps (thread, value) to m + M * k of the logical A; value v is metadata
    bit group v // chunk of the thread's register (the chunk's 4-bit selector).  Selector 0;
    CUTLASS's stride-0 thread mode is the selector's choice of pair."""
    m = mmasim.MMA(ADA, ins)
    L = m.layout("sparse_metadata", selector=0)
    chunk = m.sparse_rule.chunk
    nval = int(np.prod(val[0]))
    for lane in _holders(L):
        for v in range(nval):
            off = _off(thr[0], thr[1], lane) + _off(val[0], val[1], v)
            row, k = off % M, off // M
            assert L.coords(lane, v // chunk) == (row, k // chunk), (lane, v)


@pytest.mark.parametrize("ins,shape,stride,vshape,vstride", [
    # SM120_SPARSE_16x8x64 BLayout (T32,V16)->(N8,K64) = ((4,8),(4,4)):((32,1),(8,128))
    ("mma.sync.sp.m16n8k64.f32.e4m3.e4m3", (4, 8), (32, 1), (4, 4), (8, 128)),
    # SM120_SPARSE_16x8x128 BLayout (T32,V32)->(N8,K128) = ((4,8),(8,4)):((64,1),(8,256))
    ("mma.sync.sp.m16n8k128.s32.s4.s4", (4, 8), (64, 1), (8, 4), (8, 256)),
])
def test_sparse_b_fragments_agree_with_cutlass(ins, shape, stride, vshape, vstride):
    """B of m16n8k64 (8-bit) and m16n8k128 (4-bit) is drawn only in Figures 132-135 / 142-145;
    CUTLASS's BLayout maps (thread, value) to n + 8 * k."""
    L = mmasim.MMA(ADA, ins).layout("b")
    for lane in range(32):
        for v in range(L.elements):
            off = _off(shape, stride, lane) + _off(vshape, vstride, v)
            assert L.coords(lane, v) == (off // 8, off % 8)


# ------------------------------------------------------------------ warp() with scales and metadata
def _sparse_case(m, rng):
    M, K, N = 16, m.datapath.k, 8
    A = words(m.a_format, (M, K), rng, "mixed")
    B = words(m.b_format, (K, N), rng, "mixed")
    C = words(m.c_format, (M, N), rng, "mixed")
    rule = m.sparse_rule
    md = metadata_words(rng.choice(sorted(rule.selectors), size=(M, rule.chunks(K))))
    return A, B, C, md


@pytest.mark.parametrize("sel", [0, 1, 2, 3])
def test_warp_reads_the_metadata_of_the_selected_threads(sel):
    """The same metadata words placed for selector s give the matrix form's D when warp() is
    told s, and (other lanes holding zeros, an invalid selector) fail when told another."""
    m = mmasim.MMA(ADA, "mma.sync.sp.m16n8k16.f32.f16.f16", backend="numpy")
    A, B, C, md = _sparse_case(m, np.random.default_rng(11 + sel))
    a, b, c = m.fragments("a", compress(m.placement, A, md)), m.fragments("b", B), m.fragments("c", C)
    e = m.fragments("sparse_metadata", md, selector=sel)
    assert np.array_equal(m.unfragment("d", m.warp(a, b, c, sparse_metadata=e, sparsity_selector=sel)),
                          m(A, B, C, sparse_metadata=md))
    with pytest.raises(mmasim.SparseMetadataError, match="illegal sparse selector 0x0"):
        m.warp(a, b, c, sparse_metadata=e, sparsity_selector=(sel + 1) % 4)


@pytest.mark.parametrize("ins,byte_id,thread_id", [(MXF8, 3, 1), (MXF4_2X, 2, 1), (NVF4_4X, 0, 1)])
def test_warp_reads_the_scales_the_selectors_pick(ins, byte_id, thread_id):
    """Scales placed with {byte-id, thread-id} give the matrix form's D when warp() is given the
    same selectors; the registers hold nothing elsewhere, so the default selectors read zeros."""
    m = mmasim.MMA(RTX, ins, backend="numpy")
    rng = np.random.default_rng(5)
    dp = m.datapath
    A = words(m.a_format, (16, dp.k), rng, "mixed")
    B = words(m.b_format, (dp.k, 8), rng, "mixed")
    C = words(m.c_format, (16, 8), rng, "mixed")
    SA = words(m.scale_format, (16, dp.blocks), rng, "near_one")
    SB = words(m.scale_format, (dp.blocks, 8), rng, "near_one")
    sa = m.fragments("scale_a", SA, byte_id=byte_id, thread_id=thread_id)
    sb = m.fragments("scale_b", SB, byte_id=byte_id, thread_id=3)
    assert not sa[[lane for lane in range(32) if (lane >> 1) & 1 != thread_id]].any()
    abc = m.fragments("a", A), m.fragments("b", B), m.fragments("c", C)
    d = m.warp(*abc, scale_a=sa, scale_b=sb, byte_id_a=byte_id, thread_id_a=thread_id, byte_id_b=byte_id,
               thread_id_b=3)
    assert np.array_equal(m.unfragment("d", d), m(A, B, C, scale_a=SA, scale_b=SB))
    assert np.array_equal(m.unfragment("scale_a", sa, byte_id=byte_id, thread_id=thread_id), SA)
    wrong = m.warp(*abc, scale_a=sa, scale_b=sb, byte_id_b=byte_id, thread_id_b=3)
    assert np.array_equal(m.unfragment("d", wrong), m(A, B, C, scale_a=np.zeros_like(SA), scale_b=SB))


@pytest.mark.parametrize("arch,ins,sparse", [
    (RTX, MXF4_2X, False),
    (ADA, "mma.sync.sp::ordered_metadata.m16n8k64.f32.e4m3.e4m3", True),
    (RTX, "mma.sync.sp::ordered_metadata.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.m16n8k128.f32."
          "e2m1.e2m1.ue4m3", True),
])
def test_warp_with_scales_and_metadata_on_both_backends(arch, ins, sparse):
    """warp() equals the matrix form on the numpy and the numba backend (block-scaled, sparse,
    and both at once)."""
    pytest.importorskip("numba")
    rng = np.random.default_rng(3)
    m = mmasim.MMA(arch, ins)
    dp = m.datapath
    if sparse:
        A, B, C, md = _sparse_case(m, rng)
        kw, regs = {"sparse_metadata": md}, {"sparse_metadata": m.fragments("sparse_metadata", md)}
        a = compress(m.placement, A, md)
    else:
        A = words(m.a_format, (16, dp.k), rng, "mixed")
        B = words(m.b_format, (dp.k, 8), rng, "mixed")
        C = words(m.c_format, (16, 8), rng, "mixed")
        kw, regs, a = {}, {}, A
    if dp.scale:
        kw.update(scale_a=words(m.scale_format, (16, dp.blocks), rng, "near_one"),
                  scale_b=words(m.scale_format, (dp.blocks, 8), rng, "near_one"))
        regs.update(scale_a=m.fragments("scale_a", kw["scale_a"]), scale_b=m.fragments("scale_b", kw["scale_b"]))
    abc = m.fragments("a", a), m.fragments("b", B), m.fragments("c", C)
    for backend in ("numpy", "numba"):
        d = m.warp(*abc, backend=backend, **regs)
        assert np.array_equal(m.unfragment("d", d), m(A, B, C, backend=backend, **kw)), backend


def test_compress_and_expand_are_inverse_on_the_selected_elements():
    """compress keeps each row's selected elements in K order (selector 0x4: positions 0, 1 of
    a chunk; 0xE: 2, 3); expand puts them back and zeros the rest."""
    m = mmasim.MMA(ADA, "mma.sync.sp.m16n8k16.f32.f16.f16")
    A = np.arange(16 * 16, dtype=np.uint16).reshape(16, 16) + 0x3C00
    md = np.full((16, 1), 0xE4E4, dtype=np.uint32)       # chunks 0, 2: 0x4; chunks 1, 3: 0xE
    Ac = compress(m.placement, A, md)
    assert np.array_equal(Ac[0], A[0, [0, 1, 6, 7, 8, 9, 14, 15]])
    full = expand(m.placement, Ac, md)
    keep = np.zeros(16, bool)
    keep[[0, 1, 6, 7, 8, 9, 14, 15]] = True
    assert np.array_equal(full[:, keep], A[:, keep]) and not full[:, ~keep].any()


def test_scale_and_metadata_errors():
    m = mmasim.MMA(RTX, MXF8)
    z = np.zeros((32, 4), np.uint32)
    with pytest.raises(mmasim.ScaleError, match="pass the scale_a and scale_b registers"):
        m.warp(z, z[:, :2], z)
    with pytest.raises(mmasim.UnsupportedDatapath, match="no sparse_metadata"):
        m.layout("sparse_metadata")
    with pytest.raises(mmasim.OperandError, match="take no such selector"):
        m.layout("a", selector=1)
    with pytest.raises(mmasim.OperandError, match="non-negative integer"):
        m.layout("scale_a", thread_id=-1)
    sp = mmasim.MMA(ADA, "mma.sync.sp.m16n8k16.f32.f16.f16")
    with pytest.raises(mmasim.UnsupportedDatapath, match="not block-scaled"):
        sp.layout("scale_a")
    with pytest.raises(mmasim.SparseMetadataError, match="pass the sparse_metadata registers"):
        sp.warp(np.zeros((32, 2), np.uint32), np.zeros((32, 2), np.uint32), np.zeros((32, 4), np.uint32))
    with pytest.raises(mmasim.SparseMetadataError, match=r"shape \(M, 1\)"):
        sp.fragments("sparse_metadata", np.zeros((16, 4), np.uint32))


# ------------------------------------------------------------------ wgmma.mma_async.sp (§9.7.15.6.2)
@pytest.mark.parametrize("ins,athr,aval,ethr,eval_", [
    # cute/atom/mma_traits_sm90_gmma.hpp ALayout_64x32 = ((4,8,4),(4,2,2)):((256,1,16),(64,8,1024)) (sparse .f16,
    # two logical per stored), ELayout_64x32 = ((2,2,8,4),(16,2)):((1024,0,1,16),(64,8))
    ("wgmma.mma_async.sp.m64n8k32.f32.bf16.bf16", ((4, 8, 4), (256, 1, 16)), ((4, 2, 2), (64, 8, 1024)),
     ((2, 2, 8, 4), (1024, 0, 1, 16)), ((16, 2), (64, 8))),
    # ALayout_64x16 = ((4,8,4),(2,2,2)):((128,1,16),(64,8,512)) (sparse .tf32), ELayout_64x16
    ("wgmma.mma_async.sp.m64n8k16.f32.tf32.tf32", ((4, 8, 4), (128, 1, 16)), ((2, 2, 2), (64, 8, 512)),
     ((2, 2, 8, 4), (512, 0, 1, 16)), ((8, 2), (64, 8))),
    # ALayout_64x64 = ((4,8,4),(8,2,2)):((512,1,16),(64,8,2048)) (sparse 8-bit), ELayout_64x64
    ("wgmma.mma_async.sp.m64n16k64.s32.u8.s8", ((4, 8, 4), (512, 1, 16)), ((8, 2, 2), (64, 8, 2048)),
     ((2, 2, 8, 4), (8, 2048, 1, 16)), ((32,), (64,))),
])
def test_wgmma_sparse_a_and_metadata_agree_with_cutlass(ins, athr, aval, ethr, eval_):
    """§9.7.15.6.2: "Each warp in the warpgroup provides sparsity information for 16 rows of matrix
    A" (warp w: rows 16w .. 16w + 15), A from registers and the metadata drawn in Figures 175-181
    (the metadata figures are mma.sp's images).  CUTLASS's sparse RS atoms give A over the logical
    K (each stored element standing for its chunk) and E as for mma.sp; all 128 threads."""
    m = mmasim.MMA("H100", ins)
    La, Le = m.layout("a"), m.layout("sparse_metadata")
    chunk = m.sparse_rule.chunk
    kept = chunk // 2
    for lane in range(128):
        for v in range(int(np.prod(aval[0]))):
            off = _off(athr[0], athr[1], lane) + _off(aval[0], aval[1], v)
            row, k = off % 64, off // 64
            for j in range(kept):
                assert La.coords(lane, (v // chunk) * kept + j) == (row, (k // chunk) * kept + j), (lane, v)
    for lane in _holders(Le):
        for v in range(int(np.prod(eval_[0]))):
            off = _off(ethr[0], ethr[1], lane) + _off(eval_[0], eval_[1], v)
            assert Le.coords(lane, v // chunk) == (off % 64, (off // 64) // chunk), (lane, v)


def test_wgmma_sparse_round_trips_and_selector():
    """Fragments and back for A and the metadata; the .f16 selector picks T0, T1 or T2, T3 of each quad."""
    m = mmasim.MMA("H100", "wgmma.mma_async.sp.m64n8k32.f32.f16.f16")
    rng = np.random.default_rng(2)
    A = words(m.a_format, (64, 32), rng, "uniform")
    md = metadata_words(rng.choice(sorted(m.sparse_rule.selectors), size=(64, 8)))
    Ac = compress(m.placement, A, md)
    assert np.array_equal(m.unfragment("a", m.fragments("a", Ac)), Ac)
    e = m.fragments("sparse_metadata", md, selector=1)
    assert e.shape == (128, 1) and not e[[lane for lane in range(128) if lane % 4 < 2]].any()
    assert np.array_equal(m.unfragment("sparse_metadata", e, selector=1), md)
    with pytest.raises(mmasim.OperandError, match="not a valid selector value"):
        m.layout("sparse_metadata", selector=2)


def test_metadata_words_packs_chunk_selectors_lowest_nibble_first():
    """Nibble j of a row is the selector of chunk j (the matrix form's metadata words, docs/datapaths.md §11)."""
    assert metadata_words(np.array([[0x4, 0xE, 0x8, 0x9, 0xC, 0xD, 0x4, 0xE, 0x9]])).tolist() == [[0xE4DC98E4, 0x9]]
    with pytest.raises(mmasim.SparseMetadataError, match="4-bit chunk selectors"):
        metadata_words(np.array([[16]]))
