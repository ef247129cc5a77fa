"""E-FDPA: the exact sum of one step's products and C, rounded once (docs/datapaths.md section 8).

AMD CDNA1 f16/bf16 MFMA: ``c + sum(a_k * b_k)`` over a chunk of L elements is
formed exactly (no alignment window, no truncation) and rounded once by the
encoder (RNE into f32).  Special values as in section 3 step 1: any NaN, inf x 0
or +inf with -inf gives NaN, else any inf gives that inf.  An exact zero sum is
+0; a nonzero sum that rounds to zero keeps its sign.  Exponent spreads wider
than int64 (bf16 products next to a tiny C) are handled exactly by
:func:`mmasim.arith.intmath.exact_sum`.
"""

from __future__ import annotations

import numpy as np

from mmasim.arith.decode import FINITE, Decoded
from mmasim.errors import TableError
from mmasim.arith.intmath import exact_sum as _exact_sum
from mmasim.arith.intmath import product_bits
from mmasim.arith.special import NVIDIA_RULES, classify, product
from mmasim.accumulators.accumulator import Accumulator


def exact_sum(a: Decoded, b: Decoded, c: Decoded, scale_a, scale_b, encoding):
    if scale_a is not None or scale_b is not None:
        raise TypeError("the exact_sum accumulator takes no block scales")
    if product_bits(a.m, b.m) > 62:
        raise TableError("the exact_sum accumulator needs products that fit int64 (f32 or narrower operands)")
    p = product(a, b)
    specials = classify(p, c)
    neg = np.concatenate([p.sign == 1, (c.sign == 1)[..., None]], axis=-1)
    mag = np.concatenate([np.where(p.cls == FINITE, p.m, 0), np.where(c.cls == FINITE, c.m, 0)[..., None]], axis=-1)
    q = np.concatenate([p.q, c.q[..., None]], axis=-1)
    sneg, smag, e0 = _exact_sum(neg, mag, q)
    return encoding.pack(sneg, smag, e0, nan=specials.nan, inf=specials.inf, inf_neg=specials.inf_neg,
                         zero_neg=sneg)


exact_sum = Accumulator(exact_sum, special_values=NVIDIA_RULES.replace(
    "a zero or underflowed result is +0",
    "an exact zero sum is +0, a nonzero sum that rounds to zero keeps its sign"))
