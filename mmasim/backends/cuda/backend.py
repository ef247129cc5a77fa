"""The CUDA backend: the per-row bodies (:mod:`.rows`) launched on an NVIDIA GPU, a thread per row.

``backend="cuda"`` (or ``MMASIM_BACKEND=cuda``).  :meth:`CudaBackend.compute` takes rows as
every backend does (:mod:`mmasim.backends.plan`) and runs the row flow (:mod:`.flow`) on the
device's arrays (:class:`.arrays.CudaArrays`): the operands' words are copied to the device,
the sparse selection runs there (:func:`.rows.select_row`), then the plan's body
(:func:`.rows.choose`, specialised with the plan's constants on a GPU) by its driver
(:func:`.driver.cuda_driver`), and D comes back.  :mod:`.device` runs the same selection and
bodies (:meth:`CudaBackend.select`, :meth:`CudaBackend.run`) on operands already on the device
(CUDA torch tensors and ``__cuda_array_interface__`` arrays are never copied to the host) and
leaves D there.

The rows a body flags (a sum beyond int64, an illegal sparse selector) are computed by the
numpy reference, one level: a plan no body takes is the reference's for every row.

Launching (compiled for a GPU without contraction, or in numba-cuda's simulator) is :mod:`.launch`'s.
"""

from __future__ import annotations

import functools
import threading

import numpy as np

from mmasim.backends.cuda import missing
from mmasim.backends.cuda.launch import reference, simulated
from mmasim.backends import plan as plans
from mmasim.registry.hookspecs import hookimpl

#: under ``auto``, the products of one job from which a GPU takes it (none in the simulator):
#: below it, copying the operands to the device and launching cost more than the CPU's work
CUDA_MIN_PRODUCTS = 1 << 28

#: the rows of a call from which its plan's body is specialised (:meth:`CudaBackend.prepared`):
#: a specialised body has far fewer registers, but costs a compile per datapath
SPECIALISE_MIN_ROWS = 1 << 20



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


# ------------------------------------------------------------------ the backend
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
    #: elements (rows x K) per call of :meth:`compute`: large launches (the CPU backends' chunks:
    #: :data:`mmasim.backends.plan.CHUNK_ELEMENTS`)
    CHUNK_ELEMENTS = 1 << 26

    def __init__(self, specialise: bool | None = None):
        #: bodies compiled with each plan's constants for calls of SPECIALISE_MIN_ROWS rows or
        #: more (default: on a GPU, not in the simulator, where every specialisation would be one
        #: more CPU compile); smaller calls share the generic bodies (one compile per argument types)
        self.specialise = (not simulated()) if specialise is None else specialise
        self._prepared = plans.PlanMap()
        self._lock = threading.Lock()

    def prepared(self, plan, rows: int = 0):
        """What ``plan`` needs on the device (:class:`.flow.Prepared`) for a call of ``rows`` rows, made on first use."""
        specialise = self.specialise and rows >= SPECIALISE_MIN_ROWS
        with self._lock:
            made = self._prepared.setdefault(plan, {})
            if specialise not in made:
                from mmasim.backends.cuda import flow
                from mmasim.backends.cuda.arrays import CudaArrays

                made[specialise] = flow.prepare(plan, CudaArrays, specialise)
            return made[specialise]

    def takes_matrices(self, plan) -> bool:
        """Whether :meth:`compute` reads the matrix form (``Rows.outer``) in place: a dense
        plan that a body takes."""
        return plan.sparse_rule is None and self.prepared(plan).body is not None

    def compute(self, plan, rows):
        """D words (numpy) of ``rows`` (:class:`mmasim.backends.plan.Rows`) of ``plan``: the
        operands' words copied to the device, computed there, D copied back (:func:`.flow.compute`);
        a plan no body takes by the reference, in the CPU backends' chunks."""
        from mmasim.backends.cuda import flow
        from mmasim.backends.cuda.arrays import CudaArrays

        if self.prepared(plan).body is not None:
            return flow.compute(plan, rows, CudaArrays, self.prepared)
        n, step = len(rows), max(1, plans.CHUNK_ELEMENTS // max(plan.datapath.k, 1))
        return np.concatenate([reference(plan, rows.chunk(rows.start + s, rows.start + min(n, s + step)))
                               for s in range(0, n, step)]) if n else np.zeros(0, plan.encoding.dtype)

    def select(self, plan, wa, wb, md):
        """``(da, db, legal)`` on the device: the stored elements of each row of the logical
        rows ``wa`` / ``wb`` by the metadata words ``md`` (device arrays, a row each; :func:`.flow.select`)."""
        from mmasim.backends.cuda import flow
        from mmasim.backends.cuda.arrays import CudaArrays

        return flow.select(plan, CudaArrays, self.prepared(plan), wa, wb, md)

    def run(self, plan, args, n: int):
        """``(out, flags)`` on the device: the plan's body over ``n`` rows of the driver
        arguments ``args`` (:func:`.rows.dense_args`'s order, device arrays; :func:`.flow.body_rows`)."""
        from mmasim.backends.cuda import flow
        from mmasim.backends.cuda.arrays import CudaArrays

        prep = self.prepared(plan, n)
        return flow.body_rows(CudaArrays, prep.body, n, args, prep.arrays, plan.encoding.dtype)


@hookimpl
def mmasim_backends():
    return {"cuda": CudaBackend}
