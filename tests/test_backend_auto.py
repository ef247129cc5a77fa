"""``auto`` backend selection by the size of a call: a datapath's first small call is computed by
numpy without importing numba; a large call, or any call once the datapath's kernel is in use,
by numba; the words are the same either way."""

import subprocess
import sys

import numpy as np
import pytest

import mmasim
from mmasim import backends

AMPERE = ("A100", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")

SMALL_FIRST_CALL = """
import sys, numpy as np, mmasim
m = mmasim.MMA("A100", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
a = np.full((64, 16), 0x3C00, np.uint16)
assert int(m.dot(a, a, np.zeros(64, np.uint32))[0]) == 0x41800000      # 16 * 1.0
print("numba" in sys.modules)
"""


def _fresh(plan):
    """The plan as a new process has it: no kernel in use, no products counted."""
    backends.forget(plan)


def _run(code: str, backend: str) -> str:
    env = {"MMASIM_BACKEND": backend, "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_a_small_first_call_under_auto_does_not_import_numba():
    assert _run(SMALL_FIRST_CALL, "auto") == "False"


@pytest.mark.skipif(not backends.numba_available(), reason="needs numba (the [fast] extra)")
def test_numba_named_is_numba_even_for_a_small_call():
    assert _run(SMALL_FIRST_CALL, "numba") == "True"


def test_the_choice_follows_the_products_and_the_kernel_in_use(monkeypatch):
    monkeypatch.delenv(backends.ENV, raising=False)
    m = mmasim.MMA(*AMPERE)
    plan = m.plan
    _fresh(plan)
    small = backends.AUTO_MIN_PRODUCTS - 1
    assert backends.get(None, plan, small).name == "numpy"
    assert backends.get("numpy", plan, backends.AUTO_MIN_PRODUCTS).name == "numpy"
    if not backends.numba_available():
        assert backends.get(None, plan, backends.AUTO_MIN_PRODUCTS).name == "numpy"
        return
    assert backends.get("numba", plan, small).name == "numba"
    assert backends.get(None, plan, backends.AUTO_MIN_PRODUCTS).name == "numba"
    backends.kernel_for(plan)                            # the kernel is in use in this process
    assert backends.get(None, plan, small).name == "numba"


@pytest.mark.skipif(not backends.numba_available(), reason="needs numba (the [fast] extra)")
def test_a_call_at_the_threshold_gives_the_words_of_numpy(monkeypatch):
    monkeypatch.delenv(backends.ENV, raising=False)
    m = mmasim.MMA(*AMPERE)
    _fresh(m.plan)
    rows = backends.AUTO_MIN_PRODUCTS // m.k
    rng = np.random.default_rng(7)
    a = rng.integers(0, 0x7C00, (rows, m.k), dtype=np.uint16)      # finite f16 words of both signs
    a[::2] |= 0x8000
    b = rng.integers(0, 0x7C00, (rows, m.k), dtype=np.uint16)
    c = rng.integers(0, 0x7F800000, rows, dtype=np.uint32)
    want = m.dot(a, b, c, backend="numpy")
    got = m.dot(a, b, c)                                   # auto: this call takes the compiled kernel
    assert backends.kernel_in_use(m.plan)
    assert np.array_equal(got, want)


@pytest.mark.skipif(not backends.numba_available(), reason="needs numba (the [fast] extra)")
def test_a_gemm_chooses_once_by_its_whole_size(monkeypatch):
    # every K tile of one row block is a call of 64 * 64 * 16 products, far below the threshold;
    # the GEMM as a whole is 2^22 products: all of it takes the compiled kernel
    monkeypatch.delenv(backends.ENV, raising=False)
    m = mmasim.MMA(*AMPERE)
    _fresh(m.plan)
    M = N = 64
    K = backends.AUTO_MIN_PRODUCTS // (M * N)
    rng = np.random.default_rng(3)
    A = rng.integers(0, 0x7C00, (M, K), dtype=np.uint16)
    B = rng.integers(0, 0x7C00, (K, N), dtype=np.uint16)
    C = np.zeros((M, N), np.uint32)
    want = mmasim.gemm(A, B, C, model=m, backend="numpy", threads=1)
    assert not backends.kernel_in_use(m.plan)
    got = mmasim.gemm(A, B, C, model=m, threads=1)
    assert backends.kernel_in_use(m.plan)
    assert np.array_equal(got, want)
    small = mmasim.MMA("B200", "tcgen05.mma.kind::f16.f32.f16.f16")
    _fresh(small.plan)
    mmasim.gemm(A[:, :64], B[:64, :], C, model=small, threads=1)     # 2^18 products: numpy
    assert not backends.kernel_in_use(small.plan)


@pytest.mark.skipif(not backends.numba_available(), reason="needs numba (the [fast] extra)")
def test_small_calls_take_the_kernel_once_their_products_add_up(monkeypatch):
    monkeypatch.delenv(backends.ENV, raising=False)
    plan = mmasim.MMA(*AMPERE).plan
    _fresh(plan)
    quarter = backends.AUTO_MIN_PRODUCTS // 4
    assert [backends.get(None, plan, quarter).name for _ in range(5)] == ["numpy"] * 3 + ["numba"] * 2
