"""Binding a model's operands to their layouts: ``layout(model, operand)`` finds the
registered :class:`FragmentRule` for the model's instruction (the most specific one: an
architecture's own beats a generic one) and binds it to the instruction's shape and element
size; ``fragments`` / ``unfragment`` pack and unpack a whole operand; ``compress`` /
``expand`` / ``metadata_words`` handle a sparse instruction's compressed A and metadata.
:mod:`mmasim.placement.warp` and :mod:`mmasim.placement.tcgen05_warp` run instructions on them.
"""

from __future__ import annotations

import numpy as np

from mmasim.arith import sparse as _sparse
from mmasim.errors import (
    OperandError,
    ScaleError,
    ShapeError,
    SparseMetadataError,
    TableError,
    UnknownOption,
    UnsupportedDatapath,
)
from mmasim.operands.tensors import plain_array
from mmasim.placement.expr import SELECTORS
from mmasim.placement.fragment import OPERANDS, FragmentRule, operand_bits, rule_key
from mmasim.placement.tcgen05_scales import replicate, unpack_scale

_MAJOR = ("row", "col")

def _not_in_registers(model, operand) -> str | None:
    """Why ``operand`` has no register / TMEM fragment layout (its family reads it from shared
    memory through a descriptor: ``Family.storage``), or None."""
    spaces = model.family.storage_of(operand)
    if spaces[0] != "smem":
        return None
    how = " (or TMEM) through a descriptor" if "tmem" in spaces else " through a matrix descriptor"
    return (f"{operand.upper()} of {model.datapath.op} is read from shared memory{how} "
            "(see mmasim.placement.SmemLayout)")


def _shape(model, operand):
    if model.shape is not None:
        return model.shape
    ms, ns = model.legal_m, model.legal_n
    if len(ms) == 1 and len(ns) == 1:
        return ms[0], ns[0]
    if operand == "a" and len(ms) == 1:     # A (M x K) does not depend on N
        return ms[0], ns[0] if ns else 8
    raise ShapeError(f"{model.instruction}: the layout depends on the shape; name it in the instruction "
                     f"(e.g. m{ms[0] if ms else 64}n{ns[0] if ns else 8}k{model.k})")


def _matrix_shape(model, operand, M, N):
    """The operand matrix a layout places (A of a sparse instruction: compressed)."""
    dp = model.datapath
    K = dp.k
    if operand == "a":
        return (M, dp.stored_k if dp.sparse else K)
    if operand == "b":
        return (K, N)
    if operand == "scale_a":
        return (M, dp.blocks)
    if operand == "scale_b":
        return (dp.blocks, N)
    if operand == "sparse_metadata":
        return (M, model.sparse_rule.chunks(K))
    return (M, N)


def _majors(model, alayout, blayout) -> tuple:
    """The ``(.alayout, .blayout)`` of a layout: those given, else the instruction string's, else
    ``.row.col``; a pair the instruction does not take, or one that contradicts its string, is an
    :class:`OperandError`."""
    for name, v in (("alayout", alayout), ("blayout", blayout)):
        if v is not None and v not in _MAJOR:
            raise OperandError(f"{name} must be 'row' or 'col'; got {v!r}")
    named = model.resolution.layout
    pair = named or _MAJOR
    if alayout is None and blayout is None:
        return pair
    chosen = (alayout or pair[0], blayout or pair[1])
    given = ", ".join(f"{k}={v!r}" for k, v in (("alayout", alayout), ("blayout", blayout)) if v is not None)
    syntax, formats = model.family.syntax, model.registry.formats
    if named and chosen != named:
        raise OperandError(f"{model.instruction}: {given} contradicts the instruction string's "
                           f".{named[0]}.{named[1]}")
    if chosen not in syntax.layouts_of(model.datapath, formats):
        raise OperandError(f"{model.instruction}: {given}: {syntax.layout_rule(model.datapath, formats)}")
    return chosen


def layout(model, operand: str, alayout: str | None = None, blayout: str | None = None, byte_id: int = 0,
           thread_id: int = 0, selector: int = 0, lane_alignment: int = 0, **unknown):
    """The :class:`~mmasim.placement.fragment.Fragment` of ``operand`` of ``model``.

    ``alayout`` / ``blayout``: ``"row"`` / ``"col"`` of A and B (mma.sync; PTX allows a pair
    other than ``.row.col`` only for the f16 m8n8k4), default the instruction string's, else
    ``.row.col``.  ``byte_id`` / ``thread_id``: the ``{byte-id, thread-id}`` selector of ``scale_a`` /
    ``scale_b`` (block-scaled ``mma.sync``); ``selector``: the sparsity selector of
    ``sparse_metadata`` (``mma.sp``); ``lane_alignment``: 0 or 16, where the half-data-path
    tcgen05 layouts C and F start within each 32-lane sub-partition (PTX §9.7.16.10.5).  Each
    defaults to 0 and must be a value the ISA allows.  Any other keyword is an
    :class:`~mmasim.errors.UnknownOption`."""
    _options(unknown)
    if operand not in OPERANDS:
        raise OperandError(f"operand must be one of {', '.join(OPERANDS)}; got {operand!r}")
    alayout, blayout = _majors(model, alayout, blayout)
    selectors = {"byte_id": byte_id, "thread_id": thread_id, "selector": selector, "lane_alignment": lane_alignment}
    for name, v in selectors.items():
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
            raise OperandError(f"{name} must be a non-negative integer; got {v!r}")
    dp = model.datapath
    why = _not_in_registers(model, operand)
    if why:
        raise UnsupportedDatapath(f"{model.instruction}: {why}")
    if operand in ("scale_a", "scale_b") and not dp.scale:
        raise UnsupportedDatapath(f"{model.instruction} is not block-scaled: it has no {operand} operand")
    if operand == "sparse_metadata" and not dp.sparse:
        raise UnsupportedDatapath(f"{model.instruction} is dense: it has no sparse_metadata operand")
    M, N = _shape(model, operand)
    fname, bits = operand_bits(dp, model.family, model.registry.formats, operand)
    key = rule_key(dp, model.registry.formats, operand, M, N, alayout, blayout, family=model.family)
    rules = [r for r in model.registry.layouts.values() if isinstance(r, FragmentRule) and r.matches(**key)]
    if not rules:
        raise UnsupportedDatapath(
            f"{model.arch}: {model.instruction}: no register layout of operand {operand.upper()} "
            f"({fname}, {bits}-bit) is registered for m{M}n{N}k{dp.k}"
            + (" (sparse)" if dp.sparse else "")
            + ("" if (alayout, blayout) == ("row", "col") else f" with .{alayout}.{blayout}"))

    def rank(r):
        return (bool(r.arch), bool(r.types), r.kind is not None, r.qualifiers is not None, r.m is not None,
                r.n is not None, r.k is not None, r.sparse is not None)

    best = max(rank(r) for r in rules)
    top = [r for r in rules if rank(r) == best]
    if len(top) > 1:
        raise TableError(f"{model.instruction}: operand {operand.upper()} matches several layouts equally: "
                         + ", ".join(r.name for r in top))
    rule = top[0]
    V = dp.blocks if dp.scale else 0
    why = rule.check_selectors(V, **selectors)
    if why:
        raise OperandError(f"{model.instruction}: operand {operand}: {why}")
    return rule.bind(operand, M, N, dp.k, bits, shape=_matrix_shape(model, operand, M, N), V=V,
                     **{k: v for k, v in selectors.items() if k in rule.selectors})


def _options(options, also=()):
    """Check the keyword options a layout takes (alayout, blayout and the selectors; ``also``:
    the caller's own keywords, for the message)."""
    bad = [k for k in options if k not in ("alayout", "blayout") + SELECTORS]
    if bad:
        raise UnknownOption(f"unknown keyword(s) {', '.join(map(repr, bad))} (known: "
                            + ", ".join(("alayout", "blayout") + SELECTORS + tuple(also)) + ")")
    return options


def metadata_words(nibbles) -> np.ndarray:
    """``uint32 (M, words)``: a matrix of 4-bit chunk selectors ``(M, chunks)`` as the matrix
    form's sparse metadata words (nibble ``j`` of row ``r`` at bits ``4 (j % 8)`` of word ``j // 8``)."""
    nib = plain_array(nibbles, "nibbles")
    if nib.ndim != 2 or nib.dtype.kind not in "iu" or (nib.size and (nib.min() < 0 or nib.max() > 15)):
        raise SparseMetadataError(f"metadata_words takes a 2-D integer matrix of 4-bit chunk selectors (0..15); "
                                  f"got {nib.dtype} {nib.shape}")
    nib = nib.astype(np.uint64)
    M, chunks = nib.shape
    words = -(-chunks // 8)
    pad = np.zeros((M, words * 8), dtype=np.uint64)
    pad[:, :chunks] = nib & np.uint64(0xF)
    shifts = (np.arange(8, dtype=np.uint64) * np.uint64(4))
    return (pad.reshape(M, words, 8) << shifts).sum(axis=-1).astype(np.uint32)


def _metadata_nibbles(model, X, chunks):
    md = plain_array(X, "sparse_metadata")
    _sparse.check_words(md, model.sparse_rule.words(model.datapath.k), matrix=True, where=f"{model.instruction}: ")
    return _sparse.nibbles(md, chunks)


def fragments(model, operand: str, X, **options) -> np.ndarray:
    """``uint32 (lanes, registers)``: the matrix ``X`` (container words or values in
    the operand's format) packed as the hardware holds it.  ``scale_a`` / ``scale_b``: the
    matrix form's scales (``M x V`` / ``V x N``); ``sparse_metadata``: the matrix form's
    metadata words ``(M, words)``; A of a sparse instruction: the compressed A
    (:func:`compress`)."""
    lay = layout(model, operand, **_options(options))
    if operand == "sparse_metadata":
        return lay.pack(_metadata_nibbles(model, X, lay.cols))
    words = model.operand_words("scale" if operand in ("scale_a", "scale_b") else operand, X)
    return replicate(lay, operand, lay.pack(words))


def unfragment(model, operand: str, registers, **options) -> np.ndarray:
    """The ``operand`` matrix (container words) held in ``registers`` ``(lanes, registers)``
    (``sparse_metadata``: the matrix form's metadata words ``(M, words)``)."""
    lay = layout(model, operand, **_options(options))
    out = unpack_scale(model, operand, lay, registers)
    return metadata_words(out) if operand == "sparse_metadata" else out


def compress(model, A, sparse_metadata) -> np.ndarray:
    """The compressed A ``(M, K/2)`` of a sparse instruction: the elements of the logical
    ``A`` ``(M, K)`` that the metadata words ``(M, words)`` select, each row's in K order
    (what ``fragments("a", ...)`` places)."""
    dp = model.datapath
    if not dp.sparse:
        raise UnsupportedDatapath(f"{model.instruction} is dense: there is no compressed A")
    words = model.operand_words("a", A)
    if words.ndim != 2 or words.shape[1] != dp.k:
        raise ShapeError(f"{model.instruction}: A must be (M, {dp.k}) (the logical K); got {words.shape}")
    md = plain_array(sparse_metadata, "sparse_metadata")
    _metadata_nibbles(model, md, model.sparse_rule.chunks(dp.k))
    if md.shape[0] != words.shape[0]:
        raise ShapeError(f"{model.instruction}: sparse_metadata has {md.shape[0]} rows, A {words.shape[0]}")
    return _sparse.select(model.sparse_rule, dp.k, md, words)[0]


def expand(model, compressed, sparse_metadata) -> np.ndarray:
    """The logical A ``(M, K)`` whose selected elements are ``compressed`` ``(M, K/2)``
    (the others 0): the inverse of :func:`compress` on the selected positions."""
    dp = model.datapath
    Ac = plain_array(compressed, "compressed")
    md = plain_array(sparse_metadata, "sparse_metadata")
    rule = model.sparse_rule
    nib = _metadata_nibbles(model, md, rule.chunks(dp.k))
    if Ac.ndim != 2 or Ac.shape[1] != dp.stored_k or md.shape[0] != Ac.shape[0]:
        raise ShapeError(f"{model.instruction}: compressed A must be (M, {dp.stored_k}) with M rows of metadata; "
                         f"got {Ac.shape} and {md.shape}")
    _sparse.select(rule, dp.k, md, np.zeros((Ac.shape[0], dp.k), dtype=np.uint8))   # illegal selectors raise
    pos = rule.positions(nib)
    full = np.zeros((Ac.shape[0], dp.k), dtype=Ac.dtype)
    np.put_along_axis(full, pos, Ac, axis=1)
    return full


def _held(model, operand, images="images") -> str:
    """What ``operand`` (scale factors, metadata) is held in, for error messages."""
    return f"Tensor Memory {images}" if model.family.storage_of(operand)[0] == "tmem" else "registers"


def scale_operands(model, scale_a, scale_b, byte_id_a=0, byte_id_b=0, thread_id_a=0, thread_id_b=0) -> dict:
    """``{"scale_a": SA, "scale_b": SB}``: a block-scaled instruction's scale matrices read from
    their registers or Tensor Memory images (``cta_group::2``: the pair's 256 lanes) with the
    ``{byte_id, thread_id}`` selectors (tcgen05: the scale factor A / B IDs), each TMEM partition
    checked against the one it repeats (:mod:`mmasim.placement.tcgen05_scales`); ``{}`` for an
    unscaled instruction."""
    if not model.datapath.scale:
        if scale_a is not None or scale_b is not None:
            raise ScaleError(f"{model.instruction} is not block-scaled: scale_a/scale_b must be None")
        return {}
    if scale_a is None or scale_b is None:
        raise ScaleError(f"{model.instruction} is block-scaled: pass the scale_a and scale_b {_held(model, 'scale_a')} "
                         "(fragments('scale_a', SA), fragments('scale_b', SB))")
    return {"scale_a": unpack_scale(model, "scale_a", layout(model, "scale_a", byte_id=byte_id_a,
                                                             thread_id=thread_id_a), scale_a),
            "scale_b": unpack_scale(model, "scale_b", layout(model, "scale_b", byte_id=byte_id_b,
                                                             thread_id=thread_id_b), scale_b)}


def sparse_operand(model, A, sparse_metadata, sparsity_selector=0, **options):
    """``(A, {"sparse_metadata": words})``: a sparse instruction's compressed ``A`` expanded to the
    logical K with the metadata read from its registers / Tensor Memory image with
    ``sparsity_selector``; ``(A, {})`` for a dense one (which takes neither)."""
    if not model.datapath.sparse:
        if sparse_metadata is not None:
            raise SparseMetadataError(f"{model.instruction} is dense: sparse_metadata must be None")
        if sparsity_selector:
            raise OperandError(f"{model.instruction} is dense: it takes no sparsity_selector")
        return A, {}
    if sparse_metadata is None:
        raise SparseMetadataError(f"{model.instruction} is sparse: pass the sparse_metadata {_held(model, 'sparse_metadata', 'image')} "
                                  "(the sparse metadata: fragments('sparse_metadata', words, selector=...))")
    md = metadata_words(layout(model, "sparse_metadata", selector=sparsity_selector, **options).unpack(sparse_metadata))
    return expand(model, A, md), {"sparse_metadata": md}
