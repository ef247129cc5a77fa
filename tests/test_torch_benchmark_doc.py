"""docs/performance.md, "torch layers": the lines it shows are benchmarks/torch_linear.py's
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
    """``line`` with every number (and the backend's name, the CPU's) free."""
    if "vCPUs" in line:
        return re.compile(rf".+, {NUMBER} vCPUs(?:, load average {NUMBER})?")
    text = re.escape(line)
    text = re.sub(r"backend\\ \w+", r"backend\\ \\w+", text)
    return re.compile(re.sub(r"\d+(?:\\\.\d+)?", NUMBER.replace("\\", "\\\\"), text))


def test_the_torch_timings_are_the_benchmarks_output(monkeypatch):
    monkeypatch.setenv("MMASIM_BACKEND", "numpy")
    spec = importlib.util.spec_from_file_location("torch_linear", ROOT / "benchmarks" / "torch_linear.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    import mmasim
    gemm = mmasim.gemm
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            assert bench.main(["--batch", "8", "--features", "32", "--repeat", "1"]) == 0
    finally:
        mmasim.gemm = gemm                  # the script times mmasim.gemm by wrapping it
    printed = out.getvalue().splitlines()
    assert len(printed) == 2
    patterns = [_pattern(line) for line in printed]
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    start = text.index("### torch layers")
    section = text[start:text.index("\n#", start)]             # up to the next heading
    blocks = re.findall(r"```(?:text)?\n(.*?)```", section, re.S)
    assert blocks, "no benchmark output in docs/performance.md's torch section"
    for block in blocks:
        lines = block.strip().splitlines()
        assert len(lines) == len(patterns) and all(p.fullmatch(x) for p, x in zip(patterns, lines)), lines
        assert "H100-fp8-tensor, batch 256, 1024 x 1024" in lines[1]        # the documented layer
