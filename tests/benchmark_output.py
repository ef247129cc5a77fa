"""For the tests that check a doc quotes a benchmark's output as the script prints it now: run the
script small, and match its lines with their numbers free (they stale with the machine, the
format does not)."""

from __future__ import annotations

import contextlib
import importlib.util
import io
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
NUMBER = r"\d+(?:\.\d+)?"


def pattern(line: str) -> re.Pattern:
    """``line`` with every number (and the backend's name, the CPU's) free, and any run of
    spaces (a fixed-width table's padding)."""
    if "vCPUs" in line:
        return re.compile(rf".+, {NUMBER} vCPUs(?:, load average {NUMBER})?")
    text = re.escape(line)
    text = re.sub(r"backend\\ \w+", r"backend\\ \\w+", text)
    text = re.sub(r"\d+(?:\\\.\d+)?", NUMBER.replace("\\", "\\\\"), text)
    return re.compile(re.sub(r"(?:\\ )+", " +", text))


def script(name: str):
    """benchmarks/``name``.py as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def printed(name: str, argv: list, monkeypatch) -> list[str]:
    """The lines benchmarks/``name``.py prints with ``argv`` on the numpy backend; ``mmasim.gemm``
    (which the scripts time by wrapping it) as it was before."""
    monkeypatch.setenv("MMASIM_BACKEND", "numpy")
    bench = script(name)
    import mmasim
    gemm = mmasim.gemm
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            assert bench.main(argv) == 0
    finally:
        mmasim.gemm = gemm
    return out.getvalue().splitlines()


def blocks(heading: str) -> list[list[str]]:
    """The lines of each fenced block in docs/performance.md's section ``heading``, up to the next
    heading."""
    text = (ROOT / "docs" / "performance.md").read_text(encoding="utf-8")
    start = text.index(heading)
    section = text[start:text.index("\n#", start)]
    return [b.strip().splitlines() for b in re.findall(r"```(?:text)?\n(.*?)```", section, re.S)]
