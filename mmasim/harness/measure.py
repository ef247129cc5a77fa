"""``mmasim harness run``: measure instructions on a GPU and write one vector file per instruction.

For every kernel of the architecture: draw cases (:func:`random_tiles`, optionally the probe
ladders, :func:`probe_tiles`), place them (the emitter's ``place``), run the kernel on a
:class:`Device`, read D back (``read``) and save every D entry as one dot-product case of an
``mmasim-vectors`` file (docs/vectors.md) with the device's provenance; ``mmasim validate`` on
the output folder then compares the simulator with the device.  A :class:`Device` is anything
with ``info()`` and ``run(spec, model, inputs, cases)``: :class:`CudaDevice` (nvcc),
:class:`mmasim.harness.amd.HipDevice` (hipcc) or :class:`SimulatedDevice` (:meth:`mmasim.Model.warp`,
for tests).  The default device and what it must report are those of the class the instruction
family has in the harness's table (:mod:`mmasim.harness.table`, :func:`device_class`); a device that is not the
architecture is refused (:func:`check_device`).
"""
from __future__ import annotations

import datetime
import pathlib
import re
import subprocess

import numpy as np

from mmasim.vectors import files as vectors
from mmasim.errors import CharacterizeError, HarnessError, MMAError, UnsupportedDatapath
from mmasim.operands import wordgen
from mmasim.execution.progress import bar as progress_bar
from mmasim.harness import generate as gen
from mmasim.harness import host, table, toolchain

#: the most random tiles per instruction one run draws (each tile's operands are held in memory)
MAX_TILES = 1 << 16

#: the word kinds of the random cases, in order; ``cancellation`` is built here (see _cancel)
KINDS = ("uniform", "near_one", "cancellation", "subnormal", "edge", "huge", "mixed")


# ------------------------------------------------------------------ devices
class Device:
    """The interface: ``info()`` -> dict (``name``, ``compute_capability`` "9.0", ``driver``,
    ``cuda``), and ``run(spec, model, inputs, cases)`` -> the output words (uint32, flat).
    ``source``: the provenance of its vector files (docs/vectors.md).  A family's device class
    (:func:`mmasim.harness.table.device`) also says what its ``compute_capability`` is for a kernel
    target: ``expected(target)``, and ``reports``, that value in words."""

    source = "hardware"

    def info(self) -> dict:                                  # pragma: no cover - interface
        raise NotImplementedError

    def run(self, spec, model, inputs, cases) -> np.ndarray:  # pragma: no cover - interface
        raise NotImplementedError


def _smi(args):
    try:
        r = subprocess.run(["nvidia-smi", *args], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise HarnessError("no NVIDIA GPU: nvidia-smi is not installed (harness run needs a GPU; "
                           "harness generate works without one)") from None
    except subprocess.SubprocessError as e:
        raise HarnessError(f"nvidia-smi failed: {e}") from None
    if r.returncode != 0:
        raise HarnessError(f"no usable NVIDIA GPU: nvidia-smi says: {(r.stderr or r.stdout).strip()[:200]}")
    return r.stdout


class CudaDevice(Device):
    """GPU ``index`` (default 0) through nvidia-smi and binaries built with nvcc."""

    reports = "compute capability"

    def __init__(self, index: int = 0):
        self.index = index
        self._info = None

    @staticmethod
    def expected(target: str) -> str:
        """The compute capability of ``target``: ``sm_90a`` -> ``9.0``."""
        cc = re.sub(r"[a-z]+$", "", target.split("_", 1)[1])
        return f"{cc[:-1]}.{cc[-1]}"

    def info(self) -> dict:
        if self._info is None:
            out = _smi([f"--id={self.index}", "--query-gpu=name,compute_cap,driver_version",
                        "--format=csv,noheader"]).strip().splitlines()
            if not out:
                raise HarnessError("no NVIDIA GPU found by nvidia-smi")
            name, cc, driver = (x.strip() for x in out[0].split(","))
            cuda = ""
            m = re.search(r"CUDA Version:\s*([\d.]+)", _smi([]))
            if m:
                cuda = m.group(1)
            self._info = {"name": name, "compute_capability": cc, "driver": driver, "cuda": cuda}
        return self._info

    def run(self, spec, model, inputs, cases) -> np.ndarray:
        exe = toolchain.compile_source(host.cuda_source(spec), spec.target, link=True)
        words, stdout = host.execute(spec, exe, inputs, env={"CUDA_VISIBLE_DEVICES": str(self.index)})
        m = re.search(r"runtime=(\d+)", stdout)
        if m:
            v = int(m.group(1))
            self.info()["cuda_runtime"] = f"{v // 1000}.{v % 1000 // 10}"
        return words


class SimulatedDevice(Device):
    """A device that computes D with the simulator from the placed register images (for tests and
    dry runs).  Understood: ``registers`` buffers of the 32-lane mma.sync family, wgmma.mma_async
    kernels (shared-memory images and warpgroup registers: :func:`mmasim.harness.nv_async.simulate`)
    and tcgen05.mma kernels (shared-memory images and per-thread Tensor Memory words:
    :func:`mmasim.harness.nv_tcgen05.simulate`)."""

    #: what its vector files are: the simulator's own words, never evidence
    source = "simulated"

    def __init__(self, name: str = "simulated", compute_capability: str = ""):
        self._info = {"name": name, "compute_capability": compute_capability, "driver": "", "cuda": ""}

    def info(self) -> dict:
        return self._info

    def run(self, spec, model, inputs, cases) -> np.ndarray:
        from mmasim.harness.nv_sync import selectors
        simulate = gen.emitter(model).simulate      # the emitter's own (shared-memory / Tensor Memory images)
        if simulate is not None:
            return simulate(spec, model, inputs, cases)
        if spec.threads != 32 or any(b.space != "registers" for b in spec.inputs):
            raise UnsupportedDatapath(f"SimulatedDevice: {spec.name} is not a 32-lane register kernel")
        bufs = {b.operand: np.asarray(x, dtype=np.uint32).reshape(cases, spec.threads, b.words)
                for b, x in zip(spec.inputs, inputs)}
        extra = [o for o in ("scale_a", "scale_b", "sparse_metadata") if o in bufs]
        sel = selectors(spec) if extra else {}
        out = []
        try:
            for k in range(cases):
                out.append(model.warp(bufs["a"][k], bufs["b"][k], bufs["c"][k],
                                      **{o: bufs[o][k] for o in extra}, **sel))
        except TypeError as e:          # a placement package without scale / metadata registers
            raise UnsupportedDatapath(f"SimulatedDevice: Model.warp cannot take {', '.join(extra)} "
                                      f"registers ({e})") from None
        return np.stack(out).astype(np.uint32).reshape(-1)


def device_class(model):
    """The device class ``model``'s kernels run on: its family's in the harness's table
    (:func:`mmasim.harness.table.device`)."""
    family = model.family.name
    held = table.device(family)
    if held is None:
        raise HarnessError(f"no harness device for {family} instructions (neither the harness's table nor a "
                           "plugin's mmasim_harness_devices names one)")
    try:
        return held.load()
    except (ImportError, AttributeError) as e:
        raise HarnessError(f"the {family} device {held.name} is not available ({e})") from None


def default_device(model) -> Device:
    """The device :func:`measure` uses when given none: a :func:`device_class` of ``model``, GPU 0."""
    return device_class(model)()


def check_device(device: Device, arch: str, target: str, kind=None) -> dict:
    """The device's info, or :class:`HarnessError` when it is not ``arch``: its
    ``compute_capability`` must be what ``kind`` (the family's device class; default the
    device's own class) expects for ``target`` (``9.0`` for ``sm_90a``, ``gfx942`` for ``gfx942``)."""
    kind = kind or type(device)
    if not hasattr(kind, "expected"):
        raise HarnessError(f"{kind.__name__} does not say what a device reports for {target}: pass the "
                           f"family's device class (device_class(model)) as kind")
    info = device.info()
    want = kind.expected(target)
    have = info.get("compute_capability", "")
    if have != want:
        raise HarnessError(f"the device {info.get('name', '?')} has {kind.reports} {have or '?'}, "
                           f"but {arch} kernels ({target}) need {want}")
    return info


# ------------------------------------------------------------------ cases
def _cancel(model, rng, tiles, M, K, N):
    """A and B whose products cancel in pairs: the second half of each row of A is the negated
    first half, the second half of each column of B equals the first half (float formats)."""
    a = wordgen.words(model.a_format, (tiles, M, K), rng, "near_one")
    b = wordgen.words(model.b_format, (tiles, K, N), rng, "near_one")
    h = K // 2
    gen_a = wordgen.WordGen(model.a_format)
    a[:, :, h:2 * h] = gen_a.negate(a[:, :, :h])
    b[:, h:2 * h, :] = b[:, :h, :]
    return a, b


def random_tiles(model, tiles: int, rng, M: int, N: int) -> tuple:
    """``(ops, labels)``: ``tiles`` random tiles, the kinds of :data:`KINDS` in turn."""
    dp, K = model.datapath, model.datapath.k
    kinds = [KINDS[i % len(KINDS)] for i in range(tiles)]
    A = np.zeros((tiles, M, K), dtype=np.uint64)
    B = np.zeros((tiles, K, N), dtype=np.uint64)
    C = np.zeros((tiles, M, N), dtype=np.uint64)
    integer = model.a_format.integer
    for kind in dict.fromkeys(kinds):
        idx = np.array([i for i, k in enumerate(kinds) if k == kind])
        n = len(idx)
        if kind == "cancellation":
            if integer:
                A[idx] = wordgen.words(model.a_format, (n, M, K), rng, "uniform")
                B[idx] = wordgen.words(model.b_format, (n, K, N), rng, "uniform")
            else:
                A[idx], B[idx] = _cancel(model, rng, n, M, K, N)
            C[idx] = wordgen.words(model.c_format, (n, M, N), rng, "near_one")
        else:
            A[idx] = wordgen.words(model.a_format, (n, M, K), rng, kind)
            B[idx] = wordgen.words(model.b_format, (n, K, N), rng, kind)
            C[idx] = wordgen.words(model.c_format, (n, M, N), rng, kind)
    ops = {"a": A, "b": B, "c": C}
    if dp.scale:
        # scale factors of the tile's kind (extreme scales with "huge" / "subnormal" / "edge"),
        # near 1 for near-one and cancellation tiles
        SA = np.zeros((tiles, M, dp.blocks), dtype=np.uint64)
        SB = np.zeros((tiles, dp.blocks, N), dtype=np.uint64)
        for kind in dict.fromkeys(kinds):
            idx = np.array([i for i, k in enumerate(kinds) if k == kind])
            sk = "near_one" if kind in ("near_one", "cancellation") else kind
            SA[idx] = wordgen.words(model.scale_format, (len(idx), M, dp.blocks), rng, sk)
            SB[idx] = wordgen.words(model.scale_format, (len(idx), dp.blocks, N), rng, sk)
        ops["scale_a"], ops["scale_b"] = SA, SB
    if dp.sparse:
        ops["sparse_metadata"] = wordgen.sparse_metadata(model.sparse_rule, K, tiles * M, rng).reshape(tiles, M, -1)
    labels = np.repeat(np.array(kinds, dtype=object), M * N)
    return ops, labels


def probe_tiles(model, probes: dict, M: int, N: int) -> tuple:
    """``(ops, labels)``: the dot-form probe cases placed on tile diagonals (row i of A, column i of
    B, C[i][i]); the other entries of A, B, C are the word 0, and every D entry is recorded
    (off-diagonal ones labelled ``cross``)."""
    dp, K = model.datapath, model.datapath.k
    a, b, c = (np.asarray(probes[x], dtype=np.uint64) for x in "abc")
    P = a.shape[0]
    per = min(M, N)
    tiles = max(1, -(-P // per))
    A = np.zeros((tiles, M, K), dtype=np.uint64)
    B = np.zeros((tiles, K, N), dtype=np.uint64)
    C = np.zeros((tiles, M, N), dtype=np.uint64)
    lab = np.full((tiles, M, N), "cross", dtype=object)
    given = np.asarray(probes.get("labels", [f"probe {i}" for i in range(P)]), dtype=object)
    ops = {"a": A, "b": B, "c": C}
    if dp.scale:
        one = _unit_scale(model)
        ops["scale_a"] = np.full((tiles, M, dp.blocks), one, dtype=np.uint64)
        ops["scale_b"] = np.full((tiles, dp.blocks, N), one, dtype=np.uint64)
    if dp.sparse:
        ops["sparse_metadata"] = _first_legal_metadata(model, tiles, M)
    for p in range(P):
        t, i = divmod(p, per)
        A[t, i, :] = a[p]
        B[t, :, i] = b[p]
        C[t, i, i] = c[p]
        lab[t, i, i] = given[p]
        if dp.scale:
            ops["scale_a"][t, i, :] = np.asarray(probes["scale_a"], dtype=np.uint64)[p]
            ops["scale_b"][t, :, i] = np.asarray(probes["scale_b"], dtype=np.uint64)[p]
        if dp.sparse and "sparse_metadata" in probes:
            ops["sparse_metadata"][t, i, :] = np.asarray(probes["sparse_metadata"], dtype=np.uint64)[p]
    return ops, lab.reshape(-1)


def _unit_scale(model) -> int:
    """The scale word of 1.0 (bias exponent) of the model's scale format."""
    f = model.scale_format
    return int(f.bias) << int(getattr(f, "man_bits", 0))


def _first_legal_metadata(model, tiles, M):
    rule, K = model.sparse_rule, model.datapath.k
    sel = min(rule.selectors)
    words = rule.words(K)
    nib = np.zeros(words * 8, dtype=np.uint64)
    nib[:rule.chunks(K)] = sel
    w = (nib.reshape(words, 8) << (np.arange(8, dtype=np.uint64) * np.uint64(4))).sum(axis=-1)
    return np.broadcast_to(w, (tiles, M, words)).astype(np.uint64).copy()


def dot_cases(model, ops: dict, D: np.ndarray) -> dict:
    """The tiles as dot-product cases of a vector file: case (t, i, j) is row i of A, column j
    of B, C[i][j] and D[i][j] (scales: row i of scale_a, column j of scale_b)."""
    A, B, C = ops["a"], ops["b"], ops["c"]
    T, M, K = A.shape
    N = B.shape[2]
    out = {
        "a": np.broadcast_to(A[:, :, None, :], (T, M, N, K)).reshape(-1, K),
        "b": np.broadcast_to(np.transpose(B, (0, 2, 1))[:, None, :, :], (T, M, N, K)).reshape(-1, K),
        "c": C.reshape(-1), "d": np.asarray(D, dtype=np.uint64).reshape(-1),
    }
    if "scale_a" in ops:
        nb = ops["scale_a"].shape[2]
        out["scale_a"] = np.broadcast_to(ops["scale_a"][:, :, None, :], (T, M, N, nb)).reshape(-1, nb)
        out["scale_b"] = np.broadcast_to(np.transpose(ops["scale_b"], (0, 2, 1))[:, None, :, :],
                                         (T, M, N, nb)).reshape(-1, nb)
    if "sparse_metadata" in ops:
        nw = ops["sparse_metadata"].shape[2]
        out["sparse_metadata"] = np.broadcast_to(ops["sparse_metadata"][:, :, None, :], (T, M, N, nw)).reshape(-1, nw)
    return out


def _concat(parts):
    keys = parts[0].keys()
    return {k: np.concatenate([p[k] for p in parts]) for k in keys}


def file_name(instruction: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", instruction.replace("::", "__")) + ".npz"


def measure(arch: str, out, *, cases: int = 100, probes: bool = False, seed: int = 0, instructions=None,
        device: Device | None = None, probe_source=None, progress=None) -> dict:
    """Measure ``instructions`` of ``arch`` (default: every one the harness can generate).

    ``cases``: random tiles (instruction executions) per instruction, each giving M x N
    dot-product cases; ``probes``: also the probe ladders, from ``probe_source(model) -> dict``
    (default :func:`mmasim.characterize.probe_cases`; an instruction it refuses with
    :class:`~mmasim.errors.CharacterizeError`, an integer one, runs without probes: listed in
    ``unprobed`` and said in its file's provenance ``probes``).  Returns ``{"written": [paths],
    "skipped": [(instruction, reason)], "unprobed": [(instruction, reason)], "device": info}``.
    """
    if isinstance(out, str) and out == "":
        raise HarnessError("harness run: out is the empty path; name the folder to write into "
                           "('.' for the working folder)")
    if isinstance(cases, bool) or not isinstance(cases, (int, np.integer)) or not 1 <= cases <= MAX_TILES:
        raise HarnessError(f"cases (random tiles per instruction, each held in memory and on the GPU) must be an "
                           f"integer from 1 to {MAX_TILES:,}, got {cases!r}; run several seeds for more")
    pairs, skipped = gen.specs_for(arch, instructions)
    if not pairs:
        raise HarnessError(f"{arch}: nothing to run" + (f" ({skipped[0][1]})" if skipped else ""))
    first, first_spec = pairs[0]
    if device is None:
        device = default_device(first)
    info = check_device(device, arch, first_spec.target, device_class(first))
    if probes and probe_source is None:
        from mmasim.characterize import probe_cases as probe_source
    per_ins = {}
    for _, spec in pairs:
        per_ins[spec.instruction] = per_ins.get(spec.instruction, 0) + 1
    unprobed = []
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    written = []
    bar = progress_bar(len(pairs), f"harness {arch}", " kernel", progress)
    for model, spec in pairs:
        try:
            mod = gen.emitter(model)
            M, N = model.shape if model.shape is not None else (model.legal_m[0], model.legal_n[0])
            if spec.options.get("n"):
                N = spec.options["n"]
            if spec.options.get("m"):          # tcgen05: one kernel per legal M
                M = spec.options["m"]
            batches = [random_tiles(model, cases, rng, M, N)]
            n_probe, no_probes = 0, ""
            if probes:
                try:
                    pc = probe_source(model)
                except CharacterizeError as e:      # integer instructions: no probe ladders
                    no_probes = str(e)
                    if all(ins != model.instruction for ins, _ in unprobed):
                        unprobed.append((model.instruction, f"run without probes: {e}"))
                else:
                    batches.append(probe_tiles(model, pc, M, N))
                    n_probe = int(np.asarray(pc["a"]).shape[0])
            parts, labels = [], []
            for ops, lab in batches:
                tiles = ops["a"].shape[0]
                inputs = mod.place(spec, model, ops)
                words = device.run(spec, model, inputs, tiles)
                D = mod.read(spec, model, words)
                parts.append(dot_cases(model, ops, D))
                labels.append(lab)
            arrays = _concat(parts)
            prov = {
                "source": getattr(device, "source", "hardware"), "device": info.get("name", ""),
                "compute_capability": info.get("compute_capability", ""),
                "driver": str(info.get("driver", "")), "cuda": info.get("cuda_runtime", info.get("cuda", "")),
                "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
                "tool": "mmasim harness", "kernel": spec.name, "target": spec.target, "seed": seed,
                "random_tiles": cases, "random_cases": int(parts[0]["d"].shape[0]), "probe_cases": n_probe,
                "cases": int(arrays["d"].shape[0]),
            }
            if no_probes:
                prov["probes"] = f"none: {no_probes}"
            if "gcn_arch" in info:             # AMD (amd.HipDevice): the HIP runtime instead of CUDA's
                del prov["cuda"]
                prov.update(gcn_arch=info["gcn_arch"], hip_runtime=str(info.get("runtime", "")))
            # one file per instruction; an instruction with several kernels (wgmma: one per N and
            # A source) gets one file per kernel, named by the kernel
            name = file_name(spec.instruction if per_ins[spec.instruction] == 1 else spec.name)
            path = vectors.save(out / name, arch=arch, instruction=spec.instruction,
                                qualifiers=dict(spec.qualifiers), provenance=prov,
                                labels=np.concatenate(labels).astype(str),
                                notes=f"measured with mmasim harness ({spec.name}, {spec.target})", **arrays)
            written.append(str(path))
        except MMAError as e:              # a layout not registered, a build or run that failed
            skipped.append((model.instruction, f"not run: {e}"))
        finally:
            if bar is not None:
                bar.update(1)
    if bar is not None:
        bar.close()
    return {"written": written, "skipped": skipped, "unprobed": unprobed, "device": info}
