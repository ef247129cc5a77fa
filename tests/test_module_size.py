"""No module of ``mmasim/`` is longer than 700 lines (issue 36): past that a file holds more
than one concern, and is split by concern (``mmasim/cli/``: ``main``, ``parser``,
``arguments``, ``commands``, ``output``)."""

from __future__ import annotations

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
MAX_LINES = 700

#: modules still over the limit, each with the work that splits it; strict: once split, the
#: entry must go
AWAITING_SPLIT: dict = {}


def lines(path: pathlib.Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


MODULES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "mmasim").rglob("*.py"))


@pytest.mark.parametrize("module", MODULES)
def test_no_module_is_longer_than_700_lines(module, request):
    if module in AWAITING_SPLIT:
        request.applymarker(pytest.mark.xfail(reason=AWAITING_SPLIT[module], strict=True))
    assert lines(ROOT / module) <= MAX_LINES, f"{module}: {lines(ROOT / module)} lines; split it by concern"


def test_every_module_awaiting_a_split_exists():
    assert all((ROOT / m).is_file() for m in AWAITING_SPLIT)


def test_the_count_is_of_lines(tmp_path):
    (tmp_path / "x.py").write_text("a = 1\n" * 701)
    assert lines(tmp_path / "x.py") == 701 > MAX_LINES
