"""Showing words and values to people: hex words, decoded exact values."""

from __future__ import annotations

import math
import unicodedata
from fractions import Fraction

import numpy as np

from mmasim.arith.decode import FINITE, INF, NAN, ZERO
from mmasim.arith.exact import dyadic, odd_dyadic


def safe(text, newlines: bool = False) -> str:
    """``text`` with every control character escaped, for printing text that came
    from outside (vector files, tables, plugins, paths, the command line).

    C0/C1 controls, DEL, and Unicode format / line / paragraph separators
    (bidi overrides, zero-width characters) become ``\\xNN`` / ``\\uNNNN``
    escapes, so a crafted string cannot move the cursor, clear the screen,
    reorder what is shown or start a new line.  ``newlines=True`` keeps
    ``"\\n"`` (for multi-line text the program itself composed).
    """
    text = str(text)
    out = []
    for ch in text:
        if ch == "\n" and newlines:
            out.append(ch)
        elif unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs"):
            o = ord(ch)
            out.append(f"\\x{o:02x}" if o < 0x100 else f"\\u{o:04x}" if o < 0x10000 else f"\\U{o:08x}")
        else:
            out.append(ch)
    return "".join(out)


def one_line(text) -> str:
    """A (possibly multi-line) message as one line with control characters escaped."""
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    out = ""
    for line in lines:
        out += line if not out else (" " if out.endswith(":") else "; ") + line
    return safe(out)


def hex_word(word: int, bits: int) -> str:
    return f"0x{int(word):0{max(1, bits // 4)}X}"


def describe_value(fmt, decoded, index=0) -> str:
    """One decoded element as text: ``-1.5 (= -3*2^-1)``, ``-0``, ``inf``, ``nan``."""
    cls = int(np.ravel(decoded.cls)[index])
    sign = "-" if int(np.ravel(decoded.sign)[index]) else ""
    if cls == NAN:
        return "nan"
    if cls == INF:
        return f"{sign}inf"
    if cls == ZERO:
        return f"{sign}0"
    m, q = int(np.ravel(decoded.m)[index]), int(np.ravel(decoded.q)[index])
    if getattr(fmt, "integer", False):
        return f"{sign}{m}"
    m, q = odd_dyadic(m, q)
    exact = _dyadic_text(sign, m, q)
    if -1020 < q + m.bit_length() < 1020:
        value = float(m) * 2.0 ** q
        return f"{sign}{value!r} (= {exact})"
    return exact


def value_text(model, operand: str, word: int) -> str:
    """The decoded value of one word of ``operand`` ("a", "b", "c", "d", "scale") of ``model``."""
    fmt = {"a": model.a_format, "b": model.b_format, "c": model.c_format, "d": model.d_format,
           "scale": model.scale_format}[operand]
    dec = model.decode(operand, np.array([int(word)], dtype=np.uint64))
    return describe_value(fmt, dec)


def _dyadic_text(sign: str, m: int, q: int) -> str:
    return f"{sign}{m}*2^{q}" if q else f"{sign}{m}"


def number_text(x, signed: bool = False) -> str:
    """A count or a distance (ULPs, units) for people, in one form everywhere: an integer
    as an integer; a fraction in fixed point with four significant digits (at least one
    decimal), an exponent only below 1e-4 or from 1e15 on; ``signed``: ``+`` before a
    positive number."""
    x = float(x)
    sign = "+" if signed and x > 0 else ""
    if math.isinf(x) or math.isnan(x):
        return sign + str(x)
    if x.is_integer() and abs(x) < 1e15:
        return f"{sign}{int(x)}"
    if not 1e-4 <= abs(x) < 1e15:
        return f"{sign}{x:.4g}"
    text = f"{x:.{max(1, 3 - math.floor(math.log10(abs(x))))}f}".rstrip("0")
    return sign + (text + "0" if text.endswith(".") else text)


def fraction_text(x) -> str:
    """An exact value (``Fraction`` or special float) as short text."""
    if not isinstance(x, Fraction):
        return str(x)
    if x == 0:
        return "0"
    parts = dyadic(x)
    if parts is not None:
        exact = _dyadic_text("-" if x < 0 else "", *parts)
        try:
            return f"{float(x)!r} (= {exact})"
        except OverflowError:
            return exact
    return f"{float(x)!r} (= {x})"


__all__ = ["safe", "one_line", "hex_word", "describe_value", "value_text", "fraction_text", "FINITE"]
