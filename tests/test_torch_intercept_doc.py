"""docs/performance.md, "torch interception": the table it shows is benchmarks/torch_intercept.py's
output as the script prints it now (its numbers stale only with the machine, not the format)."""

from __future__ import annotations

import pytest

from benchmark_output import blocks, pattern, printed, script

pytest.importorskip("torch")


def test_the_interception_table_is_the_benchmarks_output(monkeypatch):
    now = printed("torch_intercept", ["--sizes", "4", "8", "--repeat", "1", "--warmup", "1"], monkeypatch)
    assert len(now) == 3 + 2 + 1            # machine, setting, header; a row per size; the non-GEMM op
    head = [pattern(line) for line in now[:3]]
    gemm_row, other_row = pattern(now[3]), pattern(now[-1])
    assert gemm_row.fullmatch(now[4]) and not gemm_row.fullmatch(now[-1])
    shown = blocks("### torch interception")
    assert shown, "no benchmark output in docs/performance.md's torch interception section"
    for lines in shown:
        assert len(lines) == 3 + 3 + 1, lines
        assert all(p.fullmatch(x) for p, x in zip(head, lines)), lines[:3]
        assert all(gemm_row.fullmatch(x) for x in lines[3:6]), lines[3:6]
        assert other_row.fullmatch(lines[6]), lines[6]
        assert lines[1].startswith("A100-bf16, ")                         # the documented preset
        assert [x.split(",")[1].split()[0] for x in lines[3:6]] == ["16x16x16", "64x64x64", "256x256x256"]


def test_each_interception_row_is_the_block_minus_what_it_wraps():
    """The interception column is the block's time minus the GEMM's (minus torch's for an op the
    mode lets through), and its share is of the block's time: worked by hand."""
    row = script("torch_intercept")._row
    assert row("x", 1.0, 200.0, 150.0).split()[1:] == ["1.0", "200.0", "150.0", "50.0", "25%"]
    assert row("x", 8.0, 10.0, None).split()[1:] == ["8.0", "10.0", "-", "2.0", "20%"]
