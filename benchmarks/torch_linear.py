"""Forward + backward of one emulated linear layer (docs/torch.md, docs/performance.md).

    python benchmarks/torch_linear.py [--batch 256] [--features 1024] [--preset H100-fp8-tensor] [--repeat 3]

Times ``mmasim.torch.linear`` forward and backward (three GEMMs of batch x features x features)
after one small warm-up call (compiles the kernels), with default threading, and prints the
machine (the CPU's model name, its vCPUs, the load average before the timed runs), the median of
``--repeat`` runs, the time per product, how much of it the three ``mmasim.gemm`` calls took
(the instruction chains; the rest is casting to words, torch and autograd), and the CPU seconds
of the process (every thread) per run: on a machine other work shares, CPU seconds / cores is
what the run would take on idle cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time


def machine() -> str:
    """The CPU's model name (as ``lscpu`` prints it), its vCPUs and the 1-minute load average."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            name = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        name = ""
    load = f", load average {os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else ""
    return f"{name or platform.processor() or 'unknown CPU'}, {os.cpu_count()} vCPUs{load}"


def _timing_gemm(spent: list):
    """``mmasim.gemm`` that appends each call's wall seconds to ``spent`` (mmasim.torch.matmul
    looks ``mmasim.gemm`` up on every call)."""
    import mmasim
    inner = mmasim.gemm

    def gemm(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return inner(*args, **kwargs)
        finally:
            spent.append(time.perf_counter() - t0)
    mmasim.gemm = gemm


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--features", type=int, default=1024)
    ap.add_argument("--preset", default="H100-fp8-tensor")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    import torch

    import mmasim
    import mmasim.torch as mt
    torch.manual_seed(0)
    em = mt.preset(args.preset)
    x = torch.randn(args.batch, args.features, requires_grad=True)
    w = torch.randn(args.features, args.features, requires_grad=True)
    small = mt.linear(x[:64, :], w[:64, :], emulation=em)
    small.sum().backward()
    where = machine()
    spent = []
    _timing_gemm(spent)
    fwd, bwd, cpu, in_gemm = [], [], [], []
    for _ in range(args.repeat):
        spent.clear()
        c0 = time.process_time()
        t0 = time.perf_counter()
        y = mt.linear(x, w, emulation=em)
        t1 = time.perf_counter()
        y.backward(torch.ones_like(y))
        fwd.append(t1 - t0)
        bwd.append(time.perf_counter() - t1)
        cpu.append(time.process_time() - c0)
        in_gemm.append(sum(spent))
    f, b, c, g = (statistics.median(v) for v in (fwd, bwd, cpu, in_gemm))
    products = 3 * args.batch * args.features * args.features
    print(f"{where}")
    print(f"{args.preset}, batch {args.batch}, {args.features} x {args.features}, backend "
          f"{mmasim.backends.resolve()}, {mmasim.execution.threads.thread_count()} threads, median of {args.repeat}: "
          f"forward {f:.2f} s, backward {b:.2f} s, total {f + b:.2f} s ({(f + b) / products * 1e9:.1f} ns per product), "
          f"in mmasim.gemm {g:.2f} s ({g / (f + b) * 100:.0f} %); CPU {c:.2f} s ({c / products * 1e9:.1f} ns per product)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
