"""The mmasim command line: list, explain, run."""

import subprocess
import sys

from mmasim.cli import main


def test_list_architectures(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "Blackwell" in out and "B200" in out


def test_list_one_architecture(capsys):
    assert main(["list", "B200"]) == 0
    out = capsys.readouterr().out
    assert "tcgen05.mma.kind::tf32.f32.tf32.tf32" in out and "hardware" in out


def test_explain(capsys):
    assert main(["explain", "B200", "tcgen05.kind::mxf4nvf4.4X"]) == 0
    out = capsys.readouterr().out
    assert "ue4m3" in out and "validation: hardware" in out and "window" in out


def test_run_prints_word_and_value(capsys):
    ones = " ".join(["3F800000"] * 8)
    assert main(["run", "B200", "tcgen05.mma.kind::tf32", "--a", ones, "--b", ones, "--c", "0x3F800000"]) == 0
    out = capsys.readouterr().out
    assert "D = 0x41100000" in out and "9.0" in out


def test_run_with_qualifiers_scales_and_sparsity(capsys):
    assert main(["run", "B200", "tcgen05.mma.kind::f8f6f4", "--a-type", "e4m3", "--b-type", "e2m1", "--d-type", "f16",
                 "--a", " ".join(["38"] * 32), "--b", " ".join(["08"] * 32), "--c", "0"]) == 0
    assert "D = 0x5000" in capsys.readouterr().out          # 32 * 1.0 * 1.0 = 32.0 in f16
    assert main(["run", "B200", "tcgen05.kind::mxf4nvf4.4X", "--a", " ".join(["2"] * 64), "--b", " ".join(["2"] * 64),
                 "--c", "0", "--scale-a", "38 38 38 38", "--scale-b", "40 40 40 40"]) == 0
    assert "D = 0x43000000" in capsys.readouterr().out      # 64 * 2.0 = 128.0
    assert main(["run", "B200", "tcgen05.mma.sp.kind::tf32", "--a", " ".join(["3F800000"] * 16),
                 "--b", " ".join(["3F800000"] * 16), "--c", "0", "--sparse-metadata", "44444444"]) == 0
    assert "D = 0x41000000" in capsys.readouterr().out


def test_errors_are_one_line_messages(capsys):
    assert main(["run", "B200", "tcgen05.mma.kind::f16", "--a", "0", "--b", "0", "--c", "0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("mmasim: error:") and "matches 3 datapaths" in err
    assert main(["explain", "Nope", "x"]) == 2
    assert "unknown architecture" in capsys.readouterr().err


def test_console_script_runs_as_module():
    out = subprocess.run([sys.executable, "-m", "mmasim", "list"], capture_output=True, text=True)
    assert out.returncode == 0 and "Blackwell" in out.stdout
