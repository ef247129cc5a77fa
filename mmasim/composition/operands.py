"""The operands of a composed :func:`mmasim.gemm` (promotion, split-K, an epilogue) as
container words: arrays of words or values, and quantized tensors.

Gives :func:`operand` (one matrix operand as an :class:`Operand`) and :func:`promotion_blocks`.
A quantized tensor is any object with the attributes of :func:`mmasim.quantize`'s result
(:func:`is_quantized`; the fields: docs/quantize.md); it stands for ``decoded words x scales x
tensor_scale``.  Refuses elements or scales of a format the instruction does not read and
promotion scales that are not binary32 (:class:`~mmasim.DtypeError`), scales the instruction
does not take or that do not tile the matrix (:class:`~mmasim.ScaleError`) and an unknown
``scale_use`` (:class:`~mmasim.GemmOptionError`).
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.errors import DtypeError, GemmOptionError, ScaleError
from mmasim.operands.words import VALUES, as_array, to_words, typed_dtype

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_CONTAINER = {1: np.uint8, 4: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


def is_quantized(x) -> bool:
    """Whether ``x`` is a quantized tensor (the attributes of :mod:`mmasim.quantize`'s result)."""
    return all(hasattr(x, name) for name in ("words", "scales", "format", "scale_use"))


@attrs.frozen
class Operand:
    """One matrix operand as words, with what a quantized tensor brings."""

    words: np.ndarray
    values: bool = False                 # given as values (float / ml_dtypes arrays)
    scales: np.ndarray | None = None     # instruction scale words
    promotion: np.ndarray | None = None  # promotion scales (binary32 values as float64)
    tensor_scale: float | None = None


def _codes(codes, fmt, what: str) -> np.ndarray:
    """Element codes (bits as ml_dtypes holds them) as container words of ``fmt``."""
    td = typed_dtype(fmt)
    if td is None:
        raise DtypeError(f"gemm: {what}: reading {fmt.name} codes needs ml_dtypes (pip install ml_dtypes)")
    arr = np.asarray(codes)
    if arr.dtype.kind not in "iu":
        raise DtypeError(f"gemm: {what}: a quantized tensor's words must be integer codes, not {arr.dtype}")
    if arr.size and (arr.min() < 0 or int(arr.max()) >= 1 << (8 * td.itemsize)):
        raise DtypeError(f"gemm: {what}: codes must fit {8 * td.itemsize} bits")
    words = to_words(arr.astype(_UINT[td.itemsize]).view(td), fmt, what)[0]
    return words.astype(_CONTAINER[fmt.container_bits])


def _same(name, fmt, what: str, role: str) -> None:
    if str(name) not in (fmt.name, fmt.key):
        raise DtypeError(f"gemm: {what} is quantized to {name!r}, but the instruction reads its {role} as {fmt.name}")


def operand(model, x, what: str, fmt) -> Operand:
    """``x`` (words, values or a quantized tensor) as an :class:`Operand` of format ``fmt``.

    A quantized tensor's ``words`` are element codes (the bits of each element as ``ml_dtypes``
    holds it, e.g. ``x.astype(float8_e4m3fn).view(uint8)``), placed into the instruction's
    container (``Format.typed_shift``); its ``scale_use`` says where its ``scales`` go:
    ``"instruction"`` (scale words the block-scaled instruction reads: A's ``(M, K / block)``,
    B's ``(K / block, N)``), ``"promotion"`` (binary32 scales applied at promotion,
    :func:`promotion_blocks`) or ``None``."""
    if not is_quantized(x):
        arr, mode = as_array(x, what)
        words = to_words(arr, fmt, what)[0].astype(_CONTAINER[fmt.container_bits])
        return Operand(words=words, values=mode == VALUES)
    _same(x.format, fmt, what, "elements")
    words = _codes(x.words, fmt, what)
    ts = getattr(x, "tensor_scale", None)
    ts = None if ts is None else float(np.float32(ts))
    use = x.scale_use
    if use is None or x.scales is None:
        return Operand(words=words, tensor_scale=ts)
    if use == "instruction":
        if model.scale_format is None:
            raise ScaleError(f"gemm: {what} carries block scales for a block-scaled instruction, but "
                             f"{model.instruction} is not block-scaled")
        _same(x.scale_format, model.scale_format, what, "scales")
        return Operand(words=words, scales=_codes(x.scales, model.scale_format, f"{what}.scales"), tensor_scale=ts)
    if use == "promotion":
        s = np.asarray(x.scales)
        if s.dtype != np.float32:
            raise DtypeError(f"gemm: {what}: promotion scales must be float32 (binary32) values, not {s.dtype}")
        return Operand(words=words, promotion=s.astype(np.float64), tensor_scale=ts)
    raise GemmOptionError(f"gemm: {what}.scale_use must be 'instruction', 'promotion' or None, not {use!r}")


def promotion_blocks(sa, sb, M: int, K: int, N: int):
    """``(bk, bn)`` of promotion scales ``sa`` ``(M, K / bk)`` and ``sb`` ``(K / bk, N / bn)``."""
    if sa is None and sb is None:
        return None, None
    if sa is None or sb is None:
        raise ScaleError("gemm: promotion scales come in pairs: A's (M, K / bk) and B's (K / bk, N / bn)")
    if sa.ndim != 2 or sb.ndim != 2 or sa.shape[0] != M or not sa.shape[1] or K % sa.shape[1] \
            or sb.shape[0] != sa.shape[1] or not sb.shape[1] or N % sb.shape[1]:
        raise ScaleError(f"gemm: promotion scales must be A's (M, K / bk) = ({M}, K / bk) and B's "
                         f"(K / bk, N / bn), with bk dividing K = {K} and bn dividing N = {N}; "
                         f"got {sa.shape} and {sb.shape}")
    return K // sa.shape[1], N // sb.shape[1]


__all__ = ["Operand", "operand", "is_quantized", "promotion_blocks"]
