"""Float values to the container words of a number format: round to nearest even, optionally
saturating, with a NaN policy.

Gives :func:`cast` and the format facts recipes need (:func:`largest`, :func:`emax`,
:func:`element_formats`, :func:`values`) and :func:`recontainer` (words of one container of a
format in another).  The rounding itself is ``ml_dtypes``' (and
numpy's) single round-to-nearest-even from binary64, or the integer encoder where the typed
dtype keeps more fraction bits than the format reads (:func:`_round`).  Owns what
``ml_dtypes`` leaves to its caller: overflow, infinities and NaN for formats that cannot hold
them, each a decision, never a silent clamp or -0.  The rules: docs/quantize.md, "Plain casts".
"""

from __future__ import annotations

import numpy as np

from mmasim.arith.decode import FINITE
from mmasim.arith.encode import Encoding
from mmasim.errors import DtypeError, FormatRangeError, NonFiniteError, QuantizeError
from mmasim.arith.formats import Format
from mmasim.arith.ieee import pack, values as decoded_values
from mmasim.backends.plan import word_dtype
from mmasim.registry.build import get_registry
from mmasim.operands.words import to_words, typed_dtype

#: what a NaN in the input does: refuse it, or give the format's NaN word
NAN_POLICIES = ("raise", "propagate")


def element_formats(registry=None) -> dict:
    """``key -> Format`` of every float format some datapath reads as its A or B operand
    (read from the datapaths once per registry: every quantize call asks)."""
    global _elements
    reg = registry or get_registry()
    cached = _elements
    if cached[0] is not reg:
        keys = {k for arch in reg.architectures.values() for dp in arch.datapaths for k in (dp.a, dp.b)}
        cached = _elements = (reg, {k: reg.formats[k] for k in sorted(keys) if not reg.formats[k].integer})
    return dict(cached[1])


#: (the registry last asked, its element formats)
_elements = (None, {})


def decode(fmt: Format, words):
    """``fmt``'s words decoded by its registered decoder."""
    return get_registry().decoders[fmt.decoder](fmt, np.asarray(words))


def values(fmt: Format, words) -> np.ndarray:
    """The exact binary64 values of ``fmt``'s container words (NaN and infinities included)."""
    return decoded_values(decode(fmt, words))


def largest(fmt: Format) -> tuple:
    """``(m, q)``: the largest finite magnitude of float format ``fmt`` is ``m * 2**q``."""
    E, M = fmt.exp_bits, fmt.man_bits
    ones = (1 << (E + M)) - 1
    top = ((((1 << E) - 2) << M) | ((1 << M) - 1)) if E else ones
    fields = np.array([ones, ones - 1, top], dtype=np.uint64) << np.uint64(fmt.field_shift)
    d = decode(fmt, fields)
    best = max((int(m) * 2.0 ** int(q), int(m), int(q)) for c, m, q in zip(d.cls, d.m, d.q) if c == FINITE)
    return best[1], best[2]


def emax(fmt: Format) -> int:
    """The exponent of ``fmt``'s largest normal number (OCP MX's ``emax_elem``)."""
    m, q = largest(fmt)
    return q + m.bit_length() - 1


def check_nan_policy(nan) -> str:
    if not isinstance(nan, str) or nan not in NAN_POLICIES:
        raise QuantizeError(f"nan must be one of {', '.join(map(repr, NAN_POLICIES))}, not {nan!r}")
    return nan


def _at(mask: np.ndarray) -> tuple:
    return tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(mask.reshape(-1))[0]), mask.shape))


def cast(fmt: Format, x, *, saturate: bool = False, nan: str = "raise", what: str = "x") -> np.ndarray:
    """Round binary64 values ``x`` to nearest even in ``fmt``; its container words
    (``uint8`` ... ``uint64``, the shape of ``x``).  Values are read exactly in binary64
    (every float format mmasim knows is a subset).

    * NaN: ``nan="propagate"`` gives the format's NaN word; ``"raise"`` (default) refuses it;
      a format without NaN (e3m2, e2m3, e2m1) always refuses it.
    * a value that rounds past the largest finite value, or an infinity: ``saturate=True``
      gives the largest finite value of its sign; otherwise a format with infinity gives
      infinity, a format with NaN but no infinity (e4m3, the AMD fnuz types) gives NaN under
      ``nan="propagate"`` (the OCP 8-bit conversion without saturation), and anything else is
      refused (``ml_dtypes`` turns a NaN into -0 for e2m1 and clamps e2m1's overflow
      silently)."""
    if not isinstance(saturate, (bool, np.bool_)):
        raise QuantizeError(f"{what}: saturate must be True or False, not {saturate!r}")
    check_nan_policy(nan)
    if fmt.integer:
        raise QuantizeError(f"{what}: {fmt.key} is an integer format; casts round to float formats")
    x = np.array(x, dtype=np.float64)
    isnan = np.isnan(x)
    if isnan.any():
        at = _at(isnan)
        if fmt.nan == "none":
            raise NonFiniteError(f"{what}: NaN at index {at}: {fmt.name} has no NaN encoding")
        if nan == "raise":
            raise NonFiniteError(f"{what}: NaN at index {at}; pass nan='propagate' to give it "
                                 f"{fmt.name}'s NaN word")
    if not fmt.signed and (x < 0).any():
        at = _at(x < 0)
        raise FormatRangeError(f"{what}: value {float(x[at])!r} at index {at} is negative; {fmt.name} is unsigned")
    m, q = largest(fmt)
    with np.errstate(over="ignore"):
        mx, tie = float(np.ldexp(float(m), q)), float(np.ldexp(float(2 * m + 1), q - 1))
    mag = np.abs(x)
    over = (mag > tie) | ((mag == tie) & bool(m & 1))       # rounds past the largest finite value
    if over.any():
        if saturate:
            x = np.where(over, np.copysign(mx, x), x)
        elif not (fmt.nan == "ieee" or (fmt.nan != "none" and nan == "propagate")):
            at = _at(over)
            what_v = "infinity" if np.isinf(x[at]) else f"value {float(x[at])!r}"
            alt = " or nan='propagate' for its NaN word" if fmt.nan != "none" else ""
            raise FormatRangeError(
                f"{what}: {what_v} at index {at} rounds past {fmt.name}'s largest finite value {mx!r} and "
                f"{fmt.name} has no infinity; pass saturate=True to clamp to {mx!r}{alt}")
    return _round(fmt, x, what).astype(word_dtype(fmt))


def recontainer(words, src: Format, dst: Format, what: str = "words") -> np.ndarray:
    """Container words of ``src`` as the words of ``dst``, another container of the same
    element format (e2m1 as a 4-bit code, in bits 5:2 of a byte, or in RTX Blackwell's
    byte): each word's exact value placed in ``dst``, never its bits reinterpreted.  A value
    ``dst`` does not hold exactly is a :class:`~mmasim.DtypeError` naming the first one."""
    if src.key == dst.key:
        return np.asarray(words)
    v = values(src, words)
    out = cast(dst, v, saturate=True, nan="propagate", what=what)   # past dst's range: caught below
    back = values(dst, out)
    lost = ~((back == v) | (np.isnan(back) & np.isnan(v)))
    if lost.any():
        at = _at(lost)
        raise DtypeError(f"{what}: the {src.key} word {int(np.asarray(words)[at]):#x} at index {at} holds "
                         f"{float(v[at])!r}, which the {dst.key} container of {dst.name} does not hold "
                         f"(it would read {float(back[at])!r})")
    return out


def _round(fmt: Format, x: np.ndarray, what: str) -> np.ndarray:
    """``x`` (in range) rounded to nearest even into ``fmt``'s words: ``ml_dtypes``' (and
    numpy's) cast into the typed dtype, a single rounding from binary64 for every type mmasim
    uses (``tests/test_quantize_casts.py`` pins this on values that double rounding would get
    wrong); a format whose typed dtype keeps more fraction bits than the format reads (tf32 and
    xf32 in an f32 word) by the integer encoder (:func:`mmasim.arith.ieee.pack`)."""
    td = typed_dtype(fmt)
    if td is None:
        need = f" (install ml_dtypes for {fmt.typed})" if fmt.typed else ""
        raise DtypeError(f"{what}: no cast into {fmt.key}: it has no typed dtype here{need}")
    if fmt.field_shift > fmt.typed_shift:
        # the typed value keeps fraction bits below the format's field (tf32 in an f32 word)
        return pack(x, _narrow_encoding(fmt))
    with np.errstate(over="ignore", invalid="ignore"):
        typed = x.astype(td)
    return to_words(typed, fmt, what)[0]


def _narrow_encoding(fmt: Format) -> Encoding:
    """Round to nearest even into ``fmt``, an IEEE format whose field is the top of its word."""
    frac = fmt.man_bits + fmt.field_shift
    if fmt.nan != "ieee" or not fmt.signed or frac + fmt.exp_bits + 1 != fmt.container_bits:
        raise DtypeError(f"no cast into {fmt.key}: its typed dtype keeps bits the format drops")
    return Encoding(f"rne-{fmt.key}", fmt.key, "rne", word_bits=fmt.container_bits, exp_bits=fmt.exp_bits,
                    frac_bits=fmt.man_bits, word_frac_bits=frac,
                    nan_word=((1 << (fmt.exp_bits + fmt.man_bits)) - 1) << fmt.field_shift)


__all__ = ["NAN_POLICIES", "element_formats", "decode", "values", "largest", "emax", "cast", "recontainer"]
