"""The compiled (numba) backend gives the numpy reference's words, on every registered datapath.

Every datapath of every architecture runs the same raw words through both
backends: uniform random bit patterns, values near one (cancellation, carries
across the window), and edge cases (signed zeros, NaN, inf, subnormals, the
largest values) mixed into random rows.  Every D word must be equal, and where
the reference raises, the compiled path raises the same error.
"""

import warnings

import numpy as np
import pytest

import mmasim
from mmasim import backends
from mmasim.arith.decode import INF, decode_float
from mmasim.execution.model import Model
from mmasim.registry.build import get_registry

numba = pytest.importorskip("numba")

from wordgen import inputs as _inputs, seed, words as _words  # noqa: E402

def _run(model, backend, a, b, c, kw):
    try:
        return model.dot(a, b, c, backend=backend, **kw), None
    except Exception as exc:  # the reference's own refusal must be reproduced
        return None, type(exc)


def _models(arch):
    reg = get_registry()
    name = mmasim.registry.lookup.resolve_arch(reg, arch)
    return [Model(dp, reg) for dp in reg.architectures[name].datapaths]


# an architecture that inherits another one (Blackwell Ultra) has the same datapaths
# (tests/test_lookup_strict.py checks it); running them twice would test nothing new
@pytest.mark.parametrize("arch", [a for a in mmasim.architectures() if not get_registry().architectures[a].inherits])
def test_numba_backend_matches_numpy_on_every_datapath(arch):
    rng = np.random.default_rng(seed(arch))
    uncovered = []
    for model in _models(arch):
        if backends.kernel_for(model) is None:
            uncovered.append(f"{model.instruction}: {backends.kernel_coverage(model)}")
        for kind, a, b, c, kw in _inputs(model, rng):
            ref, ref_err = _run(model, "numpy", a, b, c, kw)
            got, got_err = _run(model, "numba", a, b, c, kw)
            assert ref_err == got_err, f"{arch} {model.instruction} {kind}: numpy raised {ref_err}, numba {got_err}"
            if ref_err is None:
                assert got.dtype == ref.dtype
                bad = np.flatnonzero(got != ref)
                assert bad.size == 0, (
                    f"{arch} {model.instruction} ({kind}): {bad.size} of {ref.size} words differ; first row {bad[0]}: "
                    f"numpy 0x{int(ref[bad[0]]):X} numba 0x{int(got[bad[0]]):X}"
                )
    if uncovered:
        warnings.warn(f"{arch}: computed by numpy under the numba backend: " + "; ".join(uncovered))


def test_matrix_form_matches_on_both_backends():
    rng = np.random.default_rng(1)
    for arch, ins, kw in (("Ampere", "m16n8k16.f32.f16.f16.f32", {}),
                          ("B200", "tcgen05.kind::mxf4nvf4.4X", {}),
                          ("B200", "tcgen05.mma.kind::tf32", {})):
        m = mmasim.MMA(arch, ins, **kw)
        M, N = min(m.legal_m), min(m.legal_n)       # one instruction
        A = _words(m.a_format, (M, m.k), rng, "mixed")
        B = _words(m.b_format, (m.k, N), rng, "mixed")
        C = _words(m.c_format, (M, N), rng, "mixed")
        skw = {}
        if m.datapath.scale:
            skw = dict(scale_a=_words(m.scale_format, (M, m.datapath.blocks), rng, "near_one"),
                       scale_b=_words(m.scale_format, (m.datapath.blocks, N), rng, "near_one"))
        ref = m(A, B, C, backend="numpy", **skw)
        for dt in (None, np.int64):
            args = (A, B, C) if dt is None else (A.astype(dt), B.astype(dt), C.astype(dt))
            got = m(*args, backend="numba", **skw)
            assert (got == ref).all() and got.shape == (M, N)


def test_broadcast_and_chunked_batches_match():
    m = mmasim.MMA("Ampere", "m16n8k16.f32.f16.f16.f32")
    rng = np.random.default_rng(2)
    a = _words(m.a_format, (3, 1, 16), rng, "near_one").astype(np.uint16)
    b = _words(m.b_format, (1, 5, 16), rng, "near_one").astype(np.uint16)
    c = _words(m.c_format, (5,), rng, "near_one")
    old = Model.CHUNK_ELEMENTS
    try:
        Model.CHUNK_ELEMENTS = 16 * 4   # four rows per chunk: chunk edges inside the batch
        ref = m.dot(a, b, c, backend="numpy")
        got = m.dot(a, b, c, backend="numba")
    finally:
        Model.CHUNK_ELEMENTS = old
    full = m.dot(np.broadcast_to(a, (3, 5, 16)).copy(), np.broadcast_to(b, (3, 5, 16)).copy(),
                 np.broadcast_to(c, (3, 5)).copy(), backend="numpy")
    assert ref.shape == got.shape == (3, 5)
    assert (ref == got).all() and (ref == full).all()


def test_backend_selection(monkeypatch):
    m = mmasim.MMA("B200", "tcgen05.mma.kind::tf32")
    assert backends.resolve("numpy") == "numpy"
    assert backends.resolve("auto") == "numba"
    monkeypatch.setenv("MMASIM_BACKEND", "numpy")
    assert backends.resolve(None) == "numpy"
    assert backends.get(m.backend).name == "numpy"
    assert backends.get("numba").name == "numba"
    with pytest.raises(mmasim.MMAError, match="unknown backend"):
        m.dot([0] * 8, [0] * 8, 0, backend="opencl")
    with pytest.raises(mmasim.MMAError, match="unknown backend"):
        mmasim.MMA("B200", "tcgen05.mma.kind::tf32", backend="fortran")
    m2 = mmasim.MMA("B200", "tcgen05.mma.kind::tf32", backend="numba")
    assert m2.backend == "numba" and backends.get(m2.backend).name == "numba"
    assert "window" in backends.compiled_families()


def test_word_range_errors_are_the_same_on_both_backends():
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    for backend in ("numpy", "numba"):
        with pytest.raises(mmasim.WordRangeError, match="4-bit container"):
            m.dot([16] * 64, [2] * 64, 0, scale_a=[0x38] * 4, scale_b=[0x38] * 4, backend=backend)
        with pytest.raises(mmasim.WordRangeError, match="non-negative"):
            m(np.full((128, 64), -1), np.full((64, 8), 2), np.zeros((128, 8), np.int64),
              scale_a=np.full((128, 4), 0x38), scale_b=np.full((4, 8), 0x38), backend=backend)


def test_numba_matches_numpy_with_special_scale_words():
    """Block scales drawn with edge cases too (NaN, zero, the largest, the smallest; A and B
    near one), not only near one: every dense block-scaled datapath, both backends, word for
    word, with rows whose D is finite and rows whose D is not."""
    checked = 0
    for arch in mmasim.architectures():
        if get_registry().architectures[arch].inherits:
            continue
        rng = np.random.default_rng(seed(arch + " scales"))
        for model in _models(arch):
            dp = model.datapath
            if not dp.scale or dp.sparse:
                continue
            R, K = 256, dp.k
            a = _words(model.a_format, (R, K), rng, "near_one")
            b = _words(model.b_format, (R, K), rng, "near_one")
            c = _words(model.c_format, (R,), rng, "near_one")
            kw = dict(scale_a=_words(model.scale_format, (R, K // dp.block), rng, "mixed"),
                      scale_b=_words(model.scale_format, (R, K // dp.block), rng, "mixed"))
            ref = model.dot(a, b, c, backend="numpy", **kw)
            got = model.dot(a, b, c, backend="numba", **kw)
            bad = np.flatnonzero(got != ref)
            assert bad.size == 0, f"{arch} {model.instruction}: {bad.size} of {ref.size} words differ"
            special = decode_float(model.d_format, ref.astype(np.uint64)).cls >= INF
            assert special.any() and not special.all(), f"{arch} {model.instruction}: no special or no finite D"
            checked += 1
    assert checked >= 8
