"""The CUDA backend: the per-row bodies (:mod:`.rows`) launched on an NVIDIA GPU, a thread per row.

``backend="cuda"`` (or ``MMASIM_BACKEND=cuda``).  :meth:`CudaBackend.compute` takes rows as
every backend does (:mod:`mmasim.backends.plan`): the operands' words are copied to the
device, the sparse selection runs there (:func:`.rows.select_row`), then the plan's body
(:func:`.rows.choose`, specialised with the plan's constants on a GPU) by its driver
(:func:`.driver.cuda_driver`), and D comes back.  :meth:`CudaBackend.compute_device` does the
same on operands already on the device (:mod:`.device`: CUDA torch tensors and
``__cuda_array_interface__`` arrays are never copied to the host) and leaves D there.

The rows a body flags (a sum beyond int64, an illegal sparse selector) are computed by the
numpy reference, one level: a plan no body takes is the reference's for every row.

Compiling for a GPU: numba-cuda's kernels are compiled eagerly for the argument types of the
call (:func:`_gpu_kernel`) with :data:`.target.NVVM_OPTIONS` forced into NVVM (numba-cuda
passes only ``opt`` and ``fastmath``, and NVVM's default ``-fma=1`` would contract ``a * b + c``
into ``fma.rn``, which the IEEE chains cannot have), without link-time optimisation (whose
code generation would not see those options), and the PTX declares the lowest PTX ISA of its
target (:data:`.target.ARCHS`) so that a CUDA 13.0 driver JITs what a newer NVVM writes.

Under ``NUMBA_ENABLE_CUDASIM=1`` the same drivers run in numba-cuda's simulator, each thread
calling the CPU-compiled body on the host arrays the simulator wraps; the simulator is not
thread-safe, so its launches are serialised (:data:`_SIM_LOCK`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import weakref
from collections import namedtuple

import numpy as np

from mmasim.backends.cuda import missing
from mmasim.registry.hookspecs import hookimpl

#: threads per block of every launch
THREADS = 128

#: under ``auto``, the products of one job from which a GPU takes it (none in the simulator):
#: below it, copying the operands to the device and launching cost more than the CPU's work
CUDA_MIN_PRODUCTS = 1 << 28

#: the rows of a call from which its plan's body is specialised (:meth:`CudaBackend.prepared`):
#: a specialised body has far fewer registers, but costs a compile per datapath
SPECIALISE_MIN_ROWS = 1 << 20

_SIM_LOCK = threading.Lock()


def simulated() -> bool:
    """Whether numba-cuda's simulator stands in for the GPU (``NUMBA_ENABLE_CUDASIM=1``)."""
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


@functools.lru_cache(maxsize=None)
def _gpu_missing() -> str:
    try:
        from numba import cuda
        if cuda.is_available():
            return ""
        reason = "numba-cuda finds no CUDA GPU or driver here (numba.cuda.is_available() is False)"
    except Exception as exc:        # a broken driver or toolkit
        reason = f"numba-cuda cannot reach a CUDA GPU ({type(exc).__name__}: {exc})"
    return reason + "; NUMBA_ENABLE_CUDASIM=1 runs the CUDA drivers in numba-cuda's simulator instead"


def unavailable() -> str:
    """What keeps ``backend="cuda"`` from running here ('' when nothing does): numba-cuda not
    installed, or no CUDA GPU (the simulator counts as one)."""
    return missing() or ("" if simulated() else _gpu_missing())


def gpu_present() -> bool:
    """Whether a real CUDA GPU is usable (never in the simulator): what ``auto`` asks."""
    return not missing() and not simulated() and not _gpu_missing()


# ------------------------------------------------------------------ kernels
def _host(x):
    """A simulated kernel's array as the CPU-compiled body reads it: the simulator wraps each
    (a ``FakeWithinKernelCUDAArray`` of a ``FakeCUDAArray`` of the numpy array)."""
    item = x.__dict__.get("_item", x) if type(x).__name__ == "FakeWithinKernelCUDAArray" else x
    return item.__dict__.get("_ary", item) if type(item).__name__ == "FakeCUDAArray" else item


@contextlib.contextmanager
def forced_nvvm():
    """numba-cuda's compiles in this block ask NVVM for :data:`.target.NVVM_OPTIONS` (no
    contraction to fma), and the PTX they write (and link, as an eager compile binds its
    kernel) declares the lowest PTX ISA of its target where :data:`.target.ARCHS` names it;
    under the lock of :mod:`.target` (its typing of the neutral intrinsics and its own compiles)."""
    from numba.cuda import codegen
    from numba.cuda import dispatcher as cuda_dispatcher

    from mmasim.backends.cuda import target

    with target._LOCK:
        saved, saved_asm = cuda_dispatcher.compile_cuda, codegen.CUDACodeLibrary.get_asm_strs

        def compile_cuda(*args, **kwargs):
            kwargs["nvvm_options"] = {**(kwargs.get("nvvm_options") or {}), **target.NVVM_OPTIONS}
            return saved(*args, **kwargs)

        def get_asm_strs(self, cc=None):
            ptxes = saved_asm(self, cc)
            cc = self._ensure_cc(cc)
            for cc_, isa in target.ARCHS.values():
                if tuple(cc) == tuple(cc_):
                    ptxes = self._ptx_cache[cc] = [target._declare_isa(p, isa) for p in ptxes]
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


# ------------------------------------------------------------------ the backend
#: What a plan needs on the device, made once per plan: its body (``None``: no body takes
#: it, ``reason`` says why), the body's arrays on the device, the sparse selection table.
Prepared = namedtuple("Prepared", "body arrays reason sel")


class CudaBackend:
    """The per-row bodies on an NVIDIA GPU (or numba-cuda's simulator): see the module.  The
    class is the ``cuda`` factory of the ``mmasim_backends`` hook (:func:`mmasim_backends`)."""

    name = "cuda"

    @staticmethod
    def unavailable() -> str:
        """Why ``backend="cuda"`` cannot run here ('' when it can): :func:`unavailable`."""
        return unavailable()

    @staticmethod
    def auto_takes(products: int) -> bool:
        """Whether ``auto`` gives this backend a job of ``products`` products: from
        :data:`CUDA_MIN_PRODUCTS` on, with a real GPU present (never the simulator)."""
        return products >= CUDA_MIN_PRODUCTS and gpu_present()
    #: one launch at a time, from one host thread (:meth:`mmasim.execution.model.Model.dot`)
    serial = True
    #: elements (rows x K) per call of :meth:`compute`: large launches (the CPU backends' chunks are 2^17)
    CHUNK_ELEMENTS = 1 << 26

    def __init__(self, specialise: bool | None = None):
        #: bodies compiled with each plan's constants for calls of SPECIALISE_MIN_ROWS rows or
        #: more (default: on a GPU, not in the simulator, where every specialisation would be one
        #: more CPU compile); smaller calls share the generic bodies (one compile per argument types)
        self.specialise = (not simulated()) if specialise is None else specialise
        self._prepared = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def prepared(self, plan, rows: int = 0) -> Prepared:
        """What ``plan`` needs on the device (:class:`Prepared`) for a call of ``rows`` rows, made on first use."""
        specialise = self.specialise and rows >= SPECIALISE_MIN_ROWS
        with self._lock:
            made = self._prepared.setdefault(plan, {})
            if specialise not in made:
                from numba import cuda

                from mmasim.backends.cuda import rows as bodies

                body, arrays, reason = bodies.choose(plan, specialise)
                if body is not None:
                    arrays = _to_device(arrays)
                sel = None
                if body is not None and plan.sparse_rule is not None:
                    sel = cuda.to_device(bodies.selection(plan.sparse_rule))
                made[specialise] = Prepared(body, arrays, reason, sel)
            return made[specialise]

    def takes_matrices(self, plan) -> bool:
        """Whether :meth:`compute` reads the matrix form (``Rows.outer``) in place: a dense
        plan that a body takes."""
        return plan.sparse_rule is None and self.prepared(plan).body is not None

    def compute(self, plan, rows):
        """D words (numpy) of ``rows`` (:class:`mmasim.backends.plan.Rows`) of ``plan``: the
        operands' words copied to the device, computed there, D copied back."""
        from numba import cuda

        from mmasim.backends.numba import kernel_args

        prep = self.prepared(plan)
        n = len(rows)
        if prep.body is None:           # the reference, in its own bounded chunks
            step = max(1, (1 << 17) // max(plan.datapath.k, 1))
            return np.concatenate([reference(plan, rows.chunk(rows.start + s, rows.start + min(n, s + step)))
                                   for s in range(0, n, step)]) if n else np.zeros(0, plan.encoding.dtype)
        legal = None
        if plan.sparse_rule is not None:
            from mmasim.backends.cuda.rows import dense_args

            ops = [rows.words(i) for i in range(len(rows.operands))]
            host = dense_args(plan, *ops[:-1])          # the rows materialized: no row index
            da, db, legal = self.select(plan, *_to_device(host[:2]), cuda.to_device(np.ascontiguousarray(ops[-1],
                                                                                                          np.uint32)))
            args = (da, db, *_to_device(host[2:]))
        else:
            args = _to_device(kernel_args(plan, rows))
        out, flags = self.run(plan, args, n)
        out, flags = out.copy_to_host(), flags.copy_to_host()
        if legal is not None:
            flags |= ~legal.copy_to_host()
        redo = np.flatnonzero(flags)
        if redo.size:
            out[redo] = reference(plan, rows.take(redo))
        return out

    def select(self, plan, wa, wb, md):
        """``(da, db, legal)`` on the device: the stored elements of each row of the logical
        rows ``wa`` / ``wb`` by the metadata words ``md`` (device arrays, a row each)."""
        from numba import cuda

        from mmasim.backends.cuda.driver import select_cuda
        from mmasim.backends.cuda.rows import select_row

        n, k = wa.shape[0], plan.datapath.stored_k
        da = cuda.device_array((n, k), wa.dtype)
        db = cuda.device_array((n, k), wb.dtype)
        legal = cuda.device_array(n, np.bool_)
        launch(select_cuda, select_row, n, (wa, wb, md, self.prepared(plan).sel, np.int64(plan.sparse_rule.chunk),
                                            da, db, legal))
        return da, db, legal

    def run(self, plan, args, n: int):
        """``(out, flags)`` on the device: the plan's body over ``n`` rows of the driver
        arguments ``args`` (:func:`.rows.dense_args`'s order, device arrays)."""
        from numba import cuda

        from mmasim.backends.cuda.driver import cuda_driver

        prep = self.prepared(plan, n)
        out = cuda.device_array(n, plan.encoding.dtype)
        flags = cuda.device_array(n, np.bool_)
        launch(cuda_driver, prep.body, n, (*args, *prep.arrays, out, flags))
        return out, flags


def _to_device(args) -> tuple:
    """``args`` with each numpy array copied to the device."""
    from numba import cuda

    return tuple(cuda.to_device(x) if isinstance(x, np.ndarray) else x for x in args)


def reference(plan, rows):
    """D words of ``rows`` by the numpy reference alone (:func:`mmasim.backends.numpy.reference_rows`):
    the rows a body flags, and every row of a plan no body takes (one level, no other path)."""
    from mmasim.backends.numpy import reference_rows

    return reference_rows(plan, rows)


class Reference:
    """:func:`reference` as a backend object (``compute(plan, rows)``), for :func:`mmasim.backends.plan.compute`."""

    name = "reference"
    compute = staticmethod(reference)


@hookimpl
def mmasim_backends():
    return {"cuda": CudaBackend}
