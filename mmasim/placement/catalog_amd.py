"""The built-in AMD layouts (``v_mfma``, CDNA3 ``v_smfmac``): formulas from AMD's Matrix Instruction
Calculator, each with its evidence (:mod:`mmasim.placement.catalog`)."""

from __future__ import annotations

from .catalog_base import rule_maker

_AMD = "AMD Matrix Instruction Calculator (v_mfma lane and register layouts)"
_EV_AMD = ("checked: AMD Matrix Instruction Calculator (ROCm amd_matrix_instruction_calculator, "
           "--matrix-layout of A, B and D) for every modelled CDNA1 / CDNA2 / CDNA3 instruction of this "
           "shape and element size, every lane and register")


# what each built-in rule's formulas were checked against (R() refuses a rule missing here)
_EVIDENCE = {}
R = rule_maker(_EVIDENCE)


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
