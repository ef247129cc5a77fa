"""The AMD harness (mmasim.harness.amd): every v_mfma / v_smfmac instruction mmasim accepts is
real assembly for its gfx target (LLVM's AMDGPU assembler, no GPU needed), the generated HIP
device code compiles, and place / read agree with the placement package and the matrix form.

The assembler checks need LLVM 19 (``llvm-mc-19``; ``clang-19`` for the device code): ``.ci/run``
installs them, and the tests skip, naming the missing tool, only where they are absent."""
from __future__ import annotations

import re

import attrs
import numpy as np
import pytest

import mmasim
from mmasim.errors import HarnessError, ShapeError, TableError, ToolchainError, UnsupportedDatapath
from mmasim.harness import amd, host
from mmasim.harness import measure as hrun
from mmasim.harness.spec import KernelSpec

ARCHS = ("CDNA1", "CDNA2", "CDNA3")
ALL = [(arch, ins) for arch in ARCHS for ins in mmasim.instructions(arch)]
LLVM_MC, LLVM_MC_WHY = amd.find_llvm_mc()
CLANG, CLANG_WHY = amd.find_clang()
needs_mc = pytest.mark.skipif(LLVM_MC is None, reason=str(LLVM_MC_WHY))
needs_clang = pytest.mark.skipif(CLANG is None or LLVM_MC is None, reason=str(CLANG_WHY or LLVM_MC_WHY))


def _specs(arch):
    return [amd.specs(mmasim.MMA(arch, ins))[0] for ins in mmasim.instructions(arch)]


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    # one cache per test session: the first check of a target runs the tools, later ones reuse it
    monkeypatch.setenv("MMASIM_HARNESS_CACHE", str(tmp_path_factory.getbasetemp() / "harness-cache"))


# ---------------------------------------------------------------- what is generated
#: the gfx target of each CDNA generation (AMD's CDNA1 / CDNA2 / CDNA3 ISA guides: gfx908, gfx90a, gfx942)
TARGETS = {"CDNA1": "gfx908", "CDNA2": "gfx90a", "CDNA3": "gfx942"}


def test_every_amd_instruction_has_one_wavefront_kernel():
    for arch, ins in ALL:
        (s,) = amd.specs(mmasim.MMA(arch, ins))
        assert s.threads == 64 and s.target == TARGETS[arch] and s.arch == arch
        assert [b.operand for b in s.inputs][:3] == ["a", "b", "c"] and s.output.operand == "d"
        assert s.assembly.split()[0] == amd.mnemonic(mmasim.MMA(arch, ins))
        assert f'extern "C" __global__ void {s.name}(const uint32_t* const* in, uint32_t* out)' in s.device
        assert f"asm volatile(\"s_nop 7\\n\\t{s.assembly.split()[0]} %0, %1, %2, %" in s.device


def test_kernel_names_are_unique_within_an_architecture():
    for arch in ARCHS:
        names = [s.name for s in _specs(arch)]
        assert len(set(names)) == len(names)


def test_gfx908_accumulates_in_agprs_and_later_targets_in_vgprs():
    # CDNA1 ISA: the v_mfma destination and SRC2 are AccVGPRs; gfx90a / gfx942 allow VGPRs
    s908 = amd.specs(mmasim.MMA("CDNA1", "v_mfma_f32_32x32x8f16"))[0]
    assert s908.assembly == "v_mfma_f32_32x32x8f16 a[0:15], v[0:1], v[2:3], a[0:15]"
    assert '"+a"(acc)' in s908.device
    s942 = amd.specs(mmasim.MMA("CDNA3", "v_mfma_f32_32x32x8_f16"))[0]
    assert s942.assembly == "v_mfma_f32_32x32x8_f16 v[0:15], v[16:17], v[18:19], v[0:15]"
    assert '"+v"(acc)' in s942.device


@pytest.mark.parametrize("arch,ins,regs", [
    # register counts from the ISA guides' operand sizes (A, B, C/D per lane)
    ("CDNA1", "v_mfma_f32_32x32x1f32", (1, 1, 32)),           # 2 blocks of 32x32
    ("CDNA1", "v_mfma_f32_4x4x1f32", (1, 1, 4)),              # 16 blocks of 4x4
    ("CDNA1", "v_mfma_f32_16x16x8bf16", (1, 1, 4)),           # two bf16 per lane before _1k
    ("CDNA2", "v_mfma_f32_16x16x16bf16_1k", (2, 2, 4)),       # four bf16 per lane
    ("CDNA2", "v_mfma_f64_16x16x4f64", (2, 2, 8)),
    ("CDNA2", "v_mfma_f64_4x4x4f64", (2, 2, 2)),              # 4 blocks of 4x4 f64
    ("CDNA3", "v_mfma_f32_16x16x8_xf32", (2, 2, 4)),
    ("CDNA3", "v_mfma_i32_16x16x32_i8", (2, 2, 4)),
    ("CDNA3", "v_mfma_f32_32x32x16_fp8_fp8", (2, 2, 16)),
    ("CDNA3", "v_smfmac_f32_16x16x32_f16", (2, 4, 4)),        # A: 16x16 stored halves
    ("CDNA3", "v_smfmac_i32_32x32x32_i8", (2, 4, 16)),
])
def test_register_counts_follow_the_isa_operand_sizes(arch, ins, regs):
    r = amd.registers(mmasim.MMA(arch, ins))
    assert (r["a"], r["b"], r["d"]) == regs and r["c"] == r["d"]


def test_smfmac_reads_one_index_register_and_accumulates_into_d():
    # CDNA3 ISA: V_SMFMAC_* vdst, src0 (A), src1 (B), src2 (index VGPR); D = A * B + D
    s = amd.specs(mmasim.MMA("CDNA3", "v_smfmac_f32_16x16x32_f16"))[0]
    assert s.assembly == "v_smfmac_f32_16x16x32_f16 v[0:3], v[4:5], v[6:9], v10"
    assert [b.operand for b in s.inputs] == ["a", "b", "c", "sparse_metadata"]
    assert s.inputs[3].words == 1 and s.options["cbsz"] == 0 and s.options["abid"] == 0
    assert "%0, %1, %2, %3" in s.device and '"+v"(acc)' in s.device


def test_register_counts_equal_the_placement_layouts_where_registered():
    checked = 0
    for arch, ins in ALL:
        m = mmasim.MMA(arch, ins)
        r = amd.registers(m)
        for op in "abcd":
            try:
                lay = m.layout(op)
            except UnsupportedDatapath:
                continue
            assert lay.registers == r[op], (arch, ins, op)
            assert lay.blocks == amd.blocks(m), (arch, ins, op)
            checked += 1
    assert checked >= 4 * 70


def test_spec_json_round_trip():
    for arch in ARCHS:
        for s in _specs(arch):
            assert KernelSpec.from_json(s.to_json()) == s


def test_host_program_carries_the_kernel_and_the_buffer_sizes():
    s = amd.specs(mmasim.MMA("CDNA3", "v_smfmac_f32_16x16x32_f16"))[0]
    src = amd.host_source(s)
    assert s.device in src and "#include <hip/hip_runtime.h>" in src
    # words per case: 64 lanes x (2, 4, 4, 1) registers in, 64 x 4 out
    assert "kInWords[kInputs] = {128, 256, 256, 64}" in src and "kOutWords = 256" in src
    assert f"hipLaunchKernelGGL({s.name}, dim3((unsigned)cases), dim3(kThreads), 0, 0, din, dout)" in src
    assert 'kTarget = "gfx942"' in src
    assert amd.build_command(s, "k.hip", "k") == ["hipcc", "--offload-arch=gfx942", "-O2", "-o", "k", "k.hip"]


# A stand-in for the ROCm runtime, so that the host program's main() (file protocol, device check,
# launch geometry) runs on the CPU: kernels run as plain functions, once per (block, thread).
STUB_HIP = r"""
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
typedef int hipError_t;
enum { hipSuccess = 0 };
enum hipMemcpyKind { hipMemcpyHostToDevice, hipMemcpyDeviceToHost };
struct hipDeviceProp_t { char name[256]; char gcnArchName[256]; };
struct dim3 { unsigned x, y, z; dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {} };
static unsigned stub_block, stub_thread;
static inline const char* hipGetErrorString(hipError_t) { return "stub error"; }
static inline hipError_t hipGetDevice(int* d) { *d = 0; return hipSuccess; }
static inline hipError_t hipGetDeviceProperties(hipDeviceProp_t* p, int) {
    const char* a = std::getenv("STUB_ARCH");
    std::strcpy(p->name, "stub GPU");
    std::strcpy(p->gcnArchName, a ? a : "gfx942:sramecc+:xnack-");
    return hipSuccess;
}
static inline hipError_t hipRuntimeGetVersion(int* v) { *v = 60241134; return hipSuccess; }
static inline hipError_t hipDriverGetVersion(int* v) { *v = 60241134; return hipSuccess; }
template <class T> hipError_t hipMalloc(T** p, size_t n) { *p = (T*)std::malloc(n ? n : 1); return hipSuccess; }
static inline hipError_t hipMemcpy(void* d, const void* s, size_t n, hipMemcpyKind) { std::memcpy(d, s, n); return 0; }
static inline hipError_t hipMemset(void* d, int v, size_t n) { std::memset(d, v, n); return hipSuccess; }
static inline hipError_t hipFree(const void* p) { std::free((void*)p); return hipSuccess; }
static inline hipError_t hipGetLastError() { return hipSuccess; }
static inline hipError_t hipDeviceSynchronize() { return hipSuccess; }
#define __global__
#define hipLaunchKernelGGL(k, g, b, sh, st, ...) do { for (stub_block = 0; stub_block < (g).x; ++stub_block) \
    for (stub_thread = 0; stub_thread < (b).x; ++stub_thread) k(__VA_ARGS__); } while (0)
"""

@pytest.fixture(scope="session")
def cxx(tmp_path_factory):
    """The first C++ compiler that builds a program using the standard library."""
    import shutil
    import subprocess
    d = tmp_path_factory.mktemp("cxx")
    (d / "t.cpp").write_text("#include <cstdio>\n#include <vector>\nint main() { std::vector<int> v(1); return v[0]; }\n")
    for tool in ("g++", "clang++-19", "c++"):
        if shutil.which(tool) and subprocess.run([tool, "-o", str(d / "t"), str(d / "t.cpp")],
                                                 capture_output=True).returncode == 0:
            return tool
    pytest.skip("no working C++ compiler (g++, clang++-19 or c++) for the host-program tests")


def _identity_spec(spec):
    """``spec`` with its device code replaced by a CPU stand-in whose D is the placed C."""
    wc = [b.words for b in spec.inputs if b.operand == "c"][0]
    wd = spec.output.words
    ic = [b.operand for b in spec.inputs].index("c")
    device = (f'extern "C" __global__ void {spec.name}(const uint32_t* const* in, uint32_t* out)\n{{\n'
              f"    unsigned long t = stub_block * {spec.threads}ul + stub_thread;\n"
              f"    for (int j = 0; j < {wd}; ++j) out[t * {wd} + j] = in[{ic}][t * {wc} + j];\n}}\n")
    return attrs.evolve(spec, device=device)


@pytest.fixture
def fake_hipcc(tmp_path, cxx):
    """A hipcc that builds for the CPU against STUB_HIP, logging each call."""
    inc = tmp_path / "stub" / "hip"
    inc.mkdir(parents=True)
    (inc / "hip_runtime.h").write_text(STUB_HIP)
    log = tmp_path / "hipcc.log"
    script = tmp_path / "hipcc"
    script.write_text("#!/bin/sh\n"
                      f'echo "$@" >> "{log}"\n'
                      "args=\n"
                      'for a in "$@"; do case "$a" in --offload-arch=*) ;; *) args="$args $a";; esac; done\n'
                      f'exec {cxx} -x c++ -I"{tmp_path / "stub"}" $args\n')
    script.chmod(0o755)
    return str(script), log


def test_host_program_runs_the_cases_it_is_given(fake_hipcc, tmp_path, monkeypatch):
    monkeypatch.setenv("MMASIM_HARNESS_CACHE", str(tmp_path / "cache"))
    hipcc, log = fake_hipcc
    m = mmasim.MMA("CDNA3", "v_mfma_f32_32x32x1_2b_f32")          # two blocks: every block gets the case
    spec = _identity_spec(amd.specs(m)[0])
    ops = _random_ops(m, 5, np.random.default_rng(5))
    bufs = amd.place(spec, m, ops)
    exe = amd.build(amd.host_source(spec), spec.target, hipcc)
    out, _ = host.execute(spec, exe, bufs, tmp_path / "run")
    assert np.array_equal(amd.read(spec, m, out), ops["c"])
    assert amd.build(amd.host_source(spec), spec.target, hipcc) == exe      # cached: built once
    assert len(log.read_text().splitlines()) == 1 and "--offload-arch=gfx942" in log.read_text()


def test_host_program_refuses_another_gpu_and_a_short_file(fake_hipcc, tmp_path, monkeypatch):
    monkeypatch.setenv("MMASIM_HARNESS_CACHE", str(tmp_path / "cache"))
    hipcc, _ = fake_hipcc
    m = mmasim.MMA("CDNA3", "v_mfma_f32_16x16x16_f16")
    spec = _identity_spec(amd.specs(m)[0])
    bufs = amd.place(spec, m, _random_ops(m, 2, np.random.default_rng(6)))
    exe = amd.build(amd.host_source(spec), spec.target, hipcc)
    monkeypatch.setenv("STUB_ARCH", "gfx90a:sramecc+:xnack-")
    with pytest.raises(HarnessError, match=r"exit 3.*the kernel is built for gfx942"):
        host.execute(spec, exe, bufs, tmp_path / "run")
    monkeypatch.setenv("STUB_ARCH", "gfx9420")                     # a prefix is not the target
    with pytest.raises(HarnessError, match="exit 3"):
        host.execute(spec, exe, bufs, tmp_path / "run")
    monkeypatch.delenv("STUB_ARCH")
    import subprocess
    bufs[1][:-1].tofile(tmp_path / "short.bin")
    np.asarray(bufs[0]).tofile(tmp_path / "a.bin")
    np.asarray(bufs[2]).tofile(tmp_path / "c.bin")
    p = subprocess.run([str(exe), "2", str(tmp_path / "o.bin"), str(tmp_path / "a.bin"), str(tmp_path / "short.bin"),
                        str(tmp_path / "c.bin")], capture_output=True, text=True)
    assert p.returncode == 2 and "wrong size" in p.stderr


def test_hip_device_reports_the_gpu_and_runs_a_kernel(fake_hipcc, tmp_path, monkeypatch):
    monkeypatch.setenv("MMASIM_HARNESS_CACHE", str(tmp_path / "cache"))
    hipcc, _ = fake_hipcc
    dev = amd.HipDevice(hipcc=hipcc)
    info = dev.info()
    assert info["name"] == "stub GPU" and info["gcn_arch"] == "gfx942:sramecc+:xnack-" and info["target"] == "gfx942"
    m = mmasim.MMA("CDNA3", "v_mfma_i32_16x16x32_i8")
    spec = _identity_spec(amd.specs(m)[0])
    assert dev.check(spec) is info
    ops = _random_ops(m, 3, np.random.default_rng(7))
    out = dev.run(spec, m, amd.place(spec, m, ops), 3)
    assert np.array_equal(amd.read(spec, m, out), ops["c"])
    with pytest.raises(HarnessError, match="need gfx90a"):
        dev.check(amd.specs(mmasim.MMA("CDNA2", "v_mfma_f64_16x16x4f64"))[0])


def test_harness_run_uses_the_hip_device_and_checks_its_gfx_target(fake_hipcc, tmp_path, monkeypatch):
    # the v_mfma / v_smfmac records name amd.HipDevice for harness run: the gfx name of the
    # device's --info is what check_device compares with the architecture's target
    monkeypatch.setenv("MMASIM_HARNESS_CACHE", str(tmp_path / "cache"))
    for arch, name in (("CDNA3", "v_mfma_f32_16x16x16_f16"), ("CDNA3", "v_smfmac_f32_16x16x32_f16")):
        assert hrun.device_class(mmasim.MMA(arch, name)) is amd.HipDevice
    hipcc, _ = fake_hipcc
    dev = amd.HipDevice(hipcc=hipcc)
    assert hrun.check_device(dev, "CDNA3", "gfx942")["name"] == "stub GPU"
    with pytest.raises(HarnessError, match=r"architecture gfx942, but CDNA2 kernels \(gfx90a\) need gfx90a"):
        hrun.check_device(dev, "CDNA2", "gfx90a")
    with pytest.raises(HarnessError, match=r"architecture gfx942, but CDNA2 kernels \(gfx90a\) need gfx90a"):
        hrun.measure("CDNA2", tmp_path / "out", cases=1, device=dev)
    assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())


def test_without_hipcc_the_build_names_the_missing_tool(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("HIPCC", raising=False)
    with pytest.raises(ToolchainError, match="hipcc"):
        amd.build("int main() {}", "gfx942")


def test_specs_refuse_an_nvidia_instruction():
    with pytest.raises(UnsupportedDatapath):
        amd.specs(mmasim.MMA("Hopper", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"))


# ---------------------------------------------------------------- LLVM's AMDGPU assembler
@needs_mc
@pytest.mark.parametrize("arch", ARCHS)
def test_every_instruction_assembles_for_its_target(arch):
    specs = _specs(arch)
    lines = [s.assembly for s in specs]
    r = amd.check_assembly(TARGETS[arch], lines)
    assert r["errors"] == {}, "\n".join(f"{k}: {v}" for k, v in r["errors"].items())
    assert r["encoded"] == len(lines)
    # the assembler prints each instruction in its canonical spelling: the table's mnemonic is
    # the target's own name (gfx942 accepts the gfx90a names only as aliases)
    assert r["printed"] == lines


@needs_mc
def test_assembler_check_rejects_wrong_operand_sizes_and_foreign_mnemonics():
    # the check can fail: A of v_mfma_f32_32x32x8f16 is two VGPRs, gfx908 has no VGPR destination,
    # the CDNA3 spelling does not exist on gfx908, v_smfmac does not exist before gfx940
    good = "v_mfma_f32_32x32x8f16 a[0:15], v[0:1], v[2:3], a[0:15]"
    bad = ["v_mfma_f32_32x32x8f16 a[0:15], v0, v[2:3], a[0:15]",
           "v_mfma_f32_32x32x8f16 v[0:15], v[0:1], v[2:3], v[0:15]",
           "v_mfma_f32_32x32x8_f16 a[0:15], v[0:1], v[2:3], a[0:15]",
           "v_smfmac_f32_16x16x32_f16 a[0:3], v[4:5], v[6:9], v10"]
    r = amd.check_assembly("gfx908", [good] + bad)
    assert sorted(r["errors"]) == sorted(bad) and r["encoded"] == 1
    r = amd.check_assembly("gfx942", ["v_smfmac_f32_16x16x32_f16 v[0:3], v[4:5], v[6:7], v10"])
    assert list(r["errors"]) == ["v_smfmac_f32_16x16x32_f16 v[0:3], v[4:5], v[6:7], v10"]


@needs_mc
def test_assembler_results_are_cached_by_content(tmp_path, monkeypatch):
    monkeypatch.setenv("MMASIM_HARNESS_CACHE", str(tmp_path))
    line = ["v_mfma_f32_4x4x1f32 a[0:3], v0, v1, a[0:3]"]
    first = amd.check_assembly("gfx908", line)
    files = list(tmp_path.glob("*/*.amd-mc-gfx908.json"))
    assert len(files) == 1 and first["errors"] == {}
    # a cached answer is read back, not recomputed: tampering with it shows through
    files[0].write_text('{"errors": {"x": "cached"}, "encoded": 0, "printed": []}')
    assert amd.check_assembly("gfx908", line)["errors"] == {"x": "cached"}
    assert amd.check_assembly("gfx90a", line)["errors"] == {}      # another target, another key


@needs_clang
@pytest.mark.parametrize("arch", ARCHS)
def test_generated_device_code_compiles_for_its_target(arch):
    r = amd.check_device_code(TARGETS[arch], _specs(arch))
    assert r["errors"] == {}, "\n".join(f"{k}: {v}" for k, v in r["errors"].items())


@needs_clang
def test_device_code_check_blames_the_kernel_with_a_bad_instruction():
    s = amd.specs(mmasim.MMA("CDNA1", "v_mfma_f32_32x32x8f16"))[0]
    bad = attrs.evolve(s, name="k_bad", device=s.device.replace(s.name, "k_bad")
                       .replace("v_mfma_f32_32x32x8f16 %0", "v_mfma_f32_32x32x8_f16 %0"))
    r = amd.check_device_code("gfx908", [s, bad])
    assert list(r["errors"]) == ["k_bad"]


def test_missing_tool_is_named(monkeypatch):
    monkeypatch.setenv("MMASIM_LLVM_MC", "/nonexistent/llvm-mc")
    tool, why = amd.find_llvm_mc()
    assert tool is None and "/nonexistent/llvm-mc" in why and "llvm-19" in why
    with pytest.raises(ToolchainError, match="llvm-mc"):
        amd.check_assembly("gfx908", ["s_nop 0"])


# ---------------------------------------------------------------- place / read
def _random_ops(m, cases, rng):
    M, N, K = amd._shape(m)
    ops = {}
    for o, shape in (("a", (M, K)), ("b", (K, N)), ("c", (M, N))):
        bits = m.format_of(o).container_bits
        ops[o] = rng.integers(0, 1 << bits, size=(cases,) + shape, dtype=np.uint64)
    if m.sparse_rule:
        legal = np.array(sorted(m.sparse_rule.selectors), dtype=np.uint64)
        chunks = m.sparse_rule.chunks(K)
        nib = legal[rng.integers(0, len(legal), size=(cases, M, chunks))]
        words = np.zeros((cases, M, m.sparse_rule.words(K)), dtype=np.uint64)
        for c in range(chunks):
            words[..., c // 8] |= nib[..., c] << np.uint64(4 * (c % 8))
        ops["sparse_metadata"] = words
    return ops


def _device(spec, m, bufs, cases):
    """Stand-in for the GPU: the instruction on the placed registers (Model.warp)."""
    regs = {b.operand: x.reshape(cases, 64, b.words) for b, x in zip(spec.inputs, bufs)}
    return np.concatenate([m.warp(regs["a"][k], regs["b"][k], regs["c"][k]) for k in range(cases)]).reshape(-1)


# one instruction of each family: f32, xf32, f16 / bf16 (single- and multi-block), bf16 before
# _1k, i8, fp8, f64 (the rest are the same code path with other shapes)
FAMILIES = [
    ("CDNA1", "v_mfma_f32_32x32x2f32"), ("CDNA1", "v_mfma_f32_16x16x1f32"), ("CDNA1", "v_mfma_f32_4x4x4f16"),
    ("CDNA1", "v_mfma_f32_32x32x2bf16"), ("CDNA1", "v_mfma_i32_16x16x16i8"), ("CDNA2", "v_mfma_f32_32x32x4bf16_1k"),
    ("CDNA2", "v_mfma_f64_16x16x4f64"), ("CDNA3", "v_mfma_f32_32x32x4_xf32"), ("CDNA3", "v_mfma_f32_16x16x32_fp8_bf8"),
    ("CDNA3", "v_mfma_i32_4x4x4_16b_i8"), ("CDNA3", "v_mfma_f32_32x32x1_2b_f32"),
]


@pytest.mark.parametrize("arch,ins", FAMILIES)
def test_place_then_read_gives_the_matrix_form(arch, ins):
    m = mmasim.MMA(arch, ins)
    (s,) = amd.specs(m)
    ops = _random_ops(m, 3, np.random.default_rng(14))
    bufs = amd.place(s, m, ops)
    assert [x.dtype for x in bufs] == [np.uint32] * len(s.inputs)
    assert [x.size for x in bufs] == [3 * 64 * b.words for b in s.inputs]
    D = amd.read(s, m, _device(s, m, bufs, 3))
    for k in range(3):
        assert np.array_equal(D[k], m(ops["a"][k], ops["b"][k], ops["c"][k])), k


@pytest.mark.parametrize("arch,ins", [(a, i) for a, i in ALL if mmasim.MMA(a, i).datapath.op == "v_mfma"])
def test_read_inverts_place_for_c(arch, ins):
    # where C and D share a format, a device returning C unchanged must read back as C
    m = mmasim.MMA(arch, ins)
    (s,) = amd.specs(m)
    try:
        m.layout("a")
    except UnsupportedDatapath as e:        # v_mfma_f64_4x4x4: its layout is not registered yet
        with pytest.raises(UnsupportedDatapath):
            amd.place(s, m, _random_ops(m, 1, np.random.default_rng(0)))
        assert "no register layout" in str(e)
        return
    ops = _random_ops(m, 2, np.random.default_rng(1))
    bufs = amd.place(s, m, ops)
    c = bufs[[b.operand for b in s.inputs].index("c")]
    assert np.array_equal(amd.read(s, m, c), ops["c"])


def test_placed_words_follow_case_lane_register_order():
    # AMD Matrix Instruction Calculator, v_mfma_f32_16x16x16f16: A[i][k] is in lane i + 16 * (k // 4),
    # register (k % 4) // 2, bits 16 * (k % 2); buffers hold case, then lane, then register
    m = mmasim.MMA("CDNA1", "v_mfma_f32_16x16x16f16")
    (s,) = amd.specs(m)
    ops = {o: np.zeros((2,) + sh, dtype=np.uint64) for o, sh in (("a", (16, 16)), ("b", (16, 16)), ("c", (16, 16)))}
    ops["a"][1, 3, 6] = 0x3C00
    a = amd.place(s, m, ops)[0]
    assert np.flatnonzero(a).tolist() == [(1 * 64 + 3 + 16 * 1) * 2 + 1]
    assert a[(64 + 19) * 2 + 1] == 0x3C00


def test_read_rejects_blocks_that_disagree():
    m = mmasim.MMA("CDNA1", "v_mfma_f32_32x32x1f32")        # two 32x32 blocks
    (s,) = amd.specs(m)
    ops = _random_ops(m, 1, np.random.default_rng(2))
    c = amd.place(s, m, ops)[2].copy()
    assert np.array_equal(amd.read(s, m, c), ops["c"])
    c[16] ^= 1                                               # lane 0, register 16: block 1
    with pytest.raises(TableError, match="block 1"):
        amd.read(s, m, c)


def test_read_rejects_a_partial_output():
    m = mmasim.MMA("CDNA3", "v_mfma_f32_16x16x16_f16")
    (s,) = amd.specs(m)
    with pytest.raises(ShapeError):
        amd.read(s, m, np.zeros(64 * 4 + 1, dtype=np.uint32))


def test_place_rejects_misshapen_operands():
    m = mmasim.MMA("CDNA3", "v_mfma_f32_16x16x16_f16")
    (s,) = amd.specs(m)
    ops = _random_ops(m, 1, np.random.default_rng(3))
    ops["b"] = ops["b"][:, :8]
    with pytest.raises(ShapeError, match=re.escape("ops['b'] must be (cases, 16, 16)")):
        amd.place(s, m, ops)


@pytest.mark.parametrize("ins", [i for i in mmasim.instructions("CDNA3") if i.startswith("v_smfmac")])
def test_smfmac_place_round_trips_or_names_the_missing_layout(ins):
    # the compressed-A and index-register layouts of v_smfmac come from the placement package;
    # until they are registered, place must refuse with UnsupportedDatapath (never a numpy error)
    m = mmasim.MMA("CDNA3", ins)
    (s,) = amd.specs(m)
    ops = _random_ops(m, 2, np.random.default_rng(4))
    try:
        bufs = amd.place(s, m, ops)
    except UnsupportedDatapath as e:
        assert "not registered" in str(e) or "no register layout" in str(e)
        return
    assert [x.size for x in bufs] == [2 * 64 * b.words for b in s.inputs]
    assert [x.dtype for x in bufs] == [np.uint32] * 4
    assert np.array_equal(amd.read(s, m, bufs[2]), ops["c"])      # C and D share the f32 / i32 layout
    # the instruction on the placed registers (Model.warp: compressed A, index register, abid 0)
    regs = {b.operand: x.reshape(2, 64, b.words) for b, x in zip(s.inputs, bufs)}
    out = np.concatenate([m.warp(regs["a"][k], regs["b"][k], regs["c"][k], sparse_metadata=regs["sparse_metadata"][k])
                          for k in range(2)]).reshape(-1)
    D = amd.read(s, m, out)
    for k in range(2):
        want = m(ops["a"][k], ops["b"][k], ops["c"][k], sparse_metadata=ops["sparse_metadata"][k])
        assert np.array_equal(D[k], want), k
