"""FTZ mul-add: f32 products and pairwise f32 adds with flush-to-zero (docs/datapaths.md section 8).

AMD CDNA2 f16/bf16 MFMA.  Subnormal inputs (A, B and the incoming C) and zeros
read as +0; each product ``a_k*b_k`` is one IEEE f32 multiplication (RNE) and a
subnormal product is flushed to a zero of its sign; then, for each group of
``P`` consecutive products (P = 2 or 4), ``c = c + (p0 + p1)`` or
``c = c + ((p0 + p1) + (p2 + p3))``, every addition one IEEE f32 addition (RNE)
whose subnormal result is flushed to a zero of its sign.  IEEE operations are
the specification, so numpy's float32 arithmetic is used; operands must be
exactly representable in f32.  The whole K is one call (C is flushed once, at
the start).  NaN results are the encoding's NaN word.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.arith import ieee
from mmasim.arith.decode import FINITE, ZERO, Decoded
from mmasim.errors import TableError
from mmasim.arith.intmath import bit_length
from mmasim.accumulators.accumulator import Accumulator
from mmasim.accumulators.params import one_of

_TINY = np.float32(2.0 ** -126)


def _flush_inputs(x: Decoded) -> np.ndarray:
    """f32 values with subnormals and zeros read as +0."""
    subnormal = (x.cls == FINITE) & (bit_length(x.m) - 1 + x.q < x.r)
    v = ieee.values(x, np.float32)
    return np.where(subnormal | (x.cls == ZERO), np.float32(0.0), v)


def _flush(x: np.ndarray) -> np.ndarray:
    """Subnormal f32 results become zeros of their sign."""
    return np.where(np.abs(x) < _TINY, x * np.float32(0.0), x)


def ftz_mul_add(a: Decoded, b: Decoded, c: Decoded, scale_a, scale_b, encoding, *, P: int):
    if scale_a is not None or scale_b is not None:
        raise TypeError("the ftz_mul_add accumulator takes no block scales")
    if encoding.format != "f32" or encoding.mode != "rne":
        raise TableError(f"ftz_mul_add adds in f32 with RNE, not with {encoding.key!r}")
    if P not in (2, 4):
        raise TableError(f"ftz_mul_add: P must be 2 or 4, not {P!r}")
    K = a.shape[-1]
    if K % P:
        raise ValueError(f"ftz_mul_add: K={K} is not a multiple of P={P}")
    with np.errstate(all="ignore"):
        p = _flush(_flush_inputs(a) * _flush_inputs(b))
        acc = _flush_inputs(c)
        for i in range(0, K, P):
            s = _flush(p[..., i] + p[..., i + 1])
            if P == 4:
                s = _flush(s + _flush(p[..., i + 2] + p[..., i + 3]))
            acc = _flush(acc + s)
    return ieee.pack(acc.astype(np.float64), encoding)


@attrs.frozen(kw_only=True)
class FtzMulAddParams:
    """The parameter of :func:`ftz_mul_add`: ``P``, products added pairwise per group (2 or 4)."""

    P: int = attrs.field(validator=one_of(2, 4))


ftz_mul_add = Accumulator(ftz_mul_add, FtzMulAddParams, special_values=(
    "IEEE 754 f32 multiplies and adds with flush-to-zero: subnormal inputs read as +0, "
    "subnormal products and sums flush to zeros of their sign; NaN results are the NaN word"))
