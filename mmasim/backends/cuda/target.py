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
from mmasim.backends.cuda.launch import _LOCK, ARCHS, NVVM_OPTIONS, _declare_isa  # noqa: E402,F401 (target.*)
from mmasim.backends.numba.primitives import NEUTRAL_INTRINSICS  # noqa: E402

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
    """The word dtypes of array types ``sig``, for a file name: ``u1-u1-u4-u4`` (a layout other
    than C-contiguous follows its dtype: ``u1f``, ``u1a``)."""
    return "-".join(f"{t.dtype.kind if hasattr(t.dtype, 'kind') else str(t.dtype)[0]}{t.dtype.bitwidth // 8}"
                    f"{'' if t.layout == 'C' else t.layout.lower()}" for t in sig)


def kernels(registry=None, architectures=None, specialise: bool = False) -> list:
    """Every distinct CUDA kernel of the registered datapaths (one per driver and argument
    types: :class:`CudaKernel`), in the order first met: the generic bodies, or with
    ``specialise`` one per plan's constants (:func:`.rows.choose`); each sparse datapath
    also uses the driver of its selection (:func:`.rows.select_row`) for its A / B words;
    then the kernels of device operands (:func:`device_kernels`).
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
    return list(found.values()) + device_kernels()


def descriptor(t) -> tuple:
    """``(dtype, ndim, layout)`` of a numba type (a scalar: ndim 0), as :func:`launched` reads an argument."""
    from numba.np.numpy_support import as_dtype

    if isinstance(t, numba.types.Array):
        return as_dtype(t.dtype).str, t.ndim, t.layout
    return as_dtype(t).str, 0, ""


def _array(dtype, ndim: int = 2):
    """numba-cuda's type of a C-contiguous device array of ``dtype`` and ``ndim`` dimensions."""
    return numba.types.Array(numba.from_dtype(np.dtype(dtype)), ndim, "C")


def device_kernels() -> list:
    """The CUDA kernels that carry no datapath's per-row body (:class:`CudaKernel` with no plan):
    the copies and checks of device operands (:func:`.driver.gather_cuda`,
    :func:`.driver.range_cuda`), the GEMM's binary32 operations (:mod:`.arith32`) and the
    quantization bodies (:mod:`.quantize`, :mod:`.pcg64`, :mod:`.hadamard`) and D + C
    (:mod:`.c_add`), each for the argument types the device paths launch
    it with (``tests/cuda_sim.py`` checks every launch of the simulated tests against this list)."""
    from mmasim.backends.cuda import arith32, c_add, driver, hadamard, pcg64, quantize
    from mmasim.backends.numba.kernels import _format_specs, encoding_record
    from mmasim.backends.plan import Plan
    from mmasim.registry.build import get_registry

    reg = get_registry()
    FM, _ = _format_specs(Plan.build(next(iter(reg.architectures.values())).datapaths[0], reg))
    f8, f4, i8, ix = _array(np.float64), _array(np.float32), _array(np.int64), _array(np.int64, 1)
    out = []

    def add(name, drv, fn, *types):
        arrays_ = [t for t in types if isinstance(t, numba.types.Array)]
        out.append(CudaKernel(f"{name}.{_words(arrays_)}", drv(fn), tuple(types), None, "device operands", 0))

    for w in (np.uint8, np.uint16, np.uint32, np.uint64, np.float32):
        for layout in "CFA":        # the copy that makes a strided operand C-contiguous
            add("gather", driver.gather_cuda, None, _array(w).copy(layout=layout), ix, ix, _array(w))
    for w in (np.int8, np.int16, np.int32, np.int64):     # signed words of their container's width, as they lie
        for layout in "CFA":
            add("range", driver.range_cuda, None, _array(w).copy(layout=layout), numba.int64, _array(np.int32, 1))
    for layout in "CFA":            # byte words of a narrower container (e2m1, s4, b1)
        add("range", driver.range_cuda, None, _array(np.uint8).copy(layout=layout), numba.uint64, _array(np.int32, 1))
    for row in (arith32._add_row, arith32._mul_row, arith32._fma_row):
        add(row.py_func.__name__.strip("_"), driver.elementwise_cuda, row, f8, f8, f8, f8)
    add("mul_row", driver.elementwise_cuda, arith32._mul_row, f4, f4, f4, f8)
    for w in (np.uint8, np.uint16, np.uint32):
        add("values_row", driver.elementwise_cuda, arith32._values_row, _array(w), numba.typeof(FM), ix, f8)
    add("words_row", driver.elementwise_cuda, arith32._words_row, f8, f8, f8, _array(np.uint32))
    common = (i8, i8, ix, _array(np.float64, 1))
    status = _array(np.int8, 1)
    words = (np.uint8, np.uint16, np.uint32, np.uint64)
    for name, body in quantize.BODIES.items():
        scales = _array(np.float32) if name == "deepseek" else _array(np.uint8)
        # a cast's words of every width (an output format's too)
        outs = {"amax": [(f8, f8)], "values": [(f4, f4)], "recontainer": [(_array(w), _array(w)) for w in words[:2]],
                "cast": [(_array(w), scales) for w in words]}.get(name, [(_array(w), scales) for w in words[:2]])
        inputs = {"values": [_array(w) for w in words], "recontainer": [_array(w) for w in words[:2]]}.get(
            name, [f4] + ([f8] if name in ("amax", "cast") else []))   # cast: gemm's epilogue too
        for x in inputs:
            for o, sc in outs:
                if name == "recontainer" and o.dtype != x.dtype:
                    continue
                add(f"{name}_body", driver.quantize_cuda, body, numba.int64, x, *common, o, sc, status)
    # seed='s random bits (int64) and the Hadamard transform's bf16 steps
    for body, x, o, sc in ((pcg64.bits_body, _array(np.uint64), i8, i8),
                           (hadamard.bf16_words_body, f4, _array(np.uint16), _array(np.uint32)),
                           (hadamard.bf16_round_body, _array(np.uint32), f4, f4),
                           (hadamard.bf16_values_body, _array(np.uint16), f4, f4)):
        add(body.py_func.__name__, driver.quantize_cuda, body, numba.int64, x, *common, o, sc, status)
    # C added after a datapath's steps (D's words, C's, C's row index, FM, TAB, ENC, D + C)
    ENC = numba.typeof(encoding_record(reg.encodings["rne-f32"]))
    for w in (np.uint16, np.uint32):
        add("add_c_body", driver.add_c_cuda, c_add.add_c_body, _array(w, 1), _array(w, 1), ix, numba.typeof(FM), ix,
            ENC, _array(w, 1))
    return out


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
