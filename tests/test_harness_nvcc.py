"""Every generated NVIDIA kernel is real PTX that NVIDIA's compiler assembles for its target.

All kernels ``mmasim harness generate`` emits for an architecture (every family: mma.sync,
mma.sp, wgmma, tcgen05) are compiled by ``nvcc`` (so ``ptxas`` assembles each inline-PTX
instruction) in a few translation units per target, and one complete source with the host
``main()`` per target is compiled too (``-c``).  The jobs run in parallel (one nvcc per CPU)
and their products are cached by content hash (``$MMASIM_HARNESS_CACHE``), so an unchanged
table compiles once.  Kernels whose device code is the same but for the kernel name and the
tcgen05 instruction descriptor are compiled once: ``idesc`` is a 32-bit register operand whose
value ptxas does not check (it assembles a kernel whose idesc is 0 or 0xFFFFFFFF just the same),
so those kernels hand ptxas the same instructions (Blackwell: 1180 kernels, 243 distinct).  Skipped, with the reason, only where no compiler that knows the target is
installed (``.ci/run`` installs the PyPI wheels ``nvidia-cuda-nvcc`` and
``nvidia-cuda-nvcc-cu12``).
"""
import os
from concurrent.futures import ThreadPoolExecutor
import re
import warnings

import pytest

import mmasim
from mmasim.errors import ToolchainError
from mmasim.harness import generate as gen
from mmasim.harness import host, nv_sync, toolchain

# one pytest-xdist worker runs this module: its fixture compiles every kernel once
pytestmark = pytest.mark.xdist_group("nvcc")

NVIDIA = [a for a in ("Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell", "Blackwell Ultra",
                       "RTX Blackwell") if a in mmasim.architectures()]

#: opcodes a recent ptxas accepts that older ones do not (mma.sync kind::mxf4nvf4 with
#: scale_vec::4X and .ue8m0 scales: rejected by the ptxas of CUDA 13.0, accepted by 13.5)
NEWER = {(13, 5): re.compile(r"kind::mxf4nvf4\.block_scale\.scale_vec::4X\..*\.ue8m0$")}

#: kernels per translation unit at most (a TU pays the headers once; more TUs run in parallel)
CHUNK = 120


def _version(nvcc):
    return tuple(int(x) for x in nvcc.version.split(".")[:2]) if nvcc.version else (0, 0)


def _compiler(target):
    """``(nvcc, None)`` or ``(None, reason)``."""
    try:
        return toolchain.find_nvcc(target), None
    except ToolchainError as e:
        if target in toolchain.RETARGET and toolchain.find_ptxas(target):
            return toolchain.find_nvcc(toolchain.RETARGET[target][1]), None   # PTX from it, ptxas for target
        return None, f"{target}: {e}; and no ptxas that knows it (pip install nvidia-cuda-nvcc-cu12)"


def _ptxas_text(spec):
    """What ptxas checks of ``spec``: its device code without its name and its runtime idesc."""
    text = spec.device.replace(spec.name, "KERNEL")
    if "idesc" in spec.options:
        text = text.replace(f'"r"({spec.options["idesc"]}u)', '"r"(IDESC)')
    return text


def _distinct(specs):
    """One kernel per distinct :func:`_ptxas_text`, and for each the kernels it stands for."""
    groups = {}
    for s in specs:
        groups.setdefault(_ptxas_text(s), []).append(s)
    return [g[0] for g in groups.values()], {g[0].name: g for g in groups.values()}


def _chunks(items, n):
    k = max(1, -(-len(items) // max(1, n)))
    size = min(CHUNK, k)
    return [items[i:i + size] for i in range(0, len(items), size)]


@pytest.fixture(scope="module")
def compiled():
    """Every compile job of every architecture, run once, in parallel: arch -> dict."""
    jobs, owners, plan = [], [], {}
    cpus = os.cpu_count() or 1
    for arch in NVIDIA:
        pairs, _ = gen.specs_for(arch)
        specs = [s for _, s in pairs if s.target.startswith("sm_")]
        entry = plan[arch] = {"specs": specs, "skip": None, "left_out": [], "batches": [], "main": None}
        if not specs:
            continue
        by_target = {}
        for s in specs:
            by_target.setdefault(s.target, []).append(s)
        for target, group in by_target.items():
            nvcc, why = _compiler(target)
            if nvcc is None:
                entry["skip"] = why
                break
            keep = [s for s in group if not any(_version(nvcc) < v and rx.search(s.assembly) for v, rx in NEWER.items())]
            entry["left_out"] += [s.instruction for s in group if s not in keep]
            entry["nvcc"] = nvcc
            keep, stands_for = _distinct(keep)
            entry.setdefault("stands_for", {}).update(stands_for)
            for chunk in _chunks(keep, max(1, cpus // 2)):
                jobs.append((host.device_batch(chunk), target, {"device_only": True}))
                owners.append((arch, "batch", chunk))
        if entry["skip"] is None:
            spec = max(specs, key=lambda s: len(s.inputs))         # the one with the most buffers
            jobs.append((host.cuda_source(spec), spec.target, {}))
            owners.append((arch, "main", spec))
    for (arch, kind, what), result in zip(owners, toolchain.compile_many(jobs)):
        if kind == "batch":
            plan[arch]["batches"].append((what, result))
        else:
            plan[arch]["main"] = (what, result)
    return plan


def _rejected(specs, stands_for):
    """The kernels ptxas rejects, one compile each (only run when a batch failed), each with the
    kernels it stands for."""
    results = toolchain.compile_many([(host.device_batch([s]), s.target, {"device_only": True}) for s in specs])
    return [f"{t.instruction} ({t.assembly}): {str(r).splitlines()[-1]}"
            for s, r in zip(specs, results) if isinstance(r, ToolchainError) for t in stands_for[s.name]]


@pytest.mark.parametrize("arch", NVIDIA)
def test_every_generated_kernel_assembles_for_its_target(compiled, arch):
    entry = compiled[arch]
    assert entry["specs"], f"{arch}: generate emitted no NVIDIA kernel"
    if entry["skip"]:
        pytest.skip(entry["skip"])
    failed = [chunk for chunk, r in entry["batches"] if isinstance(r, ToolchainError)]
    if failed:
        bad = _rejected([s for chunk in failed for s in chunk], entry["stands_for"])
        nvcc = entry["nvcc"]
        assert not bad, f"ptxas ({nvcc.path}, CUDA {nvcc.version}) rejects:\n" + "\n".join(bad)
        raise AssertionError(str(next(r for _, r in entry["batches"] if isinstance(r, ToolchainError))))
    # every generated kernel is compiled, or stood for by a compiled one, or left out with a warning
    compiled_names = [t.name for chunk, _ in entry["batches"] for s in chunk for t in entry["stands_for"][s.name]]
    assert len(compiled_names) + len(entry["left_out"]) == len(entry["specs"])
    assert len(set(compiled_names)) == len(compiled_names)
    if entry["left_out"]:
        warnings.warn(f"{arch}: not compiled, nvcc {entry['nvcc'].version} is older than the ptxas that accepts "
                      f"them: {', '.join(entry['left_out'])}")


@pytest.mark.parametrize("arch", NVIDIA)
def test_a_complete_generated_source_with_host_main_compiles(compiled, arch):
    entry = compiled[arch]
    if entry["skip"]:
        pytest.skip(entry["skip"])
    spec, result = entry["main"]
    if isinstance(result, ToolchainError):
        raise AssertionError(f"{spec.name}: {result}")
    assert os.path.getsize(result) > 0


def test_concurrent_compiles_of_one_cache_entry_all_succeed_and_leave_no_scratch_files(tmp_path, monkeypatch):
    """Two workers compiling the same source at once (pytest-xdist, two tools) each write their own
    scratch files; the product appears by an atomic rename.  They once shared one ``.tmp`` name and
    one lost its rename (FileNotFoundError)."""
    nvcc, why = _compiler("sm_80")
    if nvcc is None:
        pytest.skip(why)
    monkeypatch.setenv("MMASIM_HARNESS_CACHE", str(tmp_path))
    source = "__global__ void k(int *p) { p[threadIdx.x] += 1; }\n"
    with ThreadPoolExecutor(4) as pool:
        products = list(pool.map(lambda _: toolchain.compile_source(source, "sm_80", device_only=True), range(4)))
    assert len(set(products)) == 1 and products[0].stat().st_size > 0
    left = [p.name for p in tmp_path.rglob("*") if p.is_file() and p != products[0]]
    assert left == []
