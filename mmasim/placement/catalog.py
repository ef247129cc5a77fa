"""The built-in register / TMEM layouts: formulas from the PTX ISA and AMD's documentation.

Every entry is data (:class:`~mmasim.placement.fragment.FragmentRule`): formulas in
``g = lane >> 2`` (PTX's groupID), ``t = lane % 4`` (threadID_in_group),
``w = lane >> 5`` (warp of a warpgroup), ``lane`` and the element index ``i``.
They are registered through the ``mmasim_layouts`` hook (``mmasim.builtins``), like a
plugin's; an architecture plugin adds or overrides (``arch=``) its own the same way.
"""

from __future__ import annotations

from .fragment import FragmentRule


def R(name, *args, evidence=None, **kw):
    """A built-in rule; its evidence is ``evidence`` or ``_EVIDENCE[name]`` (a KeyError at
    import for a rule that has neither, so no entry can leave it out)."""
    return FragmentRule(name, *args, evidence=evidence or _EVIDENCE[name], **kw)

_PTX = "PTX ISA, 9.7.14.5 'Matrix Fragments for mma.m{m}n{n}k{k}'"
_WG = "PTX ISA, 9.7.15.5.1.1 'Register Fragments' (wgmma.mma_async, m64nNk{k})"
_TM = "PTX ISA, 9.7.16.10.5 'Data Path Layout Organization' (tcgen05), layout {x}"
_AMD = "AMD Matrix Instruction Calculator (v_mfma lane and register layouts)"

# Evidence: what each formula was checked against.  "checked: ..." only where the formula
# was compared with the document's own text (quoted in tests/test_layout_formulas.py);
# anything less says so (docs/layouts.md, "Not yet checked against the documents").
_ISA = "PTX ISA 9.0"


def _checked(section, what="the row / col formulas of the section's text"):
    return f"checked: {_ISA} §{section} ({what})"


_EV_WG = ("partly checked: {isa} §9.7.15.5.1.1.{n} gives the fragment's registers and element order "
          "in its text (checked); the lane placement is given only by {fig} (not read here): "
          "the formula is {what}, and agrees with CUTLASS's {cute} (thread, value) layout "
          "(cute/atom/mma_traits_sm90_gmma.hpp)").format
_EV_TM = ("partly checked: {isa} §9.7.16.10.5 table 'Data Path Layout Organization' (layout {x}: "
          "{org}) checked; the per-lane placement is drawn in {fig} (no formula in the text), read in "
          "an earlier session and not re-checked").format
_EV_AMD = ("checked: AMD Matrix Instruction Calculator (ROCm amd_matrix_instruction_calculator, "
           "--matrix-layout of A, B and D) for every modelled CDNA1 / CDNA2 / CDNA3 instruction of this "
           "shape and element size, every lane and register")

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


# ---------------------------------------------------------------- AMD v_mfma (64-lane wavefront)
def _mfma(m, k, kpack, bits, arch=(), kind=None, types=(), evidence=_EV_AMD):
    """A, B, C/D rules of one v_mfma shape: A element i of lane l is row l % M and
    k = kpack * ((l // M) % (K / kpack)) + i of block (l // M) // (K / kpack); B the
    same with columns; D per the M = 32 / 16 / 4 accumulator layouts."""
    blocks = 64 * kpack // (m * k)
    kg = k // kpack
    tag = f"v_mfma.m{m}n{m}k{k}" + f".kpack{kpack}.{bits}bit" + (f".{'-'.join(arch)}" if arch else "") \
        + (f".kind{kind}" if kind else "")
    common = dict(m=m, n=m, k=k, lanes=64, blocks=blocks, arch=arch, kind=kind, source=_AMD,
                  evidence=evidence)
    ab = dict(types=types, abits=bits)
    out = [
        R(tag + ".a", "v_mfma", "a", **ab, bits=bits, elements=kpack, row=f"lane % {m}",
          col=f"{kpack} * ((lane // {m}) % {kg}) + i", block=f"(lane // {m}) // {kg}",
          description=f"A: lane l holds row l % {m}, k = {kpack} * ((l // {m}) % {kg}) + i"
                      + (f", block (l // {m}) // {kg}" if blocks > 1 else "")
                      + f" ({kpack} {bits}-bit element(s) per lane)", **common),
        R(tag + ".b", "v_mfma", "b", **ab, bits=bits, elements=kpack, col=f"lane % {m}",
          row=f"{kpack} * ((lane // {m}) % {kg}) + i", block=f"(lane // {m}) // {kg}",
          description=f"B: lane l holds column l % {m}, k = {kpack} * ((l // {m}) % {kg}) + i"
                      + (f", block (l // {m}) // {kg}" if blocks > 1 else ""), **common),
    ]
    if m == 32:
        cd = dict(elements=16 * blocks, row="8 * ((i % 16) >> 2) + 4 * (lane >> 5) + (i & 3)", col="lane & 31",
                  block="i >> 4", description="D: lane l holds column l % 32; register i holds row "
                  "8 * ((i % 16) // 4) + 4 * (l // 32) + i % 4 of block i // 16")
    elif m == 16 and bits == 64:
        # v_mfma_f64_16x16x4_f64: D[i][j] in lane 16 * (i % 4) + j, register pair i // 4
        # (AMD Matrix Instruction Calculator); not the f32 accumulators' i % 4 / lane // 16
        cd = dict(elements=4, row="4 * i + (lane >> 4)", col="lane & 15",
                  description="D (f64): lane l holds column l % 16; 64-bit register pair i holds row "
                  "4 * i + l // 16")
    elif m == 16:
        cd = dict(elements=4 * blocks, row="4 * (lane >> 4) + (i & 3)", col="lane & 15", block="i >> 2",
                  description="D: lane l holds column l % 16; register i holds row 4 * (l // 16) + i % 4 "
                  "of block i // 4")
    else:
        cd = dict(elements=4, row="i", col="lane & 3", block="lane >> 2",
                  description="D: lane l holds column l % 4 of block l // 4; register i holds row i")
    out.append(R(tag + ".cd", "v_mfma", ("c", "d"), **ab, **cd, **common))
    return out


MFMA = []
for _m, _k, _kp, _bits in [
    # f32 (one element per lane), xf32 (2), f16 / bf16_1k (4), fp8 (8); f64 (one 64-bit element)
    (32, 2, 1, 32), (32, 1, 1, 32), (16, 4, 1, 32), (16, 1, 1, 32), (4, 1, 1, 32),
    (16, 8, 2, 32), (32, 4, 2, 32),
    (32, 8, 4, 16), (32, 4, 4, 16), (16, 16, 4, 16), (16, 4, 4, 16), (4, 4, 4, 16),
    (16, 32, 8, 8), (32, 16, 8, 8),
    (16, 4, 1, 64),
]:
    MFMA += _mfma(_m, _k, _kp, _bits)
# --- integer (issue 12): v_mfma_i32_*i8, four 8-bit elements per lane (CDNA1 / CDNA2, and
# CDNA3's multi-block forms); CDNA3's 32x32x16_i8 / 16x16x32_i8 (eight per lane) share the fp8 rules
_EV_I8 = ("unverified: the 8-bit v_mfma pattern (four elements per lane) applied to the i8 forms; "
          "not compared with the AMD Matrix Instruction Calculator's output for these instructions")
for _m, _k in [(32, 8), (16, 16), (32, 4), (16, 4), (4, 4)]:
    MFMA += _mfma(_m, _k, 4, 8, evidence=_EV_I8)
# bf16 before the 1k variants (CDNA1, and CDNA2's non-"1k" forms): two bf16 per lane
for _m, _k in [(32, 4), (32, 2), (16, 8), (16, 2), (4, 2)]:
    MFMA += _mfma(_m, _k, 2, 16, arch=("CDNA1", "CDNA2"), kind="", types=("bf16",))

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

# ---------------------------------------------------------------- sparse mma.sp (compressed A, metadata)
# PTX ISA §9.7.14.6.2 "Matrix fragments for multiply-accumulate operation with sparse matrix A":
# A holds only the stored (non-zero) elements; its matrix here is the compressed A (M x K/2,
# each row's stored elements in K order: compressed column 2c + j is the j-th stored element
# of the 4-wide chunk c, for 2:4; c for tf32's 1:2; 4c + j for the pair-wise 4:8).
_SP = "PTX ISA, 9.7.14.6.2.{n} 'Matrix Fragments for sparse mma.m16n8k{k}' ({what})"
_WGSP = "PTX ISA, 9.7.15.6.2.{n} 'Matrix Fragments for sparse wgmma.mma_async.m64nNk{k}' ({what})"
_SP_A = ("checked: " + _ISA + " §9.7.14.6.2.{n} ({what}): the text's register count, "
         "'row = groupID for {rows}, groupID + 8 otherwise' and 'firstcol = {firstcol}', each register "
         "holding the stored elements of its chunk(s) in order").format
_EVIDENCE.update({
    "mma.sp.m16n8k16.a.16bit": _SP_A(n=1, what=".f16 / .bf16 A", rows="a0, a1",
                                     firstcol="threadID_in_group * 4 (two of the four-wide chunk)"),
    "mma.sp.m16n8k32.a.16bit": _SP_A(n=2, what=".f16 / .bf16 A", rows="ai, 0 <= i < 2 || 4 <= i < 6",
                                     firstcol="threadID_in_group * 4, + 16 for ai, i >= 4"),
    "mma.sp.m16n8k16.a.32bit": _SP_A(n=3, what=".tf32 A", rows="a0 and a2",
                                     firstcol="threadID_in_group * 2, + 8 for a2, a3 (one of the two-wide chunk)"),
    "mma.sp.m16n8k8.a.32bit": _SP_A(n=4, what=".tf32 A", rows="a0",
                                    firstcol="threadID_in_group * 2 (one of the two-wide chunk)"),
    "mma.sp.m16n8k32.a.8bit": _SP_A(n=5, what=".u8 / .s8 A", rows="ai, 0 <= i < 4",
                                    firstcol="threadID_in_group * 8 (four of eight per register)"),
    "mma.sp.m16n8k64.a.8bit": _SP_A(n=6, what=".u8 / .s8 / .e4m3 / .e5m2 / .e3m2 / .e2m3 / .e2m1 A",
                                    rows="ai, 0 <= i < 4 || 8 <= i < 12",
                                    firstcol="threadID_in_group * 8, + 32 for ai, i >= 8"),
    "mma.sp.m16n8k64.a.4bit": _SP_A(n=7, what=".u4 / .s4 A", rows="ai, 0 <= i < 8",
                                    firstcol="threadID_in_group * 16 (eight of sixteen per register)"),
    "mma.sp.m16n8k128.a.4bit": _SP_A(n=8, what=".u4 / .s4 / .e2m1 A", rows="ai, 0 <= i < 8 || 16 <= i < 24",
                                     firstcol="threadID_in_group * 16, + 64 for ai, i >= 16"),
    # B of the sparse-only K: the text gives the registers and element order, the placement a figure
    "mma.m16n8k32.b.16bit":
        "partly checked: " + _ISA + " §9.7.14.6.2.2 gives B's four .b32 registers of two .f16 / .bf16 "
        "(b0 .. b7, checked); the placement is Figure 121 only (not read here): the formula is the dense "
        "m16n8k16 B formula continued over K = 32",
    "mma.m16n8k16.b.32bit":
        "partly checked: " + _ISA + " §9.7.14.6.2.3 gives B's four .b32 registers (b0 .. b3, checked); the "
        "placement is Figure 124 only (not read here): the formula is the dense m16n8k8 .tf32 B formula "
        "continued over K = 16",
    "mma.m16n8k64.b.8bit":
        "partly checked: " + _ISA + " §9.7.14.6.2.6 gives B's four .b32 registers of four 8-bit elements "
        "(b0 .. b15, checked); the placement is Figures 132-135 (not read here): the formula is the dense "
        "m16n8k32 8-bit B formula continued over K = 64, and agrees with CUTLASS's SM120 sparse BLayout "
        "(cute/atom/mma_traits_sm120_sparse.hpp, ((4,8),(4,4)):((32,1),(8,128)))",
    "mma.m16n8k128.b.4bit":
        "partly checked: " + _ISA + " §9.7.14.6.2.8 gives B's four .b32 registers of eight 4-bit elements "
        "(b0 .. b31, checked); the placement is Figures 142-145 (not read here): the formula is the dense "
        "m16n8k64 4-bit B formula continued over K = 128, and agrees with CUTLASS's SM120 sparse BLayout "
        "((4,8),(8,4)):((64,1),(8,256))",
})
_SP_MD_TEXT = ("{isa} §9.7.14.6.1 (the sparsity selector: {who}) and §9.7.14.6.2.{n} (one .b32 metadata "
               "register of {what}) checked; the bit placement is drawn only in {fig} (not read here)").format
_SP_MD_RULE = ("the formula: the selected threads' registers, concatenated in lane order, hold the chunk "
               "selectors of the quad's A registers in register order (A register j: row groupID + 8 (j & 1), "
               "{cpr} chunks, lowest bits first)").format
_EVIDENCE.update({
    "mma.sp.m16n8k16.md.16bit":
        "unverified: " + _SP_MD_TEXT(isa=_ISA, n=1, who="one thread of each quad, 0..3", what="16 2-bit indices",
                                     fig="Figure 119") + "; " + _SP_MD_RULE(cpr=4) + ", the rule that "
        "reproduces CUTLASS's wgmma.sp metadata layouts (below), applied here without a corroborating source",
    "mma.sp.m16n8k32.md.16bit":
        "partly checked: " + _SP_MD_TEXT(isa=_ISA, n=2, who="the pair T0, T1 (0) or T2, T3 (1)",
                                         what="16 2-bit indices", fig="Figure 122") + "; "
        + _SP_MD_RULE(cpr=4) + " agrees with CUTLASS's ELayout_64x32 for wgmma.mma_async.sp .f16 / .bf16 "
        "(cute/atom/mma_traits_sm90_gmma_sparse.hpp), whose per-warp figure the ISA states is this one "
        "(§9.7.15.6.2.1 Figure 176 is sparse-mma-metadata-16832-f16bf16.png)",
    "mma.sp.m16n8k8.md.32bit":
        "unverified: " + _SP_MD_TEXT(isa=_ISA, n=4, who="one thread of each quad, 0..3", what="8 4-bit indices",
                                     fig="Figure 127") + "; " + _SP_MD_RULE(cpr=4) + ", applied without a "
        "corroborating source",
    "mma.sp.m16n8k16.md.32bit":
        "partly checked: " + _SP_MD_TEXT(isa=_ISA, n=3, who="the pair T0, T1 (0) or T2, T3 (1)",
                                         what="8 4-bit indices", fig="Figure 125") + "; " + _SP_MD_RULE(cpr=4)
        + " agrees with CUTLASS's ELayout_64x16 for wgmma.mma_async.sp .tf32, whose per-warp figure the ISA "
        "states is this one (§9.7.15.6.2.2 Figure 178 is sparse-mma-metadata-16816-tf32.png)",
    "mma.sp.m16n8k32.md.8bit":
        "unverified: " + _SP_MD_TEXT(isa=_ISA, n=5, who="the pair T0, T1 (0) or T2, T3 (1)",
                                     what="16 2-bit indices", fig="Figure 129") + "; " + _SP_MD_RULE(cpr=8)
        + ", applied without a corroborating source",
    "mma.sp.m16n8k64.md.8bit":
        "partly checked: " + _SP_MD_TEXT(isa=_ISA, n=6, who="all four threads of each quad, selector 0",
                                         what="16 2-bit indices", fig="Figures 136 and 137") + "; "
        + _SP_MD_RULE(cpr=8) + " agrees with CUTLASS's ELayout_64x64 for wgmma.mma_async.sp 8-bit (the ISA's "
        "§9.7.15.6.2.3 Figures 180 and 181 are these images) and its SM120 sparse 16x8x64 ELayout "
        "((2,2,8),32):((8,512,1),16)",
    "mma.sp.m16n8k64.md.4bit":
        "unverified: " + _SP_MD_TEXT(isa=_ISA, n=7, who="the pair T0, T1 (0) or T2, T3 (1)",
                                     what="16 2-bit indices", fig="Figure 139") + "; " + _SP_MD_RULE(cpr=8)
        + ", applied without a corroborating source",
    "mma.sp.m16n8k128.md.4bit":
        "partly checked: " + _SP_MD_TEXT(isa=_ISA, n=8, who="all four threads of each quad, selector 0",
                                         what="16 2-bit indices", fig="Figures 146 and 147") + "; "
        + _SP_MD_RULE(cpr=8) + " agrees with CUTLASS's SM120 sparse 16x8x128 ELayout "
        "((2,2,8),64):((8,1024,1),16) (cute/atom/mma_traits_sm120_sparse.hpp)",
})


def _metadata(name, k, abits, nsel, cpr, n, what, fig, wg=False):
    """The metadata rule of one sparse shape: ``nsel`` threads of each quad (the sparsity
    selector picks which), ``cpr`` chunk selectors per row per A register; ``wg``: the
    wgmma.mma_async.sp form (128 threads, warp w holding rows 16w .. 16w + 15)."""
    G = f"(8 * (t - {nsel} * selector) + i)"
    legal = {1: "selector <= 3", 2: "selector <= 1", 4: "selector == 0"}[nsel]
    where = dict(op="wgmma.mma_async", lanes=128, m=64) if wg else dict(op="mma.sync", m=16, n=8)
    op = where.pop("op")
    return R(name, op, "sparse_metadata", **where, k=k, abits=abits, bits=4, elements=8, sparse=True,
             row=("16 * w + " if wg else "") + f"g + 8 * (({G} // {cpr}) & 1)",
             col=f"{cpr} * (({G} // {cpr}) >> 1) + {G} % {cpr}",
             valid=f"t // {nsel} == selector", selectors=("selector",), legal=legal,
             description=f"metadata (one .b32): the {nsel} thread(s) t // {nsel} == selector of each quad hold "
                         f"8 chunk selectors each; selector nibble i of the q-th selected thread is nibble "
                         f"(8q + i) % {cpr} of A register (8q + i) // {cpr} of the quad (row groupID + 8 * "
                         f"(register & 1), chunks {cpr} * (register >> 1) ..)",
             source=(_WGSP.format(n=n, k=k, what=f"{what}; metadata {fig}") if wg
                     else _SP.format(n=n, k=k, what=f"{what}; metadata {fig}")))


SPARSE = [
    # compressed A
    R("mma.sp.m16n8k16.a.16bit", "mma.sync", "a", m=16, n=8, k=16, bits=16, elements=4, sparse=True,
      row="g + 8 * (i >> 1)", col="2 * t + (i & 1)",
      description="a0..a3 (.f16x2 x2): row = groupID (a0, a1) or groupID + 8; the two stored elements of the "
                  "chunk at col 4 * threadID_in_group (compressed col 2 * threadID_in_group + (i & 1))",
      source=_SP.format(n=1, k=16, what=".f16 / .bf16")),
    R("mma.sp.m16n8k32.a.16bit", "mma.sync", "a", m=16, n=8, k=32, bits=16, elements=8, sparse=True,
      row="g + 8 * ((i >> 1) & 1)", col="2 * t + (i & 1) + 8 * (i >> 2)",
      description="a0..a7 (.f16x2 x4): row = groupID for a0, a1, a4, a5, else groupID + 8; chunk at col "
                  "4 * threadID_in_group, + 16 for a4..a7 (compressed col 2t + (i & 1) + 8 (i >> 2))",
      source=_SP.format(n=2, k=32, what=".f16 / .bf16")),
    R("mma.sp.m16n8k16.a.32bit", "mma.sync", "a", m=16, n=8, k=16, bits=32, elements=4, sparse=True,
      row="g + 8 * (i & 1)", col="t + 4 * (i >> 1)",
      description="a0..a3 (.tf32): row = groupID for a0, a2, else groupID + 8; the stored element of the "
                  "two-wide chunk at col 2 * threadID_in_group, + 8 for a2, a3 (compressed col t + 4 (i >> 1))",
      source=_SP.format(n=3, k=16, what=".tf32")),
    R("mma.sp.m16n8k8.a.32bit", "mma.sync", "a", m=16, n=8, k=8, bits=32, elements=2, sparse=True,
      row="g + 8 * i", col="t",
      description="a0, a1 (.tf32): row = groupID (a0) or groupID + 8; the stored element of the two-wide chunk "
                  "at col 2 * threadID_in_group (compressed col t)",
      source=_SP.format(n=4, k=8, what=".tf32")),
    R("mma.sp.m16n8k32.a.8bit", "mma.sync", "a", m=16, n=8, k=32, bits=8, elements=8, sparse=True,
      row="g + 8 * (i >> 2)", col="4 * t + (i & 3)",
      description="a0..a7 (four bytes per register, x2): row = groupID (a0..a3) or groupID + 8; the four stored "
                  "of the eight at col 8 * threadID_in_group (compressed col 4t + (i & 3))",
      source=_SP.format(n=5, k=32, what=".u8 / .s8")),
    R("mma.sp.m16n8k64.a.8bit", "mma.sync", "a", m=16, n=8, k=64, bits=8, elements=16, sparse=True,
      row="g + 8 * ((i >> 2) & 1)", col="4 * t + (i & 3) + 16 * (i >> 3)",
      description="a0..a15 (x4): row = groupID for a0..a3, a8..a11, else groupID + 8; the four stored of the "
                  "eight at col 8 * threadID_in_group, + 32 for a8..a15 (compressed col 4t + (i & 3) + 16 (i >> 3))",
      source=_SP.format(n=6, k=64, what=".u8 / .s8 / .e4m3 / .e5m2 / .e3m2 / .e2m3 / .e2m1")),
    R("mma.sp.m16n8k64.a.4bit", "mma.sync", "a", m=16, n=8, k=64, bits=4, elements=16, sparse=True,
      row="g + 8 * (i >> 3)", col="8 * t + (i & 7)",
      description="a0..a15 (eight codes per register, x2): row = groupID (a0..a7) or groupID + 8; the eight "
                  "stored of the sixteen at col 16 * threadID_in_group (compressed col 8t + (i & 7))",
      source=_SP.format(n=7, k=64, what=".u4 / .s4")),
    R("mma.sp.m16n8k128.a.4bit", "mma.sync", "a", m=16, n=8, k=128, bits=4, elements=32, sparse=True,
      row="g + 8 * ((i >> 3) & 1)", col="8 * t + (i & 7) + 32 * (i >> 4)",
      description="a0..a31 (x4): row = groupID for a0..a7, a16..a23, else groupID + 8; the eight stored of the "
                  "sixteen at col 16 * threadID_in_group, + 64 for a16..a31 (compressed col 8t + (i & 7) + 32 (i >> 4))",
      source=_SP.format(n=8, k=128, what=".u4 / .s4 / .e2m1")),
    # B of the K only sparse instructions have (the others are the dense shapes' B)
    R("mma.m16n8k32.b.16bit", "mma.sync", "b", m=16, n=8, k=32, bits=16, elements=8,
      row="2 * t + (i & 1) + 8 * (i >> 1)", col="g",
      description="b0..b7 (.f16x2 x4): row = threadID_in_group * 2 + (i & 1) + 8 * (i >> 1); col = groupID",
      source=_SP.format(n=2, k=32, what=".f16 / .bf16 B, Figure 121")),
    R("mma.m16n8k16.b.32bit", "mma.sync", "b", m=16, n=8, k=16, bits=32, elements=4,
      row="t + 4 * i", col="g",
      description="b0..b3 (.tf32): row = threadID_in_group + 4 * i; col = groupID",
      source=_SP.format(n=3, k=16, what=".tf32 B, Figure 124")),
    R("mma.m16n8k64.b.8bit", "mma.sync", "b", m=16, n=8, k=64, bits=8, elements=16,
      row="4 * t + (i & 3) + 16 * (i >> 2)", col="g",
      description="b0..b15 (x4): row = threadID_in_group * 4 + (i & 3) + 16 * (i >> 2); col = groupID",
      source=_SP.format(n=6, k=64, what="8-bit B, Figures 132-135")),
    R("mma.m16n8k128.b.4bit", "mma.sync", "b", m=16, n=8, k=128, bits=4, elements=32,
      row="8 * t + (i & 7) + 32 * (i >> 3)", col="g",
      description="b0..b31 (x4): row = threadID_in_group * 8 + (i & 7) + 32 * (i >> 3); col = groupID",
      source=_SP.format(n=8, k=128, what="4-bit B, Figures 142-145")),
    # metadata
    _metadata("mma.sp.m16n8k16.md.16bit", 16, 16, 1, 4, 1, ".f16 / .bf16", "Figure 119"),
    _metadata("mma.sp.m16n8k32.md.16bit", 32, 16, 2, 4, 2, ".f16 / .bf16", "Figure 122"),
    _metadata("mma.sp.m16n8k8.md.32bit", 8, 32, 1, 4, 4, ".tf32", "Figure 127"),
    _metadata("mma.sp.m16n8k16.md.32bit", 16, 32, 2, 4, 3, ".tf32", "Figure 125"),
    _metadata("mma.sp.m16n8k32.md.8bit", 32, 8, 2, 8, 5, ".u8 / .s8", "Figure 129"),
    _metadata("mma.sp.m16n8k64.md.8bit", 64, 8, 4, 8, 6, "8-bit", "Figures 136, 137"),
    _metadata("mma.sp.m16n8k64.md.4bit", 64, 4, 2, 8, 7, ".u4 / .s4", "Figure 139"),
    _metadata("mma.sp.m16n8k128.md.4bit", 128, 4, 4, 8, 8, "4-bit", "Figures 146, 147"),
]

# ---------------------------------------------------------------- AMD v_smfmac (CDNA3) and v_mfma_f64_4x4x4
_CALC3 = ("checked: AMD Matrix Instruction Calculator 1.3.2 (ROCm amd_matrix_instruction_calculator, "
          "--architecture cdna3, --register-layout) for every CDNA3 {what}: {detail}").format
_EVIDENCE.update({
    "v_smfmac.16bit.a": _CALC3(what="v_smfmac with 16-bit A (f16, bf16)", detail=(
        "A[i][k] GPR floor(k / 4) % 2, Lane M * floor(k / 8) + i: every lane and register; the calculator "
        "does not say which half of a register holds the first stored element (mmasim: the low half, "
        "index bits 1:0)")),
    "v_smfmac.8bit.a": _CALC3(what="v_smfmac with 8-bit A (i8, fp8, bf8)", detail=(
        "A[i][k] GPR floor(k / 8) % 2, bits 16 * (floor(k / 4) % 2) .. + 15, Lane M * floor(k / 16) + i: "
        "every lane, register and half; which byte of the half holds the first stored element is not said "
        "(mmasim: the low byte)")),
    "v_smfmac.16bit.b": _CALC3(what="v_smfmac with 16-bit B", detail=(
        "B k = 8 * floor(lane / M) + 2 * GPR + floor(GPR_bits / 16), j = lane % M, every lane and register")),
    "v_smfmac.8bit.b": _CALC3(what="v_smfmac with 8-bit B", detail=(
        "B k = 16 * floor(lane / M) + 4 * GPR + floor(GPR_bits / 8), j = lane % M, every lane and register")),
    "v_smfmac.m16.cd": _CALC3(what="v_smfmac 16x16", detail=(
        "D i = 4 * floor(lane / 16) + GPR % 4, j = lane % 16, every lane and register")),
    "v_smfmac.m32.cd": _CALC3(what="v_smfmac 32x32", detail=(
        "D i = (8 * floor(GPR / 4)) % 32 + 4 * floor(lane / 32) + GPR % 4, j = lane % 32, every lane and "
        "register")),
    "v_smfmac.16bit.md": _CALC3(what="v_smfmac with 16-bit A", detail=(
        "the compression index K[i][k]: VGPR 0 bits 4 * (floor(k / 4) % 2) + 8 * ABID .. + 3 (CBSZ 0: ABID "
        "picks one of 4 index sets), Lane M * floor(k / 8) + i, every lane, nibble and ABID")),
    "v_smfmac.8bit.md": _CALC3(what="v_smfmac with 8-bit A", detail=(
        "the compression index K[i][k]: VGPR 0 bits 4 * (floor(k / 4) % 4) + 16 * ABID .. + 3 (CBSZ 0: ABID "
        "picks one of 2 index sets), Lane M * floor(k / 16) + i, every lane, nibble and ABID")),
    "v_mfma.m4n4k4.f64.a": _CALC3(what="v_mfma_f64_4x4x4_4b_f64", detail=(
        "A[i][k].block Lane 4 * block + 16 * k + i, one 64-bit register pair, every lane")),
    "v_mfma.m4n4k4.f64.b": _CALC3(what="v_mfma_f64_4x4x4_4b_f64", detail=(
        "B[k][j].block Lane 4 * block + 16 * k + j, every lane")),
    "v_mfma.m4n4k4.f64.cd": _CALC3(what="v_mfma_f64_4x4x4_4b_f64", detail=(
        "C or D[i][j].block Lane 16 * (i % 4) + 4 * block + j, one register pair, every lane")),
})
_SMF = "AMD Matrix Instruction Calculator (CDNA3 v_smfmac: A, B, D and the compression index K)"
SMFMAC = []
for _bits, _kp, _kb, _npl in ((16, 4, 8, 2), (8, 8, 16, 4)):
    # compressed A: kp stored elements per lane; B: kb elements per lane; index: npl chunks per lane
    SMFMAC += [
        R(f"v_smfmac.{_bits}bit.a", "v_smfmac", "a", lanes=64, abits=_bits, bits=_bits, elements=_kp, sparse=True,
          row="lane % M", col=f"{_kp} * (lane // M) + i",
          description=f"compressed A (M x K/2): lane l holds row l % M, compressed col {_kp} * (l // M) + i "
                      f"(the stored elements of chunks {_kp // 2} * (l // M) .., each chunk's two in order)",
          source=_SMF),
        R(f"v_smfmac.{_bits}bit.b", "v_smfmac", "b", lanes=64, abits=_bits, bits=_bits, elements=_kb,
          row=f"{_kb} * (lane // M) + i", col="lane % M",
          description=f"B: lane l holds column l % M, k = {_kb} * (l // M) + i", source=_SMF),
        R(f"v_smfmac.{_bits}bit.md", "v_smfmac", "sparse_metadata", lanes=64, abits=_bits, bits=4, elements=8,
          sparse=True, row="lane % M", col=f"{_npl} * (lane // M) + i - {_npl} * selector",
          valid=f"i // {_npl} == selector", selectors=("selector",), legal=f"selector < {8 // _npl}",
          description=f"compression index (SrcC, one VGPR): lane l holds the {_npl} chunk selectors of row "
                      f"l % M, chunks {_npl} * (l // M) .., in nibbles {_npl} * ABID .. (CBSZ 0: selector = ABID)",
          source=_SMF),
    ]
SMFMAC += [
    R("v_smfmac.m16.cd", "v_smfmac", ("c", "d"), lanes=64, m=16, n=16, elements=4,
      row="4 * (lane >> 4) + i", col="lane & 15",
      description="D: lane l holds column l % 16; register i holds row 4 * (l // 16) + i", source=_SMF),
    R("v_smfmac.m32.cd", "v_smfmac", ("c", "d"), lanes=64, m=32, n=32, elements=16,
      row="8 * (i >> 2) + 4 * (lane >> 5) + (i & 3)", col="lane & 31",
      description="D: lane l holds column l % 32; register i holds row 8 * (i // 4) + 4 * (l // 32) + i % 4",
      source=_SMF),
    # v_mfma_f64_4x4x4_4b_f64: four blocks; k runs across the lanes' upper bits, the block in bits 2-3
    R("v_mfma.m4n4k4.f64.a", "v_mfma", "a", lanes=64, m=4, n=4, k=4, bits=64, abits=64, elements=1, blocks=4,
      row="lane & 3", col="lane >> 4", block="(lane >> 2) & 3",
      description="A: lane l holds row l % 4, k = l // 16 of block (l // 4) % 4", source=_AMD),
    R("v_mfma.m4n4k4.f64.b", "v_mfma", "b", lanes=64, m=4, n=4, k=4, bits=64, abits=64, elements=1, blocks=4,
      row="lane >> 4", col="lane & 3", block="(lane >> 2) & 3",
      description="B: lane l holds column l % 4, k = l // 16 of block (l // 4) % 4", source=_AMD),
    R("v_mfma.m4n4k4.f64.cd", "v_mfma", ("c", "d"), lanes=64, m=4, n=4, k=4, bits=64, abits=64, elements=1,
      blocks=4, row="lane >> 4", col="lane & 3", block="(lane >> 2) & 3",
      description="D: lane l holds row l // 16, column l % 4 of block (l // 4) % 4 (one register pair)",
      source=_AMD),
]

# ---------------------------------------------------------------- wgmma.mma_async.sp (A from registers, metadata)
_WG_SP_A = ("partly checked: " + _ISA + " §9.7.15.6.2.{n} gives A's registers and elements in its text "
            "({regs}, checked); the placement is {fig} only (not read here): the formula is mma.sp "
            "m16n8k{mk}'s compressed A (§9.7.14.6.2, checked) per warp, warp w holding rows 16w .. 16w + 15 "
            "(§9.7.15.6.2's table of the warps' rows, checked), and agrees with CUTLASS's {cute} for the "
            "sparse RS atoms (cute/atom/mma_traits_sm90_gmma.hpp, mma_traits_sm90_gmma_sparse.hpp)").format
_WG_SP_MD = ("partly checked: " + _ISA + " §9.7.15.6.2.{n} (one .b32 metadata register of {what}; each warp "
             "provides the metadata of its 16 rows) checked, and its figure is mma.sp's ({img}); the "
             "formula is mma.sp m16n8k{mk}'s metadata per warp, and agrees with CUTLASS's {cute} "
             "(cute/atom/mma_traits_sm90_gmma_sparse.hpp), all 128 threads").format
_EVIDENCE.update({
    "wgmma.sp.m64nNk32.a.16bit": _WG_SP_A(n=1, regs="four .b32, two non-zero .f16 / .bf16 of 4 consecutive "
                                          "each, a0 .. a7", fig="Figure 175", mk=32, cute="ALayout_64x32"),
    "wgmma.sp.m64nNk16.a.32bit": _WG_SP_A(n=2, regs="four .b32, four non-zero .tf32 of eight consecutive, "
                                          "a0 .. a3", fig="Figure 177", mk=16, cute="ALayout_64x16"),
    "wgmma.sp.m64nNk64.a.8bit": _WG_SP_A(n=3, regs="four .b32, four non-zero 8-bit of eight consecutive each, "
                                         "a0 .. a15", fig="Figure 179", mk=64, cute="ALayout_64x64"),
    "wgmma.sp.m64nNk32.md.16bit": _WG_SP_MD(n=1, what="16 2-bit indices", mk=32, cute="ELayout_64x32",
                                            img="Figure 176 is sparse-mma-metadata-16832-f16bf16.png"),
    "wgmma.sp.m64nNk16.md.32bit": _WG_SP_MD(n=2, what="eight 4-bit indices", mk=16, cute="ELayout_64x16",
                                            img="Figure 178 is sparse-mma-metadata-16816-tf32.png"),
    "wgmma.sp.m64nNk64.md.8bit": _WG_SP_MD(n=3, what="16 4-bit vectors", mk=64, cute="ELayout_64x64",
                                           img="Figures 180 and 181 are sparse-mma-metadata-16864-u8s8-*.png"),
})
WGMMA_SP = [
    R("wgmma.sp.m64nNk32.a.16bit", "wgmma.mma_async", "a", lanes=128, m=64, k=32, bits=16, elements=8, sparse=True,
      row="16 * w + g + 8 * ((i >> 1) & 1)", col="2 * t + (i & 1) + 8 * (i >> 2)",
      description="compressed A from registers: warp w holds rows 16w .. 16w + 15 as mma.sp m16n8k32's A",
      source=_WGSP.format(n=1, k=32, what=".f16 / .bf16 A, Figure 175")),
    R("wgmma.sp.m64nNk16.a.32bit", "wgmma.mma_async", "a", lanes=128, m=64, k=16, bits=32, elements=4, sparse=True,
      row="16 * w + g + 8 * (i & 1)", col="t + 4 * (i >> 1)",
      description="compressed A (.tf32) from registers: warp w holds rows 16w .. 16w + 15 as mma.sp m16n8k16's A",
      source=_WGSP.format(n=2, k=16, what=".tf32 A, Figure 177")),
    R("wgmma.sp.m64nNk64.a.8bit", "wgmma.mma_async", "a", lanes=128, m=64, k=64, bits=8, elements=16, sparse=True,
      row="16 * w + g + 8 * ((i >> 2) & 1)", col="4 * t + (i & 3) + 16 * (i >> 3)",
      description="compressed A (8-bit) from registers: warp w holds rows 16w .. 16w + 15 as mma.sp m16n8k64's A",
      source=_WGSP.format(n=3, k=64, what="8-bit A, Figure 179")),
    _metadata("wgmma.sp.m64nNk32.md.16bit", 32, 16, 2, 4, 1, ".f16 / .bf16", "Figure 176", wg=True),
    _metadata("wgmma.sp.m64nNk16.md.32bit", 16, 32, 2, 4, 2, ".tf32", "Figure 178", wg=True),
    _metadata("wgmma.sp.m64nNk64.md.8bit", 64, 8, 4, 8, 3, "8-bit", "Figures 180, 181", wg=True),
]

BUILTIN_FRAGMENTS = MMA_SYNC + BLOCK_SCALE + SPARSE + SMFMAC + WGMMA + WGMMA_SP + TCGEN05 + MFMA
