"""The progress of long commands: one tqdm bar on stderr (mmasim.execution.progress), on a terminal only,
never under --json or -q, and never on stdout."""

import io
import json
import pathlib
import sys

import pytest

import mmasim.cli.main as cli

ROOT = pathlib.Path(__file__).resolve().parent.parent
HARDWARE = ROOT / "vectors" / "hardware" / "blackwell"
F16 = ["A100", "H100", "m16n8k16.f32.f16.f16.f32", "--cases", "200"]


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def _on_a_terminal(monkeypatch, argv, capsys):
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    rc = cli.main(argv)
    return rc, capsys.readouterr().out, term.getvalue()


def test_validate_shows_a_tqdm_bar_on_a_terminal(monkeypatch, capsys):
    n = len(list(HARDWARE.glob("*.npz")))
    rc, out, err = _on_a_terminal(monkeypatch, ["validate", str(HARDWARE)], capsys)
    assert rc == 0 and n > 1
    assert "mmasim validate" in err and f"{n}/{n}" in err and " file" in err   # tqdm's counter, in place
    assert "validating [" not in err and "mmasim validate" not in out


@pytest.mark.parametrize("quiet", (["-q"], ["--json"]))
def test_validate_is_quiet_under_q_and_json_on_a_terminal(monkeypatch, capsys, quiet):
    rc, out, err = _on_a_terminal(monkeypatch, ["validate", str(HARDWARE), *quiet], capsys)
    assert rc == 0 and err == ""
    if quiet == ["--json"]:
        assert json.loads(out)["schema"] == "mmasim.validate/1"


def test_validate_shows_no_bar_off_a_terminal(capsys):
    assert cli.main(["validate", str(HARDWARE)]) == 0
    assert capsys.readouterr().err == ""


def test_compare_shows_a_tqdm_bar_on_a_terminal(monkeypatch, capsys):
    rc, out, err = _on_a_terminal(monkeypatch, ["compare", *F16], capsys)
    assert rc == 0 and "mmasim compare" in err and "5/5" in err and "mmasim compare" not in out


def test_compare_counts_the_plot_in_its_bar(monkeypatch, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    rc, _, err = _on_a_terminal(monkeypatch, ["compare", *F16, "--plot", str(tmp_path / "d.png")], capsys)
    assert rc == 0 and "9/9" in err          # 5 steps of the pair, then exact results, 2 datapaths, the image


def test_compare_is_quiet_under_json_and_off_a_terminal(monkeypatch, capsys):
    rc, out, err = _on_a_terminal(monkeypatch, ["compare", *F16, "--json"], capsys)
    assert rc == 0 and err == "" and json.loads(out)["schema"] == "mmasim.compare/1"
    assert cli.main(["compare", *F16]) == 0
    assert capsys.readouterr().err == ""
