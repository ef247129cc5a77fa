#!/usr/bin/env python3
"""Instructions per product of ``Model.dot`` (one thread), counted by valgrind.

    python benchmarks/instructions_per_product.py Ampere m16n8k16.f32.f16.f16.f32 [--rows 20000]
    python benchmarks/instructions_per_product.py B200 tcgen05.mma.kind::f8f6f4 --q a_type=e4m3 b_type=e4m3 d_type=f32

runs this script twice under ``valgrind --tool=callgrind``, once without the measured
``dot`` and once with it (``--worker N``, the inputs generated identically in both runs),
with ``MMASIM_BACKEND`` set to ``--backend`` (numba unless told), and prints the difference
of the two totals divided by rows x K: the instructions of the call, per product; and the part of it in JIT-compiled code (functions without a symbol,
callgrind's ``???:0x...``: the kernels).  OpenBLAS runs one thread (its idle threads spin,
and callgrind counts the spinning).  The kernels are compiled (or loaded) first outside valgrind, for the
host CPU named to numba explicitly (``NUMBA_CPU_NAME`` / ``NUMBA_CPU_FEATURES``): valgrind
reports other CPU features, which would make numba miss its cache and compile under
valgrind.  valgrind does not run AVX-512: on a CPU with it the kernels are compiled without
the AVX-512 features (AVX2 code, the count of a CPU without AVX-512).  Counts, not seconds: repeatable whatever else the machine runs
(docs/performance.md).
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile


def _model(arch, ins, q):
    import mmasim
    return mmasim.MMA(arch, ins, **q)


def worker(arch, ins, q, n, rows):
    import numpy as np

    from mmasim.operands import wordgen
    m = _model(arch, ins, q)
    rng = np.random.default_rng(1)

    def w(fmt, shape):
        x = wordgen.words(fmt, shape, rng, wordgen.WordKind.NEAR_ONE, padding=False)
        b = fmt.container_bits
        return x.astype(np.uint8 if b <= 8 else np.uint16 if b <= 16 else np.uint32)

    a, b, c = w(m.a_format, (rows, m.k)), w(m.b_format, (rows, m.k)), w(m.c_format, (rows,))
    s = {}
    if m.datapath.scale:
        s = dict(scale_a=w(m.scale_format, (rows, m.datapath.blocks)),
                 scale_b=w(m.scale_format, (rows, m.datapath.blocks)))
    m.dot(a[:64], b[:64], c[:64], threads=1, **{k: v[:64] for k, v in s.items()})   # compile / load the cache
    if n:
        m.dot(a[:n], b[:n], c[:n], threads=1, **{k: v[:n] for k, v in s.items()})


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("arch")
    ap.add_argument("instruction")
    ap.add_argument("--q", nargs="*", default=[], help="qualifiers, name=value")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--backend", default="numba", help="MMASIM_BACKEND of the measured call (default numba: "
                    "the auto choice would compute a call this small with numpy)")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    q = dict(x.split("=", 1) for x in args.q)
    if args.worker is not None:
        return worker(args.arch, args.instruction, q, args.worker, args.rows)
    import llvmlite.binding as ll
    features = ll.get_host_cpu_features()
    # valgrind runs no AVX-512 instruction: on a CPU that has it, the kernels are compiled without it
    no512 = sorted(f for f, on in features.items() if on and f.startswith("avx512"))
    for f in no512:
        features[f] = False
    if no512:
        print(f"valgrind cannot run AVX-512: the kernels are compiled for {ll.get_host_cpu_name()} "
              f"without {', '.join(no512)}", file=sys.stderr)
    env = dict(os.environ, NUMBA_CPU_NAME=ll.get_host_cpu_name(), OPENBLAS_NUM_THREADS="1",
               NUMBA_CPU_FEATURES=features.flatten(), MMASIM_BACKEND=args.backend)
    cmd = [sys.executable, os.path.abspath(__file__), args.arch, args.instruction, "--rows", str(args.rows),
           "--q", *args.q, "--worker"]
    for n in ("0", str(args.rows)):       # compile what both passes use into the cache, outside valgrind
        subprocess.run(cmd + [n], env=env, check=True)
    totals, jit = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for n in (0, args.rows):
            out = os.path.join(tmp, f"cg{n}.out")
            subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + cmd + [str(n)],
                           env=env, check=True, capture_output=True)
            totals.append(int(re.search(r"^totals: (\d+)", open(out).read(), re.M).group(1)))
            report = subprocess.run(["callgrind_annotate", "--threshold=100", out], capture_output=True,
                                    text=True).stdout
            jit.append(sum(int(m.group(1).replace(",", "")) for m in
                           re.finditer(r"^\s*([\d,]+) \([^)]*\)\s+\?\?\?:0x[0-9a-f]+ \[\?\?\?\]", report, re.M)))
    k = _model(args.arch, args.instruction, q).k
    n = args.rows * k
    print(f"{args.arch} {args.instruction}: {totals[1] - totals[0]} instructions for {args.rows} x {k} products: "
          f"{(totals[1] - totals[0]) / n:.1f} per product, {(jit[1] - jit[0]) / n:.1f} of them in compiled code")


if __name__ == "__main__":
    main()
