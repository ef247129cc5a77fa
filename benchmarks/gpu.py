"""The one prepared device script of the CUDA backend (issue 31): every part on one GPU, in one run.

    python benchmarks/gpu.py --out DIR            # on a GPU machine (numba-cuda installed)
    python benchmarks/gpu.py --out DIR --simulate # a dry run: every part at tiny sizes in numba-cuda's simulator
    python benchmarks/gpu.py --out DIR --budget 190 --parts rows,gemm   # a share of a lent machine's minutes

Writes ``DIR/gpu.json`` (``mmasim.gpu/1``) and ``DIR/gpu.log``.  Parts, each under its own time
budget (:data:`BUDGET`, seconds, or ``--budget`` shared in those proportions; what a part could
not start in time is listed in its ``skipped``), the whole well under 8 minutes
(tools/hardware/device_session.sh runs it after the H200 measurement, in one budget):

- ``validate``: every bundled vector file under ``backend="cuda"`` (``mmasim validate --backend cuda``);
- ``rows``: random rows (2^24 on a GPU) of one datapath of every family (:data:`FAMILIES`), the
  cuda backend's words compared word for word with the CPU compiled backend's (numba, every
  core), both timed;
- ``throughput``: the body alone on operands already on the device, per family, timed with CUDA
  events (products per second);
- ``gemm``: an H100 e4m3 ``wgmma`` GEMM with ``promote_every=128`` and a B200 NVFP4 GEMM, sizes
  doubling up to 8192^3 while the budget lasts (each from host arrays: the GEMM layer's
  promotion runs on the host);
- ``preset``: ``mmasim.torch.linear`` under ``H100-fp8-tensor``, forward and backward, sizes
  doubling up to a 4096 x 4096 layer on a batch of 4096;
- ``attention``: ``scaled_dot_product_attention`` under every attention mode, on CUDA tensors
  (``backend="cuda"``) and on their CPU copies (the numba backend), words compared (the plain
  softmax and ``cudnn-mxfp8`` use torch's own float32 softmax, whose CUDA kernels may differ from
  its CPU kernels in the last bits: docs/torch.md, "On the device"); the ex2 and
  FFMA rules (:mod:`mmasim.arith.ex2`, :mod:`mmasim.torch.attention_steps`) on 2^24 random inputs
  on the device and in numpy, words compared (in the simulator: CPU tensors under the cuda backend).

The JSON names the machine (``nvidia-smi``, else numba-cuda's device name).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import subprocess
import sys
import time
import traceback

#: one datapath of every family (and the sparse forms): name -> (architecture, instruction)
FAMILIES = {
    "window f16": ("A100", "mma.sync.m16n8k16.f32.f16.f16.f32"),
    "window e4m3": ("H100", "wgmma.mma_async.m64n8k32.f32.e4m3.e4m3"),
    "block-scaled MX e4m3": ("B200",
                             "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e4m3.e4m3.ue8m0"),
    "block-scaled NVFP4": ("B200", "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3"),
    "RTX group-scaled": ("RTX Blackwell",
                         "mma.sync.kind::mxf4.block_scale.scale_vec::2X.block32.m16n8k64.f32.e2m1.e2m1.ue8m0"),
    "two-stage": ("CDNA3", "v_mfma.m16n16k16.f32.f16.f16"),
    "exact-sum": ("CDNA1", "v_mfma.m32n32k8.f32.f16.f16"),
    "fma f32": ("CDNA1", "v_mfma.m32n32k2.f32.f32.f32"),
    "fma f64": ("A100", "mma.sync.m8n8k4.f64.f64.f64.f64"),
    "mul-add": ("Ampere", "mma.sync.m8n8k4.f32.f16.f16"),
    "ftz mul-add": ("CDNA2", "v_mfma.m32n32k4.f32.bf16.bf16"),
    "integer": ("A100", "mma.sync.m16n8k32.s32.s8.s8"),
    "sparse window": ("A100", "mma.sync.sp.m16n8k16.f32.f16.f16"),
    "sparse NVFP4": ("B200", "tcgen05.mma.sp.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3"),
}

#: seconds each part may start work in (a part's work already started runs to its end)
BUDGET = {"validate": 70, "rows": 125, "throughput": 60, "gemm": 100, "preset": 60, "attention": 45}

#: sizes: on a GPU, and in the simulator (--simulate)
SIZES = {
    False: {"rows": 1 << 24, "throughput": 1 << 24, "gemm": (1024, 8192), "preset": (512, 4096),
            "attention": ((1, 2, 384, 64), 1 << 24)},
    # (the gemm sizes: the first M = N = K and the last; NVFP4 takes M in multiples of 128;
    # attention: (batch, heads, tokens, head dimension) and the ex2 / FFMA inputs)
    True: {"rows": 96, "throughput": 64, "gemm": (128, 128), "preset": (64, 64), "attention": ((1, 1, 8, 16), 4096)},
}

H100_FP8 = ("H100", "wgmma.mma_async.m64n8k32.f32.e4m3.e4m3")
B200_NVFP4 = FAMILIES["block-scaled NVFP4"]


class Guard:
    """A part's budget: :meth:`left` seconds, :meth:`skip` records what was not started."""

    def __init__(self, seconds: float):
        self.end = time.perf_counter() + seconds
        self.skipped: list = []

    def left(self) -> float:
        return self.end - time.perf_counter()

    def allows(self, what, estimate: float = 0.0) -> bool:
        if self.left() > estimate:
            return True
        self.skipped.append(what)
        return False


class Log:
    def __init__(self, path):
        self.f = open(path, "w")

    def __call__(self, *args):
        line = " ".join(str(a) for a in args)
        print(line, flush=True)
        self.f.write(line + "\n")
        self.f.flush()


def machine(simulate: bool) -> dict:
    """The machine: GPU name and driver (nvidia-smi, else numba-cuda), CPU cores, platform."""
    out = {"cpu cores": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}
    if simulate:
        out["gpu"] = "numba-cuda simulator (NUMBA_ENABLE_CUDASIM=1): no GPU"
        return out
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        out["nvidia-smi"] = r.stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        out["nvidia-smi"] = f"unavailable: {exc}"
    try:
        from numba import cuda
        dev = cuda.get_current_device()
        name = dev.name.decode() if isinstance(dev.name, bytes) else str(dev.name)
        out["gpu"] = f"{name} (sm_{dev.compute_capability[0]}{dev.compute_capability[1]})"
    except Exception as exc:  # noqa: BLE001 - recorded, the parts then fail visibly
        out["gpu"] = f"unavailable: {type(exc).__name__}: {exc}"
    return out


def _operands(m, n, rng, mixed: int = 1 << 14):
    """``(a, b, c, kw)``: ``n`` rows of words for ``m``, the first ``mixed`` from
    :func:`mmasim.operands.wordgen.operands` (specials, subnormals, edges mixed in: slow to
    draw), the rest uniform random container words (sparse metadata: legal rows' again), in the
    plan's word dtypes."""
    import numpy as np

    from mmasim.operands import wordgen

    r = min(n, mixed)
    a, b, c, kw = wordgen.operands(m, r, rng, "mixed")
    fmts = [m.a_format, m.b_format, m.c_format] + [m.scale_format] * 2
    dts = list(m.plan.word_dtypes) + [np.uint8] * 2
    out = []
    for i, (name, x) in enumerate(zip(["a", "b", "c", *kw], [a, b, c, *kw.values()])):
        if name == "sparse_metadata":
            x = x.astype(np.uint32)
            out.append(np.concatenate([x, x[rng.integers(0, r, n - r)]]))
            continue
        y = np.empty((n,) + x.shape[1:], dts[i])
        y[:r] = x
        y[r:] = rng.integers(0, 1 << fmts[i].container_bits, size=(n - r,) + x.shape[1:], dtype=dts[i])
        out.append(y)
    return out[0], out[1], out[2], dict(zip(kw, out[3:]))


def part_validate(guard, log, simulate):
    from mmasim import backends
    from mmasim.vectors import files as vectors
    from mmasim.vectors import validate as v

    files = vectors.find(None)
    if simulate:                # a dry run: one file (the simulator runs a thread per row in Python)
        files = files[:1]
    results = []
    os.environ[backends.ENV] = "cuda"
    try:
        for path in files:      # file by file: what the budget leaves out is listed
            if guard.allows(str(path)):
                results += v.validate([path], show=1)
    finally:
        os.environ.pop(backends.ENV, None)
    s = v.summary(results)
    flat = {k: s[k] for k in s if isinstance(s[k], (int, float, bool, str))}
    log("validate --backend cuda:", flat, f"({len(files) - len(results)} files not reached)")
    return {"summary": flat, "ok": bool(s["ok"]), "files": len(results), "bundled files": len(files)}


def part_rows(guard, log, simulate):
    import numpy as np

    import mmasim
    from mmasim import backends
    from mmasim.backends.cuda.backend import CudaBackend

    n = SIZES[simulate]["rows"]
    cpu = "numba" if "numba" in backends.available() else "numpy"
    if _WARMING:                # the CPU kernels compiled into the cache meanwhile (--warm-cpu)
        try:
            _WARMING[0].wait(timeout=max(1.0, guard.left() - 60))
        except subprocess.TimeoutExpired:
            log("rows: the CPU kernels are still compiling; the comparisons compile what is left")
    out = {}
    for name, (arch, instruction) in FAMILIES.items():
        if not guard.allows(name):
            continue
        m = mmasim.MMA(arch, instruction)
        a, b, c, kw = _operands(m, n, np.random.default_rng(24))
        warm = min(n, CudaBackend.CHUNK_ELEMENTS // max(m.datapath.k, 1))     # one chunk: its kernel compiled
        m.dot(a[:warm], b[:warm], c[:warm], backend="cuda", **{k: x[:warm] for k, x in kw.items()})
        t0 = time.perf_counter()
        got = m.dot(a, b, c, backend="cuda", **kw)
        t1 = time.perf_counter()
        want = m.dot(a, b, c, backend=cpu, **kw)
        t2 = time.perf_counter()
        same = bool(np.array_equal(got, want))
        products = n * m.datapath.k
        out[name] = {"arch": arch, "instruction": instruction, "accumulator": m.datapath.accumulator,
                     "sparse": bool(m.datapath.sparse), "rows": n, "identical": same,
                     "mismatches": int(np.count_nonzero(got != want)), "cpu backend": cpu,
                     "cuda s": t1 - t0, "cpu s": t2 - t1,
                     "cuda products/s (with copies)": products / (t1 - t0), "cpu products/s": products / (t2 - t1)}
        log(f"rows {name}: {n} rows, identical {same}, cuda {t1 - t0:.3f} s, {cpu} {t2 - t1:.3f} s")
    return out


def part_throughput(guard, log, simulate):
    import numpy as np
    from numba import cuda

    import mmasim
    from mmasim import backends
    from mmasim.backends.cuda.rows import dense_args

    n = SIZES[simulate]["throughput"]
    be = backends.get("cuda")
    out = {}
    for name, (arch, instruction) in FAMILIES.items():
        if not guard.allows(name):
            continue
        m = mmasim.MMA(arch, instruction)
        plan = m.plan
        if plan.sparse_rule is not None or plan.order is not None or plan.c_add is not None:
            out[name] = {"skipped": "the body of the dense datapath times it (sparse: the selection first)"}
            continue
        a, b, c, kw = _operands(m, n, np.random.default_rng(5))
        args = tuple(cuda.to_device(x) if isinstance(x, np.ndarray) else x
                     for x in dense_args(plan, a, b, c, kw.get("scale_a"), kw.get("scale_b")))
        be.run(plan, args, n)           # compile
        start, stop = cuda.event(), cuda.event()
        start.record()
        be.run(plan, args, n)
        stop.record()
        stop.synchronize()
        ms = start.elapsed_time(stop)
        rate = n * m.datapath.k / (ms / 1e3) if ms > 0 else None
        out[name] = {"rows": n, "k": m.datapath.k, "ms": ms, "products/s": rate,
                     "accumulator": m.datapath.accumulator}
        log(f"throughput {name}: {n} rows in {ms:.3f} ms, {rate and f'{rate:.3g}'} products/s")
    return out


def _random_gemm(m, M, N, K, rng):
    """Random words of A (M, K), B (K, N), C (M, N) and the scales of a block-scaled ``m``."""
    import numpy as np

    fa, fb = m.a_format.container_bits, m.b_format.container_bits
    A = rng.integers(0, 1 << fa, (M, K), dtype=np.uint64).astype(m.plan.word_dtypes[0])
    B = rng.integers(0, 1 << fb, (K, N), dtype=np.uint64).astype(m.plan.word_dtypes[1])
    if m.datapath.a in ("e4m3",):       # finite e4m3 words: no NaN (0x7f / 0xff)
        A[(A & 0x7F) == 0x7F] = 0
        B[(B & 0x7F) == 0x7F] = 0
    C = np.zeros((M, N), np.uint32)
    extra = {}
    if m.datapath.scale:
        blocks = K // m.datapath.block
        extra = {"scale_a": rng.integers(0x30, 0x40, (M, blocks)).astype(np.uint8),
                 "scale_b": rng.integers(0x30, 0x40, (blocks, N)).astype(np.uint8)}
    return A, B, C, extra


def part_gemm(guard, log, simulate):
    import numpy as np

    import mmasim
    from mmasim import backends

    start, top = SIZES[simulate]["gemm"]
    out = {}
    for label, (arch, instruction), opts in (("H100 e4m3 wgmma, promote_every=128", H100_FP8, {"promote_every": 128}),
                                             ("B200 NVFP4", B200_NVFP4, {})):
        m = mmasim.MMA(arch, instruction)
        runs, size, last = [], start, None
        while size <= top:
            estimate = 0.0 if last is None else last * 8      # M, N and K doubled
            if not guard.allows(f"{label} {size}^3", estimate):
                break
            A, B, C, extra = _random_gemm(m, size, size, size, np.random.default_rng(size))
            t0 = time.perf_counter()
            d = mmasim.gemm(A, B, C, model=m, backend="cuda", progress=False, **opts, **extra)
            last = time.perf_counter() - t0
            run = {"M=N=K": size, "s": last, "products/s": size ** 3 / last, "shape": list(d.shape)}
            if size == start:       # the smallest, word for word against the CPU backend
                cpu = "numba" if "numba" in backends.available() else "numpy"
                want = mmasim.gemm(A, B, C, model=m, backend=cpu, progress=False, **opts, **extra)
                run.update({"identical": bool(np.array_equal(d, want)), "cpu backend": cpu})
            runs.append(run)
            log(f"gemm {label} {size}^3: {last:.2f} s")
            size *= 2
        out[label] = runs
    return out


def part_preset(guard, log, simulate):
    import torch

    import mmasim.torch as mt
    from mmasim import backends

    batch0, top = SIZES[simulate]["preset"]
    em = mt.preset("H100-fp8-tensor")
    os.environ[backends.ENV] = "cuda"
    runs = []
    try:
        features, last = batch0, None
        while features <= top:
            if not guard.allows(f"{features} x {features}, batch {features}", 0.0 if last is None else last * 8):
                break
            torch.manual_seed(0)
            x = torch.randn(features, features, requires_grad=True)
            w = torch.randn(features, features, requires_grad=True)
            t0 = time.perf_counter()
            y = mt.linear(x, w, emulation=em)
            t1 = time.perf_counter()
            y.backward(torch.ones_like(y))
            t2 = time.perf_counter()
            last = t2 - t0
            runs.append({"batch": features, "features": features, "forward s": t1 - t0, "backward s": t2 - t1,
                         "finite": bool(torch.isfinite(y).all())})
            log(f"preset H100-fp8-tensor {features} x {features}, batch {features}: forward {t1 - t0:.2f} s, "
                f"backward {t2 - t1:.2f} s")
            features *= 2
    finally:
        os.environ.pop(backends.ENV, None)
    return runs


#: the attention modes: (preset, Emulation options)
ATTENTION = {"softmax": ("A100-bf16", {}), "fa3-fp8": ("H100-fp8-fa3", {}),
             "fa3-fp8-flash": ("H100-fp8-fa3", {"attention": "fa3-fp8-flash"}),
             "cudnn-mxfp8": ("B200-mxfp8-sdpa", {}), "sage3-nvfp4": ("RTX5090-nvfp4-sage3", {})}


def _differing(a, b) -> int:
    """How many float32 words of two tensors differ."""
    import torch
    return int((a.cpu().contiguous().view(torch.int32) != b.cpu().contiguous().view(torch.int32)).sum())


def part_attention(guard, log, simulate):
    import attrs
    import numpy as np
    import torch

    import mmasim.torch as mt
    from mmasim import backends
    from mmasim.arith import ex2 as rule
    from mmasim.torch import attention_steps

    shape, n = SIZES[simulate]["attention"]
    dev = "cpu" if simulate else "cuda"
    out = {}
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.uniform(-151, 129, n).astype(np.float32),            # every result's binade
                        (rng.standard_normal(n) * 2.0 ** rng.integers(-30, 3, n)).astype(np.float32),
                        rng.integers(0, 1 << 32, n // 16, dtype=np.uint64).astype(np.uint32).view(np.float32)])
    t = time.perf_counter()
    got = rule.ex2(torch.from_numpy(x).to(dev))
    out["ex2 differing words"] = _differing(got, torch.from_numpy(rule.ex2(x)))
    a, b, c = (rng.standard_normal(n).astype(np.float32) * 2.0 ** rng.integers(-20, 20, n) for _ in range(3))
    got = attention_steps.ffma(*(torch.from_numpy(v).to(dev) for v in (a, b, c)))
    out["ffma differing words"] = _differing(got, attention_steps.ffma(*(torch.from_numpy(v) for v in (a, b, c))))
    out["ex2 + ffma s"] = time.perf_counter() - t
    log(f"attention: ex2 {out['ex2 differing words']} / {x.size} words differ, ffma {out['ffma differing words']} / {n}")
    torch.manual_seed(0)
    q, k, v = (torch.randn(shape) for _ in range(3))
    for mode, (preset, options) in ATTENTION.items():
        if not guard.allows(mode):
            continue
        em = attrs.evolve(mt.preset(preset), **options)
        runs = {}
        for name, where, backend in (("device", dev, "cuda"), ("host", "cpu", "numba")):
            os.environ[backends.ENV] = backend
            try:
                t0 = time.perf_counter()
                with torch.no_grad(), mt.emulate(None, em):
                    runs[name] = torch.nn.functional.scaled_dot_product_attention(*(x.to(where) for x in (q, k, v)))
                runs[name + " s"] = time.perf_counter() - t0
            finally:
                os.environ.pop(backends.ENV, None)
        out[mode] = {"differing words": _differing(runs["device"], runs["host"]), "words": runs["host"].numel(),
                     "on the device": str(runs["device"].device), "device s": runs["device s"],
                     "host s": runs["host s"]}
        log(f"attention {mode}: {out[mode]['differing words']} / {out[mode]['words']} words differ "
            f"(device {runs['device s']:.2f} s, host {runs['host s']:.2f} s)")
    return out


def warm_cpu() -> int:
    """``--warm-cpu``: the CPU compiled backend's kernel of every family compiled into its cache
    (run by :func:`main` in a subprocess while the GPU validates)."""
    import numpy as np

    import mmasim
    from mmasim import backends

    if "numba" not in backends.available():
        return 0
    for arch, instruction in FAMILIES.values():
        m = mmasim.MMA(arch, instruction)
        a, b, c, kw = _operands(m, 64, np.random.default_rng(0))
        m.dot(a, b, c, backend="numba", **kw)
    return 0


_WARMING: list = []

PARTS = {"validate": part_validate, "rows": part_rows, "throughput": part_throughput, "gemm": part_gemm,
         "preset": part_preset, "attention": part_attention}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="the folder of gpu.json and gpu.log (made if absent)")
    ap.add_argument("--simulate", action="store_true", help="every part at tiny sizes in numba-cuda's simulator")
    ap.add_argument("--parts", default=",".join(PARTS), help="comma-separated parts (default: all)")
    ap.add_argument("--budget", type=float, default=None,
                    help=f"seconds for the parts run, shared in the proportions of BUDGET (default {sum(BUDGET.values())}: "
                         "BUDGET as it is)")
    ap.add_argument("--warm-cpu", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.warm_cpu:
        return warm_cpu()
    if not args.simulate and "rows" in args.parts:
        _WARMING.append(subprocess.Popen([sys.executable, __file__, "--warm-cpu", "--out", args.out],
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    if args.simulate:
        os.environ["NUMBA_ENABLE_CUDASIM"] = "1"        # before numba is imported
    folder = pathlib.Path(args.out)
    folder.mkdir(parents=True, exist_ok=True)
    log = Log(folder / "gpu.log")
    t_start = time.perf_counter()
    report = {"schema": "mmasim.gpu/1", "simulate": args.simulate, "machine": machine(args.simulate),
              "budget s": BUDGET, "parts": {}}
    log("machine:", report["machine"])
    names = args.parts.split(",")
    unknown = [n for n in names if n not in PARTS]
    if unknown:
        ap.error(f"unknown part(s) {', '.join(unknown)}; parts: {', '.join(PARTS)}")
    scale = 1.0 if args.budget is None else args.budget / sum(BUDGET[n] for n in names)
    report["budget s"] = {n: BUDGET[n] * scale for n in names}
    for name in names:
        guard = Guard(BUDGET[name] * scale)
        t0 = time.perf_counter()
        try:
            result, error = PARTS[name](guard, log, args.simulate), None
        except Exception as exc:  # noqa: BLE001 - a part's failure is recorded, the others still run
            result, error = None, f"{type(exc).__name__}: {exc}"
            log(f"part {name} failed:\n{traceback.format_exc()}")
        report["parts"][name] = {"result": result, "error": error, "skipped": guard.skipped,
                                 "s": time.perf_counter() - t0}
        log(f"part {name}: {time.perf_counter() - t0:.1f} s, skipped {guard.skipped}")
    report["total s"] = time.perf_counter() - t_start
    (folder / "gpu.json").write_text(json.dumps(report, indent=1, default=str))
    log(f"total {report['total s']:.1f} s; wrote {folder / 'gpu.json'}")
    return 0 if all(p["error"] is None for p in report["parts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
