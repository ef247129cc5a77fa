"""The numba backend: compiled kernels per accumulator family (:mod:`.kernels`).

A built-in plugin of the ``mmasim_backends`` hook (``numba``) and of the ``mmasim_kernels``
hook (its kernels, keyed ``("numba", family)``); importing it does not import numba, kernels
compile on first use.  One owner per (backend, family) kernel (a plugin cannot replace a
built-in one).  The fallback has one rung: the rows a kernel flags, and a datapath no kernel
takes, are computed by the reference (:func:`mmasim.backends.numpy.reference_rows`).  The
kernel of a plan is this backend's preparation, kept here by plan (:func:`kernel_for`).
"""

from __future__ import annotations

import numpy as np

from mmasim.registry import registration
from mmasim.registry.hookspecs import hookimpl
from mmasim.registry.manager import get_plugin_manager
from mmasim.registry.build import get_registry
from mmasim.backends.numpy import reference_rows
from mmasim.backends.plan import PlanMap

#: the backend's name, and the backend a kernel key of a plain family name means
NAME = "numba"

_numba_ok: bool | None = None
_numba_error = ""

_NO_INDEX = np.zeros(0, dtype=np.int64)
_NO_SCALE = np.zeros((1, 1), dtype=np.uint8)


def numba_available() -> bool:
    """Whether numba can be imported here."""
    global _numba_ok, _numba_error
    if _numba_ok is None:
        try:
            import numba  # noqa: F401
            _numba_ok = True
        except Exception as exc:  # ImportError, or a broken llvmlite
            _numba_ok, _numba_error = False, f"{type(exc).__name__}: {exc}"
    return _numba_ok


# ------------------------------------------------------------ compiled kernels
class _KernelPlugin:
    """A plugin of one kernel builder (:func:`register_kernel`)."""

    def __init__(self, backend, family, builder):
        self.key, self.builder = (backend, family), builder

    @hookimpl
    def mmasim_kernels(self):
        return {self.key: self.builder}


def register_kernel(family: str, backend: str = NAME):
    """Decorator: register ``builder(plan) -> kernel | None`` as the compiled kernel of
    accumulator ``family`` on ``backend`` (a plugin of the ``mmasim_kernels`` hook, named
    ``kernel:<family>`` for the numba backend, ``kernel:<backend>:<family>`` for another,
    registered with :func:`mmasim.register`).  The builder returns ``None`` for datapaths it
    does not cover.  A (backend, family) whose kernel another plugin registers (the built-in
    families included) is a :class:`~mmasim.errors.PluginConflict`; registering the same
    (backend, family) again replaces this decorator's earlier builder."""

    def deco(builder):
        name = f"kernel:{family}" if backend == NAME else f"kernel:{backend}:{family}"
        if get_plugin_manager().get_plugin(name) is not None:
            registration.unregister(name=name)
        registration.register(_KernelPlugin(backend, family, builder), name=name)
        return builder

    return deco


def kernel_builders(backend: str = NAME) -> dict:
    """``accumulator name -> builder`` of ``backend``'s kernels, from every plugin's
    ``mmasim_kernels`` hook as the registry holds them (keyed ``(backend, family)``; one owner
    per key; a plugin whose hook fails is left out)."""
    return {family: builder for (owner, family), builder in get_registry().kernels.items() if owner == backend}


def _plan(x):
    return getattr(x, "plan", x)


#: plan -> its compiled kernel (or None): this backend's preparation, gone with the plan
_KERNELS = PlanMap()
_UNBUILT = object()


def kernel_for(model):
    """The compiled kernel of a model's (or plan's) datapath, or ``None`` (the reference computes it)."""
    plan = _plan(model)
    if not numba_available():
        return None
    kern = _KERNELS.get(plan, _UNBUILT)
    if kern is _UNBUILT:
        builder = kernel_builders().get(plan.datapath.accumulator)
        kern = _KERNELS[plan] = builder(plan) if builder is not None else None
    return kern


def kernel_in_use(model) -> bool:
    """Whether this process has built (or looked for) the kernel of a model's (or plan's) datapath."""
    return _plan(model) in _KERNELS


def forget(model) -> None:
    """Drop the kernel this backend keeps for a model's (or plan's) datapath (a new process's state)."""
    _KERNELS.pop(_plan(model), None)


def compiled_families() -> list:
    """Accumulator families that have a compiled kernel."""
    return sorted(kernel_builders()) if numba_available() else []


def kernel_coverage(model) -> str:
    """``"compiled"`` or the reason a model (or plan) is computed by the reference under the numba backend."""
    if not numba_available():
        return "numba is not installed"
    family = _plan(model).datapath.accumulator
    if family not in kernel_builders():
        return f"accumulator family {family!r} has no compiled kernel"
    if kernel_for(model) is None:
        return f"the {family!r} kernel does not cover this datapath's formats or parameters"
    return "compiled"


#: the built-in kernels: accumulator family -> its builder in :mod:`.kernels`
BUILDERS = {
    "window": "_window",
    "integer": "_integer",
    "group_scaled_window": "_group_scaled",
    "two_stage_window": "_two_stage",
    "exact_sum": "_exact_sum",
    "fma": "_fma_family",
    "mul_add_chain": "_mul_add",
    "ftz_mul_add": "_ftz",
}


class _Builtin:
    """The builder of a built-in kernel, importing numba (:mod:`.kernels`) only when called
    (a plain object, so that a pickled model's registry pickles too)."""

    def __init__(self, family: str):
        self.family = family

    def __call__(self, plan):
        from mmasim.backends.numba import kernels
        return getattr(kernels, BUILDERS[self.family])(plan)

    def __repr__(self) -> str:
        return f"<built-in {self.family} kernel builder>"


_BUILTIN = {(NAME, family): _Builtin(family) for family in BUILDERS}


@hookimpl
def mmasim_unavailable():
    if numba_available():
        return None
    return (f"numba cannot be imported ({_numba_error}): pip install 'mmasim-exact[fast]'; "
            "until then the numpy backend computes every result")


@hookimpl
def mmasim_kernels():
    # the same families whether numba is installed or not: which plugin owns a kernel
    # name does not depend on the environment (kernel_for asks numba_available first)
    return _BUILTIN


@hookimpl
def mmasim_backends():
    return {NAME: NumbaBackend}


def kernel_args(plan, rows, dtypes=None) -> tuple:
    """The arrays a kernel reads for ``rows`` (dense): ``(wa, wb, wc, sa, sb, ia, ib,
    ic, isa, isb, ncols)``: contiguous words of A, B, C and the scales (of ``dtypes``,
    else the containers' ``plan.word_dtypes``), a row index per operand (empty: row d
    is array row d), and ``ncols`` (> 0: the matrix form, row d is A row d // ncols
    against B row d % ncols)."""
    dtypes = dtypes or plan.word_dtypes
    no_scale = unscaled(dtypes[0])
    if rows.ncols:      # the matrices themselves (the common small call: no loops)
        ops, asc, ni = rows.operands, np.ascontiguousarray, _NO_INDEX
        sa, sb = (asc(ops[3], dtypes[3]), asc(ops[4], dtypes[4])) if plan.scaled else (no_scale, no_scale)
        return (asc(ops[0], dtypes[0]), asc(ops[1], dtypes[1]), asc(ops[2], dtypes[2]), sa, sb, ni, ni, ni, ni, ni,
                rows.ncols)
    else:
        words, index = [], []
        for i, dt in enumerate(dtypes):
            arr, idx = rows.indexed(i, dt)
            words.append(arr)
            index.append(_NO_INDEX if idx is None else idx)
    if not plan.scaled:
        words += [no_scale, no_scale]
        index += _NO_SCALES_INDEX
    return (*words, *index, rows.ncols)


_NO_SCALE64 = np.zeros((1, 1), dtype=np.int64)


def unscaled(word_dtype) -> np.ndarray:
    """The scale operand a kernel of an unscaled plan reads (never read: one element), for A words
    of ``word_dtype``: uint8 (int64 for the int64 words of the CPU driver), one type for every
    driver so that a body is compiled once (:func:`kernel_args`, the CUDA rows)."""
    return _NO_SCALE if np.dtype(word_dtype) != np.int64 else _NO_SCALE64


_NO_SCALES_INDEX = [_NO_INDEX, _NO_INDEX]


class NumbaBackend:
    """Compiled kernels; the rows a kernel flags, and datapaths without one, are computed by the reference."""

    name = NAME

    @staticmethod
    def unavailable() -> str:
        """Why this backend cannot be used here ('' when it can)."""
        if numba_available():
            return ""
        return f"numba cannot be imported ({_numba_error}): pip install 'mmasim-exact[fast]'"

    def takes_matrices(self, plan) -> bool:
        """Whether :meth:`compute` reads the matrix form (``Rows.outer``) in place."""
        kern = _KERNELS.get(plan, _UNBUILT)
        if kern is _UNBUILT:
            kern = kernel_for(plan)
        return plan.sparse_rule is None and kern is not None

    def compute(self, plan, rows):
        """D words of ``rows`` (:class:`mmasim.backends.plan.Rows`) of ``plan``: the kernel, then
        the reference for the rows it flags (a datapath without a kernel: the reference)."""
        kern = _KERNELS.get(plan, _UNBUILT)
        if kern is _UNBUILT:
            kern = kernel_for(plan)
        if kern is None:
            return reference_rows(plan, rows)
        dense = rows.dense(plan) if plan.sparse_rule is not None else rows
        words, flags = kern(kernel_args(plan, dense, getattr(kern, "word_dtypes", None)), dense.stop - dense.start)
        if flags is not None:   # rows the kernel leaves to the reference (the rows as given: sparse ones select again)
            idx = np.flatnonzero(flags)
            words[idx] = reference_rows(plan, rows.take(idx))
        return words
