"""tcgen05 block-scale factors in Tensor Memory: the partition duplication the ISA requires.

PTX ISA 9.0 §9.7.16.10.7: "Scale factors for A and B matrices need to be duplicated to all 32
lane partitions of tensor memory".  The layouts (``archs/layouts/ptx_tcgen05_scales.toml``)
place each scale factor in the first partition of a CTA (TMEM lanes 0..31; with
``cta_group::2`` the pair's image of 256 lanes, CTA 1's first partition lanes 128..159 for
``scale_a``); :func:`replicate` copies those lanes into the other partitions (what
``Model.fragments`` returns), and :func:`unpack_scale` reads an image back after checking that
every partition holds the same selected bytes as the one it repeats (a :class:`~mmasim.ScaleError` otherwise: which copy a data path reads is not
documented, so an image that breaks the rule has no defined result here).
"""

from __future__ import annotations

import numpy as np

from mmasim.errors import ScaleError

SCALE_OPERANDS = ("scale_a", "scale_b")
#: TMEM lanes per partition (one warp's sub-partition) and partitions per CTA
PARTITION_LANES = 32
PARTITIONS = 4


def in_tmem(lay, operand) -> bool:
    """Whether ``lay`` places a block-scale operand in Tensor Memory (tcgen05)."""
    return operand in SCALE_OPERANDS and lay.storage == "tmem"


def sources(lay) -> list:
    """For each 32-lane partition of the image, the partition whose words it must repeat: itself
    where the layout places elements in it (an owning partition), else the nearest owning
    partition below it in the same CTA, else (a CTA with no owning partition) the source of the
    same partition of the CTA before.  So CTA 1's partitions repeat CTA 1's own rows of
    ``cta_group::2``'s ``scale_a``, every partition of the pair repeats lanes 0..31 of M = 256's
    ``scale_b``, and M = 128's ``scale_b`` (the 2x2 data path) repeats lanes 0..31 in partitions
    1, 4, 5 and lanes 64..95 in partitions 3, 6, 7."""
    owned = np.asarray(lay._valid).any(axis=1)       # lanes holding at least one element
    parts = lay.lanes // PARTITION_LANES
    own = [bool(owned[p * PARTITION_LANES:(p + 1) * PARTITION_LANES].any()) for p in range(parts)]
    out = []
    for p in range(parts):
        base = p - p % PARTITIONS
        below = [q for q in range(base, p + 1) if own[q]]
        out.append(below[-1] if below else (out[p - PARTITIONS] if p >= PARTITIONS else p))
    return out


def replicate(lay, operand, regs) -> np.ndarray:
    """``regs`` (the packed image, replica lanes empty) with each owning partition copied into
    the partitions that repeat it (:func:`sources`)."""
    if not in_tmem(lay, operand):
        return regs
    out = np.array(regs, dtype=np.uint32, copy=True)
    for p, s in enumerate(sources(lay)):
        if p != s:
            out[p * PARTITION_LANES:(p + 1) * PARTITION_LANES] = out[s * PARTITION_LANES:(s + 1) * PARTITION_LANES]
    return out


def unpack_scale(placement, operand, lay, regs) -> np.ndarray:
    """The scale matrix (``M x V`` / ``V x N`` container words) held in ``regs``; for a TMEM image,
    after checking that every partition holds the same selected bytes as the one it repeats."""
    if not in_tmem(lay, operand):
        return lay.unpack(regs)
    first = lay.unpack(regs)          # shape and word checks
    r = np.asarray(regs)
    P = PARTITION_LANES
    for p, s in enumerate(sources(lay)):
        if p == s:
            continue
        swapped = np.array(r, copy=True)
        swapped[s * P:(s + 1) * P] = r[p * P:(p + 1) * P]
        other = lay.unpack(swapped)
        if not np.array_equal(other, first):
            i, j = (int(x[0]) for x in np.nonzero(other != first))
            lane, e = lay.owner(i, j)
            raise ScaleError(
                f"{placement.instruction}: {operand} in Tensor Memory must be duplicated in all four 32-lane partitions "
                f"(PTX ISA §9.7.16.10.7); element [{i}][{j}] is {int(first[i, j]):#04x} in lane {lane} but "
                f"{int(other[i, j]):#04x} in lane {lane + (p - s) * P} (column {e // 4}, byte {e % 4}); "
                f"Model.fragments('{operand}', S) writes every partition")
    return first


__all__ = ["SCALE_OPERANDS", "PARTITION_LANES", "PARTITIONS", "in_tmem", "sources", "replicate", "unpack_scale"]
