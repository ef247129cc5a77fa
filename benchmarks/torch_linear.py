"""Forward + backward of one emulated linear layer (docs/torch.md, docs/performance.md).

    python benchmarks/torch_linear.py [--batch 256] [--features 1024] [--preset H100-fp8-tensor] [--repeat 3]

Times ``mmasim.torch.linear`` forward and backward (three GEMMs of batch x features x features)
after one small warm-up call (compiles the kernels), with default threading, and prints the
median of ``--repeat`` runs, the time per product, and the CPU seconds of the process (every
thread) per run: on a machine other work shares, CPU seconds / cores is what the run would
take on idle cores.
"""

from __future__ import annotations

import argparse
import statistics
import time


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
    fwd, bwd, cpu = [], [], []
    for _ in range(args.repeat):
        c0 = time.process_time()
        t0 = time.perf_counter()
        y = mt.linear(x, w, emulation=em)
        t1 = time.perf_counter()
        y.backward(torch.ones_like(y))
        fwd.append(t1 - t0)
        bwd.append(time.perf_counter() - t1)
        cpu.append(time.process_time() - c0)
    f, b, c = statistics.median(fwd), statistics.median(bwd), statistics.median(cpu)
    products = 3 * args.batch * args.features * args.features
    print(f"{args.preset}, batch {args.batch}, {args.features} x {args.features}, backend "
          f"{mmasim.backends.resolve()}, {mmasim.execution.threads.resolve()} threads: forward {f:.2f} s, backward {b:.2f} s, "
          f"total {f + b:.2f} s ({(f + b) / products * 1e9:.1f} ns per product); "
          f"CPU {c:.2f} s ({c / products * 1e9:.1f} ns per product)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
