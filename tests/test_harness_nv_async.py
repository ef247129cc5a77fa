"""The wgmma.mma_async / tcgen05.mma harness kernels (mmasim.harness.nv_async).

Expectations of the descriptor tests are written from the PTX ISA 9.0 bit tables
(§9.7.16.4.2 "Instruction descriptor", §9.7.15.5.1.2.2 "Matrix Descriptor Format",
§9.7.16.4.1 "Shared memory descriptor"), by hand, not from running the encoder.
"""

import numpy as np
import pytest

import mmasim
from mmasim import UnsupportedDatapath
from mmasim.errors import ShapeError
from mmasim.harness import nv_async as nv
from mmasim.harness import nv_tcgen05 as tc
from mmasim.harness.spec import KernelSpec


# ------------------------------------------------------------------ instruction descriptor
def test_idesc_kind_f16_f32_d_m128_n256_sets_dtype_bit4_n_at_17_m_at_24():
    # dtype F32 = 1 at bits 4-5; atype / btype F16 = 0; N >> 3 = 32 at 17-22; M >> 4 = 8 at 24-28
    assert tc.instruction_descriptor("f16", 128, 256, "f16", "f16", "f32") == (1 << 4) | (32 << 17) | (8 << 24)
    assert tc.instruction_descriptor("f16", 128, 256, "f16", "f16", "f32") == 0x08400010


def test_idesc_kind_f16_bf16_m64_n8_atype_and_btype_are_one():
    # BF16 = 1 in atype (bits 7-9) and btype (bits 10-12)
    assert tc.instruction_descriptor("f16", 64, 8, "bf16", "bf16", "f32") == 0x04020490


def test_idesc_kind_f16_with_f16_d_has_dtype_zero():
    assert tc.instruction_descriptor("f16", 64, 8, "f16", "f16", "f16") == (1 << 17) | (4 << 24)


def test_idesc_kind_tf32_types_are_two():
    assert tc.instruction_descriptor("tf32", 128, 64, "tf32", "tf32", "f32") == 0x08100910


def test_idesc_kind_i8_signed_a_unsigned_b_saturate_s32():
    # saturate bit 3; dtype S32 = 2; Signed 8b = 1 (atype), Unsigned 8b = 0 (btype)
    assert tc.instruction_descriptor("i8", 128, 16, "s8", "u8", "s32", saturate=True) == 0x080400A8


def test_idesc_kind_f8f6f4_sparse_e2m1_by_e3m2_f16_d():
    # sparsity bit 2; E2M1 = 5 (atype), E3M2 = 4 (btype); N = 128 -> 16 << 17; M = 64 -> 4 << 24
    word = tc.instruction_descriptor("f8f6f4", 64, 128, "e2m1", "e3m2", "f16", sparse=True)
    assert word == 0x04201284


def test_idesc_sparsity_selector_is_bits_0_1_and_max_shift_bits_30_31():
    base = tc.instruction_descriptor("f16", 128, 64, "f16", "f16", "f32", sparse=True)
    assert tc.instruction_descriptor("f16", 128, 64, "f16", "f16", "f32", sparse=True, sparsity_selector=3) == base | 3
    assert tc.instruction_descriptor("f16", 128, 64, "f16", "f16", "f32", sparse=True, max_shift=2) == base | 2 << 30


def test_idesc_negate_and_transpose_bits_13_to_16():
    base = tc.instruction_descriptor("f16", 128, 64, "f16", "f16", "f32")
    for kw, bit in (("negate_a", 13), ("negate_b", 14), ("transpose_a", 15), ("transpose_b", 16)):
        assert tc.instruction_descriptor("f16", 128, 64, "f16", "f16", "f32", **{kw: True}) == base | 1 << bit


def test_idesc_kind_mxf8f6f4_scale_ids_scale_type_and_m_shifted_by_7():
    # SFB ID at 4-5, E5M2 = 1 (atype), E2M3 = 3 (btype), N >> 3 at 17, UE8M0 = 1 at 23,
    # M >> 7 = 2 at 27-28, SFA ID at 29-30
    word = tc.instruction_descriptor("mxf8f6f4", 256, 8, "e5m2", "e2m3", scale_type="ue8m0",
                                     scale_a_id=3, scale_b_id=1)
    assert word == 0x70820C90


def test_idesc_kind_mxf4nvf4_ue4m3_scale_type_is_zero():
    assert tc.instruction_descriptor("mxf4nvf4", 128, 256, "e2m1", "e2m1", scale_type="ue4m3") == 0x08400480
    assert tc.instruction_descriptor("mxf4nvf4", 128, 256, "e2m1", "e2m1", scale_type="ue8m0") == 0x08C00480


def test_idesc_kind_mxf4_k96_is_bit_31():
    plain = tc.instruction_descriptor("mxf4", 128, 8, "e2m1", "e2m1")
    assert tc.instruction_descriptor("mxf4", 128, 8, "e2m1", "e2m1", k96=True) == plain | 1 << 31


@pytest.mark.parametrize("kw", [
    dict(kind="mxf4", m=128, n=8, atype="e2m1", btype="e2m1", scale_a_id=1),         # mxf4: ID 0 or 2
    dict(kind="mxf4", m=128, n=8, atype="e2m1", btype="e2m1", scale_type="ue4m3"),   # mxf4: UE8M0 only
    dict(kind="mxf8f6f4", m=64, n=8, atype="e4m3", btype="e4m3"),                    # M >> 7: 128 or 256
    dict(kind="f16", m=128, n=12, atype="f16", btype="f16"),                         # N multiple of 8
    dict(kind="i8", m=128, n=8, atype="s8", btype="s8", dtype="f32"),                # i8: S32 only
    dict(kind="f16", m=128, n=8, atype="f16", btype="f16", saturate=True),           # saturate: i8 only
    dict(kind="f16", m=128, n=8, atype="e4m3", btype="f16"),                         # not an f16-kind type
])
def test_idesc_refuses_values_the_isa_table_does_not_list(kw):
    with pytest.raises(ShapeError):
        tc.instruction_descriptor(**kw)


def test_idesc_reserved_bits_stay_zero():
    plain_reserved = 1 << 6 | 1 << 23 | 1 << 29
    for kind, a, d in (("f16", "bf16", "f32"), ("tf32", "tf32", "f32"), ("f8f6f4", "e2m1", "f16"), ("i8", "s8", "s32")):
        for m in (64, 128, 256):
            for n in (8, 136, 256):
                w = tc.instruction_descriptor(kind, m, n, a, a, d, sparse=True, sparsity_selector=3, max_shift=3,
                                              saturate=kind == "i8", negate_a=True, negate_b=True)
                assert w & plain_reserved == 0
    scaled_reserved = 0b11 | 1 << 3 | 1 << 6 | 0b111 << 24
    for kind, st, ids in (("mxf8f6f4", "ue8m0", 3), ("mxf4", "ue8m0", 2), ("mxf4nvf4", "ue4m3", 2)):
        w = tc.instruction_descriptor(kind, 256, 256, "e2m1", "e2m1", sparse=True, scale_type=st,
                                      scale_a_id=ids, scale_b_id=ids, negate_a=True, negate_b=True)
        assert w & scaled_reserved == 0
        if kind == "mxf8f6f4":
            assert w >> 31 == 0


# ------------------------------------------------------------------ matrix descriptors of the kernels
def _model(arch, s):
    return mmasim.MMA(arch, s)


def test_wgmma_descriptors_are_k_major_no_swizzle_with_lbo_128_and_sbo_per_8_rows():
    m = _model("Hopper", "wgmma.mma_async.k16.f32.f16.f16")
    spec = nv.specs(m, n=8)[0]
    a, b = spec.inputs[0], spec.inputs[1]
    assert a.space == b.space == "smem"
    # A: 64 rows x 16 f16 = 32 bytes of K per row: 16-byte chunks LBO = 128 bytes apart, 8-row groups
    # SBO = 2 * 128 bytes apart. Fields: bits 0-13 start (0), 16-29 LBO >> 4, 32-45 SBO >> 4,
    # 49-51 base offset 0, 62-63 swizzle 0 (none)
    assert a.descriptor == (128 >> 4) << 16 | (256 >> 4) << 32
    assert b.descriptor == (128 >> 4) << 16 | (256 >> 4) << 32


def test_tcgen05_descriptors_carry_the_fixed_0b001_at_bits_46_to_48():
    m = _model("B200", "tcgen05.mma.kind::f8f6f4.f32.e4m3.e4m3")
    spec = tc.specs(m, m=128)[0]
    a = spec.inputs[0]
    # A: 128 rows x 32 e4m3 = 32 bytes per row: LBO 128 bytes, SBO 256 bytes, version 0b001 at 46,
    # LBO mode (bit 52) 0, swizzle (61-63) 0 = none
    assert a.descriptor == (128 >> 4) << 16 | (256 >> 4) << 32 | 1 << 46
    assert spec.options["idesc"] == tc.instruction_descriptor("f8f6f4", 128, min(m.legal_n), "e4m3", "e4m3", "f32")


# ------------------------------------------------------------------ shared-memory images
@pytest.mark.parametrize("pack,shift,maxv,nbytes", [
    (("bytes", 8), 0, 256, 1), (("bytes", 16), 0, 1 << 16, 2), (("bytes", 32), 0, 1 << 32, 4),
    (("pair", 4), 0, 16, 0.5), (("padded", 4), 2, 16, 1), (("padded", 6), 0, 64, 1),
])
def test_operand_image_round_trips_and_fills_exactly_its_slots(pack, shift, maxv, nbytes):
    rng = np.random.default_rng(7)
    rows, K = 64, 64
    w = rng.integers(0, maxv, (rows, K), dtype=np.uint64) << np.uint64(shift)
    img, _ = nv.operand_image(w, pack, shift)
    assert img.dtype == np.uint32
    # a dense image: exactly rows * K slots of the element's size (16 codes per 16 bytes when padded)
    assert img.size * 4 == int(rows * K * nbytes)
    assert (nv.image_operand(img, rows, K, pack, shift) == w).all()


def test_operand_image_puts_every_element_at_a_distinct_slot():
    rows, K = 16, 16
    w = np.arange(rows * K, dtype=np.uint64).reshape(rows, K)    # 256 distinct 16-bit values
    img, _ = nv.operand_image(w, ("bytes", 16))
    halves = img.view(np.uint16)
    assert sorted(halves.tolist()) == list(range(rows * K))


def test_operand_image_k_major_first_core_matrix_is_rows_of_16_bytes():
    # K-major, no swizzle: the 8 x 16-byte core matrix of rows 0-7, K bytes 0-15 comes first,
    # row r at byte 16 r (PTX canonical layout ((8,m),(T,2k)) : ((1T,SBO),(1,LBO)))
    w = np.zeros((8, 32), dtype=np.uint64)
    w[3, 5] = 0xAB
    img, _ = nv.operand_image(w, ("bytes", 8))
    assert img.view(np.uint8)[16 * 3 + 5] == 0xAB
    w2 = np.zeros((8, 32), dtype=np.uint64)
    w2[0, 16] = 0xCD                                               # K byte 16: the next chunk, LBO = 128
    assert nv.operand_image(w2, ("bytes", 8))[0].view(np.uint8)[128] == 0xCD


def test_operand_image_pairs_put_lower_k_in_the_low_nibble():
    w = np.zeros((8, 32), dtype=np.uint64)
    w[0, 0], w[0, 1] = 0x3, 0xC
    assert nv.operand_image(w, ("pair", 4))[0].view(np.uint8)[0] == 0xC3


# ------------------------------------------------------------------ place / read round trips
def _random_ops(spec, model, cases=2, seed=3):
    rng = np.random.default_rng(seed)
    dp = model.datapath
    m, n = spec.options["m"], spec.options["n"]
    bits = lambda f: f.container_bits   # noqa: E731
    a = rng.integers(0, 1 << bits(model.a_format), (cases, m, dp.k), dtype=np.uint64)
    b = rng.integers(0, 1 << bits(model.b_format), (cases, dp.k, n), dtype=np.uint64)
    c = rng.integers(0, 1 << bits(model.c_format), (cases, m, n), dtype=np.uint64)
    return {"a": a, "b": b, "c": c}


WGMMA = ["wgmma.mma_async.k16.f32.f16.f16", "wgmma.mma_async.k16.f16.f16.f16", "wgmma.mma_async.k8.f32.tf32.tf32",
         "wgmma.mma_async.k32.f16.e4m3.e5m2", "wgmma.mma_async.k32.s32.u8.s8.satfinite"]


@pytest.mark.parametrize("instruction", WGMMA)
def test_wgmma_place_then_invert_returns_a_b_c_and_read_returns_the_accumulator(instruction):
    model = _model("Hopper", instruction)
    for spec in nv.specs(model):
        ops = _random_ops(spec, model)
        bufs = nv.place(spec, model, ops)
        assert [b.dtype for b in bufs] == [np.uint32] * 3
        shaped = mmasim.MMA("Hopper", spec.assembly)
        n, cases = spec.options["n"], 2
        a_buf, b_buf, c_buf = bufs
        for i in range(cases):
            bimg = b_buf.reshape(cases, -1)[i]
            assert (nv.image_operand(bimg, n, model.k, ("bytes", model.b_format.container_bits)) == ops["b"][i].T).all()
            if spec.inputs[0].space == "smem":
                aimg = a_buf.reshape(cases, -1)[i]
                assert (nv.image_operand(aimg, 64, model.k, ("bytes", model.a_format.container_bits)) == ops["a"][i]).all()
            else:
                assert (shaped.unfragment("a", a_buf.reshape(cases, 128, -1)[i]) == ops["a"][i]).all()
        assert c_buf.size == cases * 128 * spec.inputs[2].words
        # C and D share the accumulator layout: reading the C buffer back as D returns C
        assert (nv.read(spec, model, c_buf) == ops["c"]).all()


TCGEN05 = [("B200", "tcgen05.mma.kind::f16.f32.bf16.bf16"), ("B200", "tcgen05.mma.kind::f16.f16.f16.f16"),
           ("B200", "tcgen05.mma.kind::tf32.f32.tf32.tf32"), ("B200", "tcgen05.mma.kind::i8.s32.s8.u8.satfinite"),
           ("B200", "tcgen05.mma.kind::f8f6f4.f32.e2m1.e3m2"), ("B200", "tcgen05.mma.ws.kind::f16.f32.f16.f16"),
           ("B200", "tcgen05.mma.cta_group::2.kind::f8f6f4.f32.e4m3.e2m3"),
           ("Blackwell Ultra", "tcgen05.mma.ws.kind::f8f6f4.f16.e5m2.e2m1")]


@pytest.mark.parametrize("arch,instruction", TCGEN05)
def test_tcgen05_place_then_invert_returns_a_b_c_per_cta(arch, instruction):
    model = _model(arch, instruction)
    for spec in tc.specs(model):
        ops = _random_ops(spec, model)
        # the low bits of the 8-bit containers of 4/6-bit codes are where Format.field_shift says
        for o, f in (("a", model.a_format), ("b", model.b_format)):
            ops[o] = (ops[o] & np.uint64((1 << f.field_bits) - 1)) << np.uint64(f.field_shift)
        a_buf, b_buf, c_buf = tc.place(spec, model, ops)
        g, m, n, cases = spec.cluster, spec.options["m"], spec.options["n"], 2
        rows, cols = m // g, n // g
        pa, pb = tuple(spec.options["a_packing"]), tuple(spec.options["b_packing"])
        for i in range(cases):
            for r in range(g):
                blk = i * g + r
                aimg = a_buf.reshape(cases * g, -1)[blk]
                bimg = b_buf.reshape(cases * g, -1)[blk]
                assert (nv.image_operand(aimg, rows, model.k, pa, model.a_format.field_shift)
                        == ops["a"][i, r * rows:(r + 1) * rows]).all()
                assert (nv.image_operand(bimg, cols, model.k, pb, model.b_format.field_shift)
                        == ops["b"][i, :, r * cols:(r + 1) * cols].T).all()
        assert (tc.read(spec, model, c_buf) == ops["c"]).all()


def test_tcgen05_tmem_words_of_one_lane_are_one_row_for_m128():
    # layout D (M = 128, cta_group::1): row i in TMEM lane i, column j in column j; thread t
    # writes lane t with tcgen05.st.32x32b, so thread t's C words are row t
    model = _model("B200", "tcgen05.mma.kind::f16.f32.f16.f16")
    spec = [s for s in tc.specs(model) if s.options["m"] == 128][0]
    ops = _random_ops(spec, model, cases=1)
    c_buf = tc.place(spec, model, ops)[2].reshape(128, -1)
    assert (c_buf[5] == ops["c"][0, 5]).all()


def test_cta_group_2_kernels_run_on_a_two_block_cluster():
    model = _model("B200", "tcgen05.mma.cta_group::2.kind::f16.f32.f16.f16")
    for spec in tc.specs(model):
        assert spec.cluster == 2 and "__cluster_dims__(2, 1, 1)" in spec.device
        assert spec.options["layout"] == ("A" if spec.options["m"] == 256 else "B")


def _tcgen05_ops(spec, model, cases=2, seed=3):
    """Random A, B, C and, where the instruction has them, scale factors near 1 and legal sparse
    metadata (the matrix form's operands, per case)."""
    from mmasim.placement import metadata_words
    from wordgen import words
    ops = _random_ops(spec, model, cases, seed)
    rng = np.random.default_rng(seed + 1)
    dp, m, n = model.datapath, spec.options["m"], spec.options["n"]
    if dp.scale:
        ops["scale_a"] = words(model.scale_format, (cases, m, dp.blocks), rng, "near_one")
        ops["scale_b"] = words(model.scale_format, (cases, dp.blocks, n), rng, "near_one")
    if dp.sparse:
        sel = sorted(model.sparse_rule.selectors)
        ops["sparse_metadata"] = np.stack([metadata_words(rng.choice(sel, (m, model.sparse_rule.chunks(dp.k))))
                                           for _ in range(cases)]).astype(np.uint64)
    return ops


@pytest.mark.parametrize("instruction", [
    "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e4m3.e2m1.ue8m0",
    "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3",
    "tcgen05.mma.sp.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e3m2.e4m3.ue8m0",
    "tcgen05.mma.sp.cta_group::2.kind::mxf4.block_scale.scale_vec::2X.block32.f32.e2m1.e2m1.ue8m0",
    "tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3",
    "tcgen05.mma.sp.kind::f16.f32.f16.f16",
    "tcgen05.mma.sp.cta_group::2.kind::f16.f32.bf16.bf16",
])
def test_tcgen05_scale_and_metadata_buffers_read_back_through_warp_give_the_matrix_form(instruction):
    """place() writes the scale factors and the sparse metadata as Model.fragments' Tensor Memory
    images (thread t of CTA r: lane 128 r + t); read as the kernel's operands by Model.warp, the
    buffers give the matrix form's D through read()."""
    model = _model("B200", instruction)
    for spec in tc.specs(model):
        ops = _tcgen05_ops(spec, model)
        bufs = tc.place(spec, model, ops)
        assert [b.operand for b in spec.inputs][3:] == [o for o in ("scale_a", "scale_b", "sparse_metadata")
                                                        if o in ops]
        D = tc.read(spec, model, tc.simulate(spec, model, bufs, 2))
        extra = [o for o in ("scale_a", "scale_b", "sparse_metadata") if o in ops]
        expected = np.stack([model(ops["a"][i], ops["b"][i], ops["c"][i], **{o: ops[o][i] for o in extra})
                             for i in range(2)])
        np.testing.assert_array_equal(D, expected)


def test_tcgen05_scale_a_buffer_repeats_each_row_in_the_four_warps_as_ptx_requires():
    """PTX ISA 9.0 §9.7.16.10.7: 'Scale factors for A and B matrices need to be duplicated to all
    32 lane partitions': thread t and threads t + 32, t + 64, t + 96 (the other warps, each
    storing its own partition with tcgen05.st.32x32b) carry the same scale words; the columns
    follow D's and the buffer says which layout it is."""
    model = _model("B200", "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X.block32.f32.e2m1.e2m1.ue8m0")
    spec = tc.specs(model)[0]
    ops = _tcgen05_ops(spec, model, cases=1)
    names = [b.operand for b in spec.inputs]
    sa = tc.place(spec, model, ops)[names.index("scale_a")].reshape(128, -1)
    for w in (1, 2, 3):
        np.testing.assert_array_equal(sa[32 * w:32 * w + 32], sa[:32])
    # row 33's two scale factors (scale_vec::2X, SFA_ID 0): thread 1, column 1, bytes 0 and 1
    assert sa[1, 1] & 0xFFFF == int(ops["scale_a"][0, 33, 0]) | int(ops["scale_a"][0, 33, 1]) << 8
    buf = spec.inputs[names.index("scale_a")]
    assert buf.words == 4 and "tcgen05.tmem.scale_a.m128.cta1" in buf.layout


def test_tcgen05_m128_pair_scale_b_buffer_splits_n_between_the_warp_pairs_as_layout_b_does():
    """M = 128 cta_group::2 (the 2x2 data path): warps 0 and 1 of each CTA (lanes 0..63, D's first
    N/2 columns) carry scale_B's first N/2 columns, warps 2 and 3 the rest; both CTAs the same."""
    model = _model("B200", "tcgen05.mma.cta_group::2.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3")
    spec = [s for s in tc.specs(model, n=32) if s.options["m"] == 128][0]
    ops = _tcgen05_ops(spec, model, cases=1)
    names = [b.operand for b in spec.inputs]
    sb = tc.place(spec, model, ops)[names.index("scale_b")].reshape(2, 128, -1)
    SB = ops["scale_b"][0]
    word = lambda n: sum(int(SB[v, n]) << (8 * v) for v in range(4))    # noqa: E731 (scale_vec::4X: the word)
    for cta in (0, 1):
        for t in range(16):             # N / 2 = 16 columns per half
            assert sb[cta, t, 0] == sb[cta, 32 + t, 0] == word(t)
            assert sb[cta, 64 + t, 0] == sb[cta, 96 + t, 0] == word(16 + t)
        assert not sb[cta, 16:32].any() and not sb[cta, 80:96].any()
    assert "tcgen05.tmem.scale_b.m128.cta2" in spec.inputs[names.index("scale_b")].layout


def test_spec_round_trips_through_json_with_its_cluster():
    spec = tc.specs(_model("B200", "tcgen05.mma.cta_group::2.kind::tf32.f32.tf32.tf32"))[0]
    assert KernelSpec.from_json(spec.to_json()) == spec


def test_wgmma_specs_cover_smallest_and_largest_n_with_a_from_smem_and_registers():
    model = _model("Hopper", "wgmma.mma_async.k32.s32.s8.s8")
    got = {(s.options["n"], s.options["a_source"]) for s in nv.specs(model)}
    lo, hi = min(model.legal_n), max(model.legal_n)
    assert got == {(lo, "smem"), (lo, "registers"), (hi, "smem"), (hi, "registers")}


# ------------------------------------------------------------------ nvcc / ptxas
# Every wgmma / tcgen05 kernel of sm_90a, sm_100a and sm_103a is assembled by ptxas in
# tests/test_harness_nvcc.py (through mmasim.harness.toolchain, with every other generated kernel).


# ------------------------------------------------------------------ table fixes found by ptxas
def test_blackwell_ultra_refuses_tcgen05_kind_i8_as_the_ptx_target_notes_say():
    # PTX ISA 9.0 tcgen05.mma Target ISA Notes: .kind::i8 on sm_100a / sm_101a (sm_110a) only;
    # ptxas 13.0: "Feature '.kind::i8' not supported on .target 'sm_103a'"
    with pytest.raises(UnsupportedDatapath, match="sm_103a"):
        mmasim.MMA("Blackwell Ultra", "tcgen05.mma.kind::i8.s32.s8.s8")
    assert mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.s8").instruction == "tcgen05.mma.kind::i8.s32.s8.s8"
    assert mmasim.MMA("Blackwell Ultra", "tcgen05.mma.kind::f16.f32.f16.f16").arch == "Blackwell Ultra"


def test_evidence_refuse_must_be_a_string(tmp_path):
    from mmasim.errors import TableError
    from mmasim.registry.build import get_registry
    from mmasim.registry.tables import build_architecture, load_table
    p = tmp_path / "x.toml"
    p.write_text('[architecture]\nname = "X"\ninherits = "Blackwell"\n[[evidence]]\nmatch = {}\n'
                 'status = { kind = "assumed", evidence = "x" }\nrefuse = 3\n')
    with pytest.raises(TableError, match="refuse"):
        build_architecture(load_table(p), get_registry().accumulators)


def test_wgmma_sp_kernels_take_compressed_a_and_one_metadata_register_per_thread():
    model = _model("Hopper", "wgmma.mma_async.sp.k32.f32.f16.f16")
    spec = [s for s in nv.specs(model, n=8) if s.options["a_source"] == "smem"][0]
    a, meta = spec.inputs[0], spec.inputs[3]
    assert a.words == 64 * 16 * 16 // 32                    # 64 rows x K/2 = 16 stored f16
    assert meta.operand == "sparse_metadata" and meta.space == "registers" and meta.words == 1
    assert "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16" in spec.device


def test_wgmma_sp_place_names_the_missing_metadata_layout_or_places_it():
    model = _model("Hopper", "wgmma.mma_async.sp.k32.f32.f16.f16")
    spec = [s for s in nv.specs(model, n=8) if s.options["a_source"] == "smem"][0]
    ops = _random_ops(spec, model, cases=1)
    ops["sparse_metadata"] = np.full((1, 64, 1), 0x44444444, dtype=np.uint64)   # keep elements 0 and 1
    try:
        bufs = nv.place(spec, model, ops)
    except UnsupportedDatapath as exc:
        assert "sparse_metadata" in str(exc)
        return
    # once the metadata layout exists: A's image holds the selected (first two of four) elements
    a = nv.image_operand(bufs[0], 64, 16, ("bytes", 16))
    assert (a == ops["a"][0].reshape(64, 8, 4)[:, :, :2].reshape(64, 16)).all()


# PTX ISA 9.0 §9.7.15.2 "Matrix Shape" (wgmma): floating-point types, dense and sparse, take every
# N = 8..256 in steps of 8; the integer types (.s8 / .u8), dense and sparse, N = 8, 16, 24 and
# 32..256 in steps of 16 (ptxas 13.0 rejects e.g. .m64n40k64 for sparse integer wgmma)
_PTX_N_FLOAT = tuple(range(8, 257, 8))
_PTX_N_INT = (8, 16, 24) + tuple(range(32, 257, 16))


def test_every_hopper_wgmma_accepts_exactly_the_ptx_shape_table_n():
    for s in mmasim.instructions("Hopper"):
        if not str(s).startswith("wgmma."):
            continue
        model = mmasim.MMA("Hopper", str(s))
        want = _PTX_N_INT if model.d_format.integer else _PTX_N_FLOAT
        assert tuple(sorted(model.legal_n)) == want, str(s)


# PTX ISA 9.0 §9.7.16.2.1 Table 39 "Various combinations of .kind and shapes" (tcgen05.mma)
_S8, _S16, _S32 = tuple(range(8, 257, 8)), tuple(range(16, 257, 16)), tuple(range(32, 257, 32))
_I8 = (8, 16, 24) + tuple(range(32, 257, 16))


def _table39(kind, ws, cta2, sparse):
    scaled = kind in ("mxf8f6f4", "mxf4", "mxf4nvf4")
    if ws:
        return (32, 64, 128), ((64, 128) if sparse else (64, 128, 256))
    if cta2:
        return ((256,) if scaled and sparse else (128, 256)), (_S32 if kind == "i8" else _S16)
    return ((128,) if scaled else (64, 128)), (_I8 if kind == "i8" else _S8)


@pytest.mark.parametrize("arch", ["B200", "Blackwell Ultra"])
def test_every_tcgen05_accepts_exactly_the_ptx_table_39_m_and_n(arch):
    for s in mmasim.instructions(arch):
        if not str(s).startswith("tcgen05."):
            continue
        try:
            model = mmasim.MMA(arch, str(s))
        except UnsupportedDatapath:
            continue
        dp = model.datapath
        want = _table39(dp.kind, "ws" in dp.qualifiers, "cta_group::2" in dp.qualifiers, bool(dp.sparse))
        assert (tuple(sorted(model.legal_m)), tuple(sorted(model.legal_n))) == want, str(s)


def test_smem_packing_follows_the_kind():
    # PTX 9.0 §9.7.16.10.4: .kind::mxf4 / .kind::mxf4nvf4 pack two 4-bit codes per byte with no
    # padding; .kind::mxf8f6f4 packs 4- and 6-bit codes contiguously with padding (16 codes per
    # 16 bytes: .b4x16_p64, .b6x16_p32); 8-bit and wider types are whole containers
    f8 = mmasim.MMA("B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e3m2.e2m1.ue8m0")
    assert nv.packing("mxf8f6f4", f8.a_format) == ("padded", 6)
    assert nv.packing("mxf8f6f4", f8.b_format) == ("padded", 4)
    f4 = mmasim.MMA("B200", "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X.block32.f32.e2m1.e2m1.ue8m0")
    assert nv.packing("mxf4", f4.a_format) == ("pair", 4)
    i8 = mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.u8")
    assert nv.packing("i8", i8.a_format) == ("bytes", 8)
    tf = mmasim.MMA("B200", "tcgen05.mma.kind::tf32.f32.tf32.tf32")
    assert nv.packing("tf32", tf.a_format) == ("bytes", 32)


def test_padded_4bit_codes_fill_the_low_8_bytes_of_each_16_byte_chunk():
    # .b4x16_p64: sixteen 4-bit codes (64 bits), then 64 bits of padding
    w = np.arange(16 * 8 * 2, dtype=np.uint64).reshape(8, 32) % 16
    img = nv.operand_image(w, ("padded", 4))[0].view(np.uint8).reshape(-1, 16)
    assert (img[:, 8:] == 0).all()
    assert img[0, 0] == (w[0, 0] | w[0, 1] << 4)


@pytest.mark.parametrize("instruction", [
    "tcgen05.mma.sp.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3",
    "tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e2m3.e5m2.ue8m0",
])
def test_harness_run_on_the_simulated_device_writes_block_scaled_tcgen05_vectors_the_dot_form_reproduces(
        tmp_path, instruction):
    """`mmasim harness run` on the SimulatedDevice (tcgen05 kernels: nv_tcgen05.simulate): every
    recorded dot case's D equals the dot form on its recorded a, b, c, scales and metadata."""
    from mmasim.vectors import files as vectors
    from mmasim.harness import measure as hrun
    got = hrun.measure("B200", tmp_path, cases=1, instructions=[instruction],
                   device=hrun.SimulatedDevice("simulated B200", "10.0"))
    pair = "cta_group::2" in instruction     # one kernel per M: 128 (the 2x2 data path) and 256
    assert len(got["written"]) == 1 + pair and not got["skipped"]
    model = _model("B200", instruction)
    for path in got["written"]:
        v = vectors.load(path)
        assert v.scale_a is not None and v.scale_b is not None
        assert (v.sparse_metadata is not None) == bool(model.datapath.sparse)
        d = model.dot(v.a, v.b, v.c, scale_a=v.scale_a, scale_b=v.scale_b, sparse_metadata=v.sparse_metadata)
        np.testing.assert_array_equal(d, v.d)


@pytest.mark.parametrize("instruction", ["wgmma.mma_async.k16.f16.f16.f16", "wgmma.mma_async.sp.k64.s32.u8.s8.satfinite"])
def test_harness_run_on_the_simulated_device_writes_wgmma_vectors_the_dot_form_reproduces(tmp_path, instruction):
    """`mmasim harness run` on the SimulatedDevice (wgmma kernels: nv_async.simulate, the shared-memory
    images read through the kernels' descriptors): every kernel (N = 8 and 256, A from shared memory
    and from registers) writes a file, and every recorded case's D is the dot form of its a, b, c
    and metadata."""
    from mmasim.vectors import files as vectors
    from mmasim.harness import measure as hrun
    got = hrun.measure("Hopper", tmp_path, cases=1, instructions=[instruction],
                   device=hrun.SimulatedDevice("simulated H200", "9.0"))
    assert len(got["written"]) == 4 and not got["skipped"]
    model = _model("Hopper", instruction)
    for path in got["written"]:
        v = vectors.load(path)
        assert v.provenance["source"] == "simulated"
        assert (v.sparse_metadata is not None) == bool(model.datapath.sparse)
        np.testing.assert_array_equal(model.dot(v.a, v.b, v.c, sparse_metadata=v.sparse_metadata), v.d)


def test_wgmma_simulate_refuses_a_kernel_of_another_family():
    m = _model("B200", "tcgen05.mma.kind::f16.f32.bf16.bf16")
    spec = tc.specs(m)[0]
    with pytest.raises(UnsupportedDatapath, match="not a wgmma.mma_async kernel"):
        nv.simulate(spec, m, [], 1)
