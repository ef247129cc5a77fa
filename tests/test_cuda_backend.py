"""``backend="cuda"`` (mmasim/backends/cuda/backend.py, device.py), without a GPU.

The CUDA drivers run in numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``, in a subprocess:
the simulator replaces ``numba.cuda`` for the whole process), on a small batch of one datapath
of every family, from numpy arrays and from operands on the "device" (an object exposing only
``__cuda_array_interface__``, and the simulator's device arrays).  Expectations: the numpy
reference backend's words on the same operands (``backend="numpy"``), and for gemm its
composition of K tiles on the numpy backend.  Without the simulator, on a machine with no GPU
(or no numba-cuda), ``backend="cuda"`` is a BackendError naming what is missing.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import cuda_sim
import mmasim
from mmasim import backends
from mmasim.backends.cuda import backend as cuda_backend
from mmasim.backends.cuda import launch as cuda_launch
from mmasim.backends.cuda import missing

#: one datapath of every family the bodies take (and the forms around them)
FAMILIES = {
    "window lean (f16, inf / NaN)": ("A100", "mma.sync.m16n8k16.f32.f16.f16.f32"),
    "window lean (e4m3, D f16)": ("H100", "wgmma.mma_async.m64n8k32.f16.e4m3.e4m3"),
    "window grouped (NVFP4)": ("B200",
                               "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3"),
    "window general (MX fp4)": ("B200", "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X.block32.f32.e2m1.e2m1.ue8m0"),
    "block-scaled MX (e4m3)": ("B200",
                               "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e4m3.e4m3.ue8m0"),
    "RTX group-scaled": ("RTX Blackwell",
                         "mma.sync.kind::mxf4.block_scale.scale_vec::2X.block32.m16n8k64.f32.e2m1.e2m1.ue8m0"),
    "two-stage": ("CDNA3", "v_mfma.m16n16k16.f32.f16.f16"),
    "fma f32": ("CDNA1", "v_mfma.m32n32k2.f32.f32.f32"),
    "fma f64": ("A100", "mma.sync.m8n8k4.f64.f64.f64.f64"),
    "mul-add": ("Ampere", "mma.sync.m8n8k4.f32.f16.f16"),
    "ftz mul-add": ("CDNA2", "v_mfma.m32n32k4.f32.bf16.bf16"),
    "exact-sum": ("CDNA1", "v_mfma.m32n32k8.f32.f16.f16"),
    "integer": ("A100", "mma.sync.m16n8k32.s32.s8.s8"),
    "integer b1 xor": ("A100", "mma.sync.m8n8k128.s32.b1.b1.xor.popc"),
    "sparse window": ("A100", "mma.sync.sp.m16n8k16.f32.f16.f16"),
    "sparse NVFP4": ("B200", "tcgen05.mma.sp.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3"),
    "sparse integer (CDNA3)": ("CDNA3", "v_smfmac.sp.m16n16k64.s32.s8.s8"),
    "step order and C added last": ("B200", "mma.sync.m16n8k32.f32.e4m3.e4m3"),
}

_SCRIPT = """
    from numba import cuda
    from mmasim.operands import wordgen

    from mmasim.backends.cuda import launch as cb
    referred = []   # the rows a body flags, computed by the reference
    _ref = cb.reference
    def reference(plan, rows):
        referred.append(len(rows))
        return _ref(plan, rows)
    cb.reference = reference

    families = json.loads(sys.argv[1])
    out = {}
    for name, (arch, instruction) in families.items():
        m = mmasim.MMA(arch, instruction)
        rng = np.random.default_rng(31)
        rec = out[name] = {}
        for kind in ("mixed", "edge"):
            a, b, c, kw = wordgen.operands(m, 40, rng, kind)
            want = m.dot(a, b, c, backend="numpy", **kw)
            host = m.dot(a, b, c, backend="cuda", **kw)
            ops = [a, b, c, *kw.values()]
            fmts = [m.a_format, m.b_format, m.c_format] + [m.scale_format if k.startswith("scale") else None
                                                          for k in kw]
            # on the device, words of the container's width (a signed one is read as unsigned)
            stubs = [Stub(x.astype(np.uint32 if f is None else f"u{max(8, f.container_bits) // 8}"))
                     for x, f in zip(ops, fmts)]
            del copies[:], referred[:]
            dev = m.dot(*stubs[:3], backend="cuda", **dict(zip(kw, stubs[3:])))
            n_copied = copied([s.a for s in stubs])
            rec[kind] = {"want": want.tolist(), "host": host.tolist(), "device": dev.copy_to_host().tolist(),
                         "device type": type(dev).__name__, "operand copies": n_copied,
                         "flagged rows": sum(referred)}
    # the matrix form, B a simulator device array, broadcast rows, a gemm with promotion and split-K
    m = mmasim.MMA("H100", "wgmma.mma_async.m64n8k32.f32.e4m3.e4m3")
    rng = np.random.default_rng(5)
    A = rng.integers(0, 0x7f, (64, 32)).astype(np.uint8)
    B = rng.integers(0, 0x7f, (32, 8)).astype(np.uint8)
    C = rng.integers(0, 0x4f000000, (64, 8)).astype(np.uint32)
    d = m(Stub(A), cuda.to_device(B), Stub(C), backend="cuda")
    out["matrix"] = {"want": m(A, B, C, backend="numpy").tolist(), "device": d.copy_to_host().tolist()}
    a = rng.integers(0, 0x7f, (3, 1, 32)).astype(np.uint8)
    b = rng.integers(0, 0x7f, (1, 4, 32)).astype(np.uint8)
    c = rng.integers(0, 0x4f000000, (4,)).astype(np.uint32)
    d = m.dot(Stub(a), Stub(b), c, backend="cuda")
    out["broadcast"] = {"want": m.dot(a, b, c, backend="numpy").tolist(), "device": d.copy_to_host().tolist(),
                        "shape": list(d.shape)}
    A = rng.integers(0, 0x7f, (64, 256)).astype(np.uint8)
    B = rng.integers(0, 0x7f, (256, 8)).astype(np.uint8)
    C = rng.integers(0, 0x4f000000, (64, 8)).astype(np.uint32)
    kw = dict(arch="H100", instruction="wgmma.mma_async.m64n8k32.f32.e4m3.e4m3", promote_every=128, split_k=2)
    want = mmasim.gemm(A, B, C, backend="numpy", **kw)
    host = mmasim.gemm(A, B, C, backend="cuda", **kw)
    dev = mmasim.gemm(Stub(A), Stub(B), Stub(C), backend="cuda", **kw)
    out["gemm"] = {"want": want.tolist(), "host": host.tolist(), "device": dev.copy_to_host().tolist(),
                   "device type": type(dev).__name__}
    # the plain chain on the device: no operand copied to the host (k_order reversed; NVFP4 with scales, no C)
    A, B = A[:, :128], B[:128]
    plain = dict(arch="H100", instruction="wgmma.mma_async.m64n8k32.f32.e4m3.e4m3", k_order="reverse")
    stubs = [Stub(x) for x in (A, B, C)]
    del copies[:]
    dev = mmasim.gemm(*stubs, backend="cuda", **plain)
    out["gemm plain"] = {"want": mmasim.gemm(A, B, C, backend="numpy", **plain).tolist(),
                         "device": dev.copy_to_host().tolist(), "operand copies": copied([x.a for x in stubs])}
    m4 = mmasim.MMA("B200", "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3")
    A, B = rng.integers(0, 16, (128, 128)).astype(np.uint8), rng.integers(0, 16, (128, 16)).astype(np.uint8)
    sa, sb = rng.integers(0x30, 0x40, (128, 8)).astype(np.uint8), rng.integers(0x30, 0x40, (8, 16)).astype(np.uint8)
    stubs = [Stub(x) for x in (A, B, sa, sb)]
    del copies[:]
    dev = mmasim.gemm(stubs[0], stubs[1], None, model=m4, scale_a=stubs[2], scale_b=stubs[3], backend="cuda")
    out["gemm plain nvfp4"] = {"want": mmasim.gemm(A, B, None, model=m4, scale_a=sa, scale_b=sb,
                                                   backend="numpy").tolist(),
                               "device": dev.copy_to_host().tolist(), "operand copies": copied([x.a for x in stubs])}
    # mmasim.torch passes the backend through to its GEMMs
    import torch
    import mmasim.torch as mt
    from mmasim.torch.matmul import matmul
    x, w = torch.randn(64, 64, generator=torch.Generator().manual_seed(0)), torch.randn(64, 64)
    em = mt.preset("H100-fp8-tensor")
    out["torch"] = {"want": matmul(x, w, em, backend="numpy").tolist(),
                    "cuda": matmul(x, w, em, backend="cuda").tolist()}
    # bad input
    errors = {}
    m = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16.f32")
    a = rng.integers(0, 0x3c00, (4, 16)).astype(np.uint16)
    c = np.zeros(4, np.uint32)
    cases = {
        "word above its container": lambda: m.dot(Stub(a.view(np.int16) | np.int16(-0x8000)), Stub(a), Stub(c),
                                                  backend="cuda"),
        "words wider than their container": lambda: m.dot(Stub(a.astype(np.uint32)), Stub(a), Stub(c),
                                                          backend="cuda"),
        "values on the device": lambda: m.dot(Stub(a.astype(np.float32)), Stub(a), Stub(c), backend="cuda"),
        "K of a": lambda: m.dot(Stub(a[:, :8]), Stub(a), Stub(c), backend="cuda"),
        "batch shapes": lambda: m.dot(Stub(a), Stub(a[:3]), Stub(c), backend="cuda"),
        "values beside device words": lambda: m.dot(Stub(a), a.astype(np.float16), Stub(c), backend="cuda"),
    }
    sp = mmasim.MMA("A100", "mma.sync.sp.m16n8k16.f32.f16.f16")
    md = np.full((4, 1), 0xFFFFFFFF, np.uint32)      # selector nibble 0xF: an illegal pair
    cases["illegal selector"] = lambda: sp.dot(Stub(a), Stub(a), Stub(c), sparse_metadata=Stub(md), backend="cuda")
    for what, call in cases.items():
        try:
            call()
            errors[what] = None
        except Exception as exc:
            errors[what] = [type(exc).__name__, [k.__name__ for k in type(exc).__mro__], str(exc)]
    out["errors"] = errors
    print(json.dumps(out))
"""


simulated = cuda_sim.fixture(_SCRIPT, FAMILIES)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_cuda_backend_under_the_simulator_gives_the_numpy_words(simulated, family):
    """numpy operands (copied to the device) and device operands (``__cuda_array_interface__``
    only) give the numpy reference's words, the latter as a device array."""
    for kind, rec in simulated[family].items():
        assert rec["host"] == rec["want"], (family, kind)
        assert rec["device"] == rec["want"], (family, kind)
        assert rec["device type"] == "FakeCUDAArray"


@pytest.mark.parametrize("family", list(FAMILIES))
def test_device_operands_are_never_copied_to_the_host(simulated, family):
    """No device -> host copy reads an operand's memory (the simulator's ``copy_to_host``
    counted) but where a body flags rows (the reference computes them from host copies:
    exact sums beyond int64 here), the documented exception; a datapath that adds C after
    its steps adds it on the device."""
    seen = 0
    for kind, rec in simulated[family].items():
        allowed = 3 if rec["flagged rows"] else 0
        assert rec["operand copies"] == allowed, (family, kind, rec["flagged rows"])
        seen += rec["operand copies"] == 0
    assert seen or family == "exact-sum"


def test_matrix_form_and_broadcast_batches_on_the_device(simulated):
    assert simulated["matrix"]["device"] == simulated["matrix"]["want"]
    assert simulated["broadcast"]["device"] == simulated["broadcast"]["want"]
    assert simulated["broadcast"]["shape"] == [3, 4]


@pytest.mark.parametrize("case", ["gemm plain", "gemm plain nvfp4"])
def test_gemm_plain_chain_of_device_operands_stays_on_the_device(simulated, case):
    """``mmasim.gemm`` without promotion, split-K or epilogue on device operands (k_order
    reversed; NVFP4 with its scales and no C) chains its K tiles on the device: the numpy
    backend's words, and no operand copied to the host."""
    rec = simulated[case]
    assert rec["device"] == rec["want"]
    assert rec["operand copies"] == 0


def test_gemm_with_promotion_and_split_k_on_the_cuda_backend(simulated):
    """``mmasim.gemm`` (promote_every=128, split_k=2) under the cuda backend, from numpy
    arrays and from device operands (D back on the device), gives the numpy backend's words."""
    rec = simulated["gemm"]
    assert rec["host"] == rec["want"]
    assert rec["device"] == rec["want"]
    assert rec["device type"] == "FakeCUDAArray"


@pytest.mark.parametrize("case,error", [
    ("word above its container", "WordRangeError"),
    ("words wider than their container", "DtypeError"),
    ("values on the device", "DtypeError"),
    ("K of a", "ShapeError"),
    ("batch shapes", "ShapeError"),
    ("values beside device words", "DtypeError"),
    ("illegal selector", "SparseMetadataError"),
])
def test_bad_device_operands_raise_the_specific_error(simulated, case, error):
    got = simulated["errors"][case]
    assert got is not None, f"{case}: no error"
    name, mro, message = got
    assert name == error and "MMAError" in mro, (case, got)


def test_cuda_unavailable_is_a_backend_error_naming_what_is_missing(monkeypatch):
    """Without the simulator and with no GPU (or no numba-cuda), ``backend="cuda"`` and
    ``MMASIM_BACKEND=cuda`` are BackendErrors that say what is missing."""
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    if not missing() and cuda_backend.gpu_present():
        pytest.skip("a CUDA GPU is present")
    want = "pip install 'mmasim-exact[cuda]'" if missing() else "no CUDA GPU"
    with pytest.raises(backends.BackendError, match=want.replace("[", r"\[").replace("]", r"\]")):
        backends.resolve("cuda")
    m = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16.f32")
    monkeypatch.setenv("MMASIM_BACKEND", "cuda")
    with pytest.raises(backends.BackendError, match="MMASIM_BACKEND"):
        m.dot(np.zeros((1, 16), np.uint16), np.zeros((1, 16), np.uint16), np.zeros(1, np.uint32))
    # without numba-cuda: the install line
    monkeypatch.setattr(cuda_backend, "missing", lambda: "numba-cuda is not installed: pip install "
                                                          "'mmasim-exact[cuda]'")
    with pytest.raises(backends.BackendError, match=r"pip install 'mmasim-exact\[cuda\]'"):
        backends.resolve("cuda")


def test_auto_takes_cuda_only_for_large_jobs_on_a_real_gpu(monkeypatch):
    """``auto`` picks cuda for a job of CUDA_MIN_PRODUCTS products or more when a GPU is
    present, never below it, and never in the simulator."""
    monkeypatch.delenv("MMASIM_BACKEND", raising=False)
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    plan = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16.f32").plan
    big = backends.CUDA_MIN_PRODUCTS if hasattr(backends, "CUDA_MIN_PRODUCTS") else cuda_backend.CUDA_MIN_PRODUCTS
    monkeypatch.setattr(cuda_backend, "missing", lambda: "")        # numba-cuda installed (or not: a stand-in)
    monkeypatch.setattr(cuda_backend, "_gpu_missing", lambda: "")
    assert backends.choose(None, plan, big) == "cuda"
    assert backends.choose("auto", plan, big - 1) != "cuda"
    monkeypatch.setenv("NUMBA_ENABLE_CUDASIM", "1")
    assert backends.choose(None, plan, big) != "cuda"
    monkeypatch.setattr(cuda_backend, "_gpu_missing", lambda: "no CUDA GPU")
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM")
    assert backends.choose(None, plan, big) != "cuda"


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
@pytest.mark.parametrize("arch,instruction", [("Ampere", "mma.sync.m8n8k4.f32.f16.f16"),
                                              ("CDNA1", "v_mfma.m32n32k2.f32.f32.f32")])
def test_kernels_launched_on_a_gpu_are_compiled_without_contraction(arch, instruction):
    """The compile of a GPU launch (numba-cuda's ``compile_cuda`` as its dispatcher calls it,
    with only ``opt`` and ``fastmath``) under :func:`forced_nvvm` gives PTX whose every
    floating-point multiply and add rounds by itself (``mul.rn`` / ``add.rn``, which ptxas
    never fuses); without it NVVM writes ``mul.f64`` / ``add.f32``, which ptxas may contract
    into FFMA / DFMA.  No GPU needed: the compile is asked for sm_90a."""
    import contextlib
    import re

    from numba.cuda import dispatcher as cuda_dispatcher
    from numba.cuda import types as cuda_types

    from mmasim.backends.cuda import rows, target
    from mmasim.backends.cuda.driver import cuda_driver

    plan = mmasim.MMA(arch, instruction).plan
    body, arrays = rows.body_for(plan)
    sig = target.signature(plan, arrays)

    def ops(forced):
        with (cuda_launch.forced_nvvm() if forced else contextlib.nullcontext()), target._target_device((9, 0, "a")):
            cres = cuda_dispatcher.compile_cuda(cuda_driver(body), cuda_types.void, sig,
                                                nvvm_options={"opt": 3, "fastmath": False}, cc=(9, 0))
        return re.findall(r"\b((?:mul|add|sub)(?:\.rn)?\.f(?:32|64))\b", cres.library.get_asm_str(cc=(9, 0, "a")))

    forced, plain = ops(True), ops(False)
    assert forced and all(".rn." in op for op in forced), forced
    assert any(".rn." not in op for op in plain), plain      # the test can fail: NVVM's default contracts


def test_torch_matmul_passes_backend_cuda_through(simulated):
    """``mmasim.torch``'s matmul under ``backend="cuda"`` gives the numpy backend's values."""
    assert simulated["torch"]["cuda"] == simulated["torch"]["want"]


_VECTORS = sorted(pathlib.Path(__file__).resolve().parents[1].joinpath("vectors", "hardware").rglob("*.npz"))


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
def test_validate_backend_cuda_runs_a_vector_file_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env.pop("MMASIM_BACKEND", None)
    r = subprocess.run([sys.executable, "-m", "mmasim", "validate", "--backend", "cuda", "--json", "-q",
                        str(_VECTORS[0])], capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    summary = json.loads(r.stdout)["summary"]
    assert summary["ok"] and summary["cases"] > 0 and summary["mismatches"] == summary["errors"] == 0


def test_validate_backend_cuda_without_a_gpu_says_what_is_missing():
    if not missing() and cuda_backend.gpu_present():
        pytest.skip("a CUDA GPU is present")
    env = {k: v for k, v in os.environ.items() if k not in ("MMASIM_BACKEND", "NUMBA_ENABLE_CUDASIM")}
    r = subprocess.run([sys.executable, "-m", "mmasim", "validate", "--backend", "cuda", str(_VECTORS[0])],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode != 0
    assert "backend 'cuda'" in r.stderr and ("no CUDA GPU" in r.stderr or "pip install" in r.stderr), r.stderr


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
def test_a_gpu_kernel_is_compiled_eagerly_with_its_targets_first_isa_and_no_contraction(monkeypatch):
    """The whole compile of a GPU launch (:func:`_gpu_kernel`: ``cuda.jit(types)`` under
    :func:`forced_nvvm`) with the device, its compute capability (sm_90a, an H200's) and the
    binding (linking and loading, which need a driver) stood in for: the PTX it links declares
    PTX ISA 8.0 (what a CUDA 12 or 13.0 driver reads, whatever NVVM wrote), targets sm_90a, has
    no fma and only ``.rn`` multiplies and adds, and no LTO (whose code generation would not
    see NVVM's options)."""
    import re

    from numba.cuda import codegen
    from numba.cuda import dispatcher as cuda_dispatcher

    from mmasim.backends.cuda import rows, target
    from mmasim.backends.cuda.driver import cuda_driver

    monkeypatch.setattr(codegen.CUDACodeLibrary, "_ensure_cc", lambda self, cc: cc or (9, 0, "a"))
    monkeypatch.setattr(cuda_dispatcher._Kernel, "bind", lambda self: None)
    monkeypatch.setattr(cuda_launch, "_KERNELS", {})
    plan = mmasim.MMA("Ampere", "mma.sync.m8n8k4.f32.f16.f16").plan
    body, arrays = rows.body_for(plan)
    z = np.zeros((4, 4), np.uint16)
    args = (*rows.dense_args(plan, z, z, np.zeros(4, np.uint32)), *arrays, np.zeros(4, np.uint32),
            np.zeros(4, np.bool_))
    with target._target_device((9, 0, "a")):
        kernel = cuda_launch._gpu_kernel(cuda_driver, body, cuda_launch.argument_types(args))
    (compiled,) = kernel.overloads.values()
    lib = compiled._codelibrary
    ptx = "\n".join(lib._ptx_cache[(9, 0, "a")])
    assert re.search(r"^\.version 8\.0$", ptx, re.M) and re.search(r"^\.target sm_90a$", ptx, re.M)
    ops = set(re.findall(r"\b((?:mul|add|sub|fma)(?:\.rn)?\.f(?:32|64))\b", ptx))
    assert ops and all(op.split(".")[1] == "rn" for op in ops), ops
    assert not lib._lto
