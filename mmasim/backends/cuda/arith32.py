"""binary32 arithmetic of a GEMM's CUDA cores on device arrays: the operations of the device's
:class:`mmasim.composition.mainloop.Arith` (:func:`mmasim.composition.on_device.device_arith`; the
host's is :data:`mmasim.composition.mainloop.HOST`), so that promotion, split-K and the epilogue of
device operands run on the device by the one loop of :func:`mmasim.composition.mainloop.accumulate`
and the one :meth:`mmasim.composition.epilogue.Epilogue.apply`.

Each operation is an elementwise kernel (:func:`.driver.elementwise_cuda`, a thread per element
of a 2-D result) of a target-neutral numba row function: ``x + y`` (FADD) and ``x * y`` (FMUL)
in binary32, ``fma(x, y, z)`` (FFMA) by the project's neutral ``llvm.fma``
(:func:`mmasim.backends.numba.primitives._fma`, as the IEEE FMA chains use it), compiled with
NVVM's contraction off (:func:`.launch.forced_nvvm`), so each is one IEEE RNE operation as
:mod:`mmasim.arith.binary32` computes it on the host.  Values are binary32 values held in
float64 device arrays (as the host holds them); an operand of shape ``(M, 1)`` or ``(1, N)``
is broadcast, a binary32 scalar (the epilogue's alpha and beta) too.  Words of any format
binary32 holds become values by the format's decode spec (:func:`_decode`), binary32 values
become f32 words (NaN the canonical ``0x7FFFFFFF``) by :func:`to_words`, and words of the
epilogue's output format by :func:`cast`, the compiled plain cast of
:mod:`mmasim.backends.cuda.quantize` (the project's one rounding, not a new one).
"""

from __future__ import annotations

import functools

import numpy as np

from mmasim.backends.cuda import launch as _launch
from mmasim.backends.cuda import device
from mmasim.backends.numba.primitives import _bitcast, _decode, _fma, _fmt, _inline_rows, _value


@_inline_rows
def _at(x, i, j):
    """``x[i, j]``, a row or column of one broadcast."""
    return x[i if x.shape[0] > 1 else 0, j if x.shape[1] > 1 else 0]


@_inline_rows
def _add_row(d, x, y, z, out):
    i, j = d // out.shape[1], d % out.shape[1]
    out[i, j] = np.float64(np.float32(_at(x, i, j)) + np.float32(_at(y, i, j)))


@_inline_rows
def _mul_row(d, x, y, z, out):
    i, j = d // out.shape[1], d % out.shape[1]
    out[i, j] = np.float64(np.float32(_at(x, i, j)) * np.float32(_at(y, i, j)))


@_inline_rows
def _fma_row(d, x, y, z, out):
    i, j = d // out.shape[1], d % out.shape[1]
    out[i, j] = np.float64(_fma(np.float32(_at(x, i, j)), np.float32(_at(y, i, j)), np.float32(_at(z, i, j))))


@_inline_rows
def _values_row(d, w, FM, TAB, out):
    """The value of word ``w[i, j]`` of the format of ``FM``'s first record."""
    i, j = d // out.shape[1], d % out.shape[1]
    cls, s, m, q, r = _decode(np.int64(w[i, j]), _fmt(FM, 0), TAB)
    out[i, j] = _value(cls, s, m, q)


@_inline_rows
def _words_row(d, x, y, z, out):
    """The binary32 word of the binary32 value ``x[i, j]`` (float64), NaN ``0x7FFFFFFF``."""
    i, j = d // out.shape[1], d % out.shape[1]
    v = x[i, j]
    b = _bitcast(v)
    sign = (b >> 63) & 1
    e = (b >> 52) & 0x7FF
    frac = b & ((np.int64(1) << 52) - 1)
    if v != v:
        w = np.int64(0x7FFFFFFF)
    elif e == 0x7FF:
        w = (sign << 31) | 0x7F800000
    elif v == 0.0:
        w = sign << 31
    elif e - 1023 >= -126:
        w = (sign << 31) | ((e - 1023 + 127) << 23) | (frac >> 29)
    else:       # a binary32 subnormal: exact in the shifted significand
        w = (sign << 31) | ((frac | (np.int64(1) << 52)) >> (29 + (-126 - (e - 1023))))
    out[i, j] = np.uint32(w)


def _run(row, out, *args):
    """``row`` over the elements of the 2-D device array ``out``."""
    from mmasim.backends.cuda import driver

    # C-contiguous operands (a strided slice, a scale's column, copied on the device): one kernel
    # per row function and dtypes, the one whose PTX CI checks
    args = tuple(x if device._contiguous(x) else device._gather(x) for x in args)
    args = args + (args[0],) * (3 - len(args))
    _launch.launch(driver.elementwise_cuda, row, out.shape[0] * out.shape[1], (*args, out))
    return out


def zeros(shape, dtype=np.float64):
    return device.cuda_module().to_device(np.zeros(shape, dtype))


def _new(*xs):
    return device.cuda_module().device_array(tuple(max(x.shape[i] for x in xs) for i in (0, 1)), np.float64)


def _operands(*xs):
    """Device arrays, a binary32 scalar (the epilogue's alpha and beta) as a ``(1, 1)`` one."""
    return [device.cuda_module().to_device(np.full((1, 1), x, np.float64))
            if isinstance(x, (float, int, np.number)) else x for x in xs]


def add(x, y):
    x, y = _operands(x, y)
    return _run(_add_row, _new(x, y), x, y)


def mul(x, y):
    x, y = _operands(x, y)
    return _run(_mul_row, _new(x, y), x, y)


def fma(x, y, z):
    x, y, z = _operands(x, y, z)
    return _run(_fma_row, _new(x, y, z), x, y, z)


@functools.lru_cache(maxsize=None)
def _format_arrays(fmt):
    """(FM of ``fmt``, TAB) on the device: its decode spec as the kernels build it
    (:func:`mmasim.backends.numba.kernels.format_records`, the registered decoder's)."""
    from mmasim.backends.numba.kernels import format_records
    from mmasim.registry.build import get_registry

    decoders = get_registry().decoders
    FM, TAB = format_records([fmt], lambda f: decoders[f.decoder])
    cuda = device.cuda_module()
    return cuda.to_device(FM), cuda.to_device(TAB)


def values(fmt, words):
    """The binary32 values (float64) of the device words ``words`` of ``fmt`` (any format
    binary32 holds: the instruction's C or D, an epilogue's output format)."""
    FM, TAB = _format_arrays(fmt)
    return _run(_values_row, _new(words), words, FM, TAB)


def to_words(x):
    """The f32 words of binary32 values ``x`` (a device array, NaN ``0x7FFFFFFF``)."""
    return _run(_words_row, device.cuda_module().device_array(tuple(x.shape), np.uint32), x)


def cast(x, fmt, saturate: bool):
    """The words of ``fmt`` of the binary32 values ``x`` (a device array): one RNE rounding by the
    compiled plain cast (:func:`mmasim.backends.cuda.quantize.cast_body`, the one-value
    :func:`mmasim.arith.encode.encode`: :func:`~mmasim.backends.numba.primitives._round_any`),
    ``saturate`` as :func:`mmasim.composition.epilogue.convert` takes it, NaN the format's quiet
    NaN (``nan="propagate"``).  Such a cast refuses nothing (a float format with NaN, values
    that are binary32), so its status is not read back."""
    from mmasim.backends.cuda.quantize import CudaArrays, cast_body, cast_spec
    from mmasim.backends.plan import word_dtype

    cuda = device.cuda_module()
    spec = cast_spec(fmt, saturate=saturate, nan="propagate")
    out = cuda.device_array(tuple(x.shape), word_dtype(fmt))
    CudaArrays.launch(cast_body, x.shape[0] * x.shape[1], x, cuda.to_device(np.zeros((0, 0), np.int64)),
                      cuda.to_device(np.stack([spec, spec])), cuda.to_device(np.zeros(1, np.int64)),
                      cuda.to_device(np.zeros(2, np.float64)), out,
                      cuda.device_array((1, 1), np.uint8), cuda.to_device(np.zeros(1, np.int8)))
    return out


def widen(scale_b, bn: int):
    """``scale_b`` ``(K / bk, N / bn)`` with each column repeated ``bn`` times: ``(K / bk, N)``."""
    return device._gather(scale_b, None, np.repeat(np.arange(scale_b.shape[1], dtype=np.int64), bn))


def tile(model, A, B, C, scale_a, scale_b, sparse_metadata, backend, threads):
    return device.device_tile(model, A, B, C, scale_a, scale_b, sparse_metadata)


__all__ = ["tile", "to_words", "cast", "add", "mul", "fma", "values", "zeros", "widen"]
