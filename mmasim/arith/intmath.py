"""Exact vectorized integer helpers shared by the datapaths (numpy int64 only)."""

from __future__ import annotations

import numpy as np

from mmasim.arith.codes import NEG_INF_EXP   # the sentinel exponent for "no term"


def bit_length(x: np.ndarray) -> np.ndarray:
    """Bit length of int64 values (0 for ``x <= 0``), exactly: the binary exponent
    of the nearest binary64, less one where rounding to its 53 bits carried into the
    next power of two (then ``x`` is still below ``2**(n - 1)``)."""
    x = np.maximum(np.asarray(x, dtype=np.int64), 0)
    n = np.frexp(x.astype(np.float64))[1].astype(np.int64)
    n -= ((x >> np.maximum(n - 1, 0)) == 0) & (n > 0)
    return n


def clip(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """``np.clip(x, lo, hi)`` without its per-call overhead (which dominates on small
    arrays): a maximum, then a minimum in place."""
    x = np.maximum(x, lo)
    return np.minimum(x, hi, out=x) if isinstance(x, np.ndarray) else np.minimum(x, hi)


def shift(mag: np.ndarray, by: np.ndarray) -> np.ndarray:
    """``trunc(mag * 2**by)`` for non-negative int64 ``mag``: a left shift for
    ``by >= 0`` (the caller guarantees no overflow), a truncating right shift
    otherwise.  Shifts past the word give 0."""
    mag = np.asarray(mag, dtype=np.int64)
    by = np.asarray(by, dtype=np.int64)
    return (mag << clip(by, 0, 62)) >> clip(-by, 0, 63)


def truncate_signed(neg: np.ndarray, mag: np.ndarray, q: np.ndarray, quantum: np.ndarray) -> np.ndarray:
    """Signed multiple of ``2**quantum`` nearest toward zero to ``±mag * 2**q``,
    returned in units of ``2**quantum``."""
    t = shift(mag, np.asarray(q, dtype=np.int64) - quantum)
    return t * (1 - 2 * np.asarray(neg))     # (-1)**neg, without a branch per element


def _align(mag, q):
    """``(live, q_min, spread)`` of the terms ``mag * 2**q`` along the last axis: each
    live term's exponent above its row's smallest live one, ``q_min`` (0 in a row
    without a live term, and for a term that is not live)."""
    live = mag != 0
    qmin = np.where(live.any(axis=-1), np.where(live, q, np.int64(1) << 40).min(axis=-1), 0)
    return live, qmin, np.where(live, q - qmin[..., None], 0)


def _aligned_sum(neg, mag, spread):
    """The signed sum of the aligned terms ``±(mag << spread)`` along the last axis
    (the caller has checked that it fits int64)."""
    aligned = mag << spread
    return np.where(neg, -aligned, aligned).sum(axis=-1)


def exact_group_sums(neg, mag, q, group: int):
    """Exact sums of consecutive groups of ``group`` terms along the last axis.

    Returns ``(signed_sum, q_min)``: each group sum equals ``signed_sum * 2**q_min``.
    Raises ``OverflowError`` if a group's exponent spread does not fit int64
    (never the case for the narrow formats that hardware groups).
    """
    shape = mag.shape[:-1] + (mag.shape[-1] // group, group)
    mag = mag.reshape(shape)
    q = q.reshape(shape)
    neg = neg.reshape(shape)
    live, qmin, spread = _align(mag, q)
    if live.any() and int((spread + bit_length(mag)).max()) + int(np.ceil(np.log2(group))) > 62:
        raise OverflowError("group exponent spread too wide for exact int64 group sums")
    return _aligned_sum(neg, mag, spread), qmin


KEEP_BITS = 62   # significand bits :func:`exact_sum` keeps (with a sticky bit) for the encoder


def _sticky_reduce(total: int, q: int):
    """``(neg, mag, e0)`` of the Python int ``total * 2**q`` with ``mag`` cut to
    :data:`KEEP_BITS` bits; dropped nonzero bits set the last kept bit (sticky),
    which leaves RZ and RNE rounding to any narrower format unchanged."""
    neg, mag = total < 0, abs(total)
    drop = mag.bit_length() - KEEP_BITS
    if drop > 0:
        sticky = 1 if mag & ((1 << drop) - 1) else 0
        mag = (mag >> drop) | sticky
        q += drop
    return neg, mag, q


def exact_sum(neg: np.ndarray, mag: np.ndarray, q: np.ndarray):
    """The exact sum of the terms ``±mag * 2**q`` along the last axis, ready for rounding.

    Returns ``(neg, mag, e0)`` of shape ``batch``: the sum is ``±mag * 2**e0``
    exactly when it fits :data:`KEEP_BITS` bits, else ``mag`` carries a sticky
    bit (correct for RZ/RNE into any format of at most 60 significand bits).
    An exact zero gives ``mag = 0``, ``neg = False``.  Rows whose exponent
    spread fits int64 are summed vectorized; the others (huge spreads, e.g.
    bf16 products next to a tiny C) are summed with Python integers.
    """
    neg = np.asarray(neg, dtype=bool)
    mag = np.asarray(mag, dtype=np.int64)
    q = np.broadcast_to(np.asarray(q, dtype=np.int64), mag.shape)
    live, qmin, spread = _align(mag, q)
    top = np.where(live, spread + bit_length(mag), NEG_INF_EXP).max(axis=-1)   # above q_min
    guard = int(mag.shape[-1]).bit_length()
    fast = ~live.any(axis=-1) | (top + guard <= KEEP_BITS)
    total = _aligned_sum(neg, mag, np.where(fast[..., None], spread, 0))
    out_neg, out_mag, e0 = total < 0, np.abs(total), qmin
    for i in np.flatnonzero(~fast):
        row = [(int(m), int(e), bool(s)) for m, e, s in zip(mag[i], q[i], neg[i]) if m]
        low = min(e for _, e, _ in row)
        big = sum((-m if s else m) << (e - low) for m, e, s in row)
        out_neg[i], out_mag[i], e0[i] = _sticky_reduce(big, low)
    out_neg = out_neg & (out_mag != 0)
    return out_neg, out_mag, e0


def product_bits(a_m: np.ndarray, b_m: np.ndarray) -> int:
    """Upper bound on the bit length of products of significands from ``a_m`` and ``b_m``."""
    return int(bit_length(a_m).max(initial=0)) + int(bit_length(b_m).max(initial=0))
