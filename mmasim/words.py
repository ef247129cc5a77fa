"""Operands in and results out: raw container words or typed arrays.

Raw words are integer arrays (any integer dtype, or Python ints) holding the
bits the hardware reads.  Typed arrays (numpy float16/32/64, ``ml_dtypes``
types, int8/int32 for integer formats) are converted to container words;
floats of another dtype are accepted only where the conversion is exact.
"""

from __future__ import annotations

import numpy as np

from .errors import DtypeError, WordRangeError
from .formats import Format

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def typed_dtype(fmt: Format):
    """The numpy dtype of typed arrays for ``fmt`` (``None`` if it has none or
    ``ml_dtypes`` is missing)."""
    if fmt.typed is None:
        return None
    if hasattr(np, fmt.typed) and fmt.typed not in ("float4_e2m1fn",):
        return np.dtype(fmt.typed)
    try:
        import ml_dtypes
    except ImportError:
        return None
    t = getattr(ml_dtypes, fmt.typed, None)
    return np.dtype(t) if t is not None else None


def _is_float_like(dtype) -> bool:
    return dtype.kind in "fV" or (dtype.kind not in "biuSUOM" and dtype.itemsize <= 8)


def to_words(x, fmt: Format, what: str):
    """Return ``(uint64 words, typed?)`` for operand ``what`` in format ``fmt``."""
    arr = np.asarray(x)
    td = typed_dtype(fmt)
    if arr.dtype == object or arr.dtype.kind in "SUM":
        raise DtypeError(f"operand {what}: expected container words (integers) or a typed array, got dtype {arr.dtype}")
    if td is not None and arr.dtype == td:
        words = arr.view(_UINT[td.itemsize]).astype(np.uint64)
        if fmt.typed_shift:
            words = words << np.uint64(fmt.typed_shift)
        if fmt.integer:
            words = words & np.uint64((1 << fmt.container_bits) - 1)
        return words, True
    if arr.dtype.kind == "b":
        raise DtypeError(f"operand {what}: boolean arrays are not container words")
    if arr.dtype.kind in "iu":
        if arr.size and arr.dtype.kind == "i" and arr.min() < 0:
            raise WordRangeError(
                f"operand {what}: container words must be non-negative {fmt.container_bits}-bit "
                f"patterns of {fmt.name}; got {int(arr.min())} (pass typed {fmt.typed or 'values'} for signed values)"
            )
        words = arr.astype(np.uint64)
        limit = 1 << fmt.container_bits
        if words.size and fmt.container_bits < 64 and int(words.max()) >= limit:
            bad = int(words.max())
            raise WordRangeError(
                f"operand {what}: word 0x{bad:X} does not fit the {fmt.container_bits}-bit container of "
                f"{fmt.name} (expected 0 <= word < 0x{limit:X})"
            )
        return words, False
    if _is_float_like(arr.dtype) and not fmt.integer:
        if td is None:
            raise DtypeError(
                f"operand {what}: {fmt.name} has no typed form here"
                + ("" if fmt.typed is None else " (install ml_dtypes for it)")
                + "; pass container words as an integer array"
            )
        try:
            conv = arr.astype(td)
            back = conv.astype(np.float64)
            orig = arr.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise DtypeError(f"operand {what}: cannot convert dtype {arr.dtype} to {td}: {exc}") from exc
        same = (back == orig) | (np.isnan(back) & np.isnan(orig))
        if not same.all():
            raise DtypeError(
                f"operand {what}: values of dtype {arr.dtype} are not exactly representable in {fmt.name}; "
                f"pass numpy {td} values or container words"
            )
        return to_words(conv, fmt, what)
    raise DtypeError(
        f"operand {what}: dtype {arr.dtype} cannot carry {fmt.name}; expected integer container words"
        + (f" or typed {td}" if td is not None else "")
    )


def from_words(words: np.ndarray, fmt: Format):
    """D words as a typed array of ``fmt`` (float32, float16, float64, int32)."""
    td = typed_dtype(fmt)
    w = np.asarray(words)
    return w.astype(_UINT[td.itemsize]).view(td)
