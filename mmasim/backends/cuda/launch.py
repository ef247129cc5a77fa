"""Launching kernels on an NVIDIA GPU or in numba-cuda's simulator, and reading device arrays:
the lowest layer of :mod:`mmasim.backends.cuda`, which every module that launches imports.

:func:`launch` runs ``driver(fn)`` a thread per work item: on a GPU compiled eagerly for the
argument types of the call (:func:`_gpu_kernel`) with :data:`NVVM_OPTIONS` forced into NVVM
(:func:`forced_nvvm`: numba-cuda passes only ``opt`` and ``fastmath``, and NVVM's default
``-fma=1`` would contract ``a * b + c`` into ``fma.rn``, which the IEEE chains cannot have),
without link-time optimisation, the PTX declaring the lowest PTX ISA of its target
(:data:`ARCHS`) so that a CUDA 13.0 driver JITs what a newer NVVM writes; under
``NUMBA_ENABLE_CUDASIM=1`` each thread calls the CPU-compiled body on the host arrays the
simulator wraps, one launch at a time (:data:`_SIM_LOCK`: the simulator is not thread-safe).
:func:`is_device` / :func:`as_device` read ``__cuda_array_interface__`` operands in place;
:func:`reference` is the numpy reference of the rows a body flags.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import threading

import numpy as np

#: threads per block of every launch
THREADS = 128

#: target -> (compute capability, PTX ISA version its PTX declares: the first that knows it)
ARCHS = {"sm_80": ((8, 0, ""), (7, 0)), "sm_90a": ((9, 0, "a"), (8, 0)), "sm_100a": ((10, 0, "a"), (8, 6))}

#: NVVM options of every compile: optimized, IEEE division and square root, no contraction to fma
NVVM_OPTIONS = {"opt": 3, "fastmath": False, "fma": False}

_LOCK = threading.Lock()

def _declare_isa(ptx: str, isa) -> str:
    """``ptx`` with its ``.version`` lowered to ``isa`` (never raised)."""
    m = re.search(r"^\.version (\d+)\.(\d+)$", ptx, flags=re.M)
    if m is None or (int(m.group(1)), int(m.group(2))) <= tuple(isa):
        return ptx
    return ptx[:m.start()] + ".version %d.%d" % tuple(isa) + ptx[m.end():]


_SIM_LOCK = threading.Lock()


def simulated() -> bool:
    """Whether numba-cuda's simulator stands in for the GPU (``NUMBA_ENABLE_CUDASIM=1``)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def is_device(x) -> bool:
    """Whether ``x`` lies on a CUDA device (``__cuda_array_interface__``, or the simulator's arrays)."""
    if x is None or isinstance(x, (np.ndarray, int, float, str)):
        return False
    if type(x).__name__ == "FakeCUDAArray":
        return True
    try:
        return hasattr(x, "__cuda_array_interface__")
    except Exception:       # a CPU tensor's property raises
        return False


def cuda_module():
    from numba import cuda
    return cuda


def _sim_view(cai, owner=None) -> np.ndarray:
    """The host memory an ``__cuda_array_interface__`` names, as a numpy array (no copy): the
    simulator's device memory, kept alive with ``owner`` (the object that holds it, as
    :func:`numba.cuda.as_cuda_array` keeps it: a torch operand's contiguous copy)."""
    dtype = np.dtype(cai["typestr"])
    shape = tuple(int(n) for n in cai["shape"])
    strides = cai.get("strides") or tuple(int(np.prod(shape[i + 1:], dtype=np.int64)) * dtype.itemsize
                                          for i in range(len(shape)))
    extent = dtype.itemsize + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0
    buf = (ctypes.c_char * max(extent, 1)).from_address(cai["data"][0])
    buf.owner = owner                   # the array's base, and every view's
    return np.ndarray(shape, dtype, buffer=buf, strides=strides)


def as_device(x):
    """``x`` as a numba device array, without a copy (torch: made contiguous on its device first)."""
    cuda = cuda_module()
    if type(x).__module__.startswith("torch"):
        x = x.contiguous()          # on its device
    if simulated():
        if type(x).__name__ == "FakeCUDAArray":
            return x
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        return FakeCUDAArray(_sim_view(x.__cuda_array_interface__, x))
    return cuda.as_cuda_array(x)


def _contiguous(x) -> bool:
    """Whether the device array ``x`` is C-contiguous."""
    return x.is_c_contiguous() if callable(getattr(x, "is_c_contiguous", None)) else x.flags["C_CONTIGUOUS"]


# ------------------------------------------------------------------ kernels
def _host(x):
    """A simulated kernel's array as the CPU-compiled body reads it: the simulator wraps each
    (a ``FakeWithinKernelCUDAArray`` of a ``FakeCUDAArray`` of the numpy array)."""
    item = x.__dict__.get("_item", x) if type(x).__name__ == "FakeWithinKernelCUDAArray" else x
    return item.__dict__.get("_ary", item) if type(item).__name__ == "FakeCUDAArray" else item


@contextlib.contextmanager
def forced_nvvm():
    """numba-cuda's compiles in this block ask NVVM for :data:`.NVVM_OPTIONS` (no
    contraction to fma), and the PTX they write (and link, as an eager compile binds its
    kernel) declares the lowest PTX ISA of its target where :data:`.ARCHS` names it;
    under :data:`_LOCK` (which :mod:`.target` holds for its typing of the neutral intrinsics and its own compiles)."""
    from numba.cuda import codegen
    from numba.cuda import dispatcher as cuda_dispatcher

    with _LOCK:
        saved, saved_asm = cuda_dispatcher.compile_cuda, codegen.CUDACodeLibrary.get_asm_strs

        def compile_cuda(*args, **kwargs):
            kwargs["nvvm_options"] = {**(kwargs.get("nvvm_options") or {}), **NVVM_OPTIONS}
            return saved(*args, **kwargs)

        def get_asm_strs(self, cc=None):
            ptxes = saved_asm(self, cc)
            cc = self._ensure_cc(cc)
            for cc_, isa in ARCHS.values():
                if tuple(cc) == tuple(cc_):
                    ptxes = self._ptx_cache[cc] = [_declare_isa(p, isa) for p in ptxes]
            return ptxes

        cuda_dispatcher.compile_cuda, codegen.CUDACodeLibrary.get_asm_strs = compile_cuda, get_asm_strs
        try:
            yield
        finally:
            cuda_dispatcher.compile_cuda, codegen.CUDACodeLibrary.get_asm_strs = saved, saved_asm


def argument_types(args) -> tuple:
    """numba-cuda's types of a kernel's arguments, as its dispatcher types them at a launch."""
    from numba.cuda.typing.typeof import Purpose, typeof

    return tuple(typeof(x, Purpose.argument) for x in args)


def launched(x) -> tuple:
    """The :func:`.target.descriptor` of a kernel argument as numba-cuda types it at a launch (a device
    array: its dtype, dimensions and layout; a Python int: int64)."""
    a = getattr(x, "_ary", x)           # a simulated device array wraps a numpy array
    if isinstance(a, np.ndarray) or hasattr(a, "__cuda_array_interface__"):
        layout = "C" if a.flags["C_CONTIGUOUS"] else "F" if a.flags["F_CONTIGUOUS"] else "A"
        return np.dtype(a.dtype).str, a.ndim, layout
    return (np.dtype(np.int64).str if isinstance(x, int) else np.asarray(x).dtype.str), 0, ""


_KERNELS: dict = {}
_KERNELS_LOCK = threading.Lock()


def _gpu_kernel(driver, fn, types):
    """The kernel of ``driver(fn)`` compiled for argument ``types`` (:func:`forced_nvvm`; no LTO,
    whose code generation would not see NVVM's options)."""
    from numba import cuda

    key = (driver, fn, types)
    with _KERNELS_LOCK:
        if key not in _KERNELS:
            with forced_nvvm():         # compiled and bound (linked, loaded) here
                _KERNELS[key] = cuda.jit(types, lto=False)(driver(fn))
        return _KERNELS[key]


def _sim_kernel(driver, fn):
    """The simulated kernel of ``driver(fn)``: ``fn`` called on the host arrays."""
    from numba import cuda

    key = (driver, fn)
    with _KERNELS_LOCK:
        if key not in _KERNELS:
            _KERNELS[key] = cuda.jit(driver(lambda d, *xs: fn(d, *map(_host, xs))))
        return _KERNELS[key]


def launch(driver, fn, n: int, args) -> None:
    """``driver(fn)`` over ``n`` rows (a thread per row) on ``args`` (device arrays and scalars)."""
    if n == 0:
        return
    grid = (n + THREADS - 1) // THREADS
    if simulated():
        with _SIM_LOCK:
            _sim_kernel(driver, fn)[grid, THREADS](*args)
    else:
        _gpu_kernel(driver, fn, argument_types(args))[grid, THREADS](*args)


def reference(plan, rows):
    """D words of ``rows`` by the numpy reference alone (:func:`mmasim.backends.numpy.reference_rows`):
    the rows a body flags, and every row of a plan no body takes (one level, no other path)."""
    from mmasim.backends.numpy import reference_rows

    return reference_rows(plan, rows)


class Reference:
    """:func:`reference` as a backend object (``compute(plan, rows)``), for :func:`mmasim.backends.plan.compute`."""

    name = "reference"
    compute = staticmethod(reference)
