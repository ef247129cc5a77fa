"""Computation backends: ``get(name).compute(plan, rows)`` returns the D words of rows of
one datapath (:class:`~mmasim.backends.plan.Plan`, :class:`~mmasim.backends.plan.Rows`).

``numpy`` runs the reference accumulators (and its lean window path); ``numba`` (the
``[fast]`` extra) runs compiled kernels, bit-identical, registered per accumulator
family through the ``mmasim_kernels`` hook; ``cuda`` (the ``[cuda]`` extra) runs the per-row
bodies on an NVIDIA GPU (:mod:`mmasim.backends.cuda.backend`).  Selection: the ``backend=`` argument, else
``MMASIM_BACKEND`` (``numpy``, ``numba``, ``cuda``, ``auto``), else ``auto`` (numba when it
imports, except a datapath's first ``AUTO_MIN_PRODUCTS`` products in a process: numpy; cuda for a
job of ``CUDA_MIN_PRODUCTS`` products or more when a GPU is present).  What a kernel does not cover is computed by numpy (:func:`kernel_coverage`).

May import the packages below it (``errors`` .. ``registry``).
"""

from __future__ import annotations

import os

from mmasim.errors import MMAError
from mmasim.backends.numba import (
    NumbaBackend,
    compiled_families,
    kernel_builders,
    kernel_coverage,
    kernel_for,
    numba_available,
    register_kernel,
)
from mmasim.backends.numpy import NumpyBackend
from mmasim.backends.cuda import backend as _cuda

__all__ = ["BACKENDS", "ENV", "BackendError", "available", "resolve", "choose", "get", "AUTO_MIN_PRODUCTS", "CUDA_MIN_PRODUCTS", "NumbaBackend", "NumpyBackend",
           "numba_available", "register_kernel", "kernel_builders", "kernel_for", "compiled_families",
           "kernel_coverage"]

BACKENDS = ("numpy", "numba", "cuda")
ENV = "MMASIM_BACKEND"

_instances: dict = {}


class BackendError(MMAError, ValueError):
    """An unknown backend name, or a backend that is not installed."""


def available() -> list:
    """Backends usable in this environment."""
    return ["numpy"] + (["numba"] if numba_available() else []) + ([] if _cuda.unavailable() else ["cuda"])


def resolve(name: str | None = None) -> str:
    """The backend to use for an explicit ``name`` (or ``None``)."""
    name, source = _requested(name)
    key = str(name).strip().lower()
    if key == "auto":
        return "numba" if numba_available() else "numpy"
    if key not in BACKENDS:
        raise BackendError(f"unknown backend {name!r} ({source}); choose one of: auto, {', '.join(BACKENDS)}")
    if key == "numba" and not numba_available():
        raise BackendError(
            f"backend 'numba' ({source}) needs numba: pip install 'mmasim-exact[fast]' (or choose backend='numpy')"
        )
    if key == "cuda" and _cuda.unavailable():
        raise BackendError(f"backend 'cuda' ({source}) cannot run here: {_cuda.unavailable()}")
    return key


def get(name: str | None = None, plan=None, products: int | None = None):
    """The backend object for ``name`` (see :func:`resolve`): ``compute(plan, rows)``.

    Under ``auto``, the calls of a ``plan`` are computed by numpy, without importing numba,
    until their products reach :data:`AUTO_MIN_PRODUCTS` in this process (both give the
    same words); from the call that reaches it on, by the compiled kernel."""
    key = choose(name, plan, products)
    if key not in _instances:
        _instances[key] = {"numba": NumbaBackend, "cuda": _cuda.CudaBackend}.get(key, NumpyBackend)()
    return _instances[key]


def choose(name: str | None, plan=None, products: int | None = None) -> str:
    """The backend name :func:`get` uses for a job of ``products`` products of ``plan`` (a whole
    GEMM decides once, by its ``M * N * K``, and hands the name to every call it makes)."""
    if products is not None and products >= _cuda.CUDA_MIN_PRODUCTS and _auto(name) and _cuda.gpu_present():
        return "cuda"
    if plan is not None and products is not None and _auto(name) and "numba kernel" not in plan.cache:
        done = plan.cache.get("auto products", 0) + products
        if done < AUTO_MIN_PRODUCTS:
            plan.cache["auto products"] = done
            return "numpy"
    return resolve(name)


#: under ``auto``, the products a datapath computes in a process before it takes the compiled
#: kernel: numpy does that much work in less time than importing numba and loading a kernel
#: from the cache take (about a second in a fresh process; ``benchmarks/startup.py``)
AUTO_MIN_PRODUCTS = 1 << 22

#: under ``auto``, the products of a job from which a present GPU takes it (:mod:`mmasim.backends.cuda.backend`)
CUDA_MIN_PRODUCTS = _cuda.CUDA_MIN_PRODUCTS


def _requested(name):
    """``(name, where it came from)``: the argument, else ``MMASIM_BACKEND``, else ``auto``."""
    if name is not None:
        return name, "backend argument"
    return os.environ.get(ENV) or "auto", f"environment variable {ENV}"


def _auto(name) -> bool:
    return str(_requested(name)[0]).strip().lower() == "auto"
