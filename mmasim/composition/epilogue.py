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
from mmasim.errors import GemmOptionError
from mmasim.arith.formats import Format
from mmasim.operands.words import typed_dtype
from mmasim.registry.build import get_registry

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

    def apply(self, acc, source=None, arith=None):
        """Output words of the binary32 accumulator values ``acc`` and the source words
        ``source`` (in the output format; read only when ``beta != 0``), by ``arith`` (a
        :class:`mmasim.composition.mainloop.Arith`: :data:`~mmasim.composition.mainloop.HOST`
        (default) on float64 arrays, or the CUDA device's on device arrays): the same
        operations in the same order wherever the arrays lie."""
        arith = _host() if arith is None else arith
        if self.reads_source:
            x = arith.mul(self.beta, arith.values(self.out, source))
            d = arith.fma(self.alpha, acc, x)
        else:
            d = arith.mul(self.alpha, acc)
        return convert(d, self.out, self.saturate, arith)


def output(epi, acc, source, arith=None):
    """D of a composed GEMM from its binary32 accumulator ``acc``, by ``arith`` (as
    :meth:`Epilogue.apply`): ``(words, their format)``, the accumulator's f32 words without an
    epilogue (``epi`` ``None``), else ``epi``'s output from ``acc`` and the source words."""
    arith = _host() if arith is None else arith
    if epi is None:
        return arith.words(acc), binary32.F32
    return epi.apply(acc, source, arith), epi.out


def _host():
    from mmasim.composition.mainloop import HOST

    return HOST


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


def of_gemm(alpha, beta, out_format, saturate, C, tensor_scales=()):
    """The :class:`Epilogue` of a call of :func:`mmasim.gemm` (``None``: none), wherever its
    operands lie: :func:`build` of the options; ``tensor_scales`` (of quantized operands,
    binary32) multiply alpha (``alpha * (ts_a * ts_b)``) and imply an epilogue.  With one, C
    (``None`` or not: ``C`` only says whether it was given) is its source: ``beta`` must be
    given with C, and a ``beta`` that reads it needs C (:class:`GemmOptionError`)."""
    formats = get_registry().formats
    epi = build(formats, alpha, beta, out_format, saturate)
    if tensor_scales and epi is None:
        epi = build(formats, alpha=1.0)
    if epi is not None and tensor_scales:
        ts = tensor_scales
        t = ts[0] if len(ts) == 1 else float(binary32.mul(ts[0], ts[1]))
        epi = Epilogue(alpha=float(binary32.mul(epi.alpha, t)), beta=epi.beta, out=epi.out, saturate=epi.saturate)
    if epi is not None:
        if C is not None and beta is None:
            raise GemmOptionError("gemm: with an epilogue C is its source, beta * C: pass beta (beta=0 leaves C "
                                  "unread), or C=None")
        if epi.reads_source and C is None:
            raise GemmOptionError(f"gemm: beta = {epi.beta} reads the source C, but C is None")
    return epi


def convert(d, fmt: Format, saturate: bool, arith=None):
    """binary32 values ``d`` as words of ``fmt``, by ``arith`` (as :meth:`Epilogue.apply`):
    their binary32 words (``arith.words``, NaN ``0x7FFFFFFF``), the output for f32; else those
    words' values cast into ``fmt`` (``arith.cast``: :func:`cast` on the host, the compiled
    cast on the device): one RNE rounding by the project's encoder
    (:func:`mmasim.arith.encode.encode`, the rounding of :func:`mmasim.arith.encode.round_code`);
    ``saturate``: a value or an infinity past the largest finite value gives that value with
    its sign (``cvt.rn.satfinite``), else an infinity; NaN is the format's quiet NaN.
    ``tests/test_gemm_epilogue.py`` checks it against ``ml_dtypes``' conversions."""
    arith = _host() if arith is None else arith
    words32 = arith.words(d)
    if fmt.key == "f32":
        return words32
    return arith.cast(arith.values(binary32.F32, words32), fmt, saturate)


__all__ = ["Epilogue", "build", "of_gemm", "output", "convert", "OUTPUT_FORMATS"]
