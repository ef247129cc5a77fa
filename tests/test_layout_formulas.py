"""One test per layout figure / formula of the PTX ISA and of AMD's matrix-instruction
documentation.  Each expectation is written from the document's formula (quoted in
the docstring, with its section), in the document's own terms, never from mmasim's output.

Documents: PTX ISA 9.0 (the sections' text as published at docs.nvidia.com/cuda/
parallel-thread-execution; the §9.7.14.5.x mma.sync sections have the same numbers in 8.7);
the AMD Matrix Instruction Calculator (ROCm/amd_matrix_instruction_calculator), whose
"Matrix element to register mapping" lines are quoted for v_mfma.  Where a document gives a
layout only as a figure (wgmma register fragments, tcgen05.ld shapes, TMEM data path layouts)
the docstring says so, and the rule's ``evidence`` says "partly checked"."""

import numpy as np
import pytest

import mmasim
from mmasim.placement import tcgen05_ld

from cute_layouts import cute as _cute, split as _split


def _all(L):
    """{(lane, i): (row, col)} of a layout."""
    return {(lane, i): L.coords(lane, i) for lane in range(L.lanes) for i in range(L.elements)}


def _check(L, formula):
    got = _all(L)
    want = {(lane, i): formula(lane, i) for lane in range(L.lanes) for i in range(L.elements)}
    assert got == want


# ------------------------------------------------------------------ PTX mma.sync
def test_ptx_mma_m16n8k16_f16_a_fragment():
    """PTX ISA 9.0 §9.7.14.5.8 'Matrix Fragments for mma.m16n8k16 with floating point type',
    Figure 79, A (.f16x2 x4, a0..a7):
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
    """§9.7.14.5.8, Figure 81, B (.f16x2 x2, b0..b3):
    row = (threadID_in_group * 2) + (i & 0x1) for bi where i < 2,
    (threadID_in_group * 2) + (i & 0x1) + 8 for i >= 2; col = groupID."""
    L = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.bf16.bf16").layout("b")
    assert (L.registers, L.elements) == (2, 4)
    _check(L, lambda lane, i: ((lane % 4) * 2 + (i & 1) + (0 if i < 2 else 8), lane >> 2))


@pytest.mark.parametrize("ins", ["mma.sync.m16n8k16.f32.f16.f16", "mma.sync.m16n8k16.f16.f16.f16",
                                 "mma.sync.m16n8k8.f32.tf32.tf32", "mma.sync.m16n8k32.f32.e4m3.e4m3"])
def test_ptx_mma_m16n8_accumulator_fragment(ins):
    """§9.7.14.5.6 to §9.7.14.5.11 (Figures 69, 77, 83, 86, 92, 96), C / D (c0..c3):
    row = groupID for ci where i < 2, groupID + 8 for i >= 2;
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
    """§9.7.14.5.7 'Matrix Fragments for mma.m16n8k8', Figures 71 and 74.
    .f16 / .bf16 A a0..a3: row = groupID for a0 and a1, groupID + 8 for a2 and a3;
    col = threadID_in_group * 2 + (i & 0x1).  B b0, b1: row = threadID_in_group * 2 + i; col = groupID."""
    m = mmasim.MMA("Turing", "mma.sync.m16n8k8.f32.f16.f16")
    _check(m.layout("a"), lambda lane, i: ((lane >> 2) + (0 if i < 2 else 8), (lane % 4) * 2 + (i & 1)))
    _check(m.layout("b"), lambda lane, i: ((lane % 4) * 2 + i, lane >> 2))


def test_ptx_mma_m16n8k8_tf32_fragments():
    """§9.7.14.5.7, Figures 72 and 75.  .tf32 A a0..a3: row = groupID for a0 and a2,
    groupID + 8 for a1 and a3;
    col = threadID_in_group for a0, a1, threadID_in_group + 4 for a2, a3.
    B b0, b1: row = threadID_in_group for b0, threadID_in_group + 4 for b1; col = groupID."""
    m = mmasim.MMA("A100", "mma.sync.m16n8k8.f32.tf32.tf32")
    _check(m.layout("a"), lambda lane, i: ((lane >> 2) + (8 if i in (1, 3) else 0),
                                            (lane % 4) + (4 if i >= 2 else 0)))
    _check(m.layout("b"), lambda lane, i: ((lane % 4) + 4 * i, lane >> 2))


def test_ptx_mma_m16n8k4_tf32_fragments():
    """§9.7.14.5.6 'Matrix Fragments for mma.m16n8k4', Figures 65 and 67.
    .tf32 A a0, a1: row = groupID for a0, groupID + 8 for a1; col = threadID_in_group.
    B b0: row = threadID_in_group; col = groupID."""
    m = mmasim.MMA("A100", "mma.sync.m16n8k4.f32.tf32.tf32")
    _check(m.layout("a"), lambda lane, i: ((lane >> 2) + 8 * i, lane % 4))
    _check(m.layout("b"), lambda lane, i: (lane % 4, lane >> 2))


def test_ptx_mma_m16n8k32_8bit_fragments():
    """§9.7.14.5.10 'Matrix Fragments for mma.m16n8k32', Figures 88, 90, 91.
    .s8 / .u8 / .e4m3 / .e5m2 / .e3m2 / .e2m3 / .e2m1: A a0..a15 (4 x .b32):
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
    """§9.7.14.5.9 'Matrix Fragments for mma.m16n8k16 with integer type' (.u8 / .s8 / .e4m3 /
    .e5m2), Figures 84 and 85: A a0..a7 (2 x .b32): row = groupID for ai where i < 4,
    groupID + 8 for i >= 4;
    col = (threadID_in_group * 4) + (i & 0x3).  B b0..b3: row = threadID_in_group * 4 + i; col = groupID."""
    m = mmasim.MMA("Ada", "mma.sync.m16n8k16.f32.e4m3.e4m3")
    _check(m.layout("a"), lambda lane, i: ((lane >> 2) + (0 if i < 4 else 8), (lane % 4) * 4 + (i & 3)))
    _check(m.layout("b"), lambda lane, i: ((lane % 4) * 4 + i, lane >> 2))


def test_ptx_mma_kind_f8f6f4_uses_byte_containers():
    """§9.7.14.5.10: A of .e4m3 / .e5m2 / .e3m2 / .e2m3 / .e2m1 is "four .b32 registers, with each
    register containing four ... elements" and Figure 88's formula (row = groupID for
    0 <= i < 4 || 8 <= i < 12); the mma description: with .kind::f8f6f4 "the individual 4-bit
    and the 6-bit floating point type elements must be packed in an 8-bit container"."""
    m = mmasim.MMA("RTX 5090", "mma.sync.kind::f8f6f4.m16n8k32.f32.e2m1.e3m2")
    assert (m.layout("a").registers, m.layout("a").elements) == (4, 16)
    assert m.layout("a").coords(5, 9) == (1, 1 * 4 + 1 + 16)     # a9: 8 <= i < 12 -> row groupID


def test_ptx_mma_m16n8k64_4bit_fragments():
    """§9.7.14.5.11 'Matrix Fragments for mma.m16n8k64', Figures 93 to 95 (.u4 / .s4 / .e2m1,
    "four .b32 registers, with each register containing eight ... elements"): A a0..a31:
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
    """§9.7.14.5.2 'Matrix Fragments for mma.m8n8k4 with .f64 floating point type', Figures 53-55:
    A a0: row = %laneid >> 2, col = %laneid % 4; B b0: row = %laneid % 4, col = %laneid >> 2;
    C/D c0, c1: row = groupID, col = (threadID_in_group * 2) + (i & 0x1)."""
    m = mmasim.MMA("A100", "mma.sync.m8n8k4.f64.f64.f64")
    _check(m.layout("a"), lambda lane, i: (lane >> 2, lane % 4))
    _check(m.layout("b"), lambda lane, i: (lane % 4, lane >> 2))
    _check(m.layout("d"), lambda lane, i: (lane >> 2, (lane % 4) * 2 + i))
    assert m.layout("d").registers == 4      # two .f64 = four 32-bit registers


def test_ptx_mma_m16n8k8_f64_fragments():
    """§9.7.14.5.7, Figures 73 and 76 (.f64, sm_90): A a0..a3: row = groupID for a0 and a2,
    groupID + 8 for a1 and a3; col = threadID_in_group for a0 and a1, threadID_in_group + 4 for
    a2 and a3.  B b0, b1: row = threadID_in_group for b0, threadID_in_group + 4 for b1;
    col = groupID."""
    m = mmasim.MMA("H100", "mma.sync.m16n8k8.f64.f64.f64")
    _check(m.layout("a"), lambda lane, i: ((lane >> 2) + (8 if i % 2 else 0), (lane % 4) + (4 if i >= 2 else 0)))
    _check(m.layout("b"), lambda lane, i: ((lane % 4) + (4 if i == 1 else 0), lane >> 2))


def test_ptx_mma_m16n8k16_f64_fragments():
    """§9.7.14.5.8, Figures 80 and 82 (.f64): A a0..a7 ("eight .f64 registers"):
    row = groupID for ai where i % 2 = 0, groupID + 8 otherwise;
    col = (i * 2) + threadID_in_group for ai where i % 2 = 0, (i * 2) - 2 + threadID_in_group
    otherwise.  B b0..b3: row = threadID_in_group + (i * 4); col = groupID."""
    m = mmasim.MMA("H100", "mma.sync.m16n8k16.f64.f64.f64")
    La, Lb = m.layout("a"), m.layout("b")
    assert (La.registers, Lb.registers) == (16, 8)

    def fa(lane, i):
        g, t = lane >> 2, lane % 4
        return (g, i * 2 + t) if i % 2 == 0 else (g + 8, i * 2 - 2 + t)
    _check(La, fa)
    _check(Lb, lambda lane, i: ((lane % 4) + i * 4, lane >> 2))


def _rule(name):
    return [x for x in mmasim.layouts() if x.name == name][0]


def test_ptx_mma_m16n8k32_4bit_fragments():
    """§9.7.14.5.10, Figures 87 and 89 (.s4 / .u4; no modelled datapath yet, so the rule is bound
    directly): A a0..a15 ("two .b32 registers ... eight .u4 / .s4 elements"):
    row = groupID for ai where i < 8, groupID + 8 for i >= 8;
    col = (threadID_in_group * 8) + (i & 0x7).  B b0..b7 (one .b32):
    row = (threadID_in_group * 8) + (i & 0x7); col = groupID."""
    La = _rule("mma.m16n8k32.a.4bit").bind("a", 16, 8, 32, 4)
    Lb = _rule("mma.m16n8k32.b.4bit").bind("b", 16, 8, 32, 4)
    assert (La.registers, Lb.registers) == (2, 1)
    _check(La, lambda lane, i: ((lane >> 2) + (0 if i < 8 else 8), (lane % 4) * 8 + (i & 7)))
    _check(Lb, lambda lane, i: ((lane % 4) * 8 + (i & 7), lane >> 2))


def _qp_block(lane):
    """Quad pair of a lane: QP0 = lanes 0-3 and 16-19, QP1 = 4-7 and 20-23, ..."""
    return (lane % 16) // 4


def test_ptx_mma_m8n8k4_f16_quad_pair_fragments():
    """§9.7.14.5.1 'Matrix Fragments for mma.m8n8k4 with .f16 floating point type': "MMA
    computation 1: threads with %laneid 0-3 (low group) and 16-19 (high group)", computation 2:
    4-7 and 20-23, 3: 8-11 and 24-27, 4: 12-15 and 28-31 (the layout's matrix stacks the four).
    Figure 46, A .row a0..a3: row = %laneid % 4 if %laneid < 16, (%laneid % 4) + 4 otherwise; col = i.
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
    """§9.7.14.5.1, Figure 47, A .col a0..a3: row = i % 4 if %laneid < 16, (i % 4) + 4 otherwise;
    col = %laneid % 4.  Figure 48, B .row b0..b3: row = %laneid % 4; col = i if %laneid < 16,
    i + 4 otherwise."""
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
    """§9.7.15.5.1.1.1 (text): .f32 D is "a vector expression containing N/2 number of .f32
    registers", d0 .. d(N/2 - 1).  The placement is given only by Figure 149, not read here
    (the rule's evidence says "partly checked"): the expectation below is Figure 149 as published
    descriptions read it - warp w holds rows 16w..16w+15, thread 0 holds (0, 0), (0, 1), (8, 0),
    (8, 1), repeating every 8 columns: row = 16 * warp + groupID + 8 * ((i % 4) >= 2);
    col = (i / 4) * 8 + threadID_in_group * 2 + (i & 0x1)."""
    m = mmasim.MMA("H100", "wgmma.mma_async.m64n32k16.f32.bf16.bf16")
    L = m.layout("d")
    assert (L.lanes, L.elements, L.registers) == (128, 16, 16)

    def f(tid, i):
        warp, lane = tid // 32, tid % 32
        return 16 * warp + lane // 4 + (8 if i % 4 >= 2 else 0), (i // 4) * 8 + (lane % 4) * 2 + (i & 1)
    _check(L, f)


def test_ptx_wgmma_register_a_fragment():
    """§9.7.15.5.1.1.1 (text): A from registers is "four .f16x2 registers", a0..a7.  The placement
    is given only by Figure 148, not read here (evidence "partly checked"); the expectation is
    mma.m16n8k16's A per warp, warp w holding rows 16w..16w+15."""
    L = mmasim.MMA("H100", "wgmma.mma_async.m64n8k16.f32.f16.f16").layout("a")

    def f(tid, i):
        warp, lane = tid // 32, tid % 32
        g, t = lane >> 2, lane % 4
        return 16 * warp + (g if (i < 2 or 4 <= i < 6) else g + 8), t * 2 + (i & 1) + (0 if i < 4 else 8)
    _check(L, f)


# ------------------------------------------------------------------ tcgen05 TMEM
def test_ptx_tcgen05_datapath_layout_d_m128():
    """§9.7.16.10.5 table: layout D (M = 128, cta_group::1) is a "4x1" datapath with lane
    alignment 0; Figures 211/212 (not re-read here): row i of D in TMEM lane i, column j in column j."""
    L = mmasim.MMA("B200", "tcgen05.mma.kind::f16.m128n16k16.f32.bf16.bf16").layout("d")
    assert (L.lanes, L.registers, L.storage) == (128, 16, "tmem")
    _check(L, lambda lane, col: (lane, col))


def test_ptx_tcgen05_datapath_layout_f_m64():
    """§9.7.16.10.5 table: layout F (M = 64, non-.ws) is "4x1 (1/2 datapath utilized)" with lane
    alignment "0 or 16" (mmasim models 0); Figures 215/216 (not re-read here): the four warps'
    sub-partitions each take 16 rows in their lower 16 lanes: row r in TMEM lane 32 * (r // 16) + r % 16."""
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
    """§9.7.16.2.3.1 'Memory Layout' (text): .32x32b accesses 32 TMEM lanes, 32 x .num bits each;
    .16x64b / .16x128b / .16x256b 16 lanes, 64 / 128 / 256 x .num bits each, into .num .b32
    registers.  The placement is in Figures 183-186 only (not re-read here; evidence "partly checked";
    corroborated by CUTLASS below), register r of lane l:
    32x32b (l, r); 16x64b (l/4 + 8*(l%2), (l/2)%2 + 2r); 16x128b (l/4 + 8*(r%2), l%4 + 4*(r/2));
    16x256b (l/4 + 8*((r/2)%2), r%2 + 2*(l%4) + 8*(r/4)) as (TMEM lane, column)."""
    for num in (1, 2, 4):
        L = tcgen05_ld(shape, num)
        assert (L.rows, L.cols, L.registers) == (rows, cols_per_x * num, regs_per_x * num)
        _check(L, formula)
    with pytest.raises(mmasim.ShapeError, match="shape must be one of"):
        tcgen05_ld("16x32bx4")


def test_16x256b_reads_the_mma_accumulator_order():
    """The 16x256b shape hands each thread the words of mma.m16n8's C fragment (c0..c3 pattern):
    lane l register r < 4 reads row groupID + 8 * (r >= 2), column threadID_in_group * 2 + (r & 1)."""
    L = tcgen05_ld("16x256b", 1)
    mma = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16").layout("d")
    assert all(L.coords(lane, r) == mma.coords(lane, r) for lane in range(32) for r in range(4))


# ------------------------------------------------------------------ AMD v_mfma
def test_amd_mfma_32x32x8f16_layout():
    """AMD Matrix Instruction Calculator, CDNA3 v_mfma_f32_32x32x8_f16, "Matrix element to register
    mapping": A[i][k] Lane: 32 * floor(k / 4) + i, GPR: (floor(k / 2) % 2).[16*(k % 2)+15 : 16*(k % 2)]
    (item k % 4 of the register pair); B[k][j] the same with j; C or D[i][j] GPR:
    4 * floor(i / 8) + (i % 4), Lane: (32 * floor(i / 4)) % 64 + j."""
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
    """Calculator, CDNA3 v_mfma_f32_16x16x16_f16: A[i][k] Lane: 16 * floor(k / 4) + i, GPR:
    (floor(k / 2) % 2).[16*(k % 2)+15 : 16*(k % 2)]; C or D[i][j] GPR: (i % 4), Lane: 16 * floor(i / 4) + j."""
    m = mmasim.MMA("MI300X", "v_mfma.m16n16k16.f32.f16.f16")
    La, Ld = m.layout("a"), m.layout("d")
    for i in range(16):
        for k in range(16):
            assert La.owner(i, k) == (i + 16 * (k // 4), k % 4)
        for j in range(16):
            assert Ld.owner(i, j) == (j + 16 * (i // 4), i % 4)


def test_amd_mfma_32x32x1f32_two_blocks():
    """Calculator, CDNA3 v_mfma_f32_32x32x1_2b_f32 (2 blocks): A[i][k].block Lane: 32 * block + i, GPR 0;
    C or D[i][j].block GPR: 16 * block + 4 * floor(i / 8) + (i % 4), Lane: (32 * floor(i / 4)) % 64 + j
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
    """Calculator, CDNA3 v_mfma_f32_4x4x1_16b_f32 (16 blocks): A[i][k].block Lane: 4 * block + i;
    C or D[i][j].block GPR: i, Lane: 4 * block + j."""
    m = mmasim.MMA("MI300X", "v_mfma.m4n4k1.f32.f32.f32")
    La, Ld = m.layout("a"), m.layout("d")
    assert (La.blocks, Ld.registers) == (16, 4)
    for b in range(16):
        for i in range(4):
            assert La.owner(4 * b + i, 0) == (4 * b + i, 0)
            for j in range(4):
                assert Ld.owner(4 * b + i, j) == (4 * b + j, i)


def test_amd_mfma_bf16_before_1k_holds_two_per_lane():
    """Calculator, CDNA1 v_mfma_f32_32x32x4bf16 (not _1k): A[i][k] GPR: 0.[16*(k % 2)+15 : 16*(k % 2)],
    Lane: 32 * floor(k / 2) + i; CDNA2 v_mfma_f32_32x32x4bf16_1k: A[i][k].block GPR:
    floor(k / 2).[16*(k % 2)+15 : 16*(k % 2)], Lane: 32 * block + i (four per lane, two blocks)."""
    La = mmasim.MMA("MI100", "v_mfma.m32n32k4.f32.bf16.bf16").layout("a")
    assert (La.elements, La.registers, La.blocks) == (2, 1, 1)
    for i in range(32):
        for k in range(4):
            assert La.owner(i, k) == (i + 32 * (k // 2), k % 2)
    L1k = mmasim.MMA("MI250X", "v_mfma.kind::1k.m32n32k4.f32.bf16.bf16").layout("a")
    assert (L1k.elements, L1k.registers, L1k.blocks) == (4, 2, 2)


def test_amd_mfma_fp8_16x16x32_holds_eight_bytes_per_lane():
    """Calculator, CDNA3 v_mfma_f32_16x16x32_fp8_fp8: A[i][k] GPR: (floor(k / 4) % 2).[8*(k % 4)+7 : 8*(k % 4)],
    Lane: 16 * floor(k / 8) + i (byte k % 8 of a VGPR pair)."""
    La = mmasim.MMA("MI300X", "v_mfma.m16n16k32.f32.e4m3fnuz.e4m3fnuz").layout("a")
    assert (La.elements, La.registers) == (8, 2)
    for i in range(16):
        for k in range(32):
            assert La.owner(i, k) == (i + 16 * (k // 8), k % 8)


def test_amd_mfma_f64_16x16x4_accumulator_layout():
    """Calculator, CDNA3 (and CDNA2) v_mfma_f64_16x16x4_f64: "C or D[i][j].block GPR:
    [2*floor(i / 4)+1 : 2*floor(i / 4)]", "Lane: 16 * (i % 4) + j" - register pair i // 4, not
    the f32 accumulators' i % 4.  A[i][k] GPR [1:0], Lane: 16 * k + i."""
    for arch in ("MI250X", "MI300X"):
        m = mmasim.MMA(arch, "v_mfma.m16n16k4.f64.f64.f64")
        La, Ld = m.layout("a"), m.layout("d")
        assert (Ld.elements, Ld.registers) == (4, 8)
        for i in range(16):
            for k in range(4):
                assert La.owner(i, k) == (16 * k + i, 0)
            for j in range(16):
                assert Ld.owner(i, j) == (16 * (i % 4) + j, i // 4)


# ------------------------------------------------------------------ evidence
_LABELS = ("checked: ", "partly checked: ", "unverified: ")


def test_every_builtin_rule_states_what_it_was_checked_against():
    """No rule claims "documented": each says checked / partly checked / unverified, and a
    "checked" PTX rule names its section."""
    rules = [x for x in mmasim.layouts() if isinstance(x, mmasim.placement.FragmentRule)]
    assert len(rules) > 60
    for r in rules:
        assert r.evidence.startswith(_LABELS), (r.name, r.evidence)
        if r.evidence.startswith("checked: PTX"):
            assert "§9.7." in r.evidence, r.name
    checked = {r.name for r in rules if r.evidence.startswith("checked: ")}
    assert {"mma.m8n8k4.cd.f32", "mma.m16n8k16.a.64bit", "mma.m16n8k64.a.4bit"} <= checked
    assert not {"wgmma.m64nN.cd", "tcgen05.tmem.m128.cta1"} & checked


def test_docs_list_every_rule_not_fully_checked():
    """docs/layouts.md, "Not yet checked against the documents", names every built-in rule (and
    tcgen05.ld shape and data path layout) whose evidence is not "checked: ..."."""
    import pathlib

    from mmasim.placement import TCGEN05_LD_SHAPES, TMEM_DATAPATHS

    text = (pathlib.Path(__file__).parent.parent / "docs" / "layouts.md").read_text()
    section = text.split("## Not yet checked against the documents", 1)[1].split("\n## ", 1)[0]
    rules = [x for x in mmasim.layouts() if isinstance(x, mmasim.placement.FragmentRule)]
    for r in rules:
        if not r.evidence.startswith("checked: "):
            assert f"`{r.name}`" in section, r.name
    for shape in TCGEN05_LD_SHAPES:
        assert f"`{shape}`" in section
    assert all(f"layout {x}" in section for x in TMEM_DATAPATHS)


# ------------------------------------------------------------------ corroboration (CUTLASS)
# Where PTX gives a layout only as a figure, NVIDIA's CUTLASS (CuTe) states it as a
# (thread, value) -> offset layout.  These are not the authority (the rules stay "partly
# checked"), but an independent statement the formulas must agree with.  Layouts quoted as
# shape : stride, thread mode first.

def _tv(thr_shape, thr_stride, val_shape, val_stride, t, v):
    return _cute((thr_shape, val_shape), (thr_stride, val_stride), (_split(t, thr_shape), _split(v, val_shape)))


@pytest.mark.parametrize("ins,op,tv", [
    # cute/atom/mma_traits_sm90_gmma.hpp: CLayout_64xN = ((4,8,4),(2,2,N/8)):((128,1,16),(64,8,512))
    ("wgmma.mma_async.m64n32k16.f32.f16.f16", "d", ((4, 8, 4), (128, 1, 16), (2, 2, 4), (64, 8, 512))),
    ("wgmma.mma_async.m64n8k16.f32.bf16.bf16", "d", ((4, 8, 4), (128, 1, 16), (2, 2, 1), (64, 8, 512))),
    # ALayout_64x16 = ((4,8,4),(2,2,2)):((128,1,16),(64,8,512))  (16-bit A from registers)
    ("wgmma.mma_async.m64n8k16.f32.f16.f16", "a", ((4, 8, 4), (128, 1, 16), (2, 2, 2), (64, 8, 512))),
    # ALayout_64x8 = ((4,8,4),(2,2)):((64,1,16),(8,256))  (tf32 A)
    ("wgmma.mma_async.m64n8k8.f32.tf32.tf32", "a", ((4, 8, 4), (64, 1, 16), (2, 2), (8, 256))),
    # ALayout_64x32 = ((4,8,4),(4,2,2)):((256,1,16),(64,8,1024))  (8-bit A)
    ("wgmma.mma_async.m64n8k32.f32.e4m3.e4m3", "a", ((4, 8, 4), (256, 1, 16), (4, 2, 2), (64, 8, 1024))),
])
def test_wgmma_register_fragments_agree_with_cutlass(ins, op, tv):
    """CUTLASS's GMMA TV layouts map (thread, value) to m + 64 * (k or n); value i is PTX's
    a_i / d_i (the order CUTLASS hands the registers to wgmma.mma_async)."""
    L = mmasim.MMA("H100", ins).layout(op)
    for t in range(128):
        for i in range(L.elements):
            off = _tv(tv[0], tv[1], tv[2], tv[3], t, i)
            assert L.coords(t, i) == (off % 64, off // 64), (t, i)


@pytest.mark.parametrize("shape,num,width,thr_shape,thr_stride,val_shape,val_stride", [
    # cute/atom/copy_traits_sm100.hpp, SM100_TMEM_LOAD_<dp>dp<bits>b<num>x: ValID (W, dps):(1, DP),
    # DstLayout (thread, value-bit) -> bit + W * dp
    ("32x32b", 2, 64, (32,), (64,), (64,), (1,)),
    ("16x64b", 1, 64, (2, 2, 8), (512, 32, 64), (32,), (1,)),
    ("16x64b", 2, 128, (2, 2, 8), (1024, 32, 128), (32, 2), (1, 64)),
    ("16x128b", 1, 128, (4, 8), (32, 128), (32, 2), (1, 1024)),
    ("16x128b", 2, 256, (4, 8), (32, 256), (32, 2, 2), (1, 2048, 128)),
    ("16x256b", 1, 256, (4, 8), (64, 256), (64, 2), (1, 2048)),
    ("16x256b", 2, 512, (4, 8), (64, 512), (64, 2, 2), (1, 4096, 256)),
])
def test_tcgen05_ld_shapes_agree_with_cutlass(shape, num, width, thr_shape, thr_stride, val_shape, val_stride):
    """Register r of lane l holds value bits 32r .. 32r + 31: TMEM lane (datapath) = offset // W,
    32-bit column = (offset % W) // 32, and the register's 32 bits are contiguous."""
    L = tcgen05_ld(shape, num)
    for lane in range(32):
        for r in range(L.registers):
            off = _tv(thr_shape, thr_stride, val_shape, val_stride, lane, 32 * r)
            assert _tv(thr_shape, thr_stride, val_shape, val_stride, lane, 32 * r + 31) == off + 31
            assert L.coords(lane, r) == (off // width, (off % width) // 32), (lane, r)


@pytest.mark.parametrize("arch,ins,blocks,a,d", [
    # Calculator "Matrix element to register mapping" (element index = GPR * per-register + bit / width)
    # v_mfma_f32_16x16x8_xf32: A GPR (k % 2), Lane 16 * floor(k / 2) + i; D GPR (i % 4), Lane 16 * floor(i / 4) + j
    ("MI300X", "v_mfma.m16n16k8.f32.xf32.xf32", 1,
     lambda i, k, blk: (16 * (k // 2) + i, k % 2), lambda i, j, blk: (16 * (i // 4) + j, i % 4)),
    # v_mfma_f32_16x16x1_4b_f32: A Lane 16 * block + i, GPR 0; D GPR 4 * block + (i % 4), Lane 16 * floor(i / 4) + j
    ("MI300X", "v_mfma.m16n16k1.f32.f32.f32", 4,
     lambda i, k, blk: (16 * blk + i, 0), lambda i, j, blk: (16 * (i // 4) + j, 4 * blk + i % 4)),
    # v_mfma_f32_32x32x16_fp8_fp8: A GPR (floor(k / 4) % 2).[8*(k % 4)+7 : 8*(k % 4)], Lane 32 * floor(k / 8) + i;
    # D GPR 4 * floor(i / 8) + (i % 4), Lane (32 * floor(i / 4)) % 64 + j
    ("MI300X", "v_mfma.m32n32k16.f32.e4m3fnuz.e4m3fnuz", 1,
     lambda i, k, blk: (32 * (k // 8) + i, 4 * ((k // 4) % 2) + k % 4),
     lambda i, j, blk: ((32 * (i // 4)) % 64 + j, 4 * (i // 8) + i % 4)),
    # v_mfma_f32_32x32x4_2b_f16: A GPR floor(k / 2).[16*(k % 2)+15 : 16*(k % 2)], Lane 32 * block + i;
    # D GPR 16 * block + 4 * floor(i / 8) + (i % 4), Lane (32 * floor(i / 4)) % 64 + j
    ("MI300X", "v_mfma.m32n32k4.f32.f16.f16", 2,
     lambda i, k, blk: (32 * blk + i, 2 * (k // 2) + k % 2),
     lambda i, j, blk: ((32 * (i // 4)) % 64 + j, 16 * blk + 4 * (i // 8) + i % 4)),
])
def test_amd_calculator_mappings(arch, ins, blocks, a, d):
    """AMD Matrix Instruction Calculator (CDNA3), quoted per case; B[k][j] is A's mapping with j for i."""
    m = mmasim.MMA(arch, ins)
    La, Lb, Ld = m.layout("a"), m.layout("b"), m.layout("d")
    M, K = La.rows // blocks, La.cols
    assert La.blocks == Ld.blocks == blocks
    for blk in range(blocks):
        for i in range(M):
            for k in range(K):
                assert La.owner(blk * M + i, k) == a(i, k, blk)
                assert Lb.owner(blk * K + k, i) == a(i, k, blk)
            for j in range(M):
                assert Ld.owner(blk * M + i, j) == d(i, j, blk)
