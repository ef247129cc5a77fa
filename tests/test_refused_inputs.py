"""Inputs that must be refused, never taken and reinterpreted.

- ``Model.decode`` checks its words as ``Model.dot`` does: a word outside the container, a
  negative one, a float or a bool is an error (the container's own signed dtype is two's
  complement, as in ``dot``).
- numpy masked arrays are refused wherever arrays come in: a masked element has no word.
- ``layout(..., alayout=/blayout=)``: a pair the instruction does not take (PTX: anything but
  ``.row.col`` only for the f16 m8n8k4), one that contradicts the instruction string, or one
  for a family without ``.row/.col`` is refused; the string's own pair is honoured.
- instruction strings are printable ASCII without spaces or line breaks: a full-width or
  Arabic-Indic digit, the Kelvin sign for ``k`` or a newline before the end of a token never
  resolves (PTX ISA: instruction qualifiers are ASCII identifiers and decimal shapes).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import mmasim
from mmasim import placement
from mmasim.cli.main import main
from mmasim.harness.generate import specs_for

SETTINGS = settings(max_examples=200, deadline=None)
F16 = ("A100", "mma.sync.m16n8k16.f32.f16.f16")


def _f16():
    return mmasim.MMA(*F16)


# ------------------------------------------------------------------ Model.decode
@SETTINGS
@given(st.sampled_from(["a", "b", "c", "d"]), st.one_of(st.integers(max_value=-1), st.integers(min_value=1 << 16)))
def test_decode_refuses_words_outside_the_container_as_dot_does(operand, word):
    m = _f16()
    if 0 <= word < 1 << m.format_of(operand).container_bits:
        return                                          # a 32-bit C / D word
    with pytest.raises(mmasim.WordRangeError):
        m.decode(operand, [word])
    if operand in "abc":                                # dot refuses the same word in the same operand
        ops = {"a": [0] * 16, "b": [0] * 16, "c": 0}
        ops[operand] = word if operand == "c" else [word] * 16
        with pytest.raises(mmasim.WordRangeError):
            m.dot(ops["a"], ops["b"], ops["c"])


@pytest.mark.parametrize("words", [[1.0], [0.5, 1.5], np.array([1.0], np.float16), np.float32(2.0)])
def test_decode_refuses_float_words(words):
    with pytest.raises(mmasim.DtypeError, match="decode takes container words"):
        _f16().decode("a", words)


@pytest.mark.parametrize("words", [[True], np.array([True, False]), True])
def test_decode_refuses_bool_words(words):
    with pytest.raises(mmasim.DtypeError, match="bool"):
        _f16().decode("a", words)


def test_decode_reads_the_containers_signed_dtype_as_twos_complement_as_dot_does():
    s8 = mmasim.MMA("A100", "mma.sync.m16n8k32.s32.s8.s8")
    assert s8.decode("a", np.array([-1, -128], np.int8)).m.tolist() == s8.decode("a", [0xFF, 0x80]).m.tolist()
    assert s8.decode("a", [0xFF]).sign.tolist() == [1]
    with pytest.raises(mmasim.WordRangeError):
        s8.decode("a", np.array([-1], np.int16))         # not the container's dtype: a negative word


def test_decode_still_decodes_plain_words():
    dec = _f16().decode("a", np.array([0x3C00, 0xC000], np.uint16))     # 1.0 and -2.0
    assert dec.sign.tolist() == [0, 1]
    values = [(-1) ** s * int(m) * 2.0 ** int(q) for s, m, q in zip(dec.sign, dec.m, dec.q)]
    assert values == [1.0, -2.0]


# ------------------------------------------------------------------ masked arrays
def _masked(x):
    return np.ma.masked_array(x, mask=np.zeros(np.shape(x), bool))


MASKED_CALLS = {
    "dot a": lambda m: m.dot(_masked(np.zeros(16, np.uint16)), np.zeros(16, np.uint16), 0),
    "dot b": lambda m: m.dot(np.zeros(16, np.uint16), b=_masked(np.zeros(16, np.uint16)), c=0),
    "dot c": lambda m: m.dot(np.zeros(16, np.uint16), np.zeros(16, np.uint16), _masked(np.zeros((), np.uint32))),
    "matrix form": lambda m: m(_masked(np.zeros((16, 16), np.uint16)), np.zeros((16, 8), np.uint16),
                               np.zeros((16, 8), np.uint32)),
    "gemm": lambda m: mmasim.gemm(np.zeros((16, 16), np.uint16), _masked(np.zeros((16, 8), np.uint16)),
                                  np.zeros((16, 8), np.uint32), model=m),
    "fragments": lambda m: m.fragments("a", _masked(np.zeros((16, 16), np.uint16))),
    "unfragment": lambda m: m.unfragment("a", _masked(np.zeros((32, 4), np.uint32))),
    "layout pack": lambda m: m.layout("a").pack(_masked(np.zeros((16, 16), np.uint16))),
    "operand_words": lambda m: m.operand_words("a", _masked(np.zeros(16, np.uint16))),
    "decode": lambda m: m.decode("a", _masked(np.zeros(4, np.uint16))),
}


@pytest.mark.parametrize("call", sorted(MASKED_CALLS))
def test_masked_arrays_are_refused_not_computed_without_the_mask(call):
    with pytest.raises(mmasim.DtypeError, match="masked array"):
        MASKED_CALLS[call](_f16())


def test_masked_sparse_metadata_is_refused():
    m = mmasim.MMA("A100", "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    md = np.full((16, 1), 0x4444, np.uint32)          # selector 0x4: elements 0 and 1 of each chunk of 4
    with pytest.raises(mmasim.DtypeError, match="masked array"):
        m.dot(np.zeros(16, np.uint16), np.zeros(16, np.uint16), 0, sparse_metadata=_masked(md[0]))
    with pytest.raises(mmasim.DtypeError, match="masked array"):
        placement.compress(m.placement, np.zeros((16, 16), np.uint16), _masked(md))


def test_masked_arrays_are_refused_by_the_mma_sim_drop_in():
    from mmasim.nv_ptx.sim import MMA
    op = MMA("Ampere", "m16n8k16.f32.f16.f16.f32")
    A = _masked(np.zeros((16, 16), np.float16))
    with pytest.raises(mmasim.DtypeError, match="masked array"):
        op(A, np.zeros((16, 8), np.float16), np.zeros((16, 8), np.float32))
    with pytest.raises(mmasim.DtypeError, match="masked array"):
        op.dpa(np.zeros(16, np.float16), _masked(np.zeros(16, np.float16)), np.float32(0))


# ------------------------------------------------------------------ .row / .col
def _quad_pair(lane):
    return (lane % 16) // 4


def test_layout_refuses_a_col_layout_the_instruction_does_not_take():
    with pytest.raises(mmasim.OperandError, match=r"only \.row\.col"):
        _f16().layout("a", alayout="col")
    with pytest.raises(mmasim.OperandError, match=r"only \.row\.col"):
        _f16().fragments("b", np.zeros((16, 8), np.uint16), blayout="row")
    with pytest.raises(mmasim.OperandError, match="takes no .row / .col"):
        mmasim.MMA("H100", "wgmma.mma_async.m64n8k16.f32.f16.f16").layout("a", alayout="row")
    assert _f16().layout("a", alayout="row", blayout="col").coords(5, 1) == _f16().layout("a").coords(5, 1)


def test_layout_honours_the_instruction_strings_row_col_pair():
    # PTX ISA 9.0 §9.7.14.5.1, Figure 47 (A .col): row = i + 4 * (lane >= 16), col = lane % 4 within
    # the quad pair's 8x4 block; Figure 48 (B .row): row = lane % 4, col = i + 4 * (lane >= 16)
    named = mmasim.MMA("V100", "mma.sync.aligned.m8n8k4.col.row.f32.f16.f16.f32")
    plain = mmasim.MMA("V100", "mma.sync.m8n8k4.f32.f16.f16")
    for lane in range(32):
        for i in range(4):
            a = (8 * _quad_pair(lane) + i + (4 if lane >= 16 else 0), lane % 4)
            b = (4 * _quad_pair(lane) + lane % 4, i + (4 if lane >= 16 else 0))
            assert named.layout("a").coords(lane, i) == a == plain.layout("a", alayout="col").coords(lane, i)
            assert named.layout("b").coords(lane, i) == b == plain.layout("b", blayout="row").coords(lane, i)


def test_layout_refuses_a_pair_that_contradicts_the_instruction_string():
    named = mmasim.MMA("V100", "mma.sync.aligned.m8n8k4.col.row.f32.f16.f16.f32")
    with pytest.raises(mmasim.OperandError, match=r"alayout='row' contradicts the instruction string's \.col\.row"):
        named.layout("a", alayout="row")
    named.layout("a", alayout="col", blayout="row")      # the string's own pair, spelt out


def test_cli_layout_refuses_an_alayout_the_instruction_does_not_take(capsys):
    assert main(["layout", *F16, "--alayout", "col"]) == 1
    err = capsys.readouterr().err
    assert "only .row.col" in err and err.count("\n") == 1
    assert main(["layout", "V100", "mma.sync.m8n8k4.f32.f16.f16", "--alayout", "col", "--json"]) == 0


def test_harness_does_not_generate_a_col_row_kernel_it_would_place_as_row_col():
    specs, skipped = specs_for("Volta", ["mma.sync.aligned.m8n8k4.col.row.f32.f16.f16.f32"])
    assert not specs and "row.col" in skipped[0][1]


# ------------------------------------------------------------------ instruction strings: ASCII only
VALID = [("A100", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"), ("A100", "m16n8k16.f32.f16.f16.f32"),
         ("B200", "tcgen05.mma.kind::tf32"), ("B200", "tcgen05.kind::mxf4nvf4.4X"),
         ("MI300X", "v_mfma_f32_32x32x8_f16"), ("H100", "wgmma.mma_async.m64n8k16.f32.f16.f16")]


@pytest.mark.parametrize("text", ["mma.sync.m16n8k16\n.f32.f16.f16", "mma.sync.m16n8k16.f32.f16.f16\n",
                                  "mma.sync.m16n8k\uff116.f32.f16.f16", "mma.sync.m16n8k\u06616.f32.f16.f16",
                                  "mma.sync.m16n8\u212a16.f32.f16.f16", "mma.sync.m\u0661\u0666n8k16.f32.f16.f16",
                                  "mma.sync.m16n8k16.f32.f16.f16\t", "mma.sync.m16n8k16 .f32.f16.f16",
                                  "mma.sync.m16n8k16.f32.f16.f1\u0666"])
def test_lookalike_instruction_strings_never_resolve(text):
    with pytest.raises(mmasim.UnknownInstruction, match="printable ASCII"):
        mmasim.MMA("A100", text)


def test_shapes_are_ascii_decimal_without_leading_zeros():
    for text in ("mma.sync.m016n8k16.f32.f16.f16", "mma.sync.m16n8k016.f32.f16.f16"):
        with pytest.raises(mmasim.UnknownInstruction, match="cannot read"):
            mmasim.MMA("A100", text)


def test_spaces_around_an_instruction_are_dropped():
    assert mmasim.MMA("A100", "  m16n8k16.f32.f16.f16.f32 ").datapath == mmasim.MMA(*F16).datapath


def test_architecture_names_are_ascii():
    with pytest.raises(mmasim.UnknownArchitecture, match="ASCII"):
        mmasim.MMA("RTX Blac\u212awell", "m16n8k16.f32.f16.f16.f32")


def _spoiled(valid: str, at: int, ch: str, replace: bool) -> str:
    at %= len(valid) + 1
    return valid[:at] + ch + valid[at + (1 if replace else 0):]


@SETTINGS
@given(st.sampled_from(VALID), st.integers(0, 80), st.booleans(),
       st.one_of(st.characters(min_codepoint=0x80), st.characters(max_codepoint=0x20),
                 st.sampled_from(["\x7f", "\n", "\u212a", "\uff11", "\u0661", "\u0966", "\u00a0", "\u2028"])))
def test_a_valid_instruction_with_any_non_ascii_or_blank_inside_never_resolves(valid, at, replace, ch):
    arch, text = valid
    spoiled = _spoiled(text, at, ch, replace)
    if spoiled.strip(" ") != spoiled and spoiled.strip(" ") == text:
        return                                            # only spaces around it: the same string
    with pytest.raises(mmasim.UnknownInstruction, match="printable ASCII"):
        mmasim.MMA(arch, spoiled)


@SETTINGS
@given(st.sampled_from(["A100", "B200", "MI300X"]), st.text(max_size=30))
def test_arbitrary_text_resolves_only_when_it_is_printable_ascii(arch, text):
    try:
        mmasim.MMA(arch, text)
    except mmasim.MMAError:
        return
    body = text.strip(" ")
    assert body and all("!" <= ch <= "~" for ch in body)
