"""NVIDIA mma.sync / wgmma names, shapes, aliases, statuses and bad input.

The instruction lists below restate MMA-Sim 2.1.1's published per-architecture
lists (nv_ptx/isa_mma.py, isa_wgmma.py) as data.
"""

import pytest

import mmasim

F8F6F4 = ["e5m2", "e4m3", "e3m2", "e2m3", "e2m1"]
SM70 = ["m8n8k4.f32.f16.f16.f32", "m8n8k4.f32.f16.f16.f16", "m8n8k4.f16.f16.f16.f16"]
SM75 = ["m16n8k8.f32.f16.f16.f32", "m16n8k8.f16.f16.f16.f16"]
SM80 = ["m8n8k4.f64.f64.f64.f64", "m16n8k8.f32.tf32.tf32.f32", "m16n8k4.f32.tf32.tf32.f32",
        "m16n8k16.f32.f16.f16.f32", "m16n8k16.f16.f16.f16.f16", "m16n8k16.f32.bf16.bf16.f32",
        "m16n8k8.f32.bf16.bf16.f32"]
SM89 = [f"m16n8k{k}.{d}.{a}.{b}.{d}" for k in (32, 16) for d in ("f32", "f16")
        for a in ("e5m2", "e4m3") for b in ("e5m2", "e4m3")]
SM90 = ["m16n8k16.f64.f64.f64.f64", "m16n8k8.f64.f64.f64.f64", "m16n8k4.f64.f64.f64.f64"]
SM120 = [f"m16n8k32.kind::f8f6f4.{d}.{a}.{b}.{d}" for d in ("f32", "f16") for a in F8F6F4 for b in F8F6F4]
SM120_SCALED = ([f"m16n8k32.kind::mxf8f6f4.block32.f32.{a}.{b}.f32.ue8m0" for a in F8F6F4 for b in F8F6F4]
                + ["m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0",
                   "m16n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.f32.ue8m0",
                   "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue8m0",
                   "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3"])
MMA_LISTS = {
    "Volta": SM70,
    "Turing": SM75 + SM70,
    "Ampere": SM80 + SM75,
    "Ada Lovelace": SM89 + SM80 + SM75,
    "Hopper": SM90 + SM80 + SM75,
    "Blackwell": SM80 + SM75,
    "RTX Blackwell": SM120 + SM89 + SM80 + SM75 + SM120_SCALED,
}
WGMMA_N = range(8, 257, 8)
WGMMA = ([f"m64n{n}k8.f32.tf32.tf32" for n in WGMMA_N] + [f"m64n{n}k16.f32.f16.f16" for n in WGMMA_N]
         + [f"m64n{n}k16.f16.f16.f16" for n in WGMMA_N] + [f"m64n{n}k16.f32.bf16.bf16" for n in WGMMA_N]
         + [f"m64n{n}k32.{d}.{a}.{b}" for n in WGMMA_N for d in ("f32", "f16")
            for a in ("e5m2", "e4m3") for b in ("e5m2", "e4m3")])


@pytest.mark.parametrize("arch", sorted(MMA_LISTS))
def test_every_mma_sim_instruction_resolves(arch):
    for instruction in MMA_LISTS[arch]:
        m = mmasim.MMA(arch, instruction)
        if _mxf8f6f4_e2m1(m.datapath):   # T2 measured the e2m1 reading for kind::f8f6f4 only
            assert m.status.kind == "assumed", instruction
        else:
            assert m.status.kind in ("peer", "hardware"), instruction


def _mxf8f6f4_e2m1(dp):
    return dp.arch == "RTX Blackwell" and dp.kind == "mxf8f6f4" and "e2m1.sm120" in (dp.a, dp.b)


def test_every_wgmma_n_from_8_to_256_resolves():
    for instruction in WGMMA:
        m = mmasim.MMA("Hopper", instruction)
        assert m.datapath.op == "wgmma.mma_async" and m.datapath.c == m.datapath.d


@pytest.mark.parametrize("alias,family", [
    ("V100", "Volta"), ("sm_70", "Volta"),
    ("T4", "Turing"), ("RTX 2060", "Turing"), ("RTX 2080 Ti", "Turing"), ("sm_75", "Turing"),
    ("A100", "Ampere"), ("A10", "Ampere"), ("RTX 3090", "Ampere"), ("sm_80", "Ampere"), ("sm_86", "Ampere"),
    ("L4", "Ada Lovelace"), ("L40S", "Ada Lovelace"), ("RTX 4090", "Ada Lovelace"), ("sm_89", "Ada Lovelace"),
    ("H100", "Hopper"), ("H200", "Hopper"), ("GH200", "Hopper"), ("sm_90", "Hopper"), ("sm_90a", "Hopper"),
    ("B200", "Blackwell"), ("sm_100", "Blackwell"),
    ("RTX 5070 Ti", "RTX Blackwell"), ("RTX 5090", "RTX Blackwell"), ("RTX PRO 6000", "RTX Blackwell"),
    ("sm_120", "RTX Blackwell"), ("sm_120a", "RTX Blackwell"),
])
def test_product_names_resolve_to_families(alias, family):
    assert mmasim.aliases(alias)[0] == family


def test_ptx_spellings_and_family_prefixes():
    a = mmasim.MMA("sm_80", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    b = mmasim.MMA("Ampere", "m16n8k16.f32.f16.f16.f32")
    assert a.datapath == b.datapath
    w = mmasim.MMA("H100", "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16")
    assert w.datapath.a == "bf16"
    k = mmasim.MMA("RTX 5090", "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f16.e2m1.e3m2.f16")
    assert k.datapath.a == "e2m1.sm120" and k.datapath.rounding == "rne-f16"
    q = mmasim.MMA("RTX 5090", "mma.sync.aligned.kind::f8f6f4.m16n8k32.row.col", a_type="e4m3",
                   b_type="e2m1", d_type="f32")
    assert q.datapath.b == "e2m1.sm120"


def test_blackwell_has_both_tcgen05_and_mma_sync():
    ops = {dp.op for dp in mmasim.datapaths("B200")}
    assert ops == {"tcgen05.mma", "mma.sync"}
    assert mmasim.MMA("B200", "m16n8k16.f32.f16.f16.f32").datapath.parameters == {"F": 25, "zeros": -133}


def test_rtx_blackwell_fp8_without_kind_is_not_ambiguous():
    m = mmasim.MMA("RTX 5090", "m16n8k32.f32.e4m3.e4m3.f32")
    assert m.datapath.kind is None
    assert mmasim.MMA("RTX 5090", "m16n8k32.kind::f8f6f4.f32.e4m3.e4m3.f32").datapath.kind == "f8f6f4"


def test_parameters_per_architecture():
    table = {  # arch: (instruction, F, chunk, e_zero)
        "Volta": ("m8n8k4.f16.f16.f16.f16", 23, 4, -19),
        "Turing": ("m16n8k8.f32.f16.f16.f32", 24, 8, -132),
        "Ampere": ("m16n8k8.f32.tf32.tf32.f32", 24, 4, -132),
        "Ada Lovelace": ("m16n8k32.f16.e4m3.e5m2.f16", 13, 16, -20),
        "Hopper": ("m16n8k16.f16.f16.f16.f16", 25, 16, -21),
        "Blackwell": ("m16n8k8.f32.tf32.tf32.f32", 25, 8, -133),
        "RTX Blackwell": ("m16n8k32.kind::f8f6f4.f32.e2m1.e2m1.f32", 25, 32, -133),
    }
    for arch, (instruction, F, chunk, e_zero) in table.items():
        dp = mmasim.MMA(arch, instruction).datapath
        assert (dp.parameters["F"], dp.chunk, dp.parameters["zeros"]) == (F, chunk, e_zero), arch


def test_describe_shows_status_and_container_rule():
    text = mmasim.MMA("RTX 5070 Ti", "m16n8k32.kind::f8f6f4.f32.e2m1.e4m3.f32").describe()
    assert "hardware" in text and "RTX 5070 Ti" in text and "bits 5:0" in text and "T2" in text
    peer = mmasim.MMA("H100", "m16n8k8.f32.f16.f16.f32").describe()
    assert "validation: peer" in peer and "MMA-Sim 2.1.1" in peer
    gst = mmasim.MMA("RTX 5090", "m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0").describe()
    assert "group_scaled_window" in gst and "F=35" in gst and "zeros=-139" in gst


# ------------------------------------------------------------------ bad input
def test_unknown_architecture():
    with pytest.raises(mmasim.UnknownArchitecture):
        mmasim.MMA("GTX 1080", "m8n8k4.f32.f16.f16.f32")


@pytest.mark.parametrize("arch,instruction", [
    ("H100", "wgmma.mma_async.m64n12k16.f32.f16.f16"),    # N must be a multiple of 8
    ("H100", "wgmma.mma_async.m64n264k16.f32.f16.f16"),   # N at most 256
    ("H100", "wgmma.mma_async.m128n8k16.f32.f16.f16"),    # M is 64
    ("H100", "m64n8k16.f32.e4m3.e4m3"),                   # fp8 wgmma is k32
    ("A100", "m16n8k32.f32.f16.f16.f32"),                 # wrong K
    ("A100", "m16n16k16.f32.f16.f16.f32"),                # wrong N
    ("Hopper", "m8n8k4.f32.f16.f16.f32"),                 # m8n8k4 f16 only on Volta/Turing (+Ampere chain)
    ("Volta", "m16n8k8.f32.f16.f16.f32"),                 # sm_75 instruction
    ("Turing", "m16n8k16.f32.f16.f16.f32"),               # sm_80 instruction
    ("Ampere", "m16n8k32.f32.e4m3.e4m3.f32"),             # fp8 from sm_89
    ("Ada Lovelace", "m16n8k32.kind::f8f6f4.f32.e2m1.e2m1.f32"),   # sm_120
    ("Ampere", "m16n8k16.f64.f64.f64.f64"),               # f64 m16n8k16 from sm_90
    ("Hopper", "m16n8k32.kind::f8f6f4.f32.e4m3.e4m3.f32"),
    ("RTX Blackwell", "m16n8k64.kind::mxf4nvf4.block32.f32.e2m1.e2m1.f32.ue4m3"),  # invalid in PTX
    ("RTX Blackwell", "wgmma.mma_async.m64n8k16.f32.f16.f16"),
])
def test_unknown_instructions_are_rejected(arch, instruction):
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA(arch, instruction)


def test_wrong_k_shape_in_dot():
    m = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    with pytest.raises(mmasim.ShapeError, match=r"\(\.\.\., 16\)"):
        m.dot([0] * 8, [0] * 8, 0)


def test_scale_count_for_rtx_blackwell_block_scaled():
    m = mmasim.MMA("RTX 5090", "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3")
    with pytest.raises(mmasim.ScaleError):
        m.dot([0] * 64, [0] * 64, 0, scale_a=[0x38] * 2, scale_b=[0x38] * 2)
    with pytest.raises(mmasim.ScaleError):
        m.dot([0] * 64, [0] * 64, 0)


def test_word_out_of_range_for_f8f6f4_byte_and_fp4_entry():
    m = mmasim.MMA("RTX 5090", "m16n8k32.kind::f8f6f4.f32.e2m1.e2m1.f32")
    with pytest.raises(mmasim.WordRangeError):
        m.dot([0x100] + [0] * 31, [0] * 32, 0)
    x = mmasim.MMA("RTX 5090", "m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0")
    with pytest.raises(mmasim.WordRangeError):
        x.dot([0x10] + [0] * 63, [0] * 64, 0, scale_a=[127] * 2, scale_b=[127] * 2)


def test_mma_sync_is_not_block_scaled():
    m = mmasim.MMA("RTX 5090", "m16n8k32.kind::f8f6f4.f32.e4m3.e4m3.f32")
    with pytest.raises(mmasim.ScaleError):
        m.dot([0] * 32, [0] * 32, 0, scale_a=[127], scale_b=[127])


def test_every_nvidia_mma_sync_datapath_states_its_evidence():
    for arch in ("Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell", "RTX Blackwell"):
        for dp in mmasim.datapaths(arch):
            if dp.op == "tcgen05.mma":
                continue
            assert dp.status.evidence, (arch, dp)
            if dp.status.kind == "hardware":
                assert dp.status.device and (dp.status.source == "T2" or "Khattak & Mikaitis" in dp.status.source), (arch, dp)
            if dp.status.kind == "assumed":
                # the refused Ampere m8n8k4 f16-D form; RTX Blackwell mxf8f6f4 with e2m1 (by analogy);
                # every sparse mma.sp / wgmma.sp (the dense datapath on the selected elements, unmeasured);
                # the integer forms: exact arithmetic per the PTX ISA, not measured;
                # kind-less fp8 mma.sync on Hopper / Blackwell: by analogy, not measured
                assert dp.refuse or _mxf8f6f4_e2m1(dp) or dp.sparse or (
                    dp.accumulator == "integer" and "per the PTX ISA; not measured" in dp.status.evidence) or (
                    arch in ("Hopper", "Blackwell") and dp.a in ("e4m3", "e5m2") and not dp.kind
                    and dp.status.evidence.startswith("ptxas's lowering")), (arch, dp)
            if dp.sparse:
                assert dp.status.kind == "assumed", (arch, dp)
