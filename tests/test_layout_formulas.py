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


def _cute(shape, stride, coord):
    """Offset of a CuTe layout at a (hierarchical) coordinate: sum of coordinate x stride."""
    if isinstance(shape, tuple):
        return sum(_cute(sh, st, c) for sh, st, c in zip(shape, stride, coord))
    assert 0 <= coord < shape
    return coord * stride


def _split(x, shape):
    """A flat index as the coordinate of a (possibly nested-flat) mode, first sub-mode fastest."""
    out = []
    for n in shape:
        out.append(x % n)
        x //= n
    return tuple(out)


def _cute_swizzle(addr, b):
    """CuTe Swizzle<B, 4, 3>: x ^ ((x & (((1 << B) - 1) << 7)) >> 3)."""
    return addr ^ ((addr & (((1 << b) - 1) << 7)) >> 3)


@pytest.mark.parametrize("what,major,swz,bits,lbo,sbo,shape,stride", [
    # §9.7.15.5.1.2.1.3 / §9.7.16.3.3 worked examples: "Exact layout", LBO and SBO in elements
    ("K-major, no-swizzling, tf32", "K", 0, 32, 64, 32, ((8, 2), (4, 4)), ((4, 32), (1, 64))),
    ("K-major, 32B swizzling, tf32", "K", 32, 32, 0, 64, ((8, 2), (4, 2)), ((8, 64), (1, 4))),
    ("MN-major, no-swizzling, bf16", "MN", 0, 16, 128, 64, ((8, 1, 2), (8, 2)), ((1, 8, 64), (8, 128))),
    ("MN-major, 32B swizzling, bf16", "MN", 32, 16, 128, 256, ((8, 2, 2), (8, 2)), ((1, 8, 128), (16, 256))),
    ("MN-major, 64B swizzling, bf16", "MN", 64, 16, 256, 512, ((8, 4, 2), (8, 2)), ((1, 8, 256), (32, 512))),
])
def test_ptx_canonical_layout_examples(what, major, swz, bits, lbo, sbo, shape, stride):
    """PTX ISA 9.0 §9.7.15.5.1.2.1.3 (wgmma) / §9.7.16.3.3 (tcgen05) 'Canonical Layouts', examples:
    K-major no-swizzling tf32 "Swizzle<0,4,3> o ((8,2),(4,4)):((4,32),(1,64))", LBO = 64*sizeof(tf32),
    SBO = 32*sizeof(tf32); K-major 32B tf32 "Swizzle<1,4,3> o ((8,2),(4,4)):((8,64),(1,4))",
    SBO = 64*sizeof(tf32) (its first 8 K elements, one 32-byte row: the layout holds K within the
    swizzle width); MN-major no-swizzling bf16 "Swizzle<0,4,3> o ((8,1,2),(8,2)):((1,8,64),(8,128))",
    LBO = 128*sizeof(bf16), SBO = 64*sizeof(bf16) - SBO steps along MN, LBO along K, as the table's
    "((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))"; MN-major 32B bf16 "Swizzle<1,4,3> o
    ((8,2,2),(8,2)):((1,8,128),(16,256))", LBO = 128, SBO = 256 elements; MN-major 64B bf16
    "Swizzle<2,4,3> o ((8,4,2),(8,2)):((1,8,256),(32,512))", LBO = 256, SBO = 512 elements.
    The swizzle acts on byte addresses (base offset = (pattern start addr >> 7) & 7)."""
    eb = bits // 8
    L = SmemLayout(what, major=major, swizzle=swz, lbo=lbo * eb, sbo=sbo * eb, element_bits=bits)
    (s_mn, s_k), (d_mn, d_k) = shape, stride
    n_mn = int(np.prod(s_mn)) if isinstance(s_mn, tuple) else s_mn
    n_k = int(np.prod(s_k)) if isinstance(s_k, tuple) else s_k
    b = {0: 0, 32: 1, 64: 2, 128: 3}[swz]
    for r in range(n_mn):
        for k in range(n_k):
            elem = _cute((s_mn, s_k), (d_mn, d_k), (_split(r, s_mn), _split(k, s_k)))
            assert L.offset(r, k) == _cute_swizzle(elem * eb, b), (r, k)


@pytest.mark.parametrize("major,swz", [(mj, sw) for mj in ("K", "MN") for sw in (0, 32, 64, 128)])
def test_ptx_canonical_layout_table(major, swz):
    """§9.7.16.3.3 (= §9.7.15.5.1.2.1.3) table, T = 128 / element bits, in elements:
    MN-major none "((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))", 32B "((T,2,m),(8,k)):((1,T,LBO),(2T,SBO))",
    64B "((T,4,m),(8,k)):((1,T,LBO),(4T,SBO))", 128B "((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))";
    K-major none "((8,m),(T,2k)):((1T,SBO),(1,LBO))", 32B "((8,m),(T,2k)):((2T,SBO),(1,T))",
    64B "((8,m),(T,2k)):((4T,SBO),(1,T))", 128B "((8,m),(T,2k)):((8T,SBO),(1,T))"; each under
    Swizzle<0|1|2|3, 4, 3>.  bf16 (T = 8), m = 2 repeats; K-major swizzled layouts fill one
    S-byte row (2k = S / 16 chunks)."""
    T, m, eb = 8, 2, 2
    c = swz // 16                                   # 16-byte chunks per swizzle row (0: none)
    b = {0: 0, 32: 1, 64: 2, 128: 3}[swz]
    if major == "MN":
        k = 2
        lbo, sbo = (512, 64) if not swz else (8 * c * T, 8 * c * T * m)     # elements
        shape = ((T, 1, m), (8, k)) if not swz else ((T, c, m), (8, k))
        stride = ((1, T, sbo), (T, lbo)) if not swz else ((1, T, lbo), (c * T, sbo))
    else:
        k = 2 if not swz else c // 2
        lbo, sbo = (64, 256) if not swz else (0, 8 * c * T)
        shape = ((8, m), (T, 2 * k))
        stride = ((T, sbo), (1, lbo)) if not swz else ((c * T, sbo), (1, T))
    L = SmemLayout("table", major=major, swizzle=swz, lbo=lbo * eb, sbo=sbo * eb, element_bits=16)
    n_mn, n_k = int(np.prod(shape[0])), int(np.prod(shape[1]))
    seen = set()
    for r in range(n_mn):
        for kk in range(n_k):
            elem = _cute(shape, stride, (_split(r, shape[0]), _split(kk, shape[1])))
            want = _cute_swizzle(elem * eb, b)
            assert L.offset(r, kk) == want, (r, kk)
            seen.add(want)
    assert len(seen) == n_mn * n_k


def test_mn_major_no_swizzle_sbo_steps_along_mn_and_lbo_along_k():
    """§9.7.16.3.3 table, MN-major "No-swizzling or Interleaved": ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)):
    the next T elements along MN (the next 16 bytes) are SBO away, the next 8 along K are LBO away."""
    L = SmemLayout("mn", major="MN", lbo=256, sbo=128, element_bits=16)
    assert L.offset(0, 0) == 0 and L.offset(7, 0) == 14 and L.offset(8, 0) == 128
    assert L.offset(0, 1) == 16 and L.offset(0, 8) == 256 and L.offset(9, 9) == 2 + 128 + 16 + 256


@pytest.mark.parametrize("mode,xor", [(128, lambda r: r % 8), (64, lambda r: (r // 2) % 4),
                                      (32, lambda r: (r // 4) % 2)])
def test_k_major_swizzle_permutes_16_byte_chunks(mode, xor):
    """§9.7.16.3.3 table, K-major S-byte: ((8,m),(T,2k)):(((S/16)T,SBO),(1,T)) under Swizzle<B,4,3>
    (B = 3, 2, 1 for 128, 64, 32 bytes): 8 rows of S bytes; the 16-byte chunk index of each row is XOR-ed with
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
    """PTX ISA 9.0 §9.7.15.5.1.2.2 'Matrix Descriptor Format': 13-0 matrix-descriptor-encode(start
    address), 29-16 encode(LBO), 45-32 encode(SBO), 51-49 base offset, 63-62 swizzle "0: No swizzle,
    1: 128-Byte swizzle, 2: 64-Byte swizzle, 3: 32-Byte swizzle"; encode(x) = (x & 0x3FFFF) >> 4.
    The canonical-layout example "K-Major, no-swizzling and tf32": LBO 64*4 bytes encodes as 16,
    SBO 32*4 as 8."""
    ex = encode_descriptor(0, 64 * 4, 32 * 4)
    assert (ex >> 16) & 0x3FFF == 16 and (ex >> 32) & 0x3FFF == 8
    w = encode_descriptor(0x400, 128, 64, 128)
    assert w == (0x400 >> 4) | (128 >> 4) << 16 | (64 >> 4) << 32 | 1 << 62
    assert encode_descriptor(0x400, 128, 64, 32) >> 62 == 3
    d = decode_descriptor(w)
    assert (d.start_address, d.lbo, d.sbo, d.swizzle) == (0x400, 128, 64, 128)
    with pytest.raises(mmasim.ShapeError, match="multiple of 16"):
        encode_descriptor(0x401, 128, 64)


def test_tcgen05_descriptor_fields():
    """PTX ISA 9.0 §9.7.16.4.1 Table 40 'Shared memory descriptor layout': 0-13, 16-29, 32-45 as
    wgmma's; 46-48 "Fixed constant value of 0b001"; 49-51 matrix base offset; 52 leading dimension
    stride mode "0: byte offset relative, 1: byte address absolute"; 53-60 fixed constant 0;
    61-63 swizzle "0. No swizzling 1. 128-Byte with 32B atomic swizzling 2. 128-Byte swizzling
    4. 64-Byte swizzling 6. 32-Byte swizzling; Values 3, 5 and 7 are invalid"."""
    assert [encode_descriptor(0, 16, 16, sw, target="tcgen05") >> 61 for sw in (0, "128B_base32B", 128, 64, 32)] \
        == [0, 1, 2, 4, 6]
    w52 = encode_descriptor(0, 16, 16, 128, target="tcgen05", base_offset=5, lbo_mode=1)
    assert (w52 >> 52) & 1 == 1 and (w52 >> 49) & 7 == 5
    d52 = decode_descriptor(w52, "tcgen05")
    assert (d52.lbo_mode, d52.base_offset, d52.swizzle) == (1, 5, 128)
    ok = encode_descriptor(0, 16, 16, target="tcgen05")
    for code in (3, 5, 7):
        with pytest.raises(mmasim.ShapeError, match="reserved"):
            decode_descriptor(ok | code << 61, "tcgen05")
    with pytest.raises(mmasim.ShapeError, match="53-60"):
        decode_descriptor(ok | 1 << 53, "tcgen05")
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
    """PTX ISA 9.0 §9.7.16.10.5 'Data Path Layout Organization' table (checked: A 4x1, B 2x2, C 4x1
    half, D 4x1, E '2x3' as printed, F 4x1 half, G 1x4) and Figures 205-218 (the placement; read in an
    earlier session, not re-checked here), per CTA: A (M=256, cta_group::2) and D (M=128): row i
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
