"""Under ``--json`` every command answers with one JSON document on stdout, a failure too:
the ``mmasim.error/1`` document (docs/user-guide.md, "JSON output") with the exit status it
returns, beside its one line on stderr; never a traceback, never "internal error"."""

import argparse
import json
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mmasim.cli.main as cli
from mmasim.cli.main import build_parser, main


def _leaves(parser, words=()):
    """``(command words, parser)`` of every command that runs (``harness generate``, ...)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield words, parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _leaves(sub, words + (name,))


COMMANDS = [" ".join(w) for w, _ in _leaves(build_parser())]


def _error_doc(capsys, argv, status, command):
    rc = main(argv)
    out, err = capsys.readouterr()
    assert rc == status, (argv, out, err)
    doc = json.loads(out)                         # one document, nothing else on stdout
    assert doc["schema"] == "mmasim.error/1" and doc["exit_status"] == rc and doc["command"] == command
    assert doc["message"] and "\n" not in doc["message"]
    lines = err.strip().splitlines()
    assert len(lines) == 1 and ": error: " in lines[0] and doc["message"] in lines[0]
    assert "Traceback" not in err and "internal error" not in err + out
    return doc


def test_every_command_has_json():
    parser_of = dict((" ".join(w), p) for w, p in _leaves(build_parser()))
    assert {"list", "explain", "run", "validate", "compare", "layout", "characterize", "harness generate",
            "harness run", "plugins"} <= set(parser_of)
    for name, parser in parser_of.items():
        assert any("--json" in a.option_strings for a in parser._actions), name


@pytest.mark.parametrize("command", COMMANDS)
def test_a_usage_error_under_json_is_an_error_document(command, capsys):
    doc = _error_doc(capsys, command.split() + ["--no-such-option", "--json"], 2, command)
    assert doc["error"] == "usage"          # the option, or the arguments the command needs first


@pytest.mark.parametrize("command", COMMANDS)
def test_an_unknown_option_is_named_by_its_command(command, capsys):
    """``mmasim validate --frob`` says ``mmasim validate: error: ...``, not ``mmasim: error:``
    (argparse reports an option the subcommand did not take at the top level)."""
    pair = ["A100", "m16n8k16.f32.f16.f16.f32"]
    needs = {"explain": pair, "run": [*pair, "--a", "0", "--b", "0", "--c", "0"], "layout": pair,
             "characterize": pair, "accuracy": pair, "compare": ["A100", "H100", pair[1]],
             "harness generate": ["Ampere", "--out", "x"], "harness run": ["Ampere", "--out", "x"]}
    argv = [*command.split(), *needs.get(command, [])]   # what it needs, so that only the option is wrong
    assert main([*argv, "--frob"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == (f"mmasim {command}: error: unrecognized arguments: --frob "
                                 f"(see mmasim {command} --help)\n")


FAILURES = {
    "list": (["list", "NoSuchGPU"], "UnknownArchitecture"),
    "explain": (["explain", "B200", "tcgen05.mma.kind::nope"], "UnknownInstruction"),
    "run": (["run", "B200", "tcgen05.mma.kind::tf32", "--a", "1 2", "--b", "1 2", "--c", "0"], None),
    "compare": (["compare", "A100", "NoSuchGPU", "m16n8k16.f32.f16.f16.f32"], "UnknownArchitecture"),
    "layout": (["layout", "A100", "mma.sync.m99n8k16.f32.f16.f16"], "UnknownInstruction"),
    "characterize": (["characterize", "A100", "mma.sync.m99n8k16.f32.f16.f16"], "UnknownInstruction"),
    "harness generate": (["harness", "generate", "NoSuchGPU", "--out", "{tmp}"], "UnknownArchitecture"),
    "harness run": (["harness", "run", "NoSuchGPU", "--out", "{tmp}"], "UnknownArchitecture"),
}


@pytest.mark.parametrize("command", sorted(FAILURES))
def test_a_failure_under_json_is_an_error_document(command, capsys, tmp_path):
    argv, kind = FAILURES[command]
    doc = _error_doc(capsys, [a.format(tmp=tmp_path) for a in argv] + ["--json"], 1, command)
    assert kind is None or doc["error"] == kind


def test_a_word_that_is_not_hex_under_json_is_a_usage_error_document(capsys):
    doc = _error_doc(capsys, ["run", "B200", "tcgen05.mma.kind::tf32", "--a", "zz 0 0 0 0 0 0 0",
                              "--b", "0 0 0 0 0 0 0 0", "--c", "0", "--json"], 2, "run")
    assert doc["error"] == "usage" and "zz" in doc["message"]


def test_a_missing_file_under_json_is_an_error_document(capsys, tmp_path):
    doc = _error_doc(capsys, ["characterize", "A100", "mma.sync.m16n8k16.f32.f16.f16",
                              "--from-vectors", str(tmp_path / "none.npz"), "--json"], 1, "characterize")
    assert "none.npz" in doc["message"]


def test_harness_run_without_a_gpu_under_json_is_an_error_document(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))          # no nvidia-smi
    doc = _error_doc(capsys, ["harness", "run", "Ampere", "--out", str(tmp_path / "v"), "--json"], 1, "harness run")
    assert "no NVIDIA GPU" in doc["message"]


def test_compare_plot_without_matplotlib_under_json_is_an_error_document(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)     # import matplotlib raises ImportError
    doc = _error_doc(capsys, ["compare", "A100", "H100", "m16n8k16.f32.f16.f16.f32", "--plot",
                              str(tmp_path / "d.png"), "--json"], 1, "compare")
    assert doc["error"] == "failure" and "mmasim-exact[plot]" in doc["message"]


def test_validate_and_plugins_fail_with_their_own_document(capsys, tmp_path):
    """A file that does not validate is a validate report (ok false), not an error document."""
    (tmp_path / "text.npz").write_text("not a vector file\n")
    assert main(["validate", str(tmp_path / "text.npz"), "--json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "mmasim.validate/1" and doc["summary"]["ok"] is False


def test_validate_of_a_path_that_does_not_exist_is_one_error_line(capsys, tmp_path):
    missing = str(tmp_path / "none.npz")
    assert main(["validate", missing]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err == f"mmasim: error: {missing}: no such file or directory\n"
    doc = _error_doc(capsys, ["validate", str(tmp_path), missing, "--json"], 1, "validate")
    assert doc["error"] == "FileNotFoundError" and missing in doc["message"]


def test_no_json_no_error_document(capsys):
    assert main(["list", "NoSuchGPU"]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("mmasim: error: ")


def test_an_unreadable_command_line_under_json_names_no_command(capsys):
    doc = _error_doc(capsys, ["no-such-command", "--json"], 2, None)
    assert doc["error"] == "usage"


_WORDS = st.sampled_from(["B200", "A100", "MI300X", "Toy", "tcgen05.mma.kind::tf32", "m16n8k16.f32.f16.f16.f32",
                          "mma.sync.m16n8k8", "--a", "--b", "--c", "--operand", "d", "x", "0", "0x1", "-1",
                          "3F800000 0 0 0 0 0 0 0", "--a-type", "e4m3", "--saturate", "--scale-a", "", "\x1b[2J"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(["list", "explain", "run", "layout"]), words=st.lists(_WORDS, max_size=8))
def test_any_command_line_under_json_is_one_document(command, words, capsys):
    rc = main([command, *words, "--json"])
    out, err = capsys.readouterr()
    doc = json.loads(out)
    assert "Traceback" not in err and "internal error" not in err + out
    if rc == 0:
        assert doc["schema"] == f"mmasim.{command}/1"
    else:
        assert doc["schema"] == "mmasim.error/1" and doc["exit_status"] == rc and len(err.strip().splitlines()) == 1


# ------------------------------------------------------------ mmasim plugins without numba
@pytest.fixture
def without_numba(monkeypatch):
    """numba as on a machine without it: ``import numba`` raises ImportError."""
    from mmasim.backends import numba as numba_backend

    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.setattr(numba_backend, "_numba_ok", None)
    assert not numba_backend.numba_available()


def test_plugins_reports_the_numba_backend_unavailable_without_numba(without_numba, capsys):
    assert main(["plugins", "--json"]) == 0                  # unavailable is not a failure to load
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["plugins"]}
    numba = rows["mmasim.backends.numba"]
    assert numba["ok"] is True and numba["available"] is False
    assert "numba" in numba["why_unavailable"] and "mmasim-exact[fast]" in numba["why_unavailable"]
    assert all(r["available"] for name, r in rows.items() if name != "mmasim.backends.numba")
    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    (line,) = [ln for ln in out.splitlines() if ln.startswith("mmasim.backends.numba")]
    assert "unavailable: numba cannot be imported" in line and not line.rstrip().endswith("ok")
    assert out.rstrip().endswith("0 failed, 1 unavailable")


def test_plugins_reports_the_numba_backend_available_with_numba(capsys):
    from mmasim.backends import numba_available

    if not numba_available():
        pytest.skip("numba is not installed here (the [fast] extra)")
    assert main(["plugins", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["plugins"]}
    assert rows["mmasim.backends.numba"]["available"] is True and rows["mmasim.backends.numba"]["why_unavailable"] == ""


def test_a_plugin_whose_availability_hook_raises_is_unavailable_not_a_crash(capsys):
    import mmasim

    class Flaky:
        @mmasim.hookimpl
        def mmasim_unavailable(self):
            raise RuntimeError("cannot tell")

    mmasim.register(Flaky(), name="flaky")
    try:
        assert main(["plugins", "--json"]) == 0
        rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["plugins"]}
    finally:
        mmasim.unregister(name="flaky")
    assert rows["flaky"]["available"] is False and "RuntimeError: cannot tell" in rows["flaky"]["why_unavailable"]
