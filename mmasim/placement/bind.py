"""Binding an instruction's operands to their layouts.  A :class:`Placement` is what the layouts
know of one instruction (its datapath, family, formats, the registered rules and the shape and
``.row`` / ``.col`` pair its string names: ``Model.placement``); ``layout(placement, operand)``
finds the registered :class:`FragmentRule` for it (the most specific one: an architecture's own
beats a generic one) and binds it to the instruction's shape and element size
(:func:`a_tmem_layout`: tcgen05's A in Tensor Memory); ``fragments`` / ``unfragment`` pack and
unpack a whole operand; ``compress`` / ``expand`` / ``metadata_words`` handle a sparse
instruction's compressed A and metadata; ``scale_operands`` / ``sparse_operand`` read the scale
factors and the metadata from their registers or Tensor Memory images.  Nothing here computes:
warp-level execution is ``Model.warp`` (:mod:`mmasim.execution.registers`, :mod:`mmasim.warp`).
"""

from __future__ import annotations

import attrs
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
from mmasim.operands.words import operand_words
from mmasim.placement.expr import SELECTORS
from mmasim.placement.fragment import OPERANDS, FragmentRule, operand_bits, rule_key
from mmasim.placement.tcgen05_scales import replicate, unpack_scale

_MAJOR = ("row", "col")


@attrs.frozen(eq=False)
class Placement:
    """One instruction as its layouts see it (what ``Model.placement`` gives): no computation.

    ``datapath``, ``family`` (its :class:`~mmasim.registry.family.Family`), ``formats`` (the
    registry's formats by key), ``rules`` (the registry's layouts by name), ``families`` (the
    registry's instruction families, named in messages), ``operand_formats`` (``"a"``, ``"b"``,
    ``"c"``, ``"d"`` and, when scaled, ``"scale"`` to its :class:`~mmasim.arith.formats.Format`),
    ``shape`` (the ``(M, N)`` the instruction string names, or ``None``), ``legal_m`` /
    ``legal_n`` (the M and N of one instruction; empty: any), ``named`` (the ``.row`` / ``.col``
    pair the string names, or ``None``) and ``sparse_rule``."""

    arch: str
    instruction: str
    datapath: object
    family: object
    formats: object
    rules: object
    families: object
    operand_formats: dict
    shape: tuple | None
    legal_m: tuple
    legal_n: tuple
    named: tuple | None
    sparse_rule: object

    @property
    def k(self) -> int:
        return self.datapath.k

    def format_of(self, operand: str):
        """The format of ``operand``'s words (``scale_a`` / ``scale_b``: the scale format)."""
        return self.operand_formats["scale" if operand in ("scale_a", "scale_b") else operand]


def _not_in_registers(placement, operand) -> str | None:
    """Why ``operand`` has no register / TMEM fragment layout (its family reads it from shared
    memory through a descriptor: ``Family.storage``), or None."""
    spaces = placement.family.storage_of(operand)
    if spaces[0] != "smem":
        return None
    how = " (or TMEM) through a descriptor" if "tmem" in spaces else " through a matrix descriptor"
    return (f"{operand.upper()} of {placement.datapath.op} is read from shared memory{how} "
            "(see mmasim.placement.SmemLayout)")


def _shape(placement, operand):
    if placement.shape is not None:
        return placement.shape
    ms, ns = placement.legal_m, placement.legal_n
    if len(ms) == 1 and len(ns) == 1:
        return ms[0], ns[0]
    if operand == "a" and len(ms) == 1:     # A (M x K) does not depend on N
        return ms[0], ns[0] if ns else 8
    raise ShapeError(f"{placement.instruction}: the layout depends on the shape; name it in the instruction "
                     f"(e.g. m{ms[0] if ms else 64}n{ns[0] if ns else 8}k{placement.k})")


def _matrix_shape(placement, operand, M, N):
    """The operand matrix a layout places (A of a sparse instruction: compressed)."""
    dp = placement.datapath
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
        return (M, placement.sparse_rule.chunks(K))
    return (M, N)


def _majors(placement, alayout, blayout) -> tuple:
    """The ``(.alayout, .blayout)`` of a layout: those given, else the instruction string's, else
    ``.row.col``; a pair the instruction does not take, or one that contradicts its string, is an
    :class:`OperandError`."""
    for name, v in (("alayout", alayout), ("blayout", blayout)):
        if v is not None and v not in _MAJOR:
            raise OperandError(f"{name} must be 'row' or 'col'; got {v!r}")
    named = placement.named
    pair = named or _MAJOR
    if alayout is None and blayout is None:
        return pair
    chosen = (alayout or pair[0], blayout or pair[1])
    given = ", ".join(f"{k}={v!r}" for k, v in (("alayout", alayout), ("blayout", blayout)) if v is not None)
    syntax, formats = placement.family.syntax, placement.formats
    if named and chosen != named:
        raise OperandError(f"{placement.instruction}: {given} contradicts the instruction string's "
                           f".{named[0]}.{named[1]}")
    if chosen not in syntax.layouts_of(placement.datapath, formats):
        raise OperandError(f"{placement.instruction}: {given}: {syntax.layout_rule(placement.datapath, formats)}")
    return chosen


def layout(placement, operand: str, alayout: str | None = None, blayout: str | None = None, byte_id: int = 0,
           thread_id: int = 0, selector: int = 0, lane_alignment: int = 0, **unknown):
    """The :class:`~mmasim.placement.fragment.Fragment` of ``operand`` of ``placement``.

    ``alayout`` / ``blayout``: ``"row"`` / ``"col"`` of A and B (mma.sync; PTX allows a pair
    other than ``.row.col`` only for the f16 m8n8k4), default the instruction string's, else
    ``.row.col``.  ``byte_id`` / ``thread_id``: the ``{byte-id, thread-id}`` selector of ``scale_a`` /
    ``scale_b`` (block-scaled ``mma.sync``); ``selector``: the sparsity selector of
    ``sparse_metadata`` (``mma.sp``); ``lane_alignment``: 0 or 16, where the half-data-path
    tcgen05 layouts C and F start within each 32-lane sub-partition (PTX §9.7.16.10.5).  Each
    defaults to 0 and must be a value the ISA allows.  Any other keyword is an
    :class:`~mmasim.errors.UnknownOption`."""
    check_options(unknown)
    if operand not in OPERANDS:
        raise OperandError(f"operand must be one of {', '.join(OPERANDS)}; got {operand!r}")
    alayout, blayout = _majors(placement, alayout, blayout)
    selectors = {"byte_id": byte_id, "thread_id": thread_id, "selector": selector, "lane_alignment": lane_alignment}
    for name, v in selectors.items():
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 0:
            raise OperandError(f"{name} must be a non-negative integer; got {v!r}")
    dp = placement.datapath
    why = _not_in_registers(placement, operand)
    if why:
        raise UnsupportedDatapath(f"{placement.instruction}: {why}")
    if operand in ("scale_a", "scale_b") and not dp.scale:
        raise UnsupportedDatapath(f"{placement.instruction} is not block-scaled: it has no {operand} operand")
    if operand == "sparse_metadata" and not dp.sparse:
        raise UnsupportedDatapath(f"{placement.instruction} is dense: it has no sparse_metadata operand")
    M, N = _shape(placement, operand)
    fname, bits = operand_bits(dp, placement.family, placement.formats, operand)
    key = rule_key(dp, placement.formats, operand, M, N, alayout, blayout, family=placement.family)
    rules = [r for r in placement.rules.values() if isinstance(r, FragmentRule) and r.matches(**key)]
    if not rules:
        raise UnsupportedDatapath(
            f"{placement.arch}: {placement.instruction}: no register layout of operand {operand.upper()} "
            f"({fname}, {bits}-bit) is registered for m{M}n{N}k{dp.k}"
            + (" (sparse)" if dp.sparse else "")
            + ("" if (alayout, blayout) == ("row", "col") else f" with .{alayout}.{blayout}"))

    rule = _most_specific(rules, lambda r: (bool(r.arch), bool(r.types), r.kind is not None, r.qualifiers is not None,
                                            r.m is not None, r.n is not None, r.k is not None, r.sparse is not None),
                          f"{placement.instruction}: operand {operand.upper()}")
    V = dp.blocks if dp.scale else 0
    why = rule.check_selectors(V, **selectors)
    if why:
        raise OperandError(f"{placement.instruction}: operand {operand}: {why}")
    return rule.bind(operand, M, N, dp.k, bits, shape=_matrix_shape(placement, operand, M, N), V=V,
                     **{k: v for k, v in selectors.items() if k in rule.selectors})


def a_tmem_layout(placement, lane_alignment: int = 0):
    """The :class:`~mmasim.placement.fragment.Fragment` of A in Tensor Memory (``[a-tmem]``)
    of a ``tcgen05.mma``: row-major, row ``r`` in the TMEM lane of D's row ``r``, K along the
    32-bit columns, sub-word elements packed lowest first; a sparse instruction's A is the
    compressed ``M x K/2``.  Where each lane group of the data path reads all rows (``.ws`` at
    M = 64 / 32, layouts E / G; M = 128 ``cta_group::2`` dense, layout B) the image repeats them
    (the layout's ``copies``; ``pack`` writes them, ``unpack`` checks them).  ``UnsupportedDatapath``
    where no layout is registered.  ``lane_alignment``: 0 or 16 for the half-data-path layouts
    C and F (as D's; PTX §9.7.16.10.5), refused by the others."""
    dp = placement.datapath
    if "tmem" not in placement.family.storage_of("a"):
        held = " / ".join(f.name for f in placement.families.values() if "tmem" in f.storage_of("a"))
        raise UnsupportedDatapath(f"{placement.instruction}: A in Tensor Memory exists only for {held}")
    M, N = _shape(placement, "d")
    bits = placement.format_of("a").container_bits
    key = rule_key(dp, placement.formats, "a", M, N, family=placement.family)
    rules = [r for r in placement.rules.values()
             if isinstance(r, FragmentRule) and r.storage == "tmem" and r.matches(**key)]
    if not rules:
        raise UnsupportedDatapath(
            f"{placement.instruction}: no Tensor Memory layout of A is registered for M = {M}"
            + (" with cta_group::2" if is_pair(placement) else "") + (" with .ws" if "ws" in dp.qualifiers else "")
            + "; pass A as a shared-memory image (a_descriptor)")
    rule = _most_specific(rules, lambda r: (bool(r.arch), r.qualifiers is not None, r.m is not None,
                                            r.sparse is not None), f"{placement.instruction}: A in Tensor Memory")
    if bits not in (4, 8, 16, 32):     # 4: two e2m1 codes a byte (PTX §9.7.16.10.4.5), eight a word
        raise UnsupportedDatapath(f"{placement.instruction}: A in Tensor Memory with {bits}-bit containers "
                                  "is not modelled")
    ka = dp.stored_k if dp.sparse else dp.k
    why = rule.check_selectors(lane_alignment=lane_alignment)
    if why:
        raise OperandError(f"{placement.instruction}: A in Tensor Memory: {why}")
    return rule.bind("a", M, N, dp.k, bits, shape=(M, ka), lane_alignment=lane_alignment)


def is_pair(placement) -> bool:
    """Whether the instruction runs on a CTA pair (``cta_group::2``: the pair's images)."""
    return "cta_group::2" in placement.datapath.qualifiers


def _most_specific(rules, rank, what: str):
    """The rule of ``rules`` that ``rank`` places highest (a :class:`TableError` on a tie)."""
    best = max(rank(r) for r in rules)
    top = [r for r in rules if rank(r) == best]
    if len(top) > 1:
        raise TableError(f"{what} matches several layouts equally: " + ", ".join(r.name for r in top))
    return top[0]


def check_options(options, also=()):
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


def _metadata_nibbles(placement, X, chunks):
    md = plain_array(X, "sparse_metadata")
    _sparse.check_words(md, placement.sparse_rule.words(placement.datapath.k), matrix=True, where=f"{placement.instruction}: ")
    return _sparse.nibbles(md, chunks)


def fragments(placement, operand: str, X, **options) -> np.ndarray:
    """``uint32 (lanes, registers)``: the matrix ``X`` (container words or values in
    the operand's format) packed as the hardware holds it.  ``scale_a`` / ``scale_b``: the
    matrix form's scales (``M x V`` / ``V x N``); ``sparse_metadata``: the matrix form's
    metadata words ``(M, words)``; A of a sparse instruction: the compressed A
    (:func:`compress`)."""
    lay = layout(placement, operand, **check_options(options))
    if operand == "sparse_metadata":
        return lay.pack(_metadata_nibbles(placement, X, lay.cols))
    what = "scale" if operand in ("scale_a", "scale_b") else operand
    words = operand_words(X, placement.operand_formats[what], what)
    return replicate(lay, operand, lay.pack(words))


def unfragment(placement, operand: str, registers, **options) -> np.ndarray:
    """The ``operand`` matrix (container words) held in ``registers`` ``(lanes, registers)``
    (``sparse_metadata``: the matrix form's metadata words ``(M, words)``)."""
    lay = layout(placement, operand, **check_options(options))
    out = unpack_scale(placement, operand, lay, registers)
    return metadata_words(out) if operand == "sparse_metadata" else out


def compress(placement, A, sparse_metadata) -> np.ndarray:
    """The compressed A ``(M, K/2)`` of a sparse instruction: the elements of the logical
    ``A`` ``(M, K)`` that the metadata words ``(M, words)`` select, each row's in K order
    (what ``fragments("a", ...)`` places)."""
    dp = placement.datapath
    if not dp.sparse:
        raise UnsupportedDatapath(f"{placement.instruction} is dense: there is no compressed A")
    words = operand_words(A, placement.format_of("a"), "a")
    if words.ndim != 2 or words.shape[1] != dp.k:
        raise ShapeError(f"{placement.instruction}: A must be (M, {dp.k}) (the logical K); got {words.shape}")
    md = plain_array(sparse_metadata, "sparse_metadata")
    _metadata_nibbles(placement, md, placement.sparse_rule.chunks(dp.k))
    if md.shape[0] != words.shape[0]:
        raise ShapeError(f"{placement.instruction}: sparse_metadata has {md.shape[0]} rows, A {words.shape[0]}")
    return _sparse.select(placement.sparse_rule, dp.k, md, words)[0]


def expand(placement, compressed, sparse_metadata) -> np.ndarray:
    """The logical A ``(M, K)`` whose selected elements are ``compressed`` ``(M, K/2)``
    (the others 0): the inverse of :func:`compress` on the selected positions."""
    dp = placement.datapath
    Ac = plain_array(compressed, "compressed")
    md = plain_array(sparse_metadata, "sparse_metadata")
    rule = placement.sparse_rule
    nib = _metadata_nibbles(placement, md, rule.chunks(dp.k))
    if Ac.ndim != 2 or Ac.shape[1] != dp.stored_k or md.shape[0] != Ac.shape[0]:
        raise ShapeError(f"{placement.instruction}: compressed A must be (M, {dp.stored_k}) with M rows of metadata; "
                         f"got {Ac.shape} and {md.shape}")
    _sparse.select(rule, dp.k, md, np.zeros((Ac.shape[0], dp.k), dtype=np.uint8))   # illegal selectors raise
    pos = rule.positions(nib)
    full = np.zeros((Ac.shape[0], dp.k), dtype=Ac.dtype)
    np.put_along_axis(full, pos, Ac, axis=1)
    return full


def _held(placement, operand, images="images") -> str:
    """What ``operand`` (scale factors, metadata) is held in, for error messages."""
    return f"Tensor Memory {images}" if placement.family.storage_of(operand)[0] == "tmem" else "registers"


def scale_operands(placement, scale_a, scale_b, byte_id_a=0, byte_id_b=0, thread_id_a=0, thread_id_b=0) -> dict:
    """``{"scale_a": SA, "scale_b": SB}``: a block-scaled instruction's scale matrices read from
    their registers or Tensor Memory images (``cta_group::2``: the pair's 256 lanes) with the
    ``{byte_id, thread_id}`` selectors (tcgen05: the scale factor A / B IDs), each TMEM partition
    checked against the one it repeats (:mod:`mmasim.placement.tcgen05_scales`); ``{}`` for an
    unscaled instruction."""
    if not placement.datapath.scale:
        if scale_a is not None or scale_b is not None:
            raise ScaleError(f"{placement.instruction} is not block-scaled: scale_a/scale_b must be None")
        return {}
    if scale_a is None or scale_b is None:
        raise ScaleError(f"{placement.instruction} is block-scaled: pass the scale_a and scale_b {_held(placement, 'scale_a')} "
                         "(fragments('scale_a', SA), fragments('scale_b', SB))")
    return {"scale_a": unpack_scale(placement, "scale_a", layout(placement, "scale_a", byte_id=byte_id_a,
                                                             thread_id=thread_id_a), scale_a),
            "scale_b": unpack_scale(placement, "scale_b", layout(placement, "scale_b", byte_id=byte_id_b,
                                                             thread_id=thread_id_b), scale_b)}


def sparse_operand(placement, A, sparse_metadata, sparsity_selector=0, **options):
    """``(A, {"sparse_metadata": words})``: a sparse instruction's compressed ``A`` expanded to the
    logical K with the metadata read from its registers / Tensor Memory image with
    ``sparsity_selector``; ``(A, {})`` for a dense one (which takes neither)."""
    if not placement.datapath.sparse:
        if sparse_metadata is not None:
            raise SparseMetadataError(f"{placement.instruction} is dense: sparse_metadata must be None")
        if sparsity_selector:
            raise OperandError(f"{placement.instruction} is dense: it takes no sparsity_selector")
        return A, {}
    if sparse_metadata is None:
        raise SparseMetadataError(f"{placement.instruction} is sparse: pass the sparse_metadata {_held(placement, 'sparse_metadata', 'image')} "
                                  "(the sparse metadata: fragments('sparse_metadata', words, selector=...))")
    md = metadata_words(layout(placement, "sparse_metadata", selector=sparsity_selector, **options).unpack(sparse_metadata))
    return expand(placement, A, md), {"sparse_metadata": md}
