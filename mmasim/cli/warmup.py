"""Compile every kernel of the compiled backend once per machine (``mmasim warmup``), or
write the PTX of every CUDA kernel (``mmasim warmup --backend cuda --ptx DIR``: :func:`cuda_ptx`).

A numba kernel is compiled per signature: the kernel and the dtypes of the words it is
called with.  :func:`signatures` finds one datapath per signature among every registered
datapath; :func:`warmup` runs a small batch of each through the numba backend (in ``jobs``
processes side by side), which compiles the kernel into the kernel cache
(:mod:`mmasim.backends.numba.cache`) or loads it from there.  The first lean window kernel
also runs words with inf / NaN: its rows with a special value go to the general window
kernel, which every lean kernel calls with int64 words (one signature for all).
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import numpy as np

ROWS = 64
#: written into the kernel folder when every signature has been compiled or loaded there
MARK = "warmed.json"


@dataclass(frozen=True)
class Signature:
    """One compiled signature: the kernel's name, the dtypes of the A, B, C (and scale)
    words it reads, and a datapath that calls it (``arch``, index in its datapaths)."""

    kernel: str
    dtypes: tuple
    arch: str
    index: int
    specials: bool = False      # also run inf / NaN words (the general window kernel)

    @property
    def label(self) -> str:
        words = ", ".join(np.dtype(d).name for d in self.dtypes)
        return f"{self.kernel} ({words})" + (" + window_kernel (int64)" if self.specials else "")


@dataclass(frozen=True)
class Warmed:
    """What :func:`compile_one` did: seconds (wall, and CPU of its process) and the
    signatures it compiled and loaded from the cache."""

    label: str
    seconds: float
    cpu_seconds: float
    compiled: int
    loaded: int


def _model(registry, arch, index):
    from mmasim.execution.model import Model

    return Model(registry.architectures[arch].datapaths[index], registry, backend="numba")


def _declaring(reg, names) -> set:
    """The architectures ``names`` (any name :func:`mmasim.MMA` takes) declare their datapaths in."""
    from mmasim.registry.lookup import resolve_arch

    out = set()
    for n in names:
        arch = reg.architectures[resolve_arch(reg, n)]
        while arch.inherits:
            arch = reg.architectures[arch.inherits]
        out.add(arch.name)
    return out


def signatures(registry=None, archs=None) -> list:
    """One :class:`Signature` per compiled signature of the registered datapaths (of the
    architectures ``archs`` only, when given)."""
    from mmasim.backends.numba import kernel_for
    from mmasim.backends.numba.kernels import Kernel, LeanWindowKernel
    from mmasim.registry.build import get_registry

    reg = registry or get_registry()
    wanted = None if archs is None else _declaring(reg, archs)
    out, seen, lean_done = [], set(), False
    for name, arch in reg.architectures.items():
        if arch.inherits or (wanted is not None and name not in wanted):
            continue                # an inheriting one: the datapaths of the one it inherits
        for i, _dp in enumerate(arch.datapaths):
            m = _model(reg, name, i)
            kern = kernel_for(m)
            if not isinstance(kern, Kernel):    # none, or a plugin's kernel (compiled on first use)
                continue
            words = kern.word_dtypes or m.plan.word_dtypes
            if kern.word_dtypes is not None:    # int64 words and D: one signature whatever the formats
                key = (kern.fn.__name__, "int64")
            else:
                out_dtype = {"f32": np.float32, "f64": np.float64}.get(kern.out_kind, kern.encoding.dtype)
                key = (kern.fn.__name__, tuple(np.dtype(d).str for d in words), np.dtype(out_dtype).str)
            if key in seen:
                continue
            seen.add(key)
            specials = not lean_done and isinstance(kern, LeanWindowKernel)
            if specials:                # its rows with inf / NaN: the general window kernel, int64
                lean_done = True
                seen.add(("window_kernel", "int64"))
            out.append(Signature(kern.fn.__name__, tuple(words), name, i, specials))
    return out


def _counts(disps):
    return (sum(sum(d.stats.cache_misses.values()) for d in disps),
            sum(sum(d.stats.cache_hits.values()) for d in disps))


def compile_one(sig: Signature, registry=None) -> Warmed:
    """Run :data:`ROWS` rows of ``sig``'s datapath through numba (which compiles or loads its kernel)."""
    from mmasim.operands import wordgen
    from mmasim.backends.numba import kernel_for
    from mmasim.backends.numba.window import window_kernel
    from mmasim.errors import MMAError
    from mmasim.registry.build import get_registry

    reg = registry or get_registry()
    m = _model(reg, sig.arch, sig.index)
    disps = [kernel_for(m).fn] + ([window_kernel] if sig.specials else [])
    before = _counts(disps)
    rng = np.random.default_rng(0)
    t0, c0 = time.perf_counter(), time.process_time()
    for kind in (("near_one", "mixed") if sig.specials else ("near_one",)):
        a, b, c, kw = wordgen.operands(m, ROWS, rng, kind)
        try:
            m.dot(a, b, c, **kw)
        except MMAError:    # a refusal of the reference (rows the kernel left): it ran
            pass
    after = _counts(disps)
    return Warmed(sig.label, time.perf_counter() - t0, time.process_time() - c0, after[0] - before[0],
                  after[1] - before[1])


def _context():
    """Processes forked where the platform can (they start with this one's modules and
    registry), spawned elsewhere."""
    import multiprocessing

    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else "spawn")


def _compile_in_worker(sig):
    return compile_one(sig)


def warmup(jobs: int | None = None, progress: bool = True, archs=None) -> list:
    """Compile (or load) every kernel signature (:func:`signatures`, of ``archs`` when given)
    in ``jobs`` processes (default: the CPUs this process may use; 1: in this process), with
    a progress bar on stderr; returns a :class:`Warmed` per signature."""
    sigs = signatures(archs=archs)
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    jobs = max(1, min(int(jobs), len(sigs) or 1))
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(sigs), desc="compiling kernels", unit="kernel")
    results = []
    try:
        if jobs == 1:
            for sig in sigs:
                results.append(compile_one(sig))
                if bar is not None:
                    bar.update()
        else:
            with ProcessPoolExecutor(jobs, mp_context=_context()) as pool:
                for fut in as_completed([pool.submit(_compile_in_worker, sig) for sig in sigs]):
                    results.append(fut.result())
                    if bar is not None:
                        bar.update()
    finally:
        if bar is not None:
            bar.close()
    if archs is None:
        _mark(results)
    return results


def _mark(results) -> None:
    import json

    from mmasim.backends.numba.cache import kernel_dir

    try:
        (kernel_dir() / MARK).write_text(json.dumps(sorted(r.label for r in results)))
    except OSError:     # an unwritable cache: the kernels were not kept either
        pass


def warmed() -> bool:
    """Whether :func:`warmup` of every architecture has run into this kernel folder (a
    datapath registered since may still use a signature compiled on first use)."""
    from mmasim.backends.numba.cache import kernel_dir

    try:
        return (kernel_dir() / MARK).is_file()
    except OSError:                       # a cache folder this user may not read: not warmed
        return False


def cuda_ptx(folder, archs=None, specialised: bool = False, progress: bool = True) -> list:
    """The PTX of every CUDA kernel of the registered datapaths (of ``archs`` when given;
    :func:`mmasim.backends.cuda.target.kernels`: the generic bodies, or with ``specialised``
    one per plan's constants) for ``sm_80``, ``sm_90a`` and ``sm_100a``, written into
    ``folder`` (made if absent) as ``KERNEL.ARCH.ptx``; numba-cuda compiles them with no GPU
    and no driver.  Returns a :class:`Warmed` per kernel (``compiled``: the PTX files written)."""
    import pathlib

    from mmasim.backends.cuda import target
    from mmasim.registry.build import get_registry

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    reg = get_registry()
    ks = target.kernels(reg, None if archs is None else _declaring(reg, archs), specialised)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(ks), desc="compiling CUDA kernels", unit="kernel")
    results = []
    try:
        for k in ks:
            t0, c0 = time.perf_counter(), time.process_time()
            paths = target.write_kernel(folder, k)
            what = f"{k.datapaths} datapaths, first {k.instruction}" if k.plan is not None else k.instruction
            results.append(Warmed(f"{k.name} ({what})",
                                  time.perf_counter() - t0, time.process_time() - c0, len(paths), 0))
            if bar is not None:
                bar.update()
    finally:
        if bar is not None:
            bar.close()
    return results
