"""Operands on the CUDA device: ``Model.dot``, the matrix form and ``gemm`` under ``backend="cuda"``.

An operand with ``__cuda_array_interface__`` (a numba device array, a CUDA torch tensor,
a CuPy array) is read where it lies (:func:`numba.cuda.as_cuda_array`: no copy); the
checks that need only its metadata (shape, dtype) run on the host, those that need its
words run on the device (:func:`_check_range`: a word beyond its container; the sparse
selectors, by the selection's legality flags), and D stays on the device: a torch tensor
for torch operands (``torch.as_tensor``), else a numba device array.  What does come to
the host: one flag per check, one flag per row, the row indices of a broadcast batch go
the other way, and, only where a row is flagged (a sum the body leaves to the reference),
the operands, for the numpy reference of those rows.  A datapath that adds C after its
steps (``c_add``) adds it on the device too (:mod:`.c_add`).  Device operands are
container words: values (float dtypes) are refused (:class:`~mmasim.DtypeError`); numpy
operands beside them are checked as :meth:`~mmasim.execution.model.Model.dot` checks words,
then copied to the device.

:func:`mmasim.gemm` on device operands: its plain chain, promotion and split-K run on the
device, one instruction per K tile on views of the operands (:func:`device_tile`;
:mod:`mmasim.composition.on_device`, the binary32 operations by :mod:`.arith32`), and so does
its epilogue (the output conversion by the compiled cast): D stays on the device.

Under ``NUMBA_ENABLE_CUDASIM=1`` the simulator's device memory is host memory: an
``__cuda_array_interface__`` object is read through its pointer, without a copy, as the
GPU reads it.
"""

from __future__ import annotations

import functools

import numpy as np

from mmasim.backends.cuda import launch as _launch
from mmasim.backends.cuda.launch import _contiguous, as_device, cuda_module, is_device  # noqa: F401 (read as device.*)
from mmasim.errors import DtypeError, OperandError, ScaleError, ShapeError, SparseMetadataError, WordRangeError


#: the types of a call's arguments that never lie on a device: passed over without a call
_HOST_TYPES = frozenset({np.ndarray, int, float, str, bool, type(None)})


def _any_device(args, kwargs) -> bool:
    """Whether any argument lies on a device (:func:`is_device`); numpy arrays, the common
    case of every call, and the keywords' names and numbers are passed over without a call."""
    for x in args:
        if type(x) not in _HOST_TYPES and is_device(x):
            return True
    if kwargs:          # two loops: a chain of both costs more on every call than it saves
        for x in kwargs.values():
            if type(x) not in _HOST_TYPES and is_device(x):
                return True
    return False


def _wants_cuda(model, backend) -> bool:
    """Whether a call with device operands runs on the device: its backend (else the model's) is
    cuda, or auto where the cuda backend can run (:func:`mmasim.backends.wants`)."""
    from mmasim import backends

    return backends.wants(backend if backend is not None else getattr(model, "backend", None), "cuda")


def on_device(kind: str, gemm_handler=None):
    """Decorate ``Model.dot`` (``kind`` "dot"), the matrix form ("matrix") or ``gemm``
    ("gemm", computed on device operands by ``gemm_handler(fn, args, kwargs)``: the composition layer's
    :func:`mmasim.composition.on_device.gemm_of_device_operands`): a call with an operand on the
    device, under the cuda backend, is computed by :func:`dot` / :func:`matrix` / ``gemm``; any
    other call as before."""

    def deco(fn):
        if kind == "gemm":
            @functools.wraps(fn)
            def gemm_wrapper(*args, **kwargs):
                if _any_device(args, kwargs) and _wants_cuda(kwargs.get("model"), kwargs.get("backend")):
                    return gemm_handler(fn, args, kwargs)
                return fn(*args, **kwargs)

            return gemm_wrapper
        device_fn = dot if kind == "dot" else matrix

        @functools.wraps(fn)
        def method_wrapper(model, *ops, **kwargs):
            if _any_device(ops, kwargs) and _wants_cuda(model, kwargs.get("backend")):
                return device_fn(model, *ops, **kwargs)
            return fn(model, *ops, **kwargs)

        return method_wrapper

    return deco


# ------------------------------------------------------------------ device arrays
def _launch_plain(driver, n, args):
    """A kernel of :mod:`.driver` with no body (``"gather_cuda"``, ``"range_cuda"``) over ``n``
    rows (:func:`.launch.launch`)."""
    from mmasim.backends.cuda import driver as drivers     # numba: imported with the first device operand

    _launch.launch(getattr(drivers, driver), None, n, args)


def _empty_index():
    cuda = cuda_module()
    return cuda.to_device(np.zeros(0, np.int64))


def _gather(src, rows=None, cols=None):
    """A contiguous device copy of the rows ``rows`` (all) and columns ``cols`` (all) of the 2-D ``src``."""
    cuda = cuda_module()
    n = src.shape[0] if rows is None else len(rows)
    k = src.shape[1] if cols is None else len(cols)
    dst = cuda.device_array((n, k), src.dtype)
    ri = _empty_index() if rows is None else cuda.to_device(np.ascontiguousarray(rows, np.int64))
    ci = _empty_index() if cols is None else cuda.to_device(np.ascontiguousarray(cols, np.int64))
    _launch_plain("gather_cuda", n, (src, ri, ci, dst))
    return dst


def _rows2d(x, vector: bool, what: str):
    """``x`` as 2-D rows on the device, without a copy: a vector operand's last axis kept (a
    strided matrix read as it lies), C one word a row."""
    shape = tuple(x.shape)
    if _contiguous(x):
        return x.reshape(-1, shape[-1]) if vector else x.reshape(-1, 1)
    if vector and len(shape) == 2:
        return x
    if not vector and len(shape) == 1:
        return _as_column(x)
    raise OperandError(f"{what} on the CUDA device must be C-contiguous, or a strided {'2' if vector else '1'}-D "
                       f"array; got shape {shape} with strides {tuple(x.strides)}")


def _as_column(x):
    """A 1-D device array as a 2-D column view (no copy)."""
    cuda = cuda_module()
    if _launch.simulated():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        a = x._ary
        return FakeCUDAArray(np.lib.stride_tricks.as_strided(a, (a.shape[0], 1), (a.strides[0], a.itemsize)))
    from numba.cuda.cudadrv.devicearray import DeviceNDArray
    return DeviceNDArray((x.shape[0], 1), (x.strides[0], x.dtype.itemsize), x.dtype, gpu_data=x.gpu_data)


# ------------------------------------------------------------------ checks
def device_words(model, x, fmt, what):
    """``x`` as device words of ``fmt``: a device array (integer dtype, words checked on the
    device) or a numpy operand (checked as :meth:`Model.dot` checks words, then copied)."""
    from mmasim.operands.words import WORDS, as_array, checked_words

    if not is_device(x):
        arr, mode = as_array(x, what)
        if mode != WORDS:
            raise DtypeError(f"{what}: beside operands on the CUDA device, host operands must be container words "
                             f"(integer dtype) too; got {arr.dtype}")
        return cuda_module().to_device(np.ascontiguousarray(checked_words(arr, mode, fmt, what)))
    d = as_device(x)
    if np.dtype(d.dtype).kind not in "ui":
        raise DtypeError(f"{what} on the CUDA device must hold container words of {fmt.name} (an integer dtype); "
                         f"got {d.dtype}: values are converted on the host (pass a host array)")
    if np.dtype(d.dtype).itemsize * 8 != max(8, fmt.container_bits):
        raise DtypeError(f"{what} on the CUDA device must hold {fmt.name}'s {fmt.container_bits}-bit container words "
                         f"in an integer dtype of {max(8, fmt.container_bits)} bits (e.g. torch.int"
                         f"{max(8, fmt.container_bits)} or numpy.uint{max(8, fmt.container_bits)}); got {d.dtype}")
    return d


def _as_container(x, dtype):
    """The device words ``x`` (checked against their container) as ``dtype`` words of the same
    width, without a copy: a signed dtype read as unsigned, so that the bodies run one kernel per
    container (the one whose PTX CI checks)."""
    if x is None or np.dtype(x.dtype) == np.dtype(dtype):
        return x
    if _launch.simulated():
        from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
        return FakeCUDAArray(x._ary.view(dtype))
    return x.view(dtype)


def _check_range(rows2d, fmt, what):
    """A :class:`~mmasim.WordRangeError` where a word of the device rows is outside ``fmt``'s container."""
    cuda = cuda_module()
    dt = np.dtype(rows2d.dtype)
    top = (1 << fmt.container_bits) - 1
    if dt.kind == "u" and dt.itemsize * 8 <= fmt.container_bits:
        return                          # none can be out of its container
    bad = cuda.to_device(np.zeros(1, np.int32))
    _launch_plain("range_cuda", rows2d.shape[0], (rows2d, np.uint64(top) if dt.kind == "u" else np.int64(
        min(top, np.iinfo(dt).max)), bad))
    if bad.copy_to_host()[0]:
        raise WordRangeError(f"{what}: a word on the CUDA device is outside {fmt.name}'s "
                             f"{fmt.container_bits}-bit container (0 .. {top:#x})")


def _index(own: tuple, batch: tuple):
    """The flat row of an operand of batch shape ``own`` for each row of ``batch`` (``None``: the identity)."""
    if tuple(own) == tuple(batch):
        return None
    n = int(np.prod(own, dtype=np.int64))
    return np.ascontiguousarray(np.broadcast_to(np.arange(n, dtype=np.int64).reshape(own), batch).reshape(-1))


# ------------------------------------------------------------------ computing
def as_given_kind(d, first):
    """D as the call returns it: a torch tensor on ``first``'s device for a torch operand, else the device array."""
    if first is not None and type(first).__module__.startswith("torch"):
        import torch
        return torch.as_tensor(d, device=first.device)
    return d


def _compute(model, ops, index, n):
    """D words (a device array of ``n`` rows) of the device rows ``ops`` (A, B, C, scales,
    metadata: 2-D, C a column) read through ``index`` (a row index per operand, ``None``: the identity)."""
    from mmasim import backends
    from mmasim.backends.plan import compute

    cuda = cuda_module()
    plan = model.plan
    be = backends.get("cuda")
    if n == 0:
        return cuda.device_array(0, plan.encoding.dtype)
    prep = be.prepared(plan)
    if prep.body is None:
        # no body takes the plan: the reference for every row (from host copies of the operands)
        return cuda.to_device(compute(_launch.Reference, plan, _host_rows(ops, index, n)))
    dtypes = [*plan.word_dtypes[:3], *(plan.word_dtypes[3:5] if plan.scaled else ()), np.uint32]
    ops, index = [_as_container(x, dt) for x, dt in zip(ops, dtypes)], list(index)
    if plan.order is not None:          # the steps take K in the plan's order
        for i in (0, 1):
            ops[i] = _gather(ops[i], index[i], plan.order)
            index[i] = None
    if plan.c_add is not None:          # the steps from +0; C added after them (below)
        c_given = ops[2]
        ops[2] = cuda.to_device(np.zeros(ops[2].shape, np.dtype(ops[2].dtype)))
    ref_rows = list(ops), list(index)   # the rows as the reference reads them
    if plan.sparse_rule is not None:
        a, b, md = (ops[i] if index[i] is None else _gather(ops[i], index[i]) for i in (0, 1, len(ops) - 1))
        ops[0], ops[1], legal = be.select(plan, a, b, md)
        index[0] = index[1] = None
        ops.pop()
        index.pop()
        ok = legal.copy_to_host()
        if not ok.all():
            raise SparseMetadataError(f"{model.instruction}: sparse_metadata row {int(np.flatnonzero(~ok)[0])} "
                                      "holds an illegal selector (checked on the CUDA device)")
    # the bodies read C-contiguous rows, so that one kernel per body and word types runs (the one
    # whose PTX CI checks): a strided tile (a K slice, B read transposed) is copied on the device
    cuda_ops = [x if i == 2 or x is None or _contiguous(x) else _gather(x) for i, x in enumerate(ops)]
    c = _column(cuda_ops[2])
    from mmasim.backends.numba import unscaled

    sa, sb = (cuda_ops[3], cuda_ops[4]) if plan.scaled else (cuda.to_device(unscaled(np.uint8)),) * 2
    idx = [_empty_index() if i is None else cuda.to_device(i) for i in
           (index[0], index[1], index[2], *(index[3:5] if plan.scaled else (None, None)))]
    out, flags = be.run(plan, (cuda_ops[0], cuda_ops[1], c, sa, sb, *idx, 0), n)
    bad = flags.copy_to_host()
    if bad.any():       # rows the body leaves to the reference: the operands come to the host
        d = out.copy_to_host()
        sel = np.flatnonzero(bad)
        d[sel] = _launch.reference(plan, _host_rows(*ref_rows, n).take(sel))
        out = cuda.to_device(d)
    if plan.c_add is not None:          # D + C on the device (:mod:`.c_add`)
        from mmasim.backends.cuda.c_add import add_c_device
        out = add_c_device(plan, out, _column(c_given), idx[2])
    return out


def _column(c):
    """The device column ``c`` (C's words) as a contiguous 1-D device array."""
    return (c if _contiguous(c) else _gather(c)).reshape(-1)


def _host_rows(ops, index, n):
    """Host copies of the device rows (C a column), as a :class:`~mmasim.backends.plan.Rows` of ``n`` rows."""
    from mmasim.backends.plan import Rows

    arrays = []
    for i, (x, ix) in enumerate(zip(ops, index)):
        h = x.copy_to_host()
        h = h if ix is None else h[ix]
        arrays.append(h[:, 0] if i == 2 else h)
    return Rows.batch(arrays, (n,), 0, n)


def first_on_device(xs):
    return next((x for x in xs if is_device(x)), None)


def dot(model, a, b, c, scale_a=None, scale_b=None, sparse_metadata=None, backend=None, threads=None):
    """:meth:`Model.dot` on device operands (see the module)."""
    dp = model.datapath
    first = first_on_device((a, b, c, scale_a, scale_b, sparse_metadata))
    fa, fb, fc = model.a_format, model.b_format, model.c_format
    wa, wb, wc = device_words(model, a, fa, "a"), device_words(model, b, fb, "b"), device_words(model, c, fc, "c")
    for name, w in (("a", wa), ("b", wb)):
        if len(w.shape) == 0 or tuple(w.shape)[-1] != dp.k:
            raise ShapeError(f"operand {name} must have shape (..., {dp.k}) for {model.instruction}"
                             + (" (the logical K of the sparse instruction)" if dp.sparse else "")
                             + f"; got {tuple(w.shape)}")
    extra, fmts = [], [fa, fb, fc]
    if dp.scale:
        if scale_a is None or scale_b is None:
            raise ScaleError(f"{model.instruction} needs scale_a and scale_b of shape (..., {dp.blocks})")
        for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
            ws = device_words(model, s, model.scale_format, name)
            if len(ws.shape) == 0 or tuple(ws.shape)[-1] != dp.blocks:
                raise ScaleError(f"{name} must have shape (..., {dp.blocks}): one {model.scale_format.name} scale "
                                 f"per block of {dp.block} elements; got {tuple(ws.shape)}")
            extra.append(ws)
            fmts.append(model.scale_format)
    elif scale_a is not None or scale_b is not None:
        raise ScaleError(f"{model.instruction} is not block-scaled: scale_a/scale_b must be None")
    if model.takes_metadata(sparse_metadata):
        nwords = model.sparse_rule.words(dp.k)
        md = device_metadata(sparse_metadata)
        if len(md.shape) == 0 or tuple(md.shape)[-1] != nwords:
            raise SparseMetadataError(f"sparse_metadata must have shape (..., {nwords}) for {model.instruction}; "
                                      f"got {tuple(md.shape)}")
        extra.append(md)
    ops = [wa, wb, wc, *extra]
    owns = [tuple(x.shape)[:-1] if i != 2 else tuple(x.shape) for i, x in enumerate(ops)]
    try:
        batch = np.broadcast_shapes(*owns)
    except ValueError as exc:
        raise ShapeError("operand batch shapes do not broadcast: "
                         + ", ".join(str(tuple(x.shape)) for x in ops)) from exc
    rows = [_rows2d(x, i != 2, name) for i, (x, name) in
            enumerate(zip(ops, ("a", "b", "c", *(("scale_a", "scale_b") if dp.scale else ()), "sparse_metadata")))]
    for r, f, name in zip(rows, fmts, ("a", "b", "c", "scale_a", "scale_b")):
        _check_range(r, f, name)
    n = int(np.prod(batch, dtype=np.int64))
    d = _compute(model, rows, [_index(o, batch) for o in owns], n)
    return as_given_kind(d.reshape(batch), first)


def device_metadata(md):
    """The sparse metadata words on the device (integer dtype); a host array is checked as words and copied."""
    if not is_device(md):
        arr = np.asarray(md)
        if arr.dtype.kind not in "ui":
            raise SparseMetadataError(f"sparse_metadata must be integer 32-bit words; got {arr.dtype}")
        return cuda_module().to_device(np.ascontiguousarray(arr, np.uint32))
    d = as_device(md)
    if np.dtype(d.dtype).kind not in "ui" or np.dtype(d.dtype).itemsize != 4:
        raise SparseMetadataError(f"sparse_metadata on the CUDA device must be integer 32-bit words; got {d.dtype}")
    return d


def matrix(model, A, B, C, scale_a=None, scale_b=None, sparse_metadata=None, backend=None, threads=None):
    """The matrix form ``Model(A, B, C)`` on device operands (see the module)."""
    dp = model.datapath
    first = first_on_device((A, B, C, scale_a, scale_b, sparse_metadata))
    wa, wb, wc = device_words(model, A, model.a_format, "A"), device_words(model, B, model.b_format, "B"), \
        device_words(model, C, model.c_format, "C")
    if len(wa.shape) != 2 or len(wb.shape) != 2 or len(wc.shape) != 2:
        raise ShapeError(f"matrix form: A, B and C must be 2-D; got {tuple(wa.shape)}, {tuple(wb.shape)} and "
                         f"{tuple(wc.shape)}")
    (M, K), N = wa.shape, wb.shape[1]
    if wb.shape[0] != K or tuple(wc.shape) != (M, N):
        raise ShapeError(f"matrix form: A (M, K), B (K, N) and C (M, N) do not agree: {tuple(wa.shape)}, "
                         f"{tuple(wb.shape)}, {tuple(wc.shape)}")
    ms, ns = model.legal_m, model.legal_n
    if (ms and M not in ms) or (ns and N not in ns):
        model.check_tiles(tuple(wa.shape), tuple(wb.shape), "matrix form")
    if K != dp.k:
        raise ShapeError(f"{model.instruction} has K = {dp.k}, but A is {tuple(wa.shape)} and B is "
                         f"{tuple(wb.shape)} (K = {K}); chain instructions over K with mmasim.gemm")
    sa = sb = md = None
    if dp.scale:
        if scale_a is None or scale_b is None:
            raise ScaleError(f"{model.instruction} needs scale_a (M, blocks) and scale_b (blocks, N)")
        sa = device_words(model, scale_a, model.scale_format, "scale_a")
        sb = device_words(model, scale_b, model.scale_format, "scale_b")
        if tuple(sa.shape) != (M, dp.blocks) or tuple(sb.shape) != (dp.blocks, N):
            raise ScaleError(f"matrix form of {model.instruction}: scale_a must be (M, blocks) = ({M}, {dp.blocks}) "
                             f"and scale_b (blocks, N) = ({dp.blocks}, {N}); got {tuple(sa.shape)} and "
                             f"{tuple(sb.shape)}")
    elif scale_a is not None or scale_b is not None:
        raise ScaleError(f"{model.instruction} is not block-scaled: scale_a/scale_b must be None")
    if model.takes_metadata(sparse_metadata):
        md = device_metadata(sparse_metadata)
        nwords = model.sparse_rule.words(dp.k)
        if tuple(md.shape) != (M, nwords):
            raise SparseMetadataError(f"matrix form of {model.instruction}: sparse_metadata must be (M, words) = "
                                      f"({M}, {nwords}) (A is the sparse operand); got {tuple(md.shape)}")
    check_device_matrices(model, wa, wb, wc, sa, sb)
    return as_given_kind(device_tile(model, wa, wb, wc, sa, sb, md), first)


def check_device_matrices(model, wa, wb, wc, sa, sb, c_format=None):
    """The words of the device matrices checked against their containers (on the device; C's
    ``c_format``, default the instruction's C format)."""
    for x, f, name in ((wa, model.a_format, "A"), (wb, model.b_format, "B"),
                       (wc, model.c_format if c_format is None else c_format, "C"),
                       (sa, model.scale_format, "scale_a"), (sb, model.scale_format, "scale_b")):
        if x is not None:
            _check_range(x, f, name)


def device_tile(model, wa, wb, wc, sa=None, sb=None, md=None):
    """D ``(M, N)`` on the device of one instruction's matrices, checked: A ``(M, k)``, B
    ``(k, N)``, C ``(M, N)`` (views, any strides), the scales and metadata where the datapath
    takes them; row ``(i, j)`` reads A's row ``i`` and B's column ``j`` in place."""
    (M, _), N = wa.shape, wb.shape[1]
    ops = [wa, wb.T, (wc if _contiguous(wc) else _gather(wc)).reshape(-1, 1)]     # C a column
    index = [np.repeat(np.arange(M, dtype=np.int64), N), np.tile(np.arange(N, dtype=np.int64), M), None]
    if sa is not None:
        ops += [sa, sb.T]
        index += index[:2]
    if md is not None:
        ops.append(md)
        index.append(index[0])
    return _compute(model, ops, index, M * N).reshape(M, N)


def to_host(x):
    """A host (numpy) copy of a device operand; anything else as it is."""
    if not is_device(x):
        return x
    return as_device(x).copy_to_host()
