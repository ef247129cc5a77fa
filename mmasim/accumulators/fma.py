"""FMA chain: ``c = fma(a_k, b_k, c)`` for k = 0..K-1 (docs/datapaths.md section 5).

Each step is one correctly rounded (RNE) fused multiply-add in the precision of D
(``encoding.format``: "f32" or "f64"): NVIDIA DMMA f64, AMD f32/f64 MFMA.  IEEE operations are
the specification here, so the arithmetic is exact IEEE binary64 with error-free
transformations (numpy has no fused multiply-add): :func:`fma` for the chain, :func:`fma_f64`
for one binary64 step.  Special values follow IEEE 754 (the record's ``special_values``).
Refuses block scales, and (:class:`~mmasim.errors.TableError`) any encoding but RNE into f32 /
f64 and f32 operands whose products are not exact in binary64.
"""

from __future__ import annotations

import numpy as np

from mmasim.arith import ieee
from mmasim.arith.decode import Decoded
from mmasim.errors import TableError
from mmasim.arith.intmath import exact_sum, product_bits
from mmasim.accumulators.accumulator import Accumulator

_HALF = 27  # f64 significands are split as hi * 2**27 + lo for the exact fallback


def fma(a: Decoded, b: Decoded, c: Decoded, scale_a, scale_b, encoding):
    """D words of the chain over K.  f32: ``a*b`` is exact in binary64 (operands of at most 26
    significand bits); ``a*b + c`` is rounded to odd in binary64 and then to nearest even in f32
    by the integer encoder, which is the correctly rounded f32 fma.  f64: :func:`fma_f64` per
    step.  Special values: the record's ``special_values``; a nonzero result that rounds to
    zero keeps its sign."""
    if scale_a is not None or scale_b is not None:
        raise TypeError("the fma accumulator takes no block scales")
    if encoding.format not in ("f32", "f64") or encoding.mode != "rne":
        raise TableError(f"the fma accumulator rounds RNE into f32 or f64, not with {encoding.key!r}")
    av, bv = ieee.values(a), ieee.values(b)
    acc = ieee.values(c)
    if encoding.format == "f64":
        for k in range(av.shape[-1]):
            acc = fma_f64(av[..., k], bv[..., k], acc, encoding)
        return ieee.pack(acc, encoding)
    if product_bits(a.m, b.m) > 53:
        raise TableError("the f32 fma accumulator needs operands whose products are exact in binary64")
    words = ieee.pack(acc, encoding)
    for k in range(av.shape[-1]):
        with np.errstate(all="ignore"):
            words = ieee.pack(ieee.odd_sum(av[..., k] * bv[..., k], acc), encoding)
        acc = words.view(np.float32).astype(np.float64)
    return words


def fma_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray, encoding) -> np.ndarray:
    """Correctly rounded binary64 ``a*b + c``, element-wise (``encoding``: rne-f64).

    Boldo and Melquiond's emulation ``RN(th + RO(tl + ul))`` with ``(uh, ul) = TwoProduct(a, b)``
    and ``(th, tl) = TwoSum(c, uh)``, used where no intermediate can overflow or underflow; the
    other lanes (subnormal or huge operands, products near the ends of the range) are summed
    exactly with integers (:func:`mmasim.arith.intmath.exact_sum`) and rounded by the encoder."""
    with np.errstate(all="ignore"):
        finite = np.isfinite(a) & np.isfinite(b)
        # specials and zero products: one IEEE operation is exact (a*b is ±0, ±inf or NaN)
        out = np.where(finite & np.isinf(c), c, a * b + c)
        regular = finite & np.isfinite(c) & (a != 0) & (b != 0)
        ea = np.frexp(a)[1] - 1
        eb = np.frexp(b)[1] - 1
        ec = np.frexp(c)[1] - 1
        # every intermediate is then a multiple of 2**-1004 and below 2**1023
        safe = (regular & (ea >= -1022) & (eb >= -1022) & (ea <= 994) & (eb <= 994)
                & (ea + eb >= -900) & (ea + eb <= 1020)
                & ((c == 0) | ((ec >= -900) & (ec <= 1020))))
        uh, ul = ieee.two_product(a, b)
        th, tl = ieee.two_sum(c, uh)
        out = np.where(safe, th + ieee.odd_sum(tl, ul), out)
    hard = np.flatnonzero(regular & ~safe)
    if hard.size:
        out[hard] = _exact_fma(a[hard], b[hard], c[hard], encoding)
    return out


def _exact_fma(a, b, c, encoding):
    """``a*b + c`` summed exactly in integers and rounded by ``encoding``."""
    da, db, dc = ieee.decompose(a), ieee.decompose(b), ieee.decompose(c)
    lo = (np.int64(1) << _HALF) - 1
    ah, al = da.m >> _HALF, da.m & lo
    bh, bl = db.m >> _HALF, db.m & lo
    q = da.q + db.q
    pneg = (da.sign ^ db.sign) == 1
    neg = np.stack([pneg, pneg, pneg, dc.sign == 1], axis=-1)
    mag = np.stack([ah * bh, ah * bl + al * bh, al * bl, dc.m], axis=-1)
    qs = np.stack([q + 2 * _HALF, q + _HALF, q, dc.q], axis=-1)
    sneg, smag, e0 = exact_sum(neg, mag, qs)
    words = encoding.pack(sneg, smag, e0, zero_neg=sneg)
    return words.view(np.float64)


fma = Accumulator(fma, special_values=(
    "IEEE 754 per fused multiply-add: NaN in, inf x 0 or inf - inf give the NaN word (payloads not "
    "propagated); an exact zero sum is +0 unless both addends are -0"))
