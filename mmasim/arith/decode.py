"""Decoding container words into exact integer form (docs/datapaths.md section 1).

A decoded element is ``(-1)**sign * m * 2**q`` with an integer significand
``m``, plus its class and its *raw exponent* ``r``: the exponent of the leading
significand position for normal numbers, the minimum normal exponent for
subnormals (and zeros).  Everything is vectorized numpy int64.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.arith.formats import Format

from mmasim.arith.codes import FINITE, INF, NAN, ZERO  # noqa: F401 - the class codes, re-exported


@attrs.frozen(eq=False)
class Decoded:
    """Decoded elements, all arrays of one shape."""

    cls: np.ndarray    # int8: ZERO, FINITE, INF, NAN
    sign: np.ndarray   # int64: 0 or 1
    m: np.ndarray      # int64 significand (>= 0; 0 for zero, inf and NaN)
    q: np.ndarray      # int64 exponent of the significand's last bit
    r: np.ndarray      # int64 raw exponent

    @property
    def shape(self):
        return self.m.shape

    def __getitem__(self, index) -> "Decoded":
        return Decoded(*(x[index] for x in attrs.astuple(self, recurse=False)))

    def signed_m(self) -> np.ndarray:
        return np.where(self.sign == 1, -self.m, self.m)


def field(fmt: Format, words: np.ndarray) -> np.ndarray:
    """The element's bits, extracted from container words (as int64: a 64-bit field,
    f64's, with its top bit set reads as negative; decode_float's masks and shifts
    still give its sign, exponent and fraction)."""
    w = np.asarray(words).astype(np.uint64)
    return ((w >> np.uint64(fmt.field_shift)) & np.uint64((1 << fmt.field_bits) - 1)).astype(np.int64)


def decode_float(fmt: Format, words: np.ndarray) -> Decoded:
    """Generic decoder for IEEE-like formats of any width and NaN rule."""
    x = field(fmt, words)
    M, E = fmt.man_bits, fmt.exp_bits
    mag_bits = E + M
    sign = (x >> mag_bits) & 1 if fmt.signed else np.zeros_like(x)
    e = (x >> M) & ((1 << E) - 1)
    f = x & ((1 << M) - 1)
    if fmt.subnormals:
        normal = e != 0
        m = np.where(normal, f | (1 << M), f)
        r = np.where(normal, e - fmt.bias, 1 - fmt.bias)
    else:  # every exponent code is normal (ue8m0)
        m = f | (1 << M)
        r = e - fmt.bias
    q = r - M
    cls = np.where(m == 0, ZERO, FINITE).astype(np.int8)
    all_e = (1 << E) - 1
    if fmt.nan == "ieee":
        special = e == all_e
        cls = np.where(special, np.where(f == 0, INF, NAN), cls).astype(np.int8)
    elif fmt.nan == "max":
        special = (x & ((1 << mag_bits) - 1)) == (1 << mag_bits) - 1
        cls = np.where(special, NAN, cls).astype(np.int8)
    elif fmt.nan == "negzero":
        special = x == (1 << mag_bits)
        cls = np.where(special, NAN, cls).astype(np.int8)
        sign = np.where(cls == ZERO, 0, sign)
    elif fmt.nan == "allones":
        special = x == (1 << fmt.field_bits) - 1
        cls = np.where(special, NAN, cls).astype(np.int8)
    else:
        special = np.zeros(x.shape, dtype=bool)
    m = np.where(special, 0, m)
    return Decoded(cls, sign.astype(np.int64), m.astype(np.int64), q.astype(np.int64), r.astype(np.int64))


def decode_int(fmt: Format, words: np.ndarray) -> Decoded:
    """Two's complement or unsigned integers: m = |value|, q = r = 0."""
    x = field(fmt, words)
    if fmt.signed:
        top = 1 << (fmt.field_bits - 1)
        x = np.where(x >= top, x - (1 << fmt.field_bits), x)
    sign = (x < 0).astype(np.int64)
    m = np.abs(x)
    zeros = np.zeros_like(x)
    cls = np.where(m == 0, ZERO, FINITE).astype(np.int8)
    return Decoded(cls, sign, m, zeros, zeros)


def int_value(fmt: Format, words: np.ndarray) -> np.ndarray:
    """Signed integer value of integer-format words (int64)."""
    return decode_int(fmt, words).signed_m()


BUILTIN_DECODERS = {"float": decode_float, "int": decode_int}
