"""numba-cuda compiles the window's per-row body (mmasim/backends/cuda) to PTX for sm_80,
sm_90a and sm_100a with no GPU and no driver, and NVIDIA's ptxas assembles it without a
spill or local memory.  Skipped, with the reason, where numba-cuda is not installed
(``pip install '.[cuda]'``); the ptxas checks where no ptxas knows the target
(``pip install nvidia-cuda-nvcc nvidia-cuda-nvcc-cu12``).

Expectations: the PTX ISA manual (the first PTX ISA of each target: sm_80 7.0, sm_90a 8.0,
sm_100a 8.6), and ptxas's own report.
"""

from __future__ import annotations

import functools
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import mmasim
from mmasim.backends.cuda import missing

pytestmark = [pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed"),
              pytest.mark.xdist_group("cuda_ptx")]

if not missing():
    import numba
    from numba import cuda

    from mmasim.backends.cuda import rows, target
    from mmasim.backends.cuda.driver import cuda_driver
    from mmasim.backends.numba import primitives

DATAPATHS = [("A100", "mma.sync.m16n8k16.f32.f16.f16.f32"), ("H100", "wgmma.mma_async.m64n8k32.f32.e4m3.e4m3")]
FIRST_ISA = {"sm_80": "7.0", "sm_90a": "8.0", "sm_100a": "8.6"}


@pytest.fixture(scope="module")
def window_ptx():
    """{(instruction, arch): PTX of the window body's CUDA driver}."""
    out = {}
    for arch, instruction in DATAPATHS:
        plan = mmasim.MMA(arch, instruction).plan
        body, arrays = rows.body_for(plan)
        for sm in target.ARCHS:
            out[instruction, sm] = target.compile_ptx(cuda_driver(body), target.signature(plan, arrays), sm)
    return out


@functools.lru_cache(maxsize=None)
def _ptxases(arch: str) -> tuple:
    """Every distinct ptxas here that assembles for ``arch`` (the wheels' of CUDA 12 and 13, PATH's)."""
    cands = [shutil.which("ptxas")]
    for entry in sys.path:
        cands += sorted(str(p) for p in pathlib.Path(entry or ".").glob("nvidia/*/bin/ptxas"))
    found, seen = [], set()
    for path in cands:
        if not path or not pathlib.Path(path).is_file() or pathlib.Path(path).resolve() in seen:
            continue
        seen.add(pathlib.Path(path).resolve())
        r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
        if arch in r.stdout:
            found.append(path)
    return tuple(found)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_ptx_names_its_target_and_the_first_ptx_isa_that_knows_it(window_ptx, arch):
    for (_, sm), ptx in window_ptx.items():
        if sm == arch:
            assert re.search(rf"^\.target {arch}$", ptx, re.M)
            assert re.search(rf"^\.version {re.escape(FIRST_ISA[arch])}$", ptx, re.M)
            assert ".entry" in ptx


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_ptxas_assembles_the_window_body_without_spills_or_local_memory(window_ptx, arch, tmp_path):
    ptxases = _ptxases(arch)
    if not ptxases:
        pytest.skip(f"no ptxas knows {arch} (pip install nvidia-cuda-nvcc nvidia-cuda-nvcc-cu12)")
    for (instruction, sm), ptx in window_ptx.items():
        if sm != arch:
            continue
        assert ".local" not in ptx, instruction
        src = tmp_path / "window.ptx"
        src.write_text(ptx)
        for ptxas in ptxases:
            r = subprocess.run([ptxas, "-v", f"-arch={arch}", str(src), "-o", str(tmp_path / "window.cubin")],
                               capture_output=True, text=True, timeout=300)
            report = r.stdout + r.stderr
            assert r.returncode == 0, (ptxas, report[-2000:])
            assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, (ptxas, report)
            assert "lmem" not in report, (ptxas, report)


def test_fixed_point_window_body_has_no_fused_multiply_add(window_ptx):
    for key, ptx in window_ptx.items():
        assert "fma.rn" not in ptx, key


def _mul_add(x, y, z, out):
    out[0] = x * y + z


def test_ieee_multiply_then_add_stays_two_roundings():
    """NVVM contracts ``x * y + z`` into one ``fma.rn`` unless told ``-fma=0``: numba-cuda's
    own options contract it, :func:`target.compile_ptx` does not (IEEE chains round twice)."""
    sig = (numba.float64, numba.float64, numba.float64, numba.float64[::1])
    ours = target.compile_ptx(_mul_add, sig, "sm_90a")
    assert "fma.rn" not in ours and "mul.rn.f64" in ours and "add.rn.f64" in ours
    theirs, _ = cuda.compile_ptx(_mul_add, sig, cc=(9, 0))
    assert "fma.rn.f64" in theirs


def _intrinsics(x, y, i, out, bits):
    out[0] = primitives._ftrunc(x)
    out[1] = primitives._fma(x, y, x)
    out[2] = primitives._bitcast(i)
    bits[0] = primitives._bitlen(i)
    bits[1] = primitives._f32_word(y)
    bits[2] = primitives._bitcast(x)


def test_target_neutral_intrinsics_compile_for_cuda():
    """The CPU intrinsics of the primitives, typed by numba-cuda through their CUDA twins:
    ``_ftrunc`` is ``cvt.rzi`` (NVVM has no ``llvm.trunc.f64``), ``_bitlen`` a ``clz``, an
    explicit ``_fma`` stays one ``fma.rn``."""
    sig = (numba.float64, numba.float64, numba.int64, numba.float64[::1], numba.int64[::1])
    ptx = target.compile_ptx(_intrinsics, sig, "sm_80")
    for op in ("cvt.rzi.f64.f64", "fma.rn.f64", "clz.b64", "cvt.rn.f32.f64"):
        assert op in ptx, op


def test_a_foreign_cpu_intrinsic_is_still_refused_by_numba_cuda():
    """Only the target-neutral intrinsics get a CUDA twin: numba's ``leading_zeros`` (whose
    place ``_ctlz`` took) stays untyped for CUDA."""
    from numba.cpython.unsafe.numbers import leading_zeros

    def kernel(i, out):
        out[0] = leading_zeros(i)

    with pytest.raises(Exception, match="leading_zeros|Untyped global"):
        target.compile_ptx(kernel, (numba.int64, numba.int64[::1]), "sm_80")
