"""Compile every kernel the registered datapaths use, once per machine (``mmasim warmup``).

A kernel is compiled per signature: the kernel and the dtypes of the words it is called
with.  :func:`signatures` finds one datapath per signature among every registered
datapath; :func:`warmup` runs a small batch of each through the numba backend (in
``jobs`` processes side by side), which compiles the kernel into the kernel cache
(:mod:`.cache`) or loads it from there.  The first lean window kernel also runs words with
inf / NaN: its rows with a special value go to the general window kernel, called with
int64 words by every lean kernel (one signature for all), which is then compiled once.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import numpy as np

ROWS = 64


@dataclass(frozen=True)
class Signature:
    """One compiled signature: the kernel's name and the words it reads, and a datapath
    that calls it (``arch``, index in the architecture's datapaths)."""

    kernel: str
    dtypes: tuple
    arch: str
    index: int
    specials: bool = False      # also run inf / NaN words (the general window kernel)

    @property
    def label(self) -> str:
        words = ", ".join(np.dtype(d).name for d in self.dtypes)
        return f"{self.kernel} ({words})" + (" + window_kernel (int64)" if self.specials else "")


def _model(registry, arch, index):
    from ...model import Model

    return Model(registry.architectures[arch].datapaths[index], registry, backend="numba")


def signatures(registry=None) -> list:
    """One :class:`Signature` per compiled signature of every registered datapath."""
    from ...registry import get_registry
    from . import kernel_for
    from .kernels import LeanWindowKernel

    reg = registry or get_registry()
    out, seen, lean_done = [], set(), False
    for name, arch in reg.architectures.items():
        if arch.inherits:           # the datapaths of the architecture it inherits
            continue
        for i, dp in enumerate(arch.datapaths):
            m = _model(reg, name, i)
            kern = kernel_for(m)
            if kern is None:
                continue
            plan = m.plan
            out_dtype = {"f32": np.float32, "f64": np.float64}.get(kern.out_kind, kern.encoding.dtype)
            key = (kern.fn.__name__, tuple(np.dtype(d).str for d in plan.word_dtypes), np.dtype(out_dtype).str)
            if key in seen:
                continue
            seen.add(key)
            specials = not lean_done and isinstance(kern, LeanWindowKernel)
            lean_done = lean_done or specials
            out.append(Signature(kern.fn.__name__, tuple(plan.word_dtypes), name, i, specials))
    return out


def compile_one(sig: Signature, registry=None) -> tuple:
    """Run :data:`ROWS` rows of ``sig``'s datapath through numba: ``(label, seconds,
    signatures compiled, signatures loaded from the cache)``."""
    from ... import wordgen
    from ...registry import get_registry
    from . import kernel_for
    from .window import window_kernel

    reg = registry or get_registry()
    m = _model(reg, sig.arch, sig.index)
    kern = kernel_for(m)
    rng = np.random.default_rng(0)
    t0 = time.perf_counter()
    for kind in (("near_one", "mixed") if sig.specials else ("near_one",)):
        a, b, c, kw = wordgen.operands(m, ROWS, rng, kind)
        try:
            m.dot(a, b, c, **kw)
        except Exception:   # noqa: BLE001 - a refusal of the reference: the kernel ran
            pass
    seconds = time.perf_counter() - t0
    disps = [kern.fn] + ([window_kernel] if sig.specials else [])
    compiled = sum(sum(d.stats.cache_misses.values()) for d in disps)
    loaded = sum(sum(d.stats.cache_hits.values()) for d in disps)
    return sig.label, seconds, compiled, loaded


def _compile_in_worker(sig):
    return compile_one(sig)


def warmup(jobs: int | None = None, progress: bool = True, registry=None) -> list:
    """Compile (or load) every kernel signature (:func:`signatures`) in ``jobs`` processes
    (default: the CPUs this process may use), with a progress bar on stderr; returns the
    :func:`compile_one` result of each."""
    sigs = signatures(registry)
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    jobs = max(1, min(int(jobs), len(sigs)))
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(sigs), desc="compiling kernels", unit="kernel")
    results = []
    try:
        if jobs == 1:
            for sig in sigs:
                results.append(compile_one(sig, registry))
                if bar is not None:
                    bar.update()
        else:
            import multiprocessing

            with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
                futures = [pool.submit(_compile_in_worker, sig) for sig in sigs]
                for fut in as_completed(futures):
                    results.append(fut.result())
                    if bar is not None:
                        bar.update()
    finally:
        if bar is not None:
            bar.close()
    return results
