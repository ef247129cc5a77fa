"""tcgen05 block-scale factors in Tensor Memory: the partition duplication the ISA requires.

PTX ISA 9.0 §9.7.16.10.7: "Scale factors for A and B matrices need to be duplicated to all 32
lane partitions of tensor memory".  The layouts (``archs/layouts/ptx_tcgen05_scales.toml``)
place each scale factor in the first partition (TMEM lanes 0..31); :func:`replicate` copies
those lanes into lanes 32..63, 64..95 and 96..127 (what ``Model.fragments`` returns), and
:func:`unpack_scale` reads an image back after checking that every partition holds the same
selected bytes (a :class:`~mmasim.ScaleError` otherwise: which copy a data path reads is not
documented, so an image that breaks the rule has no defined result here).
"""

from __future__ import annotations

import numpy as np

from ..errors import ScaleError

SCALE_OPERANDS = ("scale_a", "scale_b")
#: TMEM lanes per partition (one warp's sub-partition) and partitions per CTA
PARTITION_LANES = 32
PARTITIONS = 4


def in_tmem(lay, operand) -> bool:
    """Whether ``lay`` places a block-scale operand in Tensor Memory (tcgen05)."""
    return operand in SCALE_OPERANDS and lay.storage == "tmem"


def replicate(lay, operand, regs) -> np.ndarray:
    """``regs`` (the packed image, lanes 32.. empty) with partition 0 copied into every partition."""
    if not in_tmem(lay, operand):
        return regs
    out = np.array(regs, dtype=np.uint32, copy=True)
    for p in range(1, lay.lanes // PARTITION_LANES):
        out[p * PARTITION_LANES:(p + 1) * PARTITION_LANES] = out[:PARTITION_LANES]
    return out


def unpack_scale(model, operand, lay, regs) -> np.ndarray:
    """The scale matrix (``M x V`` / ``V x N`` container words) held in ``regs``; for a TMEM image,
    after checking that all four partitions hold the same selected bytes."""
    if not in_tmem(lay, operand):
        return lay.unpack(regs)
    first = lay.unpack(regs)          # shape and word checks
    r = np.asarray(regs)
    for p in range(1, lay.lanes // PARTITION_LANES):
        rolled = np.concatenate([r[p * PARTITION_LANES:], r[:p * PARTITION_LANES]])
        other = lay.unpack(rolled)
        if not np.array_equal(other, first):
            i, j = (int(x[0]) for x in np.nonzero(other != first))
            lane, e = lay.owner(i, j)
            raise ScaleError(
                f"{model.instruction}: {operand} in Tensor Memory must be duplicated in all four 32-lane partitions "
                f"(PTX ISA §9.7.16.10.7); element [{i}][{j}] is {int(first[i, j]):#04x} in lane {lane} but "
                f"{int(other[i, j]):#04x} in lane {lane + p * PARTITION_LANES} (column {e // 4}, byte {e % 4}); "
                f"Model.fragments('{operand}', S) writes every partition")
    return first


__all__ = ["SCALE_OPERANDS", "PARTITION_LANES", "PARTITIONS", "in_tmem", "replicate", "unpack_scale"]
