"""tcgen05 accumulator layouts of the cta_group::2 and .ws datapaths, and the tcgen05.ld
16x32bx2 shape.  The PTX ISA (§9.7.16.10.5 "Data Path Layout Organization") selects the layout
per M, cta_group, A sparsity and .ws in a table (text, quoted below); the per-CTA placement of
each layout is tmem_datapath (tests/test_layout_formulas.py), drawn only in figures."""

import numpy as np
import pytest

import mmasim
from mmasim.placement import tcgen05_ld, tmem_datapath
from wordgen import seed, words


@pytest.mark.parametrize("ins,letter,ctas", [
    # | 256 | ::2 | Either | N/A | 4x1 | Layout A | 0 |
    ("tcgen05.mma.cta_group::2.kind::tf32.m256n32k8.f32.tf32.tf32", "A", 2),
    ("tcgen05.mma.sp.cta_group::2.kind::f16.m256n64k32.f32.f16.f16", "A", 2),
    # | 128 | ::2 | Dense | N/A | 2x2 | Layout B | 0 |
    ("tcgen05.mma.cta_group::2.kind::f16.m128n64k16.f32.bf16.bf16", "B", 2),
    # | 128 | ::2 | Sparse | N/A | 4x1 (1/2 datapath utilized) | Layout C | 0 or 16 |
    ("tcgen05.mma.sp.cta_group::2.kind::f16.m128n32k32.f32.f16.f16", "C", 2),
    # | 128 | ::1 | Either | Either | 4x1 | Layout D | 0 |
    ("tcgen05.mma.ws.kind::f16.m128n64k16.f32.f16.f16", "D", 1),
    ("tcgen05.mma.ws.sp.kind::f16.m128n64k32.f32.f16.f16", "D", 1),
    ("tcgen05.mma.sp.kind::f16.m128n16k32.f32.bf16.bf16", "D", 1),
    # | 64 | ::1 | Either | Yes | 2x3 | Layout E | 0 |
    ("tcgen05.mma.ws.kind::f16.m64n64k16.f32.f16.f16", "E", 1),
    # | 64 | ::1 | Either | No | 4x1 (1/2 datapath utilized) | Layout F | 0 or 16 |
    ("tcgen05.mma.sp.kind::f16.m64n16k32.f32.f16.f16", "F", 1),
    # | 32 | ::1 | Either | Yes | 1x4 | Layout G | 0 |
    ("tcgen05.mma.ws.kind::f16.m32n128k16.f32.f16.f16", "G", 1),
])
def test_ptx_data_path_layout_table_selects_the_accumulator_layout(ins, letter, ctas):
    """Model.layout("d") of each datapath is the table's layout, per CTA; a cta_group::2 image has
    the pair's 256 TMEM lanes (CTA c's lane l is lane 128c + l) and CTA c holds rows c * M/2 ..."""
    m = mmasim.MMA("B200", ins)
    L = m.layout("d")
    assert L.storage == "tmem" and L.lanes == 128 * ctas
    T = tmem_datapath(letter, L.cols)
    assert T.rows * ctas == L.rows
    for r in range(L.rows):
        for c in range(L.cols):
            lane, i = L.owner(r, c)
            cta, local = divmod(lane, 128)
            assert cta == r // T.rows and T.owner(r - T.rows * cta, c) == (local, i), (r, c)
    X = words(m.d_format, L.shape, np.random.default_rng(seed(ins)), "uniform")
    assert np.array_equal(m.unfragment("d", m.fragments("d", X)).astype(np.uint64), X)


def test_tcgen05_a_and_b_stay_in_shared_memory():
    m = mmasim.MMA("B200", "tcgen05.mma.cta_group::2.kind::f16.m128n64k16.f32.bf16.bf16")
    with pytest.raises(mmasim.UnsupportedDatapath, match="shared memory"):
        m.layout("a")


@pytest.mark.parametrize("num", [1, 2, 4, 32])
def test_ptx_tcgen05_ld_16x32bx2_is_two_16x32b_accesses(num):
    """§9.7.16.8.3: "The shape .16x32bx2 performs two accesses into Tensor Memory of the shape
    .16x32b. The base address of the first access is specified by taddr and the base address of the
    second access is specified by taddr+immHalfSplitoff"; Table 49: .num registers (.x1: 1, .x2: 2,
    ...).  Each access covers 16 TMEM lanes x .num columns: the matrix's columns 0 .. num-1 are the
    first access, num .. 2num-1 the second."""
    L = tcgen05_ld("16x32bx2", num)
    assert (L.rows, L.cols, L.registers, L.lanes) == (16, 2 * num, num, 32)
    first = {L.owner(r, c)[0] for r in range(16) for c in range(num)}
    second = {L.owner(r, c)[0] for r in range(16) for c in range(num, 2 * num)}
    assert len(first) == len(second) == 16 and not first & second


# cute/atom/copy_traits_sm100.hpp: SM100_TMEM_LOAD_16dp32b1x DstLayout ((16,2),32):((64,32),1),
# SM100_TMEM_LOAD_16dp32b2x DstLayout ((16,2),64):((128,64),1): (thread, value bit) -> bit + W * dp,
# W = 64 * num bits per datapath (the two accesses side by side)
@pytest.mark.parametrize("num", [1, 2])
def test_tcgen05_ld_16x32bx2_agrees_with_cutlass(num):
    """The figure (not read here) splits the warp: CUTLASS's copy traits put thread a + 16 b on
    datapath (TMEM lane) a, in the second access for b = 1, register r at column r of its access."""
    L = tcgen05_ld("16x32bx2", num)
    W = 64 * num
    for lane in range(32):
        a, b = lane % 16, lane // 16
        for r in range(num):
            off = a * W + b * (W // 2) + 32 * r
            assert L.coords(lane, r) == (off // W, (off % W) // 32)
