"""The second peer: Khattak and Mikaitis's MATLAB models run in GNU Octave with CPFloat
(tools/peer/khattak_octave.py, docs/peer-vectors.md), frozen where they agree with mmasim.
Every frozen word validates, the provenance names what ran, the classes their toolbox gets
wrong are absent, and each datapath they cover says so in its evidence."""

from __future__ import annotations

import importlib.util
import json
import pathlib

import ml_dtypes
import numpy as np
import pytest

from mmasim.vectors import files as vectors
from mmasim.registry.build import get_registry

REPO = pathlib.Path(__file__).resolve().parent.parent
ROOT = REPO / "vectors" / "peer"
FILES = sorted(ROOT.glob("*/khattak-octave.*.npz"))
KM_COMMIT = "b12b5a700957655375a1b0c1d0c26e76065da015"
CPFLOAT_COMMIT = "3583976741eb4d0e99b57d6d157ab6a7bbdb037f"
MI300_COMMIT = "b4bf135325e3d6ac811db245dd44650383eb0dd3"
FP8 = {"e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz"}


def _load_tool(name):
    spec = importlib.util.spec_from_file_location(name, REPO / "tools" / "peer" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_gpu_their_models_cover_has_files():
    archs = {vectors.load(p).arch for p in FILES}
    assert archs == {"V100", "A100", "Ada", "H100", "B200", "RTX PRO 6000", "MI100", "MI250X", "MI300X"}
    assert len(FILES) >= 70


def test_every_job_the_tool_freezes_has_its_file_and_no_other_file_exists():
    tool = _load_tool("khattak_octave")
    want = {tool.job_path(ROOT, j) for j in tool.JOBS if not j.compare_only}
    assert set(FILES) <= want
    # a job may freeze nothing only if the model failed or disagreed on every case; none does
    assert want == set(FILES), sorted(str(p.relative_to(ROOT)) for p in want - set(FILES))


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_frozen_words_agree_and_say_where_they_come_from(path):
    vf = vectors.load(path)
    prov = vf.provenance
    assert vf.source == "peer" and prov["device"] == "none" and vf.nan_policy == "any"
    assert prov["tool"].startswith("Khattak & Mikaitis MATLAB models in GNU Octave ")
    assert "with CPFloat " in prov["tool"] and prov["octave_version"] in prov["tool"]
    assert prov["km_commit"] == KM_COMMIT and prov["cpfloat_commit"] == CPFLOAT_COMMIT
    assert KM_COMMIT in prov["tool_version"] and CPFLOAT_COMMIT in prov["tool_version"]
    assert prov["generator"] == "tools/peer/khattak_octave.py" and (REPO / prov["generator"]).is_file()
    assert "10.1145/3830409" in prov["citation"] and "BSD 2-Clause" in prov["licence"]
    assert isinstance(prov["seed"], int) and prov["date"] and prov["model"].startswith(
        ("V100TC(", "A100TC(", "AdaTC(", "H100TC(", "B200TC(", "RTXPRO6000TC(", "MI100MC(", "MI250MC(", "MI300XMC("))
    if prov["model"].startswith("MI300XMC("):
        assert prov["mi300_commit"] == MI300_COMMIT
    assert len(vf) >= 200 and vf.labels is not None
    assert set(vf.labels) <= {"random", "wide", "cancel", "underflow", "special"}
    out = vectors.run_vector_file(vf)
    assert out.mismatches.size == 0, f"{out.mismatches.size} mismatches, first case {int(out.mismatches[0])}"


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_the_cases_their_toolbox_gets_wrong_are_absent(path):
    vf = vectors.load(path)
    m = vectors.model_for(vf)
    a, d = m.a_format.name, m.d_format.name
    # fp8 with an f16 D: neab = -10 leaves f16 no fraction bits (every result a power of two)
    assert not (a in FP8 and d == "f16")
    # bf16 subnormal inputs: CPFloat's bf16 preset flushes them before the model runs
    if a == "bf16":
        for w in (vf.a, vf.b):
            assert not (((w >> 7) & 0xFF == 0) & (w & 0x7F != 0)).any()
    # B200TCRN models no GPU; B200TC's fp8 model misses a third of their own B200 words
    assert "B200TCRN" not in vf.provenance["model"]
    assert not (vf.arch == "B200" and a in FP8)
    # NVIDIA zero results are +0 (the models' -0 is not a hardware word)
    if get_registry().architectures[m.arch].vendor == "NVIDIA":
        assert not (vf.d == (1 << (m.d_format.container_bits - 1))).any()
    assert "fp8 with an f16 D" in vf.meta["notes"] and "bf16 subnormal inputs" in vf.meta["notes"]


def test_each_covered_datapath_names_both_peers_in_its_evidence():
    for path in FILES:
        vf = vectors.load(path)
        st = vectors.model_for(vf).status
        assert "Khattak & Mikaitis's models" in st.evidence and "khattak-octave" in st.evidence, (vf.arch, vf.instruction)
        assert st.kind in ("hardware", "peer")


def test_the_generator_decodes_every_word_as_numpy_and_ml_dtypes_do():
    kc = _load_tool("khattak_cases")
    types = {"f16": (np.float16, np.uint16), "bf16": (ml_dtypes.bfloat16, np.uint16),
             "e4m3": (ml_dtypes.float8_e4m3fn, np.uint8), "e5m2": (ml_dtypes.float8_e5m2, np.uint8),
             "e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, np.uint8), "e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, np.uint8)}
    for fmt, (dtype, word) in types.items():
        w = np.arange(1 << (8 * np.dtype(word).itemsize), dtype=np.uint64)
        with np.errstate(invalid="ignore"):
            ref = w.astype(word).view(dtype).astype(np.float64)
        got = kc.decode(fmt, w)
        nan = np.isnan(ref)
        assert np.array_equal(nan, np.isnan(got)), fmt
        assert np.array_equal(ref[~nan], got[~nan]) and np.array_equal(np.signbit(ref[~nan]), np.signbit(got[~nan]))
    # the generator never writes a bf16 subnormal, and tf32 words keep bits 12:0 zero
    for a_fmt in ("bf16", "tf32"):
        g = kc.Words(a_fmt, "f32", 8, np.random.default_rng(1))
        wa, wb, _, labels = g.cases(400)
        if a_fmt == "bf16":
            assert not kc.has_subnormal("bf16", np.concatenate([wa, wb], axis=1)).any()
        else:
            assert not (wa & 0x1FFF).any() and not (wb & 0x1FFF).any()
        assert set(labels) == {"random", "wide", "cancel", "underflow", "special"}


def test_the_mma_sim_manifest_lists_only_mma_sim_files():
    manifest = json.loads((ROOT / "MANIFEST.json").read_text())
    assert manifest["tool"] == "MMA-Sim"
    assert not any(f["path"].split("/")[-1].startswith("khattak-octave.") for f in manifest["files"])
