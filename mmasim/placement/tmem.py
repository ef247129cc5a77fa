"""``tcgen05.ld`` / ``tcgen05.st`` shapes: which TMEM lane and column each register of a
warp's thread holds (PTX ISA 9.7.16.8.3 "Matrix fragments for tcgen05.ld/st").

Gives :func:`tcgen05_ld` (the fragment of one shape and ``.num``, :data:`TCGEN05_LD_SHAPES`)
and :func:`tmem_datapath` (one CTA's accumulator rows under a data path layout A .. G,
:data:`TMEM_DATAPATHS`), each with what it rests on.  Rows are TMEM lanes relative to the slab
the warp accesses, columns 32-bit TMEM columns relative to the address's column.  Refuses an
unknown shape, ``.num`` or letter and an N the layout cannot hold (:class:`~mmasim.ShapeError`).
The formulas: docs/layouts.md, "What is modelled, and the formulas".
"""

from __future__ import annotations

from mmasim.errors import ShapeError
from mmasim.placement.fragment import FragmentRule

TCGEN05_LD_SHAPES = {
    "32x32b": dict(rows=32, cols_per_x=1, regs_per_x=1, row="lane", col="i"),
    "16x64b": dict(rows=16, cols_per_x=2, regs_per_x=1, row="(lane >> 2) + 8 * (lane & 1)",
                   col="((lane >> 1) & 1) + 2 * i"),
    "16x128b": dict(rows=16, cols_per_x=4, regs_per_x=2, row="(lane >> 2) + 8 * (i & 1)",
                    col="(lane & 3) + 4 * (i >> 1)"),
    "16x256b": dict(rows=16, cols_per_x=8, regs_per_x=4, row="(lane >> 2) + 8 * ((i >> 1) & 1)",
                    col="(i & 1) + 2 * (lane & 3) + 8 * (i >> 2)"),
    # two 16x32b accesses: threads 0-15 the first (taddr), 16-31 the second (taddr + immHalfSplitoff)
    "16x32bx2": dict(rows=16, cols_per_x=2, regs_per_x=1, row="lane & 15", col="(lane >> 4) * E + i"),
}
_NUMS = (1, 2, 4, 8, 16, 32, 64, 128)

#: what the tcgen05.ld formulas rest on: PTX's text gives only the register count
#: (``.num`` ``.b32`` registers, r0, r1, ...) and how many lanes / bits a warp accesses
#: (32 lanes x 32 bits, 16 lanes x 64 / 128 / 256 bits per .num); the placement itself
#: is in the figures
LD_EVIDENCE = ("partly checked: PTX ISA 9.0 §9.7.16.2.3.1 (text: a warp accesses {lanes} TMEM lanes, "
               "{bits} x .num bits of each, into .num .b32 registers r0, r1, ...; warp w of a warpgroup "
               "accesses lanes 32w..32w+31, §9.7.16.8.1 - checked); the "
               "per-thread placement is drawn in Figure {fig} (no formula in the text), not re-read here; "
               "the formula agrees with CUTLASS's SM100_TMEM_LOAD_{dp}dp{bits}b*x copy traits "
               "(cute/atom/copy_traits_sm100.hpp)")
_LD_FIG = {"32x32b": (32, 32, 183), "16x64b": (16, 64, 184), "16x128b": (16, 128, 185), "16x256b": (16, 256, 186)}
LD_EVIDENCE_X2 = ("partly checked: PTX ISA 9.0 §9.7.16.8.3 (text: 'The shape .16x32bx2 performs two accesses into "
                  "Tensor Memory of the shape .16x32b', the first at taddr, the second at taddr + immHalfSplitoff; "
                  "Table 49: .num registers - checked); which threads make which access is drawn only in the "
                  "figure (not compared with mmasim's formula): threads 0-15 the first, 16-31 the second, thread l reading TMEM lane "
                  "l % 16, as CUTLASS's SM100_TMEM_LOAD_16dp32b1x / 2x copy traits state (DstLayout "
                  "((16,2),32N):((64N,32N),1), cute/atom/copy_traits_sm100.hpp)")


def tcgen05_ld(shape: str, num: int = 1):
    """The :class:`~mmasim.placement.fragment.Fragment` of ``tcgen05.ld.<shape>.x<num>``
    (32-bit elements, no packing): ``coords(lane, r)`` is the (TMEM lane within the
    slab, TMEM column) that register ``r`` of ``lane`` reads."""
    if shape not in TCGEN05_LD_SHAPES:
        raise ShapeError(f"tcgen05.ld shape must be one of {', '.join(TCGEN05_LD_SHAPES)}; got {shape!r}")
    if num not in _NUMS:
        raise ShapeError(f"tcgen05.ld .num must be .x1, .x2, ... .x128; got {num!r}")
    s = TCGEN05_LD_SHAPES[shape]
    rule = FragmentRule(f"tcgen05.ld.{shape}", "tcgen05.ld", "d", row=s["row"], col=s["col"],
                        elements=s["regs_per_x"] * num, storage="registers",
                        description=f"tcgen05.ld.{shape}.x{num}", source=__doc__.splitlines()[1],
                        evidence=LD_EVIDENCE_X2 if shape == "16x32bx2" else
                        LD_EVIDENCE.format(lanes=_LD_FIG[shape][0], bits=_LD_FIG[shape][1],
                                           fig=_LD_FIG[shape][2], dp=_LD_FIG[shape][0]))
    # the bound matrix is (M, N) = (TMEM lanes of the slab, TMEM columns)
    return rule.bind("d", s["rows"], s["cols_per_x"] * num, 0, 32)


# The data path layouts of PTX's "Data path layout organization" (tcgen05), per CTA: which
# TMEM lane / column holds accumulator element (row, col) of the rows this CTA owns.
# The harness places accumulators with them; archs/layouts/ptx_tcgen05.toml cites each letter in
# the rule of the datapaths its qualifiers select.
TMEM_DATAPATHS = {
    # letter: (rows per CTA, columns per lane as a formula of N, row, col, valid, what)
    "A": (128, "N", "lane", "i", "", "M = 256, cta_group::2: each CTA's 128 rows, row i in lane i"),
    "B": (64, "N // 2", "lane % 64", "i + (N // 2) * (lane // 64)", "",
          "M = 128, cta_group::2, dense: 64 rows; columns N/2.. in lanes 64.. (halves folded)"),
    "C": (64, "N", "16 * (lane >> 5) + (lane & 15)", "i", "(lane & 31) < 16",
          "M = 128, cta_group::2, sparse: 64 rows, 16 per warp sub-partition (as F)"),
    "D": (128, "N", "lane", "i", "", "M = 128, cta_group::1: row i in lane i"),
    "E": (64, "N // 2", "lane % 64", "i + (N // 2) * (lane // 64)", "",
          "M = 64, .ws: 64 rows; columns N/2.. in lanes 64.. (as B)"),
    "F": (64, "N", "16 * (lane >> 5) + (lane & 15)", "i", "(lane & 31) < 16",
          "M = 64, cta_group::1: rows 16w..16w+15 in lanes 32w..32w+15"),
    "G": (32, "N // 4", "lane % 32", "i + (N // 4) * (lane // 32)", "",
          "M = 32, .ws: 32 rows; column quarters in the four 32-lane slabs"),
}


#: the 'Data Path Layout Organization' table (PTX ISA 9.0 §9.7.16.10.5) gives, per layout, the
#: datapath organization and lane alignment in text; the per-lane placement only in figures
_DP_ORG = {
    "A": ("M = 256, cta_group::2: 4x1, lane alignment 0", "205 and 206"),
    "B": ("M = 128, cta_group::2, dense A: 2x2, lane alignment 0", "207 and 208"),
    "C": ("M = 128, cta_group::2, sparse A: 4x1 with half the datapath, lane alignment 0 or 16", "209 and 210"),
    "D": ("M = 128, cta_group::1: 4x1, lane alignment 0", "211 and 212"),
    "E": ("M = 64, .ws: '2x3' as printed (2x2 read), lane alignment 0", "213 and 214"),
    "F": ("M = 64, non-.ws: 4x1 with half the datapath, lane alignment 0 or 16", "215 and 216"),
    "G": ("M = 32, .ws: 1x4, lane alignment 0", "217 and 218"),
}
DATAPATH_EVIDENCE = {
    x: (f"partly checked: PTX ISA 9.0 §9.7.16.10.5 table (layout {x}: {org}) checked; the per-lane "
        f"placement is drawn in Figures {fig} (no formula in the text), mmasim's placement is read from "
        "those figures, not compared with them cell by cell" + ("; mmasim models lane alignment 0" if "or 16" in org else ""))
    for x, (org, fig) in _DP_ORG.items()
}


def tmem_datapath(letter: str, n: int):
    """The TMEM image (128 lanes x columns) of one CTA's accumulator rows under data path
    layout ``letter`` (A .. G) for N = ``n``: a Fragment with ``storage == "tmem"``."""
    if letter not in TMEM_DATAPATHS:
        raise ShapeError(f"data path layout must be one of {', '.join(TMEM_DATAPATHS)}; got {letter!r}")
    rows, elements, row, col, valid, what = TMEM_DATAPATHS[letter]
    if not isinstance(n, int) or n <= 0 or n % 8 or (letter in "BE" and n % 16) or (letter == "G" and n % 32):
        raise ShapeError(f"layout {letter}: N = {n!r} is not a legal accumulator width for it")
    rule = FragmentRule(f"tcgen05.tmem.layout{letter}", "tcgen05.tmem", "d", lanes=128, elements=elements,
                        row=row, col=col, valid=valid, storage="tmem", description=what,
                        source="PTX ISA 9.7.16.10.5 'Data Path Layout Organization', layout " + letter,
                        evidence=DATAPATH_EVIDENCE[letter])
    return rule.bind("d", rows, n, 0, 32)
