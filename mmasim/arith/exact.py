"""Exact rational arithmetic on decoded values (``fractions.Fraction``).

The reference that ``mmasim compare`` measures datapaths against (the exact
``C + sum(a*b*scales)`` of a row, ULPs at an exact value, the word of an exactly
representable value) and the exact values shown to people
(:mod:`mmasim.operands.display`).  Nothing here rounds: values that are not exact
(inf, NaN) are floats, and a computation that meets one says so.  The datapaths
themselves use the vectorized int64 helpers of :mod:`mmasim.arith.intmath`.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from mmasim.arith.decode import INF, NAN, ZERO
from mmasim.arith.sparse import select


def exact_values(decoded) -> list:
    """Decoded elements as exact values: ``Fraction``, ``float('inf')``/``-inf``/``nan``."""
    out = []
    for cls, sign, m, q in zip(np.ravel(decoded.cls), np.ravel(decoded.sign), np.ravel(decoded.m), np.ravel(decoded.q)):
        cls, sign = int(cls), int(sign)
        if cls == NAN:
            out.append(float("nan"))
        elif cls == INF:
            out.append(float("-inf") if sign else float("inf"))
        elif cls == ZERO:
            out.append(Fraction(0))
        else:
            v = Fraction(int(m)) * Fraction(2) ** int(q)
            out.append(-v if sign else v)
    return out


def odd_dyadic(m: int, q: int):
    """``(m', q')`` with ``m' * 2**q' == m * 2**q`` and ``m'`` odd (``m`` > 0)."""
    while m and m % 2 == 0:
        m //= 2
        q += 1
    return m, q


def dyadic(x: Fraction):
    """``(m, q)`` with ``|x| == m * 2**q`` and ``m`` odd, or ``None`` when ``x`` is zero or
    its denominator is not a power of two."""
    if x == 0 or x.denominator & (x.denominator - 1):
        return None
    return odd_dyadic(abs(x.numerator), -(x.denominator.bit_length() - 1))


def binade(x: Fraction) -> int:
    """``floor(log2(|x|))`` of a nonzero exact value."""
    mag = abs(x)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > mag else e


def encode_exact(fmt, value: Fraction):
    """The container word of ``value`` in float format ``fmt`` if it is exactly representable, else ``None``."""
    if fmt.integer or fmt.exp_bits == 0:
        return None
    if value == 0:
        return 0
    neg = value < 0
    if value.denominator & (value.denominator - 1):
        return None
    e = binade(value)
    emin = 1 - fmt.bias
    m = abs(value) / Fraction(2) ** (max(e, emin) - fmt.man_bits)
    if m.denominator != 1:
        return None
    m = int(m)
    if e < emin:
        e_field = 0
        if not fmt.subnormals:
            return None
    else:
        e_field = e + fmt.bias
        m -= 1 << fmt.man_bits
    top = (1 << fmt.exp_bits) - 1
    if e_field > top or (fmt.nan == "ieee" and e_field == top):
        return None
    if fmt.nan == "max" and e_field == top and m == (1 << fmt.man_bits) - 1:
        return None
    if neg and not fmt.signed:
        return None
    x = (e_field << fmt.man_bits) | m
    if neg:
        x |= 1 << (fmt.exp_bits + fmt.man_bits)
    return x << fmt.field_shift


def ulp_of(fmt, x: Fraction) -> Fraction:
    """One ULP of float format ``fmt`` (anything with ``bias`` and ``man_bits``) at the exact value ``x``."""
    emin = 1 - fmt.bias
    if x == 0:
        return Fraction(2) ** (emin - fmt.man_bits)
    return Fraction(2) ** (max(binade(x), emin) - fmt.man_bits)


def ulp_distance(fmt, x, y) -> float:
    """``|x - y|`` in ULPs of ``fmt`` at the smaller nonzero magnitude (adjacent words are 1 apart,
    also across a binade boundary); inf if either is inf or NaN."""
    if not (isinstance(x, Fraction) and isinstance(y, Fraction)):
        return float("inf")
    mags = [abs(v) for v in (x, y) if v != 0]
    return float(abs(x - y) / ulp_of(fmt, min(mags) if mags else Fraction(0)))


def exact_results(model, a, b, c, scale_a=None, scale_b=None, sparse_metadata=None) -> list:
    """The exact rational ``C + sum(a*b*scales)`` of each row of ``model``'s operand words
    (``None`` where an input is inf or NaN)."""
    if model.sparse_rule is not None:
        a, b = select(model.sparse_rule, model.k, sparse_metadata, a, b)
    n, k = a.shape
    factors = [exact_values(model.decode("a", a)), exact_values(model.decode("b", b))]
    if model.scale_format is not None:
        blk = model.datapath.block
        factors += [exact_values(model.decode("scale", np.repeat(s, blk, axis=-1))) for s in (scale_a, scale_b)]
    vc = exact_values(model.decode("c", c))
    out = []
    for i in range(n):
        terms = [vc[i]] + [_product([f[j] for f in factors]) for j in range(i * k, (i + 1) * k)]
        out.append(sum(terms) if all(isinstance(t, Fraction) for t in terms) else None)
    return out


def _product(values):
    """The exact product of ``values``, ``None`` if one is inf or NaN."""
    p = Fraction(1)
    for v in values:
        if not isinstance(v, Fraction):
            return None
        p *= v
    return p


__all__ = ["exact_values", "odd_dyadic", "dyadic", "binade", "encode_exact", "ulp_of", "ulp_distance",
           "exact_results"]
