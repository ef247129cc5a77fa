"""The CUDA target and ``backend="cuda"`` (issue 31).

The arithmetic rules of the compiled kernels are target-neutral numba functions
(:mod:`mmasim.backends.numba.primitives`, :mod:`mmasim.backends.numba.window`,
:mod:`mmasim.backends.numba.families`).  :mod:`.rows` composes them into per-row scalar
bodies of every family (registers only, no work arrays) and the sparse selection, run on
the CPU by a loop (their CPU driver) and, through :mod:`.target`, compiled by numba-cuda
into PTX for ``sm_80``, ``sm_90a`` and ``sm_100a`` without a GPU or a driver (``mmasim
warmup --backend cuda --ptx DIR``).  :mod:`.backend` launches them, a thread per row
(``backend="cuda"``), and :mod:`.device` takes operands already on the device.

:mod:`.rows` needs numba only; :mod:`.target` needs numba-cuda (``pip install
'mmasim-exact[cuda]'``): :func:`missing` says what is absent.
"""

from __future__ import annotations

import importlib.util


def missing() -> str:
    """What the CUDA target lacks here ('' when numba-cuda can be imported)."""
    if importlib.util.find_spec("numba_cuda") is None:
        return "numba-cuda is not installed: pip install 'mmasim-exact[cuda]'"
    return ""
