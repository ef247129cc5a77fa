#!/usr/bin/env python3
"""Start-up: what a fresh process pays before its first result, per backend.

    python benchmarks/startup.py              # import, first dot, validate (warm kernel cache)
    python benchmarks/startup.py --warmup     # + `mmasim warmup` into an empty cache folder

Every figure is the wall time of a new interpreter (best of ``--repeat``), so imports,
the registry build and, for numba, the import of numba and the kernels' load from the
cache are all counted.  ``auto`` is the default backend (numpy until a datapath's products in the
process reach ``mmasim.backends.AUTO_MIN_PRODUCTS``, then numba); ``numba`` forces the
compiled kernels for every call.
Figures are printed, never asserted; ``benchmarks/bench.py --startup`` prints the same rows.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FIRST_DOT = """
import numpy as np, mmasim
m = mmasim.MMA("A100", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
a = np.full((64, 16), 0x3C00, np.uint16)
assert int(m.dot(a, a, np.zeros(64, np.uint32))[0]) == 0x41800000
"""


def _wall(argv: list, env: dict, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        out = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir())
        dt = time.perf_counter() - t
        if out.returncode != 0:
            raise SystemExit(f"{' '.join(argv[:3])} failed:\n{out.stderr[-2000:]}")
        best = min(best, dt)
    return best


def _env(backend: str | None, **extra) -> dict:
    env = dict(os.environ, **extra)
    env.pop("MMASIM_BACKEND", None)
    if backend:
        env["MMASIM_BACKEND"] = backend
    return env


def _cli() -> list:
    return [sys.executable, "-m", "mmasim"]


def rows(repeat: int = 3, warmup: bool = False) -> list:
    """``(label, {backend: seconds})`` rows, the kernel cache warmed first (``mmasim warmup``)."""
    py = sys.executable
    subprocess.run(_cli() + ["warmup"], capture_output=True, cwd=tempfile.gettempdir(), check=True)
    out = [("python -c pass (the interpreter)", {"-": _wall([py, "-c", "pass"], _env(None), repeat)}),
           ("import mmasim", {"-": _wall([py, "-c", "import mmasim"], _env(None), repeat)})]
    first, validate = {}, {}
    backends = ["numpy", "auto", "numba"]
    for be in backends:
        first[be] = _wall([py, "-c", FIRST_DOT], _env(be), repeat)
    out.append(("import + first Model.dot of 64 rows (A100 f16)", first))
    for be in backends:
        validate[be] = _wall(_cli() + ["validate"], _env(be), 1)
    out.append(("mmasim validate (every vector file)", validate))
    if warmup:
        with tempfile.TemporaryDirectory() as cache:
            t = _wall(_cli() + ["warmup"], _env(None, MMASIM_CACHE_DIR=cache), 1)
        out.append(("mmasim warmup into an empty cache (every kernel compiled)", {"-": t}))
    return out


def print_rows(table: list) -> None:
    print(f"{'start-up: a fresh process, wall seconds':58s} {'numpy':>8s} {'auto':>8s} {'numba':>8s}")
    for label, figures in table:
        if "-" in figures:
            print(f"{label:58s} {figures['-']:8.2f}")
        else:
            print(f"{label:58s} " + " ".join(f"{figures[b]:8.2f}" for b in ("numpy", "auto", "numba")))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3, help="fresh processes per figure (best of)")
    ap.add_argument("--warmup", action="store_true", help="also time `mmasim warmup` into an empty cache folder")
    args = ap.parse_args(argv)
    print(f"{os.cpu_count()} cores; kernel cache warm (run `mmasim warmup` first)\n")
    print_rows(rows(args.repeat, args.warmup))


if __name__ == "__main__":
    main()
