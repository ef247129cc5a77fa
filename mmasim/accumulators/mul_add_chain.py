"""Multiply, then add left to right, in IEEE arithmetic (docs/datapaths.md section 5).

``((((p0 + p1) + p2) + ...) + p_{K-1}) + c`` where every product ``p_k = a_k*b_k``
and every addition is one IEEE operation rounded to nearest even in the
precision of D (f32 or f64): what a compiler emits when it lowers a matrix
instruction to FMUL/FADD (Ampere ``m8n8k4``, T2).  Here IEEE operations *are*
the specification, so they are done with numpy's IEEE float32/float64
arithmetic.  Operands are converted exactly: every A, B and C value must be
representable in D's precision (f16/bf16/f32 into f32; anything into f64 except
wider formats).  NaN results are the encoding's canonical NaN word.
"""

from __future__ import annotations

import numpy as np

from mmasim.arith.decode import Decoded
from mmasim.arith.ieee import values
from mmasim.accumulators.accumulator import Accumulator

_PRECISION = {"f32": (np.float32, np.uint32), "f64": (np.float64, np.uint64)}


def mul_add_chain(a: Decoded, b: Decoded, c: Decoded, scale_a, scale_b, encoding):
    if scale_a is not None or scale_b is not None:
        raise TypeError("mul_add_chain takes no block scales")
    if encoding.format not in _PRECISION or encoding.mode != "rne":
        raise TypeError(f"mul_add_chain rounds RNE into f32 or f64, not with {encoding.key!r}")
    dtype, word = _PRECISION[encoding.format]
    av, bv = values(a, dtype), values(b, dtype)
    with np.errstate(all="ignore"):
        p = av * bv
        acc = p[..., 0]
        for k in range(1, p.shape[-1]):
            acc = acc + p[..., k]
        acc = acc + values(c, dtype)
    words = acc.view(word)
    return np.where(np.isnan(acc), word(encoding.nan_word), words).astype(encoding.dtype)


mul_add_chain = Accumulator(mul_add_chain, special_values=(
    "IEEE 754 per multiply and add (RNE); NaN results are the canonical NaN word"))
