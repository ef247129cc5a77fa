"""One reader of words written as text: hex digits with an optional ``0x`` / ``0X``, nothing else.

Python's ``int(text, 0)`` reads ``0B11`` as binary 3 and refuses the hex word ``0B``; ``int``
reads ``1_0``, ``+1`` and full-width or Arabic-Indic digits.  The command line reads none of
those: ``0B11`` is the word 0x0B11, ``0B`` is 0x0B, and the others are usage errors.  Counts
(``--cases``, ``--seed``, the layout selectors, ``MMASIM_THREADS``) are ASCII decimal digits.
The oracle below is the rule as docs/user-guide.md states it, written out character by
character, not the reader's own pattern.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings, strategies as st

import mmasim
from mmasim.cli.main import main
from mmasim.operands.text import parse_count, parse_word, parse_words

SETTINGS = settings(max_examples=300, deadline=None)
HEX = "0123456789abcdefABCDEF"
F16 = ("A100", "mma.sync.m16n8k16.f32.f16.f16")     # K = 16, f16 A/B, f32 C/D


def accepted(text: str) -> bool:
    """The documented rule: an optional 0x / 0X, then one or more hex digits, and nothing else."""
    body = text[2:] if text[:2] in ("0x", "0X") else text
    return len(body) > 0 and all(ch in HEX for ch in body)


def spelled(value: int):
    """Every accepted spelling of ``value``: any case, optional prefix, leading zeros."""
    digits = f"{value:x}"
    return st.tuples(st.sampled_from(["", "0x", "0X"]), st.integers(0, 3),
                     st.lists(st.booleans(), min_size=len(digits), max_size=len(digits))).map(
        lambda p: p[0] + "0" * p[1] + "".join(c.upper() if u else c for c, u in zip(digits, p[2])))


@SETTINGS
@given(st.integers(0, (1 << 64) - 1).flatmap(lambda v: st.tuples(st.just(v), spelled(v))))
def test_every_hex_spelling_reads_as_its_word(pair):
    value, text = pair
    assert parse_word(text) == value


@SETTINGS
@given(st.one_of(st.text(max_size=10),
                 st.text(alphabet="0123456789abcdefxXoObB_+- \t\n\uff10\u0660\u0966", max_size=8)))
def test_text_is_a_word_exactly_when_the_documented_rule_says_so(text):
    if accepted(text):
        assert parse_word(text) == int(text[2:] if text[:2] in ("0x", "0X") else text, 16)
    else:
        with pytest.raises(mmasim.WordSyntaxError, match="is not a hex word"):
            parse_word(text)


@pytest.mark.parametrize("text,value", [("0B11", 0x0B11), ("0b11", 0x0B11), ("0B", 0x0B), ("0b", 0x0B),
                                        ("0x0B", 0x0B), ("0", 0), ("3c00", 0x3C00), ("0X3C00", 0x3C00)])
def test_words_that_look_like_binary_literals_are_hex(text, value):
    assert parse_word(text) == value


@pytest.mark.parametrize("text", ["0o7", "0x", "1_0", "+1", "-1", " 1", "1 ", "\uff11", "\u0661", "0x_1",
                                  "0x-1", "", "1.0", "0xg", "1e+3"])
def test_prefixes_signs_underscores_and_other_digits_are_refused(text):
    with pytest.raises(mmasim.WordSyntaxError):
        parse_word(text)


def test_words_are_separated_by_spaces_tabs_newlines_or_commas_only():
    assert parse_words("1, 2\t3\n0x4,,5 ") == [1, 2, 3, 4, 5]
    with pytest.raises(mmasim.WordSyntaxError):
        parse_words("1\u30002")                          # an ideographic space is no separator


@SETTINGS
@given(st.text(max_size=6))
def test_a_count_is_ascii_decimal_digits(text):
    if text and all(ch in "0123456789" for ch in text):
        assert parse_count(text) == int(text)
    else:
        assert parse_count(text) is None


# ------------------------------------------------------------------ every command reads the same way
def _run(capsys, a, b="0", c="0", extra=()):
    rc = main(["run", *F16, "--a", a, "--b", b, "--c", c, "--json", *extra])
    out = capsys.readouterr()
    return rc, out


def test_cli_run_reads_0B11_as_the_hex_word_0x0B11(capsys):
    # A[0] = 0x0B11 (f16 2^-13 * 1.7666...), B[0] = 1.0 (0x3C00): D is A[0] exactly, in f32
    a = " ".join(["0B11"] + ["0"] * 15)
    b = " ".join(["3C00"] + ["0"] * 15)
    rc, out = _run(capsys, a, b)
    assert rc == 0, out.err
    doc = json.loads(out.out)
    assert doc["inputs"]["a"][0]["word"] == "0x0B11"
    # f16 0x0B11: exponent field 2 (2^-13), fraction 0x311: value (1 + 0x311/1024) * 2^-13,
    # as f32: exponent 127 - 13 = 114 = 0x72, fraction 0x311 << 13
    assert doc["d"]["word"] == f"0x{(0x72 << 23) | (0x311 << 13):08X}"


def test_cli_run_takes_the_lone_hex_word_0B(capsys):
    rc, out = _run(capsys, " ".join(["0B"] + ["0"] * 15), " ".join(["3C00"] + ["0"] * 15))
    assert rc == 0, out.err
    assert json.loads(out.out)["inputs"]["a"][0]["word"] == "0x000B"


@pytest.mark.parametrize("flag", ["--a", "--b", "--c", "--scale-a", "--sparse-metadata"])
@pytest.mark.parametrize("bad", ["0o7", "1_0", "-1", "+1", "\uff11", "\u0661"])
def test_cli_refuses_non_hex_words_in_every_word_option(capsys, flag, bad):
    words = {"--a": " ".join(["0"] * 16), "--b": " ".join(["0"] * 16), "--c": "0"}
    argv = ["run", *F16]
    for f, w in words.items():
        argv += [f, bad if f == flag else w]
    if flag not in words:
        argv += [flag, bad]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmasim run: error: ") and "is not a hex word" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv", [["compare", "A100", "H100", "m16n8k16.f32.f16.f16.f32", "--cases", "1_0"],
                                  ["compare", "A100", "H100", "m16n8k16.f32.f16.f16.f32", "--seed", "\u0661"],
                                  ["layout", "A100", "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
                                   "--operand", "sparse_metadata", "--selector", "+1"],
                                  ["validate", "--show", "\uff13"]])
def test_cli_counts_are_ascii_decimal_digits(capsys, argv):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "must be an integer (decimal digits)" in err and err.count("\n") == 1


@pytest.mark.parametrize("bad", ["1_0", "+2", "\u0662", "\uff12", "2.0", "0x2"])
def test_mmasim_threads_is_ascii_decimal_digits(monkeypatch, bad):
    monkeypatch.setenv("MMASIM_THREADS", bad)
    m = mmasim.MMA(*F16)
    with pytest.raises(mmasim.ThreadCountError, match="MMASIM_THREADS must be a positive integer"):
        m.dot([0] * 16, [0] * 16, 0)
