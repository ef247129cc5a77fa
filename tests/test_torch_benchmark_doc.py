"""docs/performance.md, "torch layers": the lines it shows are benchmarks/torch_linear.py's
output as the script prints it now (its numbers stale only with the machine, not the format)."""

from __future__ import annotations

import pytest

from benchmark_output import blocks, pattern, printed

pytest.importorskip("torch")


def test_the_torch_timings_are_the_benchmarks_output(monkeypatch):
    lines_now = printed("torch_linear", ["--batch", "8", "--features", "32", "--repeat", "1"], monkeypatch)
    assert len(lines_now) == 2
    patterns = [pattern(line) for line in lines_now]
    shown = blocks("### torch layers")
    assert shown, "no benchmark output in docs/performance.md's torch section"
    for lines in shown:
        assert len(lines) == len(patterns) and all(p.fullmatch(x) for p, x in zip(patterns, lines)), lines
        assert "H100-fp8-tensor, batch 256, 1024 x 1024" in lines[1]        # the documented layer
