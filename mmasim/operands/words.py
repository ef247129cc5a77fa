"""Operands in and results out: container words or values.

Owns the one rule that tells them apart (docs/user-guide.md, "Raw words" and "Typed arrays"):
integer arrays are container words, float and ``ml_dtypes`` arrays values, anything else a
``DtypeError``.  :func:`as_array` applies the format-free part of the rule (what kind of
array, words or values); :func:`to_words` the format's part.  Refuses a word that does not
fit its container (``WordRangeError``) and a value its format cannot hold exactly
(``DtypeError``); nothing is rounded or truncated.
"""

from __future__ import annotations

import numpy as np

from mmasim.errors import DtypeError, WordRangeError
from mmasim.arith.formats import Format
from mmasim.operands.tensors import is_tensor, refuse_masked, to_numpy as tensor_to_numpy

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}

#: operand modes
WORDS, VALUES = "words", "values"


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


def is_value_dtype(dtype) -> bool:
    """numpy floats and the ``ml_dtypes`` number types (not structured or raw void)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return True
    return dtype.kind == "V" and dtype.fields is None and dtype.type.__module__.startswith("ml_dtypes")


def _describe_dtype(dtype) -> str:
    kind = {"b": "boolean", "c": "complex", "O": "object", "S": "byte string", "U": "string",
            "M": "datetime", "m": "timedelta", "V": "structured / raw void"}.get(dtype.kind, "unsupported")
    return f"{kind} dtype {dtype}"


_EXPECT = ("expected integer container words or values (numpy float16/32/64 or ml_dtypes arrays)")


def as_array(x, what: str):
    """``(array, mode)`` for an operand: ``mode`` is ``"words"`` (integer
    array), ``"values"`` (float or ``ml_dtypes`` array) or ``None`` (an empty
    Python list: either).  Python lists and scalars are read element by element
    so that a list mixing ints and floats, bools, or ints past 64 bits never
    turn silently into something else.  Everything else (bool, complex, object, string,
    datetime, timedelta, structured arrays, ragged lists) is a ``DtypeError``."""
    if type(x) is np.ndarray and x.dtype.kind in "iu":     # the common case, first
        return x, WORDS
    refuse_masked(x, what)
    if not isinstance(x, np.ndarray):
        if isinstance(x, np.generic):
            x = np.asarray(x)
        elif isinstance(x, (list, tuple, int, float, complex, bool, str, bytes)) or x is None:
            return _from_python(x, what)
        elif is_tensor(x):
            x = tensor_to_numpy(x, what)    # torch: integer words, float values (mmasim.operands.tensors)
        else:
            x = np.asarray(x)      # other array-likes: their own dtype decides
    kind = x.dtype.kind
    if kind in "iu":
        return x, WORDS
    if is_value_dtype(x.dtype):
        return x, VALUES
    raise DtypeError(f"operand {what}: {_describe_dtype(x.dtype)} cannot carry an operand; {_EXPECT}")


def _scalar_kind(t) -> str:
    if issubclass(t, (bool, np.bool_)):
        return "bool"
    if issubclass(t, (int, np.integer)):
        return "int"
    if issubclass(t, (float, np.floating)):
        return "float"
    if issubclass(t, np.generic) and is_value_dtype(np.dtype(t)):
        return "float"
    return t.__name__


def _from_python(x, what: str):
    try:
        arr = np.asarray(x)
    except (ValueError, TypeError, OverflowError) as exc:
        raise DtypeError(f"operand {what}: not a rectangular array of numbers (ragged list?): {exc}") from None
    if arr.dtype.kind not in "iufO" and not is_value_dtype(arr.dtype):
        raise DtypeError(f"operand {what}: a list giving {_describe_dtype(arr.dtype)}; {_EXPECT}")
    leaves = arr.ravel() if arr.dtype == object else np.array(x, dtype=object).reshape(-1)
    if leaves.size == 0:
        return arr.astype(np.uint64), None
    kinds = {_scalar_kind(t) for t in set(map(type, leaves))}
    if kinds == {"int"}:
        if arr.dtype.kind in "iu":
            return arr, WORDS
        lo, hi = min(leaves), max(leaves)      # ints numpy could not hold in one integer dtype
        if lo < 0:
            raise WordRangeError(f"operand {what}: container words are non-negative; got {int(lo)}")
        if hi >= 1 << 64:
            raise WordRangeError(f"operand {what}: word {int(hi):#x} does not fit any container (at most 64 bits)")
        return leaves.astype(np.uint64).reshape(arr.shape), WORDS
    if kinds == {"float"} and arr.dtype != object:
        return arr, VALUES
    if kinds == {"int", "float"}:
        raise DtypeError(
            f"operand {what}: the list mixes Python/numpy integers (container words) and floats (values); "
            "write all elements as words (e.g. 0x3F800000) or all as values (e.g. 1.0)"
        )
    other = sorted(kinds - {"int", "float"})
    raise DtypeError(f"operand {what}: list elements of type {', '.join(other) or 'mixed float types'} "
                     f"cannot carry an operand; {_EXPECT}")


def ignored_mask(fmt: Format) -> int:
    """Bits of ``fmt``'s container word that the format does not read (padding)."""
    if fmt.integer:
        return 0
    full = (1 << fmt.container_bits) - 1
    return full & ~(((1 << fmt.field_bits) - 1) << fmt.field_shift)


def to_words(x, fmt: Format, what: str):
    """Return ``(uint64 words, values?)`` for operand ``what`` in format ``fmt``.

    ``values?`` is true when ``x`` held values (floats, ``ml_dtypes``).  A signed array of the
    container's own width (``int8`` for s8, ``int32`` for s32) is read as two's complement; any
    other integer must be a non-negative word that fits the container.  A value must be exactly
    representable in ``fmt`` (every bit the format does not read must be zero), else
    ``DtypeError``."""
    arr, mode = as_array(x, what)
    td = typed_dtype(fmt)
    if mode != VALUES:
        if fmt.integer and td is not None and arr.dtype == td:
            # the container's own signed dtype: two's complement words
            return arr.view(_UINT[td.itemsize]).astype(np.uint64), False
        return _checked_words(arr, fmt, what), False
    if fmt.integer:
        raise DtypeError(f"operand {what}: {fmt.name} is an integer format; pass integer words, not {arr.dtype} values")
    if td is None:
        raise DtypeError(
            f"operand {what}: {fmt.name} has no typed form here"
            + ("" if fmt.typed is None else f" (install ml_dtypes for {fmt.typed})")
            + "; pass container words as an integer array"
        )
    if arr.dtype != td:
        arr = _convert_exactly(arr, td, fmt, what)
    words = arr.view(_UINT[td.itemsize]).astype(np.uint64)
    if fmt.typed_shift:
        words = words << np.uint64(fmt.typed_shift)
    pad = ignored_mask(fmt)
    if pad:
        words = _clear_padding(words, arr, pad, td, fmt, what)
    return words, True


def _checked_words(arr, fmt: Format, what: str):
    if arr.size and arr.dtype.kind == "i" and arr.min() < 0:
        raise WordRangeError(
            f"operand {what}: container words must be non-negative {fmt.container_bits}-bit "
            f"patterns of {fmt.name}; got {int(arr.min())}"
            + (f" (pass {fmt.typed} for two's complement values)" if fmt.integer and fmt.signed and fmt.typed
               else "")
        )
    words = arr.astype(np.uint64)
    limit = 1 << fmt.container_bits
    if words.size and fmt.container_bits < 64 and int(words.max()) >= limit:
        bad = int(words.max())
        raise WordRangeError(
            f"operand {what}: word 0x{bad:X} does not fit the {fmt.container_bits}-bit container of "
            f"{fmt.name} (expected 0 <= word < 0x{limit:X})"
        )
    return words


def plain_words(arr: np.ndarray, fmt: Format) -> bool:
    """Whether the integer array holds only legal container words of ``fmt``."""
    if arr.dtype.kind == "u" and arr.dtype.itemsize * 8 <= fmt.container_bits:
        return True
    if not arr.size:
        return True
    return not (arr.min() < 0 or (fmt.container_bits < 64 and int(arr.max()) >= 1 << fmt.container_bits))


def typed_of(fmt: Format):
    """:func:`typed_dtype` of ``fmt``, looked up once per format."""
    try:
        return _TYPED[fmt.key]
    except KeyError:
        _TYPED[fmt.key] = typed_dtype(fmt)
        return _TYPED[fmt.key]


_TYPED: dict = {}


def checked_words(arr, mode, fmt: Format, what: str):
    """Container words of an operand classified by :func:`as_array`: integer word arrays are
    checked and kept as they are (no copy); values and two's complement arrays are converted
    by :func:`to_words`."""
    if mode != VALUES and arr.dtype.kind in "iu" and arr.dtype != typed_of(fmt):
        if not plain_words(arr, fmt):
            to_words(arr, fmt, what)   # raises the WordRangeError
        return arr
    return to_words(arr, fmt, what)[0]


def operand_words(x, fmt: Format, what: str):
    """Container words of one operand ``x`` (words or values) in ``fmt``: :func:`as_array`,
    then :func:`checked_words`."""
    return checked_words(*as_array(x, what), fmt, what)


def one_mode(arrays: dict, name: str) -> bool:
    """Whether a call passes values (else words), from ``{what: as_array(x, what)}`` of its
    operands; a call mixing the two is a :class:`DtypeError`."""
    modes = {what: mode for what, (_, mode) in arrays.items() if mode is not None}
    words = [w for w, m in modes.items() if m != VALUES]
    values = [w for w, m in modes.items() if m == VALUES]
    if words and values:
        def show(ws):
            return ", ".join(f"{w} ({arrays[w][0].dtype})" for w in ws)
        raise DtypeError(
            f"{name}: operands mix container words ({show(words)}) and values ({show(values)}); pass every "
            "operand (a, b, c and any scales) as integer container words, or every one as values "
            "(float / ml_dtypes arrays, C in its own format, e.g. float32)"
        )
    return bool(values)


def _first(mask: np.ndarray):
    i = int(np.flatnonzero(mask.reshape(-1))[0])
    return tuple(int(j) for j in np.unravel_index(i, mask.shape)) if mask.ndim else ()


def _convert_exactly(arr, td, fmt: Format, what: str):
    """``arr`` as ``td``, refusing any value that does not survive the conversion."""
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:
        wide = arr
        arr = arr.astype(np.float64)
        lost = ~((arr == wide) | np.isnan(wide))
        if lost.any():
            at = _first(lost)
            raise DtypeError(f"operand {what}: value {wide[at]!s} at index {at} is not exactly representable "
                             f"in {fmt.name}; pass {td} values or container words")
    try:
        with np.errstate(all="ignore"):
            conv = arr.astype(td)
            back = conv.astype(np.float64)
            orig = arr.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise DtypeError(f"operand {what}: cannot convert dtype {arr.dtype} to {td}: {exc}") from exc
    same = (back == orig) | (np.isnan(back) & np.isnan(orig))
    if not same.all():
        at = _first(~same)
        raise DtypeError(
            f"operand {what}: value {arr[at]!s} ({arr.dtype}) at index {at} is not exactly representable in "
            f"{fmt.name} (it would become {back[at]!s}); round it yourself or pass {td} values or container words"
        )
    return conv


def _clear_padding(words, arr, pad: int, td, fmt: Format, what: str):
    """Words of typed values whose dtype carries bits ``fmt`` does not read
    (tf32's low 13 bits of a float32, the sign of an e4m3 scale for ue4m3):
    those bits must not change the value."""
    pad = np.uint64(pad)
    bad = (words & pad) != 0
    if not bad.any():
        return words
    cleared = words[bad] & ~pad
    with np.errstate(invalid="ignore"):
        read = (cleared >> np.uint64(fmt.typed_shift)).astype(_UINT[td.itemsize]).view(td).astype(np.float64)
        orig = arr[bad].astype(np.float64)
    ok = (read == orig) | (np.isnan(read) & np.isnan(orig))      # NaN stays NaN; -0.0 is 0 for ue4m3
    if not ok.all():
        at = _first(bad & _scatter(~ok, bad))
        v = arr[at]
        why = ("it is negative and the format is unsigned" if float(v) < 0 and not fmt.signed
               else f"{fmt.name} keeps {fmt.man_bits} fraction bits; the word's bits {_bits(int(pad))} would be ignored")
        raise DtypeError(
            f"operand {what}: value {v!s} ({arr.dtype}) at index {at} is not exactly representable in "
            f"{fmt.name} ({why}); round it yourself or pass container words"
        )
    words = words.copy()
    words[bad] = cleared
    return words


def _scatter(values: np.ndarray, mask: np.ndarray) -> np.ndarray:
    out = np.zeros(mask.shape, dtype=bool)
    out[mask] = values
    return out


def _bits(mask: int) -> str:
    hi, lo = mask.bit_length() - 1, (mask & -mask).bit_length() - 1
    if mask == ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1):
        return f"{hi}:{lo}" if hi != lo else str(hi)
    return f"{mask:#x}"


def from_words(words: np.ndarray, fmt: Format):
    """D words as a typed array of ``fmt`` (float32, float16, float64)."""
    td = typed_dtype(fmt)
    w = np.asarray(words)
    return w.astype(_UINT[td.itemsize]).view(td)
