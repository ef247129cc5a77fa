"""C added after a datapath's steps (``plan.c_add``: fp8 ``mma.sync`` on Hopper and Blackwell,
the steps from +0, then ``D = D + C`` by one IEEE addition in D's format) as a target-neutral
body, so that device operands add C on the device (:func:`.device._compute`).

:func:`add_c_body` is :func:`mmasim.backends.plan.add_c` for one row, from the kernels'
primitives: D's and C's words decoded (:func:`~mmasim.backends.numba.primitives._decode`) to
their binary64 values, their sum rounded to odd in binary64 (TwoSum, as
:func:`mmasim.arith.ieee.odd_sum`; NaN, inf - inf and infinities by the binary64 addition),
and that sum decoded as a binary64 word and packed into ``plan.c_add``'s words by
:func:`~mmasim.backends.numba.primitives._pack` (the kernels' one rounding, as
:func:`mmasim.arith.ieee.pack`).  Its drivers: :func:`_add_c_cpu` (a compiled loop on the
host) and :func:`.driver.add_c_cuda` (a thread per row), launched by :func:`.launch.launch`.
"""

from __future__ import annotations

import math

import numpy as np

from mmasim.arith.codes import INF, NAN
from mmasim.arith.formats import BUILTIN_FORMATS
from mmasim.backends.cuda.hadamard import decode_spec
from mmasim.backends.numba.cache import jit as _jit
from mmasim.backends.numba.primitives import (C_FMT, D_FMT, _bitcast, _decode, _enc, _fmt, _inline_rows, _pack,
                                              _value)

#: binary64's decode spec: the sum's word decoded as :func:`mmasim.arith.ieee.decompose` does
F64_SPEC = decode_spec(next(f for f in BUILTIN_FORMATS if f.key == "f64"))


@_inline_rows
def _odd_sum(a, b):
    """:func:`mmasim.arith.ieee.odd_sum` of two finite binary64 values."""
    s = a + b
    bv = s - a
    av = s - bv
    err = (a - av) + (b - bv)
    bits = _bitcast(s)
    if err != 0.0 and (bits & 1) == 0:
        bits += np.int64(1) if (err < 0.0) == (bits < 0) else np.int64(-1)
    return _bitcast(bits)


@_inline_rows
def add_c_body(d, dw, cw, ic, FM, TAB, ENC):
    """The word of ``dw[d] + cw[ic[d]]`` (``ic`` empty: the identity) rounded by ``ENC``
    (the plan's ``c_add``): D's words in ``FM``'s D format, C's in its C format."""
    rc = ic[d] if ic.shape[0] > 0 else d
    cls, s, m, q, _ = _decode(np.int64(dw[d]), _fmt(FM, D_FMT), TAB)
    x = _value(cls, s, m, q)
    cls, s, m, q, _ = _decode(np.int64(cw[rc]), _fmt(FM, C_FMT), TAB)
    y = _value(cls, s, m, q)
    total = _odd_sum(x, y) if math.isfinite(x) and math.isfinite(y) else x + y
    cls, s, m, q, _ = _decode(_bitcast(total), F64_SPEC, TAB)
    neg = s == 1
    return _pack(neg, m, q, cls == NAN, cls == INF, neg, neg, _enc(ENC[0]))


@_jit
def _add_c_cpu(dw, cw, ic, FM, TAB, ENC, out):
    """The CPU driver of :func:`add_c_body`: rows ``0 .. len(out) - 1`` in a compiled loop."""
    for d in range(out.shape[0]):
        out[d] = add_c_body(d, dw, cw, ic, FM, TAB, ENC)


def _arrays(plan):
    """``(FM, TAB, ENC)`` of ``plan``'s formats and its ``c_add`` encoding."""
    from mmasim.backends.numba.kernels import _format_specs, encoding_record

    FM, TAB = _format_specs(plan)
    return FM, TAB, encoding_record(plan.c_add)


def add_c(plan, d, c, ic=None) -> np.ndarray:
    """D words of ``plan`` (``d``, 1-D) plus C's words ``c[ic]`` (1-D; ``ic`` ``None``: the identity)
    by the compiled body on the host: :func:`mmasim.backends.plan.add_c`'s words."""
    ic = np.zeros(0, np.int64) if ic is None else np.ascontiguousarray(ic, np.int64)
    out = np.empty(len(d), plan.encoding.dtype)
    _add_c_cpu(np.ascontiguousarray(d), np.ascontiguousarray(c), ic, *_arrays(plan), out)
    return out


def add_c_device(plan, d, c, ic):
    """:func:`add_c` of device arrays (``d``, ``c`` 1-D and contiguous, ``ic`` an int64 device
    array, empty: the identity): a new device array of D words, computed on the device."""
    from numba import cuda

    from mmasim.backends.cuda import driver, launch

    out = cuda.device_array(d.shape[0], plan.encoding.dtype)
    args = (d, c, ic, *(cuda.to_device(a) for a in _arrays(plan)), out)
    launch.launch(driver.add_c_cuda, add_c_body, d.shape[0], args)
    return out
