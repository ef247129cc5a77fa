"""The Python side of ``tools/hardware/h200_run.sh``: measure every Hopper instruction on one H200
in one short run, and pack the words (docs/harness.md, "Running on a lent H200").

    python tools/hardware/h200_run.py plan    [--instructions I ...] [--min-cases N] [--tile-cap N]
    python tools/hardware/h200_run.py measure --work DIR [--simulate] [--jobs N] [--deadline EPOCH] ...
    python tools/hardware/h200_run.py pack    --work DIR --out DIR [--tile-cap N]
    python tools/hardware/h200_run.py standin SPEC.json CASES OUT.bin IN0.bin ...

``measure`` builds every kernel of the plan with nvcc on every core (into the harness cache, where
``mmasim harness run`` finds them) and runs one ``mmasim.harness.measure.measure`` per instruction, many at
a time, each with its own seed and enough random tiles for ``--min-cases`` random cases, with the
probe ladders.  ``--simulate`` replaces the device binary by a stand-in program with the same file
protocol (``standin``: the simulator computes the words the binary would have written), so
everything after the binary (reading D back, the vector files, packing, validating) runs as on the
device.  ``pack`` keeps every random case of a tile of at most ``--tile-cap`` entries (a seeded
sample of ``--tile-cap`` entries of a larger tile: wgmma's N = 256 tiles hold 16,384), every probe
case and as many ``cross`` cases, and writes the kept cases as vector files (smallest unsigned
dtype per array) into ``.tar.xz`` parts of at most 15 MiB, with ``MANIFEST.json`` and a summary.
``tools/hardware/unpack_h200.py`` turns the parts back into vector files.
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import hashlib
import io
import json
import lzma
import math
import multiprocessing
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tarfile
import time
import zlib

import numpy as np

ARCH = "Hopper"
SCHEMA = "mmasim.h200-run/1"
#: the archive parts: each at most this many bytes (the device returns files of at most 16 MiB)
PART_BYTES = 15 * 1024 * 1024
#: at most this many parts (the device returns at most 8 files: the parts, the log and the summary)
MAX_PARTS = 6
PART_NAME = "h200-hopper-vectors.part{:02d}.tar.xz"
#: the seed of the first instruction; instruction i (in mmasim.instructions order) gets SEED + i
SEED = 35
MIN_CASES = 10_000
#: random entries kept per tile (tiles of more entries are sampled)
TILE_CAP = 1024
#: seconds kept free before the deadline for packing
PACK_RESERVE = 60
#: the most array data pack reads from one file the device wrote (wgmma's N = 256 files hold up to
#: 295,000 cases, about 250 MiB, near mmasim.vectors.files.MAX_BYTES)
LOAD_BYTES = 4 << 30


#: the most processes at a time by default (the largest wgmma instruction peaks at about 0.8 GB)
MAX_JOBS = 16


def _cores() -> int:
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    return max(1, min(n, MAX_JOBS))


def log(*parts):
    print(f"[{time.strftime('%H:%M:%S')}]", *parts, flush=True)


# ------------------------------------------------------------------ plan
def _priority(instruction: str) -> int:
    """The order the instructions run in (where the evidence is thinnest first), so that a run cut
    short by its deadline has measured those."""
    fp8 = re.search(r"\be[45]m[23]\b", instruction) is not None
    integer = re.search(r"\.[su](8|4)\b|\.b1\b", instruction) is not None
    if instruction.startswith("wgmma"):
        if integer:
            return 4
        if ".sp." in instruction:
            return 3
        return 1 if fp8 else 0
    if fp8:
        return 2
    return 6 if integer else 5


def plan(instructions=None, min_cases: int = MIN_CASES, tile_cap: int = TILE_CAP, seed: int = SEED) -> list:
    """One entry per instruction: its kernels ``(name, M, N)``, the random ``tiles`` (a multiple of
    the word kinds, so every kind gets as many tiles, and enough that the cases kept by ``pack``
    reach ``min_cases``), its ``seed`` and the ``pairs`` (model, spec) to build and run.  An
    instruction the harness cannot generate is an entry without kernels, its ``skipped`` saying why."""
    import mmasim
    from mmasim.harness import generate as gen
    from mmasim.harness import measure as hrun

    order = {ins: i for i, ins in enumerate(mmasim.instructions(ARCH))}
    pairs, skipped = gen.specs_for(ARCH, instructions)
    by = {}
    for model, spec in pairs:
        by.setdefault(model.instruction, []).append((model, spec))
    kinds = len(hrun.KINDS)
    out = []
    for ins, ps in by.items():
        kernels = []
        for model, spec in ps:
            M, N = model.shape if model.shape is not None else (model.legal_m[0], model.legal_n[0])
            N = spec.options.get("n") or N
            M = spec.options.get("m") or M
            kernels.append((spec.name, int(M), int(N)))
        kept_per_tile = sum(min(M * N, tile_cap) for _, M, N in kernels)
        tiles = kinds * max(1, math.ceil(min_cases / (kinds * kept_per_tile)))
        out.append({"instruction": ins, "seed": seed + order.get(ins, len(order)), "tiles": tiles,
                    "kernels": kernels, "random_cases_kept": tiles * kept_per_tile,
                    "priority": _priority(ins), "pairs": ps})
    for ins, why in skipped:
        out.append({"instruction": ins, "seed": None, "tiles": 0, "kernels": [], "random_cases_kept": 0,
                    "priority": _priority(ins), "pairs": [], "skipped": why})
    out.sort(key=lambda e: (e["priority"], order.get(e["instruction"], 0)))
    return out


def _public(entry) -> dict:
    return {k: v for k, v in entry.items() if k != "pairs"}


# ------------------------------------------------------------------ build
NOT_BUILT = "not built: the build deadline passed"


def build(entries, kernels_dir, jobs: int, deadline: float) -> dict:
    """Compile every kernel of ``entries`` from its generated source (``kernels_dir``, written by
    ``mmasim harness generate``) into the harness cache, ``jobs`` nvcc at a time; a kernel not
    started by ``deadline`` is not built.  Returns ``{kernel: {"ok", "seconds", "error"}}``."""
    from mmasim.harness import host, toolchain

    jobs_list = []
    for e in entries:
        for model, spec in e["pairs"]:
            text = host.cuda_source(spec)
            path = pathlib.Path(kernels_dir) / f"{spec.name}.cu"
            if path.exists() and path.read_text() != text:
                raise SystemExit(f"h200_run: {path} differs from the source harness run compiles: regenerate it")
            jobs_list.append((spec.name, text, spec.target))

    def one(job):
        name, text, target = job
        if time.time() > deadline:
            return name, {"ok": False, "seconds": 0.0, "error": NOT_BUILT}
        t0 = time.time()
        try:
            toolchain.compile_source(text, target, link=True)
        except toolchain.ToolchainError as exc:
            return name, {"ok": False, "seconds": round(time.time() - t0, 2), "error": str(exc)[-2000:]}
        return name, {"ok": True, "seconds": round(time.time() - t0, 2), "error": ""}

    with cf.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(pool.map(one, jobs_list))


# ------------------------------------------------------------------ devices
def _device(simulate: bool, work: pathlib.Path, info: dict):
    from mmasim.harness import host
    from mmasim.harness import measure as hrun

    class H200(hrun.CudaDevice):
        """GPU 0 with the info read once by the parent (no nvidia-smi call per worker)."""

        def __init__(self):
            super().__init__(0)
            self._info = dict(info)

    class StandIn(hrun.CudaDevice):
        """The device binary replaced by ``standin``: the same file protocol, the simulator's words."""

        source = "simulated"

        def __init__(self):
            super().__init__(0)
            self._info = dict(info)

        def run(self, spec, model, inputs, cases):
            return host.execute(spec, standin_program(spec, work / "standin"), inputs)[0]

    return StandIn() if simulate else H200()


def standin_program(spec, folder: pathlib.Path) -> pathlib.Path:
    """An executable with the file protocol of the kernel's binary (``NAME CASES OUT.bin IN...``)
    that runs :func:`standin` on ``spec``."""
    folder.mkdir(parents=True, exist_ok=True)
    spec_path = folder / f"{spec.name}.json"
    spec_path.write_text(spec.to_json())
    exe = folder / spec.name
    exe.write_text("#!/bin/sh\n" + f"exec {shlex.quote(sys.executable)} {shlex.quote(str(pathlib.Path(__file__).resolve()))}"
                   f" standin {shlex.quote(str(spec_path))} \"$@\"\n")
    exe.chmod(0o755)
    return exe


def standin(argv) -> int:
    """The stand-in binary: read the input files as the kernel's ``main()`` would, compute D with
    :class:`mmasim.harness.measure.SimulatedDevice`, write OUT.bin, print the harness line."""
    import mmasim
    from mmasim.harness import host
    from mmasim.harness import measure as hrun
    from mmasim.harness.spec import KernelSpec

    spec = KernelSpec.from_json(pathlib.Path(argv[0]).read_text())
    if len(argv) != 3 + len(spec.inputs):
        print(f"usage: {spec.name} CASES OUT.bin" + "".join(f" IN{i}.bin" for i in range(len(spec.inputs))),
              file=sys.stderr)
        return 1
    cases = int(argv[1])
    inputs = []
    for buf, path in zip(spec.inputs, argv[3:]):
        words = np.fromfile(path, dtype="<u4")
        if words.size != cases * host.words_per_case(spec, buf):
            print(f"mmasim-harness: error: input file has the wrong size: {path}", file=sys.stderr)
            return 2
        inputs.append(words)
    model = mmasim.MMA(spec.arch, spec.instruction, **dict(spec.qualifiers))
    print("mmasim-harness: device=stand-in (simulator) cc=9.0 runtime=0 driver=0", flush=True)
    out = hrun.SimulatedDevice().run(spec, model, inputs, cases)
    np.asarray(out, dtype="<u4").tofile(argv[2])
    return 0


# ------------------------------------------------------------------ measure
_WORKER = {}


def _measure_one(entry_name: str, tiles: int, seed: int, out: str, deadline: float) -> dict:
    from mmasim.errors import MMAError
    from mmasim.harness import measure as hrun

    rec = {"instruction": entry_name, "tiles": tiles, "seed": seed, "files": []}
    if time.time() > deadline:
        rec["status"] = "not run: the run deadline passed"
        return rec
    t0 = time.time()
    try:
        res = hrun.measure(ARCH, out, cases=tiles, probes=True, seed=seed, instructions=[entry_name],
                       device=_WORKER["device"], progress=False)
    except MMAError as exc:
        rec.update(status=f"failed: {type(exc).__name__}: {exc}", seconds=round(time.time() - t0, 2))
        return rec
    rec["seconds"] = round(time.time() - t0, 2)
    rec["skipped"] = [list(x) for x in res["skipped"]]
    rec["unprobed"] = [list(x) for x in res["unprobed"]]
    rec["files"] = [pathlib.Path(p).name for p in res["written"]]
    rec["status"] = "ok"
    if res["skipped"]:
        first = res["skipped"][0][1]
        rec["status"] = f"partly skipped: {first}" if rec["files"] else first
    return rec


def _init_worker(simulate, work, info):
    os.environ.setdefault("MMASIM_BACKEND", "numpy")
    _WORKER["device"] = _device(simulate, pathlib.Path(work), info)


def gpu_info(simulate: bool) -> dict:
    if simulate:
        return {"name": "stand-in (simulator)", "compute_capability": "9.0", "driver": "", "cuda": ""}
    from mmasim.harness import measure as hrun
    return hrun.CudaDevice(0).info()


HOLDER = r"""#include <cuda_runtime.h>
#include <cstdio>
#include <unistd.h>
int main() {
    int runtime = 0, driver = 0;
    cudaRuntimeGetVersion(&runtime);
    cudaDriverGetVersion(&driver);
    cudaError_t e = cudaFree(0);
    if (e != cudaSuccess) {
        printf("error: %s (CUDA runtime %d, driver %d)\n", cudaGetErrorString(e), runtime, driver);
        return 1;
    }
    printf("ok: CUDA runtime %d, driver %d\n", runtime, driver);
    fflush(stdout);
    pause();
    return 0;
}
"""


def _holder():
    """``(process, line)``: a program that opens a CUDA context and holds it for the whole run, so
    the driver stays initialised between the many short harness programs (a lent machine may not
    run in persistence mode), and says first whether the GPU runs what this nvcc builds.
    :class:`SystemExit` when it does not (a driver older than the runtime): no kernel would run."""
    import select

    from mmasim.harness import toolchain
    exe = toolchain.compile_source(HOLDER, "sm_90a", link=True)
    proc = subprocess.Popen([str(exe)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 120)
    line = proc.stdout.readline().strip() if ready else "error: no answer within 120 s"
    if not line.startswith("ok"):
        proc.kill()
        proc.wait()
        raise SystemExit(f"h200_run: the GPU cannot run what this nvcc builds: {line}")
    return proc, line


def measure(args) -> int:
    from mmasim.harness import toolchain

    work = pathlib.Path(args.work)
    (work / "vectors").mkdir(parents=True, exist_ok=True)
    status = {"schema": SCHEMA, "simulate": args.simulate, "arch": ARCH, "min_cases": args.min_cases,
              "tile_cap": args.tile_cap, "seed": args.seed, "timings": {}}
    t0 = time.time()
    entries = plan(args.instructions, args.min_cases, args.tile_cap, args.seed)
    status["plan"] = [_public(e) for e in entries]
    status["kernels"] = sum(len(e["kernels"]) for e in entries)
    status["timings"]["plan"] = round(time.time() - t0, 2)
    log(f"plan: {len(entries)} instructions, {status['kernels']} kernels")
    info = gpu_info(args.simulate)
    status["device"] = info
    try:
        nvcc = toolchain.find_nvcc("sm_90a")
        status["nvcc"] = {"path": nvcc.path, "version": nvcc.version, "origin": nvcc.origin}
    except toolchain.ToolchainError as exc:
        if not args.simulate:
            raise SystemExit(f"h200_run: {exc}")
        nvcc = None
        status["nvcc"] = {"error": str(exc)}
    _write(work / "status.json", status)
    deadline = args.deadline or (time.time() + 7 * 60)
    run_deadline = deadline - PACK_RESERVE
    # build: every kernel (or, in a rehearsal, those of --build-limit instructions)
    t0 = time.time()
    to_build = entries if not args.build_limit else entries[:args.build_limit]
    if nvcc is not None and not args.no_build:
        built = build(to_build, work / "kernels", args.jobs, run_deadline - 30)
    else:
        built = {}
    status["build"] = {"kernels": len(built), "failed": {k: b["error"] for k, b in built.items() if not b["ok"]},
                       "seconds_per_kernel": round(sum(b["seconds"] for b in built.values()) / max(1, len(built)), 2)}
    status["timings"]["build"] = round(time.time() - t0, 2)
    log(f"build: {len(built)} kernels in {status['timings']['build']} s "
        f"({len(status['build']['failed'])} failed)")
    _write(work / "status.json", status)
    # a kernel the compiler refused is not run; one not built by the build deadline is built by
    # harness run itself if its instruction still starts in time
    failed = {k for k, b in built.items() if not b["ok"] and b["error"] != NOT_BUILT}
    # run
    t0 = time.time()
    holder = None
    if not args.simulate:
        try:
            holder, line = _holder()
        except SystemExit as exc:
            status["aborted"] = str(exc)
            _write(work / "status.json", status)
            raise
        status["cuda_check"] = line
        log(f"CUDA context held: {line}")
    records = []
    try:
        todo = []
        for e in entries:
            bad = [built[k[0]]["error"] for k in e["kernels"] if k[0] in failed]
            if not e["kernels"]:
                _record(work, records, {"instruction": e["instruction"], "files": [], "status": e["skipped"]})
            elif bad:
                _record(work, records, {"instruction": e["instruction"], "files": [],
                                        "status": f"not run: a kernel was not built ({bad[0][:300]})"})
            else:
                todo.append(e)
        ctx = multiprocessing.get_context("fork")
        with cf.ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=ctx, initializer=_init_worker,
                                    initargs=(args.simulate, str(work), info)) as pool:
            futs = {pool.submit(_measure_one, e["instruction"], e["tiles"], e["seed"], str(work / "vectors"),
                                run_deadline): e for e in todo}
            for fut in cf.as_completed(futs):
                e = futs[fut]
                try:
                    rec = fut.result()
                except Exception as exc:       # a worker that died: record it, keep the others
                    rec = {"instruction": e["instruction"], "status": f"failed: {exc!r}", "files": []}
                _record(work, records, rec)
                log(f"{rec['status'][:8]:>8} {e['instruction']} ({rec.get('seconds', 0)} s, {len(rec['files'])} "
                    f"file(s))")
    finally:
        if holder is not None:
            holder.terminate()
            holder.wait(timeout=30)
    status["timings"]["run"] = round(time.time() - t0, 2)
    status["device"] = info
    _write(work / "status.json", status)
    ok = sum(r["status"] in ("ok",) for r in records)
    log(f"run: {ok} of {len(entries)} instructions in {status['timings']['run']} s")
    return 0


def _record(work: pathlib.Path, records: list, rec: dict) -> None:
    """Keep ``rec`` and append it to WORK/records.jsonl at once (pack reads it even when measure
    is stopped)."""
    records.append(rec)
    with open(work / "records.jsonl", "a") as fh:
        fh.write(json.dumps(rec) + "\n")


def _write(path: pathlib.Path, obj) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True, default=str))
    os.replace(tmp, path)


# ------------------------------------------------------------------ pack
def keep_indices(prov: dict, labels, tile_cap: int, rng) -> tuple:
    """``(indices, note)``: the cases of a ``harness run`` vector file that ``pack`` keeps.

    The file's cases are ``random_tiles`` tiles of ``M x N`` entries (``random_cases`` in all), then
    the probe tiles.  A random tile of at most ``tile_cap`` entries is kept whole, a larger one by a
    sample of ``tile_cap`` entries (``rng``, without replacement, in order); of a probe tile every
    probe entry (labelled with its probe) and as many of its ``cross`` entries."""
    labels = np.asarray(labels)
    total = labels.shape[0]
    tiles, random_cases = int(prov["random_tiles"]), int(prov["random_cases"])
    per = random_cases // tiles
    if per * tiles != random_cases or (total - random_cases) % per:
        raise ValueError(f"{random_cases} random cases are not {tiles} tiles, or {total - random_cases} probe "
                         f"cases not whole tiles of {per}")
    keep = []
    for t in range(tiles):
        base = t * per
        if per <= tile_cap:
            keep.append(np.arange(base, base + per))
        else:
            keep.append(base + np.sort(rng.choice(per, tile_cap, replace=False)))
    probe_tiles = (total - random_cases) // per
    for t in range(probe_tiles):
        idx = np.arange(random_cases + t * per, random_cases + (t + 1) * per)
        lab = labels[idx]
        probe = idx[lab != "cross"]
        cross = idx[lab == "cross"]
        if cross.size > probe.size:
            cross = np.sort(rng.choice(cross, probe.size, replace=False))
        keep.append(np.sort(np.concatenate([probe, cross])))
    keep = np.concatenate(keep) if keep else np.zeros(0, dtype=np.int64)
    note = ""
    if keep.size < total:
        note = (f"{keep.size} of the {total} cases measured: random tiles of {per} entries "
                + (f"sampled to {tile_cap} each" if per > tile_cap else "kept whole")
                + "; every probe entry and as many cross entries of each probe tile")
    return keep, note


def _narrow(x: np.ndarray) -> np.ndarray:
    """``x`` (unsigned words) in the smallest unsigned dtype that holds them."""
    x = np.asarray(x)
    top = int(x.max()) if x.size else 0
    for dt in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(dt).max:
            return x.astype(dt)
    return x.astype(np.uint64)


def transport(path: pathlib.Path, tile_cap: int, extra_prov: dict, validate: bool = True) -> tuple:
    """``(npz bytes, record)``: the kept cases of the vector file ``path`` as a vector file
    (uncompressed members in the smallest dtypes: the archive compresses them); with ``validate``,
    the record counts the kept cases where the simulator's word differs (``mismatches``)."""
    import attrs

    from mmasim.harness.measure import KINDS
    from mmasim.vectors import files as vectors

    vf = vectors.load(path, max_bytes=LOAD_BYTES)
    prov = dict(vf.provenance)
    rng = np.random.default_rng([int(prov.get("seed", 0)), zlib.crc32(str(prov.get("kernel", "")).encode())])
    keep, note = keep_indices(prov, vf.labels, tile_cap, rng)
    meta = dict(vf.meta)
    prov.update(extra_prov)
    if note:
        prov.update(measured_cases=int(prov["cases"]), cases=int(keep.size), kept=note)
    meta["provenance"] = prov
    meta["cases"] = int(keep.size)
    arrays = {"meta": np.array(json.dumps(meta, sort_keys=True))}
    for key in ("a", "b", "c", "d", "scale_a", "scale_b", "sparse_metadata"):
        value = getattr(vf, key)
        if value is not None:
            arrays[key] = _narrow(np.asarray(value)[keep])
    arrays["labels"] = np.asarray(vf.labels)[keep].astype(str)
    kept = attrs.evolve(vf, meta=meta, **{k: v for k, v in arrays.items() if k != "meta"})
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = buf.getvalue()
    rec = {"file": path.name, "instruction": vf.instruction, "kernel": prov.get("kernel", ""),
           "seed": prov.get("seed"), "measured_cases": int(len(vf)), "cases": int(keep.size),
           "random_cases": int(np.isin(arrays["labels"], KINDS).sum()),
           "random_tiles": prov.get("random_tiles"), "probe_cases": prov.get("probe_cases"),
           "source": prov.get("source"), "sha256": hashlib.sha256(data).hexdigest()}
    if validate:
        t0 = time.time()
        try:
            rec["mismatches"] = int(vectors.run_vector_file(kept).mismatches.size)
        except Exception as exc:           # the simulator fails on the file: said, never fatal here
            rec["validate_error"] = f"{type(exc).__name__}: {exc}"
        rec["validate_seconds"] = round(time.time() - t0, 2)
    return data, rec


def _rank(status: dict, instruction: str) -> int:
    """Where ``instruction`` stands in the plan (the order of the run)."""
    for i, e in enumerate(status.get("plan", [])):
        if e["instruction"] == instruction:
            return i
    return len(status.get("plan", []))


def _not_run(status, records) -> dict:
    """``{instruction: why}`` of each planned instruction that wrote no file, or not all of them."""
    why = {r["instruction"]: r.get("status", "?") for r in records}
    stopped = status.get("aborted") or "not finished: measure was stopped"
    return {e["instruction"]: why.get(e["instruction"], stopped)
            for e in status.get("plan", []) if why.get(e["instruction"]) != "ok"}


def _member(name: str, data: bytes) -> bytes:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(time.time())
    info.mode = 0o644
    return info.tobuf(format=tarfile.PAX_FORMAT) + data + b"\0" * (-len(data) % tarfile.BLOCKSIZE)


def _compress_member(job):
    os.environ.setdefault("MMASIM_BACKEND", "numpy")
    name, path, tile_cap, extra, validate = job
    try:
        data, rec = transport(pathlib.Path(path), tile_cap, extra, validate)
    except Exception as exc:             # one unreadable file must not lose the others
        return name, {"file": pathlib.Path(path).name, "error": f"{type(exc).__name__}: {exc}"}, None
    return name, rec, lzma.compress(_member(name, data), preset=6)


def pack(args) -> int:
    """Keep, convert and archive every vector file under ``WORK/vectors`` into ``OUT``; write the
    summary ``OUT/h200_summary.json``."""
    work, out = pathlib.Path(args.work), pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    status = json.loads((work / "status.json").read_text()) if (work / "status.json").exists() else {}
    records = []
    if (work / "records.jsonl").exists():
        records = [json.loads(line) for line in (work / "records.jsonl").read_text().splitlines() if line.strip()]
    extra = {k: v for k, v in (("nvcc", status.get("nvcc", {}).get("version")), ("mmasim_commit", args.commit))
             if v}
    # the files in the order the instructions ran in (thinnest evidence first), so that a part the
    # device cannot return holds the least wanted
    order = {f: i for i, f in enumerate(f for r in sorted(records, key=lambda r: _rank(status, r["instruction"]))
                                        for f in r.get("files", []))}
    files = sorted((work / "vectors").glob("*.npz"), key=lambda f: (order.get(f.name, len(order)), f.name))
    jobs = [(f"hopper/{f.name}", str(f), args.tile_cap, extra, not args.no_validate) for f in files]
    ctx = multiprocessing.get_context("fork")
    streams, unpacked = [], []
    with cf.ProcessPoolExecutor(max_workers=max(1, args.jobs), mp_context=ctx) as pool:
        for name, rec, blob in pool.map(_compress_member, jobs):
            if blob is None:
                log(f"{rec['file']}: not packed: {rec['error']}")
                unpacked.append(rec)
                continue
            streams.append((name, rec, blob))
            if rec.get("mismatches") or rec.get("validate_error"):
                log(f"{rec['file']}: {rec.get('mismatches', 0):,} of {rec['cases']:,} kept cases differ from the "
                    f"simulator{' (' + rec['validate_error'] + ')' if rec.get('validate_error') else ''}")
    # bin the members (each its own xz stream: concatenated streams are one valid .tar.xz) into parts
    parts, cur, size = [], [], 0
    for item in streams:
        if cur and size + len(item[2]) > PART_BYTES - 4096:
            parts.append(cur)
            cur, size = [], 0
        cur.append(item)
        size += len(item[2])
    if cur:
        parts.append(cur)
    manifest = {"schema": SCHEMA, "arch": ARCH, "device": status.get("device"), "nvcc": status.get("nvcc"),
                "simulate": status.get("simulate"), "mmasim_commit": args.commit, "seed": status.get("seed"),
                "min_cases": status.get("min_cases"), "tile_cap": args.tile_cap, "files": []}
    for i, part in enumerate(parts or [[]]):
        for name, rec, _ in part:
            manifest["files"].append(dict(rec, member=name, part=PART_NAME.format(i)))
    mbytes = json.dumps(manifest, indent=1, sort_keys=True, default=str).encode()
    head = lzma.compress(_member("hopper/MANIFEST.json", mbytes), preset=6)
    end = lzma.compress(b"\0" * (2 * tarfile.BLOCKSIZE))
    written = []
    for i, part in enumerate(parts or [[]]):
        path = out / PART_NAME.format(i)
        with open(path, "wb") as fh:
            fh.write(head)
            for _, _, blob in part:
                fh.write(blob)
            fh.write(end)
        written.append({"part": path.name, "bytes": path.stat().st_size, "files": len(part),
                        "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    if len(written) > MAX_PARTS:
        log(f"WARNING: {len(written)} parts, and the device returns at most {MAX_PARTS}: the last ones hold the "
            "instructions run last (a lower --tile-cap or --min-cases makes fewer)")
    by_ins = {}
    for rec in manifest["files"]:
        by_ins[rec["instruction"]] = by_ins.get(rec["instruction"], 0) + rec["random_cases"]
    status["timings"] = dict(status.get("timings", {}), pack=round(time.time() - t0, 2))
    for key, value in (args.timing or []):
        status["timings"][key] = float(value)
    if args.started:
        status["timings"]["total"] = round(time.time() - args.started, 2)
    summary = dict(status, archive=written, instructions=records, files=len(manifest["files"]),
                   cases_kept=sum(r["cases"] for r in manifest["files"]),
                   cases_measured=sum(r["measured_cases"] for r in manifest["files"]),
                   instructions_below_min_cases=sorted(k for k, v in by_ins.items() if v < (status.get("min_cases") or 0)),
                   mismatches=sum(f.get("mismatches", 0) for f in manifest["files"]),
                   validate_errors=[f["file"] for f in manifest["files"] if f.get("validate_error")],
                   not_packed=unpacked,
                   not_run=_not_run(status, records),
                   commit=args.commit)
    summary.pop("plan", None)
    _write(out / "h200_summary.json", summary)
    if not manifest["files"]:
        log("pack: no vector file to pack (see not_run in the summary)")
        return 1
    log(f"pack: {len(manifest['files'])} files, {summary['cases_kept']:,} of {summary['cases_measured']:,} cases "
        f"kept, {len(written)} part(s), {sum(w['bytes'] for w in written) / 2**20:.1f} MiB in "
        f"{status['timings']['pack']} s; " + ("not validated" if args.no_validate else
                                              f"{summary['mismatches']:,} mismatches with the simulator"))
    return 0


# ------------------------------------------------------------------ main
def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="h200_run.py", description=__doc__.split("\n\n")[0])
    p.add_argument("cmd", choices=("plan", "measure", "pack"))
    p.add_argument("--work", default="h200-work", help="the working folder (kernels, vector files, status)")
    p.add_argument("--out", default="", help="pack: the folder the archive parts and the summary go to")
    p.add_argument("--instructions", nargs="+", default=None, help="these Hopper instructions only (default: all)")
    p.add_argument("--min-cases", type=int, default=MIN_CASES, help="random cases kept per instruction, at least")
    p.add_argument("--tile-cap", type=int, default=TILE_CAP, help="random entries kept per tile, at most")
    p.add_argument("--seed", type=int, default=SEED, help="the seed of the first instruction (then +1 each)")
    p.add_argument("--jobs", type=int, default=_cores(), help="nvcc and harness processes at a time "
                   f"(default: the cores this process may use, at most {MAX_JOBS})")
    p.add_argument("--simulate", action="store_true", help="the stand-in binary instead of the GPU")
    p.add_argument("--deadline", type=float, default=0.0, help="epoch seconds by which packing must be done")
    p.add_argument("--build-limit", type=int, default=0, help="build the kernels of the first N instructions only")
    p.add_argument("--no-build", action="store_true", help="build nothing (with --simulate)")
    p.add_argument("--no-validate", action="store_true", help="pack: do not compare the kept cases with the simulator")
    p.add_argument("--commit", default="", help="what the source tree is (recorded in the provenance)")
    p.add_argument("--started", type=float, default=0.0, help="pack: when the run started (epoch seconds)")
    p.add_argument("--timing", nargs=2, action="append", metavar=("STEP", "SECONDS"),
                   help="pack: a step timed by the caller, for the summary")
    return p


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["standin"]:
        return standin(argv[1:])
    args = parser().parse_args(argv)
    from mmasim.errors import MMAError
    try:
        return _command(args)
    except MMAError as exc:
        print(f"h200_run.py: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


def _command(args) -> int:
    if args.cmd == "plan":
        entries = plan(args.instructions, args.min_cases, args.tile_cap, args.seed)
        print(json.dumps([_public(e) for e in entries], indent=1))
        return 0
    if args.cmd == "measure":
        return measure(args)
    if not args.out:
        raise SystemExit("h200_run.py pack: --out DIR is required")
    return pack(args)


if __name__ == "__main__":
    sys.exit(main())
