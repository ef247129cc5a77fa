"""benchmarks/gpu.py, the prepared device script of the CUDA backend, dry-run in numba-cuda's
simulator (``--simulate``: every part at tiny sizes): one JSON and one log in the folder, every
family present in its row comparison and throughput, every word identical to the CPU backend's,
both GEMMs and the preset run, every attention mode's words the same, no part failed.  Needs numba-cuda and torch."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

import cuda_sim

from mmasim.backends.cuda import missing

pytest.importorskip("torch")

SCRIPT = pathlib.Path(__file__).resolve().parents[1] / "benchmarks" / "gpu.py"


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
def test_gpu_script_dry_run_under_the_simulator_writes_its_json_and_log(tmp_path):
    from mmasim.backends.cuda import rows

    env = {k: v for k, v in os.environ.items() if k not in ("MMASIM_BACKEND", "NUMBA_ENABLE_CUDASIM")}
    run = cuda_sim.RECORDER + (f"import runpy, sys\nsys.argv = [{str(SCRIPT)!r}, '--simulate', '--out', "
                               f"{str(tmp_path)!r}]\nrunpy.run_path({str(SCRIPT)!r}, run_name='__main__')\n")
    r = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, env=env, timeout=1500)
    assert r.returncode == 0, (r.stdout[-3000:], r.stderr[-3000:])
    cuda_sim.check_launches(r.stderr)           # what the H200 runs is what CI compiled and assembled
    assert sorted(p.name for p in tmp_path.iterdir()) == ["gpu.json", "gpu.log"]
    report = json.loads((tmp_path / "gpu.json").read_text())
    assert report["schema"] == "mmasim.gpu/1" and report["simulate"] is True
    assert "simulator" in report["machine"]["gpu"]
    parts = report["parts"]
    assert set(parts) == {"validate", "rows", "throughput", "gemm", "preset", "attention"}
    assert all(p["error"] is None and p["skipped"] == [] for p in parts.values()), {
        k: (p["error"], p["skipped"]) for k, p in parts.items()}
    assert parts["validate"]["result"]["ok"] and parts["validate"]["result"]["files"] >= 1
    found = parts["rows"]["result"]
    assert {rec["accumulator"] for rec in found.values()} == set(rows.BODIES)     # every family with a body
    assert any(rec["sparse"] for rec in found.values())
    assert all(rec["identical"] and rec["mismatches"] == 0 for rec in found.values()), found
    assert set(parts["throughput"]["result"]) == set(found)
    gemm = parts["gemm"]["result"]
    assert len(gemm) == 2 and all(runs and runs[0]["identical"] for runs in gemm.values()), gemm
    assert parts["preset"]["result"] and all(run["finite"] for run in parts["preset"]["result"])
    att = parts["attention"]["result"]
    assert att["ex2 differing words"] == 0 and att["ffma differing words"] == 0, att
    modes = {k: v for k, v in att.items() if isinstance(v, dict)}
    assert set(modes) == {"softmax", "fa3-fp8", "fa3-fp8-flash", "cudnn-mxfp8", "sage3-nvfp4"}
    assert all(v["differing words"] == 0 and v["words"] > 0 for v in modes.values()), modes
    assert "total" in (tmp_path / "gpu.log").read_text()
