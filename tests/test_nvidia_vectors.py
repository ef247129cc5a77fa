"""The NVIDIA hardware-fact vector files (T2), every word.

vectors/hardware/{turing,ampere,rtx_blackwell} were written by
tools/hardware/make_vectors_nvidia.py from the T2 measurements (docs/datapaths.md, sources), by
exact rational arithmetic written independently of mmasim.
"""

import pathlib
import subprocess
import sys

import numpy as np
import pytest

from mmasim.vectors import files as vectors

ROOT = pathlib.Path(__file__).resolve().parent.parent / "vectors" / "hardware"
GEN = ROOT.parent.parent / "tools" / "hardware" / "make_vectors_nvidia.py"
FILES = sorted(p for folder in ("turing", "ampere", "rtx_blackwell") for p in (ROOT / folder).glob("*.npz")
               if not p.name.startswith("khattak-mikaitis."))   # T2 facts (the other source: test_khattak_vectors.py)


def test_nvidia_hardware_vectors_are_bundled():
    assert len(FILES) >= 27


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_agrees_with_the_t2_measurements(path):
    vf = vectors.load(path)
    assert vf.source in ("hardware", "hand-derived")
    assert "T2" in vf.provenance["citation"] and vf.provenance["device"]
    out = vectors.run_vector_file(vf)
    if len(out.mismatches):
        i = int(out.mismatches[0])
        pytest.fail(f"{len(out.mismatches)}/{len(vf)} mismatches; first: {vf.labels[i]}: got "
                    f"{hex(int(out.got[i]))} expected {hex(int(vf.d[i]))}")


def test_generator_reproduces_the_committed_files():
    r = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_turing_vectors_tell_F23_from_F24():
    # the generator labels the cases where F = 24 would give another word
    for path in (ROOT / "turing").glob("*.f23.hand-derived.npz"):
        labels = vectors.load(path).labels
        assert sum("F=24 differs" in str(x) for x in labels) >= 10, path.name


def test_e2m1_vectors_have_random_low_padding_bits():
    # most e2m1 bytes carry nonzero bits 1:0, so the PTX reading (bits 5:2) would disagree
    for path in (ROOT / "rtx_blackwell").glob("*e2m1*random-padding*.npz"):
        vf = vectors.load(path)
        parts = vf.instruction.split(".")
        words = vf.a if parts[3] == "e2m1" else vf.b
        assert np.mean((words & 3) != 0) > 0.6, path.name
