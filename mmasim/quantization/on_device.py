"""The random Hadamard transform (:func:`mmasim.quantization.hadamard.transform`) of a matrix on
a CUDA device, computed there (issue 31): for the compiled quantization
(:func:`mmasim.quantization.compiled.quantize` with ``hadamard=``) and mmasim.torch's emulated
GEMM of CUDA operands (:mod:`mmasim.torch.on_device`).

The transform's own rules, in its order: x's elements cast into bf16 and refused where the
cast is not exact (:func:`~mmasim.backends.cuda.hadamard.bf16_words_body`: a flag, after which
the caller runs the numpy code on a host copy, which raises), each group of 16 elements along
the last axis times the columns of :meth:`~mmasim.quantization.hadamard.Hadamard.matrix` by the
transform's instruction (:func:`~mmasim.quantization.hadamard.instruction_plan`, C = +0) on the
device's rows (:func:`mmasim.backends.cuda.device.device_tile`: a row per group and column, in
place), D rounded to nearest even into bf16
(:func:`~mmasim.backends.cuda.hadamard.bf16_round_body`).  What comes to the host: each
body's status flag, and the rows of the products the cuda backend leaves to the reference
(:func:`~mmasim.backends.cuda.device.device_tile`'s rule).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from mmasim.quantization import casts
from mmasim.quantization.hadamard import SIZE, Hadamard, instruction_plan
from mmasim.registry.build import get_registry

#: what the device's rows read of an instruction (:func:`~mmasim.backends.cuda.device.device_tile`
#: reads a model's ``plan``, and names its ``instruction`` in a message)
Instruction = namedtuple("Instruction", "plan instruction")


def _launch(body, x, CS, out, scales=None) -> bool:
    """``body`` (a quantization body) over the elements of the device matrix ``out``; whether
    none flagged its element."""
    from mmasim.backends.cuda.quantize import OK, CudaArrays as arrays

    status = arrays.put(np.zeros(1, np.int8))
    arrays.launch(body, out.shape[0] * out.shape[1], x, arrays.empty((0, 0), np.int64), CS,
                  arrays.put(np.zeros(1, np.int64)), arrays.put(np.zeros(1)), out,
                  out if scales is None else scales, status)
    return arrays.get(status)[0] == OK


def _bf16_cast():
    """bf16 and the device row of its cast ``casts.cast(bf16, x, nan="propagate")`` (:func:`cast_spec`)."""
    from mmasim.backends.cuda.quantize import CudaArrays, cast_spec

    bf16 = get_registry().formats["bf16"]
    return bf16, CudaArrays.put(cast_spec(bf16, nan="propagate", nan_field=casts._nan_field(bf16))[None, :])


def hadamard(x, spec: Hadamard, pad=None):
    """:func:`~mmasim.quantization.hadamard.transform` along the last axis of the device matrix
    ``x`` (zero padded to ``pad``, ``(rows, columns)``, as the compiled bodies read a padded
    matrix), on the device: a float32 device matrix of the padded shape, or ``None`` where x
    holds a value that is not bf16 (the numpy code refuses it).  The columns must be a multiple
    of 16 (the caller checks)."""
    from mmasim.backends.cuda import device
    from mmasim.backends.cuda.hadamard import bf16_round_body, bf16_words_body
    from mmasim.backends.cuda.quantize import CudaArrays as arrays
    from mmasim.backends.plan import word_dtype

    R, C = tuple(x.shape) if pad is None else tuple(pad)
    plan = instruction_plan(spec, "the Hadamard transform")
    bf16, CS = _bf16_cast()
    words = arrays.empty((R, C), word_dtype(bf16))
    zeros = arrays.empty((R, C), word_dtype(plan.c_format))     # C = +0 (word 0), written beside the words
    if not _launch(bf16_words_body, device.as_device(x), CS, words, zeros):
        return None
    n = R * C // SIZE
    matrix = arrays.put(casts.cast(bf16, spec.matrix()))      # row k multiplies element k of a group
    d = device.device_tile(Instruction(plan, f"{spec.arch} {spec.instruction}"), words.reshape(n, SIZE), matrix,
                           zeros.reshape(n, SIZE))
    out = arrays.empty((R, C), np.float32)
    _launch(bf16_round_body, d.reshape(R, C), CS, out)
    return out


def bf16_values(words):
    """The values (float32, a device matrix) of the bf16 words of device matrix ``words``."""
    from mmasim.backends.cuda.hadamard import bf16_values_body
    from mmasim.backends.cuda.quantize import CudaArrays as arrays

    out = arrays.empty(tuple(words.shape), np.float32)
    _launch(bf16_values_body, words, _bf16_cast()[1], out)
    return out
