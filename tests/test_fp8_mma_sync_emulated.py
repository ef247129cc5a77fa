"""fp8 mma.sync on Hopper and Blackwell (sm_90, sm_100) is emulated by ptxas (docs/datapaths.md §3).

The fp8 operands are converted to f16 (exact), two chained f16 HMMAs start from +0 and take the
K elements in runs of 2 (step 0: k % 4 in {0, 1}; step 1: k % 4 in {2, 3}), and FADD / HADD2 adds
C last, one IEEE addition rounded to nearest even.  Measured: Khattak and Mikaitis's H100 / H200
(f16 D) and B200 (f32 and f16 D) words (vectors/hardware/*/khattak-mikaitis.*); the expected
words below are worked by hand from that rule.
"""

from __future__ import annotations

import numpy as np
import pytest

import mmasim
from mmasim.vectors import files as vectors
from mmasim.errors import TableError
from mmasim.registry.tables import build_architecture

E4M3_ONE, E4M3_16, E4M3_M16 = 0x38, 0x58, 0xD8      # 1.0, 16.0, -16.0
E4M3_2M5, E4M3_2M9 = 0x10, 0x01                     # 2^-5 (normal), 2^-9 (smallest subnormal)
BACKENDS = ["numpy"] + (["numba"] if mmasim.backends.numba_available() else [])


def _row(pairs, k=32):
    a, b = np.zeros(k, dtype=np.uint8), np.zeros(k, dtype=np.uint8)
    for i, (x, y) in pairs.items():
        a[i], b[i] = x, y
    return a, b


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arch", ["H100", "H200", "B200"])
def test_c_is_added_after_the_steps_by_one_round_to_nearest_even_f16_addition(arch, backend):
    # C = 2048 (f16 0x6800), products 1 and 2^-10 in step 0.  The steps keep 1 + 2^-10 exactly
    # (an f16 value); HADD2: 2048 + 1.0009765625 lies above the tie 2049, so it rounds up to
    # 2050 (0x6801).  One window with C inside (F = 13 or 25 below C's 2^11) would drop 2^-10,
    # land on the tie 2049 and round to even, 2048.
    m = mmasim.MMA(arch, "mma.sync.m16n8k32.f16.e4m3.e4m3.f16")
    a, b = _row({0: (E4M3_ONE, E4M3_ONE), 1: (E4M3_2M5, E4M3_2M5)})
    assert int(m.dot(a, b, 0x6800, backend=backend)) == 0x6801


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arch", ["H100", "B200"])
def test_the_steps_take_k_in_runs_of_two(arch, backend):
    # 256 (k = 0) and -256 (k = 1) cancel in step 0; 2^-18 (k = 2) is step 1's only product,
    # on C = +0: D = 2^-18 = 0x36800000.  Contiguous halves (k 0..15 in step 0) would put 2^-18
    # in the window of 256, whose F = 25 bits stop at 2^-17: D = +0.
    m = mmasim.MMA(arch, "mma.sync.m16n8k32.f32.e4m3.e4m3.f32")
    a, b = _row({0: (E4M3_16, E4M3_16), 1: (E4M3_M16, E4M3_16), 2: (E4M3_2M9, E4M3_2M9)})
    assert int(m.dot(a, b, 0, backend=backend)) == 0x36800000
    # the same products with 2^-18 at k = 16 (step 0 again): truncated, +0
    a, b = _row({0: (E4M3_16, E4M3_16), 1: (E4M3_M16, E4M3_16), 16: (E4M3_2M9, E4M3_2M9)})
    assert int(m.dot(a, b, 0, backend=backend)) == 0


@pytest.mark.parametrize("arch", ["H100", "B200"])
def test_each_step_is_the_f16_hmma_window_not_the_fp8_one(arch):
    # 1 + 2^-14 (products 1 and 2^-7 * 2^-7) is exact in an F = 25 window and in f32:
    # 0x3F800200.  Hopper's wgmma fp8 window (F = 13, RZ-E8M13) keeps 13 bits: 1.0.
    m = mmasim.MMA(arch, "mma.sync.m16n8k32.f32.e4m3.e4m3.f32")
    a, b = _row({0: (E4M3_ONE, E4M3_ONE), 1: (0x04, 0x04)})
    assert int(m.dot(a, b, 0)) == 0x3F800200
    if arch == "H100":
        w = mmasim.MMA(arch, "wgmma.mma_async.k32.f32.e4m3.e4m3")
        assert int(w.dot(a, b, 0)) == 0x3F800000


def test_k16_form_takes_k_in_runs_of_two_over_two_hmma_1688_steps():
    # K = 16: two HMMA.1688 steps of 8 (step 0: k % 4 in {0, 1}).  As in the K = 32 test:
    # 256 - 256 in step 0, 2^-18 alone in step 1 -> 2^-18.
    m = mmasim.MMA("H100", "mma.sync.m16n8k16.f32.e4m3.e4m3.f32")
    a, b = _row({0: (E4M3_16, E4M3_16), 1: (E4M3_M16, E4M3_16), 2: (E4M3_2M9, E4M3_2M9)}, k=16)
    assert int(m.dot(a, b, 0)) == 0x36800000


@pytest.mark.parametrize("backend", BACKENDS)
def test_special_values_through_the_final_addition(backend):
    m = mmasim.MMA("B200", "mma.sync.m16n8k32.f32.e4m3.e5m2.f32")
    a, b = _row({0: (E4M3_ONE, 0x3C)})                   # 1.0 x 1.0 (e5m2 0x3C)
    # C = -inf: -inf; C = NaN (non-canonical payload): the canonical NaN; C = -1: 1 + -1 = +0
    got = m.dot(np.stack([a] * 3), np.stack([b] * 3), np.array([0xFF800000, 0x7FC00001, 0xBF800000]),
                backend=backend)
    assert [int(x) for x in got] == [0xFF800000, 0x7FFFFFFF, 0x00000000]
    # +inf (e5m2 0x7C) in step 1 and C = -inf: inf - inf = NaN
    a, b = _row({2: (E4M3_ONE, 0x7C)})
    assert int(m.dot(a, b, 0xFF800000, backend=backend)) == 0x7FFFFFFF


def test_explain_states_the_steps_and_the_final_addition():
    text = mmasim.MMA("H100", "mma.sync.m16n8k32.f16.e4m3.e4m3.f16").describe()
    assert "steps: 2 x 16 elements" in text and "runs of 2" in text
    assert "added after the steps" in text and "rne-f16" in text


@pytest.mark.parametrize("arch, rel, cases, words", [
    # the one-window models mmasim used before (C inside one F = 13 / F = 25 window) gave
    # 0x446b 0xc22e 0x39dd and 0x4096153b 0x3f8b5bc6 0xc03bc44a here: one unit low in the last place
    ("H100", "hopper/khattak-mikaitis.h100.mma.sync.m16n8k32.f16.e4m3.e4m3.f16.hardware.npz",
     [0, 1, 2], [0x446C, 0xC22D, 0x39DE]),
    ("B200", "blackwell/khattak-mikaitis.b200.mma.sync.m16n8k32.f32.e4m3.e4m3.f32.hardware.npz",
     [0, 2, 5], [0x4096153C, 0x3F8B5BC7, 0xC03BC44B]),
])
def test_measured_words_where_one_window_and_the_lowering_differ(arch, rel, cases, words):
    vf = vectors.load(vectors.bundled_root() / "hardware" / rel)
    assert [int(vf.d[i]) for i in cases] == words          # the hardware words, as measured
    m = mmasim.MMA(arch, vf.instruction)
    got = m.dot(vf.a[cases], vf.b[cases], vf.c[cases], backend="numpy")
    assert [int(x) for x in got] == words


def _table(**extra):
    row = {"a": "f16", "b": "f16", "d": "f32", "k": 16, "chunk": 8, "params": {"F": 25, "zeros": -133}}
    row.update(extra)
    return {"architecture": {"name": "Toy", "vendor": "x", "description": "x"},
            "defaults": {"op": "mma.sync", "accumulator": "window", "rounding": "rz-f32",
                         "status": {"kind": "assumed", "evidence": "toy"}},
            "datapath": [row]}


def test_table_interleave_must_deal_k_evenly_and_c_add_must_be_rne_in_d():
    from mmasim.registry.build import _check_references, get_registry
    reg = get_registry()
    ok = build_architecture(_table(interleave=2, c_add="rne-f32")).datapaths[0]
    _check_references(reg, ok, "toy")
    assert ok.step_order == (0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15)
    with pytest.raises(TableError, match="interleave"):
        _check_references(reg, build_architecture(_table(interleave=3)).datapaths[0], "toy")
    with pytest.raises(TableError, match="c_add"):
        _check_references(reg, build_architecture(_table(c_add="rz-f32")).datapaths[0], "toy")
    with pytest.raises(TableError, match="c_add"):
        _check_references(reg, build_architecture(_table(c_add="rne-f16")).datapaths[0], "toy")
