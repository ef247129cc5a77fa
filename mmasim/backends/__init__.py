"""Computation backends: the numpy reference and an optional compiled (numba) one.

Every datapath is computed by the numpy int64 implementation of its
accumulator family (:mod:`mmasim.accumulators`): that is the reference.  The
``numba`` backend (``pip install 'mmasim[fast]'``) runs compiled kernels that
fuse decode, accumulate and encode per dot product; it is bit-identical to the
reference (``tests/test_backends.py`` compares every registered datapath).

A backend computes rows of one datapath: ``get(name).compute(plan, rows)``
(:class:`mmasim.plan.Plan`, :class:`mmasim.plan.Rows`) returns their D words.

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

from ..errors import MMAError, PluginError
from ..plugins import hookimpl

BACKENDS = ("numpy", "numba")
ENV = "MMASIM_BACKEND"

_numba_ok: bool | None = None
_instances: dict = {}


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


def get(name: str | None = None):
    """The backend object for ``name`` (see :func:`resolve`): ``compute(plan, rows)``."""
    key = resolve(name)
    if key not in _instances:
        if key == "numba":
            from .numba import NumbaBackend

            _instances[key] = NumbaBackend()
        else:
            from .numpy import NumpyBackend

            _instances[key] = NumpyBackend()
    return _instances[key]


# ------------------------------------------------------------ compiled kernels
class _KernelPlugin:
    """A plugin of one kernel builder (:func:`register_kernel`)."""

    def __init__(self, family, builder):
        self.family, self.builder = family, builder

    @hookimpl
    def mmasim_kernels(self):
        return {self.family: self.builder}


def register_kernel(family: str):
    """Decorator: register ``builder(plan) -> kernel | None`` as the compiled kernel of
    accumulator ``family`` (a plugin of the ``mmasim_kernels`` hook, named
    ``kernel:<family>``).  The builder returns ``None`` for datapaths it does not cover."""
    from ..plugins import get_plugin_manager

    def deco(builder):
        pm = get_plugin_manager()
        name = f"kernel:{family}"
        if pm.get_plugin(name) is not None:
            pm.unregister(name=name)
        pm.register(_KernelPlugin(family, builder), name=name)
        return builder

    return deco


def kernel_builders() -> dict:
    """``accumulator name -> builder`` from every plugin's ``mmasim_kernels`` hook
    (a later plugin replaces an earlier one's builder of the same name)."""
    from ..plugins import describe, get_plugin_manager

    out: dict = {}
    for impl in get_plugin_manager().hook.mmasim_kernels.get_hookimpls():   # registration order
        try:
            table = dict(impl.function())
        except Exception as exc:  # noqa: BLE001 - the plugin's failure, named
            raise PluginError(f"{describe(impl.plugin_name)}: hook mmasim_kernels() failed: "
                              f"{type(exc).__name__}: {exc}") from exc
        out.update(table)
    return out


def _plan(x):
    return getattr(x, "plan", x)


def kernel_for(model):
    """The compiled kernel of a model's (or plan's) datapath, or ``None`` (numpy computes it)."""
    plan = _plan(model)
    if not numba_available():
        return None
    try:
        return plan.cache["numba kernel"]
    except KeyError:
        builder = kernel_builders().get(plan.datapath.accumulator)
        plan.cache["numba kernel"] = builder(plan) if builder is not None else None
        return plan.cache["numba kernel"]


def compiled_families() -> list:
    """Accumulator families that have a compiled kernel."""
    return sorted(kernel_builders()) if numba_available() else []


def kernel_coverage(model) -> str:
    """``"compiled"`` or the reason a model (or plan) falls back to numpy under the numba backend."""
    if not numba_available():
        return "numba is not installed"
    family = _plan(model).datapath.accumulator
    if family not in kernel_builders():
        return f"accumulator family {family!r} has no compiled kernel"
    if kernel_for(model) is None:
        return f"the {family!r} kernel does not cover this datapath's formats or parameters"
    return "compiled"
