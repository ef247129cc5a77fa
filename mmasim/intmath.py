"""Exact vectorized integer helpers shared by the datapaths (numpy int64 only)."""

from __future__ import annotations

import numpy as np

NEG_INF_EXP = np.int64(-(1 << 40))   # sentinel exponent for "no term"


def bit_length(x: np.ndarray) -> np.ndarray:
    """Bit length of non-negative int64 values, exactly (no float conversion)."""
    x = np.asarray(x, dtype=np.int64)
    n = np.zeros(x.shape, dtype=np.int64)
    for s in (32, 16, 8, 4, 2, 1):
        big = x >= (np.int64(1) << s)
        n += np.where(big, s, 0)
        x = np.where(big, x >> s, x)
    return n + (x > 0)


def shift(mag: np.ndarray, by: np.ndarray) -> np.ndarray:
    """``trunc(mag * 2**by)`` for non-negative int64 ``mag``: a left shift for
    ``by >= 0`` (the caller guarantees no overflow), a truncating right shift
    otherwise.  Shifts past the word give 0."""
    mag = np.asarray(mag, dtype=np.int64)
    by = np.asarray(by, dtype=np.int64)
    left = np.clip(by, 0, 62)
    right = np.clip(-by, 0, 63)
    return (mag << left) >> right


def truncate_signed(neg: np.ndarray, mag: np.ndarray, q: np.ndarray, quantum: np.ndarray) -> np.ndarray:
    """Signed multiple of ``2**quantum`` nearest toward zero to ``±mag * 2**q``,
    returned in units of ``2**quantum``."""
    t = shift(mag, np.asarray(q, dtype=np.int64) - quantum)
    return np.where(neg, -t, t)


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
    live = mag != 0
    qmin = np.where(live, q, np.int64(1) << 40).min(axis=-1)
    qmin = np.where(live.any(axis=-1), qmin, 0)
    spread = np.where(live, q - qmin[..., None], 0)
    if live.any() and int((spread + bit_length(mag)).max()) + int(np.ceil(np.log2(group))) > 62:
        raise OverflowError("group exponent spread too wide for exact int64 group sums")
    aligned = mag << spread
    return np.where(neg, -aligned, aligned).sum(axis=-1), qmin
