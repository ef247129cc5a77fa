"""Exact values and the words that hold them, for building probes (mmasim.characterize).

A probe is written as exact terms: products ``a_k * b_k`` (Fractions) at stored positions of K,
plus C.  :class:`Realizer` turns a wanted product into an A word and a B word whose decoded
values multiply to it exactly, and a wanted C or D value into its word.  Everything is read back
through the instruction's own decoders (``Model.decode``), so a format with an unusual reading
(RTX Blackwell reads e2m1 bytes as e2m3) is handled by what its decoder says, never by a formula.
Only the formats of the instruction are used here, never its accumulator parameters.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from mmasim.arith.decode import FINITE


def split(v: Fraction):
    """``v = sign * m * 2**e`` with odd ``m`` (``v`` a nonzero dyadic rational)."""
    v = Fraction(v)
    sign = -1 if v < 0 else 1
    num, den = abs(v.numerator), v.denominator
    if den & (den - 1):
        raise ValueError(f"{v} is not dyadic")
    e = -(den.bit_length() - 1)
    while num % 2 == 0:
        num //= 2
        e += 1
    return sign, num, e


def lead(v: Fraction) -> int:
    """floor(log2 |v|)."""
    _, m, e = split(v)
    return e + m.bit_length() - 1


def to_parts(v: Fraction):
    """``(neg, mag, e0)`` with ``v = (-1)**neg * mag * 2**e0`` (mag an int)."""
    if v == 0:
        return False, 0, 0
    s, m, e = split(v)
    return s < 0, m, e


class _Table:
    """Every finite nonzero value of one operand's format that the decoder gives, with its word
    and raw exponent: enumerated for containers of at most 16 bits, constructed (and checked
    through the decoder) for wider ones."""

    def __init__(self, model, operand: str):
        self.model, self.operand = model, operand
        self.fmt = fmt = model.format_of(operand)
        self.by_value = {}
        if fmt.container_bits <= 16:
            words = np.arange(1 << fmt.container_bits, dtype=np.uint64)
            self._add(words)
        else:
            self._wide()
        self.by_odd = _by_odd(self)
        self.pow_normal = sorted(e for (m, normal), es in self.by_odd.items() if m == 1 and normal for e in es)

    def _add(self, words):
        d = self.model.decode(self.operand, words)
        fin = d.cls == FINITE
        words, sign, m, q, r = words[fin], d.sign[fin], d.m[fin], d.q[fin], d.r[fin]
        nz = m != 0
        words, sign, m, q, r = words[nz], sign[nz], m[nz], q[nz], r[nz]
        tz = np.zeros_like(m)
        mm = m.copy()
        while True:
            even = (mm & 1) == 0
            if not even.any():
                break
            mm = np.where(even, mm >> 1, mm)
            tz += even
        normal = (_bitlen(m) - 1 + q) == r
        for w, s_, mo, e, rr, nrm in zip(words.tolist(), sign.tolist(), mm.tolist(), (q + tz).tolist(),
                                          r.tolist(), normal.tolist()):
            key = (-1 if s_ else 1, mo, e)
            old = self.by_value.get(key)
            # prefer a normal encoding, then the smallest word
            if old is None or (nrm and not old[2]) or (nrm == old[2] and w < old[0]):
                self.by_value[key] = (w, rr, nrm)

    def _encode(self, key):
        """Add the word of ``sign * m * 2**e`` if the (wide, IEEE-like) format holds it exactly,
        checked by decoding it back."""
        fmt = self.fmt
        sign, m, e = key
        E, M = fmt.exp_bits, fmt.man_bits
        bias = (1 << (E - 1)) - 1
        top = e + m.bit_length() - 1
        if top > bias or m.bit_length() > M + 1:
            return
        if top >= 1 - bias:
            field = ((top + bias) << M) | ((m << (M - (m.bit_length() - 1))) & ((1 << M) - 1))
        else:
            shift = e - (1 - bias - M)
            if shift < 0:
                return
            field = m << shift
            if field >= (1 << M):
                return
        x = (((1 if sign < 0 else 0) << (E + M)) | field) << fmt.field_shift
        before = dict(self.by_value)
        self._add(np.array([x], dtype=np.uint64))
        if key not in self.by_value:          # the decoder reads it otherwise: forget it
            self.by_value = before

    def _wide(self):
        fmt = self.fmt
        E, M, shift = fmt.exp_bits, fmt.man_bits, fmt.field_shift
        words = []
        mants = {0, 1 << (M - 1), (1 << (M - 1)) | (1 << (M - 2)), 1 << (M - 2), (1 << (M - 1)) | 1, 1}
        for sign in (0, 1):
            for e in range(0, (1 << E) - 1):
                for f in (mants if e else [1 << i for i in range(M)] + [3 << i for i in range(M - 1)]):
                    x = (sign << (E + M)) | (e << M) | f
                    words.append(x << shift)
        self._add(np.array(sorted(set(words)), dtype=np.uint64))

    def word(self, v: Fraction, normal: bool = False):
        if v == 0:
            return None
        key = split(v)
        if key not in self.by_value and self.fmt.container_bits > 16:
            self._encode(key)
        hit = self.by_value.get(key)
        if hit is None or (normal and not hit[2]):
            return None
        return hit[0]


class Realizer:
    """Words for wanted exact values of one instruction (its A, B, C formats and scales)."""

    def __init__(self, model):
        self.model = model
        self.A = _table(model, "a")
        self.B = _table(model, "b")
        self.C = _table(model, "c")
        self.S = _table(model, "scale") if model.datapath.scale else None
        self.a_pow, self.b_pow = self.A.pow_normal, self.B.pow_normal
        self._a_by_odd, self._b_by_odd = self.A.by_odd, self.B.by_odd
        self._memo = {}
        self.one_scale = self.S.word(Fraction(1)) if self.S else None

    @property
    def normal_range(self):
        """(lowest, highest) exponent of a product of two normal powers of two."""
        return self.a_pow[0] + self.b_pow[0], self.a_pow[-1] + self.b_pow[-1]

    def product(self, v: Fraction, normal: bool = False):
        """``(a_word, b_word, raw)`` with decoded ``a * b == v`` exactly (both factors normal when
        ``normal``: then the product's raw exponent is floor(log2 |v|)); ``None`` if none."""
        v = Fraction(v)
        key = (v, normal)
        if key not in self._memo:
            self._memo[key] = self._product(v, normal)
        return self._memo[key]

    def _product(self, v, normal):
        if v == 0:
            return 0, 0, None
        sign, m, e = split(v)
        best = None
        for ma in _odd_divisors(m):
            mb = m // ma
            ea_set = self._a_by_odd.get((ma, normal))
            eb_set = self._b_by_odd.get((mb, normal))
            if not ea_set or not eb_set:
                continue
            # the most balanced split keeps both factors far from their format's edges
            lo = max(min(ea_set), e - max(eb_set))
            hi = min(max(ea_set), e - min(eb_set))
            if lo > hi:
                continue
            mid = min(max(e // 2, lo), hi)
            for dist in range(0, hi - lo + 1):
                hit = None
                for ea in (mid - dist, mid + dist):
                    if lo <= ea <= hi and ea in ea_set and e - ea in eb_set:
                        hit = ea
                        break
                if hit is not None:
                    cand = (abs(2 * hit - e), ma, hit, mb, e - hit)
                    if best is None or cand < best:
                        best = cand
                    break
        if best is None:
            return None
        _, ma, ea, mb, eb = best
        wa, ra, _ = self.A.by_value[(sign, ma, ea)]
        wb, rb, _ = self.B.by_value[(1, mb, eb)]
        return wa, wb, ra + rb

    def c_word(self, v: Fraction):
        return 0 if v == 0 else self.C.word(Fraction(v))


def _bitlen(x):
    x = np.asarray(x, dtype=np.int64)
    n = np.zeros_like(x)
    while (x > 0).any():
        n += x > 0
        x = x >> 1
    return n


def _odd_divisors(m: int):
    return [d for d in range(1, m + 1, 2) if m % d == 0]


def _by_odd(table: _Table) -> dict:
    """(odd part, normal only) -> set of exponents e with odd * 2**e a positive value of the format."""
    out = {}
    for (sign, m, e), (w, r, normal) in table.by_value.items():
        if sign < 0:
            continue
        out.setdefault((m, False), set()).add(e)
        if normal:
            out.setdefault((m, True), set()).add(e)
    return out


_TABLES = {}


def _table(model, operand: str) -> _Table:
    fmt = model.format_of(operand)
    key = (fmt, model.plan.decoders[fmt.key])
    hit = _TABLES.get(key)
    if hit is None:
        hit = _TABLES[key] = _Table(model, operand)
    return hit


__all__ = ["Realizer", "split", "lead", "to_parts"]
