"""The two targets of the target-neutral bodies, each as its arrays and its launcher.

A target is a class of four functions: ``empty(shape, dtype)`` and ``put(a)`` (an array on
the target: allocated, or a host array taken there), ``get(a)`` (a numpy copy of a target
array) and ``drive(driver, body, n, *args)`` (``body`` over ``n`` work items on the target's
arrays ``args``, by ``driver``, a :class:`Driver`: a compiled loop on the CPU, a thread
each on CUDA).  :class:`CpuArrays` holds numpy arrays; :class:`CudaArrays` device arrays
(``__cuda_array_interface__`` objects read in place).  The row flow
(:mod:`mmasim.backends.cuda.flow`) and quantization (:mod:`mmasim.backends.cuda.quantize`)
are each written once over a target.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

#: How bodies of one kind are driven: ``cpu(body)``, the compiled CPU loop over the work items
#: (made once per body), and ``cuda``, the name of its CUDA driver in :mod:`.driver` (which
#: imports numba-cuda, so it is named, not imported, here)
Driver = namedtuple("Driver", "cpu cuda")


class CpuArrays:
    """The CPU drivers' arrays: numpy."""

    name = "cpu"
    empty = staticmethod(np.zeros)
    put = get = staticmethod(np.asarray)

    @staticmethod
    def drive(driver, body, n, *args):
        driver.cpu(body)(*args)


class CudaArrays:
    """The CUDA drivers' arrays (``__cuda_array_interface__``: CUDA tensors, numba device arrays,
    read in place by :func:`mmasim.backends.cuda.launch.as_device`), a thread per work item
    (launched by :func:`mmasim.backends.cuda.launch.launch`: compiled without contraction, or
    simulated)."""

    name = "cuda"

    @staticmethod
    def empty(shape, dtype):
        from numba import cuda
        return cuda.device_array(shape, dtype)

    @staticmethod
    def put(a):
        from numba import cuda

        from mmasim.backends.cuda.launch import as_device, is_device
        return as_device(a) if is_device(a) else cuda.to_device(np.ascontiguousarray(a))

    @staticmethod
    def get(a):
        return a.copy_to_host()

    @staticmethod
    def drive(driver, body, n, *args):
        from mmasim.backends.cuda import driver as drivers
        from mmasim.backends.cuda.launch import launch
        launch(getattr(drivers, driver.cuda), body, n, args)


def put_all(target, args) -> tuple:
    """``args`` with each numpy array put on ``target`` (scalars as they are)."""
    return tuple(target.put(x) if isinstance(x, np.ndarray) else x for x in args)
