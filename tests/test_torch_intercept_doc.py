"""docs/performance.md, "torch interception": the table it shows is benchmarks/torch_intercept.py's
output as the script prints it now (its numbers stale only with the machine, not the format)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import pathlib
import re

import pytest

pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parent.parent
NUMBER = r"\d+(?:\.\d+)?"


def _pattern(line: str) -> re.Pattern:
    """``line`` with every number (and the backend's name, the CPU's) free, and the padding of its
    fixed-width columns."""
    if "vCPUs" in line:
        return re.compile(rf".+, {NUMBER} vCPUs(?:, load average {NUMBER})?")
    text = re.escape(line)
    text = re.sub(r"backend\\ \w+", r"backend\\ \\w+", text)
    text = re.sub(r"\d+(?:\\\.\d+)?", NUMBER.replace("\\", "\\\\"), text)
    return re.compile(re.sub(r"(?:\\ )+", " +", text))


def _printed(monkeypatch) -> list[str]:
    monkeypatch.setenv("MMASIM_BACKEND", "numpy")
    spec = importlib.util.spec_from_file_location("torch_intercept", ROOT / "benchmarks" / "torch_intercept.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    import mmasim
    gemm = mmasim.gemm
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert bench.main(["--sizes", "4", "8", "--repeat", "1", "--warmup", "1"]) == 0
    assert mmasim.gemm is gemm              # the script puts back the mmasim.gemm it wraps
    return out.getvalue().splitlines()


def test_the_interception_table_is_the_benchmarks_output(monkeypatch):
    printed = _printed(monkeypatch)
    assert len(printed) == 3 + 2 + 1        # machine, setting, header; a row per size; the non-GEMM op
    head = [_pattern(line) for line in printed[:3]]
    gemm_row, other_row = _pattern(printed[3]), _pattern(printed[-1])
    assert gemm_row.fullmatch(printed[4]) and not gemm_row.fullmatch(printed[-1])
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    start = text.index("### torch interception")
    section = text[start:text.index("\n#", start)]             # up to the next heading
    blocks = re.findall(r"```text\n(.*?)```", section, re.S)
    assert blocks, "no benchmark output in docs/performance.md's torch interception section"
    for block in blocks:
        lines = block.strip().splitlines()
        assert len(lines) == 3 + 3 + 1, lines
        assert all(p.fullmatch(x) for p, x in zip(head, lines)), lines[:3]
        assert all(gemm_row.fullmatch(x) for x in lines[3:6]), lines[3:6]
        assert other_row.fullmatch(lines[6]), lines[6]
        assert lines[1].startswith("A100-bf16, ")                         # the documented preset
        assert [x.split(",")[1].split()[0] for x in lines[3:6]] == ["16x16x16", "64x64x64", "256x256x256"]


def test_each_interception_row_is_the_block_minus_what_it_wraps():
    """The interception column is the block's time minus the GEMM's (minus torch's for an op the
    mode lets through), and its share is of the block's time: worked by hand."""
    spec = importlib.util.spec_from_file_location("torch_intercept", ROOT / "benchmarks" / "torch_intercept.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench._row("x", 1.0, 200.0, 150.0).split()[1:] == ["1.0", "200.0", "150.0", "50.0", "25%"]
    assert bench._row("x", 8.0, 10.0, None).split()[1:] == ["8.0", "10.0", "-", "2.0", "20%"]
