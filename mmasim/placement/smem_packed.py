"""Sub-byte tcgen05 operands in shared memory: packed and padded 4- / 6-bit codes.

Owns the packing forms of PTX ISA 9.0 §9.7.16.10.4 (:func:`smem_packing` names a kind and
format's form: ``"pair"``, two 4-bit codes a byte; ``"padded"``, 16 codes in a 16-byte chunk;
``"bytes"``) and what each rests on (:data:`PACKING_EVIDENCE`).  Gives the reads through a
descriptor (:func:`read_packed_operand`, :func:`read_smem_operand`) and the images
(:func:`packed_image`, :func:`packed_words`); a container word is the code shifted by
``Format.field_shift``.  Refuses MN-major sub-byte operands (:class:`~mmasim.UnsupportedDatapath`)
and a K that does not fill whole pairs or chunks (:class:`~mmasim.ShapeError`).  The table and
what is assumed: docs/layouts.md, "Sub-byte operands in shared memory".
"""

from __future__ import annotations

import numpy as np

from mmasim.errors import ShapeError, UnsupportedDatapath
from mmasim.operands.tensors import plain_array
from mmasim.placement.smem import SmemLayout, read_operand

#: what each packing form rests on (docs/layouts.md, "Not yet checked against the documents")
PACKING_EVIDENCE = {
    "pair": "partly checked: PTX ISA 9.0 §9.7.16.10.4.6 text ('pack two 4-bit elements in a 8-bit container, "
            "with no padding', .kind::mxf4 / .kind::mxf4nvf4) checked; the lower K index in the low nibble is "
            "assumed (lowest first, as every other sub-word packing)",
    "padded": "partly checked: PTX ISA 9.0 §9.7.16.10.4.4 text ('contiguously packed along with padding', "
              ".kind::mxf8f6f4) checked; 16 codes to a 16-byte chunk, lowest element in the lowest bits, is drawn "
              "in Figures 202 / 203 (not compared with mmasim's formula) and agrees with the .b4x16_p64 / .b6x16_p32 names; the same "
              "form for .kind::f8f6f4 is assumed",
}
#: the ``.kind``s whose 4- / 6-bit floating-point operands are padded to 16-byte chunks
PADDED_KINDS = ("f8f6f4", "mxf8f6f4")
CHUNK = 16      # elements per padded 16-byte chunk


def smem_packing(kind, fmt) -> tuple:
    """How ``fmt``'s elements sit in shared memory for tcgen05 ``.kind``: ``("bytes", bits)``
    (whole 8 / 16 / 32-bit containers), ``("pair", 4)`` (two 4-bit codes per byte) or
    ``("padded", field_bits)`` (16 codes packed into a 16-byte chunk)."""
    if fmt.container_bits == 4:
        return ("pair", 4)
    if kind in PADDED_KINDS and fmt.field_bits < 8 and not fmt.integer:
        return ("padded", fmt.field_bits)
    return ("bytes", fmt.container_bits)


def _check(pack, depth, major):
    mode, bits = pack
    if mode not in ("pair", "padded"):
        raise ShapeError(f"packing must be ('pair', 4) or ('padded', 4 | 6); got {pack!r}")
    if major != "K":
        raise UnsupportedDatapath(f"MN-major sub-byte ({bits}-bit, {mode}) operands in shared memory are not "
                                  "modelled (K-major only): the PTX text read here gives their packing along K only, "
                                  "and CUTLASS's UMMA instruction descriptor (cute/arch/mma_sm100_desc.hpp) allows "
                                  "MN-major only for E4M3, E5M2, INT8, F16, BF16 and TF32 sources")
    if mode == "pair" and (bits != 4 or depth % 2):
        raise ShapeError(f"packed 4-bit pairs need an even K; got K = {depth}")
    if mode == "padded" and (bits not in (4, 6) or depth % CHUNK):
        raise ShapeError(f"padded {bits}-bit codes fill 16-element chunks along K; K = {depth} is not a multiple "
                         f"of {CHUNK}")


def _byte_columns(pack, depth: int) -> int:
    """Bytes per row of ``depth`` sub-byte codes packed as ``pack``."""
    return depth // 2 if pack[0] == "pair" else depth


def _codes(by, pack, rows: int, depth: int) -> np.ndarray:
    """The ``(rows, depth)`` codes (uint64) held in the packed bytes ``by`` ``(rows, bytes)``."""
    mode, bits = pack
    if mode == "pair":
        by = np.asarray(by).astype(np.uint64)
        out = np.empty((rows, depth), dtype=np.uint64)
        out[:, 0::2], out[:, 1::2] = by & np.uint64(0xF), by >> np.uint64(4)
        return out
    # padded: byte j of a chunk is where the layout puts byte-sized element 16c + j
    by = np.asarray(by).astype(np.uint8)
    chunk_bits = np.unpackbits(by.reshape(rows, depth // CHUNK, CHUNK), axis=2, bitorder="little")
    fields = chunk_bits[:, :, : CHUNK * bits].reshape(rows, depth // CHUNK, CHUNK, bits).astype(np.uint64)
    return (fields << np.arange(bits, dtype=np.uint64)).sum(axis=3).reshape(rows, depth)


def _bytes(codes, pack) -> np.ndarray:
    """The packed bytes ``(rows, bytes)`` of the ``(rows, depth)`` codes (padding bits 0)."""
    mode, bits = pack
    if mode == "pair":
        return (codes[:, 0::2] | codes[:, 1::2] << np.uint64(4)).astype(np.uint8)
    rows, depth = codes.shape
    nchunks = depth // CHUNK
    fields = ((codes.reshape(rows, nchunks, CHUNK, 1) >> np.arange(bits, dtype=np.uint64)) & np.uint64(1))
    chunk_bits = np.zeros((rows, nchunks, 8 * CHUNK), dtype=np.uint8)
    chunk_bits[:, :, : CHUNK * bits] = fields.reshape(rows, nchunks, CHUNK * bits)
    return np.packbits(chunk_bits, axis=2, bitorder="little").reshape(rows, depth)


def read_packed_operand(image, descriptor, rows: int, depth: int, pack: tuple, *, field_shift: int = 0,
                        major: str = "K", target: str = "tcgen05") -> np.ndarray:
    """The ``(rows, depth)`` container words (uint64) of a sub-byte operand read through its
    descriptor: the code of element ``(r, k)`` shifted left by ``field_shift``."""
    _check(pack, depth, major)
    by = read_operand(image, descriptor, rows, _byte_columns(pack, depth), 8, major=major, target=target)
    return _codes(by, pack, rows, depth) << np.uint64(field_shift)


def packed_image(layout: SmemLayout, words, pack: tuple, *, field_shift: int = 0) -> np.ndarray:
    """Flat ``uint8`` shared-memory image of the ``(rows, K)`` container ``words`` packed as ``pack``
    and placed with ``layout`` (a layout of byte elements: ``element_bits=8``); padding bits 0."""
    w = plain_array(words, "words")
    if w.ndim != 2 or w.dtype.kind not in "iu":
        raise ShapeError(f"expected a (rows, K) integer operand; got {w.dtype} {w.shape}")
    if layout.element_bits != 8:
        raise ShapeError(f"{layout.name}: a sub-byte image is placed with a layout of bytes (element_bits=8)")
    rows, depth = w.shape
    _check(pack, depth, layout.major)
    codes = (w.astype(np.uint64) >> np.uint64(field_shift)) & np.uint64((1 << pack[1]) - 1)
    return layout.to_image(_bytes(codes, pack))


def packed_words(layout: SmemLayout, image, rows: int, depth: int, pack: tuple, *, field_shift: int = 0) -> np.ndarray:
    """The inverse of :func:`packed_image`: the ``(rows, depth)`` container words (uint64) held in
    the flat ``uint8`` image placed with ``layout``."""
    _check(pack, depth, layout.major)
    by = layout.from_image(image, rows, _byte_columns(pack, depth))
    return _codes(by, pack, rows, depth) << np.uint64(field_shift)


def read_smem_operand(placement, operand: str, image, descriptor, rows: int, depth: int, major: str) -> np.ndarray:
    """A / B of an instruction (its :class:`~mmasim.placement.bind.Placement`) read from its
    shared-memory image through a descriptor of its family's format (``Family.descriptor``):
    whole containers through :func:`read_operand`, sub-byte codes packed or padded as the
    family's ``smem_packing`` says through :func:`read_packed_operand`."""
    fmt = placement.format_of(operand)
    family = placement.family
    target = family.descriptor
    pack = family.smem_packing(placement.datapath.kind, fmt) if family.smem_packing else ("bytes", fmt.container_bits)
    if pack[0] == "bytes":
        return read_operand(image, descriptor, rows, depth, fmt.container_bits, major=major, target=target)
    try:
        return read_packed_operand(image, descriptor, rows, depth, pack, field_shift=fmt.field_shift, major=major,
                                   target=target)
    except UnsupportedDatapath as exc:
        raise UnsupportedDatapath(f"{placement.instruction}: {operand.upper()} (.{fmt.name}): {exc}") from None


__all__ = ["PACKING_EVIDENCE", "PADDED_KINDS", "smem_packing", "read_packed_operand", "packed_image", "packed_words",
           "read_smem_operand"]
