"""The built-in sparse NVIDIA layouts (``mma.sp``, ``wgmma.mma_async.sp``: compressed A, the B of
the sparse-only K, metadata): formulas from the PTX ISA, each with its evidence
(:mod:`mmasim.placement.catalog`)."""

from __future__ import annotations

from .catalog_base import _ISA, rule_maker

# what each built-in rule's formulas were checked against (R() refuses a rule missing here)
_EVIDENCE = {}
R = rule_maker(_EVIDENCE)

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
