"""``tcgen05.ld`` / ``tcgen05.st`` shapes: which TMEM lane and column each register of a
warp's thread holds (PTX ISA 9.7.16.8.3 "Matrix fragments for tcgen05.ld/st").

Rows are TMEM lanes relative to the 32-lane (or 16-lane) slab the warp accesses
(warp ``w`` of a warpgroup accesses lanes ``32w .. 32w + 31``), columns are 32-bit
TMEM columns relative to the address's column; ``.xN`` repeats along columns::

    32x32b  .xN: register r of lane l holds (l, r)                              [32 x N]
    16x64b  .xN: (l // 4 + 8 * (l % 2), (l // 2) % 2 + 2 * r)                    [16 x 2N]
    16x128b .xN: (l // 4 + 8 * (r % 2), l % 4 + 4 * (r // 2))                    [16 x 4N]
    16x256b .xN: (l // 4 + 8 * ((r // 2) % 2), r % 2 + 2 * (l % 4) + 8 * (r // 4))  [16 x 8N]
"""

from __future__ import annotations

from ..errors import ShapeError
from .fragment import FragmentRule

TCGEN05_LD_SHAPES = {
    "32x32b": dict(rows=32, cols_per_x=1, regs_per_x=1, row="lane", col="i"),
    "16x64b": dict(rows=16, cols_per_x=2, regs_per_x=1, row="(lane >> 2) + 8 * (lane & 1)",
                   col="((lane >> 1) & 1) + 2 * i"),
    "16x128b": dict(rows=16, cols_per_x=4, regs_per_x=2, row="(lane >> 2) + 8 * (i & 1)",
                    col="(lane & 3) + 4 * (i >> 1)"),
    "16x256b": dict(rows=16, cols_per_x=8, regs_per_x=4, row="(lane >> 2) + 8 * ((i >> 1) & 1)",
                    col="(i & 1) + 2 * (lane & 3) + 8 * (i >> 2)"),
}
_NUMS = (1, 2, 4, 8, 16, 32, 64, 128)


def tcgen05_ld(shape: str, num: int = 1):
    """The :class:`~mmasim.placement.fragment.Fragment` of ``tcgen05.ld.<shape>.x<num>``
    (32-bit elements, no packing): ``coords(lane, r)`` is the (TMEM lane within the
    slab, TMEM column) that register ``r`` of ``lane`` reads."""
    if shape not in TCGEN05_LD_SHAPES:
        raise ShapeError(f"tcgen05.ld shape must be one of {', '.join(TCGEN05_LD_SHAPES)}; got {shape!r} "
                         "(16x32bx2 is not modelled)")
    if num not in _NUMS:
        raise ShapeError(f"tcgen05.ld .num must be .x1, .x2, ... .x128; got {num!r}")
    s = TCGEN05_LD_SHAPES[shape]
    rule = FragmentRule(f"tcgen05.ld.{shape}", "tcgen05.ld", "d", row=s["row"], col=s["col"],
                        elements=s["regs_per_x"] * num, storage="registers",
                        description=f"tcgen05.ld.{shape}.x{num}", source=__doc__.splitlines()[1])
    # the bound matrix is (M, N) = (TMEM lanes of the slab, TMEM columns)
    return rule.bind("d", s["rows"], s["cols_per_x"] * num, 0, 32)
