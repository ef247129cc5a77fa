"""One test per layout figure / formula of the PTX ISA and of AMD's matrix-instruction
documentation.  Each expectation is written from the document's formula (quoted in
the docstring), in the document's own terms, never from mmasim's output."""

import numpy as np
import pytest

import mmasim
from mmasim.placement import (
    CoreMatrixLayout, SmemLayout, decode_descriptor, encode_descriptor, tcgen05_ld,
)


def _all(L):
    """{(lane, i): (row, col)} of a layout."""
    return {(lane, i): L.coords(lane, i) for lane in range(L.lanes) for i in range(L.elements)}


def _check(L, formula):
    got = _all(L)
    want = {(lane, i): formula(lane, i) for lane in range(L.lanes) for i in range(L.elements)}
    assert got == want


# ------------------------------------------------------------------ PTX mma.sync
def test_ptx_mma_m16n8k16_f16_a_fragment():
    """PTX 'Matrix Fragments for mma.m16n8k16 with floating point type', A (.f16x2 x4, a0..a7):
    groupID = %laneid >> 2, threadID_in_group = %laneid % 4;
    row = groupID for ai where 0 <= i < 2 || 4 <= i < 6, groupID + 8 otherwise;
    col = (threadID_in_group * 2) + (i & 0x1) for ai where i < 4, (threadID_in_group * 2) + (i & 0x1) + 8 for i >= 4."""
    L = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16").layout("a")
    assert (L.lanes, L.registers, L.elements) == (32, 4, 8)

    def f(lane, i):
        g, t = lane >> 2, lane % 4
        row = g if (0 <= i < 2 or 4 <= i < 6) else g + 8
        col = t * 2 + (i & 1) + (0 if i < 4 else 8)
        return row, col
    _check(L, f)


def test_ptx_mma_m16n8k16_f16_b_fragment():
    """B (.f16x2 x2, b0..b3): row = (threadID_in_group * 2) + (i & 0x1) for bi where i < 2,
    (threadID_in_group * 2) + (i & 0x1) + 8 for i >= 2; col = groupID."""
    L = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.bf16.bf16").layout("b")
    assert (L.registers, L.elements) == (2, 4)
    _check(L, lambda lane, i: ((lane % 4) * 2 + (i & 1) + (0 if i < 2 else 8), lane >> 2))


@pytest.mark.parametrize("ins", ["mma.sync.m16n8k16.f32.f16.f16", "mma.sync.m16n8k16.f16.f16.f16",
                                 "mma.sync.m16n8k8.f32.tf32.tf32", "mma.sync.m16n8k32.f32.e4m3.e4m3"])
def test_ptx_mma_m16n8_accumulator_fragment(ins):
    """C / D (c0..c3): row = groupID for ci where i < 2, groupID + 8 for i >= 2;
    col = (threadID_in_group * 2) + (i & 0x1).  f32: four .f32 registers; f16: two .f16x2."""
    m = mmasim.MMA("Ada", ins)
    for op in "cd":
        L = m.layout(op)
        assert L.registers == (4 if m.d_format.container_bits == 32 else 2)
        _check(L, lambda lane, i: ((lane >> 2) + (0 if i < 2 else 8), (lane % 4) * 2 + (i & 1)))


def test_which_lane_holds_d_9_3_of_m16n8k16():
    """D[9][3]: row 9 = groupID + 8 -> groupID 1, c2 or c3; col 3 = threadID_in_group * 2 + 1 -> c3,
    threadID_in_group 1; lane = groupID * 4 + threadID_in_group = 5."""
    m = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16")
    assert m.layout("d").owner(9, 3) == (5, 3)


def test_ptx_mma_m16n8k8_f16_fragments():
    """m16n8k8 .f16: A a0..a3: row = groupID for a0, a1, groupID + 8 for a2, a3;
    col = threadID_in_group * 2 + (i & 0x1).  B b0, b1: row = threadID_in_group * 2 + i; col = groupID."""
    m = mmasim.MMA("Turing", "mma.sync.m16n8k8.f32.f16.f16")
    _check(m.layout("a"), lambda lane, i: ((lane >> 2) + (0 if i < 2 else 8), (lane % 4) * 2 + (i & 1)))
    _check(m.layout("b"), lambda lane, i: ((lane % 4) * 2 + i, lane >> 2))


def test_ptx_mma_m16n8k8_tf32_fragments():
    """m16n8k8 .tf32: A a0..a3: row = groupID for a0, a2, groupID + 8 for a1, a3;
    col = threadID_in_group for a0, a1, threadID_in_group + 4 for a2, a3.
    B b0, b1: row = threadID_in_group for b0, threadID_in_group + 4 for b1; col = groupID."""
    m = mmasim.MMA("A100", "mma.sync.m16n8k8.f32.tf32.tf32")
    _check(m.layout("a"), lambda lane, i: ((lane >> 2) + (8 if i in (1, 3) else 0),
                                            (lane % 4) + (4 if i >= 2 else 0)))
    _check(m.layout("b"), lambda lane, i: ((lane % 4) + 4 * i, lane >> 2))


def test_ptx_mma_m16n8k4_tf32_fragments():
    """m16n8k4 .tf32: A a0, a1: row = groupID for a0, groupID + 8 for a1; col = threadID_in_group.
    B b0: row = threadID_in_group; col = groupID."""
    m = mmasim.MMA("A100", "mma.sync.m16n8k4.f32.tf32.tf32")
    _check(m.layout("a"), lambda lane, i: ((lane >> 2) + 8 * i, lane % 4))
    _check(m.layout("b"), lambda lane, i: (lane % 4, lane >> 2))


def test_ptx_mma_m16n8k32_8bit_fragments():
    """m16n8k32 with .e4m3 / .e5m2 (and .s8 / .u8): A a0..a15 (4 x .b32):
    row = groupID for ai where 0 <= i < 4 || 8 <= i < 12, groupID + 8 otherwise;
    col = (threadID_in_group * 4) + (i & 0x3) for i < 8, + 16 for i >= 8.
    B b0..b7: row = (threadID_in_group * 4) + (i & 0x3) for i < 4, + 16 for i >= 4; col = groupID."""
    m = mmasim.MMA("Ada", "mma.sync.m16n8k32.f32.e4m3.e5m2")
    assert m.layout("a").registers == 4 and m.layout("b").registers == 2

    def fa(lane, i):
        g, t = lane >> 2, lane % 4
        return (g if (0 <= i < 4 or 8 <= i < 12) else g + 8), t * 4 + (i & 3) + (0 if i < 8 else 16)
    _check(m.layout("a"), fa)
    _check(m.layout("b"), lambda lane, i: ((lane % 4) * 4 + (i & 3) + (0 if i < 4 else 16), lane >> 2))


def test_ptx_mma_m16n8k16_8bit_fragments():
    """m16n8k16 with 8-bit types: A a0..a7 (2 x .b32): row = groupID for a0..a3, groupID + 8 for a4..a7;
    col = (threadID_in_group * 4) + (i & 0x3).  B b0..b3: row = threadID_in_group * 4 + i; col = groupID."""
    m = mmasim.MMA("Ada", "mma.sync.m16n8k16.f32.e4m3.e4m3")
    _check(m.layout("a"), lambda lane, i: ((lane >> 2) + (0 if i < 4 else 8), (lane % 4) * 4 + (i & 3)))
    _check(m.layout("b"), lambda lane, i: ((lane % 4) * 4 + i, lane >> 2))


def test_ptx_mma_kind_f8f6f4_uses_byte_containers():
    """kind::f8f6f4 m16n8k32: every type (e4m3 .. e2m1) sits in an 8-bit container, so the
    fragments are those of the 8-bit m16n8k32 (A: 4 registers of 4 bytes, B: 2)."""
    m = mmasim.MMA("RTX 5090", "mma.sync.kind::f8f6f4.m16n8k32.f32.e2m1.e3m2")
    assert (m.layout("a").registers, m.layout("a").elements) == (4, 16)
    assert m.layout("a").coords(5, 9) == (1, 1 * 4 + 1 + 16)     # a9: 8 <= i < 12 -> row groupID


def test_ptx_mma_m16n8k64_4bit_fragments():
    """m16n8k64 with 4-bit e2m1 (kind::mxf4): A a0..a31 (4 x .b32, 8 codes each):
    row = groupID for ai where 0 <= i < 8 || 16 <= i < 24, groupID + 8 otherwise;
    col = (threadID_in_group * 8) + (i & 0x7) for i < 16, + 32 for i >= 16.
    B b0..b15: row = (threadID_in_group * 8) + (i & 0x7) for i < 8, + 32 for i >= 8; col = groupID."""
    m = mmasim.MMA("RTX 5090", "mma.sync.kind::mxf4.block_scale.scale_vec::2X.m16n8k64.f32.e2m1.e2m1.ue8m0")
    La, Lb = m.layout("a"), m.layout("b")
    assert (La.registers, La.elements, Lb.registers, Lb.elements) == (4, 32, 2, 16)

    def fa(lane, i):
        g, t = lane >> 2, lane % 4
        return (g if (0 <= i < 8 or 16 <= i < 24) else g + 8), t * 8 + (i & 7) + (0 if i < 16 else 32)
    _check(La, fa)
    _check(Lb, lambda lane, i: ((lane % 4) * 8 + (i & 7) + (0 if i < 8 else 32), lane >> 2))


def test_ptx_mma_m8n8k4_f64_fragments():
    """m8n8k4 .f64: A a0: row = groupID, col = threadID_in_group; B b0: row = threadID_in_group,
    col = groupID; C/D c0, c1: row = groupID, col = threadID_in_group * 2 + i."""
    m = mmasim.MMA("A100", "mma.sync.m8n8k4.f64.f64.f64")
    _check(m.layout("a"), lambda lane, i: (lane >> 2, lane % 4))
    _check(m.layout("b"), lambda lane, i: (lane % 4, lane >> 2))
    _check(m.layout("d"), lambda lane, i: (lane >> 2, (lane % 4) * 2 + i))
    assert m.layout("d").registers == 4      # two .f64 = four 32-bit registers


def test_ptx_mma_m16n8k8_f64_fragments():
    """m16n8k8 .f64 (sm_90): A a0..a3: row = groupID for a0, a2, groupID + 8 for a1, a3;
    col = threadID_in_group for a0, a1, threadID_in_group + 4 for a2, a3."""
    m = mmasim.MMA("H100", "mma.sync.m16n8k8.f64.f64.f64")
    _check(m.layout("a"), lambda lane, i: ((lane >> 2) + (8 if i % 2 else 0), (lane % 4) + (4 if i >= 2 else 0)))


def _qp_block(lane):
    """Quad pair of a lane: QP0 = lanes 0-3 and 16-19, QP1 = 4-7 and 20-23, ..."""
    return (lane % 16) // 4


def test_ptx_mma_m8n8k4_f16_quad_pair_fragments():
    """m8n8k4 .f16 (executed by each quad pair; the layout's matrix stacks the four quad pairs'):
    A .row a0..a3: row = %laneid % 4 if %laneid < 16, (%laneid % 4) + 4 otherwise; col = i.
    B .col b0..b3: row = i; col = %laneid % 4 if %laneid < 16, (%laneid % 4) + 4 otherwise.
    C/D .f16 c0..c7: row = %laneid % 4 if %laneid < 16, (%laneid % 4) + 4 otherwise; col = i.
    C/D .f32 c0..c7: row = X if %laneid < 16, X + 4 otherwise, X = (%laneid & 0b1) + (i & 0b10);
    col = (i & 0b100) + (%laneid & 0b10) + (i & 0b1)."""
    def half(lane):
        return 0 if lane < 16 else 4
    m = mmasim.MMA("V100", "mma.sync.m8n8k4.f32.f16.f16")
    La, Lb, Ld = m.layout("a"), m.layout("b"), m.layout("d")
    assert (La.blocks, La.rows, Lb.rows, Ld.rows) == (4, 32, 16, 32)
    _check(La, lambda lane, i: (8 * _qp_block(lane) + lane % 4 + half(lane), i))
    _check(Lb, lambda lane, i: (4 * _qp_block(lane) + i, lane % 4 + half(lane)))
    _check(Ld, lambda lane, i: (8 * _qp_block(lane) + (lane & 1) + (i & 2) + half(lane),
                                (i & 4) + (lane & 2) + (i & 1)))
    m16 = mmasim.MMA("Turing", "mma.sync.m8n8k4.f16.f16.f16")
    _check(m16.layout("d"), lambda lane, i: (8 * _qp_block(lane) + lane % 4 + half(lane), i))
    assert m16.layout("d").registers == 4


def test_ptx_mma_m8n8k4_f16_col_row_operands():
    """A .col a0..a3: row = i if %laneid < 16, i + 4 otherwise; col = %laneid % 4.
    B .row b0..b3: row = %laneid % 4; col = i if %laneid < 16, i + 4 otherwise."""
    m = mmasim.MMA("V100", "mma.sync.m8n8k4.f32.f16.f16")
    _check(m.layout("a", alayout="col"),
           lambda lane, i: (8 * _qp_block(lane) + i + (0 if lane < 16 else 4), lane % 4))
    _check(m.layout("b", blayout="row"),
           lambda lane, i: (4 * _qp_block(lane) + lane % 4, i + (0 if lane < 16 else 4)))


# ------------------------------------------------------------------ packing
def test_f16x2_packs_lower_element_in_low_half():
    """PTX .f16x2: a register holds two f16, the element with the lower index in bits 0-15."""
    m = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16")
    A = np.zeros((16, 16), np.uint16)
    A[0, 0], A[0, 1] = 0x3C00, 0xC000          # a0, a1 of lane 0
    regs = m.fragments("a", A)
    assert regs[0, 0] == 0xC000_3C00


def test_e4m3x4_packs_four_bytes_lowest_first():
    """Four e4m3 per .b32: a0 in bits 0-7 .. a3 in bits 24-31 (lane 0: A[0][0..3])."""
    m = mmasim.MMA("Ada", "mma.sync.m16n8k32.f32.e4m3.e4m3")
    A = np.zeros((16, 32), np.uint8)
    A[0, :4] = [0x11, 0x22, 0x33, 0x44]
    assert m.fragments("a", A)[0, 0] == 0x44332211


def test_e2m1_packs_eight_codes_per_register():
    """kind::mxf4 e2m1: eight 4-bit codes per .b32, a0 in bits 0-3 (lane 0: A[0][0..7])."""
    m = mmasim.MMA("RTX 5090", "mma.sync.kind::mxf4.block_scale.scale_vec::2X.m16n8k64.f32.e2m1.e2m1.ue8m0")
    A = np.zeros((16, 64), np.uint8)
    A[0, :8] = [1, 2, 3, 4, 5, 6, 7, 8]
    assert m.fragments("a", A)[0, 0] == 0x87654321


def test_f64_takes_two_registers_low_word_first():
    """A 64-bit element is a register pair {lo, hi}."""
    m = mmasim.MMA("A100", "mma.sync.m8n8k4.f64.f64.f64")
    C = np.zeros((8, 8), np.uint64)
    C[0, 1] = 0x3FF0_0000_0000_0001          # c1 of lane 0
    regs = m.fragments("c", C)
    assert list(regs[0]) == [0, 0, 0x0000_0001, 0x3FF0_0000]


def test_fragments_take_values_too():
    m = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16")
    A = np.zeros((16, 16), np.float16)
    A[8, 0] = 1.0                           # a2 of lane 0 (row groupID + 8, col 0)
    assert m.fragments("a", A)[0, 1] == 0x3C00


# ------------------------------------------------------------------ wgmma
def test_ptx_wgmma_accumulator_fragment():
    """wgmma m64nNk*: D d0..d(N/2 - 1) over the warpgroup's 128 threads:
    row = 16 * (warp id within the warpgroup) + groupID + 8 * ((i % 4) >= 2 ? 1 : 0);
    col = (i / 4) * 8 + threadID_in_group * 2 + (i & 0x1)."""
    m = mmasim.MMA("H100", "wgmma.mma_async.m64n32k16.f32.bf16.bf16")
    L = m.layout("d")
    assert (L.lanes, L.elements, L.registers) == (128, 16, 16)

    def f(tid, i):
        warp, lane = tid // 32, tid % 32
        return 16 * warp + lane // 4 + (8 if i % 4 >= 2 else 0), (i // 4) * 8 + (lane % 4) * 2 + (i & 1)
    _check(L, f)


def test_ptx_wgmma_register_a_fragment():
    """wgmma m64nNk16 A from registers (.f16x2 x4): warp w holds rows 16w..16w+15 with
    mma.m16n8k16's A formulas (row = groupID (+8), col = threadID_in_group * 2 + (i & 1) (+8))."""
    L = mmasim.MMA("H100", "wgmma.mma_async.m64n8k16.f32.f16.f16").layout("a")

    def f(tid, i):
        warp, lane = tid // 32, tid % 32
        g, t = lane >> 2, lane % 4
        return 16 * warp + (g if (i < 2 or 4 <= i < 6) else g + 8), t * 2 + (i & 1) + (0 if i < 4 else 8)
    _check(L, f)


# ------------------------------------------------------------------ tcgen05 TMEM
def test_ptx_tcgen05_datapath_layout_d_m128():
    """Data path layout D (M = 128, cta_group::1): row i of D in TMEM lane i, column j in column j."""
    L = mmasim.MMA("B200", "tcgen05.mma.kind::f16.m128n16k16.f32.bf16.bf16").layout("d")
    assert (L.lanes, L.registers, L.storage) == (128, 16, "tmem")
    _check(L, lambda lane, col: (lane, col))


def test_ptx_tcgen05_datapath_layout_f_m64():
    """Data path layout F (M = 64, cta_group::1): the four warps' sub-partitions each take 16 rows
    in their lower 16 lanes: row r in TMEM lane 32 * (r // 16) + r % 16."""
    L = mmasim.MMA("B200", "tcgen05.mma.kind::tf32.m64n8k8.f32.tf32.tf32").layout("d")
    for r in range(64):
        for c in range(8):
            assert L.owner(r, c) == (32 * (r // 16) + r % 16, c)
    with pytest.raises(mmasim.ShapeError, match="holds no element"):
        L.coords(16, 0)


@pytest.mark.parametrize("shape,formula,rows,cols_per_x,regs_per_x", [
    ("32x32b", lambda l, r: (l, r), 32, 1, 1),
    ("16x64b", lambda l, r: (l // 4 + 8 * (l % 2), (l // 2) % 2 + 2 * r), 16, 2, 1),
    ("16x128b", lambda l, r: (l // 4 + 8 * (r % 2), l % 4 + 4 * (r // 2)), 16, 4, 2),
    ("16x256b", lambda l, r: (l // 4 + 8 * ((r // 2) % 2), r % 2 + 2 * (l % 4) + 8 * (r // 4)), 16, 8, 4),
])
def test_ptx_tcgen05_ld_shapes(shape, formula, rows, cols_per_x, regs_per_x):
    """tcgen05.ld shapes (PTX 'Matrix fragments for tcgen05.ld / tcgen05.st'), register r of lane l:
    32x32b (l, r); 16x64b (l/4 + 8*(l%2), (l/2)%2 + 2r); 16x128b (l/4 + 8*(r%2), l%4 + 4*(r/2));
    16x256b (l/4 + 8*((r/2)%2), r%2 + 2*(l%4) + 8*(r/4)) as (TMEM lane, column)."""
    for num in (1, 2, 4):
        L = tcgen05_ld(shape, num)
        assert (L.rows, L.cols, L.registers) == (rows, cols_per_x * num, regs_per_x * num)
        _check(L, formula)
    with pytest.raises(mmasim.ShapeError, match="16x32bx2 is not modelled"):
        tcgen05_ld("16x32bx2")


def test_16x256b_reads_the_mma_accumulator_order():
    """The 16x256b shape hands each thread the words of mma.m16n8's C fragment (c0..c3 pattern):
    lane l register r < 4 reads row groupID + 8 * (r >= 2), column threadID_in_group * 2 + (r & 1)."""
    L = tcgen05_ld("16x256b", 1)
    mma = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16").layout("d")
    assert all(L.coords(lane, r) == mma.coords(lane, r) for lane in range(32) for r in range(4))


# ------------------------------------------------------------------ AMD v_mfma
def test_amd_mfma_32x32x8f16_layout():
    """v_mfma_f32_32x32x8f16 (one block): A[i][k] in lane i + 32 * (k // 4), item k % 4;
    B[k][j] in lane j + 32 * (k // 4), item k % 4; D[i][j] in lane j + 32 * ((i // 4) % 2),
    register 4 * (i // 8) + i % 4."""
    m = mmasim.MMA("MI300X", "v_mfma.m32n32k8.f32.f16.f16")
    La, Lb, Ld = m.layout("a"), m.layout("b"), m.layout("d")
    assert (La.lanes, La.registers, Ld.registers) == (64, 2, 16)
    for i in range(32):
        for k in range(8):
            assert La.owner(i, k) == (i + 32 * (k // 4), k % 4)
            assert Lb.owner(k, i) == (i + 32 * (k // 4), k % 4)
        for j in range(32):
            assert Ld.owner(i, j) == (j + 32 * ((i // 4) % 2), 4 * (i // 8) + i % 4)


def test_amd_mfma_16x16x16f16_layout():
    """v_mfma_f32_16x16x16f16: A[i][k] in lane i + 16 * (k // 4), item k % 4;
    D[i][j] in lane j + 16 * (i // 4), register i % 4."""
    m = mmasim.MMA("MI300X", "v_mfma.m16n16k16.f32.f16.f16")
    La, Ld = m.layout("a"), m.layout("d")
    for i in range(16):
        for k in range(16):
            assert La.owner(i, k) == (i + 16 * (k // 4), k % 4)
        for j in range(16):
            assert Ld.owner(i, j) == (j + 16 * (i // 4), i % 4)


def test_amd_mfma_32x32x1f32_two_blocks():
    """v_mfma_f32_32x32x1_2b_f32: 2 blocks; A of block b: A_b[i][0] in lane i + 32 b;
    D_b[i][j] in lane j + 32 * ((i // 4) % 2), register 16 b + 4 * (i // 8) + i % 4
    (the layout's matrix stacks the blocks along rows)."""
    m = mmasim.MMA("MI300X", "v_mfma.m32n32k1.f32.f32.f32")
    La, Ld = m.layout("a"), m.layout("d")
    assert (La.blocks, La.rows, Ld.rows, Ld.registers) == (2, 64, 64, 32)
    for b in range(2):
        for i in range(32):
            assert La.owner(32 * b + i, 0) == (i + 32 * b, 0)
            for j in range(32):
                assert Ld.owner(32 * b + i, j) == (j + 32 * ((i // 4) % 2), 16 * b + 4 * (i // 8) + i % 4)


def test_amd_mfma_4x4x1f32_sixteen_blocks():
    """v_mfma_f32_4x4x1_16b_f32: 16 blocks; A_b[i][0] in lane 4 b + i; D_b[i][j] in lane 4 b + j, register i."""
    m = mmasim.MMA("MI300X", "v_mfma.m4n4k1.f32.f32.f32")
    La, Ld = m.layout("a"), m.layout("d")
    assert (La.blocks, Ld.registers) == (16, 4)
    for b in range(16):
        for i in range(4):
            assert La.owner(4 * b + i, 0) == (4 * b + i, 0)
            for j in range(4):
                assert Ld.owner(4 * b + i, j) == (4 * b + j, i)


def test_amd_mfma_bf16_before_1k_holds_two_per_lane():
    """CDNA1 v_mfma_f32_32x32x4bf16 (not _1k): two bf16 per lane, A[i][k] in lane i + 32 * (k // 2),
    item k % 2; the CDNA2 _1k form of the same shape has four per lane in two blocks."""
    La = mmasim.MMA("MI100", "v_mfma.m32n32k4.f32.bf16.bf16").layout("a")
    assert (La.elements, La.registers, La.blocks) == (2, 1, 1)
    for i in range(32):
        for k in range(4):
            assert La.owner(i, k) == (i + 32 * (k // 2), k % 2)
    L1k = mmasim.MMA("MI250X", "v_mfma.kind::1k.m32n32k4.f32.bf16.bf16").layout("a")
    assert (L1k.elements, L1k.registers, L1k.blocks) == (4, 2, 2)


def test_amd_mfma_fp8_16x16x32_holds_eight_bytes_per_lane():
    """v_mfma_f32_16x16x32_fp8_fp8: A[i][k] in lane i + 16 * (k // 8), byte k % 8 of a VGPR pair."""
    La = mmasim.MMA("MI300X", "v_mfma.m16n16k32.f32.e4m3fnuz.e4m3fnuz").layout("a")
    assert (La.elements, La.registers) == (8, 2)
    for i in range(16):
        for k in range(32):
            assert La.owner(i, k) == (i + 16 * (k // 8), k % 8)


# ------------------------------------------------------------------ shared memory
def test_t1_bf16_core_matrix_layout_is_the_no_swizzle_k_major_instance():
    """T1: offset(i, k) = (i & 7) * 8 + (i >> 3) * 32 + (k & 7) + (k >> 3) * 64 bf16 elements, i.e.
    the K-major no-swizzle layout with SBO = 32 * 2 = 64 bytes and LBO = 64 * 2 = 128 bytes."""
    t1 = [x for x in mmasim.layouts("B200") if x.name == "tcgen05.smem.operand.bf16"][0]
    assert isinstance(t1, SmemLayout) and (t1.major, t1.swizzle, t1.sbo, t1.lbo) == ("K", 0, 64, 128)
    general = SmemLayout("k-major", major="K", swizzle=0, lbo=128, sbo=64, element_bits=16)
    i, k = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    assert np.array_equal(general.offset(i, k), 2 * ((i & 7) * 8 + (i >> 3) * 32 + (k & 7) + (k >> 3) * 64))
    assert np.array_equal(t1.offset(i, k), general.offset(i, k) // 2)


def test_no_swizzle_mn_major_core_matrices():
    """MN-major, no swizzle: a core matrix is 8 K-rows of 16 bytes along MN; LBO steps along MN
    between core matrices, SBO along K: offset = (k % 8) * 16 + (k // 8) * SBO + mb % 16 + (mb // 16) * LBO."""
    L = SmemLayout("mn", major="MN", lbo=256, sbo=128, element_bits=16)
    assert L.offset(0, 0) == 0 and L.offset(7, 0) == 14 and L.offset(8, 0) == 256
    assert L.offset(0, 1) == 16 and L.offset(0, 8) == 128 and L.offset(9, 9) == 16 + 2 + 256 + 128


@pytest.mark.parametrize("mode,xor", [(128, lambda r: r % 8), (64, lambda r: (r // 2) % 4),
                                      (32, lambda r: (r // 4) % 2)])
def test_k_major_swizzle_permutes_16_byte_chunks(mode, xor):
    """K-major S-byte swizzle: 8 rows of S bytes; the 16-byte chunk index of each row is XOR-ed with
    address bits 7.. (Swizzle<3,4,3> for 128B: chunk ^ (row % 8); 64B: chunk ^ ((row / 2) % 4);
    32B: chunk ^ ((row / 4) % 2)); SBO steps between 8-row groups."""
    L = SmemLayout("sw", major="K", swizzle=mode, sbo=8 * mode, element_bits=16)
    for r in range(16):
        for k in range(mode // 2):
            kb = 2 * k
            want = (r // 8) * 8 * mode + (r % 8) * mode + ((kb // 16) ^ xor(r % 8)) * 16 + kb % 16
            assert L.offset(r, k) == want
    with pytest.raises(mmasim.ShapeError, match="K-major"):
        L.offset(0, mode // 2)


def test_swizzled_images_round_trip():
    L = SmemLayout("sw128", major="K", swizzle=128, sbo=1024, element_bits=16)
    X = np.arange(64 * 64).reshape(64, 64)
    assert np.array_equal(L.from_image(L.to_image(X), 64, 64), X)


def test_wgmma_descriptor_fields():
    """wgmma matrix descriptor: bits 0-13 start address >> 4, 16-29 LBO >> 4, 32-45 SBO >> 4,
    49-51 base offset, 62-63 swizzle (0 none, 1 128B, 2 64B, 3 32B)."""
    w = encode_descriptor(0x400, 128, 64, 128)
    assert w == (0x400 >> 4) | (128 >> 4) << 16 | (64 >> 4) << 32 | 1 << 62
    assert encode_descriptor(0x400, 128, 64, 32) >> 62 == 3
    d = decode_descriptor(w)
    assert (d.start_address, d.lbo, d.sbo, d.swizzle) == (0x400, 128, 64, 128)
    with pytest.raises(mmasim.ShapeError, match="multiple of 16"):
        encode_descriptor(0x401, 128, 64)


def test_tcgen05_descriptor_fields():
    """tcgen05 shared-memory descriptor: address fields as wgmma, bits 46-48 the constant 0b001,
    52 LBO mode, 61-63 swizzle (0 none, 1 128B with 32B atomic, 2 128B, 4 64B, 6 32B)."""
    w = encode_descriptor(0x800, 128, 64, 64, target="tcgen05")
    assert w == (0x800 >> 4) | (128 >> 4) << 16 | (64 >> 4) << 32 | 1 << 46 | 4 << 61
    d = decode_descriptor(w, target="tcgen05")
    assert (d.start_address, d.lbo, d.sbo, d.swizzle, d.lbo_mode) == (0x800, 128, 64, 64, 0)
    t1 = [x for x in mmasim.layouts("B200") if x.name == "tcgen05.smem.operand.bf16"][0]
    assert decode_descriptor(t1.descriptor(0x1000, target="tcgen05"), "tcgen05").sbo == 64
    with pytest.raises(mmasim.ShapeError, match="0b001"):
        decode_descriptor(0, target="tcgen05")


def test_core_matrix_layout_still_constructs_from_element_units():
    lay = CoreMatrixLayout(name="x", arch="", description="", T=8, SBO=32, LBO=64)
    assert (lay.sbo, lay.lbo, lay.element_bits) == (64, 128, 16)


@pytest.mark.parametrize("letter,n,where", [
    ("A", 16, lambda i, j, N: (i, j)),
    ("D", 24, lambda i, j, N: (i, j)),
    ("B", 32, lambda i, j, N: (i + 64 * (j // (N // 2)), j % (N // 2))),
    ("E", 16, lambda i, j, N: (i + 64 * (j // (N // 2)), j % (N // 2))),
    ("C", 8, lambda i, j, N: (32 * (i // 16) + i % 16, j)),
    ("F", 8, lambda i, j, N: (32 * (i // 16) + i % 16, j)),
    ("G", 64, lambda i, j, N: (i + 32 * (j // (N // 4)), j % (N // 4))),
])
def test_ptx_tcgen05_datapath_layouts_a_to_g(letter, n, where):
    """PTX 'Data path layout organization', per CTA: A (M=256, cta_group::2) and D (M=128): row i
    in TMEM lane i; B (M=128 cta_group::2 dense) and E (M=64 .ws): element [i, j] in lane
    i + 64 * (j // (N/2)), column j % (N/2); C (M=128 cta_group::2 sparse) and F (M=64):
    row i in lane 32 * (i // 16) + i % 16; G (M=32 .ws): [i, j] in lane i + 32 * (j // (N/4)),
    column j % (N/4)."""
    from mmasim.placement import tmem_datapath

    L = tmem_datapath(letter, n)
    assert L.storage == "tmem" and L.lanes == 128 and L.cols == n
    for i in range(L.rows):
        for j in range(n):
            assert L.owner(i, j) == where(i, j, n)
    with pytest.raises(mmasim.ShapeError, match="one of"):
        tmem_datapath("H", 8)
