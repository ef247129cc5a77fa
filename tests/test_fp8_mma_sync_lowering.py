"""How ptxas lowers the kind-less fp8 mma.sync (docs/datapaths.md §3, "fp8 mma.sync on Hopper and
Blackwell"): the SASS is the evidence for the steps, their element split and the final addition.

Needs NVIDIA's ptxas (PyPI nvidia-cuda-nvcc) and cuobjdump with nvdisasm beside it (PyPI
nvidia-cuda-cuobjdump, nvidia-cuda-nvdisasm); CI installs them (.ci/run).
"""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sysconfig

import pytest

from mmasim.harness.toolchain import find_ptxas


def _cuobjdump():
    for root in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        for p in sorted((pathlib.Path(root) / "nvidia").glob("*/bin/cuobjdump")):
            return str(p)
    return shutil.which("cuobjdump")


CUOBJDUMP = _cuobjdump()
pytestmark = pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump not installed (pip install nvidia-cuda-cuobjdump)")

PTX = """.version 8.7
.target {target}
.address_size 64
.visible .entry k(.param .u64 p){{
 .reg .b32 %r<20>; .reg .f32 %f<10>; .reg .b64 %rd<4>;
 ld.param.u64 %rd1, [p];
 ld.global.v4.u32 {{%r0,%r1,%r2,%r3}}, [%rd1];
 ld.global.v2.u32 {{%r4,%r5}}, [%rd1+16];
 ld.global.v4.f32 {{%f4,%f5,%f6,%f7}}, [%rd1+32];
 ld.global.v2.u32 {{%r12,%r13}}, [%rd1+48];
 mma.sync.aligned.m16n8k{k}.row.col.{d}.{a}.{b}.{d} {dregs}, {aregs}, {bregs}, {cregs};
 {store}
 ret;
}}
"""


def _sass(tmp_path, target, k, d, a, b):
    aregs = "{%r0,%r1,%r2,%r3}" if k == 32 else "{%r0,%r1}"
    bregs = "{%r4,%r5}" if k == 32 else "{%r4}"
    if d == "f32":
        dregs, cregs = "{%f0,%f1,%f2,%f3}", "{%f4,%f5,%f6,%f7}"
        store = "st.global.v4.f32 [%rd1], {%f0,%f1,%f2,%f3};"
    else:
        dregs, cregs = "{%r10,%r11}", "{%r12,%r13}"
        store = "st.global.v2.u32 [%rd1], {%r10,%r11};"
    src = tmp_path / "k.ptx"
    src.write_text(PTX.format(target=target, k=k, d=d, a=a, b=b, aregs=aregs, bregs=bregs, dregs=dregs,
                              cregs=cregs, store=store))
    ptxas = find_ptxas(target)
    if ptxas is None:
        pytest.fail(f"no ptxas assembles for {target}")
    cubin = tmp_path / "k.cubin"
    subprocess.run([ptxas, f"-arch={target}", str(src), "-o", str(cubin)], check=True, capture_output=True)
    env = dict(os.environ, PATH=os.pathsep.join([str(pathlib.Path(CUOBJDUMP).parent), os.environ.get("PATH", "")]))
    out = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], check=True, capture_output=True, text=True, env=env).stdout
    return [m.group(1).strip() for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+([^;]+);", out)]


def _ops(sass, *prefixes):
    return [line.split()[0] for line in sass if line.startswith(prefixes)]


def _registers(line):
    return [r.strip() for r in line.split(None, 1)[1].split(",")]


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
@pytest.mark.parametrize("k, hmma", [(32, "HMMA.16816"), (16, "HMMA.1688")])
@pytest.mark.parametrize("d", ["f32", "f16"])
def test_ptxas_emulates_fp8_mma_sync_with_two_f16_hmma_steps_and_an_ieee_add_of_c(tmp_path, target, k, hmma, d):
    sass = _sass(tmp_path, target, k, d, "e4m3", "e5m2")
    assert not _ops(sass, "QMMA"), sass                       # no fp8 unit
    assert all(op.startswith(("F2FP.F16.E4M3.UNPACK_B", "F2FP.F16.E5M2.UNPACK_B")) for op in _ops(sass, "F2FP"))
    assert _ops(sass, "HMMA") == [f"{hmma}.{d.upper()}"] * 2  # two f16 steps, D's precision
    first, second = (line for line in sass if line.startswith("HMMA"))
    assert _registers(first)[3] == "RZ"                        # step 0 starts from zero
    assert _registers(second)[3] == _registers(first)[0]       # step 1 starts from step 0's D
    # step 0 reads the low half of each fp8 register (unpacked without .H1), step 1 the high half
    unpacked = {_registers(line)[0]: line.endswith(".H1") for line in sass if line.startswith("F2FP")}
    lo_regs = [r for r in unpacked if not unpacked[r]]
    assert _registers(first)[1].split(".")[0] in lo_regs and _registers(second)[1].split(".")[0] not in lo_regs
    add = "FADD" if d == "f32" else "HADD2"
    assert len(_ops(sass, add)) == (4 if d == "f32" else 2)   # C added after the steps, per register
    first_add = min(i for i, line in enumerate(sass) if line.startswith(add))
    assert first_add > max(i for i, line in enumerate(sass) if line.startswith("HMMA"))


def test_ada_and_rtx_blackwell_have_a_native_fp8_mma(tmp_path):
    for target in ("sm_89", "sm_120a"):
        sass = _sass(tmp_path, target, 32, "f32", "e4m3", "e4m3")
        assert _ops(sass, "QMMA") == ["QMMA.16832.F32.E4M3.E4M3"], (target, sass)
        assert not _ops(sass, "HMMA") and not _ops(sass, "FADD")
