"""Input words for tools/peer/khattak_octave.py: random, wide, cancelling, underflowing and
special dot products, generated and decoded here with numpy alone (no mmasim arithmetic).

A case is one dot product: K container words of A and of B in the input format, one C word in
the D format.  Words are built from their bit fields (sign, exponent field, fraction), so every
value is exact in its format; :func:`decode` turns words into the float64 values the MATLAB
models are given (every value of these formats is exact in a double).

Groups (fractions of the cases; each case's label names its group):

- ``random`` (35 %): elements within 2^-3 .. 2^4, 10 % zeros; C within 2^-2 .. 2^7 or zero.
- ``wide`` (15 %): element exponents over most of the input format's normal range, capped so
  that a sum of K products stays inside the D format; truncation below the largest term shows.
- ``cancel`` (25 %): C = -(the products' sum) rounded to the D format and moved by up to 3
  units in its last place; or products cancelling in pairs plus a few small ones; or one
  dominant product cancelled by C, with small products beside it.
- ``underflow`` (15 %): elements at the bottom of the input format (its subnormals, except
  for bf16, and its smallest normals), or for 8-bit-exponent formats products near f32's
  subnormal range; half of the rows with every element non-zero; C zero, -0, a D-format
  subnormal or a small normal.
- ``special`` (10 %): a random row with an inf, a NaN, inf times zero, +inf and -inf, a row
  of products all at the top of the input range and of one sign (overflowing the D format
  where it can), or a non-finite C.

bf16 subnormal inputs are never generated: CPFloat's bf16 preset flushes them before the
models run, so a case holding one would test CPFloat's preset, not the model (the caller's
test checks that none is frozen).
"""

from __future__ import annotations

import math

import numpy as np

#: format -> (exponent bits, fraction bits, bias, specials, container bits).  ``ieee``: inf and
#: NaN at the top exponent field; ``fn``: no inf, NaN at all-ones (OCP e4m3); ``fnuz``: no inf,
#: no -0, NaN = 0x80 (AMD fp8 / bf8).  tf32 / xf32 live in an f32 word with bits 12:0 zero.
FORMATS = {
    "f16": (5, 10, 15, "ieee", 16), "bf16": (8, 7, 127, "ieee", 16), "f32": (8, 23, 127, "ieee", 32),
    "tf32": (8, 10, 127, "ieee", 32), "xf32": (8, 10, 127, "ieee", 32),
    "e4m3": (4, 3, 7, "fn", 8), "e5m2": (5, 2, 15, "ieee", 8),
    "e4m3fnuz": (4, 3, 8, "fnuz", 8), "e5m2fnuz": (5, 2, 16, "fnuz", 8),
}
GROUPS = (("random", 0.35), ("wide", 0.15), ("cancel", 0.25), ("underflow", 0.15), ("special", 0.10))


def _shift(fmt: str) -> int:
    """Where the format's fraction sits in its container (13 for tf32 / xf32 in an f32 word)."""
    e, m, _, _, width = FORMATS[fmt]
    return width - 1 - e - m


def emin(fmt: str) -> int:
    return 1 - FORMATS[fmt][2]


def emax(fmt: str) -> int:
    e, m, bias, kind, _ = FORMATS[fmt]
    top = (1 << e) - 1
    return (top if kind != "ieee" else top - 1) - bias


def decode(fmt: str, words) -> np.ndarray:
    """Container words -> float64 values (exact); NaN for NaN words, +-inf for inf words."""
    e, m, bias, kind, width = FORMATS[fmt]
    w = np.asarray(words, dtype=np.uint64) >> np.uint64(_shift(fmt))
    sign = ((w >> np.uint64(e + m)) & np.uint64(1)).astype(bool)
    ef = ((w >> np.uint64(m)) & np.uint64((1 << e) - 1)).astype(np.int64)
    frac = (w & np.uint64((1 << m) - 1)).astype(np.float64)
    top = (1 << e) - 1
    mag = np.where(ef == 0, np.ldexp(frac, 1 - bias - m), np.ldexp(frac + 2.0 ** m, ef - bias - m))
    if kind == "ieee":
        mag = np.where(ef == top, np.where(frac == 0, np.inf, np.nan), mag)
    elif kind == "fn":
        mag = np.where((ef == top) & (frac == (1 << m) - 1), np.nan, mag)
    else:                                   # fnuz: the negative-zero pattern is the NaN
        mag = np.where(sign & (ef == 0) & (frac == 0), np.nan, mag)
    return np.where(sign, -mag, mag)


def encode(fmt: str, values) -> np.ndarray:
    """float64 values that are exact f32 or f16 values -> words (RuntimeError otherwise).
    NaN gives the format's NaN word with every fraction bit set (0x7FFFFFFF, 0x7FFF)."""
    dtype, word = {"f32": (np.float32, np.uint32), "f16": (np.float16, np.uint16)}[fmt]
    x = np.asarray(values, dtype=np.float64)
    with np.errstate(over="ignore"):
        y = x.astype(dtype)
    nan = np.isnan(x)
    bad = ~nan & (y.astype(np.float64) != x)
    if bad.any():
        raise RuntimeError(f"not an {fmt} value: {x[bad][:4]}")
    out = y.view(word).astype(np.uint64)
    out[nan] = np.uint64((1 << (FORMATS[fmt][4] - 1)) - 1)
    return out


class Words:
    """Word generator for one input format and one D format, driven by one numpy Generator."""

    def __init__(self, a_fmt: str, d_fmt: str, k: int, rng: np.random.Generator):
        self.a, self.d, self.k, self.rng = a_fmt, d_fmt, k, rng

    # -- building blocks ---------------------------------------------------------------
    def fields(self, fmt: str, shape, lo: int, hi: int, zero: float = 0.0, subnormal: bool = True):
        """Words with unbiased exponents uniform in [lo, hi] (clamped into the format's finite
        range; below emin they become subnormals, or the smallest normals where ``subnormal``
        is False), random fraction and sign; a ``zero`` fraction of them +-0 (+0 for fnuz)."""
        e, m, bias, kind, width = FORMATS[fmt]
        rng = self.rng
        sign = rng.integers(0, 2, shape, dtype=np.uint64)
        x = rng.integers(lo, hi + 1, shape)
        frac = rng.integers(0, 1 << m, shape, dtype=np.uint64)
        ef = np.clip(x + bias, 0, emax(fmt) + bias)
        if not subnormal:
            ef = np.maximum(ef, 1)
        sub = ef == 0                        # a subnormal: keep it non-zero
        frac = np.where(sub & (frac == 0), np.uint64(1), frac)
        if kind == "fn":                     # the top field's all-ones fraction is the NaN
            frac = np.where((ef == (1 << e) - 1) & (frac == (1 << m) - 1), np.uint64((1 << m) - 2), frac)
        w = (sign << np.uint64(e + m)) | (ef.astype(np.uint64) << np.uint64(m)) | frac
        if zero:
            z = rng.random(shape) < zero
            w = np.where(z, sign << np.uint64(e + m) if kind != "fnuz" else np.uint64(0), w)
        return w << np.uint64(_shift(fmt))

    def special(self, fmt: str, what: str) -> int:
        """One special word of ``fmt``: "inf" (or NaN where the format has no inf), "-inf", "nan"."""
        e, m, bias, kind, width = FORMATS[fmt]
        top = (1 << e) - 1
        if kind == "fnuz":
            w = 1 << (e + m)                 # 0x80: the only NaN, and no inf
        elif kind == "fn" or what == "nan":
            w = (top << m) | ((1 << m) - 1)
        else:
            w = top << m
        if what == "-inf" and kind == "ieee":
            w |= 1 << (e + m)
        return w << _shift(fmt)

    def round_d(self, value: float) -> int:
        """A float64 value rounded to the D format (numpy's cast, ties to even): a C word."""
        dtype, word = {"f32": (np.float32, np.uint32), "f16": (np.float16, np.uint16)}[self.d]
        with np.errstate(over="ignore"):
            return int(np.array(value).astype(dtype).view(word))

    def _c(self, n, lo, hi, zero=0.1):
        return self.fields(self.d, n, lo, hi, zero=zero)

    def _cap(self) -> int:
        """Largest element exponent for which K products still sum inside the D format."""
        return max(1, min(emax(self.a), (emax(self.d) - 2 - math.ceil(math.log2(self.k))) // 2))

    # -- the groups -----------------------------------------------------------------------
    def random(self, n):
        a = self.fields(self.a, (n, self.k), -3, 4, zero=0.1)
        b = self.fields(self.a, (n, self.k), -3, 4, zero=0.1)
        return a, b, self._c(n, -2, 7)

    def wide(self, n):
        cap = self._cap()
        lo = max(emin(self.a), -cap)
        a = self.fields(self.a, (n, self.k), lo, cap, zero=0.05, subnormal=self.a != "bf16")
        b = self.fields(self.a, (n, self.k), lo, cap, zero=0.05, subnormal=self.a != "bf16")
        return a, b, self._c(n, max(2 * lo, emin(self.d)), min(2 * cap, emax(self.d) - 2), zero=0.2)

    def cancel(self, n):
        a = self.fields(self.a, (n, self.k), -6, 6, zero=0.05)
        b = self.fields(self.a, (n, self.k), -6, 6, zero=0.05)
        c = np.zeros(n, dtype=np.uint64)
        for i in range(n):
            kind = i % 3
            if kind == 1:                    # products cancelling in pairs, a few small ones left
                for j in range(0, self.k - 1, 2):
                    if self.rng.random() < 0.8:
                        a[i, j + 1] = a[i, j] ^ np.uint64(1 << (FORMATS[self.a][4] - 1))
                        b[i, j + 1] = b[i, j]
                if self.a in ("e4m3fnuz", "e5m2fnuz"):   # no -0 there: flipping 0 gives the NaN
                    a[i] = np.where(a[i] == 0x80, np.uint64(0), a[i])
                small = self.fields(self.a, self.k, -12, -6)
                keep = self.rng.random(self.k) < 0.2
                a[i] = np.where(keep, small, a[i])
                c[i] = self._c(1, -12, 2, zero=0.3)[0]
                continue
            if kind == 2:                    # one dominant product, small ones beside it
                a[i] = self.fields(self.a, self.k, -9, -5, zero=0.1)
                j = int(self.rng.integers(self.k))
                a[i, j] = self.fields(self.a, 1, 3, min(6, self._cap()))[0]
                b[i, j] = self.fields(self.a, 1, 2, min(5, self._cap()))[0]
            av, bv = decode(self.a, a), decode(self.a, b)
            s = math.fsum((av[i] * bv[i]).tolist())
            w = self.round_d(-s)
            step = int(self.rng.integers(-3, 4))
            w2 = w + step if (w & (1 << (FORMATS[self.d][4] - 1))) == 0 else w - step
            e, m, _, _, width = FORMATS[self.d]
            if 0 <= w2 < (1 << width) and ((w2 >> m) & ((1 << e) - 1)) != (1 << e) - 1 and \
                    (w2 >> (width - 1)) == (w >> (width - 1)):
                w = w2
            c[i] = w
        return a, b, c

    def underflow(self, n):
        bf = self.a == "bf16"
        a = np.zeros((n, self.k), dtype=np.uint64)
        b = np.zeros((n, self.k), dtype=np.uint64)
        wide_exp = FORMATS[self.a][0] == 8 and self.d == "f32"
        for i in range(n):
            zero = 0.0 if i % 2 == 0 else 0.15
            if wide_exp and i % 4 >= 2:      # products near f32's subnormals: 2^-150 .. 2^-110
                lo, hi = -75, -55
            else:
                lo = emin(self.a) - (0 if bf else FORMATS[self.a][1])
                lo, hi = lo, emin(self.a) + 3
            a[i] = self.fields(self.a, self.k, lo, hi, zero=zero, subnormal=not bf)
            b[i] = self.fields(self.a, self.k, lo, hi, zero=zero, subnormal=not bf)
        c = np.zeros(n, dtype=np.uint64)
        e, m, _, _, width = FORMATS[self.d]
        for i in range(n):
            r = i % 4
            if r == 1:
                c[i] = np.uint64(1 << (width - 1))             # -0
            elif r == 2:                                        # a D-format subnormal
                c[i] = self.fields(self.d, 1, emin(self.d) - m, emin(self.d) - 1)[0]
            elif r == 3:
                c[i] = self.fields(self.d, 1, emin(self.d), emin(self.d) + 4)[0]
        return a, b, c

    def special_rows(self, n):
        a, b, c = self.random(n)
        sign = np.uint64(1 << (FORMATS[self.a][4] - 1))
        for i in range(n):
            j, j2 = (int(x) for x in self.rng.choice(self.k, 2, replace=self.k < 2))
            kind = i % 6
            if kind == 0:
                a[i, j] = self.special(self.a, "inf")
            elif kind == 1:
                a[i, j] = self.special(self.a, "nan")
            elif kind == 2:
                a[i, j], b[i, j] = self.special(self.a, "inf"), 0
            elif kind == 3:
                a[i, j], a[i, j2] = self.special(self.a, "inf"), self.special(self.a, "-inf")
                b[i, j] = b[i, j2] = self.fields(self.a, 1, 0, 0)[0] & ~sign
            elif kind == 4:                  # every product at the top of the input range, one sign
                a[i] = self.fields(self.a, self.k, emax(self.a) - 1, emax(self.a))
                b[i] = self.fields(self.a, self.k, emax(self.a) - 1, emax(self.a))
                a[i] = (a[i] & ~sign) | (sign if (i // 6) % 2 else np.uint64(0))
                b[i] &= ~sign
            else:
                c[i] = self.special(self.d, ("inf", "-inf", "nan")[i % 3])
        return a, b, c

    def cases(self, n: int):
        """``n`` cases: (a words (n, K), b words (n, K), c words (n,), labels (n,))."""
        parts, labels = [], []
        counts = [int(round(n * f)) for _, f in GROUPS]
        counts[0] += n - sum(counts)
        make = {"random": self.random, "wide": self.wide, "cancel": self.cancel,
                "underflow": self.underflow, "special": self.special_rows}
        for (name, _), count in zip(GROUPS, counts):
            if count:
                parts.append(make[name](count))
                labels += [name] * count
        a = np.concatenate([p[0] for p in parts])
        b = np.concatenate([p[1] for p in parts])
        c = np.concatenate([np.asarray(p[2], dtype=np.uint64) for p in parts])
        return a, b, c, np.array(labels)


def has_subnormal(fmt: str, words) -> np.ndarray:
    """Per row (or per word): does any word hold a subnormal of ``fmt``?"""
    e, m, _, _, _ = FORMATS[fmt]
    w = np.asarray(words, dtype=np.uint64) >> np.uint64(_shift(fmt))
    ef = (w >> np.uint64(m)) & np.uint64((1 << e) - 1)
    frac = w & np.uint64((1 << m) - 1)
    sub = (ef == 0) & (frac != 0)
    return sub.any(axis=-1) if sub.ndim > 1 else sub
