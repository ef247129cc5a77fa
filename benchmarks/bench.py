#!/usr/bin/env python3
"""mmasim speed: batched dot products and single-tile matrix calls, per backend,
side by side with MMA-Sim 2.1.1 when its interpreter is given.

    python benchmarks/bench.py                          # mmasim backends only
    python benchmarks/bench.py --peer-python /work/peer/venv/bin/python
    python benchmarks/bench.py --memory                 # + 10 M dot products, peak RSS
    python benchmarks/bench.py --quick                  # smaller batches
    python benchmarks/bench.py --scale --peer-python ...  # + default threading, GEMM, Dask
    python benchmarks/bench.py --startup                # + fresh-process start-up and a cold warmup (benchmarks/startup.py)

The first tables run pinned to one CPU core (``--cpu``), single-threaded (torch
too).  ``--scale`` adds what each tool does with its default threading (mmasim:
every core; MMA-Sim: torch's default threads, no pinning), mmasim's multi-core
speed-up, whole GEMMs (mmasim.gemm against MMA-Sim chaining its K tiles over the
whole M x N) and mmasim.gemm on dask arrays on a two-process local cluster.  "ns/product" is wall time divided by the number of products a*b, i.e.
batch x K.  Both simulators get the same words: random finite values near one
(signs mixed), scales near 1.  MMA-Sim 2.1.1 is timed in a subprocess of the
given interpreter started in a temporary directory, so that this repository's
``mmasim`` package is not the one it imports.  Figures are printed, never
asserted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import mmasim  # noqa: E402
from mmasim import backends
from mmasim.operands import wordgen  # noqa: E402

# label, arch, instruction, qualifiers, (peer class, peer arch, peer shape_and_type) or None, kind
CASES = [
    ("Ampere mma.sync m16n8k16 f32.f16.f16.f32", "Ampere", "m16n8k16.f32.f16.f16.f32", {},
     ("MMA", "Ampere", "m16n8k16.f32.f16.f16.f32"), "T-FDPA"),
    ("Hopper wgmma m64nNk16 f32.f16.f16", "Hopper", "wgmma.m64n8k16.f32.f16.f16", {},
     ("WGMMA", "Hopper", "m64n8k16.f32.f16.f16"), "T-FDPA"),
    ("B200 tcgen05 kind::tf32", "B200", "tcgen05.mma.kind::tf32", {},
     ("TCGen05MMA", "Blackwell", "m128n8k8.kind::tf32.f32.tf32.tf32"), "T-FDPA"),
    ("B200 tcgen05 kind::f16 f32.f16.f16", "B200", "tcgen05.mma.kind::f16.f32.f16.f16", {},
     ("TCGen05MMA", "Blackwell", "m128n8k16.kind::f16.f32.f16.f16"), "T-FDPA"),
    ("B200 tcgen05 kind::f8f6f4 e4m3.e4m3", "B200", "tcgen05.mma.kind::f8f6f4",
     dict(a_type="e4m3", b_type="e4m3", d_type="f32"),
     ("TCGen05MMA", "Blackwell", "m128n8k32.kind::f8f6f4.f32.e4m3.e4m3"), "T-FDPA"),
    ("B200 kind::mxf8f6f4 e4m3 ue8m0", "B200", "tcgen05.kind::mxf8f6f4.block_scale",
     dict(a_type="e4m3", b_type="e4m3"),
     ("TCGen05MMABlockScale", "Blackwell", "m128n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"), "block-scaled"),
    ("B200 kind::mxf4nvf4 NVFP4 (ue4m3, 4X)", "B200", "tcgen05.kind::mxf4nvf4.4X", {},
     ("TCGen05MMABlockScale", "Blackwell", "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3"), "block-scaled"),
    ("B200 kind::mxf4 (ue8m0, 2X)", "B200", "tcgen05.kind::mxf4.block_scale", {},
     ("TCGen05MMABlockScale", "Blackwell", "m128n8k64.kind::mxf4.block32.f32.e2m1.e2m1.ue8m0"), "block-scaled"),
    # integer (uniform random s8 words, C any s32 word): MMA-Sim 2.1.1 has no integer MMA
    ("Ampere mma.sync m16n8k32 s32.s8.s8.s32", "Ampere", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", {},
     None, "integer"),
]

TILES = [
    ("Ampere m16n8k16 tile (16x8x16)", "Ampere", "m16n8k16.f32.f16.f16.f32", {}, 16, 8,
     ("MMA", "Ampere", "m16n8k16.f32.f16.f16.f32"), 20e-6),
    ("B200 m128n256k16 tile, kind::f16", "B200", "tcgen05.mma.kind::f16.f32.f16.f16", {}, 128, 256,
     ("TCGen05MMA", "Blackwell", "m128n256k16.kind::f16.f32.f16.f16"), 2e-3),
]

TARGET = {"T-FDPA": {"numba": 3.0, "numpy": 30.0}, "block-scaled": {"numba": 5.0, "numpy": 30.0},
          "integer": {"numba": 3.0, "numpy": 30.0}}

#: the project's other speed targets, which docs/performance.md ("Against the targets") sets each
#: run's figures against (tests/test_doc_figures.py checks that the page states these values)
GOALS = {
    "startup_s": 1.0,                  # import mmasim + a first 64-row dot, warm kernel cache
    "window_vs_peer": 150,             # x MMA-Sim, one core, window datapaths
    "instructions_per_product": 12,    # callgrind, window datapaths (instructions_per_product.py)
    "block_scaled_vs_peer": 40,        # x MMA-Sim, one core, NVFP4 / MXF4 / MXF8
    "block_scaled_vs_f16": 1.5,        # ns per product against B200 kind::f16, at most
    "two_core_speedup": 1.8,           # on 2 cores, large batches
    "end_to_end_vs_peer": 75,          # x MMA-Sim, both tools' default threading
    "suite_cold_minutes": 5,           # pytest -q from an empty kernel cache
}


# ------------------------------------------------------------------- inputs
def near_one(fmt, shape, rng):
    """Container words of finite values near one (mixed signs) in ``fmt``, in the
    narrowest unsigned dtype that holds them (:mod:`mmasim.operands.wordgen`, kind ``near_one``)."""
    words = wordgen.words(fmt, shape, rng, wordgen.WordKind.NEAR_ONE, padding=False)
    bits = fmt.container_bits
    return words.astype(np.uint8 if bits <= 8 else np.uint16 if bits <= 16 else np.uint32 if bits <= 32 else np.uint64)


def make_inputs(model, n, rng, M=None, N=None):
    """Dot-product batches of ``n`` rows, or (with ``M``, ``N``) one tile's ``A``, ``B``, ``C``."""
    dp = model.datapath
    if M is None:
        a = near_one(model.a_format, (n, dp.k), rng)
        b = near_one(model.b_format, (n, dp.k), rng)
        c = near_one(model.c_format, (n,), rng)
        s = {}
        if dp.scale:
            s = dict(scale_a=near_one(model.scale_format, (n, dp.blocks), rng),
                     scale_b=near_one(model.scale_format, (n, dp.blocks), rng))
        return a, b, c, s
    a = near_one(model.a_format, (M, dp.k), rng)
    b = near_one(model.b_format, (dp.k, N), rng)
    c = near_one(model.c_format, (M, N), rng)
    return a, b, c, {}


def best_time(fn, repeat, min_time=0.2):
    best = float("inf")
    t_all = time.perf_counter()
    for i in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        if i >= 2 and time.perf_counter() - t_all > min_time * repeat:
            break
    return best


# --------------------------------------------------------------------- peer
PEER_SCRIPT = textwrap.dedent(r'''
    import hashlib, json, os, sys, time
    import numpy as np
    CPU = int(sys.argv[3])
    if CPU >= 0:     # one core, one thread; else torch's default threading, every core
        try:
            os.sched_setaffinity(0, {CPU})
        except Exception:
            pass
    import torch
    if CPU >= 0:
        torch.set_num_threads(1)
    import mmasim
    from mmasim.nv_ptx import MMA, WGMMA, TCGen05MMA, TCGen05MMABlockScale
    CLS = dict(MMA=MMA, WGMMA=WGMMA, TCGen05MMA=TCGen05MMA, TCGen05MMABlockScale=TCGen05MMABlockScale)
    jobs = json.loads(open(sys.argv[1]).read())
    data = np.load(sys.argv[2])

    def tensor(words, fmt):
        w = np.ascontiguousarray(words)
        if fmt in ("f16",):
            return torch.from_numpy(w.astype(np.uint16).view(np.float16))
        if fmt in ("f32", "tf32"):
            return torch.from_numpy(w.astype(np.uint32).view(np.float32))
        if fmt in ("e4m3", "ue4m3"):
            return torch.from_numpy(w.astype(np.uint8)).view(torch.float8_e4m3fn)
        if fmt == "e5m2":
            return torch.from_numpy(w.astype(np.uint8)).view(torch.float8_e5m2)
        if fmt == "ue8m0":
            return torch.from_numpy(w.astype(np.uint8)).view(torch.float8_e8m0fnu)
        if fmt == "e2m1x":   # packed two per byte, first element in the high nibble
            w = w.astype(np.uint8)
            return torch.from_numpy(np.ascontiguousarray((w[..., 0::2] << 4) | w[..., 1::2]))
        raise ValueError(fmt)

    def best(fn, repeat):
        b = float("inf")
        t0 = time.perf_counter()
        for i in range(repeat):
            t = time.perf_counter(); fn(); b = min(b, time.perf_counter() - t)
            if i >= 1 and time.perf_counter() - t0 > 3.0:
                break
        return b

    out = {}
    for job in jobs:
        key = job["key"]
        try:
            cls, arch, name = job["peer"]
            op = CLS[cls](arch, name)
            f = job["formats"]
            a, b, c = (tensor(data[key + x], f[i]) for i, x in enumerate(("_a", "_b", "_c")))
            if job["mode"] == "gemm":     # chain the K tiles over the whole M x N
                k, blk = job["k"], job.get("block") or 1
                A, B, C = (data[key + x] for x in ("_a", "_b", "_c"))
                ta = tensor(A, f[0])
                tb = tensor(np.ascontiguousarray(B.T), f[1]).T     # packed along K, as MMA-Sim reads B
                tc = tensor(C, f[2])
                sa = tensor(data[key + "_sa"], f[3]) if (key + "_sa") in data.files else None
                sb = tensor(data[key + "_sb"], f[3]) if (key + "_sb") in data.files else None
                per = 2 if f[0] == "e2m1x" else 1          # elements per stored entry along K

                def fn():
                    d = tc
                    for k0 in range(0, A.shape[1], k):
                        args = (ta[:, k0 // per:(k0 + k) // per], tb[k0 // per:(k0 + k) // per, :], d)
                        if sa is not None:
                            args += (sa[:, k0 // blk:(k0 + k) // blk], sb[k0 // blk:(k0 + k) // blk, :])
                        d = op(*args)
                    return d
                t = time.perf_counter(); d = fn(); out[key] = time.perf_counter() - t
                dw = d.contiguous().view(torch.int32).numpy().astype(np.uint32)
                out[key + "_words"] = hashlib.sha256(dw.tobytes()).hexdigest()
                continue
            if job["mode"] == "tile":
                args = (a, b, c)
                if "_sa" in "".join(data.files) and (key + "_sa") in data.files:
                    args += (tensor(data[key + "_sa"], f[3]), tensor(data[key + "_sb"], f[3]))
                fn = lambda: op(*args)
            else:
                args = (a, b, c)
                if (key + "_sa") in data.files:
                    args += (tensor(data[key + "_sa"], f[3]), tensor(data[key + "_sb"], f[3]))
                fn = lambda: op.dpa(*args)
            fn()
            out[key] = best(fn, job["repeat"])
        except Exception as exc:
            out[key] = "error: " + type(exc).__name__ + ": " + str(exc)[:200]
    print(json.dumps(out))
''')


def add_peer_job(jobs, arrays, key, model, peer, a, b, c, scales=None, n=None, **job):
    """Queue one MMA-Sim job: its operand words (the first ``n`` rows, or all) under ``key`` in
    ``arrays``, and the job (``mode``, ``repeat``, ...) with the operands' formats in ``jobs``."""
    rows = slice(None) if n is None else slice(n)
    arrays.update({key + "_a": a[rows], key + "_b": b[rows], key + "_c": c[rows]})
    if scales:
        arrays.update({key + "_sa": scales["scale_a"][rows], key + "_sb": scales["scale_b"][rows]})
    formats = [model.a_format.key, model.b_format.key, model.c_format.key,
               model.scale_format.key if model.scale_format else ""]
    jobs.append(dict(key=key, peer=peer, formats=formats, **job))


def run_peer(python, jobs, arrays, cpu):
    with tempfile.TemporaryDirectory() as tmp:
        jpath, dpath = Path(tmp, "jobs.json"), Path(tmp, "data.npz")
        jpath.write_text(json.dumps(jobs))
        np.savez(dpath, **arrays)
        spath = Path(tmp, "peer_bench.py")
        spath.write_text(PEER_SCRIPT)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
        proc = subprocess.run([python, "-I", str(spath), str(jpath), str(dpath), str(cpu)], cwd=tmp,
                              env=env, capture_output=True, text=True, timeout=3600)
        if proc.returncode != 0:
            print("MMA-Sim 2.1.1 run failed:\n" + proc.stderr[-2000:], file=sys.stderr)
            return {}
        return json.loads(proc.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------- main
def fmt_ns(x):
    return f"{x:8.2f}" if isinstance(x, float) else f"{'n/a':>8s}"


def peer_cells(row, value, unit, cols):
    """The MMA-Sim column and the speed-up per backend: ``value`` is the peer's figure
    (recorded in ``row``, printed times ``unit``), or its failure message / None."""
    if not isinstance(value, float):
        return f" {'n/a':>11s}  ({value})" if value else f" {'n/a':>11s}"
    row["peer"] = value
    return f" {value * unit:11.1f} " + " ".join(f"{value / row[be]:8.1f}x" for be in cols)


def memory_run(backend, n):
    code = textwrap.dedent(f'''
        import resource, sys, time, numpy as np
        sys.path.insert(0, {str(ROOT)!r})
        import mmasim
        m = mmasim.MMA("Ampere", "m16n8k16.f32.f16.f16.f32", backend={backend!r})
        n = {n}
        rng = np.random.default_rng(0)
        # f16 words in [0.5, 1) drawn straight into uint16: the word generator's int64
        # intermediates would swell the peak RSS this run measures
        a = (rng.integers(0x3800, 0x4000, size=(n, 16), dtype=np.uint16))
        b = a[::-1]
        c = np.zeros(n, np.uint32)
        m.dot(a[:16], b[:16], c[:16])
        t = time.perf_counter(); d = m.dot(a, b, c); t = time.perf_counter() - t
        base = (a.nbytes + c.nbytes + d.nbytes) / 2**20
        print(t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, base)
    ''')
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    if proc.returncode:
        return None
    t, rss, base = map(float, proc.stdout.split())
    return t, rss, base


# ---------------------------------------------------------------- scale
GEMMS = [
    ("GEMM 1024^3 Ampere m16n8k16 f32.f16.f16.f32", "Ampere", "m16n8k16.f32.f16.f16.f32", {}, 1024, 1024, 1024,
     ("MMA", "Ampere", "m16n8k16.f32.f16.f16.f32")),
    ("GEMM 512^3 B200 NVFP4 (mxf4nvf4, ue4m3, 4X)", "B200", "tcgen05.kind::mxf4nvf4.4X", {}, 512, 512, 512,
     ("TCGen05MMABlockScale", "Blackwell", "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3")),
]


def _digest(words):
    return hashlib.sha256(np.ascontiguousarray(np.asarray(words).astype(np.uint32)).tobytes()).hexdigest()


def dask_run(model, A, B, C, chunk, skw):
    """Seconds of mmasim.gemm on dask arrays on a local cluster of two worker processes, and
    whether its words equal ``expect``; ``None`` without dask.distributed."""
    try:
        import dask.array as da
        from dask.distributed import Client, LocalCluster
    except ImportError:
        return None
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        dA, dB, dC = da.from_array(A, chunks=(chunk, -1)), da.from_array(B, chunks=(-1, chunk)), \
            da.from_array(C, chunks=(chunk, chunk))
        dsk = {}
        if skw:
            dsk = dict(scale_a=da.from_array(skw["scale_a"], chunks=(chunk, -1)),
                       scale_b=da.from_array(skw["scale_b"], chunks=(-1, chunk)))
        warm = mmasim.gemm(dA[:chunk], dB[:, :chunk], dC[:chunk, :chunk], model=model,
                           **{k: (v[:chunk] if k == "scale_a" else v[:, :chunk]) for k, v in dsk.items()})
        client.compute(warm).result()         # workers import mmasim and compile once
        t = time.perf_counter()
        d = client.compute(mmasim.gemm(dA, dB, dC, model=model, **dsk)).result()
        return time.perf_counter() - t, d


def scale_run(args):
    """Default threading of both tools on batched dot products, mmasim's speed-up over
    one thread, whole GEMMs against MMA-Sim chaining its K tiles, and dask."""
    from mmasim.execution import threads as mthreads
    cores = mthreads.default_threads()
    rng = np.random.default_rng(777)
    n = 20_000 if args.quick else 200_000
    n_peer = 4_000 if args.quick else 20_000
    out, jobs, arrays = {}, [], {}
    print(f"default threading: mmasim on every core ({cores}), MMA-Sim 2.1.1 with torch's default threads; "
          f"unpinned; ns per product\n")
    for idx, (label, arch, ins, q, peer, kind) in enumerate(CASES):
        if peer is None:
            continue
        # the compiled kernels in their steady state (under auto a datapath's first 2^22 products are numpy's)
        model = mmasim.MMA(arch, ins, backend="numba" if "numba" in backends.available() else None, **q)
        a, b, c, s = make_inputs(model, n, rng)
        model.dot(a[:64], b[:64], c[:64], **{k: v[:64] for k, v in s.items()})
        row = {"label": label, "k": model.k, "cores": cores}
        for name, th in (("one", 1), ("all", None)):
            row[name] = best_time(lambda: model.dot(a, b, c, threads=th, **s), 5) / (n * model.k) * 1e9
        key = f"mdot{idx}"
        add_peer_job(jobs, arrays, key, model, peer, a, b, c, s, n_peer, mode="dot", repeat=3)
        row["peer_n"] = n_peer
        out[key] = row
    for idx, (label, arch, ins, q, M, N, K, peer) in enumerate(GEMMS):
        if args.quick:
            M, N, K = M // 2, N // 2, K // 2
        model = mmasim.MMA(arch, ins, **q)
        dp = model.datapath
        A, B = near_one(model.a_format, (M, K), rng), near_one(model.b_format, (K, N), rng)
        C = near_one(model.c_format, (M, N), rng)
        skw = {}
        if dp.scale:
            skw = dict(scale_a=near_one(model.scale_format, (M, K // dp.block), rng),
                       scale_b=near_one(model.scale_format, (K // dp.block, N), rng))
        mmasim.gemm(A[:min(M, 128)], B[:, :min(N, 128)], C[:min(M, 128), :min(N, 128)], model=model,
                    **{k: (v[:128] if k == "scale_a" else v[:, :128]) for k, v in skw.items()})
        row = {"label": label, "M": M, "N": N, "K": K}
        t = time.perf_counter()
        d = mmasim.gemm(A, B, C, model=model, threads=1, progress=False, **skw)
        row["one"] = time.perf_counter() - t
        t = time.perf_counter()
        d = mmasim.gemm(A, B, C, model=model, progress=False, **skw)
        row["all"] = time.perf_counter() - t
        row["digest"] = _digest(d)
        key = f"gemm{idx}"
        add_peer_job(jobs, arrays, key, model, peer, A, B, C, skw, mode="gemm", repeat=1, k=model.k,
                     block=dp.block or 1)
        if idx == 0:
            r = dask_run(model, A, B, C, M // 2, skw)
            if r is not None:
                row["dask"], dd = r
                row["dask_same"] = _digest(dd) == row["digest"]
        out[key] = row
    peer = run_peer(args.peer_python, jobs, arrays, -1) if args.peer_python else {}
    for title, prefix, extra in (("batched dot", "mdot", ""), ("whole GEMM (seconds)", "gemm", f" {'same D':>7s}")):
        head = f"{title:44s} {'1 thread':>9s} {'all cores':>9s} {'speed-up':>9s}"
        if args.peer_python:
            head += f" {'MMA-Sim':>9s} {'x mmasim':>9s}" + extra
        print(head)
        print("-" * len(head))
        for key, row in out.items():
            if key.startswith(prefix):
                print(scale_line(key, row, peer if args.peer_python else None))
                if "dask" in row:
                    print(f"{'  the same on dask: 2-process LocalCluster':44s} {'':9s} {row['dask']:9.2f} "
                          f"{row['one'] / row['dask']:8.2f}x  (same D as in-process: "
                          f"{'yes' if row['dask_same'] else 'NO'}; 2x2 blocks)")
        print()
    return out


def scale_line(key, row, peer):
    """One row of the --scale tables; ``peer``: MMA-Sim's figures, or None."""
    line = f"{row['label']:44s} {row['one']:9.2f} {row['all']:9.2f} {row['one'] / row['all']:8.2f}x"
    if peer is None:
        return line
    p = peer.get(key)
    if not isinstance(p, float):
        return line + f" {'n/a':>9s}  ({p})"
    if key.startswith("mdot"):        # ns per product
        row["peer"] = p / (row["peer_n"] * row["k"]) * 1e9
        return line + f" {row['peer']:9.2f} {row['peer'] / row['all']:8.1f}x"
    row["peer"] = p                   # seconds; the D words compared by digest
    row["peer_same"] = peer.get(key + "_words") == row["digest"]
    return line + f" {p:9.2f} {p / row['all']:8.1f}x {'yes' if row['peer_same'] else 'NO':>7s}"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--peer-python", help="interpreter of a venv with mmasim==2.1.1 and torch")
    ap.add_argument("--cpu", type=int, default=0, help="CPU core to pin to (default 0)")
    ap.add_argument("--quick", action="store_true", help="smaller batches")
    ap.add_argument("--memory", action="store_true", help="also stream 10 million dot products and report peak RSS")
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--scale", action="store_true",
                    help="also: default threading of both tools, mmasim's multi-core speed-up, whole GEMMs, dask")
    ap.add_argument("--startup", action="store_true",
                    help="also: fresh-process start-up per backend and `mmasim warmup` into an empty cache "
                         "(benchmarks/startup.py), before the timed tables")
    args = ap.parse_args(argv)
    results = {}
    if args.startup:
        import startup
        table = startup.rows(warmup=True)
        startup.print_rows(table)
        print()
        results["startup"] = {label: figures for label, figures in table}
    if args.scale:      # before pinning: every core, each tool with its default threading
        results.update(scale_run(args))
    try:
        os.sched_setaffinity(0, {args.cpu})
    except (AttributeError, OSError):
        pass
    rng = np.random.default_rng(12345)
    have = backends.available()
    n_fast = 50_000 if args.quick else 400_000
    n_numpy = 20_000 if args.quick else 100_000
    n_peer = 4_000 if args.quick else 20_000
    print(f"mmasim {mmasim.__version__}, numpy {np.__version__}, backends: {', '.join(have)}; "
          f"one core (cpu {args.cpu}); ns per product a*b (batch x K)\n")
    peer_jobs, peer_arrays = [], {}
    for idx, (label, arch, ins, q, peer, kind) in enumerate(CASES):
        model = mmasim.MMA(arch, ins, **q)
        row = {"label": label, "instruction": model.instruction, "kind": kind, "k": model.k}
        a, b, c, s = make_inputs(model, n_fast, rng)
        for be in have:
            n = n_fast if be == "numba" else n_numpy
            aa, bb, cc = a[:n], b[:n], c[:n]
            ss = {k: v[:n] for k, v in s.items()}
            model.dot(aa[:64], bb[:64], cc[:64], backend=be, **{k: v[:64] for k, v in ss.items()})
            t = best_time(lambda: model.dot(aa, bb, cc, backend=be, **ss), 5 if be == "numba" else 3)
            row[be] = t / (n * model.k) * 1e9
        if args.peer_python and peer is not None:
            key = f"dot{idx}"
            add_peer_job(peer_jobs, peer_arrays, key, model, peer, a, b, c, s, n_peer, mode="dot", repeat=3)
            row["peer_n"] = n_peer
        results[f"dot{idx}"] = row
    for idx, (label, arch, ins, q, M, N, peer, target) in enumerate(TILES):
        model = mmasim.MMA(arch, ins, **q)
        A, B, C, _ = make_inputs(model, 0, rng, M, N)
        row = {"label": label, "instruction": model.instruction, "M": M, "N": N, "k": model.k, "target_s": target}
        for be in have:
            model(A, B, C, backend=be)
            row[be] = best_time(lambda: model(A, B, C, backend=be), 200 if M * N < 1000 else 20, min_time=0.01)
        if args.peer_python:
            key = f"tile{idx}"
            add_peer_job(peer_jobs, peer_arrays, key, model, peer, A, B, C, mode="tile", repeat=10)
        results[f"tile{idx}"] = row
    peer = run_peer(args.peer_python, peer_jobs, peer_arrays, args.cpu) if args.peer_python else {}

    # ---- tables
    cols = [be for be in ("numba", "numpy") if be in have]
    head = f"{'batched dot':44s} {'K':>3s} " + " ".join(f"{be + ' ns':>9s}" for be in cols)
    head += f" {'target':>9s}"
    if args.peer_python:
        head += f" {'MMA-Sim ns':>11s} " + " ".join(f"{'x ' + be:>9s}" for be in cols)
    print(head)
    print("-" * len(head))
    for key, row in results.items():
        if not key.startswith("dot"):
            continue
        line = f"{row['label']:44s} {row['k']:3d} " + " ".join(fmt_ns(row.get(be)) + " " for be in cols)
        line += f" {'<= %g/%g' % (TARGET[row['kind']]['numba'], TARGET[row['kind']]['numpy']):>9s}"
        if args.peer_python:
            p = peer.get(key, None if "peer_n" in row else "MMA-Sim 2.1.1 has no such instruction")
            line += peer_cells(row, p / (row["peer_n"] * row["k"]) * 1e9 if isinstance(p, float) else p, 1, cols)
        print(line)
    print()
    head = f"{'one Model(A, B, C) call':44s} " + " ".join(f"{be + ' us':>10s}" for be in cols) + f" {'target':>10s}"
    if args.peer_python:
        head += f" {'MMA-Sim us':>11s} " + " ".join(f"{'x ' + be:>9s}" for be in cols)
    print(head)
    print("-" * len(head))
    for key, row in results.items():
        if not key.startswith("tile"):
            continue
        line = f"{row['label']:44s} " + " ".join(f"{row[be] * 1e6:10.1f}" for be in cols)
        line += f" {'<= %g' % (row['target_s'] * 1e6):>10s}"
        if args.peer_python:
            line += peer_cells(row, peer.get(key), 1e6, cols)
        print(line)
    if args.memory:
        print()
        n = 10_000_000
        for be in cols:
            r = memory_run(be, n)
            if r is None:
                print(f"10 M dot products ({be}): failed")
                continue
            t, rss, base = r
            results[f"memory_{be}"] = dict(seconds=t, peak_rss_mib=rss, arrays_mib=base)
            print(f"10 M dot products, Ampere m16n8k16, {be:5s}: {t:6.1f} s, {t / (n * 16) * 1e9:5.1f} ns/product, "
                  f"peak RSS {rss:7.0f} MiB (inputs and output alone {base:.0f} MiB)")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
