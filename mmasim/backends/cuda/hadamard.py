"""The two bf16 steps of the random Hadamard transform (:func:`mmasim.quantization.hadamard.transform`)
as target-neutral bodies of the quantization drivers (:mod:`.quantize`: the CPU driver, and
:func:`.driver.quantize_cuda`, a thread per element), so that the transform of a matrix on a
CUDA device runs there: the group products between them are the transform's instruction on the
device's rows (:func:`.device.device_tile`).

- :func:`bf16_words_body`: element ``(i, j)`` of ``x`` (zero past its end, as a padded matrix
  reads) cast into bf16 by ``CS[0]`` (the transform's ``casts.cast(bf16, x, nan="propagate")``),
  flagged :data:`ST_NOT_BF16` where the word's value is not x's (NaN excepted): the values
  the transform refuses; ``scales[i, j]`` is set to 0 (the zero accumulator C of the products).
- :func:`bf16_round_body`: D's f32 word ``x[i, j]`` rounded by ``CS[0]`` into bf16 (to nearest
  even, NaN propagated), written as that word's value (float32): the transform's last step.
- :func:`bf16_values_body`: bf16 word ``x[i, j]`` as its value (float32): an emulated GEMM's
  operand rounded to bf16 before the transform reads it (:mod:`mmasim.torch.matmul`).

A word's value is read by the kernels' decoder (:func:`~mmasim.backends.numba.primitives._decode`)
with bf16's decode spec, made from the core's format record (:data:`BF16_SPEC`).
"""

from __future__ import annotations

import numpy as np

from mmasim.arith.formats import BUILTIN_FORMATS
from mmasim.backends.cuda.quantize import _at, _cast_value, _element, _spec
from mmasim.backends.numba.primitives import _NAN_CODES, FormatSpec, _f32_value, _decode, _inline_rows, _value

#: a body's status where an element is not a bf16 value (past :mod:`.quantize`'s statuses)
ST_NOT_BF16 = 8


def decode_spec(fmt) -> FormatSpec:
    """The arithmetic decode spec of float format ``fmt`` (a :class:`~mmasim.arith.formats.Format`)."""
    return FormatSpec(tab_off=0, tab_len=0, integer=0, field_shift=fmt.field_shift, field_bits=fmt.field_bits,
                      exp_bits=fmt.exp_bits, man_bits=fmt.man_bits, bias=fmt.bias, signed=int(fmt.signed),
                      nan_rule=_NAN_CODES[fmt.nan], subnormals=int(fmt.subnormals))


#: bf16's decode spec (the core's format)
BF16_SPEC = decode_spec(next(f for f in BUILTIN_FORMATS if f.key == "bf16"))


@_inline_rows
def _bf16_value(w, TAB):
    cls, s, m, q, _ = _decode(w, BF16_SPEC, TAB)
    return _value(cls, s, m, q)


@_inline_rows
def bf16_words_body(b, x, rb, CS, TAB, P, out, scales):
    """Element ``b`` (C order over ``out``'s shape) of ``x`` as a bf16 word (see the module)."""
    i, j = _element(b, out)
    v = _at(x, i, j)
    w, st = _cast_value(v, _spec(CS, 0), np.int64(0), TAB)
    out[i, j] = w
    scales[i, j] = 0
    if st == 0 and v == v and _bf16_value(w, TAB) != v:
        return ST_NOT_BF16
    return st


@_inline_rows
def bf16_round_body(b, x, rb, CS, TAB, P, out, scales):
    """D's f32 word ``x[i, j]`` (work item ``b``, C order over ``out``'s shape) rounded into bf16:
    ``out[i, j]`` the value of that word (see the module)."""
    i, j = _element(b, out)
    w, st = _cast_value(_f32_value(np.int64(x[i, j])), _spec(CS, 0), np.int64(0), TAB)
    out[i, j] = _bf16_value(w, TAB)
    return st


@_inline_rows
def bf16_values_body(b, x, rb, CS, TAB, P, out, scales):
    """``out[i, j]`` (work item ``b``, C order) = the value of bf16 word ``x[i, j]`` (float32)."""
    i, j = _element(b, out)
    out[i, j] = _bf16_value(np.int64(x[i, j]), TAB)
    return 0
