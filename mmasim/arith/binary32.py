"""binary32 arithmetic on the CUDA cores: what a GEMM kernel computes outside the tensor
core (the promotion of partial sums, the split-K reduction, the epilogue).

Gives :func:`add` (FADD), :func:`mul` (FMUL) and :func:`fma` (FFMA), each one IEEE 754 binary32
operation rounded to nearest even, on float64 arrays that hold binary32 values exactly, and
the conversions :func:`from_words`, :func:`to_words`, :func:`values`.  Each result is the
correctly rounded one (the argument is on each function); NaN results are the canonical
``0x7FFFFFFF``, signed zeros follow IEEE 754 (an exact zero sum is +0 unless both addends are
-0).  The rounding into binary32 is the CPU's conversion where :func:`hardware_rounds`, else
the integer encoder (:func:`mmasim.arith.ieee.pack`); both give the same words.
"""

from __future__ import annotations

import numpy as np

from mmasim.arith import ieee
from mmasim.arith.decode import decode_float
from mmasim.arith.codes import INF, NAN
from mmasim.arith.encode import BUILTIN_ENCODINGS, encode
from mmasim.arith.formats import BUILTIN_FORMATS, Format

F32 = next(f for f in BUILTIN_FORMATS if f.key == "f32")
RNE_F32 = next(e for e in BUILTIN_ENCODINGS if e.key == "rne-f32")

# probes of the CPU's binary32 conversions: (binary64 value, the binary32 word RNE gives)
_PROBES = np.array([1 + 2.0 ** -24, 1 + 3 * 2.0 ** -24, 1 + 2.0 ** -24 + 2.0 ** -50, -(1 + 2.0 ** -24 + 2.0 ** -50),
                    2.0 ** -149, 3 * 2.0 ** -150, 2.0 ** -126 * (1 - 2.0 ** -24)])
_WANT = np.array([0x3F800000, 0x3F800002, 0x3F800001, 0xBF800001, 0x00000001, 0x00000002, 0x00800000], np.uint32)
_SUBNORMAL = np.array([0x00000001, 0x80000003], np.uint32)


def hardware_rounds() -> bool:
    """Whether this thread's CPU converts binary64 to binary32 rounding to nearest even with
    subnormals kept, and reads binary32 subnormals as they are (no flush-to-zero); the
    conversions ask it on every call."""
    with np.errstate(all="ignore"):
        ok = (_PROBES.astype(np.float32).view(np.uint32) == _WANT).all()
        back = _SUBNORMAL.view(np.float32).astype(np.float64)
    return bool(ok) and back[0] == 2.0 ** -149 and back[1] == -3 * 2.0 ** -149


def from_words(words) -> np.ndarray:
    """binary32 words as float64 values (exact)."""
    w = np.asarray(words, dtype=np.uint32)
    if hardware_rounds():
        with np.errstate(invalid="ignore"):     # signalling NaN words read as NaN
            return w.view(np.float32).astype(np.float64)
    return ieee.values(decode_float(F32, w.reshape(-1))).reshape(w.shape)


def to_words(values) -> np.ndarray:
    """float64 values that are binary32 values, or rounded to odd in binary64, as binary32
    words (RNE); NaN as ``0x7FFFFFFF``."""
    x = np.asarray(values, dtype=np.float64)
    if hardware_rounds():
        with np.errstate(all="ignore"):
            w = x.astype(np.float32).view(np.uint32)
        return np.where(np.isnan(x), np.uint32(RNE_F32.nan_word), w)
    return ieee.pack(x.reshape(-1), RNE_F32).reshape(x.shape)


def _round(x) -> np.ndarray:
    return from_words(to_words(x))


def add(x, y) -> np.ndarray:
    """``x + y`` in binary32, RNE (FADD).  The sum is rounded to nearest in binary64 and then
    into binary32: with 53 >= 2 * 24 + 2 bits that double rounding is the correctly rounded
    result (S. A. Figueroa, "When is double rounding innocuous?", SIGNUM Newsletter 30(3),
    1995)."""
    with np.errstate(all="ignore"):
        return _round(np.asarray(x, dtype=np.float64) + np.asarray(y, dtype=np.float64))


def mul(x, y) -> np.ndarray:
    """``x * y`` in binary32, RNE (FMUL): a binary32 product is exact in binary64, so one
    rounding into binary32 is the correctly rounded result."""
    with np.errstate(all="ignore"):
        return _round(np.asarray(x, dtype=np.float64) * np.asarray(y, dtype=np.float64))


def fma(x, y, z) -> np.ndarray:
    """``x * y + z`` in binary32 with one rounding, RNE (FFMA): the exact ``x*y`` (binary64)
    plus ``z`` is rounded to odd in binary64 (:func:`mmasim.arith.ieee.odd_sum`) and then into
    binary32, the correctly rounded result (Boldo and Melquiond's rounding to odd)."""
    x, y, z = (np.asarray(v, dtype=np.float64) for v in (x, y, z))
    with np.errstate(all="ignore"):
        return _round(ieee.odd_sum(x * y, z))


def values(fmt, words) -> np.ndarray:
    """Words of float format ``fmt`` as float64 values (exact); binary32 words by :func:`from_words`."""
    if fmt.key == F32.key:
        return from_words(words)
    w = np.asarray(words)
    return ieee.values(decode_float(fmt, w.reshape(-1))).reshape(w.shape)


def cast(values, fmt: Format, saturate: bool) -> np.ndarray:
    """The words of ``fmt`` of binary32 values (float64 arrays) on the host: one RNE rounding by
    :func:`mmasim.arith.encode.encode` (``saturate`` as :func:`mmasim.composition.epilogue.convert` takes it; NaN the
    format's quiet NaN with its sign)."""
    x = ieee.decompose(np.asarray(values, dtype=np.float64))
    words, _ = encode(fmt, x.sign == 1, x.m, x.q, saturate=saturate, nan=x.cls == NAN, inf=x.cls == INF)
    return words.astype(_WORD[fmt.container_bits]).reshape(np.shape(values))


_WORD = {8: np.uint8, 16: np.uint16, 32: np.uint32}


__all__ = ["from_words", "to_words", "add", "mul", "fma", "values", "cast", "hardware_rounds", "F32", "RNE_F32"]
