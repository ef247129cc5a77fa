"""The operands of :func:`mmasim.gemm` as container words: arrays of words or values, and
quantized tensors, read by one set of rules for the plain chain and every composition, and
checked once per GEMM, not once per K tile.

Gives :func:`check` (every operand of one GEMM checked once: a :class:`Checked`, whose words
each K tile hands to ``Model.tile`` unchecked), :func:`check_shapes` (the shapes of every path,
dask's included), :func:`words` (a plain operand's words), :func:`operand` (one matrix operand
as a :class:`GemmOperand`), :func:`result` (D as the call returns it) and :func:`promotion_blocks`.  A quantized tensor
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

from mmasim.errors import DtypeError, GemmOptionError, OperandError, ScaleError, ShapeError, SparseMetadataError
from mmasim.errors import UnsupportedDatapath
from mmasim.execution.model import matrix_shapes
from mmasim.operands.words import as_array, checked_words, from_words, is_value_dtype, one_mode, to_words
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


@attrs.frozen(eq=False)
class Checked:
    """Every operand of one GEMM, checked once (:func:`check`): A and B as :class:`GemmOperand`
    (their words, and what a quantized tensor brings), the instruction scales' words, the
    sparse metadata words (every K tile's selectors checked), ``M``, ``K``, ``N``, the order
    of the K tiles and whether the plain operands were values.  C is checked by the path
    that reads it (in C's format for the chain, in the output format as an epilogue's source)."""

    a: GemmOperand
    b: GemmOperand
    scale_a: np.ndarray | None
    scale_b: np.ndarray | None
    sparse_metadata: np.ndarray | None
    M: int
    K: int
    N: int
    order: list
    values: bool
    quantized: bool
    c_read: tuple | None = None     # as_array of a plain C, for the path that checks C

    def returns_words(self, words) -> bool:
        """Whether the GEMM returns D as words: ``words`` (``True`` / ``False``, checked by
        :func:`words_option`) if given, else as the operands were held: words for container
        words, values for values and for quantized tensors (their user held floats)."""
        return bool(words) if words is not None else not (self.values or self.quantized)


def check(model, A, B, C, scale_a=None, scale_b=None, sparse_metadata=None, k_order="forward") -> Checked:
    """The one check of a GEMM's operands, whatever its K tiles: words or values, never both
    (the scales of a block-scaled instruction included; :meth:`Model.dot`'s rule); A and B in
    the instruction's containers (:func:`operand`); the instruction scales; the shapes
    (:func:`check_shapes`); the sparse metadata of every K tile, in the order the tiles run
    (an error names the row and the K tile)."""
    dp = model.datapath
    given = {"A": A, "B": B, "C": C}
    if dp.scale and scale_a is not None and scale_b is not None:
        given.update(scale_a=scale_a, scale_b=scale_b)
    arrays = {name: as_array(x, name) for name, x in given.items() if x is not None and not is_quantized(x)}
    values = one_mode(arrays, f"gemm with {model.instruction}")
    qa = operand(model, A, "A", model.a_format, arrays.get("A"))
    qb = operand(model, B, "B", model.b_format, arrays.get("B"))
    if dp.scale:
        scale_a = _instruction_scales(model, qa, scale_a, "scale_a", "A", arrays.get("scale_a"))
        scale_b = _instruction_scales(model, qb, scale_b, "scale_b", "B", arrays.get("scale_b"))
    elif qa.scales is not None or qb.scales is not None:
        raise ScaleError(f"{model.instruction} is not block-scaled, but a quantized operand carries instruction scales")
    if sparse_metadata is not None and dp.sparse:
        sparse_metadata = as_array(sparse_metadata, "sparse_metadata")[0]
    M, K, N, order = check_shapes(model, qa.words.shape, qb.words.shape, None if C is None else np.shape(C), k_order,
                                  *(None if x is None else np.shape(x) for x in (scale_a, scale_b, sparse_metadata)))
    if dp.sparse:       # checked whole, in the order the tiles run: an error names row and K tile
        tiles = np.swapaxes(sparse_metadata.reshape(M, len(order), -1)[:, list(order)], 0, 1)
        model.check_metadata(tiles, lambda at: f"row {at[1]}, K tile {order[at[0]]} of sparse_metadata")
    return Checked(qa, qb, scale_a, scale_b, sparse_metadata, M, K, N, order, values,
                   is_quantized(A) or is_quantized(B), arrays.get("C"))


def tile_order(k_order, tiles: int) -> list:
    """The K tiles in the order ``k_order`` runs them: ``"forward"``, ``"reverse"`` or a
    permutation of ``0 .. tiles - 1``."""
    if isinstance(k_order, str):
        if k_order == "forward":
            return list(range(tiles))
        if k_order == "reverse":
            return list(range(tiles))[::-1]
        raise OperandError(f"gemm: k_order must be 'forward', 'reverse' or a permutation of the K tiles, not {k_order!r}")
    try:
        order = list(k_order)
    except TypeError:
        raise OperandError(
            f"gemm: k_order must be 'forward', 'reverse' or a permutation of the K-tile indices 0..{tiles - 1}, "
            f"not {k_order!r}"
        ) from None
    for t in order:
        if isinstance(t, (bool, np.bool_)) or not isinstance(t, (int, np.integer)):
            raise OperandError(f"gemm: k_order entries are K-tile indices (integers); got {t!r} in {order!r}")
    order = [int(t) for t in order]
    if sorted(order) != list(range(tiles)):
        raise OperandError(f"gemm: k_order {order} is not a permutation of the {tiles} K tiles 0..{tiles - 1}")
    return order


def matrices(a_shape, b_shape) -> None:
    """Refuse an A that is not ``(M, K)`` or a B that is not ``(K, N)`` (:class:`ShapeError`)."""
    if len(a_shape) != 2 or len(b_shape) != 2:
        raise ShapeError(f"gemm: A must be (M, K) and B (K, N); got {tuple(a_shape)} and {tuple(b_shape)}")


def check_shapes(model, a_shape, b_shape, c_shape, k_order="forward", scale_a=None, scale_b=None,
                 sparse_metadata=None):
    """Check a GEMM's shapes (``c_shape``: C's, ``None`` where C is not given; ``scale_a``,
    ``scale_b``, ``sparse_metadata``: their shapes, or ``None`` where not given) against
    ``model``: every path of :func:`mmasim.gemm` (the plain chain, each composition, dask)
    checks its operands' shapes here.  Returns ``(M, K, N, K-tile order)``."""
    dp = model.datapath
    name = model.instruction
    if model.c_format.key != model.d_format.key:
        raise UnsupportedDatapath(
            f"gemm chains D into C, but {name} reads C as {model.c_format.name} and writes D as "
            f"{model.d_format.name}; use the variant whose C and D formats agree"
        )
    matrices(a_shape, b_shape)
    if c_shape is None:         # no C: D is (M, N)
        c_shape = (a_shape[0], b_shape[1])
    M, K, N = matrix_shapes(a_shape, b_shape, c_shape, "gemm")
    model.check_tiles(a_shape, b_shape, "gemm", grid=True)
    k = dp.k
    if K == 0 or K % k:
        raise ShapeError(f"gemm: A is {tuple(a_shape)}: K = {K} is not a positive multiple of the instruction's "
                         f"K = {k} ({name})")
    tiles = K // k
    order = tile_order(k_order, tiles)
    if dp.scale:
        if scale_a is None or scale_b is None:
            raise ScaleError(f"gemm with {name} needs scale_a (M, K/{dp.block}) and scale_b (K/{dp.block}, N)")
        nb = K // dp.block
        if tuple(scale_a) != (M, nb) or tuple(scale_b) != (nb, N):
            raise ScaleError(f"gemm: scale_a must be ({M}, {nb}) and scale_b ({nb}, {N}); "
                             f"got {tuple(scale_a)} and {tuple(scale_b)}")
    elif scale_a is not None or scale_b is not None:
        raise ScaleError(f"{name} is not block-scaled: scale_a/scale_b must be None")
    nwords = model.sparse_rule.words(k) if dp.sparse else 0
    if dp.sparse:
        if sparse_metadata is None:
            raise SparseMetadataError(
                f"gemm with the sparse {name} needs sparse_metadata (M, K/{k} * {nwords}) = ({M}, {tiles * nwords}): "
                f"{nwords} metadata word(s) per row for each K tile")
        if tuple(sparse_metadata) != (M, tiles * nwords):
            raise SparseMetadataError(
                f"gemm: sparse_metadata must be (M, K/{k} * {nwords}) = ({M}, {tiles * nwords}); "
                f"got {tuple(sparse_metadata)}")
    elif sparse_metadata is not None:
        raise SparseMetadataError(f"{name} is dense: sparse_metadata must be None")
    return M, K, N, order


def zero_c(model, A, B):
    """A zero C for the plain chain: words, or values when A is given as values."""
    matrices(np.shape(A), np.shape(B))
    shape = (np.shape(A)[0], np.shape(B)[1])
    dtype = getattr(A, "dtype", None)
    if dtype is None:
        dtype = as_array(A, "A")[0].dtype
    if is_value_dtype(np.dtype(dtype)):
        return np.zeros(shape, dtype=from_words(np.zeros(1, dtype=np.uint64), model.c_format).dtype)
    return np.zeros(shape, dtype=model.encoding.dtype)


def words(x, fmt, what: str, read=None) -> np.ndarray:
    """Container words of a plain operand ``x`` (words or values) in format ``fmt``, checked as
    :meth:`Model.dot` checks them (``read``: ``as_array(x, what)`` where the caller has it)."""
    if is_quantized(x):
        raise DtypeError(f"gemm: {what} is a quantized tensor; {what} takes container words or values")
    return checked_words(*(as_array(x, what) if read is None else read), fmt, what)


def result(d, fmt, as_words: bool):
    """D (``fmt``'s words, or its values) as words or as values of ``fmt`` (integer D: words)."""
    d = np.asarray(d)
    if d.dtype.kind not in "iu":
        d = to_words(d, fmt, "D")[0].astype(_CONTAINER[fmt.container_bits])
    return d if as_words or fmt.integer else from_words(d, fmt)


_CONTAINER = {1: np.uint8, 4: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}


@attrs.frozen
class GemmOperand:
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


def operand(model, x, what: str, fmt, read=None) -> GemmOperand:
    """``x`` (words, values or a quantized tensor) as a :class:`GemmOperand` of format ``fmt``.

    A quantized tensor's ``words`` are container words of its ``container`` (default: the
    format key its ``format`` names), placed into ``fmt``'s container by value (``e2m1`` in
    bits 5:2 of a byte becomes the 4-bit code ``kind::mxf4`` reads, and back); its
    ``scale_use`` says where its ``scales`` go: ``"instruction"`` (words of its
    ``scale_format`` the block-scaled instruction reads: A's ``(M, K / block)``, B's
    ``(K / block, N)``), ``"promotion"`` (binary32 scales applied at promotion,
    :func:`promotion_blocks`) or ``None``.  ``read``: ``as_array(x, what)`` of a plain ``x``
    where the caller has it."""
    if not is_quantized(x):
        return GemmOperand(words=words(x, fmt, what, read).astype(_CONTAINER[fmt.container_bits], copy=False))
    elements = _placed(x.words, getattr(x, "container", None) or x.format, fmt, what, "elements")
    ts = getattr(x, "tensor_scale", None)
    ts = None if ts is None else float(np.float32(ts))
    use = x.scale_use
    if use is None or x.scales is None:
        return GemmOperand(words=elements, tensor_scale=ts)
    if use == "instruction":
        if model.scale_format is None:
            raise ScaleError(f"gemm: {what} carries block scales for a block-scaled instruction, but "
                             f"{model.instruction} is not block-scaled")
        scales = _placed(x.scales, x.scale_format, model.scale_format, f"{what}.scales", "scales")
        return GemmOperand(words=elements, scales=scales, tensor_scale=ts)
    if use == "promotion":
        s = np.asarray(x.scales)
        if s.dtype != np.float32:
            raise DtypeError(f"gemm: {what}: promotion scales must be float32 (binary32) values, not {s.dtype}")
        return GemmOperand(words=elements, promotion=s.astype(np.float64), tensor_scale=ts)
    raise GemmOptionError(f"gemm: {what}.scale_use must be 'instruction', 'promotion' or None, not {use!r}")


def _instruction_scales(model, q, given, name: str, what: str, read=None):
    if q.scales is not None:
        if given is not None:
            raise ScaleError(f"gemm: {what} is a quantized tensor that carries its scales; {name} must be None")
        return q.scales
    if given is None:
        return None
    return operand(model, given, name, model.scale_format, read).words


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


def gemm_model(model, arch, instruction, qualifiers):
    """The model of a :func:`mmasim.gemm` call: ``model=``, or ``arch`` / ``instruction`` (with qualifiers) looked up."""
    from mmasim.execution.model import Model

    if model is None:
        if arch is None or instruction is None:
            raise OperandError("gemm needs arch= and instruction= (or model=)")
        return Model.lookup(arch, instruction, **qualifiers)
    if qualifiers or arch is not None or instruction is not None:
        raise OperandError("gemm: pass either model= or arch=/instruction= (with qualifiers), not both")
    return model


def requested_options(A, B, promote_every, split_k, split_reduce, psa, psb, alpha, beta, out_format, saturate) -> list:
    """The options of a call beyond the plain chain, named as its caller wrote them (empty: the
    plain chain)."""
    shown = [f"{name}={value!r}" for name, value in (("promote_every", promote_every), ("split_k", split_k),
                                                     ("out_format", out_format), ("saturate", saturate))
             if value is not None]
    if not (isinstance(split_reduce, str) and split_reduce == "sequential"):
        shown.append(f"split_reduce={split_reduce!r}")
    shown += [name for name, value in (("promotion_scale_a", psa), ("promotion_scale_b", psb), ("alpha", alpha),
                                       ("beta", beta)) if value is not None]
    return shown + [f"a quantized {what}" for what, x in (("A", A), ("B", B)) if is_quantized(x)]


__all__ = ["gemm_model", "requested_options", "GemmOperand", "Checked", "check", "check_shapes", "tile_order", "matrices", "zero_c", "operand",
           "is_quantized", "promotion_blocks", "words", "result", "words_option"]
