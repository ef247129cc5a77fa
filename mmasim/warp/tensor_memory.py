"""``Model.warp`` of ``tcgen05.mma``, every form: the family record (``Family.warp``) hands each
``tcgen05.mma`` model to :func:`tcgen05_mma` here.  A and B are shared-memory images read through
their tcgen05 descriptors (or A a Tensor Memory image, :func:`mmasim.placement.a_tmem_layout`); C, D, block
scales and sparse metadata are Tensor Memory images; ``cta_group::2`` takes the CTA pair's
images.  Each operand is unpacked, the matrix form computes (so ``warp`` equals it by
construction) and D is packed.  The operands' forms are on :func:`tcgen05_mma`; which CTA holds
which half, where A and the metadata sit in TMEM and the 16-bit accumulator's placement
are stated with their evidence in docs/layouts.md.
"""

from __future__ import annotations

import numpy as np

from mmasim.errors import OperandError, ShapeError
from mmasim.placement.bind import a_tmem_layout, is_pair, layout, scale_operands, sparse_operand
from mmasim.placement.smem_packed import read_smem_operand

def _images(model, x, what, pair):
    """One shared-memory image, or (cta_group::2) the pair's two."""
    if not pair:
        return [x]
    if isinstance(x, np.ndarray) and x.ndim == 2 and x.shape[0] == 2:
        return [x[0], x[1]]
    if isinstance(x, (tuple, list)) and len(x) == 2:
        return list(x)
    raise OperandError(f"{model.instruction}: cta_group::2 takes {what} as a pair of shared-memory images "
                       f"(CTA 0's, CTA 1's): a tuple of two flat images or an array with a leading axis of 2")


def _check_major(name, major):
    if major not in ("K", "MN"):
        raise OperandError(f"{name} must be 'K' or 'MN'; got {major!r}")


def tcgen05_mma(model, a_regs, b_regs, c_regs, *, sparse_metadata=None, backend=None, sparsity_selector=0,
                a_descriptor=None, b_descriptor=None, a_major="K", b_major="K", scale_a=None, scale_b=None,
                byte_id_a=0, byte_id_b=0, thread_id_a=0, thread_id_b=0, lane_alignment=0, **options) -> np.ndarray:
    """D: the Tensor Memory image ``uint32 (TMEM lanes, columns)`` of ``tcgen05.mma``, for an
    ``M x N x K`` instruction (``M``, ``N``: ``model.layout("d").rows / .cols``):

    * A in shared memory (``a_descriptor`` given): the image and its tcgen05 descriptor word;
      a sparse instruction's A is the compressed ``M x K/2``
      (:func:`mmasim.placement.compress`).  With ``cta_group::2`` ``a_regs`` is a pair
      ``(cta0_image, cta1_image)``: CTA ``c``'s shared memory holds rows
      ``c * M/2 .. (c + 1) * M/2 - 1`` of A, both read through the one descriptor (its
      address is CTA-relative).  ``a_major`` / ``b_major``: ``"K"`` (default) or ``"MN"``.
    * A in Tensor Memory (``a_descriptor=None``): ``a_regs`` is the TMEM image of
      :func:`mmasim.placement.a_tmem_layout` (``(TMEM lanes, columns)``; with ``cta_group::2`` the pair's 256
      lanes, CTA ``c``'s lane ``l`` as lane ``128 c + l``).
    * B (``b_descriptor``): the image; with ``cta_group::2`` a pair: CTA ``c`` holds columns
      ``c * N/2 .. (c + 1) * N/2 - 1`` of B (``N/2 x K``, as its descriptor addresses it).
    * C / D: the TMEM image in ``model.layout("d")``'s data path layout (``cta_group::2``: the
      pair's 256 lanes).  An ``.f16`` accumulator is one element per 32-bit word, in its lower
      16 bits (C's upper 16 bits are ignored; D's are written 0).
    * ``sparse_metadata``: the TMEM image in ``model.layout("sparse_metadata", selector=...)``
      (the column pair at the metadata address), read with ``sparsity_selector``.
    * ``scale_a`` / ``scale_b`` (block-scaled kinds,
      :func:`mmasim.placement.bind.scale_operands`): the TMEM images of
      ``model.layout("scale_a" / "scale_b", byte_id=...)`` (their own columns, duplicated in
      all four 32-lane partitions) read with ``byte_id_a`` / ``byte_id_b``; with ``cta_group::2`` the pair's 256 lanes (CTA ``c``: its rows of
      scale_A, and all of scale_B; M = 128, the 2x2 data path: CTA ``c``'s rows of scale_A,
      and scale_B split between the lane halves as D's columns are).  Not modelled:
      block-scaled kinds with A in Tensor Memory.

    Where every lane group of the data path reads an operand in full (``.ws`` at M = 64 / 32,
    A of M = 128 ``cta_group::2`` dense) its image repeats it per group (the layout's
    ``copies``; a :class:`~mmasim.CopyMismatch` when the copies disagree).  ``lane_alignment``
    (0 or 16) places the half-data-path layouts C and F (C / D, A in TMEM, the metadata alike)
    in the lower or upper 16 lanes of each 32-lane sub-partition.  4- / 6-bit shared-memory
    operands are read packed or padded (:mod:`mmasim.placement.smem_packed`).
    """
    dp = model.datapath
    placement = model.placement
    pair = is_pair(placement)
    kw = scale_operands(placement, scale_a, scale_b, byte_id_a, byte_id_b, thread_id_a, thread_id_b)
    lc, ld = (layout(placement, o, lane_alignment=lane_alignment, **options) for o in ("c", "d"))
    M, N, K = ld.rows, ld.cols, dp.k
    ka = dp.stored_k if dp.sparse else K
    for name, major in (("a_major", a_major), ("b_major", b_major)):
        _check_major(name, major)
    if a_descriptor is None and a_major != "K":
        raise OperandError(f"{model.instruction}: A in Tensor Memory is row-major (PTX Table 53); a_major "
                           "applies to A in shared memory (pass a_descriptor)")
    if b_descriptor is None:
        raise OperandError(f"{model.instruction}: B is a shared-memory image; pass b_descriptor (its 64-bit "
                           "matrix descriptor, start address relative to the image)")
    ncta = 2 if pair else 1
    # whole containers, or 4- / 6-bit codes packed / padded as smem_packed says (PTX §9.7.16.10.4)
    B = np.concatenate([read_smem_operand(placement, "b", img, b_descriptor, N // ncta, K, b_major)
                        for img in _images(model, b_regs, "B", pair)], axis=0).T
    if a_descriptor is None:
        A = a_tmem_layout(placement, lane_alignment).unpack(a_regs)
    else:
        A = np.concatenate([read_smem_operand(placement, "a", img, a_descriptor, M // ncta, ka, a_major)
                            for img in _images(model, a_regs, "A", pair)], axis=0)
    C = lc.unpack(c_regs)
    cbits = model.format_of("c").container_bits
    if cbits < 32:      # one element per 32-bit TMEM word, in its lower bits (PTX §9.7.16.10.4.1)
        C = (C.astype(np.uint64) & np.uint64((1 << cbits) - 1)).astype(np.uint32)
    if dp.sparse and A.shape != (M, ka):
        raise ShapeError(f"{model.instruction}: the compressed A must be ({M}, {ka}); got {A.shape}")
    A, sp = sparse_operand(placement, A, sparse_metadata, sparsity_selector, lane_alignment=lane_alignment)
    kw.update(sp)
    return ld.pack(model(A, B, C, backend=backend, **kw))


__all__ = ["tcgen05_mma"]
