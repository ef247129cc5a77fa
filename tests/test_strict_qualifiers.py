"""Keyword qualifiers are read by their type, strictly, in the API, the CLI and vector files.

The types (docstring of ``mmasim.MMA``): ``a_type`` ... ``scale_type`` are format names and
``kind`` a kind, as strings in any case (``kind::`` optional); ``scale_vec`` is ``"1X"``,
``"2X"`` or ``"4X"`` (any case, ``scale_vec::`` optional); ``block`` an int; ``saturate`` and
``sparse`` bools.  No other value is read as one of them: ``saturate="false"`` is a
:class:`mmasim.QualifierValueError` listing what ``saturate`` takes, never the ``.satfinite``
datapath.  The expected datapaths come from the instruction strings that spell the same
qualifier as a PTX token (``.satfinite``, ``.sp``, ``kind::``), looked up on their own.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mmasim
from mmasim.vectors import files as vectors
from mmasim.cli.main import main
from mmasim.registry.lookup import qualifier_value
from mmasim.vectors.validate import validate_file

SETTINGS = settings(max_examples=150, deadline=None)
S8 = ("A100", "mma.sync.m16n8k32.s32.s8.s8")
FORMATS = ("b1", "bf16", "e2m1", "e2m3", "e3m2", "e4m3", "e4m3fnuz", "e5m2", "e5m2fnuz", "f16", "f32", "f64",
           "s32", "s4", "s8", "tf32", "u4", "u8", "ue4m3", "ue8m0", "xf32")


def _reg():
    return mmasim.get_registry()


def any_case(word: str):
    """Every spelling of ``word`` in mixed ASCII case."""
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda ups: "".join(c.upper() if u else c.lower() for c, u in zip(word, ups)))


def not_a_bool():
    return st.one_of(st.text(max_size=8), st.integers(), st.floats(allow_nan=False), st.just(b"true"),
                     st.sampled_from(["false", "False", "no", "0", "off", "true", "yes", "1", "on", ""]),
                     st.lists(st.booleans(), max_size=2))


# ------------------------------------------------------------------ saturate / sparse: bools only
@pytest.mark.parametrize("spelling", ["false", "False", "no", "0", "off", "true", "", 0, 1, 0.0, "satfinite"])
def test_saturate_given_as_a_string_or_number_is_refused_not_read_by_truthiness(spelling):
    with pytest.raises(mmasim.QualifierValueError, match="saturate takes True or False") as e:
        mmasim.MMA(*S8, saturate=spelling)
    assert isinstance(e.value, mmasim.MMAError) and isinstance(e.value, ValueError)


@pytest.mark.parametrize("spelling", ["false", "no", "0", "off", 0, 1])
def test_sparse_given_as_a_string_or_number_is_refused_not_read_by_truthiness(spelling):
    with pytest.raises(mmasim.QualifierValueError, match="sparse takes True or False"):
        mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16", sparse=spelling)


def test_saturate_and_sparse_bools_pick_what_the_ptx_tokens_pick():
    assert mmasim.MMA(*S8, saturate=True).datapath == mmasim.MMA(S8[0], S8[1] + ".satfinite").datapath
    assert mmasim.MMA(*S8, saturate=False).datapath == mmasim.MMA(*S8).datapath
    assert mmasim.MMA(*S8, saturate=np.bool_(True)).datapath == mmasim.MMA(S8[0], S8[1] + ".satfinite").datapath
    sparse = mmasim.MMA("A100", "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32").datapath
    assert mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16", sparse=True).datapath == sparse
    assert mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16", sparse=False).datapath \
        == mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16").datapath


@SETTINGS
@given(st.sampled_from(["saturate", "sparse"]), not_a_bool())
def test_every_bool_qualifier_value_that_is_not_a_bool_is_refused(key, value):
    with pytest.raises(mmasim.QualifierValueError, match=f"{key} takes True or False"):
        qualifier_value(key, value, _reg())


# ------------------------------------------------------------------ format names and kinds: strings
@SETTINGS
@given(st.sampled_from(["a_type", "b_type", "c_type", "d_type", "scale_type"]),
       st.sampled_from(FORMATS).flatmap(lambda f: st.tuples(st.just(f), any_case(f))))
def test_every_format_spelling_in_any_case_reads_as_the_format(key, pair):
    name, spelling = pair
    assert qualifier_value(key, spelling, _reg()) == name


@SETTINGS
@given(st.sampled_from(["a_type", "b_type", "c_type", "d_type", "scale_type"]),
       st.one_of(st.text(max_size=8), st.integers(), st.booleans(), st.floats(allow_nan=False)))
def test_a_format_qualifier_that_names_no_format_is_refused_listing_the_formats(key, value):
    if isinstance(value, str) and value.isascii() and value.lower() in FORMATS:
        return                                          # an accepted spelling (the test above)
    with pytest.raises(mmasim.QualifierValueError) as e:
        qualifier_value(key, value, _reg())
    assert f"{key} takes a format name" in str(e.value) and "e4m3, e4m3fnuz, e5m2" in str(e.value)


@pytest.mark.parametrize("lookalike", ["\uff45" + "4m3", "e\u0664m3", "E4M3\n", " e4m3", "e4m3 "])
def test_format_names_written_with_non_ascii_or_spaces_are_refused(lookalike):
    with pytest.raises(mmasim.QualifierValueError):
        mmasim.MMA("B200", "tcgen05.mma.kind::f8f6f4", a_type=lookalike, b_type="e2m1", d_type="f16")


@SETTINGS
@given(st.sampled_from(["tf32", "f16", "f8f6f4", "i8", "mxf8f6f4", "mxf4", "mxf4nvf4"])
       .flatmap(lambda k: st.tuples(st.just(k), st.sampled_from(["", "kind::", "KIND::"]), any_case(k))))
def test_every_kind_spelling_reads_as_the_kind(parts):
    kind, prefix, spelling = parts
    assert qualifier_value("kind", prefix + spelling, _reg()) == kind


@SETTINGS
@given(st.one_of(st.text(max_size=10), st.integers(), st.booleans()))
def test_a_kind_that_is_no_kind_is_refused(value):
    known = {"tf32", "f16", "f8f6f4", "i8", "mxf8f6f4", "mxf4", "mxf4nvf4"}
    if isinstance(value, str) and value.isascii() and value.lower().removeprefix("kind::") in known:
        return
    with pytest.raises(mmasim.QualifierValueError, match="kind takes a kind"):
        qualifier_value("kind", value, _reg())


def test_the_kind_keyword_picks_what_the_kind_token_picks():
    assert mmasim.MMA("B200", "tcgen05.mma", kind="kind::TF32").datapath \
        == mmasim.MMA("B200", "tcgen05.mma.kind::tf32").datapath


# ------------------------------------------------------------------ scale_vec and block
@SETTINGS
@given(st.sampled_from("124"), st.sampled_from(["", "scale_vec::", "SCALE_VEC::", "Scale_Vec::"]),
       st.sampled_from("xX"))
def test_every_scale_vec_spelling_reads_as_its_vector_size(n, prefix, x):
    assert qualifier_value("scale_vec", f"{prefix}{n}{x}", _reg()) == f"{n}X"


@SETTINGS
@given(st.one_of(st.text(max_size=12), st.integers(), st.booleans(), st.floats(allow_nan=False)))
def test_a_scale_vec_that_is_not_1x_2x_or_4x_is_refused(value):
    if isinstance(value, str) and value.lower().removeprefix("scale_vec::") in ("1x", "2x", "4x"):
        return
    with pytest.raises(mmasim.QualifierValueError, match="scale_vec takes '1X', '2X' or '4X'"):
        qualifier_value("scale_vec", value, _reg())


def test_scale_vec_and_block_keywords_pick_what_the_tokens_pick():
    token = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3").datapath
    assert mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.f32.e2m1.e2m1", scale_vec="4x", block=16,
                      scale_type="UE4M3").datapath == token
    assert mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.f32.e2m1.e2m1", scale_vec="4X", block=np.int64(16),
                      scale_type="ue4m3").datapath == token


@SETTINGS
@given(st.one_of(st.integers(), st.text(max_size=4), st.booleans(), st.floats(allow_nan=False),
                 st.sampled_from(["16", "32", 16.0, 32.0, True])))
def test_a_block_that_is_not_an_int_block_size_is_refused(value):
    if type(value) is int and value in (16, 32):
        assert qualifier_value("block", value, _reg()) == value
        return
    with pytest.raises(mmasim.QualifierValueError, match="block takes an int.*16, 32"):
        qualifier_value("block", value, _reg())


def test_none_means_not_given():
    assert mmasim.MMA(*S8, saturate=None, block=None).datapath == mmasim.MMA(*S8).datapath


# ------------------------------------------------------------------ vector files and the CLI
def _file(tmp_path, qualifiers):
    k = 32
    return vectors.save(tmp_path / "q.npz", arch=S8[0], instruction=S8[1], qualifiers=qualifiers,
                        a=np.zeros((1, k)), b=np.zeros((1, k)), c=np.zeros(1), d=np.zeros(1),
                        provenance={"source": "hand-derived", "reference": "0 + sum of zero products is 0"})


@pytest.mark.parametrize("value", ["false", "no", 0, "0", "off"])
def test_vector_file_qualifiers_are_read_by_type_too(tmp_path, value):
    vf = vectors.load(_file(tmp_path, {"saturate": value}))
    with pytest.raises(mmasim.QualifierValueError, match="saturate"):
        vectors.model_for(vf)
    row = validate_file(vf.path)
    assert not row.ok and "QualifierValueError" in row.error and "True or False" in row.error


def test_vector_file_bool_qualifier_picks_the_satfinite_datapath(tmp_path):
    vf = vectors.load(_file(tmp_path, {"saturate": True}))
    assert vectors.model_for(vf).datapath == mmasim.MMA(S8[0], S8[1] + ".satfinite").datapath
    assert validate_file(vf.path).ok        # 0 + 0 = 0 either way


def test_cli_reports_a_vector_file_qualifier_of_the_wrong_type(tmp_path, capsys):
    path = _file(tmp_path, {"saturate": "false"})
    assert main(["validate", "-q", "--json", str(path)]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert "saturate='false' is not accepted" in json.dumps(doc)


def test_cli_type_flags_are_read_by_the_same_rule(capsys):
    assert main(["explain", "B200", "tcgen05.mma.kind::f8f6f4", "--a-type", "E4M3", "--b-type", "e2m1",
                 "--d-type", "F16"]) == 0
    capsys.readouterr()
    assert main(["explain", "B200", "tcgen05.mma.kind::f8f6f4", "--a-type", "e4m3x", "--b-type", "e2m1",
                 "--d-type", "f16"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mmasim: error: a_type='e4m3x' is not accepted") and "e2m1" in err and err.count("\n") == 1
