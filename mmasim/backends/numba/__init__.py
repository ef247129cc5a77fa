"""The numba backend: compiled kernels per accumulator family (:mod:`.kernels`).

A built-in plugin of the ``mmasim_kernels`` hook; importing it does not import numba,
kernels compile on first use.  One owner per family's kernel (a plugin cannot replace a
built-in one); rows a kernel flags are computed by the numpy backend.
"""

from __future__ import annotations

import numpy as np

from mmasim.registry import registration
from mmasim.registry.hookspecs import hookimpl
from mmasim.registry.manager import get_plugin_manager
from mmasim.registry.build import get_registry
from mmasim.backends.numpy import NumpyBackend

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

    def __init__(self, family, builder):
        self.family, self.builder = family, builder

    @hookimpl
    def mmasim_kernels(self):
        return {self.family: self.builder}


def register_kernel(family: str):
    """Decorator: register ``builder(plan) -> kernel | None`` as the compiled kernel of
    accumulator ``family`` (a plugin of the ``mmasim_kernels`` hook, named
    ``kernel:<family>``, registered with :func:`mmasim.register`).  The builder returns
    ``None`` for datapaths it does not cover.  A family whose kernel another plugin
    registers (the built-in families included) is a :class:`~mmasim.errors.PluginConflict`;
    registering ``family`` again replaces this decorator's earlier builder."""

    def deco(builder):
        name = f"kernel:{family}"
        if get_plugin_manager().get_plugin(name) is not None:
            registration.unregister(name=name)
        registration.register(_KernelPlugin(family, builder), name=name)
        return builder

    return deco


def kernel_builders() -> dict:
    """``accumulator name -> builder`` from every plugin's ``mmasim_kernels`` hook, as the
    registry holds them (one owner per name; a plugin whose hook fails is left out)."""
    return dict(get_registry().kernels)


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


_BUILTIN = {family: _Builtin(family) for family in BUILDERS}


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


def kernel_args(plan, rows, dtypes=None) -> tuple:
    """The arrays a kernel reads for ``rows`` (dense): ``(wa, wb, wc, sa, sb, ia, ib,
    ic, isa, isb, ncols)``: contiguous words of A, B, C and the scales (of ``dtypes``,
    else the containers' ``plan.word_dtypes``), a row index per operand (empty: row d
    is array row d), and ``ncols`` (> 0: the matrix form, row d is A row d // ncols
    against B row d % ncols)."""
    dtypes = dtypes or plan.word_dtypes
    no_scale = _NO_SCALE if dtypes[0] != np.int64 else _NO_SCALE64
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
_NO_SCALES_INDEX = [_NO_INDEX, _NO_INDEX]


class NumbaBackend:
    """Compiled kernels; datapaths without one are computed by numpy."""

    name = "numba"

    def takes_matrices(self, plan) -> bool:
        """Whether :meth:`compute` reads the matrix form (``Rows.outer``) in place."""
        kern = plan.cache["numba kernel"] if "numba kernel" in plan.cache else kernel_for(plan)
        return plan.sparse_rule is None and kern is not None

    def compute(self, plan, rows):
        """D words of ``rows`` (:class:`mmasim.backends.plan.Rows`) of ``plan``."""
        kern = plan.cache["numba kernel"] if "numba kernel" in plan.cache else kernel_for(plan)
        if kern is None:
            return _NUMPY.compute(plan, rows)
        if plan.sparse_rule is not None:
            rows = rows.dense(plan)
        words, flags = kern(kernel_args(plan, rows, getattr(kern, "word_dtypes", None)), rows.stop - rows.start)
        if flags is not None:   # rows the kernel leaves to the reference
            idx = np.flatnonzero(flags)
            words[idx] = _NUMPY.compute(plan, rows.take(idx))
        return words


_NUMPY = NumpyBackend()
