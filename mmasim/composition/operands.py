"""The operands of :func:`mmasim.gemm` as container words: arrays of words or values, and
quantized tensors, read by one set of rules for the plain chain and every composition.

Gives :func:`returns_words` (the call's mode: words or values in, and so out), :func:`words`
(a plain operand's words), :func:`operand` (one matrix operand as an :class:`Operand`),
:func:`result` (D as the call returns it) and :func:`promotion_blocks`.  A quantized tensor
is any object with the attributes of :func:`mmasim.quantize`'s result (:func:`is_quantized`;
the fields: docs/quantize.md); it stands for ``decoded words x scales x tensor_scale``.  Its
words are container words of its ``container`` (a registry format key; default: the format
registered under its ``format``), placed into the container the instruction reads by value
(:func:`mmasim.quantization.casts.recontainer`), never reinterpreted.  Refuses plain operands
that mix words and values, scales included (:class:`~mmasim.DtypeError`, the rule of
:meth:`~mmasim.execution.model.Model.dot`), elements or scales of a format the instruction
does not read, words a container does not hold and promotion scales that are not binary32
(:class:`~mmasim.DtypeError`), scales the instruction does not take or that do not tile the
matrix (:class:`~mmasim.ScaleError`) and an unknown ``scale_use``
(:class:`~mmasim.GemmOptionError`).
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.errors import DtypeError, GemmOptionError, ScaleError
from mmasim.operands.words import checked_words, one_mode
from mmasim.operands.words import as_array, from_words, to_words
from mmasim.quantization.casts import recontainer
from mmasim.registry.build import get_registry


def is_quantized(x) -> bool:
    """Whether ``x`` is a quantized tensor (the attributes of :mod:`mmasim.quantize`'s result)."""
    return all(hasattr(x, name) for name in ("words", "scales", "format", "scale_use"))


def words_option(words):
    """gemm's ``words=`` checked: ``None``, ``True`` or ``False``."""
    if words is not None and not isinstance(words, (bool, np.bool_)):
        raise GemmOptionError(f"gemm: words must be None (as the operands are held), True or False, not {words!r}")
    return None if words is None else bool(words)


def returns_words(model, words, A, B, C, scale_a=None, scale_b=None) -> bool:
    """Whether a gemm call returns D as words: ``words`` (``True`` / ``False``, checked by
    :func:`words_option`) if given, else as the operands were held: words for container words,
    values for values and for quantized tensors (their user held floats).  Plain operands that
    mix words and values (the scales of a block-scaled instruction included) are refused, by
    :meth:`Model.dot`'s rule."""
    given = {"A": A, "B": B, "C": C}
    if model.datapath.scale and scale_a is not None and scale_b is not None:
        given.update(scale_a=scale_a, scale_b=scale_b)
    arrays = {name: as_array(x, name) for name, x in given.items() if x is not None and not is_quantized(x)}
    values = one_mode(arrays, f"gemm with {model.instruction}")
    if words is not None:
        return bool(words)
    return not (values or is_quantized(A) or is_quantized(B))


def words(x, fmt, what: str) -> np.ndarray:
    """Container words of a plain operand ``x`` (words or values) in format ``fmt``, checked as
    :meth:`Model.dot` checks them."""
    if is_quantized(x):
        raise DtypeError(f"gemm: {what} is a quantized tensor; {what} takes container words or values")
    return checked_words(*as_array(x, what), fmt, what)


def result(d, fmt, as_words: bool):
    """D (``fmt``'s words, or its values) as words or as values of ``fmt`` (integer D: words)."""
    d = np.asarray(d)
    if d.dtype.kind not in "iu":
        d = to_words(d, fmt, "D")[0].astype(_CONTAINER[fmt.container_bits])
    return d if as_words or fmt.integer else from_words(d, fmt)


_CONTAINER = {1: np.uint8, 4: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


@attrs.frozen
class Operand:
    """One matrix operand as words, with what a quantized tensor brings."""

    words: np.ndarray
    scales: np.ndarray | None = None     # instruction scale words
    promotion: np.ndarray | None = None  # promotion scales (binary32 values as float64)
    tensor_scale: float | None = None


def _container(key, what: str):
    formats = get_registry().formats
    if not isinstance(key, str) or key not in formats:
        raise DtypeError(f"gemm: {what}: container {key!r} is not a registered format; containers: "
                         f"{', '.join(sorted(formats))}")
    return formats[key]


def _placed(words_, key, fmt, what: str, role: str) -> np.ndarray:
    """A quantized tensor's words of container ``key`` as words of ``fmt``, the container the
    instruction reads (the same format's words placed by value)."""
    src = _container(key, what)
    if src.name != fmt.name:
        raise DtypeError(f"gemm: {what} is quantized to {src.name} ({src.key} words), but the instruction reads "
                         f"its {role} as {fmt.name}")
    arr = np.asarray(words_)
    if arr.dtype.kind not in "iu":
        raise DtypeError(f"gemm: {what}: a quantized tensor's words must be integer container words, not {arr.dtype}")
    checked = to_words(arr, src, what)[0]
    return recontainer(checked, src, fmt, what).astype(_CONTAINER[fmt.container_bits])


def operand(model, x, what: str, fmt) -> Operand:
    """``x`` (words, values or a quantized tensor) as an :class:`Operand` of format ``fmt``.

    A quantized tensor's ``words`` are container words of its ``container`` (default: the
    format key its ``format`` names), placed into ``fmt``'s container by value (``e2m1`` in
    bits 5:2 of a byte becomes the 4-bit code ``kind::mxf4`` reads, and back); its
    ``scale_use`` says where its ``scales`` go: ``"instruction"`` (words of its
    ``scale_format`` the block-scaled instruction reads: A's ``(M, K / block)``, B's
    ``(K / block, N)``), ``"promotion"`` (binary32 scales applied at promotion,
    :func:`promotion_blocks`) or ``None``."""
    if not is_quantized(x):
        return Operand(words=words(x, fmt, what).astype(_CONTAINER[fmt.container_bits], copy=False))
    elements = _placed(x.words, getattr(x, "container", None) or x.format, fmt, what, "elements")
    ts = getattr(x, "tensor_scale", None)
    ts = None if ts is None else float(np.float32(ts))
    use = x.scale_use
    if use is None or x.scales is None:
        return Operand(words=elements, tensor_scale=ts)
    if use == "instruction":
        if model.scale_format is None:
            raise ScaleError(f"gemm: {what} carries block scales for a block-scaled instruction, but "
                             f"{model.instruction} is not block-scaled")
        scales = _placed(x.scales, x.scale_format, model.scale_format, f"{what}.scales", "scales")
        return Operand(words=elements, scales=scales, tensor_scale=ts)
    if use == "promotion":
        s = np.asarray(x.scales)
        if s.dtype != np.float32:
            raise DtypeError(f"gemm: {what}: promotion scales must be float32 (binary32) values, not {s.dtype}")
        return Operand(words=elements, promotion=s.astype(np.float64), tensor_scale=ts)
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


__all__ = ["Operand", "operand", "is_quantized", "promotion_blocks", "returns_words", "words", "result",
           "words_option"]
