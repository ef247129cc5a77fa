"""tools/hardware/h200_run.sh (the one-command H200 run) and tools/hardware/unpack_h200.py, rehearsed
without a GPU: the stand-in program writes the words the device binary would have (--simulate), and
everything after it (reading D back, the vector files, the kept cases, the archive parts, unpacking,
``mmasim validate``) runs as on the device.  docs/harness.md, "Running on a lent H200"."""
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import numpy as np
import pytest

import mmasim
from mmasim.harness.measure import KINDS
from mmasim.vectors import files as vectors
from mmasim.vectors import validate as v

REPO = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = REPO / "tools" / "hardware" / "h200_run.sh"
UNPACK = REPO / "tools" / "hardware" / "unpack_h200.py"
# a float mma.sync (probes), an integer one (no probe ladders) and a sparse wgmma (four kernels:
# N = 8 and N = 256, A from shared memory and from registers; its N = 256 tiles are sampled)
INSTRUCTIONS = ["mma.sync.m16n8k16.f32.f16.f16", "mma.sync.m16n8k32.s32.s8.s8", "wgmma.mma_async.sp.k32.f32.f16.f16"]
MIN_CASES = 1000


def _load(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / "hardware" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


h200 = _load("h200_run")


def _path_without_nvidia_smi() -> str:
    return os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep)
                           if d and not (pathlib.Path(d) / "nvidia-smi").exists())


def _script(*args, env=None, timeout=240):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, **(env or {})), cwd=REPO)


# ------------------------------------------------------------------ refusals
def test_script_refuses_to_run_without_nvidia_smi_unless_simulate(tmp_path):
    r = _script("--out", str(tmp_path / "out"), env={"PATH": _path_without_nvidia_smi()})
    assert r.returncode == 2
    assert "no nvidia-smi" in r.stderr and "--simulate" in r.stderr
    assert not (tmp_path / "out").exists()            # refused before anything is written


def test_script_refuses_a_gpu_that_is_not_compute_capability_9_0(tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text("#!/bin/sh\necho 8.0\n")        # an A100 answers 8.0
    (fake / "nvidia-smi").chmod(0o755)
    r = _script("--out", str(tmp_path / "out"), env={"PATH": f"{fake}{os.pathsep}{_path_without_nvidia_smi()}"})
    assert r.returncode == 2 and "compute capability 8.0" in r.stderr and "9.0" in r.stderr


def test_script_refuses_to_run_without_an_output_folder():
    env = {k: v for k, v in os.environ.items() if k != "OUT"}
    r = subprocess.run(["bash", str(SCRIPT), "--simulate"], capture_output=True, text=True, env=env, cwd=REPO)
    assert r.returncode == 2 and "no output folder" in r.stderr


FAKE_SMI = r"""#!/bin/sh
case "$*" in
  *--query-gpu=compute_cap\ *) echo "9.0" ;;
  *--query-gpu=name,compute_cap,driver_version\ --format=csv,noheader*) echo "NVIDIA H200, 9.0, 570.86.15" ;;
  *--query-gpu=*) echo "name, compute_cap, driver_version"; echo "NVIDIA H200, 9.0, 570.86.15" ;;
  *) echo "Driver Version: 570.86.15    CUDA Version: 12.8" ;;
esac
"""


@pytest.mark.skipif(not _path_without_nvidia_smi() or shutil.which("nvidia-smi") is not None,
                    reason="a real GPU is here: the device path would run on it")
def test_on_a_gpu_that_cannot_run_the_kernels_the_script_stops_before_running_them_and_says_why(tmp_path):
    """The device path (no --simulate) up to the GPU, with an nvidia-smi that claims an H200 and no
    driver behind it: the kernels are built, the CUDA context holder finds that the GPU cannot run
    them, and the run stops there (exit 1) with the reason in the log and the summary."""
    from mmasim.harness import toolchain
    try:
        toolchain.find_nvcc("sm_90a")
    except toolchain.ToolchainError as exc:
        pytest.skip(str(exc))
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "nvidia-smi").write_text(FAKE_SMI)
    (fake / "nvidia-smi").chmod(0o755)
    r = _script("--install", "pythonpath", "--out", str(tmp_path / "out"), "--work", str(tmp_path / "work"),
                "--min-cases", "100", "--instructions", INSTRUCTIONS[0],
                env={"PATH": f"{fake}{os.pathsep}{os.environ['PATH']}",
                     "MMASIM_HARNESS_CACHE": str(toolchain.cache_dir())})
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "the GPU cannot run what this nvcc builds" in r.stdout
    s = json.loads((tmp_path / "out" / "h200_summary.json").read_text())
    assert s["device"]["name"] == "NVIDIA H200" and s["build"]["kernels"] == 1 and not s["build"]["failed"]
    assert "cannot run" in s["not_run"][INSTRUCTIONS[0]] and s["files"] == 0


# ------------------------------------------------------------------ what pack keeps
def test_kept_cases_sample_large_random_tiles_and_keep_every_probe_entry():
    # 2 random tiles of 16 entries, then 1 probe tile of 16 entries with 3 probes on its diagonal
    labels = ["uniform"] * 16 + ["near_one"] * 16 + ["cross"] * 16
    for i, lab in zip((0, 5, 10), ("p0", "p1", "p2")):
        labels[32 + i] = lab
    prov = {"random_tiles": 2, "random_cases": 32}
    keep, note = h200.keep_indices(prov, labels, 4, np.random.default_rng(0))
    first, second, probe = keep[:4], keep[4:8], keep[8:]
    assert (0 <= first).all() and (first < 16).all() and len(set(first)) == 4
    assert (16 <= second).all() and (second < 32).all() and len(set(second)) == 4
    assert {32, 37, 42} <= set(probe) and len(probe) == 6            # the 3 probes and 3 cross entries
    assert list(keep) == sorted(keep) and "14 of the 48 cases" in note
    whole, note = h200.keep_indices(prov, labels, 16, np.random.default_rng(0))
    assert list(whole[:32]) == list(range(32)) and len(whole) == 38     # tiles of at most 16 kept whole


def test_kept_cases_refuse_a_file_whose_counts_are_not_whole_tiles():
    with pytest.raises(ValueError, match="not 3 tiles"):
        h200.keep_indices({"random_tiles": 3, "random_cases": 32}, ["uniform"] * 32, 4, np.random.default_rng(0))


def test_plan_gives_every_word_kind_the_same_tiles_and_enough_kept_cases():
    entries = {e["instruction"]: e for e in h200.plan(INSTRUCTIONS, 10_000, 1024)}
    sync, wg = entries["mma.sync.m16n8k16.f32.f16.f16"], entries["wgmma.mma_async.sp.k32.f32.f16.f16"]
    assert sync["tiles"] == 84 and sync["random_cases_kept"] == 84 * 128        # 12 tiles of each of 7 kinds
    # wgmma: N = 8 (512 entries) and N = 256 (16,384, of which 1024 kept) tiles, A from smem and registers
    assert sorted((m, n) for _, m, n in wg["kernels"]) == [(64, 8), (64, 8), (64, 256), (64, 256)]
    assert wg["tiles"] == 7 and wg["random_cases_kept"] == 7 * (2 * 512 + 2 * 1024)
    assert [e["instruction"] for e in h200.plan(INSTRUCTIONS)][0].startswith("wgmma")   # thinnest evidence first


# ------------------------------------------------------------------ the rehearsal, end to end
@pytest.fixture(scope="module")
def rehearsal(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("h200")
    from mmasim.harness import toolchain
    # the kernels are built with the nvcc found here (skipped without one), into the usual cache
    env = {"PATH": _path_without_nvidia_smi(), "MMASIM_BACKEND": "numpy",
           "MMASIM_HARNESS_CACHE": str(toolchain.cache_dir())}
    r = _script("--simulate", "--install", "pythonpath", "--out", str(tmp / "out"), "--work", str(tmp / "work"),
                "--jobs", "2", "--min-cases", str(MIN_CASES), "--instructions", *INSTRUCTIONS, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return tmp, r


def test_rehearsal_writes_the_parts_the_log_and_the_summary(rehearsal):
    tmp, r = rehearsal
    names = sorted(p.name for p in (tmp / "out").iterdir())
    assert names == ["h200-hopper-vectors.part00.tar.xz", "h200_run.log", "h200_summary.json"]
    s = json.loads((tmp / "out" / "h200_summary.json").read_text())
    assert s["simulate"] is True and s["kernels"] == 6 and s["files"] == 6 and not s["not_run"]
    assert s["mismatches"] == 0 and not s["validate_errors"] and not s["instructions_below_min_cases"]
    assert {"install", "gpu", "generate", "build", "run", "pack", "total"} <= set(s["timings"])
    assert all(p["bytes"] < 16 * 2**20 for p in s["archive"])
    assert "== " in (tmp / "out" / "h200_run.log").read_text()                  # the steps, logged


def test_rehearsal_archive_unpacks_into_vector_files_that_validate(rehearsal, tmp_path):
    tmp, _ = rehearsal
    parts = sorted(str(p) for p in (tmp / "out").glob("*.tar.xz"))
    r = subprocess.run([sys.executable, str(UNPACK), *parts, "--dest", str(tmp_path / "hopper"), "--validate"],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stdout + r.stderr
    files = sorted((tmp_path / "hopper").glob("*.npz"))
    assert len(files) == 6 and (tmp_path / "hopper" / "MANIFEST.json").exists()
    results = v.validate([str(f) for f in files])
    assert v.summary(results)["ok"] and all(res.source == "simulated" and res.cases for res in results)
    random = {}
    for f in files:
        vf = vectors.load(f)
        prov = vf.provenance
        assert prov["target"] == "sm_90a" and prov["kernel"] and prov["archive"] == pathlib.Path(parts[0]).name
        assert prov["cases"] == len(vf) and isinstance(prov["seed"], int) and prov["device"]
        kinds = set(vf.labels) & set(KINDS)
        assert kinds == set(KINDS)                                              # every word kind measured
        random[vf.instruction] = random.get(vf.instruction, 0) + int(np.isin(vf.labels, KINDS).sum())
        if "s32" not in vf.instruction:
            assert (~np.isin(vf.labels, list(KINDS) + ["cross"])).sum() == prov["probe_cases"]   # every probe
        if "m64n256" in f.name:
            assert prov["measured_cases"] > prov["cases"] and "sampled to 1024" in prov["kept"]
    assert set(random) == set(INSTRUCTIONS) and min(random.values()) >= MIN_CASES


def test_rehearsal_words_are_the_dot_form_of_the_recorded_operands(rehearsal):
    """The archive's wgmma words went through placement, the stand-in binary's files and reading D
    back: each recorded case's D is the dot form of its recorded a, b, c and metadata."""
    tmp, _ = rehearsal
    part = next((tmp / "out").glob("*.tar.xz"))
    raw = tmp / "raw"
    raw.mkdir(exist_ok=True)
    with tarfile.open(part, "r:xz") as tar:
        for info in tar:
            if info.name.startswith("hopper/wgmma"):
                (raw / pathlib.PurePosixPath(info.name).name).write_bytes(tar.extractfile(info).read())
    files = sorted(raw.glob("wgmma*.npz"))
    assert len(files) == 4
    for f in files:
        vf = vectors.load(f)                                 # a member is a vector file as it stands
        m = mmasim.MMA("Hopper", vf.instruction)
        np.testing.assert_array_equal(m.dot(vf.a, vf.b, vf.c, sparse_metadata=vf.sparse_metadata), vf.d)


def test_unpack_refuses_simulated_files_under_vectors_hardware(rehearsal):
    tmp, _ = rehearsal
    dest = REPO / "vectors" / "hardware" / "hopper" / "h200-rehearsal-test"
    parts = [str(p) for p in (tmp / "out").glob("*.tar.xz")]
    r = subprocess.run([sys.executable, str(UNPACK), *parts, "--dest", str(dest)], capture_output=True, text=True,
                       cwd=REPO)
    try:
        assert r.returncode == 2 and "simulated" in r.stderr and "never go under vectors/hardware" in r.stderr
        assert not dest.exists()
    finally:
        shutil.rmtree(dest, ignore_errors=True)


def test_unpack_refuses_a_damaged_part_and_a_missing_one(rehearsal, tmp_path):
    tmp, _ = rehearsal
    part = next((tmp / "out").glob("*.tar.xz"))
    bad = tmp_path / part.name
    data = bytearray(part.read_bytes())
    data[len(data) // 2] ^= 0xFF
    bad.write_bytes(bytes(data))
    r = subprocess.run([sys.executable, str(UNPACK), str(bad), "--dest", str(tmp_path / "d")], capture_output=True,
                       text=True, cwd=REPO)
    assert r.returncode == 2 and "unpack_h200.py:" in r.stderr and not (tmp_path / "d").exists()


def test_unpack_max_random_keeps_every_probe_case_and_a_strided_share_of_the_random_ones(rehearsal, tmp_path):
    tmp, _ = rehearsal
    parts = [str(p) for p in (tmp / "out").glob("*.tar.xz")]
    unpack = _load("unpack_h200")
    written = unpack.unpack(parts, tmp_path / "small", max_random=100)
    full = unpack.unpack(parts, tmp_path / "full")
    for small_path, full_path in zip(sorted(written), sorted(full)):
        small, whole = vectors.load(small_path), vectors.load(full_path)
        is_random = np.isin(whole.labels, KINDS)
        assert np.isin(small.labels, KINDS).sum() <= 100
        assert (~np.isin(small.labels, KINDS)).sum() == (~is_random).sum()
        if is_random.sum() > 100:
            assert "random cases (every" in small.provenance["kept"]
