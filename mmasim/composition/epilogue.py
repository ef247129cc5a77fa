"""The epilogue of a GEMM kernel: ``D = alpha * accumulator + beta * C`` in binary32, then D
converted into its output format, as CUTLASS's linear-combination epilogue computes it
(:class:`Epilogue`, whose docstring cites the source line by line).
"""

from __future__ import annotations

import math
import numbers

import attrs
import numpy as np

from mmasim.arith import binary32
from mmasim.arith.codes import INF, NAN
from mmasim.arith.encode import encode
from mmasim.arith.ieee import decompose
from mmasim.errors import GemmOptionError
from mmasim.arith.formats import Format
from mmasim.operands.words import typed_dtype

#: output formats of the epilogue (format keys)
OUTPUT_FORMATS = ("f32", "f16", "bf16", "e4m3", "e5m2")
#: formats CUTLASS converts into with saturation only (cvt.rn.satfinite)
SATFINITE_ONLY = ("e4m3",)
#: formats CUTLASS saturates by default
SATFINITE_DEFAULT = ("e4m3", "e5m2")


@attrs.frozen
class Epilogue:
    """``D = convert(alpha * acc + beta * C)``, binary32 compute.

    CUTLASS ``include/cutlass/epilogue/thread/linear_combination.h`` (``LinearCombination``,
    NVIDIA/cutlass at 7107b05) with ``ElementCompute = float``:

    * the source C is read only when ``beta != 0`` (``is_source_needed``, line 206; the
      collective epilogue calls the one-operand form otherwise,
      ``epilogue/collective/default_epilogue.hpp`` lines 233-248);
    * with the source: ``X = beta * C`` (one FMUL, line 245), then
      ``D = alpha * accumulator + X`` (``multiply_add``, line 247: ``a * b + c``, which nvcc
      contracts into one FFMA, its default ``--fmad=true``);
    * without it: ``D = alpha * accumulator`` (one FMUL, line 272);
    * the result converted into the output type by ``NumericConverter`` with
      ``round_to_nearest`` (line 249): RNE; into e4m3 and e5m2 CUTLASS converts with
      ``cvt.rn.satfinite`` (``include/cutlass/float8.h``), so fp8 outputs saturate (a
      finite value or an infinity past the largest finite value gives that value; NaN
      stays NaN); f16, bf16 and f32 outputs overflow to infinity unless ``saturate=True``
      (CUTLASS's ``round_to_nearest_satfinite``).

    C (the source) is in the output format, CUTLASS's default (``ElementSource =
    ElementOutput``); every conversion into binary32 of a narrower format is exact.
    """

    alpha: float
    beta: float
    out: Format
    saturate: bool

    @property
    def reads_source(self) -> bool:
        return self.beta != 0

    def apply(self, acc, source=None) -> np.ndarray:
        """Output words of the binary32 accumulator values ``acc`` (float64 arrays) and the
        source words ``source`` (in the output format; read only when ``beta != 0``)."""
        acc = np.asarray(acc, dtype=np.float64)
        if self.reads_source:
            x = binary32.mul(self.beta, binary32.values(self.out, source))
            d = binary32.fma(self.alpha, acc, x)
        else:
            d = binary32.mul(self.alpha, acc)
        return convert(d, self.out, self.saturate)


def _scalar(value, what: str) -> float:
    """A binary32 scalar; anything else (not a real number, NaN, a number binary32 does not hold
    exactly, one past binary64's range included) is refused."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise GemmOptionError(f"gemm: {what} must be a binary32 number, not {_shown(value)}")
    try:
        v = float(value)
    except OverflowError:       # an int or Fraction past binary64's range
        raise GemmOptionError(f"gemm: {what} = {_shown(value)} is past binary64's range, so not a binary32 value "
                              "(the epilogue computes in binary32); pass a binary32 number, e.g. numpy.float32") \
            from None
    if math.isnan(v):
        raise GemmOptionError(f"gemm: {what} is NaN")
    if v != value or (math.isfinite(v) and float(binary32.from_words(binary32.to_words(np.float64(v)))) != v):
        raise GemmOptionError(
            f"gemm: {what} = {_shown(value)} is not a binary32 value (the epilogue computes in binary32); "
            f"pass numpy.float32({v!r}) to use the nearest one")
    return v


def _shown(value) -> str:
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:24]}... ({len(text)} characters)"


def build(formats: dict, alpha=None, beta=None, out_format=None, saturate=None, default_out: str = "f32"):
    """The :class:`Epilogue` the options ask for, or ``None`` when none is given."""
    if alpha is None and beta is None and out_format is None and saturate is None:
        return None
    key = default_out if out_format is None else out_format
    if not isinstance(key, str) or key not in OUTPUT_FORMATS or key not in formats:
        raise GemmOptionError(f"gemm: out_format must be one of {', '.join(OUTPUT_FORMATS)}, not {key!r}")
    if key not in ("f32", "f16") and typed_dtype(formats[key]) is None:
        raise GemmOptionError(f"gemm: out_format {key} needs ml_dtypes for its conversion (pip install ml_dtypes)")
    if saturate is not None and not isinstance(saturate, (bool, np.bool_)):
        raise GemmOptionError(f"gemm: saturate must be None (the output format's default), True or False, "
                              f"not {saturate!r}")
    if saturate is None:
        saturate = key in SATFINITE_DEFAULT
    elif not saturate and key in SATFINITE_ONLY:
        raise GemmOptionError(f"gemm: out_format {key} has no infinity and is only converted into with "
                              f"saturation (PTX cvt.rn.satfinite); saturate must be None or True")
    a = 1.0 if alpha is None else _scalar(alpha, "alpha")
    b = 0.0 if beta is None else _scalar(beta, "beta")
    return Epilogue(alpha=a, beta=b, out=formats[key], saturate=bool(saturate))


def convert(d, fmt: Format, saturate: bool) -> np.ndarray:
    """binary32 values ``d`` (float64 arrays) as words of ``fmt``: one RNE rounding by the
    project's encoder (:func:`mmasim.arith.encode.encode`, the rounding of
    :func:`mmasim.arith.encode.round_code`); ``saturate``: a value or an infinity past the
    largest finite value gives that value with its sign (``cvt.rn.satfinite``), else an
    infinity; NaN is the format's quiet NaN with its sign.  ``tests/test_gemm_epilogue.py``
    checks it against ``ml_dtypes``' conversions."""
    words32 = binary32.to_words(d)
    if fmt.key == "f32":
        return np.ascontiguousarray(words32).view(np.uint32)
    x = decompose(np.ascontiguousarray(words32).view(np.float32).astype(np.float64))
    words, _ = encode(fmt, x.sign == 1, x.m, x.q, saturate=saturate, nan=x.cls == NAN, inf=x.cls == INF)
    return words.astype(_WORD[fmt.container_bits]).reshape(np.shape(words32))


_WORD = {8: np.uint8, 16: np.uint16, 32: np.uint32}


__all__ = ["Epilogue", "build", "convert", "OUTPUT_FORMATS"]
