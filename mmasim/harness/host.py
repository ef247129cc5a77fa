"""The CUDA host program every generated NVIDIA kernel is built with.

One ``main()`` for every :class:`~mmasim.harness.spec.KernelSpec`: the spec's buffer sizes are
baked in as constants, everything else is the same.  Usage of a built harness::

    NAME CASES OUT.bin IN0.bin IN1.bin ...

``INi.bin`` holds the words of ``spec.inputs[i]`` (little-endian uint32, ``CASES * threads *
words`` for a ``registers`` buffer, ``CASES * words`` for ``smem``; times ``spec.cluster``, the
blocks of one case, where a case takes a cluster); ``OUT.bin`` receives D the same way.  The program prints one line ``mmasim-harness: device=... cc=MAJOR.MINOR runtime=...
driver=...`` and exits 0, or prints ``mmasim-harness: error: ...`` (a CUDA error names the call
that failed) and exits non-zero.
"""
from __future__ import annotations

import os
import pathlib
import shlex
import subprocess
import tempfile

import numpy as np

from mmasim.errors import HarnessError
from mmasim.harness.spec import KernelSpec

PRELUDE = "#include <cstdint>\n#include <cstdio>\n#include <cstdlib>\n#include <vector>\n#include <cuda_runtime.h>\n"

_MAIN = r"""
static const int kInputs = @INPUTS@;
static const size_t kInWords[kInputs > 0 ? kInputs : 1] = {@INWORDS@};   // words per case
static const size_t kOutWords = @OUTWORDS@;                               // words per case
static const int kThreads = @THREADS@;
static const unsigned kCluster = @CLUSTER@;                               // blocks per case
static const size_t kSmemBytes = @SMEM@;

static void die(const char* what, const char* detail) {
    fprintf(stderr, "mmasim-harness: error: %s: %s\n", what, detail);
    exit(2);
}
#define CK(call) do { cudaError_t e_ = (call); if (e_ != cudaSuccess) die(#call, cudaGetErrorString(e_)); } while (0)

static std::vector<uint32_t> read_words(const char* path, size_t words) {
    FILE* f = fopen(path, "rb");
    if (!f) die("cannot open input", path);
    std::vector<uint32_t> v(words);
    size_t got = words ? fread(v.data(), 4, words, f) : 0;
    int extra = fgetc(f);
    fclose(f);
    if (got != words || extra != EOF) die("input file has the wrong size", path);
    return v;
}

int main(int argc, char** argv) {
    if (argc != 3 + kInputs) {
        fprintf(stderr, "usage: %s CASES OUT.bin", argv[0]);
        for (int i = 0; i < kInputs; ++i) fprintf(stderr, " IN%d.bin", i);
        fprintf(stderr, "\n");
        return 1;
    }
    char* end = nullptr;
    long long cases = strtoll(argv[1], &end, 10);
    if (!end || *end || cases <= 0 || cases * kCluster > 0x7fffffffLL) die("CASES must be a positive integer", argv[1]);
    int dev = 0, runtime = 0, driver = 0;
    CK(cudaGetDevice(&dev));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, dev));
    CK(cudaRuntimeGetVersion(&runtime));
    CK(cudaDriverGetVersion(&driver));
    printf("mmasim-harness: device=%s cc=%d.%d runtime=%d driver=%d\n", prop.name, prop.major, prop.minor,
           runtime, driver);
    std::vector<uint32_t*> dptr(kInputs > 0 ? kInputs : 1, nullptr);
    for (int i = 0; i < kInputs; ++i) {
        size_t words = kInWords[i] * (size_t)cases;
        std::vector<uint32_t> h = read_words(argv[3 + i], words);
        CK(cudaMalloc(&dptr[i], words * 4 + 4));
        CK(cudaMemcpy(dptr[i], h.data(), words * 4, cudaMemcpyHostToDevice));
    }
    const uint32_t** din = nullptr;
    CK(cudaMalloc(&din, sizeof(uint32_t*) * dptr.size()));
    CK(cudaMemcpy(din, dptr.data(), sizeof(uint32_t*) * dptr.size(), cudaMemcpyHostToDevice));
    size_t out_words = kOutWords * (size_t)cases;
    uint32_t* dout = nullptr;
    CK(cudaMalloc(&dout, out_words * 4 + 4));
    CK(cudaMemset(dout, 0xff, out_words * 4));
    if (kSmemBytes > 48 * 1024)
        CK(cudaFuncSetAttribute(@NAME@, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)kSmemBytes));
    @NAME@<<<(unsigned)cases * kCluster, kThreads, kSmemBytes>>>(din, dout);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    std::vector<uint32_t> h(out_words);
    CK(cudaMemcpy(h.data(), dout, out_words * 4, cudaMemcpyDeviceToHost));
    FILE* f = fopen(argv[2], "wb");
    if (!f) die("cannot open output", argv[2]);
    if (fwrite(h.data(), 4, out_words, f) != out_words) die("cannot write output", argv[2]);
    fclose(f);
    return 0;
}
"""


def cluster(spec: KernelSpec) -> int:
    """Thread blocks per case (``KernelSpec.cluster``: 2 for tcgen05 ``cta_group::2``; 1 where the
    spec has no such field)."""
    return int(getattr(spec, "cluster", 1) or 1)


def words_per_case(spec: KernelSpec, buf) -> int:
    """32-bit words one case of ``buf`` takes in its file (every block of the case's cluster)."""
    per_block = buf.words * spec.threads if buf.space == "registers" else buf.words
    return per_block * cluster(spec)


def smem_bytes(spec: KernelSpec) -> int:
    """Dynamic shared memory the kernel gets: every ``smem`` buffer, each aligned, plus slack
    for the alignment of the first (the kernel aligns its own copies)."""
    total = 0
    for b in spec.inputs:
        if b.space == "smem":
            total = -(-total // b.align) * b.align + b.words * 4
    return total + (max((b.align for b in spec.inputs if b.space == "smem"), default=0))


def cuda_main(spec: KernelSpec) -> str:
    """The host ``main()`` of ``spec``."""
    text = _MAIN
    for key, value in (("INPUTS", str(len(spec.inputs))),
                       ("INWORDS", ", ".join(str(words_per_case(spec, b)) for b in spec.inputs) or "0"),
                       ("OUTWORDS", str(words_per_case(spec, spec.output))),
                       ("THREADS", str(spec.threads)), ("CLUSTER", str(cluster(spec))),
                       ("SMEM", str(smem_bytes(spec))), ("NAME", spec.name)):
        text = text.replace(f"@{key}@", value)
    return text


def cuda_source(spec: KernelSpec) -> str:
    """The complete ``.cu`` of one kernel: prelude, device code, host ``main()``."""
    return PRELUDE + "\n" + spec.device + cuda_main(spec)


def source(spec: KernelSpec) -> tuple:
    """``(text, suffix)`` of the self-contained source of a CUDA kernel (the NVIDIA emitters' ``source``)."""
    return cuda_source(spec), ".cu"


def build_line(spec: KernelSpec, src: str, exe: str) -> str:
    """The ``build.sh`` line that compiles a CUDA kernel's ``src`` into ``exe`` with nvcc."""
    target = spec.target
    return '"${NVCC:-nvcc}" ' + shlex.join(["-gencode", f"arch=compute_{target[3:]},code={target}", "-std=c++17",
                                            "-o", exe, src])


def device_batch(specs) -> str:
    """One translation unit holding the device code of several kernels (the compile checks)."""
    return PRELUDE + "\n" + "\n".join(s.device for s in specs)


#: seconds a harness program may run (``execute``): a kernel that never finishes (a hung GPU)
#: is killed and reported instead of stopping ``harness run``; ``$MMASIM_HARNESS_TIMEOUT`` overrides
TIMEOUT = 300


def _timeout() -> float:
    text = os.environ.get("MMASIM_HARNESS_TIMEOUT", "").strip()
    if not text:
        return TIMEOUT
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise HarnessError(f"MMASIM_HARNESS_TIMEOUT must be a positive number of seconds, got {text!r}")
    return value


def execute(spec: KernelSpec, exe, inputs, workdir=None, env=None, timeout=None) -> tuple:
    """Run the built program ``exe`` of ``spec`` (CUDA or HIP: both follow the file protocol
    above) on the input buffers ``inputs`` (from the emitter's ``place``): writes ``IN0.bin``
    ... into ``workdir`` (default: a temporary folder), runs ``exe CASES OUT.bin IN0.bin ...``
    with ``env`` added to the environment, and returns ``(output words (uint32, flat), stdout)``.
    :class:`HarnessError` when a buffer does not hold whole cases, the program fails, runs longer
    than ``timeout`` seconds (default ``$MMASIM_HARNESS_TIMEOUT``, else :data:`TIMEOUT`), or it
    writes the wrong number of words."""
    if timeout is None:
        timeout = _timeout()
    if len(inputs) != len(spec.inputs):
        raise HarnessError(f"{spec.name}: {len(spec.inputs)} input buffers expected, got {len(inputs)}")
    per_case = [words_per_case(spec, b) for b in spec.inputs]
    cases = np.asarray(inputs[0]).size // per_case[0] if per_case else 0
    with tempfile.TemporaryDirectory(prefix="mmasim-harness-") as tmp:
        work = pathlib.Path(workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        paths = []
        for i, (b, x, n) in enumerate(zip(spec.inputs, inputs, per_case)):
            x = np.ascontiguousarray(x, dtype="<u4").reshape(-1)
            if x.size != cases * n or cases == 0:
                raise HarnessError(f"{spec.name}: buffer {b.operand} holds {x.size} words, not {cases} x {n}")
            path = work / f"IN{i}.bin"
            x.tofile(path)
            paths.append(str(path))
        out = work / "OUT.bin"
        try:
            p = subprocess.run([str(exe), str(cases), str(out), *paths], capture_output=True, text=True,
                               env=dict(os.environ, **(env or {})), timeout=timeout)
        except subprocess.TimeoutExpired:
            raise HarnessError(f"{spec.name} did not finish within {timeout:g} s on the device and was "
                               "stopped (MMASIM_HARNESS_TIMEOUT sets the limit)") from None
        if p.returncode != 0:
            raise HarnessError(f"{spec.name} failed on the device (exit {p.returncode}): "
                               f"{(p.stderr or p.stdout).strip()[-500:]}")
        words = np.fromfile(out, dtype="<u4").astype(np.uint32)
    if words.size != cases * words_per_case(spec, spec.output):
        raise HarnessError(f"{spec.name}: the program wrote {words.size} words, not {cases} cases of D")
    return words, p.stdout
