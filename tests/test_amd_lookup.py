"""AMD CDNA instruction names, composition, status and bad input.

The instruction lists are MMA-Sim 2.1.1's (amd/isa_mfma.py), copied here as
data: every suffix there must resolve, with its own M, N, K and types.
"""

import re

import numpy as np
import pytest

import mmasim
from helpers import f16, f32

CDNA1 = [
    "f32_32x32x2f32", "f32_32x32x1f32", "f32_16x16x4f32", "f32_16x16x1f32", "f32_4x4x1f32",
    "f32_32x32x8f16", "f32_32x32x4f16", "f32_16x16x16f16", "f32_16x16x4f16", "f32_4x4x4f16",
    "f32_32x32x4bf16", "f32_32x32x2bf16", "f32_16x16x8bf16", "f32_16x16x2bf16", "f32_4x4x2bf16",
]
CDNA2 = [
    "f64_16x16x4f64", "f64_4x4x4f64", "f32_32x32x8bf16_1k", "f32_32x32x4bf16_1k",
    "f32_16x16x16bf16_1k", "f32_16x16x4bf16_1k", "f32_4x4x4bf16_1k",
] + CDNA1
CDNA3 = [
    "f64_16x16x4_f64", "f64_4x4x4_4b_f64", "f32_32x32x1_2b_f32", "f32_16x16x1_4b_f32",
    "f32_4x4x1_16b_f32", "f32_32x32x2_f32", "f32_16x16x4_f32", "f32_16x16x8_xf32", "f32_32x32x4_xf32",
    "f32_32x32x4_2b_f16", "f32_16x16x4_4b_f16", "f32_4x4x4_16b_f16", "f32_32x32x8_f16", "f32_16x16x16_f16",
    "f32_32x32x4_2b_bf16", "f32_16x16x4_4b_bf16", "f32_4x4x4_16b_bf16", "f32_32x32x8_bf16", "f32_16x16x16_bf16",
    "f32_16x16x32_bf8_bf8", "f32_16x16x32_bf8_fp8", "f32_16x16x32_fp8_bf8", "f32_16x16x32_fp8_fp8",
    "f32_32x32x16_bf8_bf8", "f32_32x32x16_bf8_fp8", "f32_32x32x16_fp8_bf8", "f32_32x32x16_fp8_fp8",
]
LISTS = {"CDNA1": CDNA1, "CDNA2": CDNA2, "CDNA3": CDNA3}
# The integer v_mfma_i32_* forms (not in MMA-Sim 2.1.1): the CDNA1 / CDNA2 ISA
# guides' names, and CDNA3's (which drops 32x32x8i8 / 16x16x16i8 for 32x32x16_i8 / 16x16x32_i8).
INT_CDNA12 = ["i32_32x32x4i8", "i32_16x16x4i8", "i32_4x4x4i8", "i32_32x32x8i8", "i32_16x16x16i8"]
INT_LISTS = {"CDNA1": INT_CDNA12, "CDNA2": INT_CDNA12,
             "CDNA3": ["i32_32x32x4_2b_i8", "i32_16x16x4_4b_i8", "i32_4x4x4_16b_i8", "i32_32x32x16_i8",
                       "i32_16x16x32_i8"]}
ALL = [(arch, s) for arch, lst in LISTS.items() for s in lst]
FORMAT = {"f32": "f32", "f64": "f64", "f16": "f16", "bf16": "bf16", "xf32": "xf32",
          "fp8": "e4m3fnuz", "bf8": "e5m2fnuz"}


def _expected(suffix):
    m = re.fullmatch(r"(f32|f64)_(\d+)x(\d+)x(\d+)(?:_\d+b)?_?(f32|f64|bf16|f16|xf32|fp8|bf8)(?:_(fp8|bf8))?(?:_1k)?",
                     suffix)
    d, M, N, K, a, b = m.groups()
    return dict(d=d, m=(int(M),), n=(int(N),), k=int(K), a=FORMAT[a], b=FORMAT[b or a])


@pytest.mark.parametrize("arch,suffix", ALL, ids=[f"{a}:{s}" for a, s in ALL])
def test_every_mmasim_suffix_resolves_to_its_shape_and_types(arch, suffix):
    dp = mmasim.MMA(arch, suffix).datapath
    want = _expected(suffix)
    assert (dp.d, dp.m, dp.n, dp.k, dp.a, dp.b) == (want["d"], want["m"], want["n"], want["k"], want["a"], want["b"])
    assert dp.op == "v_mfma" and dp.status.kind == "peer"
    for spelling in ("v_mfma_" + suffix, "V_MFMA_" + suffix.upper()):
        assert mmasim.MMA(arch, spelling).datapath == dp


@pytest.mark.parametrize("arch", LISTS)
def test_every_datapath_is_an_mmasim_instruction_with_a_unique_canonical_name(arch):
    dps = mmasim.datapaths(arch)
    # MMA-Sim 2.1.1's v_mfma suffixes and the integer v_mfma_i32, plus the sparse
    # v_smfmac (not in MMA-Sim; tests/test_sparse_mma.py)
    assert sorted(dp.names[0] for dp in dps if dp.op == "v_mfma") == sorted(LISTS[arch] + INT_LISTS[arch])
    names = mmasim.instructions(arch)
    assert len(set(names)) == len(names)
    for dp, name in zip(dps, names):
        assert mmasim.MMA(arch, name).datapath == dp


@pytest.mark.parametrize("alias,arch", [
    ("MI100", "CDNA1"), ("gfx908", "CDNA1"), ("MI210", "CDNA2"), ("MI250", "CDNA2"), ("MI250X", "CDNA2"),
    ("gfx90a", "CDNA2"), ("MI300A", "CDNA3"), ("MI300X", "CDNA3"), ("MI325X", "CDNA3"), ("gfx942", "CDNA3"),
])
def test_amd_product_names_resolve(alias, arch):
    assert mmasim.aliases(alias)[0] == arch


@pytest.mark.parametrize("arch,suffix,accumulator,params,step", [
    ("CDNA1", "f32_32x32x2f32", "fma", {}, 2),
    ("CDNA1", "f32_32x32x8f16", "exact_sum", {}, 4),
    ("CDNA1", "f32_32x32x4bf16", "exact_sum", {}, 2),
    ("CDNA2", "f64_16x16x4f64", "fma", {}, 4),
    ("CDNA2", "f32_32x32x8f16", "ftz_mul_add", {"P": 4}, 8),     # one call: C is flushed once
    ("CDNA2", "f32_32x32x8bf16_1k", "ftz_mul_add", {"P": 4}, 8),
    ("CDNA2", "f32_32x32x4bf16", "ftz_mul_add", {"P": 2}, 4),
    ("CDNA3", "f32_16x16x8_xf32", "two_stage_window", {"F": 24, "F2": 31, "overflow": 128}, 4),
    ("CDNA3", "f32_32x32x8_bf16", "two_stage_window", {"F": 24, "F2": 31, "overflow": 128}, 8),
    ("CDNA3", "f32_16x16x32_fp8_bf8", "two_stage_window",
     {"F": 24, "F2": 31, "even_odd": True, "drop_c": True, "nonfinite_c_r": -1}, 16),
])
def test_reference_section_8_parameters(arch, suffix, accumulator, params, step):
    dp = mmasim.MMA(arch, suffix).datapath
    assert (dp.accumulator, dp.parameters, dp.chunk or dp.k) == (accumulator, params, step)


def test_bf16_and_bf16_1k_of_one_shape_are_told_apart():
    plain = mmasim.MMA("CDNA2", "f32_32x32x4bf16")
    onek = mmasim.MMA("CDNA2", "f32_32x32x4bf16_1k")
    assert plain.instruction != onek.instruction
    assert mmasim.MMA("CDNA2", "v_mfma.kind::1k.m32n32k4.f32.bf16.bf16").datapath == onek.datapath


def test_describe_says_peer_and_that_nan_payloads_are_not_compared():
    text = mmasim.MMA("MI300X", "f32_32x32x8_f16").describe()
    assert "peer" in text and "MMA-Sim 2.1.1" in text and "NaN payloads are not compared" in text


# ------------------------------------------------------------------ bad input
def test_unknown_suffix_names_close_matches():
    with pytest.raises(mmasim.UnknownInstruction, match="f32_32x32x8_f16"):
        mmasim.MMA("CDNA3", "f32_32x32x8f16")      # the CDNA1/2 spelling on CDNA3
    with pytest.raises(mmasim.UnknownInstruction, match="f32_16x16x32_fp8_fp8"):
        mmasim.MMA("MI300X", "f32_16x16x32_fp8_fp9")


def test_instruction_of_another_generation_is_unknown():
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA("MI100", "f64_16x16x4f64")       # f64 MFMA arrived with CDNA2
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA("MI250X", "f32_16x16x32_fp8_fp8")


def test_wrong_k_is_a_shape_error():
    m = mmasim.MMA("CDNA1", "f32_32x32x8f16")
    with pytest.raises(mmasim.ShapeError, match=r"\(\.\.\., 8\)"):
        m.dot([f16(1.0)] * 4, [f16(1.0)] * 4, 0)
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA("CDNA1", "v_mfma.m32n32k16.f32.f16.f16")


def test_fnuz_word_out_of_range_is_refused():
    m = mmasim.MMA("CDNA3", "f32_16x16x32_fp8_fp8")
    with pytest.raises(mmasim.WordRangeError, match="0x100"):
        m.dot([0x100] + [0] * 31, [0] * 32, 0)
    with pytest.raises(mmasim.WordRangeError):
        m.dot([-1] + [0] * 31, [0] * 32, 0)


def test_f32_c_word_out_of_range_is_refused():
    with pytest.raises(mmasim.WordRangeError):
        mmasim.MMA("CDNA2", "f32_4x4x4f16").dot([0] * 4, [0] * 4, 1 << 32)


def test_typed_arrays_round_trip():
    m = mmasim.MMA("CDNA3", "f32_32x32x8_f16")
    d = m.dot(np.ones(8, np.float16), np.ones(8, np.float16), np.float32(0.5))
    assert d.dtype == np.float32 and float(d) == 8.5
    assert int(m.dot([f16(1.0)] * 8, [f16(1.0)] * 8, f32(0.5))) == f32(8.5)
