"""Structured sparsity: selecting the stored elements from the logical K (docs/datapaths.md section 6).

Metadata is an array of 32-bit words; nibble ``i`` (low nibble of word 0
first) is the selector of chunk ``i`` of the logical K.  The selected positions
are gathered from A and B in order; the unselected ones are dropped before any
classification, so a NaN there cannot poison the result.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.errors import SparseMetadataError

_PAIR_SELECTORS = (0x4, 0x8, 0xC, 0x9, 0xD, 0x6, 0xE)


@attrs.frozen
class SparseRule:
    name: str
    chunk: int                 # logical elements per selector nibble
    unit: int                  # elements one selector field picks (1, or 2 for pairs)
    selectors: dict            # legal nibble -> tuple of picked unit indices
    description: str = ""
    # True: the rule of PTX's ``mma.sp::ordered_metadata`` (a lookup must spell that
    # qualifier); False: the plain ``.sp`` spelling (and the families with no variant)
    ordered: bool = False

    def chunks(self, k: int) -> int:
        return k // self.chunk

    def words(self, k: int) -> int:
        return -(-self.chunks(k) // 8)

    def positions(self, nibbles: np.ndarray) -> np.ndarray:
        """Logical positions (within the K row) picked by selector nibbles ``(..., chunks)``."""
        table = np.full((16, len(next(iter(self.selectors.values()))) * self.unit), -1, dtype=np.int64)
        for nib, picks in self.selectors.items():
            table[nib] = [p * self.unit + u for p in picks for u in range(self.unit)]
        pos = table[nibbles]                                     # (..., chunks, picked)
        base = (np.arange(nibbles.shape[-1]) * self.chunk)[:, None]
        return (pos + base).reshape(nibbles.shape[:-1] + (pos.shape[-2] * pos.shape[-1],))


def _pairs(nib):
    return (nib & 3, nib >> 2)


# PTX ISA, "Sparse matrix storage" (mma.sp and wgmma.mma_async.sp): "Values 0b0000,
# 0b0101, 0b1010, 0b1111 are invalid values for metadata" -- the two 2-bit indices
# of a chunk must differ; "Instruction mma.sp::ordered_metadata requires the indices
# in the sparsity metadata to be sorted in an increasing order starting from LSB".
_DISTINCT_SELECTORS = tuple(s for s in range(16) if (s & 3) != (s >> 2))
_INCREASING_SELECTORS = tuple(s for s in range(16) if (s & 3) < (s >> 2))   # 0x4 0x8 0x9 0xC 0xD 0xE

def _index_pairs(name, chunk, unit, selectors, description, ordered=False):
    """A rule whose selector nibble holds two 2-bit indices (bits 1:0 and 3:2) of units in a chunk."""
    return SparseRule(name, chunk, unit, {s: _pairs(s) for s in selectors}, description, ordered)


_DISTINCT = ("selector bits 1:0 and 3:2 give the positions of the first and second stored {what}, which must "
             "differ (PTX: 0b0000, 0b0101, 0b1010, 0b1111 are invalid{extra})")
_ORDERED = "selector bits 1:0 and 3:2 {what} in increasing order (PTX mma.sp::ordered_metadata{extra})"

RULES = {
    "tf32": SparseRule("tf32", 2, 1, {0x4: (0,), 0xE: (1,)},
                       "chunks of 2: selector 0x4 keeps element 0, 0xE element 1"),
    "pairs4": _index_pairs("pairs4", 4, 1, _PAIR_SELECTORS,
                           "chunks of 4: selector bits 1:0 and 3:2 pick two elements"),
    "pairs8": _index_pairs("pairs8", 8, 2, _PAIR_SELECTORS,
                           "chunks of 8: selector bits 1:0 and 3:2 pick two adjacent pairs"),
    # --- mma.sp, mma.sp::ordered_metadata, wgmma.mma_async.sp, v_smfmac
    "distinct4": _index_pairs("distinct4", 4, 1, _DISTINCT_SELECTORS,
                              "chunks of 4: " + _DISTINCT.format(what="element", extra="")),
    "ordered4": _index_pairs("ordered4", 4, 1, _INCREASING_SELECTORS,
                             "chunks of 4: " + _ORDERED.format(what="give the positions of the two stored "
                                                               "elements", extra=""), ordered=True),
    "tf32.ordered": SparseRule("tf32.ordered", 2, 1, {0x4: (0,), 0xE: (1,)},
                               "chunks of 2: selector 0x4 keeps element 0, 0xE element 1 "
                               "(PTX mma.sp::ordered_metadata)", ordered=True),
    "distinct8": _index_pairs("distinct8", 8, 2, _DISTINCT_SELECTORS,
                              "chunks of 8: " + _DISTINCT.format(what="two-wide sub-chunk", extra="; mma.sp .s4 / "
                                                                 ".u4, 4:8 pair-wise sparsity")),
    "ordered8": _index_pairs("ordered8", 8, 2, _INCREASING_SELECTORS,
                             "chunks of 8: " + _ORDERED.format(what="pick two adjacent pairs",
                                                               extra=", 4:8 pair-wise sparsity"), ordered=True),
    "smfmac4": _index_pairs("smfmac4", 4, 1, _INCREASING_SELECTORS,
                            "chunks of 4: index bits 1:0 and 3:2 give the positions of the first and second "
                            "stored element, index0 < index1 (AMD CDNA3 v_smfmac)"),
}


def nibbles(metadata: np.ndarray, count: int) -> np.ndarray:
    """The first ``count`` selector nibbles of metadata words ``(..., W)``."""
    md = np.asarray(metadata).astype(np.uint64)
    shifts = (np.arange(8, dtype=np.uint64) * np.uint64(4))
    nib = ((md[..., :, None] >> shifts) & np.uint64(0xF)).reshape(md.shape[:-1] + (md.shape[-1] * 8,))
    return nib[..., :count].astype(np.int64)


def check_words(md: np.ndarray, nwords: int, *, matrix: bool = False, where: str = "") -> np.ndarray:
    """``md`` if it is sparse metadata words: integers, ``nwords`` per row (``(..., nwords)``;
    ``matrix``: exactly ``(M, nwords)``, the matrix form's), each 32-bit; else
    :class:`~mmasim.SparseMetadataError` (``where``: what the message starts with)."""
    if md.dtype.kind not in "iu" or (md.ndim != 2 if matrix else md.ndim == 0) or md.shape[-1] != nwords:
        shape = (f"(M, {nwords}), the matrix form's (nibble j of a row is the selector of chunk j of its "
                 "logical K)") if matrix else f"(..., {nwords})"
        raise SparseMetadataError(f"{where}sparse_metadata must be integer words of shape {shape}; "
                                  f"got {md.dtype} {md.shape}")
    if md.size and (md.min() < 0 or int(md.max()) > 0xFFFFFFFF):
        raise SparseMetadataError("sparse_metadata words must be 32-bit (0 <= word <= 0xFFFFFFFF)")
    return md


def check(rule: SparseRule, k: int, metadata: np.ndarray, where=None) -> np.ndarray:
    """The selector nibbles ``(..., chunks)`` of metadata words ``(..., W)``, every one legal, else
    :class:`~mmasim.SparseMetadataError` naming the first illegal one: its chunk and
    ``where(index)``, ``index`` its place among the metadata's rows (default
    ``sparse_metadata[i, j]``, as the caller indexes the array it passed)."""
    nib = nibbles(metadata, rule.chunks(k))
    legal = np.isin(nib, list(rule.selectors))
    if not legal.all():
        at = tuple(int(i) for i in np.argwhere(~legal)[0])
        bad = int(nib[at])
        place = where(at[:-1]) if where is not None else (
            f"sparse_metadata[{', '.join(map(str, at[:-1]))}]" if len(at) > 1 else "sparse_metadata")
        raise SparseMetadataError(
            f"illegal sparse selector 0x{bad:X} for chunk {at[-1]} of {place} "
            f"({rule.description}); legal selectors: {', '.join(f'0x{s:X}' for s in rule.selectors)}"
        )
    return nib


def select(rule: SparseRule, k: int, metadata: np.ndarray, *operands):
    """Gather the selected elements of each operand ``(N, k)`` -> ``(N, k/2)`` (selectors checked)."""
    pos = rule.positions(check(rule, k, metadata))
    return tuple(np.take_along_axis(x, pos, axis=-1) for x in operands)
