"""Computation backends: the numpy reference and an optional compiled (numba) one.

Every datapath is computed by the numpy int64 implementation of its
accumulator family (:mod:`mmasim.accumulators`): that is the reference.  The
``numba`` backend (``pip install 'mmasim-exact[fast]'``) runs compiled kernels that
fuse decode, accumulate and encode per dot product; it is bit-identical to the
reference (``tests/test_backends.py`` compares every registered datapath).

A backend computes rows of one datapath: ``get(name).compute(plan, rows)``
(:class:`mmasim.backends.plan.Plan`, :class:`mmasim.backends.plan.Rows`) returns their D words.

Selection, first match wins:

1. the ``backend=`` argument of :func:`mmasim.MMA`, :meth:`Model.dot`,
   :meth:`Model.__call__` or :func:`mmasim.gemm`;
2. the environment variable ``MMASIM_BACKEND`` (``numpy``, ``numba`` or ``auto``);
3. ``auto``: ``numba`` when it can be imported, else ``numpy``.

A compiled kernel is looked up per accumulator family through the plugin hook
``mmasim_kernels`` (:func:`register_kernel` registers one at run time).  A
family without one, or a datapath whose parameters or formats the kernel does
not cover, is computed by numpy even when ``numba`` is selected;
:func:`kernel_coverage` says which.
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

__all__ = ["BACKENDS", "ENV", "BackendError", "available", "resolve", "get", "NumbaBackend", "NumpyBackend",
           "numba_available", "register_kernel", "kernel_builders", "kernel_for", "compiled_families",
           "kernel_coverage"]

BACKENDS = ("numpy", "numba")
ENV = "MMASIM_BACKEND"

_instances: dict = {}


class BackendError(MMAError, ValueError):
    """An unknown backend name, or a backend that is not installed."""


def available() -> list:
    """Backends usable in this environment."""
    return ["numpy"] + (["numba"] if numba_available() else [])


def resolve(name: str | None = None) -> str:
    """The backend to use for an explicit ``name`` (or ``None``)."""
    source = "backend argument"
    if name is None:
        name = os.environ.get(ENV) or "auto"
        source = f"environment variable {ENV}"
    key = str(name).strip().lower()
    if key == "auto":
        return "numba" if numba_available() else "numpy"
    if key not in BACKENDS:
        raise BackendError(f"unknown backend {name!r} ({source}); choose one of: auto, {', '.join(BACKENDS)}")
    if key == "numba" and not numba_available():
        raise BackendError(
            f"backend 'numba' ({source}) needs numba: pip install 'mmasim-exact[fast]' (or choose backend='numpy')"
        )
    return key


def get(name: str | None = None):
    """The backend object for ``name`` (see :func:`resolve`): ``compute(plan, rows)``."""
    key = resolve(name)
    if key not in _instances:
        _instances[key] = NumbaBackend() if key == "numba" else NumpyBackend()
    return _instances[key]
