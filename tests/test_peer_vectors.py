"""Differential tests: every frozen peer vector file, every word.

The files in vectors/peer come from two peers (docs/peer-vectors.md): MMA-Sim 2.1.1, through
tools/peer/generate_vectors.py in a separate venv with torch, and Khattak and Mikaitis's
MATLAB models in GNU Octave (``khattak-octave.*``, tools/peer/khattak_octave.py); this test
needs none of them.
"""

import pathlib

import pytest

from mmasim.vectors import files as vectors

ROOT = pathlib.Path(__file__).resolve().parent.parent / "vectors" / "peer"
FILES = sorted(ROOT.rglob("*.npz"))


def test_peer_vectors_are_bundled():
    assert len(FILES) >= 290


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_agrees_with_the_peer(path):
    vf = vectors.load(path)
    assert vf.source == "peer"
    out = vectors.run_vector_file(vf)
    if len(out.mismatches):
        i = int(out.mismatches[0])
        pytest.fail(
            f"{len(out.mismatches)}/{len(vf)} mismatches; first case {i}: a={[hex(int(x)) for x in vf.a[i]]} "
            f"b={[hex(int(x)) for x in vf.b[i]]} c={hex(int(vf.c[i]))} got {hex(int(out.got[i]))} "
            f"expected {hex(int(vf.d[i]))}"
        )
