"""The built-in tcgen05 Tensor Memory layouts of sparse metadata and of A in Tensor Memory:
formulas, each with its evidence (:mod:`mmasim.placement.catalog`).

Sparse metadata (``tcgen05.mma.sp``, operand ``[sp-meta-tmem]``; PTX ISA 9.1 §9.7.16.10.8.4
"Sparsity selector", Figures 262-267).  The matrix is ``M x chunks``: one 4-bit selector per
chunk of A's logical K (docs/layouts.md, as for ``mma.sp``).  A TMEM image here is
``(TMEM lanes, 2 columns)``: the column pair at the (even) metadata address; ``i`` indexes
the 16 nibbles of a lane's two 32-bit columns, nibble ``i`` at bits ``4 (i % 8)`` of column
``i // 8``.

* ``.kind::f16`` / ``.kind::tf32`` (K = 32 / 16: 8 chunks a row): one column per instruction,
  column ``selector`` of the pair (the sparsity selector, 0 or 1).  Within it lane
  ``16 q + 8 h + r`` (``r < 8``) holds, in bits 0-15, chunks ``4 h .. 4 h + 3`` of row
  ``16 q + r`` and, in bits 16-31, the same chunks of row ``16 q + 8 + r``.
* ``.kind::f8f6f4`` / ``.kind::i8`` / ``.kind::mxf8f6f4`` / ``.kind::mxf4*`` (16 chunks a
  row): both columns; row ``r`` in lane ``r``, chunk ``c`` at nibble ``c % 8`` of column
  ``c // 8``; the selector must be 0 (PTX text).

A in Tensor Memory (``[a-tmem]``): row-major (PTX Table 53), row ``r`` in the lane that holds
row ``r`` of D (the data path layout), K along the 32-bit columns, sub-word elements packed
lowest first (two 16-bit, four 8-bit per column); a sparse instruction's A is the compressed
``M x K/2``.  :func:`mmasim.placement.tcgen05_warp.a_tmem_layout` binds these rules (they are
not ``Model.layout("a")``, which for tcgen05 names A in shared memory).
"""

from __future__ import annotations

from .catalog_base import rule_maker

# R(name, ..., evidence=...): every rule here states its evidence inline (R() refuses one without)
_EVIDENCE = {}
R = rule_maker(_EVIDENCE)

_ISA91 = "PTX ISA 9.1"
_SEL = "§9.7.16.10.8.4 'Sparsity selector'"
_SRC = "PTX ISA, 9.7.16.10.8.4 'Sparsity selector' (tcgen05), Figure {fig}"

_EV_MD16 = (
    "partly checked: " + _ISA91 + " " + _SEL + " (text: 'the value of the sparsity selector selects the "
    "sub-columns in the Tensor Memory to form the sparsity metadata matrix'; instruction descriptor bits 0-1, "
    "Table 42) checked; the placement is drawn only in Figure {fig} (not read here). The formula is "
    "CUTLASS's tmem_e_frg {cute} atom (cute/atom/mma_traits_sm100_frag.hpp), and CUTLASS passes the "
    "selector as the metadata column address & 1 with the address rounded down to even "
    "(cute/atom/mma_traits_sm100.hpp); JAX's format_tcgen05_sparse_metadata (16-bit: rows (8, 2, 8), "
    "entries (4, 2, 8) reordered) and its tcgen05.mma (selector k_step % 2, address + 2 every two "
    "steps) agree - corroboration, not the document{extra}")
_EV_MD8 = (
    "partly checked: " + _ISA91 + " §9.7.16.10.8.4.{n} (text: the sparsity selector 'must be 0 for "
    ".kind::i8 and .kind::f8f6f4' and 'is assumed to be 0 for .kind::mxf8f6f4, .kind::mxf4 and "
    ".kind::mxf4nvf4', 'all of the columns are selected') checked; the placement is drawn only in Figure "
    "{fig} (not read here). The formula is CUTLASS's tmem_e_frg {cute} atom (row in the lane, K along the "
    "bits, cute/atom/mma_traits_sm100_frag.hpp); JAX's format_tcgen05_sparse_metadata (8-bit: row-major "
    "(128, 64) 2-bit entries) agrees - corroboration, not the document{extra}")
_EV_HALF = (
    "unverified: the M = 64 (layout F) / M = 128 cta_group::2 sparse (layout C) metadata placement is "
    "Figure {fig} (not read here) and neither CUTLASS (tmem_e_frg: 'Only 128 implemented') nor JAX "
    "models it; mmasim assumes the M = 128 pattern of each 16-row group in the lower 16 lanes of each "
    "32-lane sub-partition (lane alignment 0), from " + _ISA91 + " §9.7.16.10.8.5: layouts F and C 'must "
    "use the same alignment across matrices A, D and the sparsity metadata matrix' (checked)")
_PAIR = ("; the pair's image stacks CTA 0's TMEM lanes (0..127) and CTA 1's (128..255), CTA c holding the "
         "metadata of its rows c * M/2 .. (as D; CUTLASS's 2-SM CLayout splits M the same way)")

_EV_A = (
    "partly checked: " + _ISA91 + " §9.7.16.10.2 Table 53 (A in Tensor Memory is row-major) and "
    "§9.7.16.10.5 (layouts F and C use the same lane alignment for A, D and the metadata) checked, and "
    "§9.7.16.10.4.3 (8-bit containers packed contiguously, four per 32-bit Tensor Memory word) checked; "
    "that row r of A sits in the lane of row r of D ({x}), K along the columns, 16-bit elements two per "
    "column (lowest first) is assumed, and agrees with CUTLASS's tmem_frg ('Dense allocations' pack the "
    "value type in the column) and JAX's tcgen05.mma (A columns per K step = K / packing, halved when "
    "sparse){extra}")


def _md(name, m, lanes, abits, row, col, elements, valid, legal, qualifiers, ev, fig, what):
    return R(name, "tcgen05.mma", "sparse_metadata", lanes=lanes, m=m, bits=4, abits=abits,
                        elements=elements, row=row, col=col, valid=valid, sparse=True, qualifiers=qualifiers,
                        selectors=("selector",), legal=legal, storage="tmem", description=what,
                        source=_SRC.format(fig=fig), evidence=ev)


# ---------------------------------------------------------------- the formulas
# 16-bit / tf32 kinds: lane 16q + 8h + r holds rows 16q + r (bits 0-15) and 16q + 8 + r (bits 16-31),
# chunks 4h .. 4h + 3, in column `selector` of the pair
_ROW16 = "16 * (lane >> 4) + 8 * ((i >> 2) & 1) + (lane & 7)"
_COL16 = "4 * ((lane >> 3) & 1) + (i & 3)"
# the same per 16-row group, in the lower 16 lanes of each 32-lane sub-partition (layouts F, C)
_ROW16H = "16 * (lane >> 5) + 8 * ((i >> 2) & 1) + (lane & 7)"
_ROW8H = "16 * (lane >> 5) + (lane & 15)"
_HALF = "(lane & 31) < 16"
_SEL16 = "(i >> 3) == selector"

_W16 = ("one column per instruction: column `selector` (0 or 1) of the pair; lane 16q + 8h + r (r < 8) holds "
        "chunks 4h..4h+3 of row 16q + r in bits 0-15 and of row 16q + 8 + r in bits 16-31")
_W8 = "both columns, selector 0: row r in lane r, chunk c at nibble c % 8 of column c // 8"

TCGEN05_SPARSE_METADATA = []
for _q, _tag in (((), "cta1"), (("ws",), "ws")):
    TCGEN05_SPARSE_METADATA += [
        _md(f"tcgen05.sp.md.m128.{_tag}.16bit", 128, 128, (16, 32), _ROW16, _COL16, 16, _SEL16, "selector <= 1",
            _q, _EV_MD16.format(fig="263 (.kind::f16) / 265 (.kind::tf32)", cute="FP16 ((8,2,8),(16,2)):"
                                "((1,2048,16),(128,8)) / TF32 ((8,2,8),(8,2)):((1,1024,16),(128,8))",
                                extra="" if not _q else "; .ws at M = 128: CUTLASS's tmem_e_frg_ws atoms are "
                                "the same"),
            "263, 265", f"M = 128 (.kind::f16 / .kind::tf32){' .ws' if _q else ''}: " + _W16),
        _md(f"tcgen05.sp.md.m128.{_tag}.8bit", 128, 128, (8, 4), "lane", "i", 16, "", "selector == 0", _q,
            _EV_MD8.format(n=6, fig="267", cute="S8 / F8F6F4 (128, 64):(1, 128) and F4 (128, 128)",
                           extra="" if not _q else "; .ws at M = 128: CUTLASS's tmem_e_frg_ws atoms are the same"),
            "267", f"M = 128 (8-bit and 4-bit kinds){' .ws' if _q else ''}: " + _W8),
    ]
TCGEN05_SPARSE_METADATA += [
    _md("tcgen05.sp.md.m256.cta2.16bit", 256, 256, (16, 32), _ROW16, _COL16, 16, _SEL16, "selector <= 1",
        ("cta_group::2",),
        _EV_MD16.format(fig="263 (.kind::f16) / 265 (.kind::tf32)", cute="FP16 / TF32", extra=_PAIR),
        "263, 265", "M = 256, cta_group::2 (.kind::f16 / .kind::tf32): each CTA's 128 rows as M = 128; " + _W16),
    _md("tcgen05.sp.md.m256.cta2.8bit", 256, 256, (8, 4), "lane", "i", 16, "", "selector == 0", ("cta_group::2",),
        _EV_MD8.format(n=6, fig="267", cute="S8 / F8F6F4 and F4", extra=_PAIR),
        "267", "M = 256, cta_group::2 (8-bit and 4-bit kinds): each CTA's 128 rows as M = 128; " + _W8),
    _md("tcgen05.sp.md.m64.cta1.16bit", 64, 128, (16, 32), _ROW16H, _COL16, 16, f"{_HALF} and {_SEL16}",
        "selector <= 1", (), _EV_HALF.format(fig="262 (.kind::f16) / 264 (.kind::tf32)"), "262, 264",
        "M = 64 (layout F lanes; .kind::f16 / .kind::tf32): the M = 128 pattern per 16 rows in lanes "
        "32w .. 32w + 15"),
    _md("tcgen05.sp.md.m64.cta1.8bit", 64, 128, (8, 4), _ROW8H, "i", 16, _HALF, "selector == 0", (),
        _EV_HALF.format(fig="266"), "266",
        "M = 64 (layout F lanes; 8-bit and 4-bit kinds): rows 16w .. 16w + 15 in lanes 32w .. 32w + 15"),
    _md("tcgen05.sp.md.m128.cta2.16bit", 128, 256, (16, 32), "64 * (lane >> 7) + " + _ROW16H.replace(
        "lane >> 5", "(lane & 127) >> 5"), _COL16, 16, f"{_HALF} and {_SEL16}", "selector <= 1", ("cta_group::2",),
        _EV_HALF.format(fig="263 / 265") + _PAIR, "263, 265",
        "M = 128, cta_group::2, sparse (layout C lanes): each CTA's 64 rows as M = 64"),
    _md("tcgen05.sp.md.m128.cta2.8bit", 128, 256, (8, 4), "64 * (lane >> 7) + 16 * ((lane & 127) >> 5) + (lane & 15)",
        "i", 16, _HALF, "selector == 0", ("cta_group::2",), _EV_HALF.format(fig="267") + _PAIR, "267",
        "M = 128, cta_group::2, sparse (layout C lanes; 8-bit and 4-bit kinds): each CTA's 64 rows as M = 64"),
]


# ---------------------------------------------------------------- A in Tensor Memory
def _a(name, m, lanes, row, valid, qualifiers, sparse, x, extra=""):
    k = "K // 2" if sparse else "K"
    return R(name + (".sp" if sparse else ""), "tcgen05.mma", "a", lanes=lanes, m=m, elements=k,
                        row=row, col="i", valid=valid, sparse=sparse, qualifiers=qualifiers, storage="tmem",
                        description=f"A in Tensor Memory, M = {m} ({x}): row-major, K along the columns "
                                    "(packed lowest element first)" + (", the compressed A" if sparse else ""),
                        source="PTX ISA, 9.7.16.10.2 Table 53 and 9.7.16.10.5 'Data Path Layout Organization', "
                               + x,
                        evidence=_EV_A.format(x=x, extra=extra))


TCGEN05_A_TMEM = []
for _sp in (False, True):
    TCGEN05_A_TMEM += [
        _a("tcgen05.tmem.a.m128.cta1", 128, 128, "lane", "", (), _sp, "layout D"),
        _a("tcgen05.tmem.a.m64.cta1", 64, 128, "16 * (lane >> 5) + (lane & 15)", _HALF, (), _sp,
           "layout F, lane alignment 0"),
        _a("tcgen05.tmem.a.m256.cta2", 256, 256, "lane", "", ("cta_group::2",), _sp, "layout A per CTA",
           extra=_PAIR.replace("metadata of its", "A rows of its")),
    ]
TCGEN05_A_TMEM.append(
    _a("tcgen05.tmem.a.m128.cta2", 128, 256, "64 * (lane >> 7) + 16 * ((lane & 127) >> 5) + (lane & 15)", _HALF,
       ("cta_group::2",), True, "layout C per CTA, lane alignment 0",
       extra=_PAIR.replace("metadata of its", "A rows of its")))

__all__ = ["TCGEN05_SPARSE_METADATA", "TCGEN05_A_TMEM"]
