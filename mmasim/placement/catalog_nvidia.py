"""The built-in NVIDIA layouts (dense ``mma.sync``, block scaling, ``wgmma``, ``tcgen05`` TMEM):
formulas from the PTX ISA, each with its evidence (:mod:`mmasim.placement.catalog`)."""

from __future__ import annotations

from .catalog_base import _ISA, rule_maker

_PTX = "PTX ISA, 9.7.14.5 'Matrix Fragments for mma.m{m}n{n}k{k}'"
_WG = "PTX ISA, 9.7.15.5.1.1 'Register Fragments' (wgmma.mma_async, m64nNk{k})"
_TM = "PTX ISA, 9.7.16.10.5 'Data Path Layout Organization' (tcgen05), layout {x}"


def _checked(section, what="the row / col formulas of the section's text"):
    return f"checked: {_ISA} §{section} ({what})"


_EV_WG = ("partly checked: {isa} §9.7.15.5.1.1.{n} gives the fragment's registers and element order "
          "in its text (checked); the lane placement is given only by {fig} (not read here): "
          "the formula is {what}, and agrees with CUTLASS's {cute} (thread, value) layout "
          "(cute/atom/mma_traits_sm90_gmma.hpp)").format
_EV_TM = ("partly checked: {isa} §9.7.16.10.5 table 'Data Path Layout Organization' (layout {x}: "
          "{org}) checked; the per-lane placement is drawn in {fig} (no formula in the text), read in "
          "an earlier session and not re-checked").format

# what each built-in rule's formulas were checked against (R() refuses a rule missing here)
_EVIDENCE = {
    # integer m8n8 and b1 fragments (issue 12): written from the PTX ISA's formulas; the
    # round trips hold, but the formulas have not been compared line by line with the text
    **{name: "unverified: written from the PTX ISA's m8n8k16 / m8n8k32 / b1 fragment formulas "
             "(§9.7.14.5.3-5, §9.7.14.5.10-11); not yet compared line by line with the text"
       for name in ("mma.m8n8k16.cd.s32", "mma.m8n8k32.cd.s32", "mma.m8n8k128.cd.s32", "mma.m8n8k16.a.8bit", "mma.m8n8k16.b.8bit", "mma.m8n8k32.a.4bit", "mma.m8n8k32.b.4bit",
                    "mma.m8n8k128.a.1bit", "mma.m8n8k128.b.1bit", "mma.m16n8k128.a.1bit",
                    "mma.m16n8k128.b.1bit", "mma.m16n8k256.a.1bit", "mma.m16n8k256.b.1bit")},
    "mma.m16n8.cd":
        _checked("9.7.14.5.6 to 9.7.14.5.11", "accumulators C / D: the same row / col formulas in each "
                 "m16n8k4, k8, k16, k32 and k64 section, for .f16, .f32, .f64 and .s32"),
    "mma.m16n8k16.a.16bit":
        _checked("9.7.14.5.8", ".f16 / .bf16 A"),
    "mma.m16n8k16.b.16bit":
        _checked("9.7.14.5.8", ".f16 / .bf16 B"),
    "mma.m16n8k8.a.16bit":
        _checked("9.7.14.5.7", ".f16 / .bf16 A"),
    "mma.m16n8k8.b.16bit":
        _checked("9.7.14.5.7", ".f16 / .bf16 B"),
    "mma.m16n8k4.a.32bit":
        _checked("9.7.14.5.6", ".tf32 and .f64 A"),
    "mma.m16n8k4.b.32bit":
        _checked("9.7.14.5.6", ".tf32 and .f64 B"),
    "mma.m16n8k8.a.32bit":
        _checked("9.7.14.5.7", ".tf32 and .f64 A"),
    "mma.m16n8k8.b.32bit":
        _checked("9.7.14.5.7", ".tf32 and .f64 B"),
    "mma.m16n8k16.a.64bit":
        _checked("9.7.14.5.8", ".f64 A"),
    "mma.m16n8k16.b.64bit":
        _checked("9.7.14.5.8", ".f64 B"),
    "mma.m16n8k16.a.8bit":
        _checked("9.7.14.5.9", ".u8 / .s8 / .e4m3 / .e5m2 A"),
    "mma.m16n8k16.b.8bit":
        _checked("9.7.14.5.9", ".u8 / .s8 / .e4m3 / .e5m2 B"),
    "mma.m16n8k32.a.8bit":
        _checked("9.7.14.5.10", ".s8 / .u8 / .e4m3 / .e5m2 / .e3m2 / .e2m3 / .e2m1 A"),
    "mma.m16n8k32.b.8bit":
        _checked("9.7.14.5.10", ".s8 / .u8 / .e4m3 / .e5m2 / .e3m2 / .e2m3 / .e2m1 B"),
    "mma.m16n8k64.a.4bit":
        _checked("9.7.14.5.11", ".s4 / .u4 / .e2m1 A"),
    "mma.m16n8k64.b.4bit":
        _checked("9.7.14.5.11", ".s4 / .u4 / .e2m1 B"),
    "mma.m16n8k32.a.4bit":
        _checked("9.7.14.5.10", ".s4 / .u4 A"),
    "mma.m16n8k32.b.4bit":
        _checked("9.7.14.5.10", ".s4 / .u4 B"),
    "mma.m8n8k4.a.f64":
        _checked("9.7.14.5.2", ".f64 A"),
    "mma.m8n8k4.b.f64":
        _checked("9.7.14.5.2", ".f64 B"),
    "mma.m8n8k4.cd.f64":
        _checked("9.7.14.5.2", ".f64 C / D"),
    "mma.m8n8k4.a.f16.row":
        _checked("9.7.14.5.1", "row-major A, and the quad-pair table: MMA computation q on lanes "
                 "4q..4q+3 and 4q+16..4q+19"),
    "mma.m8n8k4.a.f16.col":
        _checked("9.7.14.5.1", "column-major A, and the quad-pair table"),
    "mma.m8n8k4.b.f16.col":
        _checked("9.7.14.5.1", "column-major B, and the quad-pair table"),
    "mma.m8n8k4.b.f16.row":
        _checked("9.7.14.5.1", "row-major B, and the quad-pair table"),
    "mma.m8n8k4.cd.f16":
        _checked("9.7.14.5.1", ".f16 accumulators, and the quad-pair table"),
    "mma.m8n8k4.cd.f32":
        _checked("9.7.14.5.1", ".f32 accumulators, and the quad-pair table"),
    "wgmma.m64nNk16.a.16bit":
        _EV_WG(isa=_ISA, n=1, fig="Figure 148", cute="ALayout_64x16",
               what="mma.m16n8k16's .f16 A per warp, warp w of the warpgroup holding rows 16w..16w+15"),
    "wgmma.m64nNk8.a.32bit":
        _EV_WG(isa=_ISA, n=2, fig="Figure 150", cute="ALayout_64x8",
               what="mma.m16n8k8's .tf32 A per warp, warp w holding rows 16w..16w+15"),
    "wgmma.m64nNk32.a.8bit":
        _EV_WG(isa=_ISA, n=3, fig="Figure 152", cute="ALayout_64x32",
               what="mma.m16n8k32's 8-bit A per warp, warp w holding rows 16w..16w+15"),
    "wgmma.m64nN.cd":
        _EV_WG(isa=_ISA, n="1 to 3", fig="Figures 149, 151 and 153", cute="CLayout_64xN",
               what="mma.m16n8's C per warp and per 8 columns (warp w: rows 16w..16w+15); it agrees with "
                    "published readings of Figure 149 (thread 0 holds (0, 0), (0, 1), (8, 0), (8, 1), "
                    "repeating every 8 columns)"),
    "tcgen05.tmem.m128.cta1":
        _EV_TM(isa=_ISA, x="D", org="M = 128, cta_group::1, datapath 4x1, lane alignment 0",
               fig="Figures 211 and 212"),
    "tcgen05.tmem.m64.cta1":
        _EV_TM(isa=_ISA, x="F", org="M = 64, non-.ws, datapath 4x1 with half the lanes, lane alignment 0 or 16 "
               "(mmasim models alignment 0)", fig="Figures 215 and 216"),
}

R = rule_maker(_EVIDENCE)


# ---------------------------------------------------------------- mma.sync
_CD_M16N8 = dict(row="g + 8 * (i >> 1)", col="2 * t + (i & 1)", elements=4)

MMA_SYNC = [
    # C and D of every m16n8kK shape: c0..c3
    R("mma.m16n8.cd", "mma.sync", ("c", "d"), m=16, n=8, **_CD_M16N8,
      description="row = groupID (c0, c1) or groupID + 8 (c2, c3); col = threadID_in_group * 2 + (i & 1)",
      source=_PTX.format(m=16, n=8, k="*")),
    # 16-bit A / B (f16, bf16)
    R("mma.m16n8k16.a.16bit", "mma.sync", "a", m=16, n=8, k=16, bits=16, elements=8,
      row="g + 8 * ((i >> 1) & 1)", col="2 * t + (i & 1) + 8 * (i >> 2)",
      description="a0..a7 (.f16x2 x4): row = groupID for a0, a1, a4, a5, else groupID + 8; "
                  "col = threadID_in_group * 2 + (i & 1), + 8 for a4..a7",
      source=_PTX.format(m=16, n=8, k=16)),
    R("mma.m16n8k16.b.16bit", "mma.sync", "b", m=16, n=8, k=16, bits=16, elements=4,
      row="2 * t + (i & 1) + 8 * (i >> 1)", col="g",
      description="b0..b3 (.f16x2 x2): row = threadID_in_group * 2 + (i & 1), + 8 for b2, b3; col = groupID",
      source=_PTX.format(m=16, n=8, k=16)),
    R("mma.m16n8k8.a.16bit", "mma.sync", "a", m=16, n=8, k=8, bits=16, elements=4,
      row="g + 8 * (i >> 1)", col="2 * t + (i & 1)",
      description="a0..a3 (.f16x2 x2): row = groupID (a0, a1) or groupID + 8 (a2, a3); "
                  "col = threadID_in_group * 2 + (i & 1)",
      source=_PTX.format(m=16, n=8, k=8)),
    R("mma.m16n8k8.b.16bit", "mma.sync", "b", m=16, n=8, k=8, bits=16, elements=2,
      row="2 * t + i", col="g",
      description="b0, b1 (.f16x2): row = threadID_in_group * 2 + i; col = groupID",
      source=_PTX.format(m=16, n=8, k=8)),
    # 32-bit (tf32) and 64-bit (f64, sm_90) elements: same formulas
    R("mma.m16n8k4.a.32bit", "mma.sync", "a", m=16, n=8, k=4, bits=(32, 64), elements=2,
      row="g + 8 * i", col="t",
      description="a0, a1: row = groupID (a0) or groupID + 8 (a1); col = threadID_in_group",
      source=_PTX.format(m=16, n=8, k=4)),
    R("mma.m16n8k4.b.32bit", "mma.sync", "b", m=16, n=8, k=4, bits=(32, 64), elements=1,
      row="t", col="g", description="b0: row = threadID_in_group; col = groupID",
      source=_PTX.format(m=16, n=8, k=4)),
    R("mma.m16n8k8.a.32bit", "mma.sync", "a", m=16, n=8, k=8, bits=(32, 64), elements=4,
      row="g + 8 * (i & 1)", col="t + 4 * (i >> 1)",
      description="a0..a3: row = groupID (a0, a2) or groupID + 8 (a1, a3); "
                  "col = threadID_in_group (a0, a1) or threadID_in_group + 4 (a2, a3)",
      source=_PTX.format(m=16, n=8, k=8)),
    R("mma.m16n8k8.b.32bit", "mma.sync", "b", m=16, n=8, k=8, bits=(32, 64), elements=2,
      row="t + 4 * i", col="g",
      description="b0, b1: row = threadID_in_group (b0) or threadID_in_group + 4 (b1); col = groupID",
      source=_PTX.format(m=16, n=8, k=8)),
    R("mma.m16n8k16.a.64bit", "mma.sync", "a", m=16, n=8, k=16, bits=64, elements=8,
      row="g + 8 * (i & 1)", col="t + 4 * (i >> 1)",
      description="a0..a7 (.f64): row = groupID for even i, groupID + 8 for odd i; "
                  "col = threadID_in_group + 4 * (i >> 1)",
      source=_PTX.format(m=16, n=8, k=16)),
    R("mma.m16n8k16.b.64bit", "mma.sync", "b", m=16, n=8, k=16, bits=64, elements=4,
      row="t + 4 * i", col="g",
      description="b0..b3 (.f64): row = threadID_in_group + 4 * i; col = groupID",
      source=_PTX.format(m=16, n=8, k=16)),
    # 8-bit containers (e4m3, e5m2, s8/u8, and the kind::f8f6f4 e3m2 / e2m3 / e2m1 bytes)
    R("mma.m16n8k16.a.8bit", "mma.sync", "a", m=16, n=8, k=16, bits=8, elements=8,
      row="g + 8 * (i >> 2)", col="4 * t + (i & 3)",
      description="a0..a7 (4 bytes per register, x2): row = groupID (a0..a3) or groupID + 8 (a4..a7); "
                  "col = threadID_in_group * 4 + (i & 3)",
      source=_PTX.format(m=16, n=8, k=16)),
    R("mma.m16n8k16.b.8bit", "mma.sync", "b", m=16, n=8, k=16, bits=8, elements=4,
      row="4 * t + i", col="g",
      description="b0..b3 (one register): row = threadID_in_group * 4 + i; col = groupID",
      source=_PTX.format(m=16, n=8, k=16)),
    R("mma.m16n8k32.a.8bit", "mma.sync", "a", m=16, n=8, k=32, bits=8, elements=16,
      row="g + 8 * ((i >> 2) & 1)", col="4 * t + (i & 3) + 16 * (i >> 3)",
      description="a0..a15 (4 bytes per register, x4): row = groupID for a0..a3, a8..a11, else groupID + 8; "
                  "col = threadID_in_group * 4 + (i & 3), + 16 for a8..a15",
      source=_PTX.format(m=16, n=8, k=32)),
    R("mma.m16n8k32.b.8bit", "mma.sync", "b", m=16, n=8, k=32, bits=8, elements=8,
      row="4 * t + (i & 3) + 16 * (i >> 2)", col="g",
      description="b0..b7 (x2): row = threadID_in_group * 4 + (i & 3), + 16 for b4..b7; col = groupID",
      source=_PTX.format(m=16, n=8, k=32)),
    # 4-bit codes packed eight per register (kind::mxf4 / mxf4nvf4 e2m1, s4/u4)
    R("mma.m16n8k64.a.4bit", "mma.sync", "a", m=16, n=8, k=64, bits=4, elements=32,
      row="g + 8 * ((i >> 3) & 1)", col="8 * t + (i & 7) + 32 * (i >> 4)",
      description="a0..a31 (8 codes per register, x4): row = groupID for a0..a7, a16..a23, else groupID + 8; "
                  "col = threadID_in_group * 8 + (i & 7), + 32 for a16..a31",
      source=_PTX.format(m=16, n=8, k=64)),
    R("mma.m16n8k64.b.4bit", "mma.sync", "b", m=16, n=8, k=64, bits=4, elements=16,
      row="8 * t + (i & 7) + 32 * (i >> 3)", col="g",
      description="b0..b15 (x2): row = threadID_in_group * 8 + (i & 7), + 32 for b8..b15; col = groupID",
      source=_PTX.format(m=16, n=8, k=64)),
    R("mma.m16n8k32.a.4bit", "mma.sync", "a", m=16, n=8, k=32, bits=4, elements=16,
      row="g + 8 * (i >> 3)", col="8 * t + (i & 7)",
      description="a0..a15 (x2): row = groupID (a0..a7) or groupID + 8 (a8..a15); "
                  "col = threadID_in_group * 8 + (i & 7)",
      source=_PTX.format(m=16, n=8, k=32)),
    R("mma.m16n8k32.b.4bit", "mma.sync", "b", m=16, n=8, k=32, bits=4, elements=8,
      row="8 * t + i", col="g",
      description="b0..b7 (one register): row = threadID_in_group * 8 + i; col = groupID",
      source=_PTX.format(m=16, n=8, k=32)),
    # --- integer (issue 12): m8n8k16 (.s8/.u8), m8n8k32 (.s4/.u4) and the single-bit (.b1) shapes
    R("mma.m8n8k16.a.8bit", "mma.sync", "a", m=8, n=8, k=16, bits=8, elements=4,
      row="g", col="4 * t + i",
      description="a0..a3 (one register): row = groupID; col = threadID_in_group * 4 + i",
      source=_PTX.format(m=8, n=8, k=16)),
    R("mma.m8n8k16.b.8bit", "mma.sync", "b", m=8, n=8, k=16, bits=8, elements=4,
      row="4 * t + i", col="g",
      description="b0..b3 (one register): row = threadID_in_group * 4 + i; col = groupID",
      source=_PTX.format(m=8, n=8, k=16)),
    R("mma.m8n8k32.a.4bit", "mma.sync", "a", m=8, n=8, k=32, bits=4, elements=8,
      row="g", col="8 * t + i",
      description="a0..a7 (one register): row = groupID; col = threadID_in_group * 8 + i",
      source=_PTX.format(m=8, n=8, k=32)),
    R("mma.m8n8k32.b.4bit", "mma.sync", "b", m=8, n=8, k=32, bits=4, elements=8,
      row="8 * t + i", col="g",
      description="b0..b7 (one register): row = threadID_in_group * 8 + i; col = groupID",
      source=_PTX.format(m=8, n=8, k=32)),
    R("mma.m8n8k128.a.1bit", "mma.sync", "a", m=8, n=8, k=128, bits=1, elements=32,
      row="g", col="32 * t + i",
      description="a0..a31 (one register): row = groupID; col = threadID_in_group * 32 + i",
      source=_PTX.format(m=8, n=8, k=128)),
    R("mma.m8n8k128.b.1bit", "mma.sync", "b", m=8, n=8, k=128, bits=1, elements=32,
      row="32 * t + i", col="g",
      description="b0..b31 (one register): row = threadID_in_group * 32 + i; col = groupID",
      source=_PTX.format(m=8, n=8, k=128)),
    R("mma.m16n8k128.a.1bit", "mma.sync", "a", m=16, n=8, k=128, bits=1, elements=64,
      row="g + 8 * (i >> 5)", col="32 * t + (i & 31)",
      description="a0..a63 (x2): row = groupID (a0..a31) or groupID + 8 (a32..a63); "
                  "col = threadID_in_group * 32 + (i & 31)",
      source=_PTX.format(m=16, n=8, k=128)),
    R("mma.m16n8k128.b.1bit", "mma.sync", "b", m=16, n=8, k=128, bits=1, elements=32,
      row="32 * t + i", col="g",
      description="b0..b31 (one register): row = threadID_in_group * 32 + i; col = groupID",
      source=_PTX.format(m=16, n=8, k=128)),
    R("mma.m16n8k256.a.1bit", "mma.sync", "a", m=16, n=8, k=256, bits=1, elements=128,
      row="g + 8 * ((i >> 5) & 1)", col="32 * t + (i & 31) + 128 * (i >> 6)",
      description="a0..a127 (x4): row = groupID for a0..a31, a64..a95, else groupID + 8; "
                  "col = threadID_in_group * 32 + (i & 31), + 128 for a64..a127",
      source=_PTX.format(m=16, n=8, k=256)),
    R("mma.m16n8k256.b.1bit", "mma.sync", "b", m=16, n=8, k=256, bits=1, elements=64,
      row="32 * t + (i & 31) + 128 * (i >> 5)", col="g",
      description="b0..b63 (x2): row = threadID_in_group * 32 + (i & 31), + 128 for b32..b63; col = groupID",
      source=_PTX.format(m=16, n=8, k=256)),
    *[R(f"mma.m8n8k{_k}.cd.s32", "mma.sync", ("c", "d"), m=8, n=8, k=_k, bits=32, elements=2,
        row="g", col="2 * t + i",
        description="c0, c1 (.s32): row = groupID; col = threadID_in_group * 2 + i",
        source=_PTX.format(m=8, n=8, k=_k)) for _k in (16, 32, 128)],
    # m8n8k4 with .f64
    R("mma.m8n8k4.a.f64", "mma.sync", "a", m=8, n=8, k=4, bits=64, elements=1, row="g", col="t",
      description="a0: row = groupID; col = threadID_in_group", source=_PTX.format(m=8, n=8, k=4) + " with .f64"),
    R("mma.m8n8k4.b.f64", "mma.sync", "b", m=8, n=8, k=4, bits=64, elements=1, row="t", col="g",
      description="b0: row = threadID_in_group; col = groupID", source=_PTX.format(m=8, n=8, k=4) + " with .f64"),
    R("mma.m8n8k4.cd.f64", "mma.sync", ("c", "d"), m=8, n=8, k=4, bits=64, elements=2,
      row="g", col="2 * t + i",
      description="c0, c1: row = groupID; col = threadID_in_group * 2 + i",
      source=_PTX.format(m=8, n=8, k=4) + " with .f64"),
]

# m8n8k4 with .f16 (Volta's HMMA.884): four quad pairs, each computing its own
# 8x8x4 product.  Quad pair q = lanes 4q..4q+3 and 4q+16..4q+19, i.e. (lane >> 2) & 3;
# lanes 16..31 hold the upper half (rows or columns 4..7).
_QP = dict(m=8, n=8, k=4, bits=16, blocks=4, block="(lane >> 2) & 3")
_SRC884 = _PTX.format(m=8, n=8, k=4) + " with .f16 (quad pairs)"
MMA_SYNC += [
    R("mma.m8n8k4.a.f16.row", "mma.sync", "a", alayout="row", elements=4, **_QP,
      row="(lane & 3) + 4 * (lane >> 4)", col="i",
      description="a0..a3 of .row A: row = %laneid % 4 (lanes < 16) or %laneid % 4 + 4; col = i",
      source=_SRC884),
    R("mma.m8n8k4.a.f16.col", "mma.sync", "a", alayout="col", elements=4, **_QP,
      row="i + 4 * (lane >> 4)", col="lane & 3",
      description="a0..a3 of .col A: row = i (lanes < 16) or i + 4; col = %laneid % 4",
      source=_SRC884),
    R("mma.m8n8k4.b.f16.col", "mma.sync", "b", blayout="col", elements=4, **_QP,
      row="i", col="(lane & 3) + 4 * (lane >> 4)",
      description="b0..b3 of .col B: row = i; col = %laneid % 4 (lanes < 16) or %laneid % 4 + 4",
      source=_SRC884),
    R("mma.m8n8k4.b.f16.row", "mma.sync", "b", blayout="row", elements=4, **_QP,
      row="lane & 3", col="i + 4 * (lane >> 4)",
      description="b0..b3 of .row B: row = %laneid % 4; col = i (lanes < 16) or i + 4",
      source=_SRC884),
    R("mma.m8n8k4.cd.f16", "mma.sync", ("c", "d"), elements=8, **_QP,
      row="(lane & 3) + 4 * (lane >> 4)", col="i",
      description="c0..c7 (.f16x2 x4): row = %laneid % 4 (lanes < 16) or %laneid % 4 + 4; col = i",
      source=_SRC884),
    R("mma.m8n8k4.cd.f32", "mma.sync", ("c", "d"), elements=8, **{**_QP, "bits": 32},
      row="(lane & 1) + (i & 2) + 4 * (lane >> 4)", col="(i & 4) + (lane & 2) + (i & 1)",
      description="c0..c7 (.f32): row = X (lanes < 16) or X + 4 with X = (%laneid & 0b1) + (i & 0b10); "
                  "col = (i & 0b100) + (%laneid & 0b10) + (i & 0b1)",
      source=_SRC884),
]

# ---------------------------------------------------------------- wgmma (128 threads)
WGMMA = [
    R("wgmma.m64nNk16.a.16bit", "wgmma.mma_async", "a", lanes=128, m=64, k=16, bits=16, elements=8,
      row="16 * w + g + 8 * ((i >> 1) & 1)", col="2 * t + (i & 1) + 8 * (i >> 2)",
      description="A from registers: warp w of the warpgroup holds rows 16w..16w+15 as mma.m16n8k16's A",
      source=_WG.format(k=16)),
    R("wgmma.m64nNk8.a.32bit", "wgmma.mma_async", "a", lanes=128, m=64, k=8, bits=32, elements=4,
      row="16 * w + g + 8 * (i & 1)", col="t + 4 * (i >> 1)",
      description="A (tf32) from registers: warp w holds rows 16w..16w+15 as mma.m16n8k8's tf32 A",
      source=_WG.format(k=8)),
    R("wgmma.m64nNk32.a.8bit", "wgmma.mma_async", "a", lanes=128, m=64, k=32, bits=8, elements=16,
      row="16 * w + g + 8 * ((i >> 2) & 1)", col="4 * t + (i & 3) + 16 * (i >> 3)",
      description="A (e4m3 / e5m2) from registers: warp w holds rows 16w..16w+15 as mma.m16n8k32's A",
      source=_WG.format(k=32)),
    R("wgmma.m64nN.cd", "wgmma.mma_async", ("c", "d"), lanes=128, m=64, elements="N // 2",
      row="16 * w + g + 8 * ((i >> 1) & 1)", col="8 * (i >> 2) + 2 * t + (i & 1)",
      description="accumulator d0..d(N/2-1): row = 16 * warp + groupID + 8 * ((i >> 1) & 1); "
                  "col = 8 * (i >> 2) + threadID_in_group * 2 + (i & 1)",
      source=_WG.format(k="K")),
]

# ---------------------------------------------------------------- tcgen05 TMEM (accumulator)
TCGEN05 = [
    R("tcgen05.tmem.m128.cta1", "tcgen05.mma", ("c", "d"), lanes=128, m=128, bits=32, elements="N",
      row="lane", col="i", storage="tmem", qualifiers=(),
      description="M = 128, cta_group::1: row i of D in TMEM lane i, column j in TMEM column j",
      source=_TM.format(x="D")),
    R("tcgen05.tmem.m64.cta1", "tcgen05.mma", ("c", "d"), lanes=128, m=64, bits=32, elements="N",
      row="16 * (lane >> 5) + (lane & 15)", col="i", valid="(lane & 31) < 16", storage="tmem", qualifiers=(),
      description="M = 64, cta_group::1: rows 16w..16w+15 in TMEM lanes 32w..32w+15 (the lower half of "
                  "each warp's sub-partition), column j in TMEM column j",
      source=_TM.format(x="F")),
]

# cta_group::2 (the CTA pair: lanes 0..127 are CTA 0's TMEM, 128..255 CTA 1's) and .ws
_EV_PAIR = ("partly checked: " + _ISA + " §9.7.16.10.5 table: {sel} uses layout {x} ({org}; checked); the "
            "per-CTA placement is tmem_datapath('{x}'), drawn in Figures {fig} (read in an earlier session, "
            "not re-checked){pair}").format
_PAIR = ("; the pair's image stacks CTA 0's TMEM lanes (0..127) and CTA 1's (128..255), CTA c holding rows "
         "c * M/2 .. of D (assumed: the text says only that the CTA pair computes the M x N product)")
_EVIDENCE.update({
    "tcgen05.tmem.m256.cta2": _EV_PAIR(sel="M = 256, cta_group::2, either sparsity", x="A", org="4x1, lane "
                                       "alignment 0", fig="205 and 206", pair=_PAIR),
    "tcgen05.tmem.m128.cta2": _EV_PAIR(sel="M = 128, cta_group::2, dense A", x="B", org="2x2, lane alignment 0",
                                       fig="207 and 208", pair=_PAIR),
    "tcgen05.tmem.m128.cta2.sp": _EV_PAIR(sel="M = 128, cta_group::2, sparse A", x="C", org="4x1 with half the "
                                          "datapath, lane alignment 0 or 16 (mmasim: 0)", fig="209 and 210",
                                          pair=_PAIR),
    "tcgen05.tmem.m128.ws": _EV_PAIR(sel="M = 128, cta_group::1, .ws either", x="D", org="4x1, lane alignment 0",
                                     fig="211 and 212", pair=""),
    "tcgen05.tmem.m64.ws": _EV_PAIR(sel="M = 64, .ws", x="E", org="'2x3' as printed, read 2x2; lane alignment 0",
                                    fig="213 and 214", pair=""),
    "tcgen05.tmem.m32.ws": _EV_PAIR(sel="M = 32, .ws", x="G", org="1x4, lane alignment 0", fig="217 and 218",
                                    pair=""),
})
TCGEN05 += [
    R("tcgen05.tmem.m256.cta2", "tcgen05.mma", ("c", "d"), lanes=256, m=256, bits=32, elements="N",
      row="lane", col="i", storage="tmem", qualifiers=("cta_group::2",),
      description="M = 256, cta_group::2 (layout A per CTA): row r in lane r of CTA r // 128 (pair lane r)",
      source=_TM.format(x="A")),
    R("tcgen05.tmem.m128.cta2", "tcgen05.mma", ("c", "d"), lanes=256, m=128, bits=32, elements="N // 2",
      row="64 * (lane >> 7) + (lane & 63)", col="i + (N // 2) * ((lane & 127) >> 6)", storage="tmem",
      qualifiers=("cta_group::2",), sparse=False,
      description="M = 128, cta_group::2, dense (layout B per CTA): CTA c holds rows 64c .. 64c + 63; "
                  "element [64c + i, j] in its lane i + 64 * (j // (N/2)), column j % (N/2)",
      source=_TM.format(x="B")),
    R("tcgen05.tmem.m128.cta2.sp", "tcgen05.mma", ("c", "d"), lanes=256, m=128, bits=32, elements="N",
      row="64 * (lane >> 7) + 16 * ((lane & 127) >> 5) + (lane & 15)", col="i", valid="(lane & 31) < 16",
      storage="tmem", qualifiers=("cta_group::2",), sparse=True,
      description="M = 128, cta_group::2, sparse (layout C per CTA): CTA c holds rows 64c .., 16 per warp "
                  "sub-partition in its lower 16 lanes",
      source=_TM.format(x="C")),
    R("tcgen05.tmem.m128.ws", "tcgen05.mma", ("c", "d"), lanes=128, m=128, bits=32, elements="N",
      row="lane", col="i", storage="tmem", qualifiers=("ws",),
      description="M = 128, .ws (layout D): row i in TMEM lane i", source=_TM.format(x="D")),
    R("tcgen05.tmem.m64.ws", "tcgen05.mma", ("c", "d"), lanes=128, m=64, bits=32, elements="N // 2",
      row="lane & 63", col="i + (N // 2) * (lane >> 6)", storage="tmem", qualifiers=("ws",),
      description="M = 64, .ws (layout E): element [i, j] in lane i + 64 * (j // (N/2)), column j % (N/2)",
      source=_TM.format(x="E")),
    R("tcgen05.tmem.m32.ws", "tcgen05.mma", ("c", "d"), lanes=128, m=32, bits=32, elements="N // 4",
      row="lane & 31", col="i + (N // 4) * (lane >> 5)", storage="tmem", qualifiers=("ws",),
      description="M = 32, .ws (layout G): element [i, j] in lane i + 32 * (j // (N/4)), column j % (N/4)",
      source=_TM.format(x="G")),
]

# ---------------------------------------------------------------- block scaling (mma.sync kind::mx*)
# PTX ISA §9.7.14.3 "Block Scaling for mma.sync" (9.x numbering): scale-a-data / scale-b-data
# are one .b32 register per thread; {byte-id, thread-id} pick the bytes and the threads of
# each quad that contribute SF_A / SF_B.  Element i of a lane is byte i of that register.
_BS = "PTX ISA, 9.7.14.3 'Block Scaling for mma.sync' (Figures 43-45, Table 37)"
_BS_TEXT = ("the section's text: 'thread-id-a' 0 selects the thread pair %laneid % 4 == 0 or 1, 1 the pair "
            "%laneid % 4 == 2 or 3; 'thread-id-b': each thread with %laneid % 4 == thread-id-b; .scale_vec::1X "
            "one byte at byte-id, ::2X the byte pair at byte-id (0 lower, 2 upper), ::4X all four bytes "
            "(byte-id 0); Table 37's valid selector values")
_EVIDENCE.update({
    "mma.block_scale.scale_a":
        "partly checked: " + _ISA + " §9.7.14.3, " + _BS_TEXT + " (checked). Which row each lane of the pair "
        "holds (%laneid % 2 == 1: groupID + 8) is drawn only in Figure 43 and the order of the scales within "
        "the byte pair / four bytes (lowest byte = block 0) only in Figure 45, neither read here; the row rule "
        "agrees with CUTLASS's SM120 block-scaled SFALayout (cute/atom/mma_traits_sm120.hpp, thread mode "
        "(2,2,8):(8,0,1)) and the byte order is assumed (lowest first, as every other sub-word operand)",
    "mma.block_scale.scale_b":
        "partly checked: " + _ISA + " §9.7.14.3, " + _BS_TEXT + " (checked). That thread 4 * groupID + "
        "thread-id-b holds column groupID is drawn only in Figure 44 (not read here) and agrees with CUTLASS's "
        "SM120 SFBLayout (thread mode (4,8):(0,1)); the byte order within the register is assumed (lowest "
        "byte = block 0)",
})

BLOCK_SCALE = [
    R("mma.block_scale.scale_a", "mma.sync", "scale_a", m=16, n=8, bits=8, elements=4,
      row="g + 8 * (lane & 1)", col="i - byte_id",
      valid="((lane >> 1) & 1) == thread_id and i >= byte_id and i < byte_id + V",
      selectors=("byte_id", "thread_id"),
      legal="thread_id <= 1 and (byte_id <= 3 if V == 1 else (byte_id == 0 or byte_id == 2) if V == 2 "
            "else byte_id == 0)",
      description="scale-a-data (one .b32 per lane): the thread pair %laneid % 4 in {2 * thread-id-a, "
                  "2 * thread-id-a + 1} holds SF_A of row groupID (even lane) or groupID + 8 (odd lane) in "
                  "bytes byte-id-a .. byte-id-a + V - 1 (scale block i - byte-id-a)",
      source=_BS),
    R("mma.block_scale.scale_b", "mma.sync", "scale_b", m=16, n=8, bits=8, elements=4,
      row="i - byte_id", col="g",
      valid="t == thread_id and i >= byte_id and i < byte_id + V",
      selectors=("byte_id", "thread_id"),
      legal="thread_id <= 3 and (byte_id <= 3 if V == 1 else (byte_id == 0 or byte_id == 2) if V == 2 "
            "else byte_id == 0)",
      description="scale-b-data (one .b32 per lane): the thread %laneid % 4 == thread-id-b of each quad holds "
                  "SF_B of column groupID in bytes byte-id-b .. byte-id-b + V - 1 (scale block i - byte-id-b)",
      source=_BS),
]
