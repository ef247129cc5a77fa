"""tcgen05 block-scale factors in Tensor Memory and sub-byte operands in shared memory.

Formula tests are named after the PTX ISA 9.0 section they come from, with the expectation
written from the section's text (what it says, not what mmasim computes); the lane / column of
a scale factor is drawn only in figures, and its test derives the expectation from CUTLASS's
``UMMA::tmem_sf_frg`` layout numbers instead.  Then round trips, ``warp`` == the matrix form
on random words (numpy and numba backends) and the errors of bad calls.
"""

import numpy as np
import pytest

import mmasim
from mmasim import OperandError, ScaleError, ShapeError, UnsupportedDatapath
from mmasim.harness import nv_async as nv
from mmasim.placement import SmemLayout, encode_descriptor
from mmasim.placement.smem_packed import packed_image, read_packed_operand, smem_packing
from wordgen import seed, words

MXF8 = "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.m128n{n}k32.f32.{a}.{b}.ue8m0"
MXF4 = "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X.m128n{n}k64.f32.e2m1.e2m1.ue8m0"
NVF4_2X = "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::2X.m128n{n}k64.f32.e2m1.e2m1.ue8m0"
NVF4_4X = "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.m128n{n}k64.f32.e2m1.e2m1.ue4m3"
PAIR_MXF8 = "tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.scale_vec::1X.m256n{n}k32.f32.{a}.{b}.ue8m0"
PAIR_MXF4 = "tcgen05.mma.cta_group::2.kind::mxf4.block_scale.scale_vec::2X.m256n{n}k64.f32.e2m1.e2m1.ue8m0"
PAIR_NVF4 = "tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.scale_vec::4X.m256n{n}k64.f32.e2m1.e2m1.ue4m3"
SP_MXF8 = "tcgen05.mma.sp.kind::mxf8f6f4.block_scale.scale_vec::1X.m128n{n}k64.f32.{a}.{b}.ue8m0"
SP_MXF4 = "tcgen05.mma.sp.kind::mxf4.block_scale.scale_vec::2X.m128n{n}k128.f32.e2m1.e2m1.ue8m0"
SP_NVF4 = "tcgen05.mma.sp.kind::mxf4nvf4.block_scale.scale_vec::4X.m128n{n}k128.f32.e2m1.e2m1.ue4m3"
SP_PAIR_NVF4 = "tcgen05.mma.sp.cta_group::2.kind::mxf4nvf4.block_scale.scale_vec::4X.m256n{n}k128.f32.e2m1.e2m1.ue4m3"
SP_PAIR_MXF8 = "tcgen05.mma.sp.cta_group::2.kind::mxf8f6f4.block_scale.scale_vec::1X.m256n{n}k64.f32.{a}.{b}.ue8m0"
PAIR128_MXF4 = "tcgen05.mma.cta_group::2.kind::mxf4.block_scale.scale_vec::2X.m128n{n}k64.f32.e2m1.e2m1.ue8m0"
PAIR128_NVF4 = "tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.scale_vec::4X.m128n{n}k64.f32.e2m1.e2m1.ue4m3"


def _m(ins, backend="numpy"):
    return mmasim.MMA("B200", ins, backend=backend)


def _byte(regs, lane, column, byte):
    return (int(regs[lane, column]) >> (8 * byte)) & 0xFF


# ------------------------------------------------------------------ §9.7.16.10.7: shapes, IDs, duplication
@pytest.mark.parametrize("ins,V", [(MXF8.format(n=16, a="e4m3", b="e4m3"), 1), (MXF4.format(n=16), 2),
                                   (NVF4_4X.format(n=16), 4)])
def test_ptx_9_7_16_10_7_1_table_54_scale_matrix_shapes(ins, V):
    """Table 54: scale_A is M x 1 / 2 / 4 and scale_B 1 / 2 / 4 x N for scale_vec::1X / 2X / 4X."""
    m = _m(ins)
    assert m.layout("scale_a").shape == (128, V)
    assert m.layout("scale_b").shape == (V, 16)


@pytest.mark.parametrize("sfa_id", [0, 1, 2, 3])
def test_ptx_9_7_16_10_7_2_1_scale_vec_1x_sfa_id_is_the_byte_offset_in_the_tmem_word(sfa_id):
    """'SFA_ID specifies the byte offset in the Tensor Memory word' (scale_vec::1X): every scale
    factor of scale_A sits in byte SFA_ID of its cell, and the other bytes hold none."""
    m = _m(MXF8.format(n=16, a="e4m3", b="e4m3"))
    L = m.layout("scale_a", byte_id=sfa_id)
    for r in range(128):
        lane, i = L.owner(r, 0)
        assert L.register(i)[1] == 8 * sfa_id
    SA = np.arange(128).reshape(128, 1) + 1
    regs = m.fragments("scale_a", SA, byte_id=sfa_id)
    for lane in range(128):
        for col in range(L.registers):
            for byte in range(4):
                if byte != sfa_id:
                    assert _byte(regs, lane, col, byte) == 0


@pytest.mark.parametrize("sfb_id", [0, 2])
def test_ptx_9_7_16_10_7_3_2_scale_vec_2x_sfb_id_is_the_half_word_offset(sfb_id):
    """scale_vec::2X: 'SFB_ID specifies the half word offset in the Tensor Memory word' (0 or 2):
    the two scale factors of a column fill bytes SFB_ID and SFB_ID + 1."""
    m = _m(MXF4.format(n=16))
    L = m.layout("scale_b", byte_id=sfb_id)
    for n in range(16):
        (l0, i0), (l1, i1) = L.owner(0, n), L.owner(1, n)
        assert l0 == l1 and L.register(i0) == (L.register(i1)[0], 8 * sfb_id)
        assert L.register(i1)[1] == 8 * sfb_id + 8


def test_ptx_9_7_16_10_7_2_3_scale_vec_4x_fills_the_word_and_sfa_id_must_be_0():
    """scale_vec::4X: 'The SFA_ID value must be 0', all four bytes of the cell are used."""
    m = _m(NVF4_4X.format(n=16))
    L = m.layout("scale_a")
    assert sorted(L.register(L.owner(5, v)[1])[1] for v in range(4)) == [0, 8, 16, 24]
    for bad in (1, 2, 3):
        with pytest.raises(OperandError, match="not a valid selector value"):
            m.layout("scale_a", byte_id=bad)


@pytest.mark.parametrize("ins,bad", [(MXF4.format(n=16), 1), (MXF4.format(n=16), 3),
                                     (MXF8.format(n=16, a="e4m3", b="e4m3"), 4)])
def test_ptx_9_7_16_10_7_scale_factor_ids_outside_the_text_are_refused(ins, bad):
    """2X takes half-word offsets 0 or 2 only; 1X byte offsets 0..3."""
    m = _m(ins)
    with pytest.raises(OperandError, match="not a valid selector value"):
        m.layout("scale_b", byte_id=bad)


@pytest.mark.parametrize("operand", ["scale_a", "scale_b"])
def test_ptx_9_7_16_10_7_scale_factors_are_duplicated_to_all_32_lane_partitions(operand):
    """'Scale factors for A and B matrices need to be duplicated to all 32 lane partitions of
    tensor memory': the image's lanes 32p .. 32p + 31 repeat lanes 0 .. 31 for p = 1, 2, 3."""
    m = _m(NVF4_2X.format(n=16))
    rng = np.random.default_rng(seed(operand))
    X = rng.integers(1, 255, m.layout(operand).shape)
    regs = m.fragments(operand, X)
    assert regs.shape[0] == 128 and regs[:32].any()
    for p in (1, 2, 3):
        np.testing.assert_array_equal(regs[32 * p:32 * p + 32], regs[:32])


def _cutlass_sf_atom(mn):
    """(TMEM lane, byte index within the lane's columns) of scale factor (m, s) from CUTLASS's
    tmem_sf_frg atom for the 4x1 data path: MN mode shape (32, MN/32) stride (1, 512), SF mode
    stride 128, composed with the (128, 16384) : (lane, element column) restride."""
    out = {}
    for m in range(mn):
        for s in range(4):
            x = (m % 32) * 1 + (m // 32) * 512 + s * 128
            out[m, s] = (x % 128, x // 128)
    return out


@pytest.mark.parametrize("operand,ins,n", [("scale_a", NVF4_4X.format(n=16), 16),
                                          ("scale_b", NVF4_4X.format(n=256), 256),
                                          ("scale_b", NVF4_4X.format(n=48), 48)])
def test_scale_factor_lane_and_column_agree_with_cutlass_tmem_sf_frg(operand, ins, n):
    """Figures 231-233 / 240-242 draw the lane and column; CUTLASS's layout gives lane m % 32 and
    byte 4 * (m // 32) + s (column m // 32): the layout must agree for every scale factor."""
    m = _m(ins)
    L = m.layout(operand)
    mn = 128 if operand == "scale_a" else n
    for (idx, s), (lane, byte) in _cutlass_sf_atom(mn).items():
        lane_i, i = L.owner(idx, s) if operand == "scale_a" else L.owner(s, idx)
        assert (lane_i, L.register(i)) == (lane, (byte // 4, 8 * (byte % 4)))
    assert L.registers == -(-mn // 32)


def test_layout_text_labels_a_scale_factor_with_its_tmem_lane_column_and_byte():
    """The text map of scale_A (scale_vec::2X, SFA_ID 2): row 33's two scale factors are in lane 1,
    column 1 (33 // 32), bytes 2 and 3 (the half word at offset 2)."""
    from mmasim.placement.draw import text

    L = _m(MXF4.format(n=16)).layout("scale_a", byte_id=2)
    row33 = [line for line in text(L).splitlines() if line.lstrip().startswith("33 |")][0]
    assert row33.split("|")[1].split() == ["L1:c1b2", "L1:c1b3"]


# ------------------------------------------------------------------ round trips
@pytest.mark.parametrize("ins,ids", [(MXF8.format(n=8, a="e2m1", b="e3m2"), (0, 1, 2, 3)),
                                     (MXF4.format(n=48), (0, 2)), (NVF4_2X.format(n=16), (0, 2)),
                                     (NVF4_4X.format(n=256), (0,)),
                                     (PAIR_MXF8.format(n=48, a="e2m1", b="e3m2"), (0, 1, 2, 3)),
                                     (PAIR_MXF4.format(n=256), (0, 2)), (SP_PAIR_NVF4.format(n=32), (0,)),
                                     (PAIR128_MXF4.format(n=16), (0, 2)), (PAIR128_NVF4.format(n=176), (0,))])
def test_scale_layouts_round_trip_and_coords_are_a_bijection(ins, ids):
    """cta_group::1 and the CTA pair (whose image is the two CTAs' 256 lanes)."""
    m = _m(ins)
    rng = np.random.default_rng(seed(ins))
    for operand in ("scale_a", "scale_b"):
        for b in ids:
            L = m.layout(operand, byte_id=b)
            rows, cols, valid = L.table()
            assert sorted(zip(rows[valid], cols[valid])) == [(r, c) for r in range(L.rows) for c in range(L.cols)]
            for lane, i in zip(*np.nonzero(valid)):
                assert L.owner(*L.coords(int(lane), int(i))) == (lane, i)
            X = words(m.scale_format, L.shape, rng, "uniform")
            regs = m.fragments(operand, X, byte_id=b)
            lanes = 256 if "cta_group::2" in m.datapath.qualifiers else 128
            assert regs.dtype == np.uint32 and regs.shape == (lanes, L.registers)
            np.testing.assert_array_equal(m.unfragment(operand, regs, byte_id=b).astype(np.uint64), X)


# ------------------------------------------------------------------ §9.7.16.10.4: sub-byte shared memory
def _k_major(kbytes, rows=8):
    """K-major, no swizzle, the 16-byte K chunks of an 8-row group 128 bytes apart."""
    return SmemLayout("t", major="K", lbo=128, sbo=128 * (kbytes // 16), element_bits=8)


def test_ptx_9_7_16_10_4_6_mxf4_packs_two_e2m1_per_byte_with_no_padding():
    """'pack two 4-bit elements in a 8-bit container, with no padding': byte j of row 0's first
    16-byte chunk holds K elements 2j and 2j + 1 (the lower in the low nibble: assumed)."""
    lay = _k_major(32)
    img = np.zeros(8 * 32, dtype=np.uint8)
    img[0], img[1], img[16] = 0x21, 0x43, 0x65   # row 0: k 0..3 in bytes 0-1; row 1's first byte at 16
    d = lay.descriptor(0, "tcgen05")
    out = read_packed_operand(img, d, 8, 64, ("pair", 4))
    assert list(out[0, :5]) == [1, 2, 3, 4, 0]
    assert list(out[1, :2]) == [5, 6]


@pytest.mark.parametrize("bits", [4, 6])
def test_ptx_9_7_16_10_4_4_mxf8f6f4_packs_16_codes_contiguously_then_pads_the_16_byte_chunk(bits):
    """16 consecutive 4- / 6-bit codes packed contiguously (64 / 96 bits), then padding to 16
    bytes (.b4x16_p64 / .b6x16_p32): set the padding bytes to 0xFF, they must be ignored."""
    codes = [(j * 5 + 3) % (1 << bits) for j in range(16)]
    word = sum(c << (bits * j) for j, c in enumerate(codes))
    chunk = list(word.to_bytes(2 * bits, "little")) + [0xFF] * (16 - 2 * bits)
    lay = _k_major(16)
    img = np.zeros(8 * 16, dtype=np.uint8)
    img[16:32] = chunk                                  # row 1 (no swizzle: rows 16 bytes apart)
    out = read_packed_operand(img, lay.descriptor(0, "tcgen05"), 8, 16, ("padded", bits))
    assert list(out[1]) == codes
    assert not out[0].any()
    # e2m1's byte container holds the code in bits 5:2 (mmasim's format: field_shift 2)
    if bits == 4:
        shifted = read_packed_operand(img, lay.descriptor(0, "tcgen05"), 8, 16, ("padded", 4), field_shift=2)
        assert list(shifted[1]) == [c << 2 for c in codes]


def test_ptx_9_7_16_10_4_packing_form_per_kind():
    """mxf4 / mxf4nvf4: pairs; mxf8f6f4 (and f8f6f4): 4- / 6-bit codes padded; 8-bit: bytes."""
    assert smem_packing("mxf4", _m(MXF4.format(n=16)).a_format) == ("pair", 4)
    m = _m(MXF8.format(n=16, a="e2m1", b="e3m2"))
    assert smem_packing("mxf8f6f4", m.a_format) == ("padded", 4)
    assert smem_packing("mxf8f6f4", m.b_format) == ("padded", 6)
    assert smem_packing("mxf8f6f4", _m(MXF8.format(n=16, a="e4m3", b="e5m2")).a_format) == ("bytes", 8)


def test_a_128_byte_swizzled_k_major_row_holds_256_packed_or_128_padded_codes():
    """128-byte swizzle: one row holds 128 bytes of K (the canonical layout's rule), i.e. 256
    e2m1 codes in pairs or 8 padded chunks of 16 codes; one more chunk does not fit."""
    lay = SmemLayout("sw128", major="K", swizzle=128, sbo=1024, element_bits=8)
    rng = np.random.default_rng(3)
    for pack, depth in ((("pair", 4), 256), (("padded", 6), 128)):
        X = rng.integers(0, 1 << pack[1], (16, depth))
        img = packed_image(lay, X, pack)
        np.testing.assert_array_equal(read_packed_operand(img, lay.descriptor(0, "tcgen05"), 16, depth, pack), X)
    with pytest.raises(ShapeError, match="128 bytes of K"):
        packed_image(lay, np.zeros((8, 144), np.uint8), ("padded", 4))


@pytest.mark.parametrize("pack,shift", [(("pair", 4), 0), (("padded", 4), 2), (("padded", 6), 0)])
def test_packed_images_agree_with_the_harness_images(pack, shift):
    """The harness writes its tcgen05 images with its own code (mmasim.harness.nv_async): the
    same layout and packing must give the same bytes."""
    rng = np.random.default_rng(11)
    X = rng.integers(0, 1 << pack[1], (16, 64)).astype(np.uint64) << np.uint64(shift)
    himg, hlay = nv.operand_image(X, pack, shift)
    img = packed_image(hlay, X, pack, field_shift=shift)
    np.testing.assert_array_equal(img, himg.view(np.uint8)[: img.size])


# ------------------------------------------------------------------ warp() == matrix form
def _operands(m, rng, N, kind="mixed"):
    K = m.datapath.k
    A = words(m.a_format, (128, K), rng, kind)
    B = words(m.b_format, (K, N), rng, kind)
    C = words(m.c_format, (128, N), rng, kind)
    return A, B, C


def _image(m, X, operand, swizzle=0):
    fmt = m.a_format if operand == "a" else m.b_format
    pack = smem_packing(m.datapath.kind, fmt)
    kbytes = {"padded": X.shape[1], "pair": X.shape[1] // 2}.get(pack[0], X.shape[1] * fmt.container_bits // 8)
    if swizzle:
        lay = SmemLayout("sw", major="K", swizzle=swizzle, sbo=8 * swizzle, element_bits=8)
    else:
        lay = _k_major(kbytes)
    if pack[0] == "bytes":
        img = lay.to_image(X.astype(np.uint8))
    else:
        img = packed_image(lay, X, pack, field_shift=fmt.field_shift)
    return img, lay.descriptor(0, "tcgen05")


WARP_CASES = [
    (MXF8.format(n=16, a="e4m3", b="e2m1"), 0, 0, 0),
    (MXF8.format(n=8, a="e3m2", b="e2m3"), 3, 1, 0),
    (MXF8.format(n=16, a="e2m1", b="e5m2"), 2, 2, 32),
    (MXF4.format(n=48), 2, 0, 0),
    (NVF4_2X.format(n=16), 0, 2, 32),
    (NVF4_4X.format(n=16), 0, 0, 0),
    ("tcgen05.mma.kind::f8f6f4.m128n16k32.f32.e2m1.e3m2", None, None, 0),
    ("tcgen05.mma.kind::f8f6f4.m128n8k32.f32.e2m3.e2m1", None, None, 32),
]


@pytest.mark.parametrize("ins,id_a,id_b,swizzle", WARP_CASES)
def test_tcgen05_warp_with_tmem_scales_and_sub_byte_smem_equals_matrix_form(ins, id_a, id_b, swizzle):
    m = _m(ins)
    rng = np.random.default_rng(seed("warp" + ins))
    L = m.layout("d")
    A, B, C = _operands(m, rng, L.cols)
    a_img, da = _image(m, A, "a", swizzle)
    b_img, db = _image(m, B.T, "b", swizzle)
    kw, mkw = {}, {}
    if id_a is not None:
        V = m.datapath.blocks
        SA = words(m.scale_format, (128, V), rng, "near_one")
        SB = words(m.scale_format, (V, L.cols), rng, "near_one")
        # other bytes of the cells hold other instructions' scales: garbage that must not matter
        sa = m.fragments("scale_a", SA, byte_id=id_a) | m.fragments("scale_a", words(m.scale_format, (128, V), rng),
                                                                    byte_id=(id_a + V) % 4) * (V < 4)
        sb = m.fragments("scale_b", SB, byte_id=id_b)
        kw = dict(scale_a=sa, scale_b=sb, byte_id_a=id_a, byte_id_b=id_b)
        mkw = dict(scale_a=SA, scale_b=SB)
    d = m.warp(a_img, b_img, m.fragments("c", C), a_descriptor=da, b_descriptor=db, **kw)
    assert d.shape == (L.lanes, L.registers)
    np.testing.assert_array_equal(m.unfragment("d", d), m(A, B, C, **mkw))


@pytest.mark.parametrize("ins", [NVF4_4X.format(n=16), MXF8.format(n=16, a="e2m3", b="e2m1")])
def test_tcgen05_block_scaled_warp_numba_backend_equals_matrix_form(ins):
    m = _m(ins, backend="numba")
    rng = np.random.default_rng(seed("numba" + ins))
    A, B, C = _operands(m, rng, 16)
    V = m.datapath.blocks
    SA, SB = words(m.scale_format, (128, V), rng, "near_one"), words(m.scale_format, (V, 16), rng, "near_one")
    a_img, da = _image(m, A, "a")
    b_img, db = _image(m, B.T, "b")
    args = (a_img, b_img, m.fragments("c", C))
    kw = dict(scale_a=m.fragments("scale_a", SA), scale_b=m.fragments("scale_b", SB), a_descriptor=da, b_descriptor=db)
    d = m.warp(*args, **kw)
    np.testing.assert_array_equal(m.unfragment("d", d), m(A, B, C, scale_a=SA, scale_b=SB, backend="numpy"))
    np.testing.assert_array_equal(d, m.warp(*args, backend="numpy", **kw))


# ------------------------------------------------------------------ errors
def _scaled_call(m):
    rng = np.random.default_rng(1)
    A, B, C = _operands(m, rng, 16)
    a_img, da = _image(m, A, "a")
    b_img, db = _image(m, B.T, "b")
    V = m.datapath.blocks
    SA, SB = words(m.scale_format, (128, V), rng, "near_one"), words(m.scale_format, (V, 16), rng, "near_one")
    return (a_img, b_img, m.fragments("c", C)), dict(a_descriptor=da, b_descriptor=db,
                                                     scale_a=m.fragments("scale_a", SA),
                                                     scale_b=m.fragments("scale_b", SB))


def test_scale_image_whose_partitions_disagree_is_a_scale_error():
    m = _m(MXF4.format(n=16))
    args, kw = _scaled_call(m)
    kw["scale_a"] = kw["scale_a"].copy()
    kw["scale_a"][64 + 5, 0] ^= 0x1            # partition 2's copy of row 5, scale block 0
    with pytest.raises(ScaleError, match="duplicated in all four 32-lane partitions"):
        m.warp(*args, **kw)
    with pytest.raises(ScaleError, match="lane 69"):
        m.unfragment("scale_a", kw["scale_a"])


def test_bad_scale_calls_raise_specific_errors():
    m = _m(NVF4_4X.format(n=16))
    args, kw = _scaled_call(m)
    with pytest.raises(ShapeError, match=r"\(128, 4\)"):
        m.warp(*args, **{**kw, "scale_a": kw["scale_a"][:, :3]})
    with pytest.raises(ScaleError, match="pass the scale_a and scale_b"):
        m.warp(*args, **{**kw, "scale_b": None})
    with pytest.raises(OperandError, match="not a valid selector value"):
        m.warp(*args, byte_id_a=2, **kw)
    with pytest.raises(OperandError, match="take no such selector"):
        m.warp(*args, thread_id_a=1, **kw)
    with pytest.raises(ShapeError, match="must be 128x4"):
        m.fragments("scale_a", np.zeros((128, 2), np.uint8))


def test_bad_sub_byte_reads_raise_specific_errors():
    lay = _k_major(16)
    d = lay.descriptor(0, "tcgen05")
    img = np.zeros(256, np.uint8)
    with pytest.raises(ShapeError, match="multiple of 16"):
        read_packed_operand(img, d, 8, 24, ("padded", 4))
    with pytest.raises(ShapeError, match="even K"):
        read_packed_operand(img, d, 8, 7, ("pair", 4))
    with pytest.raises(UnsupportedDatapath, match="MN-major"):
        read_packed_operand(img, d, 8, 32, ("pair", 4), major="MN")
    with pytest.raises(ShapeError, match="element_bits=8"):
        packed_image(SmemLayout("x", lbo=128, sbo=256, element_bits=16), np.zeros((8, 32), np.uint8), ("pair", 4))
    with pytest.raises(ShapeError, match="holds 256 bytes"):
        read_packed_operand(img, encode_descriptor(0, 128, 1024, target="tcgen05"), 16, 64, ("padded", 6))


# ------------------------------------------------------------------ cta_group::2 (M = 256) and .sp


@pytest.mark.parametrize("ins,V", [(PAIR_MXF8.format(n=32, a="e4m3", b="e4m3"), 1), (PAIR_MXF4.format(n=32), 2),
                                   (PAIR_NVF4.format(n=32), 4), (SP_MXF8.format(n=16, a="e4m3", b="e4m3"), 1),
                                   (SP_MXF4.format(n=16), 2), (SP_PAIR_NVF4.format(n=32), 4)])
def test_ptx_9_7_16_10_7_1_table_54_scale_shapes_hold_for_the_pair_and_sparse_forms(ins, V):
    """Table 54: M x 1 / 2 / 4 and 1 / 2 / 4 x N 'for all supported values of K' (so also the
    sparse K = 64 / 128) and every M (256 with cta_group::2)."""
    m = _m(ins)
    M, N = m.layout("d").shape
    assert m.layout("scale_a").shape == (M, V)
    assert m.layout("scale_b").shape == (V, N)


def test_ptx_9_7_16_10_7_m256_pair_scales_are_duplicated_to_the_32_lane_partitions_of_each_cta():
    """'Scale factors ... need to be duplicated to all 32 lane partitions': in the pair's image
    (CTA c's lane l as lane 128 c + l) each CTA's partitions repeat its first one; scale_A's two
    CTAs hold different rows, scale_B's the same columns (all eight partitions equal)."""
    m = _m(PAIR_MXF4.format(n=64))
    rng = np.random.default_rng(seed("pair-dup"))
    sa = m.fragments("scale_a", rng.integers(1, 255, (256, 2)))
    sb = m.fragments("scale_b", rng.integers(1, 255, (2, 64)))
    assert sa.shape == (256, 4) and sb.shape == (256, 2)
    for cta in (0, 1):
        base = 128 * cta
        for p in (1, 2, 3):
            np.testing.assert_array_equal(sa[base + 32 * p:base + 32 * p + 32], sa[base:base + 32])
    assert (sa[:32] != sa[128:160]).any()
    for p in range(1, 8):
        np.testing.assert_array_equal(sb[32 * p:32 * p + 32], sb[:32])


@pytest.mark.parametrize("operand", ["scale_a", "scale_b"])
def test_m256_pair_scale_lane_and_column_agree_with_cutlass_4x1_atom_in_each_cta(operand):
    """CUTLASS's 2-SM block-scaled traits use the 4x1 tmem_sf_frg atom per CTA for M = 256
    (ScaleFactorDuplicated4by1): scale_A row 128 c + r at CTA c's lane r % 32, byte 4 (r // 32)
    + s; scale_B column n at lane n % 32, byte 4 (n // 32) + s (here: in CTA 0's lanes, the
    owners; CTA 1 repeats them)."""
    m = _m(PAIR_NVF4.format(n=64))
    L = m.layout(operand)
    atom = _cutlass_sf_atom(128 if operand == "scale_a" else 64)
    for cta in ((0, 1) if operand == "scale_a" else (0,)):
        for (idx, s), (lane, byte) in atom.items():
            got = L.owner(128 * cta + idx, s) if operand == "scale_a" else L.owner(s, idx)
            assert (got[0], L.register(got[1])) == (128 * cta + lane, (byte // 4, 8 * (byte % 4)))




def _pair_or_sparse_call(m, rng, id_a=0, id_b=0):
    """warp()'s arguments for a block-scaled sparse and / or cta_group::2 instruction, built
    from random words, and the matrix form's D."""
    from mmasim.placement import compress, metadata_words
    dp, L = m.datapath, m.layout("d")
    M, N, K = L.rows, L.cols, dp.k
    A, B, C = words(m.a_format, (M, K), rng, "mixed"), words(m.b_format, (K, N), rng, "mixed"), \
        words(m.c_format, (M, N), rng, "mixed")
    V = dp.blocks
    SA, SB = words(m.scale_format, (M, V), rng, "near_one"), words(m.scale_format, (V, N), rng, "near_one")
    kw = dict(scale_a=m.fragments("scale_a", SA, byte_id=id_a), scale_b=m.fragments("scale_b", SB, byte_id=id_b),
              byte_id_a=id_a, byte_id_b=id_b)
    mkw = dict(scale_a=SA, scale_b=SB)
    Au = A
    if dp.sparse:
        md = metadata_words(rng.choice(sorted(m.sparse_rule.selectors), (M, m.sparse_rule.chunks(K))))
        Au = compress(m.placement, A, md)
        kw["sparse_metadata"] = m.fragments("sparse_metadata", md)
        mkw["sparse_metadata"] = md
    ncta = 2 if "cta_group::2" in dp.qualifiers else 1
    a = [_image(m, Au[c * M // ncta:(c + 1) * M // ncta], "a") for c in range(ncta)]
    b = [_image(m, B.T[c * N // ncta:(c + 1) * N // ncta], "b") for c in range(ncta)]
    imgs = (tuple(x[0] for x in a), tuple(x[0] for x in b)) if ncta == 2 else (a[0][0], b[0][0])
    kw.update(a_descriptor=a[0][1], b_descriptor=b[0][1])
    return (*imgs, m.fragments("c", C)), kw, m(A, B, C, **mkw)


PAIR_SPARSE_CASES = [
    (SP_MXF8.format(n=16, a="e4m3", b="e2m1"), 0, 0),
    (SP_MXF8.format(n=32, a="e3m2", b="e2m3"), 3, 1),
    (SP_MXF4.format(n=16), 2, 0),
    (SP_NVF4.format(n=48), 0, 0),
    (PAIR_MXF8.format(n=32, a="e5m2", b="e2m1"), 1, 2),
    (PAIR_MXF4.format(n=48), 0, 2),
    (PAIR_NVF4.format(n=16), 0, 0),
    (SP_PAIR_NVF4.format(n=32), 0, 0),
    (SP_PAIR_MXF8.format(n=16, a="e2m1", b="e4m3"), 2, 3),
    ("tcgen05.mma.cta_group::2.kind::mxf4.block_scale.scale_vec::2X.m128n48k64.f32.e2m1.e2m1.ue8m0", 2, 0),
    ("tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.scale_vec::4X.m128n128k64.f32.e2m1.e2m1.ue4m3", 0, 0),
    ("tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.scale_vec::1X.m128n256k32.f32.e4m3.e2m3.ue8m0", 1, 3),
]


@pytest.mark.parametrize("ins,id_a,id_b", PAIR_SPARSE_CASES)
def test_block_scaled_sparse_and_pair_warp_equals_matrix_form(ins, id_a, id_b):
    """warp() with the scale images, the sparse metadata image and (cta_group::2) the two CTAs'
    shared-memory images equals the matrix form on random words."""
    m = _m(ins)
    args, kw, expected = _pair_or_sparse_call(m, np.random.default_rng(seed("sp-pair" + ins)), id_a, id_b)
    d = m.warp(*args, **kw)
    L = m.layout("d")
    assert d.shape == (L.lanes, L.registers)
    np.testing.assert_array_equal(m.unfragment("d", d), expected)


@pytest.mark.parametrize("ins", [SP_NVF4.format(n=16), PAIR_MXF8.format(n=32, a="e4m3", b="e3m2"),
                                 PAIR128_MXF4.format(n=64)])
def test_block_scaled_sparse_and_pair_warp_numba_backend_equals_matrix_form(ins):
    m = _m(ins, backend="numba")
    args, kw, expected = _pair_or_sparse_call(m, np.random.default_rng(seed("numba-sp" + ins)))
    d = m.warp(*args, **kw)
    np.testing.assert_array_equal(m.unfragment("d", d), expected)
    np.testing.assert_array_equal(d, m.warp(*args, backend="numpy", **kw))


def test_pair_scale_image_whose_cta1_partitions_disagree_is_a_scale_error():
    """CTA 1's partitions must repeat CTA 1's own first partition (lanes 128..159)."""
    m = _m(PAIR_MXF4.format(n=32))
    args, kw, _ = _pair_or_sparse_call(m, np.random.default_rng(2))
    bad = kw["scale_a"].copy()
    bad[128 + 64 + 7, 1] ^= 0x1            # CTA 1, partition 2's copy of row 128 + 32 + 7
    with pytest.raises(ScaleError, match="lane 199"):
        m.warp(*args, **{**kw, "scale_a": bad})
    bad = kw["scale_b"].copy()
    bad[128 + 3, 0] ^= 0x100               # CTA 1's copy of scale_B column 3, scale block 1
    with pytest.raises(ScaleError, match="lane 131"):
        m.warp(*args, **{**kw, "scale_b": bad})


def test_block_scaled_pair_and_sparse_forms_refuse_bad_calls_clearly():
    m = _m(SP_MXF4.format(n=16))
    args, kw, _ = _pair_or_sparse_call(m, np.random.default_rng(3))
    with pytest.raises(ScaleError, match="pass the scale_a and scale_b"):
        m.warp(*args, **{**kw, "scale_a": None})
    with pytest.raises(mmasim.SparseMetadataError, match="sparse"):
        m.warp(*args, **{**kw, "sparse_metadata": None})
    with pytest.raises(ShapeError):          # A in Tensor Memory of the wrong shape
        m.warp(np.zeros((128, 3), np.uint32), *args[1:], **{**kw, "a_descriptor": None})
    unscaled = _m("tcgen05.mma.sp.kind::f16.m128n16k32.f32.f16.f16")
    with pytest.raises(ScaleError, match="not block-scaled"):
        unscaled.warp(*args, scale_a=kw["scale_a"], b_descriptor=kw["b_descriptor"])


@pytest.mark.parametrize("n", [128, 256])
def test_m128_pair_scale_b_agrees_with_cutlass_2x2_atom_and_follows_layout_b_column_halves(n):
    """M = 128 cta_group::2 (the 2x2 data path, layout B: lanes 64..127 compute D's columns N/2 ..):
    CUTLASS's ScaleFactorDuplicated2by2 atom, MN mode ((32, MN/64), 2, 2) : ((1, 512), 64, 32),
    SF mode stride 128, composed with the (lane, element column) restride: scale_B column n at
    lane (x % 128), byte x // 128 of x = n % 32 + 512 ((n // 32) % (MN/64)) + 64 (n // (MN/2))
    + 128 s, and again at lane + 32 (the last mode, the duplicate); MN = N here (128, 256)."""
    m = _m(PAIR128_NVF4.format(n=n))
    L = m.layout("scale_b")
    regs = m.fragments("scale_b", np.arange(4 * n).reshape(4, n) % 251 + 1)
    for col in range(n):
        for s in range(4):
            x = col % 32 + 512 * ((col // 32) % (n // 64)) + 64 * (col // (n // 2)) + 128 * s
            lane, byte = x % 128, x // 128
            got_lane, i = L.owner(s, col)
            assert (got_lane, L.register(i)) == (lane, (byte // 4, 8 * (byte % 4)))
            assert regs[lane + 32, byte // 4] == regs[lane, byte // 4]            # the 2x2 duplicate
            assert regs[128 + lane, byte // 4] == regs[lane, byte // 4]           # CTA 1 holds the same
    d = m.layout("d")                       # the same lanes compute D's column: layout B's halves
    for col in (0, n // 2 - 1, n // 2, n - 1):
        assert (L.owner(0, col)[0] >= 64) == (d.owner(0, col)[0] >= 64)


def test_m128_pair_scale_a_holds_each_ctas_64_rows_in_two_columns_of_every_partition():
    """scale_A of the 2x2 data path: CUTLASS's scale_A atom is the 4x1 one (lane r % 32, byte
    4 (r // 32) + s) for 64 rows per CTA: 2 TMEM columns, duplicated in the CTA's four partitions."""
    m = _m(PAIR128_MXF4.format(n=32))
    L = m.layout("scale_a")
    assert L.registers == 2
    for cta in (0, 1):
        for r in range(64):
            for s in range(2):
                lane, i = L.owner(64 * cta + r, s)
                assert (lane, L.register(i)) == (128 * cta + r % 32, (r // 32, 8 * s))
    regs = m.fragments("scale_a", np.arange(256).reshape(128, 2) % 200 + 1)
    for cta in (0, 1):
        for p in (1, 2, 3):
            base = 128 * cta
            np.testing.assert_array_equal(regs[base + 32 * p:base + 32 * p + 32], regs[base:base + 32])


def test_m128_pair_scale_b_image_whose_half_copies_disagree_is_a_scale_error():
    """Lanes 32..63 repeat lanes 0..31 (D's first N/2 columns), lanes 96..127 repeat 64..95."""
    m = _m(PAIR128_MXF4.format(n=64))
    args, kw, _ = _pair_or_sparse_call(m, np.random.default_rng(4))
    bad = kw["scale_b"].copy()
    bad[96 + 2, 0] ^= 0x1
    with pytest.raises(ScaleError, match="lane 98"):
        m.warp(*args, **{**kw, "scale_b": bad})
    m.warp(*args, **kw)


@pytest.mark.parametrize("arch", ["B200", "Blackwell Ultra"])
@pytest.mark.parametrize("ins", ["tcgen05.mma.kind::mxf4nvf4.block_scale.block16.m128n16k96.f32.e2m1.e2m1.ue4m3",
                                 "tcgen05.mma.kind::mxf4.block_scale.block32.m128n16k96.f32.e2m1.e2m1.ue8m0"])
def test_ptx_table_54_k96_block_scaled_forms_are_not_in_the_tables(arch, ins):
    """Table 54 lists K = 96 (.block16: M x 6, .block32: M x 3) whose scale placement is only in
    Figures 234-258; mmasim's tables have no K = 96 datapath, so no layout is offered for them."""
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA(arch, ins)
