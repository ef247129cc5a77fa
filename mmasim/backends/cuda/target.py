"""numba-cuda compiles the per-row bodies (:mod:`.rows`) to PTX, with no GPU and no driver.

Three things make the CPU kernels' rules compile for CUDA from the same source:

- numba-cuda has its own typing registry and types none of numba's CPU intrinsics; the
  target-neutral ones (:data:`mmasim.backends.numba.primitives.NEUTRAL_INTRINSICS`) are typed
  here as numba-cuda intrinsics made from the same definition (:func:`_typeof_neutral`).
- numba-cuda compiles a called ``numba.njit`` function as a device function for the current
  device's compute capability; :func:`compile_ptx` names the target instead (:func:`_target_device`).
- NVVM contracts ``a * b + c`` into ``fma.rn`` unless told ``-fma=0``, which the IEEE families
  (exact binary32 / binary64 operations) cannot have: every PTX here is compiled without it.

The PTX declares the lowest PTX ISA that knows its target (:data:`ARCHS`), not the one of the
NVVM that wrote it (CUDA 13.5's NVVM writes ``.version 9.5``, which a CUDA 13.0 driver cannot
JIT): ``sm_80`` 7.0 and ``sm_90a`` 8.0, which every CUDA 12 and 13 driver reads, and ``sm_100a``
8.6, which drivers from CUDA 12.8 on read.  ``tests/test_cuda_ptx.py`` assembles it with the ptxas of CUDA 12 and 13.
"""

from __future__ import annotations

import contextlib
import re
import threading
from collections import namedtuple
from types import SimpleNamespace

from mmasim.backends.cuda import missing

if missing():
    raise ImportError(missing())

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba.core.extending import _Intrinsic  # noqa: E402
from numba.cuda import compiler as cuda_compiler  # noqa: E402
from numba.cuda import dispatcher as cuda_dispatcher  # noqa: E402
from numba.cuda import extending as cuda_extending  # noqa: E402
from numba.cuda.typing import typeof as cuda_typeof  # noqa: E402

from mmasim.backends.cuda import rows  # noqa: E402
from mmasim.backends.numba.primitives import NEUTRAL_INTRINSICS  # noqa: E402

#: target -> (compute capability, PTX ISA version its PTX declares: the first that knows it)
ARCHS = {"sm_80": ((8, 0, ""), (7, 0)), "sm_90a": ((9, 0, "a"), (8, 0)), "sm_100a": ((10, 0, "a"), (8, 6))}

#: NVVM options of every compile: optimized, IEEE division and square root, no contraction to fma
NVVM_OPTIONS = {"opt": 3, "fastmath": False, "fma": False}

_LOCK = threading.Lock()
_TWINS: dict = {}
_previous_typeof = cuda_typeof.typeof_impl.dispatch(_Intrinsic)


@cuda_typeof.typeof_impl.register(_Intrinsic)
def _typeof_neutral(val, c):
    """numba-cuda's type of a CPU intrinsic: its CUDA twin's where it is target-neutral."""
    defn = NEUTRAL_INTRINSICS.get(id(val))
    if defn is None:
        return _previous_typeof(val, c)
    if id(val) not in _TWINS:
        _TWINS[id(val)] = cuda_extending.intrinsic(defn)
    return cuda_typeof.typeof_impl(_TWINS[id(val)], c)


@contextlib.contextmanager
def _target_device(cc):
    """numba-cuda's current device, as its dispatcher reads it to compile a called ``njit``
    function: a device of compute capability ``cc`` (no driver is asked)."""
    saved = cuda_dispatcher.get_current_device
    cuda_dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=cc[:2])
    try:
        yield
    finally:
        cuda_dispatcher.get_current_device = saved


def _declare_isa(ptx: str, isa) -> str:
    """``ptx`` with its ``.version`` lowered to ``isa`` (never raised)."""
    m = re.search(r"^\.version (\d+)\.(\d+)$", ptx, flags=re.M)
    if m is None or (int(m.group(1)), int(m.group(2))) <= tuple(isa):
        return ptx
    return ptx[:m.start()] + ".version %d.%d" % tuple(isa) + ptx[m.end():]


def compile_ptxs(fn, sig, archs=tuple(ARCHS)) -> dict:
    """``{arch: PTX}`` of kernel ``fn`` (a Python function, numba-cuda's kernel syntax) for
    argument types ``sig`` and each target of ``archs`` (keys of :data:`ARCHS`), compiled with
    :data:`NVVM_OPTIONS`; no GPU or driver needed.  numba-cuda lowers ``fn`` to NVVM IR once
    (for the first target), NVVM compiles that IR for each target."""
    out = {}
    cc0 = ARCHS[archs[0]][0]
    with _LOCK, _target_device(cc0):
        lib, _ = cuda_compiler._compile_pyfunc_with_fixup(fn, sig, device=False, cc=cc0, opt=True, abi="numba")
        lib._nvvm_options.update(NVVM_OPTIONS)
        for arch in archs:
            cc, isa = ARCHS[arch]
            out[arch] = _declare_isa(lib.get_asm_str(cc=cc), isa)
    return out


def compile_ptx(fn, sig, arch: str) -> str:
    """The PTX of kernel ``fn`` for argument types ``sig`` and target ``arch`` (:func:`compile_ptxs`)."""
    return compile_ptxs(fn, sig, (arch,))[arch]


def signature(plan, arrays) -> tuple:
    """The argument types of a driver for ``plan`` (:func:`.driver.cuda_driver`): the operands
    of :func:`.rows.dense_args`, the arrays of :func:`.rows.body_for`, D in the encoding's words
    and the rows' flags."""
    z = np.zeros((1, 1), np.uint64)
    ops = rows.dense_args(plan, z, z, z[0], z, z)
    return tuple(numba.typeof(x) for x in (*ops, *arrays, np.zeros(1, plan.encoding.dtype), np.zeros(1, np.bool_)))


#: One CUDA kernel the registered datapaths use: the driver of a body (or of the sparse
#: selection, ``select_row``) for one list of argument types; ``plan``, ``arrays`` and
#: ``instruction``: the first datapath that uses it; ``datapaths``: how many do.
CudaKernel = namedtuple("CudaKernel", "name driver signature plan instruction datapaths")


def _words(sig) -> str:
    """The word dtypes of array types ``sig``, for a file name: ``u1-u1-u4-u4``."""
    return "-".join(f"{t.dtype.kind if hasattr(t.dtype, 'kind') else str(t.dtype)[0]}{t.dtype.bitwidth // 8}"
                    for t in sig)


def kernels(registry=None, architectures=None, specialise: bool = False) -> list:
    """Every distinct CUDA kernel of the registered datapaths (one per driver and argument
    types: :class:`CudaKernel`), in the order first met: the generic bodies, or with
    ``specialise`` one per plan's constants (:func:`.rows.choose`); each sparse datapath
    also uses the driver of its selection (:func:`.rows.select_row`) for its A / B words.
    ``architectures``: the names of the architectures whose datapaths count (default: all
    but those that inherit another's)."""
    from mmasim.backends.cuda.driver import cuda_driver, select_cuda
    from mmasim.backends.plan import Plan
    from mmasim.registry.build import get_registry

    reg = registry or get_registry()
    found: dict = {}
    for arch in reg.architectures.values():
        if arch.inherits if architectures is None else arch.name not in architectures:
            continue                # an inheriting architecture: the datapaths of the one it inherits
        for dp in arch.datapaths:
            if dp.refuse:
                continue
            plan = Plan.build(dp, reg)
            body, arrays, _ = rows.choose(plan, specialise)
            if body is None:
                continue
            sig = signature(plan, arrays)
            uses = [(body.py_func.__name__, cuda_driver, body, sig, sig[:3] + sig[-2:-1])]
            if plan.sparse_rule is not None:
                sel = rows.select_args(plan, np.zeros((1, dp.k), np.uint64), np.zeros((1, dp.k), np.uint64),
                                       np.zeros((1, plan.sparse_rule.words(dp.k)), np.uint32))
                types = tuple(numba.typeof(x) for x in (*sel, np.zeros(1, np.bool_)))
                uses.append(("select_row", select_cuda, rows.select_row, types, types[:2]))
            for name, driver, fn, types, words in uses:
                key = (name, types)
                if key in found:
                    found[key] = found[key]._replace(datapaths=found[key].datapaths + 1)
                else:
                    found[key] = CudaKernel(f"{name}.{_words(words)}", driver(fn), types, plan,
                                            f"{arch.name} {dp.canonical(reg.formats)}", 1)
    return list(found.values())


def write_kernel(folder, kernel: CudaKernel, archs=tuple(ARCHS)) -> list:
    """The PTX of ``kernel`` for each target of ``archs`` written into ``folder`` (which must
    exist) as ``NAME.ARCH.ptx``; returns the paths."""
    import pathlib

    out = []
    for arch, ptx in compile_ptxs(kernel.driver, kernel.signature, archs).items():
        path = pathlib.Path(folder) / f"{kernel.name}.{arch}.ptx"
        path.write_text(ptx)
        out.append(path)
    return out


def write_ptx(folder, archs=tuple(ARCHS)) -> list:
    """The PTX of every kernel (:func:`kernels`) for each target of ``archs``, written into
    ``folder`` (made if absent) by :func:`write_kernel`; returns ``[(kernel, arch, path)]``."""
    import pathlib

    pathlib.Path(folder).mkdir(parents=True, exist_ok=True)
    return [(k, arch, path) for k in kernels()
            for arch, path in zip(archs, write_kernel(folder, k, archs))]
