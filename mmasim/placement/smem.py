"""Shared-memory operand layouts of ``wgmma`` / ``tcgen05`` and their 64-bit matrix descriptors.

PTX ISA 9.0 §9.7.15.5.1.2 / §9.7.16.3 ("Shared Memory Matrix Layout", "Canonical Layouts")
and §9.7.15.5.1.2.2 / §9.7.16.4.1 (the descriptors): :class:`SmemLayout` gives the byte
offset of each element in the canonical K-major / MN-major layouts, without swizzle or with
the 32 / 64 / 128-byte ``Swizzle<B, 4, 3>`` (the CuTe forms and byte formulas are the table
of docs/layouts.md); offsets are from a pattern-aligned start.  :func:`encode_descriptor` /
:func:`decode_descriptor` for the descriptor words, :func:`read_operand` reads an operand out
of an image through its descriptor.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.errors import ShapeError, TableError
from mmasim.operands.tensors import plain_array
from mmasim.placement.base import Layout

SWIZZLES = (0, 32, 64, 128)

#: what the layout formulas and descriptor fields were checked against (docs/layouts.md)
LAYOUT_EVIDENCE = ("checked: PTX ISA 9.0 §9.7.15.5.1.2.1.3 and §9.7.16.3.3 'Canonical Layouts' (the CuTe "
                   "layout and Swizzle<B,4,3> of each major-ness and swizzle mode, and the worked examples' "
                   "exact layouts); the swizzle taken on byte addresses, as the descriptor's base-offset "
                   "formula (pattern start >> 7) & 7 implies")
DESCRIPTOR_EVIDENCE = {
    "wgmma": "checked: PTX ISA 9.0 §9.7.15.5.1.2.2 'Matrix Descriptor Format' (bit-field table)",
    "tcgen05": "checked: PTX ISA 9.0 §9.7.16.4.1 'Shared memory descriptor', Table 40 (bit-field table)",
}
# wgmma descriptor bits 62-63; tcgen05 descriptor bits 61-63
_WGMMA_SWIZZLE = {0: 0, 128: 1, 64: 2, 32: 3}
_TCGEN05_SWIZZLE = {0: 0, "128B_base32B": 1, 128: 2, 64: 4, 32: 6}


def swizzle(address, mode: int):
    """The byte address after the ``mode``-byte swizzle (0: unchanged)."""
    a = np.asarray(address, dtype=np.int64)
    if mode not in SWIZZLES:
        raise ShapeError(f"swizzle must be one of {SWIZZLES} bytes, got {mode!r}")
    if not mode:
        return a
    mask = mode // 16 - 1
    return a ^ (((a >> 7) & mask) << 4)


@attrs.frozen
class SmemLayout(Layout):
    """A canonical shared-memory operand layout: ``offset(row, k)`` in bytes.

    ``major``: ``"K"`` or ``"MN"``; ``swizzle``: 0, 32, 64 or 128 bytes; ``lbo`` /
    ``sbo``: leading / stride byte offsets; ``element_bits``: the element's size.
    ``row`` is the M index of A (N of B), ``k`` the K index.
    """

    name: str
    major: str = "K"
    swizzle: int = 0
    lbo: int = 0
    sbo: int = 0
    element_bits: int = 16
    arch: str = ""
    description: str = ""
    evidence: str = ""
    kind: str = "operand-smem"

    def __attrs_post_init__(self):
        where = f"shared-memory layout {self.name!r}"
        if self.major not in ("K", "MN"):
            raise TableError(f"{where}: major must be 'K' or 'MN', got {self.major!r}")
        if self.swizzle not in SWIZZLES:
            raise TableError(f"{where}: swizzle must be one of {SWIZZLES} bytes, got {self.swizzle!r}")
        if self.element_bits not in (4, 6, 8, 16, 32, 64):
            raise TableError(f"{where}: element_bits must be 4, 6, 8, 16, 32 or 64, got {self.element_bits!r}")
        for f in ("lbo", "sbo"):
            v = getattr(self, f)
            if not isinstance(v, int) or v < 0 or v % 16:
                raise TableError(f"{where}: {f} must be a non-negative multiple of 16 bytes, got {v!r}")

    def offset(self, row, k):
        """Byte offset of element ``(row, k)`` (for sub-byte elements: the byte holding it)."""
        r = np.asarray(row, dtype=np.int64)
        k = np.asarray(k, dtype=np.int64)
        if (r < 0).any() or (k < 0).any():
            raise ShapeError(f"{self.name}: negative row or k")
        S = self.swizzle
        if self.major == "K":
            kb = k * self.element_bits // 8
            if not S:
                return (r % 8) * 16 + (r // 8) * self.sbo + kb % 16 + (kb // 16) * self.lbo
            if (kb >= S).any():
                raise ShapeError(f"{self.name}: K-major {S}-byte swizzle holds {S} bytes of K per row "
                                 f"({8 * S // self.element_bits} elements); k = {int(k.max())} is beyond")
            return swizzle((r % 8) * S + kb + (r // 8) * self.sbo, S)
        mb = r * self.element_bits // 8
        if not S:
            # ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO)): SBO along MN, LBO along K
            return mb % 16 + (mb // 16) * self.sbo + (k % 8) * 16 + (k // 8) * self.lbo
        # ((T,S/16,m),(8,k)) : ((1,T,LBO),((S/16)T,SBO)): LBO along MN, SBO along K
        return swizzle(mb % S + (mb // S) * self.lbo + (k % 8) * S + (k // 8) * self.sbo, S)

    @property
    def formula_evidence(self) -> str:
        """What :meth:`offset`'s formulas were checked against (this layout's own
        ``evidence`` says where its SBO / LBO values come from)."""
        return LAYOUT_EVIDENCE

    def _offsets(self, rows: int, depth: int) -> np.ndarray:
        if self.element_bits % 8:
            raise ShapeError(f"{self.name}: images of sub-byte elements are not modelled")
        r, k = np.meshgrid(np.arange(rows), np.arange(depth), indexing="ij")
        off = self.offset(r, k) // (self.element_bits // 8)
        if np.unique(off).size != off.size:
            raise ShapeError(f"{self.name}: a ({rows}, {depth}) operand does not fit this layout "
                             f"(distinct elements would share a slot; SBO={self.sbo}, LBO={self.lbo} bytes)")
        return off

    def to_image(self, matrix, fill=0) -> np.ndarray:
        """Flat shared-memory image (in elements) of a logical ``(rows, K)`` operand."""
        mat = plain_array(matrix, "matrix")
        if mat.ndim != 2:
            raise ShapeError(f"{self.name}: expected a 2-D (rows, K) operand, got {mat.shape}")
        off = self._offsets(*mat.shape)
        img = np.full(int(off.max()) + 1, fill, dtype=mat.dtype)
        img[off] = mat
        return img

    def from_image(self, image, rows: int, depth: int) -> np.ndarray:
        """The logical ``(rows, K)`` operand read back from a flat image (in elements)."""
        img = plain_array(image, "image")
        off = self._offsets(rows, depth)
        if img.ndim != 1 or img.size <= int(off.max()):
            raise ShapeError(f"{self.name}: image needs at least {int(off.max()) + 1} elements, got {img.shape}")
        return img[off]

    def descriptor(self, start_address: int, target: str = "wgmma", base_offset: int = 0) -> int:
        """The 64-bit matrix descriptor of this layout at ``start_address``."""
        return encode_descriptor(start_address, self.lbo, self.sbo, self.swizzle, target=target,
                                 base_offset=base_offset)


@attrs.frozen
class CoreMatrixLayout(SmemLayout):
    """The no-swizzle K-major layout in element units (T1's form):
    ``offset(i, k) = (i % T) * T + (i // T) * SBO + (k % T) + (k // T) * LBO`` elements,
    ``T`` elements per 16-byte core-matrix row; ``SBO`` / ``LBO`` in elements.
    It is the :class:`SmemLayout` with ``major="K"``, ``swizzle=0``,
    ``element_bits = 128 // T``, ``sbo = SBO * element_bytes``, ``lbo = LBO * element_bytes``."""

    T: int = 8
    SBO: int = 0
    LBO: int = 0
    major: str = attrs.field(default="K", init=False)
    swizzle: int = attrs.field(default=0, init=False)
    element_bits: int = attrs.field(init=False, default=attrs.Factory(lambda self: 128 // self.T, takes_self=True))
    lbo: int = attrs.field(init=False, default=attrs.Factory(lambda self: self.LBO * 16 // self.T, takes_self=True))
    sbo: int = attrs.field(init=False, default=attrs.Factory(lambda self: self.SBO * 16 // self.T, takes_self=True))

    def offset(self, i, k):
        """Element offset of logical element (row or column ``i``, ``k``)."""
        return SmemLayout.offset(self, i, k) // (self.element_bits // 8)

    def _offsets(self, rows: int, depth: int) -> np.ndarray:
        if rows % self.T or depth % self.T:
            raise ShapeError(f"{self.name}: rows and K must be multiples of {self.T}; got ({rows}, {depth})")
        i, k = np.meshgrid(np.arange(rows), np.arange(depth), indexing="ij")
        off = self.offset(i, k)
        if np.unique(off).size != off.size:
            raise ShapeError(
                f"{self.name}: a ({rows}, {depth}) operand does not fit this layout "
                f"(distinct elements would share a slot; SBO={self.SBO}, LBO={self.LBO})"
            )
        return off


# ------------------------------------------------------------------ descriptors
@attrs.frozen
class Descriptor:
    """The fields of a 64-bit shared-memory matrix descriptor (byte values)."""

    start_address: int
    lbo: int
    sbo: int
    swizzle: object          # 0, 32, 64, 128 (tcgen05 also "128B_base32B")
    base_offset: int = 0
    lbo_mode: int = 0        # tcgen05 only: 0 relative, 1 absolute
    target: str = "wgmma"


def _enc(x, what):
    if not isinstance(x, (int, np.integer)) or x < 0 or x >= 1 << 18 or x % 16:
        raise ShapeError(f"descriptor {what} must be a multiple of 16 below 2**18 bytes, got {x!r}")
    return (int(x) & 0x3FFFF) >> 4


def encode_descriptor(start_address, lbo, sbo, swizzle=0, *, target="wgmma", base_offset=0, lbo_mode=0) -> int:
    """The 64-bit descriptor word.

    ``wgmma`` (PTX ISA 9.0 §9.7.15.5.1.2.2): bits 0-13 start address, 16-29 LBO, 32-45
    SBO (each ``(x & 0x3FFFF) >> 4``), 49-51 base offset, 62-63 swizzle (0 none, 1 128B,
    2 64B, 3 32B).  ``tcgen05`` (§9.7.16.4.1, Table 40): the same address fields, bits
    46-48 the fixed constant 0b001, 49-51 base offset, 52 the leading-dimension stride
    mode (0 relative offset, 1 absolute address), 53-60 zero, 61-63 swizzle (0 none,
    1 128B with 32B atomic, 2 128B, 4 64B, 6 32B; 3, 5, 7 invalid).
    """
    word = _enc(start_address, "start address") | _enc(lbo, "leading byte offset") << 16 \
        | _enc(sbo, "stride byte offset") << 32
    if not isinstance(base_offset, int) or not 0 <= base_offset < 8:
        raise ShapeError(f"descriptor base offset must be 0..7, got {base_offset!r}")
    word |= base_offset << 49
    if target == "wgmma":
        if swizzle not in _WGMMA_SWIZZLE:
            raise ShapeError(f"wgmma descriptor swizzle must be one of {list(_WGMMA_SWIZZLE)}, got {swizzle!r}")
        if lbo_mode:
            raise ShapeError("wgmma descriptors have no LBO mode bit")
        return word | _WGMMA_SWIZZLE[swizzle] << 62
    if target == "tcgen05":
        if swizzle not in _TCGEN05_SWIZZLE:
            raise ShapeError(f"tcgen05 descriptor swizzle must be one of {list(_TCGEN05_SWIZZLE)}, got {swizzle!r}")
        if lbo_mode not in (0, 1):
            raise ShapeError(f"tcgen05 LBO mode must be 0 or 1, got {lbo_mode!r}")
        return word | 0b001 << 46 | lbo_mode << 52 | _TCGEN05_SWIZZLE[swizzle] << 61
    raise ShapeError(f"descriptor target must be 'wgmma' or 'tcgen05', got {target!r}")


def decode_descriptor(word: int, target: str = "wgmma") -> Descriptor:
    """The fields of a 64-bit descriptor word (the inverse of :func:`encode_descriptor`)."""
    if not isinstance(word, (int, np.integer)) or not 0 <= int(word) < 1 << 64:
        raise ShapeError(f"a descriptor is a 64-bit word, got {word!r}")
    word = int(word)
    start, lbo, sbo = (word & 0x3FFF) << 4, (word >> 16 & 0x3FFF) << 4, (word >> 32 & 0x3FFF) << 4
    base = word >> 49 & 7
    if target == "wgmma":
        sw = {v: k for k, v in _WGMMA_SWIZZLE.items()}[word >> 62 & 3]
        return Descriptor(start, lbo, sbo, sw, base, 0, target)
    if target == "tcgen05":
        if word >> 46 & 7 != 0b001:
            raise ShapeError(f"tcgen05 descriptor {word:#018x}: bits 46-48 must be 0b001")
        if word >> 53 & 0xFF:
            raise ShapeError(f"tcgen05 descriptor {word:#018x}: bits 53-60 must be 0 (a fixed constant)")
        code = word >> 61 & 7
        inv = {v: k for k, v in _TCGEN05_SWIZZLE.items()}
        if code not in inv:
            raise ShapeError(f"tcgen05 descriptor {word:#018x}: swizzle code {code} is reserved")
        return Descriptor(start, lbo, sbo, inv[code], base, word >> 52 & 1, target)
    raise ShapeError(f"descriptor target must be 'wgmma' or 'tcgen05', got {target!r}")


# ------------------------------------------------------------------ reading an operand through a descriptor
def _image_bytes(image) -> np.ndarray:
    img = plain_array(image, "image")
    if img.ndim != 1 or img.dtype not in (np.uint8, np.uint32):
        raise ShapeError(f"a shared-memory image is a flat uint8 (bytes) or uint32 (little-endian words) array; "
                         f"got {img.dtype} {img.shape}")
    return np.ascontiguousarray(img, dtype="<u4" if img.dtype == np.uint32 else np.uint8).view(np.uint8)


def read_operand(image, descriptor, rows: int, depth: int, element_bits: int, *, major: str = "K",
                 target: str = "wgmma") -> np.ndarray:
    """The ``(rows, depth)`` operand words (uint64) a matrix descriptor addresses in a
    shared-memory image: what ``wgmma`` / ``tcgen05`` read for A (rows = M) or B (rows = N).

    ``image``: the operand's shared memory, flat uint8 bytes or uint32 little-endian words,
    byte 0 at a 1024-byte-aligned address; ``descriptor``: the 64-bit descriptor word
    (:func:`decode_descriptor`) or a :class:`Descriptor`, its start address relative to the
    image; ``element_bits``: the element's container (8, 16, 32 or 64 bits, stored
    little-endian); ``major``: ``"K"`` or ``"MN"`` (the instruction's transpose, not a
    descriptor field).  Element ``(r, k)`` is at byte ``start + SmemLayout.offset(r, k)``
    with the descriptor's LBO, SBO and swizzle.  Not modelled (:class:`ShapeError`): a
    non-zero base offset, a swizzled start address off the pattern's repeat (8 x swizzle
    bytes), tcgen05's absolute LBO mode and 128-byte-with-32-byte-atom swizzle, sub-byte
    elements.
    """
    d = descriptor if isinstance(descriptor, Descriptor) else decode_descriptor(descriptor, target)
    if element_bits not in (8, 16, 32, 64):
        raise ShapeError(f"reading {element_bits}-bit elements through a descriptor is not modelled "
                         "(8, 16, 32 or 64-bit containers)")
    if d.base_offset:
        raise ShapeError(f"descriptor base offset {d.base_offset}: not modelled (the image starts at a "
                         "pattern-aligned address; base offset 0)")
    if d.lbo_mode:
        raise ShapeError("tcgen05 absolute leading-dimension mode (bit 52): not modelled")
    if d.swizzle not in SWIZZLES:
        raise ShapeError(f"swizzle {d.swizzle!r}: not modelled")
    if d.swizzle and d.start_address % (8 * d.swizzle):
        raise ShapeError(f"a {d.swizzle}-byte swizzled operand must start at a multiple of {8 * d.swizzle} "
                         f"bytes of the image (the pattern's repeat); got start address {d.start_address}")
    by = _image_bytes(image)
    lay = SmemLayout("descriptor", major=major, swizzle=d.swizzle, lbo=d.lbo, sbo=d.sbo,
                     element_bits=element_bits, description="read through a matrix descriptor")
    r, k = np.meshgrid(np.arange(rows), np.arange(depth), indexing="ij")
    off = d.start_address + lay.offset(r, k)
    nb = element_bits // 8
    if np.unique(off // nb).size != off.size:     # offsets are multiples of nb (16-byte start)
        raise ShapeError(f"descriptor LBO={d.lbo}, SBO={d.sbo}, swizzle={d.swizzle}: distinct elements of the "
                         f"({rows}, {depth}) operand share bytes")
    need = int(off.max()) + nb
    if by.size < need:
        raise ShapeError(f"the shared-memory image holds {by.size} bytes; the ({rows}, {depth}) operand at this "
                         f"descriptor needs {need}")
    out = np.zeros((rows, depth), dtype=np.uint64)
    for j in range(nb):
        out |= by[off + j].astype(np.uint64) << np.uint64(8 * j)
    return out
