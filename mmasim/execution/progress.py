"""Progress bars on stderr for work that runs a while (tqdm, a dependency of mmasim).

One rule for every long-running call and command (``gemm``, ``validate``, ``compare``,
``harness run``): ``progress=True`` always shows a bar, ``False`` never, ``None`` only when
stderr is a terminal (and, with a ``delay``, only once the work has run that long).  A bar
never goes to stdout, so ``--json`` output and pipes are untouched.
"""

from __future__ import annotations

import sys


def bar(total: int, desc: str, unit: str, progress: bool | None = None, delay: float = 0.0):
    """A tqdm bar of ``total`` steps on stderr, or ``None`` (see the module for ``progress``).
    A stripped install without tqdm computes without a bar."""
    if progress is False:
        return None
    stream = sys.stderr
    if progress is None:
        try:
            if stream is None or not stream.isatty():
                return None
        except (AttributeError, ValueError):
            return None
    try:
        from tqdm import tqdm
    except ImportError:
        return None
    return tqdm(total=total, desc=desc, unit=unit, file=stream, delay=0 if progress else delay)


def doing(bar, what: str) -> None:
    """Name the step ``bar`` is on (nothing when there is no bar)."""
    if bar is not None:
        bar.set_postfix_str(what)


def done(bar, steps: int = 1) -> None:
    """``steps`` more steps of ``bar`` done (nothing when there is no bar)."""
    if bar is not None:
        bar.update(steps)
