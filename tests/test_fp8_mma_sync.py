"""Kind-less fp8 mma.sync on Hopper and Blackwell (B200) (issue 12).

PTX ISA, mma: ``mma.sync.aligned.m16n8k16`` and ``.m16n8k32`` ``.row.col`` with
``.e4m3`` / ``.e5m2`` A and B (any pairing) and ``.f32`` D/C, or ``.f16`` D/C, need sm_89
or later -- so sm_90 (Hopper) and sm_100 (B200) have them; ``mma.sp`` /
``mma.sp::ordered_metadata`` ``.m16n8k64`` with the same A/B types and ``.f32`` D/C as well.

Neither device was measured on these instructions, so the arithmetic is by analogy and
labelled ``assumed`` (docs/datapaths.md §3):

- Hopper: its own ``wgmma.mma_async`` fp8 datapath (F = 13, RZ-E8M13 for f32 D, RNE-F16
  for f16 D), the closest validated fp8 datapath on the same chip.  One step of
  32 fp8 elements (L = 32 bytes) is the whole K of m16n8k32, so a row of mma.sync
  m16n8k32 and a row of wgmma m64nNk32 see the same words and must give the same D word.
- Blackwell mma.sync: RTX Blackwell's kind-less fp8 mma.sync (F = 25, L = 32 elements;
  peer-validated), the same F = 25 window as the B200's own f16 / bf16 / tf32 mma.sync.

The sparse twins' equality with the dense datapath on the masked vector, their metadata
rules and backend agreement are checked by tests/test_sparse_mma.py, which enumerates every
sparse mma.sync datapath of every architecture (these included).
"""

import itertools

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


def _analogue(arch, k, d, a, b):
    """The peer / measured datapath the new one is modelled on (see the module text)."""
    if arch == "H100":
        return mmasim.MMA("H100", f"wgmma.mma_async.sync.aligned.m64n8k32.{d}.{a}.{b}")
    return mmasim.MMA("RTX 5090", _dense(k, d, a, b))


@pytest.mark.parametrize("arch,k,d,a,b", DENSE)
def test_kindless_fp8_mma_sync_resolves_by_its_ptx_spelling_as_assumed(arch, k, d, a, b):
    m = mmasim.MMA(arch, _dense(k, d, a, b))
    dp = m.datapath
    assert (dp.op, dp.k, m.a_format.name, m.b_format.name, m.c_format.name, m.d_format.name) == \
        ("mma.sync", k, a, b, d, d)
    assert not dp.kind
    assert not dp.sparse
    assert m.status.kind == "assumed" and "not measured" in m.status.evidence


@pytest.mark.parametrize("arch,k,d,a,b", DENSE)
def test_kindless_fp8_mma_sync_parameters_equal_its_analogue(arch, k, d, a, b):
    m, peer = mmasim.MMA(arch, _dense(k, d, a, b)), _analogue(arch, k, d, a, b)
    assert peer.status.kind in ("peer", "hardware")
    for attr in ("accumulator", "rounding", "params"):
        assert getattr(m.datapath, attr) == getattr(peer.datapath, attr), attr
    assert m.plan.step == min(32, k)


def test_hopper_fp8_mma_sync_analogy_is_named_in_the_evidence():
    assert "wgmma" in mmasim.MMA("H100", _dense(32, "f32", "e4m3", "e4m3")).status.evidence
    assert "RTX Blackwell" in mmasim.MMA("B200", _dense(32, "f32", "e4m3", "e4m3")).status.evidence


@pytest.mark.parametrize("arch,d,a,b", [(arch, d, a, b) for arch in ("H100", "B200") for d in ("f32", "f16")
                                        for a, b in itertools.product(FP8, FP8)])
def test_kindless_fp8_m16n8k32_row_equals_the_analogue_row_on_the_same_words(arch, d, a, b):
    # One step of 32 elements on both sides: the same row words give the same D word.
    m = mmasim.MMA(arch, _dense(32, d, a, b), backend="numpy")
    peer = _analogue(arch, 32, d, a, b)
    peer.backend = "numpy"
    rng = np.random.default_rng(seed("fp8-analogue" + arch + d + a + b))
    rows = 64
    x = words(m.a_format, (rows, 32), rng, "mixed")
    y = words(m.b_format, (rows, 32), rng, "mixed")
    c = words(m.c_format, (rows,), rng, "mixed")
    assert np.array_equal(m.dot(x, y, c), peer.dot(x, y, c))


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
def test_kindless_fp8_mma_sp_resolves_by_its_ptx_spelling_on_the_dense_datapath(arch, variant, a, b):
    m = mmasim.MMA(arch, f"mma.{variant}.sync.aligned.m16n8k64.row.col.f32.{a}.{b}.f32")
    dense = mmasim.MMA(arch, _dense(32, "f32", a, b))
    assert m.datapath.sparse and m.datapath.k == 64
    for attr in ("accumulator", "rounding", "params"):
        assert getattr(m.datapath, attr) == getattr(dense.datapath, attr), attr
    assert m.plan.step == dense.plan.step == 32
    assert m.status.kind == "assumed" and "not measured" in m.status.evidence


@pytest.mark.parametrize("arch,variant", [("H100", "sp"), ("B200", "sp::ordered_metadata")])
def test_kindless_fp8_mma_sp_with_f16_d_is_refused(arch, variant):
    # PTX spells the fp8 mma.sp only with .f32 D and C.
    with pytest.raises(mmasim.MMAError):
        mmasim.MMA(arch, f"mma.{variant}.sync.aligned.m16n8k64.row.col.f16.e4m3.e4m3.f16")
