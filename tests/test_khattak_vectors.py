"""Khattak and Mikaitis's measured words (KM, docs/datapaths.md "Sources"): 48 sets of 5,000 dot
products on V100, A100, A2, an Ada GPU, L40S, H100, H200 and B200, bundled by
tools/hardware/make_vectors_khattak.py, every word reproduced, every exercised datapath
labelled with what was measured."""

from __future__ import annotations

import collections
import pathlib

import numpy as np
import pytest

import mmasim
from mmasim.vectors import files as vectors

ROOT = pathlib.Path(__file__).resolve().parent.parent / "vectors" / "hardware"
FILES = sorted(ROOT.glob("*/khattak-mikaitis.*.npz"))
# GPU -> sets: (input types x D formats) the repository holds
EXPECTED = {"v100": 2, "a100": 4, "a2": 4, "ada": 8, "l40s": 6, "h100": 8, "h200": 8, "b200": 8}


def test_all_48_sets_of_240000_words_are_bundled():
    per_gpu = collections.Counter(p.name.split(".")[1] for p in FILES)
    assert dict(per_gpu) == EXPECTED
    assert sum(len(vectors.load(p)) for p in FILES) == 240_000


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_every_measured_word_is_reproduced_and_its_datapath_says_so(path):
    vf = vectors.load(path)
    prov = vf.provenance
    assert vf.source == "hardware" and prov["device"] and "10.1145/3830409" in prov["citation"]
    assert "BSD 2-Clause" in prov["licence"] and prov["tool_version"] == "b12b5a700957655375a1b0c1d0c26e76065da015"
    assert len(vf) == 5000 and vf.labels is not None
    k = vf.a.shape[1]
    assert 1 <= prov["nonzero_k"] <= k and not vf.a[:, prov["nonzero_k"]:].any()
    out = vectors.run_vector_file(vf)
    assert out.mismatches.size == 0, f"{out.mismatches.size} mismatches, first: {vf.labels[int(out.mismatches[0])]}"
    m = vectors.model_for(vf)
    assert m.status.kind == "hardware" and "Khattak & Mikaitis" in m.status.source
    gpu = vf.arch if vf.arch != "Ada" else "Ada GPU"
    assert gpu in m.status.device, (m.status.device, vf.arch)


def test_l40s_words_equal_the_ada_words_and_h200_fp8_f32_words_equal_h100s():
    # stated in the labels: the repository holds the same inputs and the same outputs for these GPUs
    for other in ROOT.glob("ada_lovelace/khattak-mikaitis.l40s.*.npz"):
        ada = vectors.load(other.with_name(other.name.replace(".l40s.", ".ada.")))
        l40 = vectors.load(other)
        assert np.array_equal(ada.d, l40.d) and np.array_equal(ada.a, l40.a)


def test_the_hopper_fp8_f32_sets_are_wgmma_not_the_mma_sync_lowering():
    # read with a zero C "for fp8 with WGMMA" (Validate_TC_models.m); the mma.sync lowering (two f16
    # HMMA steps) gives other words on most of them, wgmma's one F = 13 window gives every one
    vf = vectors.load(ROOT / "hopper" / "khattak-mikaitis.h100.wgmma.mma_async.k32.f32.e4m3.e4m3.hardware.npz")
    assert not vf.c.any()
    lowered = mmasim.MMA("H100", "mma.sync.m16n8k32.f32.e4m3.e4m3.f32").dot(vf.a, vf.b, vf.c, backend="numpy")
    assert (lowered.astype(np.uint64) != vf.d).sum() > 2500
    wg = mmasim.MMA("H100", vf.instruction).dot(vf.a, vf.b, vf.c, backend="numpy")
    assert np.array_equal(wg.astype(np.uint64), vf.d)


@pytest.mark.parametrize("name", ["A2", "A10", "A30", "A40", "RTX 3090", "L4", "L40", "L40S", "RTX 4090",
                                  "RTX 6000 Ada", "H100", "H200", "H200 NVL", "GH200", "B200", "GB200"])
def test_gpus_of_the_data_and_their_siblings_resolve(name):
    family = {"A2": "Ampere", "A10": "Ampere", "A30": "Ampere", "A40": "Ampere", "RTX 3090": "Ampere",
              "L4": "Ada Lovelace", "L40": "Ada Lovelace", "L40S": "Ada Lovelace", "RTX 4090": "Ada Lovelace",
              "RTX 6000 Ada": "Ada Lovelace", "H100": "Hopper", "H200": "Hopper", "H200 NVL": "Hopper",
              "GH200": "Hopper", "B200": "Blackwell", "GB200": "Blackwell"}[name]
    assert mmasim.MMA(name, "mma.sync.m16n8k16.f32.f16.f16").arch == family
