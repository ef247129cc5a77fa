"""The two conversions of NVIDIA's training recipes that are not round-to-nearest: the shared
exponent rounded up (``cvt.rp.satfinite.ue8m0x2.f32``, MX "RCEIL") and stochastic rounding
(``cvt.rs``), both as the PTX ISA defines them (PTX ISA, section 9.7.9.21 "Data Movement and
Conversion Instructions: cvt"), plus the documented generator of random bits for a ``seed``.

Gives :func:`ue8m0_rceil`, :func:`stochastic`, :func:`rbits_width`, :func:`random_bits` and
:func:`check_rounding`.  Both round by the integer encoder's rounding engine
(:func:`mmasim.arith.encode.round_code`, modes ``"away"`` and ``"rs"``): this module decides
what each instruction rounds and with which bits, and adds no second rounder.  docs/quantize.md,
"Scale rounding" and "Stochastic rounding", gives the rules with their sources.
"""

from __future__ import annotations

import numpy as np

from mmasim.arith.decode import INF, NAN
from mmasim.arith.encode import encode
from mmasim.arith.formats import BUILTIN_FORMATS, Format
from mmasim.arith.ieee import decompose
from mmasim.errors import DtypeError, NonFiniteError, QuantizeError
from mmasim.quantization import casts

#: how element values become words: ``cvt.rn`` (ties to even) or ``cvt.rs``
ROUNDINGS = ("nearest", "stochastic")
#: how an MX block's shared exponent is rounded: OCP MX v1.0's floor, or cvt.rp (TE, cuBLAS)
SCALE_ROUNDINGS = ("floor", "rceil")

#: the scale type of ``cvt.rp.satfinite.ue8m0x2.f32``
UE8M0 = next(f for f in BUILTIN_FORMATS if f.key == "ue8m0")

#: random bits ``cvt.rs`` adds below each element's kept significand, by format name (PTX ISA,
#: ``rbits``): .f16x2 the 13 low bits of each 16-bit half; .bf16x2 each 16-bit half;
#: .e4m3x4 / .e5m2x4 / .e2m3x4 / .e3m2x4 a 16-bit half for each pair of operands;
#: .e2m1x4 one byte of rbits per operand
RBITS = {"f16": 13, "bf16": 16, "e4m3": 16, "e5m2": 16, "e2m3": 16, "e3m2": 16, "e2m1": 8}


def check_rounding(rounding, rbits, seed) -> None:
    if not isinstance(rounding, str) or rounding not in ROUNDINGS:
        raise QuantizeError(f"rounding must be one of {', '.join(map(repr, ROUNDINGS))}, not {rounding!r}")
    if rounding == "nearest" and (rbits is not None or seed is not None):
        raise QuantizeError("rbits= and seed= are for rounding='stochastic'")
    if rounding == "stochastic" and (rbits is None) == (seed is None):
        raise QuantizeError("rounding='stochastic' takes the random bits: rbits= (one integer per element) "
                            "or seed= (drawn by mmasim.quantization.rounding.random_bits), exactly one of them")


# ------------------------------------------------------------------ cvt.rp.satfinite.ue8m0x2.f32
def ue8m0_rceil(v) -> np.ndarray:
    """``cvt.rp.satfinite.ue8m0x2.f32`` of binary32 values ``v``: the ue8m0 word of the smallest
    power of two >= ``v`` (rounding toward +inf), as Transformer Engine's MXFP8 kernels take a
    block's scale (``transformer_engine/common/util/ptx_arch_spec.cuh``, ``float_to_e8m0``).

    ue8m0 holds 2**-127 (word 0x00) .. 2**127 (0xFE) and NaN (0xFF).  A normal ``v`` of biased
    exponent e and fraction f gives e, or e + 1 when f is not 0; a subnormal ``v`` (e = 0) is at
    most 2**-127 (word 0x00) while f <= 0x400000 and rounds up to 2**-126 (0x01) above it; 0
    gives 0x00 (the smallest ue8m0); .satfinite makes everything past 2**127, infinity
    included, 2**127 (0xFE, "a positive MAX_NORM in .ue8m0x2"); NaN gives 0xFF.  The rounding
    is the encoder's ``"away"`` (:func:`mmasim.arith.encode.round_code`) on ``|v|``."""
    d = decompose(np.abs(np.asarray(v, dtype=np.float32)).astype(np.float64))
    words, _ = encode(UE8M0, False, d.m, d.q, mode="away", saturate=True, nan=d.cls == NAN, inf=d.cls == INF)
    return words.astype(np.uint8).reshape(np.shape(v))


def ue8m0_reciprocal(words) -> np.ndarray:
    """The binary32 reciprocal 2**(127 - w) of ue8m0 scale words ``w`` (TE's ``exp2f_rcp``,
    ``transformer_engine/common/util/ptx.cuh``): exact, 2**-127 (a subnormal) for 0xFE."""
    w = np.asarray(words, dtype=np.int64)
    return np.ldexp(np.float32(1), (127 - w).astype(np.int32)).astype(np.float32)


# ------------------------------------------------------------------ cvt.rs
def rbits_width(fmt: Format, what: str = "rounding='stochastic'") -> int:
    """How many random bits ``cvt.rs`` uses for one element of ``fmt``."""
    try:
        return RBITS[fmt.name]
    except KeyError:
        raise QuantizeError(f"{what}: cvt.rs converts to {', '.join(RBITS)}, not {fmt.name} ({fmt.key})") from None


def random_bits(seed, shape, width: int) -> np.ndarray:
    """``width`` random bits per element of an array of ``shape`` (``uint32``), from
    ``seed``: element i (C order) gets the top ``width`` bits of the i-th 64-bit word of
    ``numpy.random.PCG64(seed).random_raw``.  NumPy keeps a bit generator's raw stream fixed
    across versions and platforms (NEP 19), so the same seed gives the same bits everywhere."""
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise QuantizeError(f"seed must be a non-negative integer, not {seed!r}")
    n = int(np.prod(shape, dtype=np.int64))
    raw = np.random.PCG64(int(seed)).random_raw(n) if n else np.zeros(0, dtype=np.uint64)
    return (raw >> np.uint64(64 - width)).astype(np.uint32).reshape(shape)


def element_bits(fmt: Format, shape, rbits, seed) -> np.ndarray:
    """The random bits of each element of an array of ``shape`` rounded into ``fmt``: ``rbits``
    checked (integers in [0, 2**width), ``shape``), or drawn from ``seed``."""
    width = rbits_width(fmt)
    if rbits is None:
        return random_bits(seed, shape, width)
    r = np.asarray(rbits)
    if r.dtype.kind not in "iu":
        raise QuantizeError(f"rbits must hold integers (the random bits of each element), not {r.dtype}")
    if r.shape != tuple(shape):
        raise QuantizeError(f"rbits must have x's shape {tuple(shape)} (one random word per element), not {r.shape}")
    bad = (r < 0) | (r >= (1 << width))
    if bad.any():
        at = casts._at(bad)
        raise QuantizeError(f"rbits[{at}] = {int(r[at])} does not fit the {width} random bits cvt.rs uses for "
                            f"{fmt.name}: give integers in [0, {1 << width})")
    return r.astype(np.int64)


def binary32_values(x: np.ndarray, what: str) -> np.ndarray:
    """``x`` checked to hold binary32 values (NaN and infinities included): cvt.rs reads .f32."""
    with np.errstate(over="ignore"):
        lost = ~((x.astype(np.float32).astype(np.float64) == x) | np.isnan(x))
    if lost.any():
        at = casts._at(lost)
        raise DtypeError(f"{what}: value {float(x[at])!r} at index {at} is not a binary32 value; cvt.rs converts "
                         ".f32 values: pass x.astype(np.float32)")
    return x


def stochastic(fmt: Format, x, r, *, saturate: bool, nan: str, what: str) -> np.ndarray:
    """``cvt.rs`` of binary32 values ``x`` into ``fmt`` with random bits ``r`` (one integer of
    :func:`rbits_width` bits per element): ``fmt``'s container words.

    The PTX ISA: the result "is rounded in the direction toward zero or away from zero based on
    the carry out of the integer addition of the supplied random bits (rbits) to the truncated
    off (discarded) bits of mantissa from the input".  With ``|x| = (n + f) * q``, q the
    destination's quantum at ``|x|`` (its subnormal quantum below the smallest normal), n an
    integer and 0 <= f < 1 the discarded part, the k random bits sit right below the kept
    significand: the magnitude is ``(n + c) * q`` where c, the carry, is 1 exactly when
    ``floor(f * 2**k) + r >= 2**k``; the sign is kept.  An exact ``x`` (f = 0) never moves.
    ``.satfinite`` (``saturate``; mandatory for the 8-, 6- and 4-bit formats): a result or an
    input past MAX_NORM, infinity included, is MAX_NORM with the sign; NaN is the format's NaN,
    or +MAX_NORM for a format without NaN (e2m1, e2m3, e3m2).  Without it (bf16, f16) what
    rounds past MAX_NORM is infinity.  ``nan="raise"`` refuses NaN."""
    if fmt.name in ("e4m3", "e5m2", "e2m3", "e3m2", "e2m1") and not saturate:
        raise QuantizeError(f"{what}: cvt.rs into {fmt.name} always saturates (.satfinite is mandatory): "
                            "leave saturate unset or pass saturate=True")
    k = rbits_width(fmt, what)
    x = np.asarray(x, dtype=np.float64)
    r = np.broadcast_to(np.asarray(r, dtype=np.int64), x.shape)
    isnan = np.isnan(x)
    if isnan.any():
        if nan == "raise":
            raise NonFiniteError(f"{what}: NaN at index {casts._at(isnan)}; pass nan='propagate' for cvt.rs's "
                                 f"result ({'+MAX_NORM' if fmt.nan == 'none' else 'the NaN word'})")
        # the NaN word without a sign; .satfinite into a format without NaN: +MAX_NORM, as +inf gives
        x = np.where(isnan, np.inf if fmt.nan == "none" else np.nan, x)
    return casts.cast(fmt, x, saturate=saturate, nan="propagate", what=what, mode="rs", rbits=r, rbits_width=k)


__all__ = ["ROUNDINGS", "SCALE_ROUNDINGS", "RBITS", "check_rounding", "ue8m0_rceil", "ue8m0_reciprocal",
           "rbits_width", "random_bits", "element_bits", "binary32_values", "stochastic"]
