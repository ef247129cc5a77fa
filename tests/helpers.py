"""Independent helpers for tests: IEEE words from exact values, without mmasim."""

import struct
from fractions import Fraction


def f32(x: float) -> int:
    """The f32 word of a Python float that is exactly representable in f32."""
    w = struct.unpack("<I", struct.pack("<f", x))[0]
    assert struct.unpack("<f", struct.pack("<I", w))[0] == x or x != x, f"{x} is not an f32 value"
    return w


def f16(x: float) -> int:
    w = struct.unpack("<H", struct.pack("<e", x))[0]
    assert struct.unpack("<e", struct.pack("<H", w))[0] == x or x != x, f"{x} is not an f16 value"
    return w


def bf16(x: float) -> int:
    w = f32(x)
    assert w & 0xFFFF == 0, f"{x} is not a bf16 value"
    return w >> 16


def f32_value(word: int) -> float:
    return struct.unpack("<f", struct.pack("<I", int(word)))[0]


def f32_rz(q: Fraction) -> int:
    """f32 word of an exact rational, truncated toward zero (normal range only)."""
    if q == 0:
        return 0
    sign = 0x80000000 if q < 0 else 0
    q = abs(q)
    e = q.numerator.bit_length() - q.denominator.bit_length()
    while Fraction(2) ** e > q:
        e -= 1
    while Fraction(2) ** (e + 1) <= q:
        e += 1
    assert -126 <= e <= 127
    mant = int(q / Fraction(2) ** (e - 23))  # floor: 24-bit significand
    return sign | ((e + 127) << 23) | (mant - (1 << 23))
