"""Computation backends: ``get(name).compute(plan, rows)`` returns the D words of rows of
one datapath (:class:`~mmasim.backends.plan.Plan`, :class:`~mmasim.backends.plan.Rows`).

Backends are plugins of the ``mmasim_backends`` hook (``name -> factory``; the registry holds
them): ``numpy`` runs the reference accumulators (and its lean window path); ``numba`` (the
``[fast]`` extra) runs compiled kernels, bit-identical, registered per (backend, accumulator
family) through the ``mmasim_kernels`` hook.  Selection: the ``backend=`` argument, else
``MMASIM_BACKEND`` (a registered name or ``auto``), else ``auto`` (a backend that takes jobs of
that size, ``auto_takes``; else numba when it imports, except a datapath's first
``AUTO_MIN_PRODUCTS`` products in a process: numpy).  What a kernel
does not cover is computed by the reference (:func:`kernel_coverage`).  Each backend keeps
what it prepares for a plan itself; a plan is frozen.

May import the packages below it (``errors`` .. ``registry``).
"""

from __future__ import annotations

import os

from mmasim.backends.plan import PlanMap
from mmasim.errors import MMAError
from mmasim.registry.build import get_registry
from mmasim.backends.numba import (
    NumbaBackend,
    compiled_families,
    forget as _forget_kernel,
    kernel_builders,
    kernel_coverage,
    kernel_for,
    kernel_in_use,
    numba_available,
    register_kernel,
)
from mmasim.backends.numpy import NumpyBackend

__all__ = ["BACKENDS", "ENV", "BackendError", "available", "names", "requested", "resolve", "wants", "choose", "get",
           "forget", "AUTO_MIN_PRODUCTS", "NumbaBackend", "NumpyBackend", "numba_available", "register_kernel", "kernel_builders", "kernel_for",
           "compiled_families", "kernel_coverage", "kernel_in_use"]

ENV = "MMASIM_BACKEND"

#: factory -> its backend object (one per registered factory)
_instances: dict = {}
#: plan -> products computed under ``auto`` by numpy so far in this process (:func:`choose`)
_auto_products = PlanMap()


class BackendError(MMAError, ValueError):
    """An unknown backend name, or a backend that cannot be used here."""


def names() -> tuple:
    """Every registered backend's name, in registration order (usable here or not)."""
    return tuple(get_registry().backends)


def __getattr__(attr):
    if attr == "BACKENDS":      # the registered names, as the registry holds them now
        return names()
    raise AttributeError(f"module {__name__!r} has no attribute {attr!r}")


def _unavailable(factory) -> str:
    """Why the backend of ``factory`` cannot be used here ('' when it can)."""
    check = getattr(factory, "unavailable", None)
    return (check() or "") if check is not None else ""


def available() -> list:
    """Backends usable in this environment."""
    return [name for name, factory in get_registry().backends.items() if not _unavailable(factory)]


def requested(name: str | None = None) -> str:
    """The backend a request names, as :func:`resolve` reads it (not checked): ``name``, else
    ``MMASIM_BACKEND``, else ``"auto"``, stripped and lower-case."""
    return _request(name)[0]


def resolve(name: str | None = None) -> str:
    """The backend to use for an explicit ``name`` (or ``None``)."""
    return _resolved(*_request(name))[0]


def wants(name: str | None, backend: str) -> bool:
    """Whether the request ``name`` (:func:`requested`) computes on ``backend``: named, it resolves
    to it (:func:`resolve`: an unknown or unusable name raises); under ``auto``, ``backend`` is
    registered and can be used here (what a call whose operands lie on that backend's device asks)."""
    key, given, source = _request(name)
    if key == "auto":
        factory = get_registry().backends.get(backend)
        return factory is not None and not _unavailable(factory)
    return _resolved(key, given, source)[0] == backend


def get(name: str | None = None, plan=None, products: int | None = None):
    """The backend object for ``name`` (see :func:`resolve`): ``compute(plan, rows)``.

    Under ``auto``, the calls of a ``plan`` are computed by numpy, without importing numba,
    until their products reach :data:`AUTO_MIN_PRODUCTS` in this process (both give the
    same words); from the call that reaches it on, by the compiled kernel."""
    factory = _chosen(name, plan, products)[1]
    backend = _instances.get(factory)
    if backend is None:
        backend = _instances[factory] = factory()
    return backend


def choose(name: str | None, plan=None, products: int | None = None) -> str:
    """The backend name :func:`get` uses for a job of ``products`` products of ``plan`` (a whole
    GEMM decides once, by its ``M * N * K``, and hands the name to every call it makes).

    Under ``auto``: the first registered backend whose factory's ``auto_takes(products)`` says
    it takes a job of that size (and that can be used here), else numpy for a datapath's first
    :data:`AUTO_MIN_PRODUCTS` products, else :func:`resolve`'s choice."""
    return _chosen(name, plan, products)[0]


def _chosen(name, plan, products) -> tuple:
    """``(name, factory)`` of :func:`choose`."""
    key, given, source = _request(name)
    if products is not None and key == "auto":
        registered = get_registry().backends
        for other, factory in _sized(registered):
            if factory.auto_takes(products) and not _unavailable(factory):
                return other, factory
        if plan is not None and not kernel_in_use(plan):
            done = _auto_products.get(plan, 0) + products
            if done < AUTO_MIN_PRODUCTS:
                _auto_products[plan] = done
                return "numpy", registered["numpy"]
    return _resolved(key, given, source)


def forget(plan) -> None:
    """Drop what this process knows of ``plan`` under ``auto`` (its products, its kernel): as a new process has it."""
    _auto_products.pop(plan, None)
    _forget_kernel(plan)


#: under ``auto``, the products a datapath computes in a process before it takes the compiled
#: kernel: numpy does that much work in less time than importing numba and loading a kernel
#: from the cache take (about a second in a fresh process; ``benchmarks/startup.py``)
AUTO_MIN_PRODUCTS = 1 << 22


#: ``(registered backends, those of them whose factory has auto_takes)``, of the registry last asked
_sized_of: tuple = (None, ())


def _sized(registered: dict) -> tuple:
    """``(name, factory)`` of each registered backend whose factory has ``auto_takes`` (looked for
    once per registry: a factory without it costs a failed attribute look-up)."""
    global _sized_of
    if _sized_of[0] is not registered:
        _sized_of = (registered, tuple((k, f) for k, f in registered.items() if hasattr(f, "auto_takes")))
    return _sized_of[1]


def _request(name) -> tuple:
    """``(key, name, where it came from)``: the argument, else ``MMASIM_BACKEND``, else ``auto``;
    ``key`` the name stripped and lower-case."""
    if name is None:
        name, source = os.environ.get(ENV) or "auto", f"environment variable {ENV}"
    else:
        source = "backend argument"
    return str(name).strip().lower(), name, source


def _resolved(key, name, source) -> tuple:
    """``(name, factory)`` of the backend the request ``key`` (:func:`_request`) resolves to, checked."""
    registered = get_registry().backends
    if key == "auto":
        key = "numba" if numba_available() else "numpy"
    factory = registered.get(key)
    if factory is None:
        raise BackendError(f"unknown backend {name!r} ({source}); choose one of: auto, {', '.join(registered)}")
    why = _unavailable(factory)
    if why:
        raise BackendError(f"backend {key!r} ({source}) cannot be used here: {why} "
                           f"(or choose one of: {', '.join(available())})")
    return key, factory
