"""The per-call cost of ``mmasim.torch.emulate``'s interception against the GEMM it wraps
(docs/performance.md, "torch interception").

    python benchmarks/torch_intercept.py [--sizes 16 64 256] [--preset A100-bf16] [--repeat 20]

For each size n, ``a @ b`` on two float32 n x n tensors: its time in plain torch, inside
``mmasim.torch.emulate(None, preset)`` (the block entered once, each call timed), and the
``mmasim.gemm`` call the block makes, called alone on the very operands the block passed it (the
quantized, padded words); the interception's own cost per call is the block's time minus that
GEMM's (the casts, torch's meta kernel, the trace, the mode's dispatch).  A non-GEMM op
(``a + b``, the largest size) shows what the mode costs an op it lets through: the block's time
minus plain torch's.  Each figure is the median of ``--repeat`` calls (``time.perf_counter``)
after ``--warmup`` calls (the first compiles the kernels), in microseconds, with default
threading; the first line is the machine (as benchmarks/torch_linear.py prints it).
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import statistics
import time


def _sibling(name: str):
    """benchmarks/``name``.py as a module (benchmarks/ is not a package)."""
    path = pathlib.Path(__file__).resolve().with_name(f"{name}.py")
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _median_us(call, repeat: int, warmup: int) -> float:
    for _ in range(warmup):
        call()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def _gemm_call(block_call) -> tuple:
    """``(args, kwargs)`` of the ``mmasim.gemm`` call that ``block_call()`` makes (the emulation
    looks ``mmasim.gemm`` up on every call)."""
    import mmasim
    inner, seen = mmasim.gemm, []

    def gemm(*args, **kwargs):
        seen.append((args, kwargs))
        return inner(*args, **kwargs)
    mmasim.gemm = gemm
    try:
        block_call()
    finally:
        mmasim.gemm = inner
    (call,) = seen
    return call


HEADER = f"{'op':<22}{'torch':>10}{'in emulate':>12}{'mmasim.gemm':>13}{'interception':>14}{'share':>7}"


def _row(op: str, plain: float, block: float, gemm: float | None) -> str:
    """One line of the table: the interception is the block minus the GEMM (minus plain torch for
    an op the mode lets through); its share is of the block's time."""
    own = block - (plain if gemm is None else gemm)
    g = "-" if gemm is None else f"{gemm:.1f}"
    return f"{op:<22}{plain:>10.1f}{block:>12.1f}{g:>13}{own:>14.1f}{own / block * 100:>6.0f}%"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256])
    ap.add_argument("--preset", default="A100-bf16")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    args = ap.parse_args(argv)
    import torch

    import mmasim
    import mmasim.torch as mt
    torch.manual_seed(0)
    r, w = args.repeat, max(args.warmup, 1)
    rows = []
    with mt.emulate(None, args.preset):
        pass                                # the mode's class is made once, outside the timings
    where = _sibling("torch_linear").machine()
    for n in args.sizes:
        a, b = torch.randn(n, n), torch.randn(n, n)
        plain = _median_us(lambda: a @ b, r, w)
        with mt.emulate(None, args.preset):
            block = _median_us(lambda: a @ b, r, w)
            gargs, gkwargs = _gemm_call(lambda: a @ b)
        gemm = _median_us(lambda: mmasim.gemm(*gargs, **gkwargs), r, w)
        rows.append(_row(f"a @ b, {n}x{n}x{n}", plain, block, gemm))
    n = max(args.sizes)
    a, b = torch.randn(n, n), torch.randn(n, n)
    plain = _median_us(lambda: a + b, r, w)
    with mt.emulate(None, args.preset):
        block = _median_us(lambda: a + b, r, w)
    rows.append(_row(f"a + b, {n}x{n}", plain, block, None))
    print(where)
    print(f"{args.preset}, backend {mmasim.backends.resolve()}, {mmasim.execution.threads.thread_count()} threads, "
          f"median of {r} calls after {w} warm-up calls, microseconds per call")
    print(HEADER)
    for line in rows:
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
