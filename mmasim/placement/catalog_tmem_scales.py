"""The built-in Tensor Memory layouts of tcgen05's block-scale factors (``scale_a`` / ``scale_b``
of ``.kind::mxf8f6f4``, ``.kind::mxf4``, ``.kind::mxf4nvf4``), each with its evidence
(:mod:`mmasim.placement.catalog`).

PTX ISA 9.0 §9.7.16.10.7 "Block Scaling": ``scale_A`` (``M x SFA_N``) and ``scale_B``
(``SFB_M x N``) reside in Tensor Memory and "need to be duplicated to all 32 lane partitions";
the scale factor A / B ID of the instruction descriptor picks the byte (``scale_vec::1X``), the
half word (``::2X``: 0 or 2) or the whole word (``::4X``: 0) of each 32-bit TMEM cell
(§9.7.16.10.7.2 / .3).  Here the ID is the layout's ``byte_id`` selector.  Lanes are TMEM lanes,
``registers`` TMEM columns (32-bit cells), element ``i`` of a lane byte ``i % 4`` of column
``i // 4``.  The lanes of the first partition (0..31) own the elements; ``Model.fragments``
writes the same words into the other three partitions, as the ISA requires, and ``warp`` /
``unfragment`` refuse an image whose partitions disagree (:mod:`mmasim.placement.tcgen05_scales`).
"""

from __future__ import annotations

from .catalog_base import _ISA, rule_maker

_SRC = "PTX ISA, 9.7.16.10.7 'Block Scaling' (tcgen05), 9.7.16.10.7.{x} 'Scale Factor {ab} ID'"

_TEXT = ("the text of §9.7.16.10.7 (scale_A is M x SFA_N and scale_B SFB_M x N, Table 54: M x 1 / 2 / 4 for "
         "scale_vec::1X / 2X / 4X; 'Scale factors for A and B matrices need to be duplicated to all 32 lane "
         "partitions of tensor memory') and of §9.7.16.10.7.{x}.1-3 (SF{ab}_ID is the byte offset in the Tensor "
         "Memory word for scale_vec::1X, the half-word offset (0 or 2) for ::2X, and must be 0 for ::4X, the "
         "four scale factors filling the word) checked")
_FIG = ("which TMEM lane and column hold {what} ({formula}) is drawn only in Figures {figs} (not read here); "
        "it agrees with CUTLASS's UMMA::tmem_sf_frg for the 4x1 data path (cute/atom/mma_traits_sm100_frag.hpp: "
        "index (m0, m1) of the MN mode ((32, MN/32)) at lane m0 and byte 4 * m1, scale factor s at byte s, "
        "replicated at lane strides of 32), and the order of the scale factors within the selected bytes "
        "(lowest byte = scale block 0) is assumed")

_EVIDENCE = {
    "tcgen05.tmem.scale_a.m128.cta1":
        "partly checked: " + _ISA + ": " + _TEXT.format(x=2, ab="A") + "; "
        + _FIG.format(what="row r of scale_A", formula="lane r % 32, column r // 32, in each 32-lane partition",
                      figs="231-233"),
    "tcgen05.tmem.scale_b.m128.cta1":
        "partly checked: " + _ISA + ": " + _TEXT.format(x=3, ab="B") + "; "
        + _FIG.format(what="column n of scale_B", formula="lane n % 32, column n // 32, in each 32-lane partition",
                      figs="240-242"),
}

R = rule_maker(_EVIDENCE)

_LEGAL = "byte_id <= 3 if V == 1 else (byte_id == 0 or byte_id == 2) if V == 2 else byte_id == 0"
_BYTES = "(i & 3) >= byte_id and (i & 3) < byte_id + V"

TMEM_SCALES = [
    R("tcgen05.tmem.scale_a.m128.cta1", "tcgen05.mma", "scale_a", lanes=128, m=128, bits=8, elements=16,
      row="(lane & 31) + 32 * (i >> 2)", col="(i & 3) - byte_id",
      valid="lane < 32 and " + _BYTES, selectors=("byte_id",), legal=_LEGAL, storage="tmem", qualifiers=(),
      description="scale_A (M = 128, cta_group::1) in 4 TMEM columns: row r in lane r % 32, column r // 32, "
                  "scale block v in byte SFA_ID + v of the cell (SFA_ID: the byte_id selector); the 32 lanes are "
                  "duplicated in all four 32-lane partitions",
      source=_SRC.format(x=2, ab="A")),
    R("tcgen05.tmem.scale_b.m128.cta1", "tcgen05.mma", "scale_b", lanes=128, m=128, bits=8,
      elements="4 * ((N + 31) // 32)",
      row="(i & 3) - byte_id", col="(lane & 31) + 32 * (i >> 2)",
      valid="lane < 32 and (lane & 31) + 32 * (i >> 2) < N and " + _BYTES, selectors=("byte_id",),
      legal=_LEGAL, storage="tmem", qualifiers=(),
      description="scale_B (M = 128, cta_group::1) in ceil(N / 32) TMEM columns: column n in lane n % 32, "
                  "TMEM column n // 32, scale block v in byte SFB_ID + v of the cell (SFB_ID: the byte_id "
                  "selector); duplicated in all four 32-lane partitions",
      source=_SRC.format(x=3, ab="B")),
]

__all__ = ["TMEM_SCALES"]
