"""What promotion costs a long GEMM: mmasim.gemm of an FP8 GEMM (H100 wgmma e4m3, f32 D) with
and without promote_every, on the same words, wall time of each (best of --repeat, the two
alternated).

    python benchmarks/gemm_promotion.py --size 1024 --promote-every 128 [--backend numba] [--threads N]

The promoted GEMM runs the same instructions (each chunk chained from zero) plus one binary32
add per chunk and output; the ratio printed is promoted / plain.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import mmasim


def words(rng, shape):
    """Random finite e4m3 words near one (no NaN)."""
    e = rng.integers(4, 10, size=shape)
    return ((rng.integers(0, 2, size=shape) << 7) | (e << 3) | rng.integers(0, 8, size=shape)).astype(np.uint8)


def best(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=1024, help="M = N = K (default 1024)")
    ap.add_argument("--promote-every", type=int, default=128)
    ap.add_argument("--backend", default=None, help="numpy, numba or auto (default: MMASIM_BACKEND, else auto)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--json", help="write the figures to this file")
    args = ap.parse_args(argv)
    model = mmasim.MMA("H100", "wgmma.mma_async.k32.f32.e4m3.e4m3", backend=args.backend)
    rng = np.random.default_rng(0)
    n = args.size
    A, B = words(rng, (n, n)), words(rng, (n, n))
    kw = dict(model=model, threads=args.threads, progress=False)
    mmasim.gemm(A[:64, :64], B[:64, :64], None, **kw)                       # compile / warm once
    mmasim.gemm(A[:64, :128], B[:128, :64], None, promote_every=64, **kw)
    plain = promoted = float("inf")
    for _ in range(args.repeat):        # alternated, so that a change in the machine's load hits both
        plain = min(plain, best(lambda: mmasim.gemm(A, B, None, **kw), 1))
        promoted = min(promoted, best(lambda: mmasim.gemm(A, B, None, promote_every=args.promote_every, **kw), 1))
    doc = {"size": n, "promote_every": args.promote_every, "backend": model.backend or "default",
           "threads": args.threads, "plain_s": plain, "promoted_s": promoted, "ratio": promoted / plain}
    print(f"{n}^3 e4m3 GEMM: plain {plain:.2f} s, promote every {args.promote_every} {promoted:.2f} s, "
          f"ratio {promoted / plain:.3f}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=2)


if __name__ == "__main__":
    main()
