"""B200 layout facts (T1): TMEM result slices and the BF16 shared-memory operand layout."""

import numpy as np
import pytest

import mmasim


def layout(name):
    return {x.name: x for x in mmasim.layouts("B200")}[name]


def test_tf32_result_slice_is_threads_0_31_by_registers_0_3():
    s = layout("tcgen05.tmem.result.tf32")
    assert s.size == 128
    assert set(s.pairs) == {(t, r) for t in range(32) for r in range(4)}


def test_bf16_result_slice_is_96_words():
    s = layout("tcgen05.tmem.result.bf16")
    assert s.size == 96
    assert set(s.pairs) == {(t, r) for t in range(16) for r in range(4)} | {(t, r) for t in range(16, 32) for r in range(2)}
    img = np.arange(32 * 4).reshape(32, 4)
    words = s.extract(img)
    assert words[0] == 0 and words[63] == 15 * 4 + 3 and words[64] == 16 * 4 and words[-1] == 31 * 4 + 1
    assert np.array_equal(s.extract(s.place(words, registers=4)), words)


def test_bf16_smem_offset_rule():
    lay = layout("tcgen05.smem.operand.bf16")
    # offset(i, k) = (i & 7)*8 + (i >> 3)*32 + (k & 7) + (k >> 3)*64
    for i in range(16):
        for k in range(16):
            assert lay.offset(i, k) == (i & 7) * 8 + (i >> 3) * 32 + (k & 7) + (k >> 3) * 64
    assert lay.offset(9, 10) == 8 + 32 + 2 + 64


def test_bf16_smem_image_round_trips_and_every_lane_is_distinct():
    lay = layout("tcgen05.smem.operand.bf16")
    mat = np.arange(8 * 16).reshape(8, 16)
    img = lay.to_image(mat, fill=-1)
    assert np.array_equal(lay.from_image(img, 8, 16), mat)
    assert (img >= 0).sum() == 128        # no two logical elements share a slot
    with pytest.raises(mmasim.ShapeError, match="multiples of 8"):
        lay.to_image(np.zeros((12, 16)))
    with pytest.raises(mmasim.ShapeError, match="share a slot"):   # SBO=32 < 64: rows 8-15 overlap rows 4-7
        lay.to_image(np.zeros((16, 16)))


def test_wrong_slice_still_looks_plausible_for_all_ones():
    """T1's trap: with all-ones inputs a wrong layout still returns 16.0; only the
    isolated-lane probe tells layouts apart."""
    lay = layout("tcgen05.smem.operand.bf16")
    ones = np.ones((8, 16))
    naive_ones = lay.to_image(ones).reshape(8, 16)              # reading it row-major is wrong...
    assert np.array_equal(naive_ones.sum(axis=1), np.full(8, 16.0))   # ...yet all-ones sums look right
    lane = np.zeros((8, 16))
    lane[3, 11] = 1
    naive = lay.to_image(lane).reshape(8, 16)
    assert naive[3, 11] == 0


def test_result_slices_are_fragments_of_the_general_layouts():
    """The T1 slices as Fragments: result word j is held by pairs[j]; packing a result vector
    places it where ResultSlice.place does, and unpacking reads what extract reads."""
    s = layout("tcgen05.tmem.result.bf16")
    f = s.fragment(registers=4)
    assert (f.lanes, f.registers, f.rows, f.cols) == (32, 4, 1, 96)
    assert f.owner(0, 63) == (15, 3) and f.owner(0, 64) == (16, 0) and f.owner(0, 95) == (31, 1)
    words = np.arange(96, dtype=np.uint32) + 7
    regs = f.pack(words[None, :])
    assert np.array_equal(regs, s.place(words, registers=4))
    assert np.array_equal(f.unpack(regs)[0], s.extract(regs))
    with pytest.raises(mmasim.ShapeError, match="holds no element"):
        f.coords(16, 2)
