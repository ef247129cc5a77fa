"""Float values to the container words of a number format: round to nearest even, optionally
saturating, with a NaN policy.

Gives :func:`cast` and the format facts recipes need (:func:`largest`, :func:`emax`,
:func:`element_formats`, :func:`values`) and :func:`recontainer` (words of one container of a
format in another).  The rounding itself is the project's integer encoder
(:func:`mmasim.arith.encode.encode`): one rounding from the exact binary64 value, no
``ml_dtypes`` (``tests/test_casts_agree_with_ml_dtypes.py`` checks it against its casts on
every word and midpoint).  Owns the policy around it: which overflow, infinity and NaN a cast
may give or must refuse, each a decision, never a silent clamp.  The rules: docs/quantize.md,
"Plain casts".
"""

from __future__ import annotations

import numpy as np

from mmasim.arith.decode import FINITE, INF, NAN
from mmasim.arith.encode import encodable, encode
from mmasim.errors import DtypeError, FormatRangeError, NonFiniteError, QuantizeError
from mmasim.arith.formats import Format
from mmasim.arith.ieee import decompose, values as decoded_values
from mmasim.backends.plan import word_dtype
from mmasim.registry.build import get_registry

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


def cast(fmt: Format, x, *, saturate: bool = False, nan: str = "raise", what: str = "x",
         mode: str = "rne", rbits=None, rbits_width: int = 0) -> np.ndarray:
    """Round binary64 values ``x`` to nearest even in ``fmt``; its container words
    (``uint8`` ... ``uint64``, the shape of ``x``).  Values are read exactly in binary64
    (every float format mmasim knows is a subset) and rounded once by the integer encoder
    (:func:`mmasim.arith.encode.encode`); ``mode``, ``rbits`` and ``rbits_width``: another of
    its roundings (:func:`mmasim.quantization.rounding.stochastic` passes ``cvt.rs``'s).

    * NaN: ``nan="propagate"`` gives the format's NaN word (the quiet NaN, with the NaN's sign
      where the format's NaNs have one; tf32 / xf32: 0x7FFFE000, all fraction bits set);
      ``"raise"`` (default) refuses it; a format without NaN (e3m2, e2m3, e2m1) always
      refuses it.
    * a value that rounds past the largest finite value, or an infinity: ``saturate=True``
      gives the largest finite value of its sign; otherwise a format with infinity gives
      infinity, a format with NaN but no infinity (e4m3, the AMD fnuz types, ue8m0) gives NaN
      under ``nan="propagate"`` (the OCP 8-bit conversion without saturation), and anything
      else is refused (``ml_dtypes`` turns a NaN into -0 for e2m1 and clamps e2m1's overflow
      silently).
    * a negative value in an unsigned format, and 0 in a format without zero (ue8m0), are
      refused (``ml_dtypes`` gives ue8m0's NaN for 0)."""
    if not isinstance(saturate, (bool, np.bool_)):
        raise QuantizeError(f"{what}: saturate must be True or False, not {saturate!r}")
    check_nan_policy(nan)
    if fmt.integer:
        raise QuantizeError(f"{what}: {fmt.key} is an integer format; casts round to float formats")
    why = encodable(fmt)
    if why:
        raise DtypeError(f"{what}: no cast into {fmt.key}: {why}")
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
    if not fmt.subnormals and (x == 0).any():
        at = _at(x == 0)
        raise FormatRangeError(f"{what}: value 0.0 at index {at}: {fmt.name} has no zero (its smallest value is "
                               f"{float(values(fmt, 0))!r})")
    d = decompose(x)
    words, over = encode(fmt, d.sign == 1, d.m, d.q, mode=mode, saturate=bool(saturate), nan=d.cls == NAN,
                         inf=d.cls == INF, nan_field=_nan_field(fmt), rbits=rbits, rbits_width=rbits_width)
    if over.any() and not saturate and not (fmt.nan == "ieee" or (fmt.nan != "none" and nan == "propagate")):
        at = _at(over)
        m, q = largest(fmt)
        mx = float(np.ldexp(float(m), q))
        what_v = "infinity" if np.isinf(x[at]) else f"value {float(x[at])!r}"
        alt = " or nan='propagate' for its NaN word" if fmt.nan != "none" else ""
        raise FormatRangeError(
            f"{what}: {what_v} at index {at} rounds past {fmt.name}'s largest finite value {mx!r} and "
            f"{fmt.name} has no infinity; pass saturate=True to clamp to {mx!r}{alt}")
    return words.astype(word_dtype(fmt)).reshape(x.shape)


def _nan_field(fmt: Format):
    """The NaN a cast gives: the format's quiet NaN, except tf32 and xf32 (10 fraction bits
    read from an f32 word), whose NaN has every fraction bit set (0x7FFFE000: the tensor
    cores' canonical NaN 0x7FFFFFFF without the bits the format does not read)."""
    if fmt.nan == "ieee" and fmt.field_shift and fmt.field_shift + fmt.field_bits == fmt.container_bits:
        return (1 << (fmt.exp_bits + fmt.man_bits)) - 1
    return None


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


__all__ = ["NAN_POLICIES", "element_formats", "decode", "values", "largest", "emax", "cast", "recontainer"]
