"""Independent exact references for the AMD tests: Python Fractions, no mmasim.

Binary formats are described by (significand bits p, minimum exponent, maximum
exponent, word width); every rounding is written out here from the IEEE 754
definition.
"""

from fractions import Fraction

F32 = dict(p=24, emin=-126, emax=127, width=32)
F64 = dict(p=53, emin=-1022, emax=1023, width=64)
NAN = "nan"


def _bias(fmt):
    return fmt["emax"]


def _exp_bits(fmt):
    return fmt["width"] - fmt["p"]


def value(word: int, fmt):
    """Fraction of a finite word; ``NAN``, or a signed ``float('inf')``."""
    p, w = fmt["p"], fmt["width"]
    sign = -1 if word >> (w - 1) else 1
    e = (word >> (p - 1)) & ((1 << _exp_bits(fmt)) - 1)
    f = word & ((1 << (p - 1)) - 1)
    if e == (1 << _exp_bits(fmt)) - 1:
        return NAN if f else sign * float("inf")
    if e == 0:
        return sign * Fraction(f) * Fraction(2) ** (fmt["emin"] - p + 1)
    return sign * Fraction(f | (1 << (p - 1))) * Fraction(2) ** (e - _bias(fmt) - p + 1)


def is_negative_zero(word: int, fmt) -> bool:
    return word == 1 << (fmt["width"] - 1)


def floor_log2(x: Fraction) -> int:
    e = x.numerator.bit_length() - x.denominator.bit_length()
    while Fraction(2) ** e > x:
        e -= 1
    while Fraction(2) ** (e + 1) <= x:
        e += 1
    return e


def round_rne(x: Fraction, fmt, negative_zero: bool = False) -> int:
    """Word of ``x`` rounded to nearest even (subnormals, overflow to inf).
    A nonzero ``x`` that rounds to zero keeps its sign; an exact zero is -0
    only when ``negative_zero``."""
    p, w = fmt["p"], fmt["width"]
    sign_bit = 1 << (w - 1)
    if x == 0:
        return sign_bit if negative_zero else 0
    sign = sign_bit if x < 0 else 0
    a = abs(x)
    qe = max(floor_log2(a), fmt["emin"]) - (p - 1)
    n = a / Fraction(2) ** qe
    fl = n.numerator // n.denominator
    rem = n - fl
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and fl % 2 == 1):
        fl += 1
    if fl == 1 << p:
        fl, qe = fl >> 1, qe + 1
    inf = (((1 << _exp_bits(fmt)) - 1) << (p - 1))
    if fl == 0:
        return sign
    if qe + p - 1 > fmt["emax"]:
        return sign | inf
    if fl < 1 << (p - 1):
        return sign | fl
    return sign | ((qe + p - 1 + _bias(fmt)) << (p - 1)) | (fl - (1 << (p - 1)))


def fma(a: int, b: int, c: int, fmt) -> int | str:
    """IEEE 754 fusedMultiplyAdd(a, b, c) rounded to nearest even (NaN as ``NAN``)."""
    va, vb, vc = (value(x, fmt) for x in (a, b, c))
    if NAN in (va, vb, vc):
        return NAN
    inf_ab = isinstance(va, float) or isinstance(vb, float)
    if inf_ab:
        if va == 0 or vb == 0:
            return NAN
        sp = (va > 0) == (vb > 0)
        if isinstance(vc, float) and (vc > 0) != sp:
            return NAN
        return round_rne(Fraction(1 if sp else -1) * Fraction(2) ** 5000, fmt)
    if isinstance(vc, float):
        return round_rne(Fraction(1 if vc > 0 else -1) * Fraction(2) ** 5000, fmt)
    exact = va * vb + vc
    if exact == 0:
        neg_p = (a >> (fmt["width"] - 1)) ^ (b >> (fmt["width"] - 1))
        both_zero = va * vb == 0 and vc == 0
        return round_rne(exact, fmt, negative_zero=both_zero and neg_p == 1 and is_negative_zero(c, fmt))
    return round_rne(exact, fmt)


def fnuz(x: float, exp_bits: int, man_bits: int) -> int:
    """Byte of an exactly representable value in an AMD fnuz fp8 format (bias 2^(E-1))."""
    if x == 0:
        return 0
    bias = 1 << (exp_bits - 1)
    sign = 0x80 if x < 0 else 0
    a = Fraction(abs(x))
    e = max(floor_log2(a), 1 - bias)
    m = a / Fraction(2) ** (e - man_bits)
    assert m.denominator == 1, f"{x} is not representable"
    m = int(m)
    if m < 1 << man_bits:
        return sign | m
    assert e + bias < (1 << exp_bits)
    return sign | ((e + bias) << man_bits) | (m - (1 << man_bits))
