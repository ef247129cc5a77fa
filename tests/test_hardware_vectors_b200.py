"""The B200 hardware facts (T1, docs/datapaths.md section 6) as bundled vector files,
and a few of them checked directly, one test per fact, with the words the facts state."""

import ast
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import mmasim
from mmasim.vectors import files as vectors

ROOT = pathlib.Path(__file__).resolve().parent.parent
DIR = ROOT / "vectors" / "hardware" / "blackwell"
GEN = ROOT / "tools" / "hardware" / "make_vectors_b200.py"
FILES = sorted(p for p in DIR.glob("*.npz") if not p.name.startswith("khattak-mikaitis."))  # T1 facts only
ONE = 0x3F800000


def test_the_facts_are_bundled():
    names = {p.name for p in FILES}
    for want in ("tf32-probe-ladder.hardware.npz", "nvfp4.grouping.hand-derived.npz",
                 "sparse.tf32.masked-dense.hand-derived.npz", "mxf8f6f4.e4m3.e4m3.specials.hardware.npz",
                 "i8.s8.s8.wrap.hand-derived.npz", "i8.s8.s8.saturate.hand-derived.npz"):
        assert want in names


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_file_has_provenance_labels_and_zero_mismatches(path):
    vf = vectors.load(path)
    prov = vf.provenance
    assert vf.source == path.name.split(".")[-2]          # <topic>.<source>.npz
    for key in ("source", "device", "tool", "date", "generator", "citation"):
        assert prov.get(key), key
    assert vf.labels is not None and len(vf.labels) == len(vf) and all(str(x) for x in vf.labels)
    out = vectors.run_vector_file(vf)
    assert out.mismatches.size == 0, [str(vf.labels[i]) for i in out.mismatches]


def test_generator_reproduces_the_committed_files():
    r = subprocess.run([sys.executable, str(GEN), "--check"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_generator_never_calls_the_simulator():
    """Neither the generator nor its exact arithmetic (b200_exact.py) imports more of mmasim than
    the file format."""
    imported = set()
    for node in (n for f in (GEN, GEN.with_name("b200_exact.py")) for n in ast.walk(ast.parse(f.read_text()))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mmasim"):
            imported |= {f"{node.module}.{a.name}" for a in node.names}
        if isinstance(node, ast.Import):
            imported |= {a.name for a in node.names if a.name.startswith("mmasim")}
    assert imported == {"mmasim.vectors.files.save"}


# ------------------------------------------------------------- facts, directly
@pytest.fixture(scope="module")
def tf32():
    return mmasim.MMA("B200", "tcgen05.mma.kind::tf32")


def _dot(m, a, b, c):
    k = m.k
    return int(m.dot(list(a) + [0] * (k - len(a)), list(b) + [0] * (k - len(b)), c))


def test_tf32_bits_0_to_12_of_a_and_b_are_ignored(tf32):
    assert _dot(tf32, [ONE | 0x1FFF], [ONE | 0x1FFF], 0) == ONE


def test_tf32_one_plus_2m23_is_visible_and_2m24_is_not(tf32):
    assert _dot(tf32, [0x34000000], [ONE], ONE) == 0x3F800001     # 2^-23
    assert _dot(tf32, [0x33800000], [ONE], ONE) == ONE            # 2^-24


def test_tf32_minus_one_plus_one_plus_2m25_survives_exactly(tf32):
    assert _dot(tf32, [0xBF800000, ONE, 0x33000000], [ONE] * 3, 0) == 0x33000000


def test_tf32_fractional_ulps_around_c_are_truncated(tf32):
    for frac in (0x33000000, 0x33800000, 0x33C00000):   # 0.25, 0.5, 0.75 ulp of 1
        assert _dot(tf32, [frac], [ONE], ONE) == ONE


def test_tf32_nan_is_canonical_and_0_times_inf_and_inf_minus_inf_give_nan(tf32):
    assert _dot(tf32, [0xFFC12000], [ONE], 0) == 0x7FFFFFFF
    assert _dot(tf32, [0], [0x7F800000], 0) == 0x7FFFFFFF
    assert _dot(tf32, [0x7F800000, 0xFF800000], [ONE, ONE], 0) == 0x7FFFFFFF


def test_tf32_underflow_and_cancellation_give_plus_zero(tf32):
    assert _dot(tf32, [0x8D800000], [0x0D800000], 0) == 0        # -2^-100 * 2^-100
    assert _dot(tf32, [0xBF800000, ONE], [ONE, ONE], 0x80000000) == 0


def test_tf32_nan_with_payload_only_in_the_low_13_bits_reads_as_inf(tf32):
    assert _dot(tf32, [0x7F800001], [ONE], 0) == 0x7F800000
    assert _dot(tf32, [0xFF801FFF], [ONE], 0) == 0xFF800000


def test_block_scaled_all_zero_with_c_minus_zero_gives_plus_zero():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e4m3.e4m3.ue8m0")
    assert int(m.dot([0] * 32, [0x38] * 32, 0x80000000, scale_a=[127], scale_b=[127])) == 0


def test_block_scaled_nan_scale_gives_canonical_nan():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e4m3.e4m3.ue8m0")
    assert int(m.dot([0x38] * 32, [0x38] * 32, 0, scale_a=[0xFF], scale_b=[127])) == 0x7FFFFFFF


def test_nvfp4_groups_of_four_products_are_summed_before_truncation():
    # docs/datapaths.md section 6: +6*6 and -6*6 with scales 448 x 448 set the quantum to
    # 2^max(20-39, 16-35) = 2^-19 and cancel; four products 0.5*0.5*2^-9*2^-9 = 2^-20
    # (half a quantum each) in one aligned group of 4 sum to 2^-18 = 2 quanta.
    # Truncating each product alone would give +0.
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    a = [0x6, 0xE] + [0] * 14 + [0x1] * 4 + [0] * 44
    b = [0x6] * 16 + [0x1] * 4 + [0] * 44
    s = [0x7E, 0x01, 0x38, 0x38]                       # 448, 2^-9, 1, 1
    assert int(m.dot(a, b, 0, scale_a=s, scale_b=s)) == 0x36800000   # 2^-18
    # one half-quantum product per group of 4: every group truncates to 0
    a = [0x6, 0xE] + [0] * 14 + [0x1, 0, 0, 0] * 4 + [0] * 32
    b = [0x6] * 16 + [0x1, 0, 0, 0] * 4 + [0] * 32
    assert int(m.dot(a, b, 0, scale_a=s, scale_b=s)) == 0


def test_sparse_nan_in_an_unselected_lane_does_not_poison_the_result():
    m = mmasim.MMA("B200", "tcgen05.mma.sp.kind::tf32")
    a = [ONE, 0x7FC00000] * 8
    b = [ONE, ONE] * 8
    assert int(m.dot(a, b, 0, sparse_metadata=[0x44444444])) == 0x41000000   # 8.0
    assert int(m.dot(a, b, 0, sparse_metadata=[0xEEEEEEE4])) == 0x7FFFFFFF   # NaN selected


def test_i8_wrap_and_saturate():
    wrap = mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.s8")
    sat = mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.s8.satfinite")
    a = [1] + [0] * 31
    assert int(wrap.dot(a, a, 0x7FFFFFFF)) == 0x80000000
    assert int(sat.dot(a, a, 0x7FFFFFFF)) == 0x7FFFFFFF
