"""Computation backends: the numpy reference and an optional compiled (numba) one.

Every datapath is computed by the numpy int64 implementation of its
accumulator family (:mod:`mmasim.accumulators`): that is the reference.  The
``numba`` backend (``pip install 'mmasim[fast]'``) runs compiled kernels that
fuse decode, accumulate and encode per dot product; it is bit-identical to the
reference (``tests/test_backends.py`` compares every registered datapath).

Selection, first match wins:

1. the ``backend=`` argument of :func:`mmasim.MMA`, :meth:`Model.dot`,
   :meth:`Model.__call__` or :func:`mmasim.gemm`;
2. the environment variable ``MMASIM_BACKEND`` (``numpy``, ``numba`` or ``auto``);
3. ``auto``: ``numba`` when it can be imported, else ``numpy``.

A compiled kernel is looked up per accumulator family
(:func:`register_kernel`).  A family without one, or a datapath whose
parameters or formats the kernel does not cover, is computed by numpy even
when ``numba`` is selected; :func:`kernel_coverage` says which.
"""

from __future__ import annotations

import os

from ..errors import MMAError

BACKENDS = ("numpy", "numba")
ENV = "MMASIM_BACKEND"

_numba_ok: bool | None = None

#: accumulator family name -> builder(model) -> kernel or None
_KERNEL_BUILDERS: dict = {}


class BackendError(MMAError, ValueError):
    """An unknown backend name, or a backend that is not installed."""


def numba_available() -> bool:
    """Whether numba can be imported here."""
    global _numba_ok
    if _numba_ok is None:
        try:
            import numba  # noqa: F401
            _numba_ok = True
        except Exception:  # ImportError, or a broken llvmlite
            _numba_ok = False
    return _numba_ok


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
            f"backend 'numba' ({source}) needs numba: pip install 'mmasim[fast]' (or choose backend='numpy')"
        )
    return key


def register_kernel(family: str):
    """Decorator: register ``builder(model) -> kernel | None`` as the compiled kernel of
    accumulator ``family``.  The builder returns ``None`` for datapaths it does not cover."""

    def deco(builder):
        _KERNEL_BUILDERS[family] = builder
        return builder

    return deco


def _load_compiled() -> None:
    if numba_available() and "window" not in _KERNEL_BUILDERS:
        from . import numba_kernels  # noqa: F401  (registers the built-in kernels)


def kernel_for(model):
    """The compiled kernel of ``model``'s datapath, or ``None`` (numpy computes it)."""
    _load_compiled()
    builder = _KERNEL_BUILDERS.get(model.datapath.accumulator)
    return builder(model) if builder is not None else None


def compiled_families() -> list:
    """Accumulator families that have a compiled kernel."""
    _load_compiled()
    return sorted(_KERNEL_BUILDERS)


def kernel_coverage(model) -> str:
    """``"compiled"`` or the reason ``model`` falls back to numpy under the numba backend."""
    if not numba_available():
        return "numba is not installed"
    _load_compiled()
    family = model.datapath.accumulator
    if family not in _KERNEL_BUILDERS:
        return f"accumulator family {family!r} has no compiled kernel"
    if kernel_for(model) is None:
        return f"the {family!r} kernel does not cover this datapath's formats or parameters"
    return "compiled"
