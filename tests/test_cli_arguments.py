"""The command line reads its arguments by one rule each (docs/user-guide.md, "Command line"):

* every count option (``--cases``, ``--seed``, ``--k``, ``--promote-every``, ...) is ASCII
  decimal digits, nothing else: no sign, no underscores, no digits of other scripts;
* a path is never the empty one (pathlib would read it as the working folder);
* a plot that cannot be written is refused before anything runs, and under ``--json`` a plot
  that fails after the run still leaves one document, the error.
"""

import argparse
import errno
import importlib
import json
import os
import re
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmasim.cli.arguments import UsageError
from mmasim.cli.main import build_parser, main

PAIR = ["A100", "m16n8k16.f32.f16.f16.f32"]
#: what each command needs besides the option under test
NEEDS = {"compare": ["A100", "H100", PAIR[1]], "accuracy": PAIR, "layout": PAIR,
         "harness run": ["Ampere", "--out", "x"], "validate": [], "warmup": []}

#: every count option: (command, option) -> (its smallest value, a comma-separated list?, 'none' / 0 is None?)
COUNTS = {
    ("validate", "--show"): (0, False, False),
    ("compare", "--cases"): (1, False, False),
    ("compare", "--seed"): (0, False, False),
    ("accuracy", "--k"): (1, True, False),
    ("accuracy", "--m"): (1, False, False),
    ("accuracy", "--n"): (1, False, False),
    ("accuracy", "--promote-every"): (1, True, True),
    ("accuracy", "--split-k"): (1, False, False),
    ("accuracy", "--seed"): (0, False, False),
    ("layout", "--byte-id"): (0, False, False),
    ("layout", "--thread-id"): (0, False, False),
    ("layout", "--selector"): (0, False, False),
    ("layout", "--lane-alignment"): (0, False, False),
    ("harness run", "--cases"): (1, False, False),
    ("harness run", "--seed"): (0, False, False),
    ("warmup", "--jobs"): (1, False, False),
}


def _leaves(parser, words=()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(words), parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, words + (name,))


def test_every_count_option_is_listed_here():
    """Each option read as a count (the command line's count readers) is one of :data:`COUNTS`,
    so a new one is checked below too."""
    found = {(command, a.option_strings[-1]) for command, parser in _leaves(build_parser())
             for a in parser._actions if getattr(a.type, "__qualname__", "").startswith(("count_arg.", "_counts."))}
    assert found == set(COUNTS)


def _digits(text: str, minimum: int):
    """The documented count rule, written out: ASCII decimal digits, at least ``minimum``."""
    if re.fullmatch(r"[0-9]+", text, re.ASCII) is None or int(text) < minimum:
        return "refused"
    return int(text)


def _expected(text: str, minimum: int, listing: bool, none: bool):
    if not listing:
        return _digits(text, minimum)
    out = []
    for token in (t.strip(" ") for t in text.split(",")):
        if none and token.isascii() and token.lower() == "none":
            out.append(None)
            continue
        value = _digits(token, 0 if none else minimum)
        if value == "refused":
            return "refused"
        out.append(None if none and value == 0 else value)
    return out


def _parsed(command: str, option: str, text: str):
    argv = [*command.split(), *NEEDS[command], f"{option}={text}"]
    try:
        args = build_parser().parse_args(argv)
    except UsageError as exc:
        assert exc.prog == f"mmasim {command}" and option in str(exc), (argv, exc)
        return "refused"
    return getattr(args, option.lstrip("-").replace("-", "_"))


LOOKALIKES = ["1_024", "+128", "-128", "١٢٨", "１２８", "۱۲", "0x10", "1e3", " 12", "12 ", "", "-0", "00", "0",
              "128", "12.0", "NONE", "none", "none,32", "32,,64", "32, 64", "0,32", "²", "٣٢,64"]
count_text = st.one_of(st.sampled_from(LOOKALIKES), st.text(max_size=6),
                       st.lists(st.sampled_from(LOOKALIKES + ["7", "64"]), min_size=1, max_size=3).map(",".join))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(sorted(COUNTS)), count_text)
def test_every_count_option_reads_ascii_decimal_digits_only(which, text):
    command, option = which
    assert _parsed(command, option, text) == _expected(text, *COUNTS[which]), (command, option, text)


@pytest.mark.parametrize("text", ["1_024", "+128", "١٢٨", "１２８"])
@pytest.mark.parametrize("option", ["--k", "--promote-every"])
def test_accuracy_refuses_what_python_int_would_read(option, text, capsys):
    assert main(["accuracy", *PAIR, option, text]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mmasim accuracy: error: argument {option}: must be an integer (decimal digits)")
    assert err.count("\n") == 1


# ------------------------------------------------------------------ paths
@pytest.mark.parametrize("argv", [["harness", "generate", "Ampere", "--out", ""],
                                  ["harness", "run", "Ampere", "--out", ""],
                                  ["characterize", *PAIR, "--from-vectors", ""]])
def test_an_empty_path_is_refused_and_nothing_is_written(argv, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and "the empty path" in err and err.count("\n") == 1
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("out", [""])
def test_harness_generate_and_run_refuse_the_empty_path_in_the_api_too(out, tmp_path, monkeypatch):
    from mmasim.errors import HarnessError
    from mmasim.harness.generate import generate
    from mmasim.harness.measure import SimulatedDevice, measure

    monkeypatch.chdir(tmp_path)
    with pytest.raises(HarnessError, match="empty path"):
        generate("Ampere", out=out)
    with pytest.raises(HarnessError, match="empty path"):
        measure("Ampere", out, cases=1, instructions=["mma.sync.m16n8k8.f32.tf32.tf32"],
                device=SimulatedDevice("simulated GPU", "8.0"))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("text", ["9" * 41, "1" * 5000])
def test_a_count_of_thousands_of_digits_is_one_short_usage_line(text, capsys):
    assert main(["accuracy", *PAIR, "--seed", text]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 300 and "at most 40 decimal digits" in err, err


# ------------------------------------------------------------------ plots
@pytest.mark.parametrize("argv", [["accuracy", *PAIR, "--k", "16", "--n", "8", "-q"],
                                  ["compare", "A100", "H100", PAIR[1], "--cases", "3"],
                                  ["layout", *PAIR]])
@pytest.mark.parametrize("where", ["{tmp}/folder.png", "{tmp}/folder.png/", "{tmp}/new.png/"])
def test_a_plot_that_names_a_folder_is_refused_before_the_run_as_one_document(argv, where, tmp_path, capsys):
    (tmp_path / "folder.png").mkdir()
    option = "--out" if argv[0] == "layout" else "--plot"
    rc = main([*argv, option, where.format(tmp=tmp_path), "--json"])
    out, err = capsys.readouterr()
    doc = json.loads(out)                               # one document: the error, nothing ran
    assert rc == 2 and doc["schema"] == "mmasim.error/1" and doc["error"] == "usage"
    assert "it is a folder" in doc["message"] and err.count("\n") == 1


def test_accuracy_under_json_prints_one_document_when_its_plot_fails_after_the_run(tmp_path, capsys,
                                                                                  monkeypatch):
    pytest.importorskip("matplotlib")
    from mmasim.accuracy import plot as accuracy_plot

    def full_disk(results, path):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setenv("MMASIM_BACKEND", "numpy")
    monkeypatch.setattr(accuracy_plot, "plot", full_disk)
    png = tmp_path / "a.png"
    rc = main(["accuracy", *PAIR, "--k", "16", "--m", "16", "--n", "8", "-q", "--plot", str(png), "--json"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert rc == 1 and doc["schema"] == "mmasim.error/1" and doc["message"] == f"{png}: No space left on device"
    assert err == f"mmasim: error: {png}: No space left on device\n"


def test_accuracy_without_matplotlib_fails_before_the_run(tmp_path, capsys, monkeypatch):
    accuracy_cli = importlib.import_module("mmasim.accuracy.cli")     # mmasim.accuracy is also the function

    def never(*args, **kw):
        raise AssertionError("the study ran")

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setattr(accuracy_cli, "run_studies", never)
    rc = main(["accuracy", *PAIR, "--k", "16", "--plot", str(tmp_path / "a.png"), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1 and doc["error"] == "failure" and "matplotlib" in doc["message"]
