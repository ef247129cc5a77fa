"""Harness kernels for AMD's ``v_mfma`` and ``v_smfmac`` (CDNA1 gfx908, CDNA2 gfx90a, CDNA3 gfx942).

One HIP kernel per instruction: the 64 lanes of one wavefront (one block, ``blockIdx.x`` =
case) load their A, B, C registers (and ``v_smfmac``'s index register), execute the
instruction as inline assembly and store their D registers; docs/harness.md gives the
operand forms, register constraints and index selection.  Placement (:func:`place`,
:func:`read`) goes through ``Model.fragments`` / ``Model.unfragment`` only; a multi-block
instruction gets the case in every block and :func:`read` checks that they agree.
:func:`host_source` is the HIP program (built by :func:`build`, run by :class:`HipDevice`);
:func:`check_assembly` / :func:`check_device_code` check every instruction and kernel of one
target with ``llvm-mc`` and clang in one batch, cached by content hash.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

import numpy as np

from mmasim.errors import (
    HarnessError,
    OperandError,
    ShapeError,
    TableError,
    ToolchainError,
    UnsupportedDatapath,
)
from mmasim.harness.host import execute
from mmasim.harness import table
from mmasim.harness.spec import Buffer, KernelSpec, compile_target, layout_name
from mmasim.harness.toolchain import cache_key, cache_path

#: the mmasim architecture -> the gfx target its kernels are compiled for
#: the emitter's software run of a kernel: none
simulate = None
#: threads per block: one wavefront of 64 lanes
THREADS = 64
#: the LLVM release whose AMDGPU assembler first knows every gfx942 instruction mmasim models
LLVM_MIN = 19
#: wait states around the instruction (``s_nop N`` waits N + 1): the compiler's hazard recognizer
#: does not see into inline assembly, so the kernel waits 8 wait states before the instruction (its
#: sources were just written by VALU moves) and 64 after it, well beyond the 19 that LLVM's AMDGPU
#: hazard tables ask at most between a v_mfma writing a register and another instruction reading it
NOPS_BEFORE = ("s_nop 7",)
NOPS_AFTER = ("s_nop 7",) * 8


def handles(model) -> bool:
    """True for the instructions this module emits (the harness's table names it for ``v_mfma``, ``v_smfmac``)."""
    return table.emits(model, __name__)


def mnemonic(model) -> str:
    """The instruction's AMD mnemonic, as the architecture's table names it (``v_mfma_...``)."""
    dp = model.datapath
    names = [n for n in dp.names if n.startswith(dp.op + "_")]
    if len(names) != 1:
        raise TableError(f"{model.arch}: {model.instruction}: the table must name exactly one {dp.op}_ "
                         f"mnemonic; names are {list(dp.names)}")
    return names[0]


def _shape(model):
    M, N = model.shape if model.shape is not None else (model.legal_m[0], model.legal_n[0])
    return M, N, model.k


def _kpack(model) -> int:
    """A (and B) elements per lane of a dense v_mfma: the ISA's SRC0 size.  At least one 64- or
    32-bit element (two for xf32), two 16-bit ones (bf16 before the ``_1k`` forms, CDNA1 / CDNA2)
    or four (f16, bf16_1k, every CDNA3 bf16), four 8-bit ones; more where one block needs them."""
    M, _, K = _shape(model)
    a, bits = model.a_format.name, model.a_format.container_bits
    if bits >= 32:
        least = 2 if a == "xf32" else 1
    elif bits == 16:
        least = 2 if (a == "bf16" and model.arch in ("CDNA1", "CDNA2") and model.datapath.kind != "1k") else 4
    else:
        least = 4
    return max(least, M * K // THREADS)


def blocks(model) -> int:
    """Independent matrices one instruction computes (1 for a sparse one, v_smfmac)."""
    if model.datapath.sparse:
        return 1
    M, _, K = _shape(model)
    n, r = divmod(THREADS * _kpack(model), M * K)
    if r:
        raise TableError(f"{model.instruction}: {THREADS} lanes of {_kpack(model)} elements do not tile "
                         f"{M}x{K} blocks of A")
    return n


def registers(model) -> dict:
    """32-bit registers per lane of every operand (``a``, ``b``, ``c``, ``d`` and, for v_smfmac,
    ``sparse_metadata``)."""
    M, N, K = _shape(model)
    nb = blocks(model)
    dp = model.datapath
    sparse = bool(dp.sparse)
    ka = dp.stored_k if sparse else K
    per = THREADS * 32

    def words(elements, fmt):
        total = nb * elements * fmt.container_bits
        if total % per:
            raise TableError(f"{model.instruction}: {total} bits do not fill whole registers of {THREADS} lanes")
        return total // per

    regs = {"a": words(M * ka, model.a_format), "b": words(K * N, model.b_format),
            "c": words(M * N, model.c_format), "d": words(M * N, model.d_format)}
    if sparse:
        regs["sparse_metadata"] = 1
    return regs


def _reg(kind: str, first: int, n: int) -> str:
    return f"{kind}{first}" if n == 1 else f"{kind}[{first}:{first + n - 1}]"


def assembly(model) -> str:
    """The instruction with concrete registers, exactly as the assembler sees it: D (and C) from
    register 0 (AGPRs on gfx908, VGPRs elsewhere), then A, B and the index register in VGPRs."""
    regs = registers(model)
    acc = "a" if compile_target(model, "AMD gfx") == "gfx908" else "v"
    d = _reg(acc, 0, regs["d"])
    nxt = regs["d"] if acc == "v" else 0
    a = _reg("v", nxt, regs["a"])
    b = _reg("v", nxt + regs["a"], regs["b"])
    last = nxt + regs["a"] + regs["b"]
    src2 = _reg("v", last, 1) if model.datapath.sparse else d
    return f"{mnemonic(model)} {d}, {a}, {b}, {src2}"


def kernel_name(model) -> str:
    return "k_" + re.sub(r"[^A-Za-z0-9_]", "_", mnemonic(model))


def _ctype(n: int) -> str:
    return "uint32_t" if n == 1 else f"mmasim_u32x{n}"


def device_code(name: str, target: str, opcode: str, regs: dict, sparse: bool) -> str:
    """The kernel source (see :mod:`mmasim.harness.spec` for the signature and buffers)."""
    acc = "a" if target == "gfx908" else "v"
    order = ["a", "b", "c"] + (["sparse_metadata"] if sparse else [])
    lines = []
    for n in sorted({regs[o] for o in order + ["d"]} - {1}):
        lines.append(f"typedef unsigned int mmasim_u32x{n} __attribute__((ext_vector_type({n})));")
    lines += [f'extern "C" __global__ void {name}(const uint32_t* const* in, uint32_t* out)', "{",
              f"    const unsigned long t = (unsigned long)__builtin_amdgcn_workgroup_id_x() * {THREADS}"
              " + __builtin_amdgcn_workitem_id_x();"]
    var = {"a": "a", "b": "b", "c": "acc", "sparse_metadata": "idx"}
    for i, op in enumerate(order):
        n = regs[op]
        lines.append(f"    const uint32_t* p{i} = in[{i}] + t * {n};")
        if n == 1:
            lines.append(f"    {_ctype(n)} {var[op]} = p{i}[0];")
        else:
            lines.append(f"    {_ctype(n)} {var[op]};")
            lines.append(f"    for (int j = 0; j < {n}; ++j) {var[op]}[j] = p{i}[j];")
    body = [*NOPS_BEFORE, f"{opcode} %0, %1, %2, " + ("%3" if sparse else "%0"), *NOPS_AFTER]
    asm = "\\n\\t".join(body)
    ins = ['"v"(a)', '"v"(b)'] + (['"v"(idx)'] if sparse else [])
    lines.append(f'    asm volatile("{asm}"')
    lines.append(f'        : "+{acc}"(acc)')
    lines.append(f"        : {', '.join(ins)});")
    nd = regs["d"]
    if nd == 1:
        lines.append("    out[t] = acc;")
    else:
        lines.append(f"    for (int j = 0; j < {nd}; ++j) out[t * {nd} + j] = acc[j];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def specs(model) -> list:
    """One :class:`KernelSpec` for a ``v_mfma`` / ``v_smfmac`` model."""
    if not handles(model):
        raise UnsupportedDatapath(f"{model.instruction}: not a v_mfma / v_smfmac instruction (mmasim.harness.amd)")
    target = compile_target(model, "AMD gfx")
    sparse = bool(model.datapath.sparse)
    regs = registers(model)
    name = kernel_name(model)
    opcode = mnemonic(model)
    inputs = [Buffer(op, "registers", regs[op], layout=layout_name(model, op)) for op in "abc"]
    options = {"blocks": blocks(model), "mnemonic": opcode}
    if sparse:
        inputs.append(Buffer("sparse_metadata", "registers", 1,
                             layout=layout_name(model, "sparse_metadata") or "v_smfmac index register"))
        options.update(cbsz=0, abid=0)
    return [KernelSpec(arch=model.arch, instruction=model.instruction, qualifiers={}, target=target,
                       threads=THREADS, name=name, assembly=assembly(model), inputs=tuple(inputs),
                       output=Buffer("d", "registers", regs["d"], layout=layout_name(model, "d")),
                       device=device_code(name, target, opcode, regs, sparse), options=options)]


# ------------------------------------------------------------------ placement
def _per_case(model, operand, mats, words, nb):
    """Registers of every case, flat ``cases * 64 * words``; a multi-block instruction gets the
    case's matrix in every block (stacked along rows, as the placement package stacks them)."""
    mats = np.asarray(mats, dtype=np.uint64)
    out = np.empty((mats.shape[0], THREADS, words), dtype=np.uint32)
    for k in range(mats.shape[0]):
        x = mats[k] if nb == 1 else np.concatenate([mats[k]] * nb)
        regs = model.fragments(operand, x)
        if regs.shape != (THREADS, words):
            raise TableError(f"{model.instruction}: the layout of {operand.upper()} gives {regs.shape[1]} "
                             f"registers per lane; the instruction reads {words}")
        out[k] = regs
    return out.reshape(-1)


def _compress(model, A, md):
    """The stored half of a sparse A ``(cases, M, K)`` under metadata ``(cases, M, words)``."""
    from mmasim.arith import sparse as sp
    K = model.k
    cases, M = A.shape[:2]
    (stored,) = sp.select(model.sparse_rule, K, md.reshape(cases * M, -1), A.reshape(cases * M, K))
    return stored.reshape(cases, M, K // 2)


def place(spec, model, ops: dict) -> list:
    """The input buffers of ``spec`` for the cases ``ops`` (see :mod:`mmasim.harness`)."""
    words = {b.operand: b.words for b in spec.inputs}
    nb = int(spec.options.get("blocks", 1))
    A, B, C = (np.asarray(ops[o], dtype=np.uint64) for o in "abc")
    M, N, K = _shape(model)
    for o, X, shape in (("a", A, (M, K)), ("b", B, (K, N)), ("c", C, (M, N))):
        if X.ndim != 3 or X.shape[1:] != shape or X.shape[0] != A.shape[0]:
            raise ShapeError(f"{model.instruction}: ops[{o!r}] must be (cases, {shape[0]}, {shape[1]}); "
                             f"got {X.shape}")
    out = {}
    if model.datapath.sparse:
        if "sparse_metadata" not in ops:
            raise OperandError(f"{model.instruction} is sparse: ops must hold 'sparse_metadata'")
        md = np.asarray(ops["sparse_metadata"], dtype=np.uint64)
        stored = _compress(model, A, md)
        try:
            out["a"] = _per_case(model, "a", stored, words["a"], 1)
        except ShapeError as e:
            raise UnsupportedDatapath(f"{model.instruction}: the register layout of the compressed sparse A "
                                      f"(M x K/2) is not registered (mmasim.placement): {e}") from None
        try:
            out["sparse_metadata"] = _per_case(model, "sparse_metadata", md, 1, 1)
        except OperandError as e:
            raise UnsupportedDatapath(f"{model.instruction}: no register layout of the v_smfmac index register "
                                      f"is registered (mmasim.placement): {e}") from None
    else:
        out["a"] = _per_case(model, "a", A, words["a"], nb)
    out["b"] = _per_case(model, "b", B, words["b"], nb)
    out["c"] = _per_case(model, "c", C, words["c"], nb)
    return [out[b.operand] for b in spec.inputs]


def read(spec, model, out) -> np.ndarray:
    """D ``(cases, M, N)`` uint64 from the output buffer of ``spec``.  Where the instruction
    holds several blocks (each given the same case by :func:`place`), every block's D must agree:
    a difference means the placement layouts and the device disagree, and raises TableError."""
    w = spec.output.words
    M, N, _ = _shape(model)
    nb = int(spec.options.get("blocks", 1))
    regs = np.asarray(out, dtype=np.uint32)
    if regs.size % (THREADS * w):
        raise ShapeError(f"{spec.name}: the output holds {regs.size} words, not a whole number of cases of "
                         f"{THREADS} x {w}")
    regs = regs.reshape(-1, THREADS, w)
    D = np.zeros((len(regs), M, N), dtype=np.uint64)
    for k, r in enumerate(regs):
        full = model.unfragment("d", r).astype(np.uint64)
        for b in range(1, nb):
            if not np.array_equal(full[b * M:(b + 1) * M], full[:M]):
                raise TableError(f"{spec.name}: case {k}: block {b} of D differs from block 0 although both "
                                 "were given the same operands; the register layout does not match the device")
        D[k] = full[:M]
    return D


# ------------------------------------------------------------------ host program (hipcc)
_HOST_HEAD = r"""#include <hip/hip_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

static void mmasim_die(const char* what, const char* detail) {
    std::fprintf(stderr, "mmasim-harness: error: %s: %s\n", what, detail);
    std::exit(2);
}
#define MMASIM_CHECK(call) do { hipError_t e_ = (call); \
    if (e_ != hipSuccess) mmasim_die(#call, hipGetErrorString(e_)); } while (0)

// the device's properties and the HIP runtime and driver versions
static void mmasim_query(hipDeviceProp_t& prop, int& runtime, int& driver) {
    int dev = 0;
    MMASIM_CHECK(hipGetDevice(&dev));
    MMASIM_CHECK(hipGetDeviceProperties(&prop, dev));
    MMASIM_CHECK(hipRuntimeGetVersion(&runtime));
    MMASIM_CHECK(hipDriverGetVersion(&driver));
}

// --info: the device as JSON (name, gcnArchName, runtime and driver versions)
static int mmasim_info(const char* target) {
    hipDeviceProp_t prop;
    int runtime = 0, driver = 0;
    mmasim_query(prop, runtime, driver);
    std::printf("{\"name\": \"%s\", \"gcn_arch\": \"%s\", \"runtime\": %d, \"driver\": %d, \"target\": \"%s\"}\n",
                prop.name, prop.gcnArchName, runtime, driver, target);
    return 0;
}
"""

_HOST_MAIN = r"""
static const char* const kTarget = "@TARGET@";
static const int kInputs = @INPUTS@;
static const size_t kInWords[kInputs] = {@INWORDS@};     // 32-bit words per case
static const size_t kOutWords = @OUTWORDS@;              // 32-bit words per case
static const unsigned kThreads = @THREADS@;

static std::vector<uint32_t> mmasim_read(const char* path, size_t words) {
    FILE* f = std::fopen(path, "rb");
    if (!f) mmasim_die("cannot open input", path);
    std::vector<uint32_t> v(words);
    size_t got = std::fread(v.data(), 4, words, f);
    int extra = std::fgetc(f);
    std::fclose(f);
    if (got != words || extra != EOF) mmasim_die("input file has the wrong size", path);
    return v;
}

int main(int argc, char** argv) {
    if (argc == 2 && std::strcmp(argv[1], "--info") == 0) return mmasim_info(kTarget);
    if (argc != 3 + kInputs) {
        std::fprintf(stderr, "usage: %s CASES OUT.bin", argv[0]);
        for (int i = 0; i < kInputs; ++i) std::fprintf(stderr, " IN%d.bin", i);
        std::fprintf(stderr, "\n       %s --info\n", argv[0]);
        return 1;
    }
    char* end = nullptr;
    long long cases = std::strtoll(argv[1], &end, 10);
    if (!end || *end || cases <= 0 || cases > 0x7fffffffLL) mmasim_die("CASES must be a positive integer", argv[1]);
    hipDeviceProp_t prop;
    int runtime = 0, driver = 0;
    mmasim_query(prop, runtime, driver);
    // gcnArchName is the target with its features: "gfx942:sramecc+:xnack-"
    size_t tl = std::strlen(kTarget);
    if (std::strncmp(prop.gcnArchName, kTarget, tl) != 0
        || (prop.gcnArchName[tl] != '\0' && prop.gcnArchName[tl] != ':')) {
        std::fprintf(stderr, "mmasim-harness: error: the device is %s (%s); the kernel is built for %s\n",
                     prop.name, prop.gcnArchName, kTarget);
        return 3;
    }
    std::printf("mmasim-harness: device=%s arch=%s runtime=%d driver=%d\n", prop.name, prop.gcnArchName,
                runtime, driver);
    std::vector<uint32_t*> dptr(kInputs, nullptr);
    for (int i = 0; i < kInputs; ++i) {
        size_t words = kInWords[i] * (size_t)cases;
        std::vector<uint32_t> h = mmasim_read(argv[3 + i], words);
        MMASIM_CHECK(hipMalloc(&dptr[i], words * 4));
        MMASIM_CHECK(hipMemcpy(dptr[i], h.data(), words * 4, hipMemcpyHostToDevice));
    }
    const uint32_t** din = nullptr;
    MMASIM_CHECK(hipMalloc(&din, sizeof(uint32_t*) * kInputs));
    MMASIM_CHECK(hipMemcpy(din, dptr.data(), sizeof(uint32_t*) * kInputs, hipMemcpyHostToDevice));
    size_t out_words = kOutWords * (size_t)cases;
    uint32_t* dout = nullptr;
    MMASIM_CHECK(hipMalloc(&dout, out_words * 4));
    MMASIM_CHECK(hipMemset(dout, 0xff, out_words * 4));
    hipLaunchKernelGGL(@NAME@, dim3((unsigned)cases), dim3(kThreads), 0, 0, din, dout);
    MMASIM_CHECK(hipGetLastError());
    MMASIM_CHECK(hipDeviceSynchronize());
    std::vector<uint32_t> h(out_words);
    MMASIM_CHECK(hipMemcpy(h.data(), dout, out_words * 4, hipMemcpyDeviceToHost));
    FILE* f = std::fopen(argv[2], "wb");
    if (!f) mmasim_die("cannot open output", argv[2]);
    if (std::fwrite(h.data(), 4, out_words, f) != out_words) mmasim_die("cannot write output", argv[2]);
    std::fclose(f);
    for (int i = 0; i < kInputs; ++i) MMASIM_CHECK(hipFree(dptr[i]));
    MMASIM_CHECK(hipFree(din));
    MMASIM_CHECK(hipFree(dout));
    return 0;
}
"""


def host_source(spec) -> str:
    """The complete HIP program of ``spec``: the device code and a host ``main()``.  Usage::

        NAME CASES OUT.bin IN0.bin IN1.bin ...      run CASES cases
        NAME --info                                 the device as JSON

    ``INi.bin`` holds the words of ``spec.inputs[i]`` (little-endian uint32, ``CASES * 64 *
    words``), ``OUT.bin`` receives D the same way.  A run prints ``mmasim-harness: device=...
    arch=... runtime=... driver=...``; errors print ``mmasim-harness: error: ...`` and exit 2 (1:
    usage, 3: the device is not ``spec.target``)."""
    text = _HOST_MAIN
    for key, value in (("TARGET", spec.target), ("INPUTS", str(len(spec.inputs))),
                       ("INWORDS", ", ".join(str(b.words * spec.threads) for b in spec.inputs)),
                       ("OUTWORDS", str(spec.output.words * spec.threads)), ("THREADS", str(spec.threads)),
                       ("NAME", spec.name)):
        text = text.replace(f"@{key}@", value)
    head = (f"// Generated by mmasim (mmasim.harness.amd): {spec.instruction} on {spec.arch} ({spec.target}).\n"
            f"// Build: {' '.join(build_command(spec, spec.name + '.hip', spec.name))}\n")
    return head + _HOST_HEAD + "\n" + spec.device + text


INFO_SOURCE = _HOST_HEAD + '\nint main() { return mmasim_info(""); }\n'


def source(spec) -> tuple:
    """``(text, suffix)``: the kernel's HIP program (:func:`host_source`)."""
    return host_source(spec), ".hip"


def build_line(spec, src: str, exe: str) -> str:
    """The ``build.sh`` line that builds ``src`` into ``exe`` (:func:`build_command`)."""
    return shlex.join(build_command(spec, src, exe))


def build_command(spec, source: str, exe: str, hipcc: str = "hipcc") -> list:
    """The hipcc command line that builds ``source`` (from :func:`host_source`) into ``exe``."""
    return [hipcc, f"--offload-arch={spec.target}", "-O2", "-o", exe, source]


def _hipcc(hipcc: str | None) -> str:
    tool = hipcc or os.environ.get("MMASIM_HIPCC") or os.environ.get("HIPCC") or shutil.which("hipcc")
    if not tool:
        raise ToolchainError("no hipcc: install ROCm (hipcc on PATH, or $MMASIM_HIPCC / $HIPCC) to run the AMD harness")
    return tool


def build(source: str, target: str | None, hipcc: str | None = None) -> Path:
    """The program built from ``source`` with hipcc for ``target`` (None: a host-only program),
    cached under :func:`mmasim.harness.toolchain.cache_dir` by content hash (another source or
    hipcc builds anew)."""
    tool = _hipcc(hipcc)
    exe = cache_path(cache_key("hipcc", tool, str(target), source), f".{target or 'host'}.hipbin")
    if exe.exists():
        return exe
    exe.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as d:
        src = Path(d) / "harness.hip"
        src.write_text(source)
        tmp = Path(d) / "harness"
        arch = [f"--offload-arch={target}"] if target else []
        p = subprocess.run([tool, *arch, "-O2", "-o", str(tmp), str(src)], capture_output=True, text=True)
        if p.returncode != 0:
            raise ToolchainError(f"hipcc failed for {target or 'the host'} (exit {p.returncode}): {p.stderr.strip()[-1500:]}")
        shutil.move(str(tmp), exe)
    return exe


class HipDevice:
    """An AMD GPU through HIP: ``info()`` and ``run(spec, model, inputs, cases)`` (the device
    interface of :mod:`mmasim.harness.measure`).  ``index``: the GPU (``HIP_VISIBLE_DEVICES``).
    The device is identified by a small HIP program's ``--info`` (its ``gcnArchName``); every
    kernel's program checks again that the device is its gfx target (exit 3 otherwise)."""

    reports = "architecture"

    def __init__(self, index: int = 0, hipcc: str | None = None):
        self.index, self.hipcc = index, hipcc
        self._info = None

    @staticmethod
    def expected(target: str) -> str:
        """What ``info()["compute_capability"]`` is for ``target``: the gfx name itself."""
        return target

    def _env(self):
        return {"HIP_VISIBLE_DEVICES": str(self.index)}

    def info(self) -> dict:
        """``name``, ``gcn_arch`` (e.g. ``gfx942:sramecc+:xnack-``), ``target`` and
        ``compute_capability`` (both ``gfx942``: what :func:`mmasim.harness.measure.check_device`
        compares), ``runtime`` and ``driver`` (HIP version numbers)."""
        if self._info is None:
            exe = build(INFO_SOURCE, None, self.hipcc)
            p = subprocess.run([str(exe)], capture_output=True, text=True, env=dict(os.environ, **self._env()),
                               timeout=120)
            if p.returncode != 0:
                raise HarnessError(f"no usable AMD GPU: {(p.stderr or p.stdout).strip()[-300:]}")
            info = json.loads(p.stdout)
            info["target"] = info["compute_capability"] = info["gcn_arch"].split(":")[0]
            self._info = info
        return self._info

    def check(self, spec) -> dict:
        """The device's info, or :class:`HarnessError` when it is not ``spec.target``."""
        info = self.info()
        if info["target"] != spec.target:
            raise HarnessError(f"the device {info['name']} is {info['gcn_arch']}, but {spec.arch} kernels "
                               f"need {spec.target}")
        return info

    def run(self, spec, model, inputs, cases) -> np.ndarray:
        words, _ = execute(spec, build(host_source(spec), spec.target, self.hipcc), inputs, env=self._env())
        return words


# ------------------------------------------------------------------ toolchain checks (no GPU)
def _version(tool: str) -> tuple | None:
    try:
        text = subprocess.run([tool, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(?:LLVM|clang) version (\d+)\.(\d+)", text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _find(env: str, names: tuple) -> tuple:
    """``(path, None)`` of the first tool of LLVM >= LLVM_MIN, or ``(None, reason)``."""
    seen = []
    if os.environ.get(env):
        cands = [os.environ[env]]
    else:
        cands = [p for p in (shutil.which(n) for n in names) if p]
    for tool in cands:
        v = _version(tool)
        if v is not None and v[0] >= LLVM_MIN:
            return tool, None
        seen.append(f"{tool} ({'LLVM %d.%d' % v if v else 'no version'})")
    where = f"${env}={os.environ[env]}" if os.environ.get(env) else " or ".join(names) + " on PATH"
    return None, (f"no LLVM >= {LLVM_MIN} {names[-1]} found ({where}"
                  + (f"; found {', '.join(seen)}" if seen else "") + "); Debian: apt-get install llvm-19 clang-19")


def find_llvm_mc() -> tuple:
    """LLVM's assembler: ``$MMASIM_LLVM_MC``, ``llvm-mc-19``, then ``llvm-mc`` of LLVM >= 19."""
    return _find("MMASIM_LLVM_MC", ("llvm-mc-19", "llvm-mc"))


def find_clang() -> tuple:
    """clang with the AMDGPU target: ``$MMASIM_CLANG``, ``clang-19``, then ``clang`` of LLVM >= 19."""
    return _find("MMASIM_CLANG", ("clang-19", "clang"))


def _cached(kind: str, tools: tuple, payload: str, run) -> dict:
    """``run()``'s result, cached under :func:`mmasim.harness.toolchain.cache_dir` by the hash of
    the tools (paths and versions) and the input text; a cache that cannot be written is skipped."""
    path = cache_path(cache_key(kind, *(f"{t} {_version(t)}" for t in tools), payload), f".amd-{kind}.json")
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        pass
    result = run()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(result))
        tmp.replace(path)
    except OSError:
        pass
    return result


_DIAG = re.compile(r"^[^\n]*?:(\d+):\d+: error: (.*)$", re.M)


def check_assembly(target: str, lines: list, llvm_mc: str | None = None) -> dict:
    """Assemble ``lines`` (instruction strings) for ``target`` in one ``llvm-mc`` run.  Returns
    ``{"errors": {line: error}, "encoded": count, "printed": [...]}``: every line the assembler
    rejects with its message (empty: all assembled), and the assembler's own rendering of each
    accepted line (its canonical spelling: gfx942 also accepts the gfx90a names as aliases)."""
    tool = llvm_mc or find_llvm_mc()[0]
    if tool is None:
        raise ToolchainError(find_llvm_mc()[1])
    text = "".join(f"{ln}\n" for ln in lines)

    def run():
        with tempfile.TemporaryDirectory() as d:
            src = Path(d) / "mfma.s"
            src.write_text(text)
            p = subprocess.run([tool, "-arch=amdgcn", f"-mcpu={target}", "-show-encoding", str(src)],
                               capture_output=True, text=True, timeout=300)
        errors = {}
        for m in _DIAG.finditer(p.stderr):
            ln = lines[int(m.group(1)) - 1]
            errors.setdefault(ln, m.group(2))
        if p.returncode != 0 and not errors:
            errors["<llvm-mc>"] = p.stderr.strip()[-2000:] or f"exit status {p.returncode}"
        printed = [ln.split(";")[0].strip() for ln in p.stdout.splitlines() if "; encoding:" in ln]
        return {"errors": errors, "encoded": len(printed), "printed": printed}

    return _cached(f"mc-{target}", (tool,), text, run)


PRELUDE = """// mmasim: a self-contained prelude for compiling the device code without the ROCm headers
typedef unsigned int uint32_t;
#ifndef __global__
#define __global__ __attribute__((global))
#endif
"""


def check_device_code(target: str, kernel_specs: list, clang: str | None = None,
                      llvm_mc: str | None = None) -> dict:
    """Compile the device code of ``kernel_specs`` for ``target`` in one translation unit with
    clang (``-x hip --cuda-device-only -nogpuinc -nogpulib -S``: no ROCm installation and no
    linker needed), then assemble the compiler's output with ``llvm-mc``: the inline assembly
    goes through the AMDGPU assembler with the registers the compiler chose.  Returns
    ``{kernel name: error}`` (``"<clang>"`` / ``"<llvm-mc>"`` for an error no kernel can be
    blamed for)."""
    tool = clang or find_clang()[0]
    if tool is None:
        raise ToolchainError(find_clang()[1])
    mc = llvm_mc or find_llvm_mc()[0]
    if mc is None:
        raise ToolchainError(find_llvm_mc()[1])
    parts, starts = [PRELUDE], []
    line = PRELUDE.count("\n") + 1
    for s in kernel_specs:
        starts.append((line, s.name))
        parts.append(s.device)
        line += s.device.count("\n")
    text = "".join(parts)

    def run():
        errors = {}
        with tempfile.TemporaryDirectory() as d:
            src, asm = Path(d) / "kernels.hip", Path(d) / "kernels.s"
            src.write_text(text)
            p = subprocess.run([tool, "-x", "hip", "--cuda-device-only", "-nogpuinc", "-nogpulib",
                                f"--offload-arch={target}", "-O2", "-S", "-o", str(asm), str(src)],
                               capture_output=True, text=True, timeout=600)
            for m in _DIAG.finditer(p.stderr):
                n = int(m.group(1))
                owner = [name for first, name in starts if first <= n]
                errors.setdefault(owner[-1] if owner else "<clang>", m.group(2))
            if p.returncode != 0:
                if not errors:
                    errors["<clang>"] = p.stderr.strip()[-2000:] or f"exit status {p.returncode}"
                return {"errors": errors}
            out = asm.read_text().splitlines()
            q = subprocess.run([mc, "-triple=amdgcn-amd-amdhsa", f"-mcpu={target}", "-filetype=obj",
                                "-o", str(Path(d) / "kernels.o"), str(asm)],
                               capture_output=True, text=True, timeout=600)
        names = {s.name for s in kernel_specs}
        for m in _DIAG.finditer(q.stderr):
            n = int(m.group(1))
            owner = "<llvm-mc>"
            for ln in reversed(out[:n]):
                label = ln.split(":", 1)[0].strip()
                if ln and not ln[0].isspace() and label in names:
                    owner = label
                    break
            errors.setdefault(owner, m.group(2))
        if q.returncode != 0 and not errors:
            errors["<llvm-mc>"] = q.stderr.strip()[-2000:] or f"exit status {q.returncode}"
        return {"errors": errors}

    return _cached(f"hip-{target}", (tool, mc), text, run)
