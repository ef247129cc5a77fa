"""tools/hardware/device_session.sh, the one command of a session lent an H200 (issue 35's
measurement and benchmarks/gpu.py in one budget), rehearsed without a GPU (--simulate): both steps
run, the second against the first's install, and what comes back fits what the lent machine
returns (at most 8 files, named in letters, digits, '.', '_' and '-', no more than 2 folders down)."""

from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys
import tarfile

import pytest

from mmasim.backends.cuda import missing

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "hardware" / "device_session.sh"


def test_device_session_refuses_without_an_output_folder_or_with_too_small_a_budget(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    r = subprocess.run(["bash", str(SCRIPT), "--simulate"], capture_output=True, text=True, env=env, cwd=REPO)
    assert r.returncode == 2 and "no output folder" in r.stderr
    r = subprocess.run(["bash", str(SCRIPT), "--simulate", "--out", str(tmp_path), "--budget", "60"],
                       capture_output=True, text=True, env=env, cwd=REPO)
    assert r.returncode == 2 and "at least 120 s" in r.stderr


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
def test_device_session_rehearsal_packs_both_steps_into_what_the_machine_returns(tmp_path):
    pytest.importorskip("torch")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k not in ("MMASIM_BACKEND", "NUMBA_ENABLE_CUDASIM", "OUT")}
    env["PYTHON"] = sys.executable
    r = subprocess.run(["bash", str(SCRIPT), "--simulate", "--out", str(out), "--budget", "300",
                        "--gpu-parts", "preset,attention", "--install", "pythonpath",
                        "--instructions", "mma.sync.m16n8k16.f32.f16.f16", "--min-cases", "100"],
                       capture_output=True, text=True, env=env, cwd=REPO, timeout=1200)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    files = sorted(p.name for p in out.iterdir())
    assert files == ["h200-hopper-vectors.part00.tar.xz", "h200_summary.json", "session.tar.xz"]
    assert len(files) <= 8 and all(re.fullmatch(r"[A-Za-z0-9._-]+", f) for f in files)
    assert json.loads((out / "h200_summary.json").read_text())["files"] == 1
    with tarfile.open(out / "session.tar.xz") as tar:
        names = set(tar.getnames())
        assert {"session/h200_run.log", "session/gpu/gpu.json", "session/gpu/gpu.log",
                "session/device_session.log"} <= names
        report = json.load(tar.extractfile("session/gpu/gpu.json"))
    assert set(report["parts"]) == {"preset", "attention"}
    assert all(p["error"] is None for p in report["parts"].values()), report["parts"]
    # gpu.py's parts shared what h200_run.sh left of the 300 s, less 20 s
    assert 200 < sum(report["budget s"].values()) < 280
