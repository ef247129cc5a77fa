"""Instruction strings: every token understood or rejected, one ambiguity rule, defaults
only where a document defines a short form, and labels by shape and device.

PTX facts used here (PTX ISA, mma and tcgen05.mma):
- mma.sync: ``.alayout.blayout`` may each be ``.row`` or ``.col`` only for the f16
  ``m8n8k4``; every other shape is written ``.row.col``.
- mma with block scaling: without ``.scale_vec_size``, ``kind::mxf4`` means 2X and
  ``kind::mxf8f6f4`` 1X; ``kind::mxf4nvf4`` must name it.
- tcgen05.mma: ``.cta_group::1`` / ``.cta_group::2``; ``.collector::a::{discard, fill,
  use, lastuse}`` are cache hints for A; ``.ws`` is the weight-stationary variant. Its
  types and its scale type live in the instruction descriptor, not in the string.
"""

import pytest

import mmasim
from mmasim.registry.datapath import Datapath, Status
from mmasim.errors import TableError
from mmasim.registry.tables import build_architecture, inherit


def same(arch, *instructions):
    return {mmasim.MMA(arch, i).datapath for i in instructions}


# ------------------------------------------------------------ every token is read
@pytest.mark.parametrize("instruction,token", [
    ("tcgen05.mma.kind::tf32.banana", "banana"),
    ("tcgen05.mma.cta_group::7.kind::tf32", "cta_group::7"),
    ("tcgen05.mma.kind::tf32.f32.tf32.tf32.rn", "rn"),
    ("tcgen05.mma.collector::b0::fill.kind::tf32", "collector::b0::fill"),   # a .ws collector
])
def test_unread_token_fails_naming_it(instruction, token):
    with pytest.raises(mmasim.UnknownInstruction, match=f"'{token}'"):
        mmasim.MMA("B200", instruction)


def test_stray_dot_is_not_silently_skipped():
    with pytest.raises(mmasim.UnknownInstruction, match="empty qualifier"):
        mmasim.MMA("B200", "tcgen05.mma..kind::tf32")


@pytest.mark.parametrize("arch,instruction,first,second", [
    ("B200", "tcgen05.mma.kind::f16.kind::tf32", "kind::f16", "kind::tf32"),
    ("A100", "mma.sync.aligned.m16n8k8.m16n8k16.row.col.f32.f16.f16.f32", "m16n8k8", "m16n8k16"),
    ("RTX 5090", "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue8m0.ue4m3", "ue8m0", "ue4m3"),
    ("RTX 5090", "m16n8k64.kind::mxf4nvf4.scale_vec::4X.4X.f32.e2m1.e2m1.f32.ue4m3", "scale_vec::4X", "4X"),
    ("A100", "m16n8k16.k16.f32.f16.f16.f32", "m16n8k16", "k16"),
])
def test_two_tokens_for_one_field_fail_naming_both(arch, instruction, first, second):
    with pytest.raises(mmasim.UnknownInstruction) as e:
        mmasim.MMA(arch, instruction)
    assert f"'{first}'" in str(e.value) and f"'{second}'" in str(e.value)


def test_repeated_satfinite_is_refused():
    with pytest.raises(mmasim.UnknownInstruction, match="'satfinite' is repeated"):
        mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.s8.satfinite.satfinite")


def test_ptx_layouts_row_col_only_except_the_f16_m8n8k4():
    for bad in ("row.row.col.col", "row", "col.row", "row.row", "col.col"):
        with pytest.raises(mmasim.UnknownInstruction, match="row|col"):
            mmasim.MMA("A100", f"mma.sync.aligned.m16n8k16.{bad}.f32.f16.f16.f32")
    with pytest.raises(mmasim.UnknownInstruction, match="col.col"):
        mmasim.MMA("A100", "mma.sync.aligned.m8n8k4.col.col.f64.f64.f64.f64")    # f64 m8n8k4: .row.col
    # the f16 m8n8k4 takes every layout pair, and the layout does not change the arithmetic
    spellings = [f"mma.sync.aligned.m8n8k4.{a}.{b}.f32.f16.f16.f32" for a in ("row", "col") for b in ("row", "col")]
    assert len(same("V100", "m8n8k4.f32.f16.f16.f32", *spellings)) == 1


def test_layout_sync_and_aligned_tokens_belong_to_their_families():
    for instruction in ("tcgen05.mma.kind::tf32.row.col", "tcgen05.mma.sync.kind::tf32",
                        "tcgen05.mma.aligned.kind::tf32"):
        with pytest.raises(mmasim.UnknownInstruction):
            mmasim.MMA("B200", instruction)
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA("H100", "wgmma.mma_async.sync.aligned.m64n8k16.row.col.f32.f16.f16")   # wgmma has no layouts
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA("MI300X", "v_mfma.sync.m32n32k8.f32.f16.f16")


def test_cta_group_1_and_collector_hints_name_the_modelled_datapath():
    plain = "tcgen05.mma.kind::tf32"
    hinted = [f"tcgen05.mma.cta_group::1.kind::tf32.collector::a::{c}" for c in ("discard", "fill", "use", "lastuse")]
    assert len(same("B200", plain, "tcgen05.mma.cta_group::1.kind::tf32", *hinted)) == 1


@pytest.mark.parametrize("instruction,qualifier,ms", [
    ("tcgen05.mma.cta_group::2.kind::tf32", "cta_group::2", (128, 256)),
    ("tcgen05.mma.ws.kind::tf32", "ws", (32, 64, 128)),
    ("tcgen05.mma.ws.cta_group::1.kind::f16.f32.bf16.bf16", "ws", (32, 64, 128)),
])
def test_cta_group_2_and_ws_name_their_own_assumed_datapaths(instruction, qualifier, ms):
    """PTX: cta_group::2 runs on a CTA pair (M = 128 / 256), .ws is weight-stationary
    (M = 32 / 64 / 128); neither was measured, so each is its own datapath labelled assumed
    (never hardware), with the cta_group::1 form's arithmetic."""
    model = mmasim.MMA("B200", instruction)
    dp = model.datapath
    assert dp.qualifiers == (qualifier,) and dp.m == ms
    assert dp.status.kind == "assumed" and "cta_group::1" in dp.status.evidence
    plain = mmasim.MMA("B200", instruction.replace(f".{qualifier}", "").replace(".cta_group::1", ""))
    assert (dp.accumulator, dp.parameters, dp.rounding, dp.k) == (
        plain.datapath.accumulator, plain.datapath.parameters, plain.datapath.rounding, plain.datapath.k)
    assert plain.datapath.qualifiers == ()


def test_ws_with_cta_group_2_is_rejected():
    """PTX defines tcgen05.mma.ws for cta_group::1 only."""
    with pytest.raises(mmasim.UnknownInstruction, match="cta_group::1 only"):
        mmasim.MMA("B200", "tcgen05.mma.ws.cta_group::2.kind::tf32")


def test_block_scaled_kinds_have_no_ws_form():
    """PTX's .ws forms take no block scaling."""
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA("B200", "tcgen05.mma.ws.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.ue8m0")
    assert mmasim.MMA("B200", "tcgen05.mma.cta_group::2.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.ue8m0"
                      ).datapath.m == (128, 256)


def test_block_scale_token_only_for_block_scaled_kinds():
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA("B200", "tcgen05.mma.kind::tf32.block_scale")
    scaled = "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e4m3.ue8m0"
    assert same("B200", scaled) == same("B200", scaled.replace("block_scale.", ""))


# ------------------------------------------------------------ one ambiguity rule
@pytest.mark.parametrize("arch,instruction,op", [
    ("B200", "mma", "mma.sync"),
    ("B200", "tcgen05.mma", "tcgen05.mma"),
    ("CDNA2", "v_mfma", "v_mfma"),
    ("A100", "mma", "mma.sync"),
    ("B200", "tcgen05.mma.kind::f8f6f4", "tcgen05.mma"),
])
def test_string_that_leaves_the_datapath_open_is_ambiguous_everywhere(arch, instruction, op):
    with pytest.raises(mmasim.AmbiguousInstruction) as e:
        mmasim.MMA(arch, instruction)
    assert len(e.value.candidates) > 1 and all(c.startswith(op) for c in e.value.candidates)


def test_design_card_nvfp4_short_form_defaults_only_the_scale_type():
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    assert (m.datapath.scale, m.datapath.block, m.datapath.scale_vec) == ("ue4m3", 16, "4X")
    assert [(q, v) for q, v, _ in m.resolution.defaulted] == [("scale_type", "ue4m3")]
    assert "defaulted: scale_type=ue4m3 (short form of kind::mxf4nvf4.4X" in m.describe()
    named = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X", scale_type="ue8m0")
    assert named.datapath.scale == "ue8m0" and named.resolution.defaulted == ()
    assert "defaulted" not in named.describe()
    with pytest.raises(mmasim.AmbiguousInstruction):        # PTX: kind::mxf4nvf4 must name its scale_vec
        mmasim.MMA("B200", "tcgen05.mma.kind::mxf4nvf4")


def test_ptx_scale_vec_defaults_of_mma_block_scaling():
    mx4 = mmasim.MMA("RTX 5090", "m16n8k64.kind::mxf4.f32.e2m1.e2m1.f32.ue8m0")
    assert mx4.datapath.scale_vec == "2X" and [(q, v) for q, v, _ in mx4.resolution.defaulted] == [("scale_vec", "2X")]
    mx8 = mmasim.MMA("RTX 5090", "m16n8k32.kind::mxf8f6f4.f32.e4m3.e4m3.f32.ue8m0")
    assert mx8.datapath.scale_vec == "1X" and [(q, v) for q, v, _ in mx8.resolution.defaulted] == [("scale_vec", "1X")]
    assert "defaulted: scale_vec=1X" in mx8.describe()
    explicit = mmasim.MMA("RTX 5090", "m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0")
    assert explicit.datapath == mx4.datapath and explicit.resolution.defaulted == ()
    with pytest.raises(mmasim.AmbiguousInstruction):
        mmasim.MMA("RTX 5090", "m16n8k64.kind::mxf4nvf4.f32.e2m1.e2m1.f32")


def test_three_type_spelling_means_c_equals_d_and_says_so():
    m = mmasim.MMA("Volta", "m8n8k4.f32.f16.f16")
    assert m.datapath.c == "f32"
    assert [(q, v) for q, v, _ in m.resolution.defaulted] == [("c_type", "f32")]
    assert mmasim.MMA("Volta", "m8n8k4.f32.f16.f16.f16").resolution.defaulted == ()
    with pytest.raises(mmasim.AmbiguousInstruction):        # keywords without c_type leave C open
        mmasim.MMA("Volta", "mma.sync.m8n8k4", a_type="f16", b_type="f16", d_type="f32")


def test_missing_optional_kind_means_the_kindless_instruction():
    assert mmasim.MMA("RTX 5090", "m16n8k32.f32.e4m3.e4m3.f32").datapath.kind is None
    plain = mmasim.MMA("CDNA2", "v_mfma.m32n32k4.f32.bf16.bf16")
    assert plain.datapath == mmasim.MMA("CDNA2", "f32_32x32x4bf16").datapath
    assert plain.resolution.defaulted == ()
    with pytest.raises(mmasim.UnknownInstruction):          # PTX: e2m1 needs kind::f8f6f4
        mmasim.MMA("RTX 5090", "m16n8k32.f32.e2m1.e2m1.f32")


# ------------------------------------------------------------ case and suggestions
def test_kinds_types_and_shapes_match_without_case():
    assert same("B200", "tcgen05.mma.kind::TF32", "tcgen05.mma.kind::tf32", "TCGEN05.MMA.KIND::TF32")
    assert len(same("A100", "M16N8K16.F32.BF16.BF16.F32", "m16n8k16.f32.bf16.bf16.f32")) == 1
    assert len({mmasim.MMA("B200", "tcgen05.mma.kind::f8f6f4", a_type=a, b_type="e2m1", d_type="F16").datapath
                for a in ("e4m3", "E4M3")}) == 1
    assert mmasim.MMA("B200", "tcgen05.mma", kind="TF32").datapath.kind == "tf32"


def test_close_matches_by_normalised_spelling():
    with pytest.raises(mmasim.UnknownInstruction, match="kind::tf32"):
        mmasim.MMA("B200", "tcgen05.mma.kind::TF33")
    with pytest.raises(mmasim.UnknownInstruction, match=r"tcgen05\.mma\.kind::tf32\.f32\.tf32\.tf32"):
        mmasim.MMA("B200", "TCGEN05.MMA.KIND::TF32.F32.TF32.TF33")


def test_unknown_keyword_qualifier_is_an_mmaerror_listing_the_accepted_ones():
    with pytest.raises(mmasim.UnknownQualifier) as e:
        mmasim.MMA("B200", "tcgen05.mma.kind::tf32", banana=1)
    assert isinstance(e.value, mmasim.MMAError) and isinstance(e.value, TypeError)
    assert "banana" in str(e.value) and all(q in str(e.value) for q in ("a_type", "d_type", "scale_type"))
    with pytest.raises(mmasim.UnknownQualifier, match="a_type"):
        mmasim.MMA("B200", "tcgen05.mma.kind::tf32", atype="tf32")


# ------------------------------------------------------------ labels by device and shape
@pytest.mark.parametrize("alias", ["B300", "GB300", "sm_103", "sm_103a"])
def test_b300_is_blackwell_ultra_with_b200_arithmetic_assumed(alias):
    assert mmasim.aliases(alias)[0] == "Blackwell Ultra"
    ultra, b200 = mmasim.datapaths(alias), mmasim.datapaths("B200")
    assert len(ultra) == len(b200)
    assert all(u.status.kind == "assumed" and "not measured on a B300" in u.status.evidence for u in ultra)
    strip = lambda dp: (dp.op, dp.kind, dp.a, dp.b, dp.c, dp.d, dp.k, dp.accumulator, dp.params, dp.rounding,
                        dp.scale, dp.block, dp.sparse, dp.saturate, dp.m, dp.n)
    assert [strip(u) for u in ultra] == [strip(b) for b in b200]
    m = mmasim.MMA(alias, "m64n8k8.kind::tf32.f32.tf32.tf32")       # the shape measured on the B200
    assert m.status.kind == "assumed" and m.arch == "Blackwell Ultra"
    assert "B300" not in mmasim.aliases("B200")


def test_b200_hardware_label_holds_only_at_the_measured_shapes():
    # the probe harness released with the B200 write-up runs its million-case suites at
    # m64n8 (unscaled, integer) and m128n8 (block-scaled)
    assert mmasim.MMA("B200", "m64n8k8.kind::tf32.f32.tf32.tf32").status.kind == "hardware"
    wide = mmasim.MMA("B200", "m128n256k8.kind::tf32.f32.tf32.tf32")
    assert wide.status.kind == "assumed" and "M=128, N=256" in wide.describe()
    assert mmasim.MMA("B200", "m128n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0").status.kind == "hardware"
    assert mmasim.MMA("B200", "m128n16k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0").status.kind == "assumed"
    assert mmasim.MMA("B200", "m64n8k32.kind::i8.s32.s8.s8").status.kind == "hardware"
    assert mmasim.MMA("B200", "m128n8k32.kind::i8.s32.s8.s8").status.kind == "assumed"
    # the mixed-format representatives ran at a shape nobody names: no named shape is hardware
    assert mmasim.MMA("B200", "m64n8k32.kind::f8f6f4.f32.e4m3.e2m1").status.kind == "assumed"


def test_shapeless_lookup_says_which_shapes_carry_the_label():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::tf32")
    assert m.status.kind == "hardware"
    assert "validation: hardware, B200, for M=64, N=8 only; other shapes assumed" in m.describe()
    mixed = mmasim.MMA("B200", "tcgen05.mma.kind::f8f6f4", a_type="e4m3", b_type="e2m1", d_type="f32")
    assert "source does not name" in mixed.describe()


def test_status_at_shape():
    s = Status("hardware", evidence="x", device="D", shapes=[(64, 8)])
    assert s.at_shape(64, 8).kind == "hardware" and s.at_shape(64, 16).kind == "assumed"
    assert s.at_shape(None, None) is s
    assert Status("peer").at_shape(128, 256).kind == "peer"       # no shape restriction declared


# ------------------------------------------------------------ tables
_TABLE = {
    "architecture": {"name": "T"},
    "datapath": [{"op": "mma.sync", "a": "f16", "b": "f16", "d": "f32", "k": 16, "accumulator": "window",
                  "rounding": "rz-f32", "params": {"F": 25, "zeros": -133}, "m": [16], "n": [8]}],
}


def test_tables_reject_a_whole_datapath_default():
    bad = {**_TABLE, "datapath": [{**_TABLE["datapath"][0], "default": True}]}
    with pytest.raises(TableError, match="default_for"):
        build_architecture(bad)
    worse = {**_TABLE, "datapath": [{**_TABLE["datapath"][0], "default_for": {"a": "because"}}]}
    with pytest.raises(TableError, match="default_for"):
        build_architecture(worse)


def test_inheriting_table_relabels_every_datapath_or_is_refused():
    parent = build_architecture(_TABLE)
    child = build_architecture({"architecture": {"name": "U", "inherits": "T"},
                                "evidence": [{"match": {}, "status": {"kind": "assumed", "evidence": "not measured"}}]})
    got = inherit(child, parent)
    assert [dp.arch for dp in got.datapaths] == ["U"] and got.datapaths[0].status.kind == "assumed"
    unlabelled = build_architecture({"architecture": {"name": "U", "inherits": "T"}})
    with pytest.raises(TableError, match="no \\[\\[evidence\\]\\] rule"):
        inherit(unlabelled, parent)
    assert isinstance(got.datapaths[0], Datapath)


@pytest.mark.parametrize("token", ["scale_input_d", "scale-input-d"])
def test_scale_input_d_is_refused_by_name(token):
    """PTX: tcgen05.mma's optional scale-input-d operand makes D = A*B + D * 2^-scale-input-d
    (kind::f16 / kind::tf32); how the scaled D enters the window was not measured, so a
    lookup that names it is refused, never silently read as the unscaled instruction."""
    with pytest.raises(mmasim.UnsupportedDatapath, match="scale-input-d"):
        mmasim.MMA("B200", f"tcgen05.mma.cta_group::1.kind::f16.{token}", a_type="f16", d_type="f32")
