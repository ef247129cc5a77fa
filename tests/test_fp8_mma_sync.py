"""Kind-less fp8 mma.sync on Hopper and Blackwell (B200).

PTX ISA, mma: ``mma.sync.aligned.m16n8k16`` and ``.m16n8k32`` ``.row.col`` with
``.e4m3`` / ``.e5m2`` A and B (any pairing) and ``.f32`` D/C, or ``.f16`` D/C, need sm_89
or later -- so sm_90 (Hopper) and sm_100 (B200) have them; ``mma.sp`` /
``mma.sp::ordered_metadata`` ``.m16n8k64`` with the same A/B types and ``.f32`` D/C as well.

Neither chip has an fp8 mma.sync unit: ptxas emulates the instruction (docs/datapaths.md §3)
with two chained f16 HMMA steps from zero, the fp8 operands converted to f16 and the K
elements dealt to the steps in runs of 2, then one IEEE addition of C (FADD / HADD2).  The
rule is measured on H100 / H200 (f16 D) and B200 (Khattak and Mikaitis; the named facts are in
tests/test_fp8_mma_sync_emulated.py); the other forms carry it by analogy (``assumed``).  Here
every dense form is checked against that composition written out with single f16 mma.sync
calls of the same chip and numpy's IEEE additions.

The sparse forms keep a one-window model (Hopper: its wgmma fp8 window, F = 13; B200: RTX
Blackwell's F = 25), labelled assumed: how ptxas splits their selected elements between its
two HMMA.SP steps is not derived.
"""

import itertools

import ml_dtypes
import numpy as np
import pytest

import mmasim
from wordgen import seed, words

FP8 = ("e4m3", "e5m2")
DENSE = [(arch, k, d, a, b) for arch in ("H100", "B200") for k in (16, 32) for d in ("f32", "f16")
         for a, b in itertools.product(FP8, FP8)]
SPARSE = [(arch, variant, a, b) for arch in ("H100", "B200") for variant in ("sp", "sp::ordered_metadata")
          for a, b in itertools.product(FP8, FP8)]


def _dense(k, d, a, b):
    return f"mma.sync.aligned.m16n8k{k}.row.col.{d}.{a}.{b}.{d}"


def _one_window(arch, k, d, a, b):
    """The one-window model the sparse forms keep (see the module text)."""
    if arch == "H100":
        return mmasim.MMA("H100", f"wgmma.mma_async.sync.aligned.m64n8k32.{d}.{a}.{b}")
    return mmasim.MMA("RTX 5090", _dense(k, d, a, b))


_ML = {"e4m3": ml_dtypes.float8_e4m3fn, "e5m2": ml_dtypes.float8_e5m2}


def _f16_words(w, fmt):
    """fp8 words -> the f16 words of the same values (exact: F2FP.F16.E4M3 / E5M2.UNPACK_B)."""
    return np.asarray(w, dtype=np.uint8).view(_ML[fmt]).astype(np.float16).view(np.uint16)


def _lowered(arch, k, d, a, b, x, y, c):
    """ptxas's lowering written out: two f16 mma.sync steps of k/2 from +0 on the elements
    k % 4 in {0, 1}, then k % 4 in {2, 3}, then D + C by one IEEE addition in D's format."""
    step = mmasim.MMA(arch, f"mma.sync.aligned.m16n8k{k // 2}.row.col.{d}.f16.f16.{d}", backend="numpy")
    xs, ys = _f16_words(x, a), _f16_words(y, b)
    idx = np.arange(k)
    lo, hi = idx[idx % 4 < 2], idx[idx % 4 >= 2]
    d1 = step.dot(xs[:, lo], ys[:, lo], np.zeros(len(x), dtype=np.uint64))
    d2 = step.dot(xs[:, hi], ys[:, hi], d1)
    with np.errstate(all="ignore"):
        return _ieee_add(d, d2, c)


def _ieee_add(d, d2, c):
    if d == "f32":
        s = d2.view(np.float32) + np.asarray(c, dtype=np.uint32).view(np.float32)   # IEEE binary32 RNE
        s = np.where(np.isnan(s), np.uint32(0x7FFFFFFF).view(np.float32), s)
        return s.view(np.uint32)
    exact = d2.view(np.float16).astype(np.float64) + np.asarray(c, dtype=np.uint16).view(np.float16).astype(np.float64)
    s = exact.astype(np.float16)              # the f64 sum of two f16 values is exact: one rounding
    return np.where(np.isnan(s), np.uint16(0x7FFF), s.view(np.uint16))


@pytest.mark.parametrize("arch,k,d,a,b", DENSE)
def test_kindless_fp8_mma_sync_is_two_f16_steps_and_an_ieee_addition_of_c(arch, k, d, a, b):
    m = mmasim.MMA(arch, _dense(k, d, a, b), backend="numpy")
    rng = np.random.default_rng(seed("fp8-lowering" + arch + str(k) + d + a + b))
    rows = 256
    x = words(m.a_format, (rows, k), rng, "mixed")
    y = words(m.b_format, (rows, k), rng, "mixed")
    c = words(m.c_format, (rows,), rng, "mixed")
    assert np.array_equal(m.dot(x, y, c), _lowered(arch, k, d, a, b, x, y, c))
    assert m.plan.step == k // 2 and m.datapath.interleave == 2 and m.datapath.c_add == f"rne-{d}"


def test_fp8_mma_sync_evidence_names_the_lowering():
    for arch in ("H100", "B200"):
        assert "HMMA" in mmasim.MMA(arch, _dense(32, "f32", "e4m3", "e5m2")).status.evidence


@pytest.mark.parametrize("arch,k,d,a,b", DENSE)
def test_kindless_fp8_mma_sync_numpy_and_numba_backends_agree(arch, k, d, a, b):
    pytest.importorskip("numba")
    m = mmasim.MMA(arch, _dense(k, d, a, b))
    rng = np.random.default_rng(seed("fp8-backends" + arch + str(k) + d + a + b))
    rows = 16
    x = words(m.a_format, (rows, k), rng, "mixed")
    y = words(m.b_format, (rows, k), rng, "mixed")
    c = words(m.c_format, (rows,), rng, "mixed")
    assert np.array_equal(m.dot(x, y, c, backend="numpy"), m.dot(x, y, c, backend="numba"))


@pytest.mark.parametrize("arch,variant,a,b", SPARSE)
def test_kindless_fp8_mma_sp_resolves_by_its_ptx_spelling_on_a_one_window_model(arch, variant, a, b):
    m = mmasim.MMA(arch, f"mma.{variant}.sync.aligned.m16n8k64.row.col.f32.{a}.{b}.f32")
    one = _one_window(arch, 32, "f32", a, b)
    assert m.datapath.sparse and m.datapath.k == 64
    for attr in ("accumulator", "rounding", "params"):
        assert getattr(m.datapath, attr) == getattr(one.datapath, attr), attr
    assert m.plan.step == one.plan.step == 32
    assert m.status.kind == "assumed" and "not measured" in m.status.evidence


@pytest.mark.parametrize("arch,variant", [("H100", "sp"), ("B200", "sp::ordered_metadata")])
def test_kindless_fp8_mma_sp_with_f16_d_is_refused(arch, variant):
    # PTX spells the fp8 mma.sp only with .f32 D and C.
    with pytest.raises(mmasim.MMAError):
        mmasim.MMA(arch, f"mma.{variant}.sync.aligned.m16n8k64.row.col.f16.e4m3.e4m3.f16")
