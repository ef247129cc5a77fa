"""The mma.sync / mma.sp harness (mmasim.harness.nv_sync, generate, run, the CLI).

PTX spellings and register counts are the PTX ISA's (the ``mma`` / ``mma.sp`` syntax blocks and
the "Matrix fragments" sections); the end-to-end tests run ``harness run`` on a simulated device
and check the written vector files with ``mmasim validate``.
"""
import json

import numpy as np
import pytest

import mmasim
import mmasim.cli.main as cli
from mmasim.vectors import files as vectors
from mmasim.errors import HarnessError
from mmasim.harness import generate as gen
from mmasim.harness import nv_sync, measure as hrun
from mmasim.harness.spec import KernelSpec

# (arch, instruction, PTX opcode as the PTX ISA spells it, registers per lane a, b, c, d)
PTX = [
    ("Ampere", "mma.sync.m16n8k16.f32.f16.f16", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", (4, 2, 4, 4)),
    ("Ampere", "mma.sync.m16n8k8.f16.f16.f16", "mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f16", (2, 1, 2, 2)),
    ("Ampere", "mma.sync.m16n8k16.f32.bf16.bf16", "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32", (4, 2, 4, 4)),
    ("Ampere", "mma.sync.m16n8k8.f32.tf32.tf32", "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32", (4, 2, 4, 4)),
    # f64: one .f64 register per element = two 32-bit words
    ("Ampere", "mma.sync.m8n8k4.f64.f64.f64", "mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64", (2, 2, 4, 4)),
    ("Hopper", "mma.sync.m16n8k16.f64.f64.f64", "mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64", (16, 8, 8, 8)),
    ("Ampere", "mma.sync.m16n8k32.s32.s8.u8.satfinite", "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.u8.s32",
     (4, 2, 4, 4)),
    ("Ampere", "mma.sync.m16n8k64.s32.u4.s4", "mma.sync.aligned.m16n8k64.row.col.s32.u4.s4.s32", (4, 2, 4, 4)),
    ("Ampere", "mma.sync.m16n8k256.s32.b1.b1.and.popc", "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc",
     (4, 2, 4, 4)),
    ("Turing", "mma.sync.m8n8k128.s32.b1.b1.xor.popc", "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc",
     (1, 1, 2, 2)),
    ("Hopper", "mma.sync.m16n8k32.f16.e5m2.e4m3", "mma.sync.aligned.m16n8k32.row.col.f16.e5m2.e4m3.f16", (4, 2, 2, 2)),
    ("Volta", "mma.sync.m8n8k4.f32.f16.f16.f16", "mma.sync.aligned.m8n8k4.row.col.f32.f16.f16.f16", (2, 2, 4, 8)),
    ("RTX Blackwell", "mma.sync.kind::f8f6f4.m16n8k32.f16.e3m2.e2m1",
     "mma.sync.aligned.m16n8k32.row.col.kind::f8f6f4.f16.e3m2.e2m1.f16", (4, 2, 2, 2)),
    ("RTX Blackwell", "mma.sync.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.m16n8k64.f32.e2m1.e2m1.ue4m3",
     "mma.sync.aligned.m16n8k64.row.col.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3",
     (4, 2, 4, 4)),
    ("RTX Blackwell", "mma.sync.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.m16n8k32.f32.e4m3.e2m3.ue8m0",
     "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e4m3.e2m3.f32.ue8m0",
     (4, 2, 4, 4)),
    # mma.sp: A is the compressed half (M x K/2)
    ("Ampere", "mma.sync.sp.m16n8k16.f32.f16.f16", "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", (2, 2, 4, 4)),
    ("Ampere", "mma.sync.sp::ordered_metadata.m16n8k32.f32.bf16.bf16",
     "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32", (4, 4, 4, 4)),
    ("Ampere", "mma.sync.sp.m16n8k64.s32.s8.s8.satfinite", "mma.sp.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.s8.s32",
     (4, 4, 4, 4)),
    ("RTX Blackwell",
     "mma.sync.sp::ordered_metadata.kind::mxf4.block_scale.scale_vec::2X.block32.m16n8k128.f32.e2m1.e2m1.ue8m0",
     "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.scale_vec::2X.f32.e2m1.e2m1.f32.ue8m0",
     (4, 4, 4, 4)),
]


#: the nvcc target of each architecture: the arch-specific sm_NNa where the architecture has one
#: (wgmma needs sm_90a, tcgen05 sm_100a / sm_103a: PTX ISA "Target ISA notes"), else sm_NN
TARGETS = {"Volta": "sm_70", "Turing": "sm_75", "Ampere": "sm_80", "Ada Lovelace": "sm_89", "Hopper": "sm_90a",
           "Blackwell": "sm_100a", "Blackwell Ultra": "sm_103a", "RTX Blackwell": "sm_120a"}


@pytest.mark.parametrize("arch, instruction, opcode, regs", PTX, ids=[p[1] for p in PTX])
def test_kernel_spells_the_ptx_isa_opcode_with_its_register_counts(arch, instruction, opcode, regs):
    (spec,) = nv_sync.specs(mmasim.MMA(arch, instruction))
    assert spec.assembly == opcode
    words = {b.operand: b.words for b in spec.inputs}
    assert (words["a"], words["b"], words["c"], spec.output.words) == regs
    assert f'asm volatile("{opcode} ' in spec.device
    assert spec.threads == 32 and spec.target == TARGETS[arch]


def test_sparse_kernel_passes_metadata_register_and_immediate_selector():
    (spec,) = nv_sync.specs(mmasim.MMA("Ampere", "mma.sync.sp.m16n8k16.f32.f16.f16"))
    assert [b.operand for b in spec.inputs] == ["a", "b", "c", "sparse_metadata"]
    # d, a, b, c, e, f: e the metadata register (%12 after 4 + 2 + 2 + 4 registers), f an immediate
    assert "{%8, %9, %10, %11}, %12, 0x0;" in spec.device
    assert spec.options["sparsity_selector"] == 0


def test_block_scaled_kernel_passes_scale_registers_with_byte_and_thread_ids():
    (spec,) = nv_sync.specs(mmasim.MMA(
        "RTX Blackwell", "mma.sync.kind::mxf4.block_scale.scale_vec::2X.block32.m16n8k64.f32.e2m1.e2m1.ue8m0"))
    assert [b.operand for b in spec.inputs] == ["a", "b", "c", "scale_a", "scale_b"]
    assert "%14, {0, 0}, %15, {0, 0};" in spec.device


def test_kernel_spec_json_round_trips():
    (spec,) = nv_sync.specs(mmasim.MMA("Hopper", "mma.sync.m16n8k8.f64.f64.f64"))
    assert KernelSpec.from_json(spec.to_json()) == spec


def test_sparse_compression_keeps_the_selected_elements():
    # selector 0x4 keeps positions 0 and 1 of each chunk of 4, 0xE positions 2 and 3 (PTX mma.sp metadata)
    m = mmasim.MMA("Ampere", "mma.sync.sp::ordered_metadata.m16n8k16.f32.f16.f16")
    A = np.arange(16 * 16, dtype=np.uint64).reshape(1, 16, 16)
    md = np.full((1, 16, 1), 0xE4E4, dtype=np.uint64)      # chunks 0..3: 0x4, 0xE, 0x4, 0xE
    stored = nv_sync._compress(m, A, md)
    assert stored.shape == (1, 16, 8)
    assert stored[0, 0].tolist() == [0, 1, 6, 7, 8, 9, 14, 15]


DENSE = [
    ("Ampere", "mma.sync.m16n8k16.f32.f16.f16"),
    ("Ampere", "mma.sync.m16n8k8.f16.f16.f16"),
    ("Ampere", "mma.sync.m16n8k16.f32.bf16.bf16"),
    ("Ampere", "mma.sync.m16n8k8.f32.tf32.tf32"),
    ("Ampere", "mma.sync.m8n8k4.f64.f64.f64"),
    ("Ampere", "mma.sync.m16n8k32.s32.s8.u8.satfinite"),
    ("Ampere", "mma.sync.m16n8k64.s32.u4.s4"),
    ("Ampere", "mma.sync.m16n8k128.s32.b1.b1.xor.popc"),
    ("Hopper", "mma.sync.m16n8k16.f64.f64.f64"),
    ("Hopper", "mma.sync.m16n8k32.f32.e4m3.e5m2"),
    ("Volta", "mma.sync.m8n8k4.f32.f16.f16"),
]


@pytest.mark.parametrize("arch, instruction", DENSE, ids=[d[1] for d in DENSE])
def test_placed_registers_run_on_the_simulated_warp_give_the_matrix_form(arch, instruction):
    m = mmasim.MMA(arch, instruction)
    (spec,) = nv_sync.specs(m)
    M, N = m.shape
    ops, _ = hrun.random_tiles(m, 3, np.random.default_rng(1), M, N)
    inputs = nv_sync.place(spec, m, ops)
    assert [x.size for x in inputs] == [3 * 32 * b.words for b in spec.inputs]
    out = hrun.SimulatedDevice().run(spec, m, inputs, 3)
    D = nv_sync.read(spec, m, out)
    for t in range(3):
        assert np.array_equal(D[t], m(ops["a"][t], ops["b"][t], ops["c"][t]).astype(np.uint64))


class _Sim(hrun.SimulatedDevice):
    def __init__(self, cc, flip=False):
        super().__init__("simulated test GPU", cc)
        self.flip = flip

    def run(self, spec, model, inputs, cases):
        out = super().run(spec, model, inputs, cases)
        if self.flip:
            out = out.copy()
            out[0] ^= 1
        return out


RUNS = [
    ("Ampere", "8.0", ["mma.sync.m16n8k16.f32.f16.f16", "mma.sync.m16n8k16.f32.bf16.bf16",
                       "mma.sync.m16n8k8.f32.tf32.tf32", "mma.sync.m8n8k4.f64.f64.f64",
                       "mma.sync.m16n8k32.s32.s8.s8.satfinite", "mma.sync.m8n8k128.s32.b1.b1.and.popc"]),
    ("Hopper", "9.0", ["mma.sync.m16n8k32.f16.e4m3.e4m3", "mma.sync.m16n8k4.f64.f64.f64"]),
]


@pytest.mark.parametrize("arch, cc, names", RUNS, ids=[r[0] for r in RUNS])
def test_harness_run_on_a_simulated_device_writes_vectors_validate_accepts(tmp_path, capsys, arch, cc, names):
    res = hrun.measure(arch, tmp_path, cases=8, seed=3, instructions=names, device=_Sim(cc), progress=False)
    assert not res["skipped"] and len(res["written"]) == len(names)
    v = vectors.load(res["written"][0])
    M, N = mmasim.MMA(arch, names[0]).shape
    assert len(v) == 8 * M * N
    prov = v.provenance
    # a simulated device's words are the simulator's own: labelled "simulated", never "hardware"
    assert prov["source"] == "simulated" and prov["tool"] == "mmasim harness"
    assert prov["device"] == "simulated test GPU" and prov["compute_capability"] == cc
    assert prov["random_tiles"] == 8 and prov["cases"] == len(v) and "date" in prov
    assert cli.main(["validate", "-q", "--json", str(tmp_path)]) == 0
    out = json.loads(capsys.readouterr().out)
    summary = out["summary"]
    assert summary["files"] == len(names) and summary["mismatches"] == 0 and summary["errors"] == 0
    assert summary["by_source"]["simulated"]["files"] == len(names)
    assert summary["by_source"]["hardware"]["files"] == 0


def test_harness_run_with_a_flipped_output_bit_gives_a_mismatch_naming_the_file(tmp_path, capsys):
    name = "mma.sync.m16n8k16.f32.f16.f16"
    res = hrun.measure("Ampere", tmp_path, cases=4, instructions=[name], device=_Sim("8.0", flip=True), progress=False)
    assert cli.main(["validate", "-q", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert hrun.file_name(name) in out and res["written"][0].endswith(hrun.file_name(name))


def test_probe_cases_sit_on_the_tile_diagonal_and_every_entry_is_recorded(tmp_path):
    m = mmasim.MMA("Ampere", "mma.sync.m16n8k16.f32.f16.f16")
    one, two = 0x3C00, 0x4000
    probes = {"a": np.full((3, 16), one, dtype=np.uint64), "b": np.full((3, 16), two, dtype=np.uint64),
              "c": np.array([0, 0x3F800000, 0x40000000], dtype=np.uint64), "labels": np.array(["p0", "p1", "p2"])}
    res = hrun.measure("Ampere", tmp_path, cases=1, probes=True, instructions=[m.instruction], device=_Sim("8.0"),
                   probe_source=lambda model: probes, progress=False)
    v = vectors.load(res["written"][0])
    assert v.provenance["probe_cases"] == 3 and len(v) == 2 * 16 * 8
    labels = list(v.labels)
    for i, lab in enumerate(["p0", "p1", "p2"]):
        k = 16 * 8 + i * 8 + i                      # tile 1 (after the random tile), entry (i, i)
        assert labels[k] == lab
        # 16 products 1 * 2 = 32 plus C = 0, 1, 2
        assert int(v.d[k]) == [0x42000000, 0x42040000, 0x42080000][i]


def test_harness_run_refuses_a_device_of_another_architecture(tmp_path):
    with pytest.raises(HarnessError, match="compute capability 8.0.*need 9.0"):
        hrun.measure("Hopper", tmp_path, cases=1, instructions=["mma.sync.m16n8k4.f64.f64.f64"], device=_Sim("8.0"))


def test_cli_harness_run_without_a_gpu_is_a_one_line_error(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))          # no nvidia-smi
    assert cli.main(["harness", "run", "Ampere", "--out", str(tmp_path / "v")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no NVIDIA GPU" in err[0]


def test_cli_harness_generate_writes_source_spec_and_build_script(tmp_path, capsys):
    ins = "mma.sync.m16n8k8.f32.tf32.tf32"
    assert cli.main(["harness", "generate", "Ampere", ins, "--out", str(tmp_path)]) == 0
    (spec,) = nv_sync.specs(mmasim.MMA("Ampere", ins))
    src = (tmp_path / f"{spec.name}.cu").read_text()
    assert spec.device in src and "int main(" in src
    assert KernelSpec.from_json((tmp_path / f"{spec.name}.json").read_text()) == spec
    assert f"code=sm_80 -std=c++17 -o {spec.name} {spec.name}.cu" in (tmp_path / "build.sh").read_text()


def test_cli_harness_generate_unknown_instruction_is_an_error(tmp_path, capsys):
    assert cli.main(["harness", "generate", "Ampere", "mma.sync.m99n8k8.f32.tf32.tf32", "--out", str(tmp_path)]) == 1
    assert "mmasim: error:" in capsys.readouterr().err


def test_generate_lists_instructions_whose_emitter_is_missing(tmp_path, monkeypatch):
    from mmasim.harness import table
    monkeypatch.setitem(table.EMITTERS, "mma.sync", "mmasim.harness.no_such_emitter")
    res = gen.generate("Turing", out=tmp_path)
    assert not res.kernels and len(res.skipped) == len(mmasim.instructions("Turing"))
    assert all(why.startswith("not generated:") and "no_such_emitter" in why for _, why in res.skipped)
    assert "not generated" in (tmp_path / "build.sh").read_text()


def test_generate_reports_refused_datapaths_instead_of_dropping_them(tmp_path):
    # mmasim refuses m8n8k4 with an f16 D on Ampere (not measured): listed, not silently dropped
    res = gen.generate("Ampere", out=tmp_path)
    skipped = dict(res.skipped)
    assert "mma.sync.m8n8k4.f16.f16.f16" in skipped
    assert len(res.kernels) + len(res.skipped) == len(mmasim.instructions("Ampere"))
    assert json.loads((tmp_path / (res.kernels[0][0].name + ".json")).read_text())["arch"] == "Ampere"


def test_nvcc_named_by_MMASIM_NVCC_is_preferred_and_sm_70_needs_a_cuda_12_toolchain(tmp_path, monkeypatch):
    from mmasim.errors import ToolchainError
    from mmasim.harness import toolchain
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\ncase \"$1\" in\n--version) echo 'Cuda compilation tools, release 13.0, V13.0.88';;\n"
                    "--list-gpu-arch) echo compute_75; echo compute_90;;\nesac\n")
    fake.chmod(0o755)
    monkeypatch.setenv("MMASIM_NVCC", str(fake))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    toolchain.compilers.cache_clear()
    try:
        first = toolchain.compilers()[0]
        assert (first.path, first.origin, first.version) == (str(fake), "MMASIM_NVCC", "13.0")
        assert toolchain.find_nvcc("sm_90a") == first
        if not any(n.knows("sm_70") for n in toolchain.compilers()):
            with pytest.raises(ToolchainError, match="sm_70.*nvidia-cuda-nvcc-cu12"):
                toolchain.find_nvcc("sm_70")
    finally:
        toolchain.compilers.cache_clear()


@pytest.mark.parametrize("arch, instruction", [
    ("RTX Blackwell", "mma.sync.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.m16n8k64.f32.e2m1.e2m1.ue4m3"),
    ("Ampere", "mma.sync.sp.m16n8k32.f32.f16.f16"),
    ("Hopper", "mma.sync.m16n8k8.f64.f64.f64"),
])
def test_vector_file_cases_of_a_tile_are_its_rows_columns_scales_and_metadata(arch, instruction):
    # case (t, i, j) of the vector file is row i of A, column j of B, C[i][j] with row i of scale_a,
    # column j of scale_b and row i's metadata: the dot form on them equals the matrix form's D[i][j]
    m = mmasim.MMA(arch, instruction)
    M, N = m.shape
    ops, labels = hrun.random_tiles(m, 7, np.random.default_rng(5), M, N)
    kw = lambda t: {k: ops[k][t] for k in ("scale_a", "scale_b", "sparse_metadata") if k in ops}
    D = np.stack([m(ops["a"][t], ops["b"][t], ops["c"][t], **kw(t)) for t in range(7)]).astype(np.uint64)
    cases = hrun.dot_cases(m, ops, D)
    extra = {k: cases[k] for k in ("scale_a", "scale_b", "sparse_metadata") if k in cases}
    assert np.array_equal(m.dot(cases["a"], cases["b"], cases["c"], **extra).astype(np.uint64), cases["d"])
    assert len(labels) == len(cases["d"]) == 7 * M * N and labels[0] == "uniform" and labels[-1] == "mixed"


_SCALE_SPARSE_LAYOUTS = hasattr(__import__("mmasim.placement").placement, "compress")

SCALED_SPARSE = [
    ("Ampere", "8.0", ["mma.sync.sp.m16n8k16.f32.f16.f16", "mma.sync.sp::ordered_metadata.m16n8k16.f32.tf32.tf32",
                       "mma.sync.sp.m16n8k64.s32.s8.u8.satfinite", "mma.sync.sp::ordered_metadata.m16n8k128.s32.u4.u4"]),
    ("RTX Blackwell", "12.0", [
        "mma.sync.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.m16n8k32.f32.e4m3.e2m1.ue8m0",
        "mma.sync.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.m16n8k64.f32.e2m1.e2m1.ue4m3",
        "mma.sync.sp::ordered_metadata.kind::mxf4.block_scale.scale_vec::2X.block32.m16n8k128.f32.e2m1.e2m1.ue8m0",
        "mma.sync.sp::ordered_metadata.kind::f8f6f4.m16n8k64.f16.e3m2.e2m3"]),
]


@pytest.mark.skipif(not _SCALE_SPARSE_LAYOUTS,
                    reason="needs the scale-factor / sparse-metadata register layouts (mmasim.placement.compress)")
@pytest.mark.parametrize("arch, cc, names", SCALED_SPARSE, ids=[r[0] for r in SCALED_SPARSE])
def test_sparse_and_block_scaled_kernels_run_on_a_simulated_device_and_validate(tmp_path, capsys, arch, cc, names):
    res = hrun.measure(arch, tmp_path, cases=6, seed=9, instructions=names, device=_Sim(cc), progress=False)
    assert not res["skipped"] and len(res["written"]) == len(names)
    assert cli.main(["validate", "-q", "--json", str(tmp_path)]) == 0
    summary = json.loads(capsys.readouterr().out)["summary"]
    assert summary["files"] == len(names) and summary["mismatches"] == 0 and summary["errors"] == 0
    for name in names:                                  # the kernel's register counts are the layouts'
        m = mmasim.MMA(arch, name)
        (spec,) = nv_sync.specs(m)
        for b in spec.inputs:
            sel = {"selector": 0} if b.operand == "sparse_metadata" else {}
            assert m.layout(b.operand, **sel).registers == b.words, (name, b.operand)


def test_a_harness_program_that_does_not_finish_is_stopped_and_reported(tmp_path, monkeypatch):
    """host.execute: a device program still running after the time limit (a hung kernel) is killed
    and named in a HarnessError, instead of holding `harness run` for ever."""
    from mmasim.harness import host
    m = mmasim.MMA("Ampere", "mma.sync.m16n8k16.f32.f16.f16")
    spec = nv_sync.specs(m)[0]
    ops = {"a": np.zeros((1, 16, 16), np.uint64), "b": np.zeros((1, 16, 8), np.uint64),
           "c": np.zeros((1, 16, 8), np.uint64)}
    hung = tmp_path / "hung"
    hung.write_text("#!/bin/sh\nexec sleep 30\n")
    hung.chmod(0o755)
    with pytest.raises(HarnessError, match=r"did not finish within 0.5 s"):
        host.execute(spec, hung, nv_sync.place(spec, m, ops), tmp_path / "run", timeout=0.5)
    monkeypatch.setenv("MMASIM_HARNESS_TIMEOUT", "0.5")
    with pytest.raises(HarnessError, match="MMASIM_HARNESS_TIMEOUT sets the limit"):
        host.execute(spec, hung, nv_sync.place(spec, m, ops), tmp_path / "run")
    monkeypatch.setenv("MMASIM_HARNESS_TIMEOUT", "soon")
    with pytest.raises(HarnessError, match="MMASIM_HARNESS_TIMEOUT must be a positive number of seconds, got 'soon'"):
        host.execute(spec, hung, nv_sync.place(spec, m, ops), tmp_path / "run")
