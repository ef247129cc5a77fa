"""Exact IEEE binary64 building blocks for datapaths whose specification *is*
IEEE arithmetic (FMA chains, FTZ mul-add; docs/datapaths.md sections 5 and 8).

Error-free transformations (TwoSum, Dekker's TwoProduct with Veltkamp's
split) and rounding to odd (Boldo and Melquiond, "Emulation of FMA and
correctly rounded sums: proved algorithms using rounding to odd", IEEE TC
2008): a value rounded to odd in binary64 and then rounded to nearest into a
format of at most 51 significand bits is the correctly rounded value.  The
final rounding into the output format is done by the integer encoder
(:meth:`mmasim.arith.encode.Encoding.pack`), not by a float cast, so subnormal
results do not depend on the CPU's flush-to-zero mode.
"""

from __future__ import annotations

import numpy as np

from mmasim.arith.decode import INF, NAN, Decoded, decode_float
from mmasim.arith.formats import BUILTIN_FORMATS

_F64 = next(f for f in BUILTIN_FORMATS if f.key == "f64")
_SPLIT = 134217729.0  # 2**27 + 1, Veltkamp's constant for binary64


def values(x: Decoded, dtype=np.float64) -> np.ndarray:
    """Exact values of decoded elements as ``dtype`` floats (inf and NaN included);
    every finite value must be representable in ``dtype``."""
    with np.errstate(over="ignore"):
        mag = np.ldexp(x.m.astype(np.float64), x.q.astype(np.int64)).astype(dtype)
    mag = np.where(x.cls == INF, dtype(np.inf), mag)
    mag = np.where(x.cls == NAN, dtype(np.nan), mag)
    return np.where(x.sign == 1, -mag, mag).astype(dtype)


def decompose(x: np.ndarray) -> Decoded:
    """binary64 values as decoded elements (``±m * 2**q``, classes)."""
    return decode_float(_F64, np.ascontiguousarray(x, dtype=np.float64).view(np.uint64))


def pack(x: np.ndarray, encoding) -> np.ndarray:
    """Round binary64 values (exact, or rounded to odd) into ``encoding``'s words.

    Signed zeros keep their sign, as does a nonzero value that rounds to zero;
    NaN becomes the encoding's NaN word."""
    d = decompose(x)
    neg = d.sign == 1
    return encoding.pack(neg, d.m, d.q, nan=d.cls == NAN, inf=d.cls == INF, inf_neg=neg, zero_neg=neg)


def two_sum(a: np.ndarray, b: np.ndarray):
    """``s = fl(a + b)`` and the exact error ``a + b - s`` (Knuth; no overflow)."""
    s = a + b
    bv = s - a
    av = s - bv
    return s, (a - av) + (b - bv)


def _split(a: np.ndarray):
    t = _SPLIT * a
    hi = t - (t - a)
    return hi, a - hi


def two_product(a: np.ndarray, b: np.ndarray):
    """``p = fl(a * b)`` and the exact error ``a*b - p`` (Dekker).  Exact when
    ``|a|, |b| < 2**995``, ``|a*b| < 2**1022`` and the error does not underflow."""
    p = a * b
    ah, al = _split(a)
    bh, bl = _split(b)
    return p, ((ah * bh - p) + ah * bl + al * bh) + al * bl


def odd_sum(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a + b`` rounded to odd in binary64 (finite inputs, no overflow): the
    neighbour with an odd last bit unless the sum is exact."""
    s, err = two_sum(a, b)
    bits = s.view(np.int64)
    bump = (err != 0) & ((bits & 1) == 0) & np.isfinite(s)
    away = np.signbit(err) == np.signbit(s)
    bumped = (bits + np.where(away, 1, -1)).view(np.float64)
    return np.where(bump, bumped, s)
