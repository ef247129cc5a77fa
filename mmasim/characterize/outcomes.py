"""Exact outputs the ladder readers compare the D words with: the word of an exact value under a
rounding (docs/datapaths.md §2), a word's value, and one T-FDPA step on exact terms (§3), in
fractions, never through a table's datapath."""

from __future__ import annotations

from fractions import Fraction

from mmasim.characterize.probes import P2
from mmasim.characterize.values import to_parts


def pack(enc, v: Fraction) -> int:
    """The D word of the exact value ``v`` under rounding ``enc`` (docs/datapaths.md §2: RZ
    truncates the magnitude, RNE rounds to nearest with ties to even, subnormals kept, a result
    past the largest exponent is inf), in exact integer arithmetic."""
    neg, mag, e0 = to_parts(Fraction(v))
    if mag == 0:
        return 0
    E, frac, wfb = enc.exp_bits, enc.frac_bits, enc.word_frac_bits
    bias = (1 << (E - 1)) - 1
    emin = 1 - bias
    top = e0 + mag.bit_length() - 1
    qe = max(top, emin) - frac
    drop = qe - e0
    if drop <= 0:
        keep = mag << -drop
    else:
        keep = mag >> drop
        if enc.mode == "rne":
            rem, half = mag & ((1 << drop) - 1), 1 << (drop - 1)
            if rem > half or (rem == half and keep & 1):
                keep += 1
    wmag = ((max(top, emin) - emin) << frac) + keep
    if frac != wfb:
        wmag = ((wmag >> frac) << wfb) | ((wmag & ((1 << frac) - 1)) << (wfb - frac))
    inf_word = ((1 << E) - 1) << wfb
    if wmag >= inf_word or top > bias:
        wmag = inf_word
    return wmag | ((1 << (enc.word_bits - 1)) if neg and wmag else 0)


def word_value(enc, w: int):
    """``(value, raw exponent)`` of a finite D word, ``None`` for inf / NaN."""
    E, M = enc.exp_bits, enc.word_frac_bits
    sign = (w >> (E + M)) & 1
    e = (w >> M) & ((1 << E) - 1)
    f = w & ((1 << M) - 1)
    bias = (1 << (E - 1)) - 1
    if e == (1 << E) - 1:
        return None
    if e == 0:
        v, r = Fraction(f) * P2(1 - bias - M), 1 - bias
    else:
        v, r = Fraction(f | (1 << M)) * P2(e - bias - M), e - bias
    return (-v if sign else v), r


def is_nan(enc, w: int) -> bool:
    E, M = enc.exp_bits, enc.word_frac_bits
    return ((w >> M) & ((1 << E) - 1)) == (1 << E) - 1 and (w & ((1 << M) - 1)) != 0


def truncate(v: Fraction, q: Fraction) -> Fraction:
    n = abs(v) // q
    return (n * q) if v >= 0 else -(n * q)


def step_value(terms, c, c_raw, F, zeros=None, dead=False):
    """One T-FDPA step (docs/datapaths.md §3) on exact terms ``[(value, raw)]`` and C."""
    raws = [r for v, r in terms if v != 0]
    if c != 0:
        raws.append(c_raw)
    if isinstance(zeros, int):
        if dead or len(raws) == 0:
            raws.append(zeros)
        if c == 0:
            raws.append(zeros)
    if not raws:
        return c
    q = P2(max(raws) - F)
    return sum((truncate(v, q) for v, r in terms), Fraction(0)) + truncate(Fraction(c), q)
