"""binary32 arithmetic on the CUDA cores: what a GEMM kernel computes outside the tensor
core (the promotion of partial sums, the split-K reduction, the epilogue).

Each operation is one IEEE 754 binary32 operation rounded to nearest even: ``add``
(FADD), ``mul`` (FMUL) and ``fma`` (FFMA, one rounding of the exact ``x*y + z``).
Values travel as float64 arrays that hold binary32 values exactly.  The exact
result is formed in binary64 (a product of two binary32 values is exact there; a
sum is rounded to odd, :func:`mmasim.ieee.odd_sum`) and rounded into binary32 by
the integer encoder (:func:`mmasim.ieee.pack`), so the results are correctly
rounded and do not depend on the CPU's flush-to-zero mode.  NaN results are the
canonical ``0x7FFFFFFF``; signed zeros follow IEEE 754 (an exact zero sum is +0
unless both addends are -0).
"""

from __future__ import annotations

import numpy as np

from . import ieee
from .decode import decode_float
from .encode import BUILTIN_ENCODINGS
from .formats import BUILTIN_FORMATS

F32 = next(f for f in BUILTIN_FORMATS if f.key == "f32")
RNE_F32 = next(e for e in BUILTIN_ENCODINGS if e.key == "rne-f32")


def from_words(words) -> np.ndarray:
    """binary32 words as float64 values (exact)."""
    w = np.asarray(words, dtype=np.uint32)
    return ieee.values(decode_float(F32, w.reshape(-1))).reshape(w.shape)


def to_words(values) -> np.ndarray:
    """float64 values that are binary32 values (or rounded to odd in binary64) as binary32 words (RNE)."""
    x = np.asarray(values, dtype=np.float64)
    return ieee.pack(x.reshape(-1), RNE_F32).reshape(x.shape)


def _round(x) -> np.ndarray:
    return from_words(to_words(x))


def add(x, y) -> np.ndarray:
    """``x + y`` in binary32, RNE (FADD)."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    with np.errstate(all="ignore"):
        return _round(ieee.odd_sum(x, y))


def mul(x, y) -> np.ndarray:
    """``x * y`` in binary32, RNE (FMUL)."""
    with np.errstate(all="ignore"):
        return _round(np.asarray(x, dtype=np.float64) * np.asarray(y, dtype=np.float64))


def fma(x, y, z) -> np.ndarray:
    """``x * y + z`` in binary32 with one rounding, RNE (FFMA)."""
    x, y, z = (np.asarray(v, dtype=np.float64) for v in (x, y, z))
    with np.errstate(all="ignore"):
        return _round(ieee.odd_sum(x * y, z))


__all__ = ["from_words", "to_words", "add", "mul", "fma", "F32", "RNE_F32"]
