"""mmasim.gemm on dask arrays: a blockwise graph over (M, N) blocks, each chaining its K
tiles as the in-process gemm does, so the words are the in-process words on any
scheduler (every D element depends only on its row of A, its column of B and its C)."""

import numpy as np
import pytest

import mmasim
from helpers import f16, f32
from wordgen import gemm_operands, seed

da = pytest.importorskip("dask.array", reason="dask is not installed (pip install 'mmasim-exact[dask]')")

AMPERE = ("Ampere", "m16n8k16.f32.f16.f16.f32")
NVFP4 = ("B200", "tcgen05.kind::mxf4nvf4.4X")
SPARSE = ("Ampere", "mma.sync.sp.m16n8k32.f32.f16.f16")


def _operands(model, M, N, tiles, name, kind="mixed"):
    rng = np.random.default_rng(seed(name))
    return gemm_operands(model, M, N, tiles, rng, kind)


def _chunked(A, B, C, kw, mc, nc, kc):
    dA = da.from_array(A, chunks=(mc, kc))
    dB = da.from_array(B, chunks=(kc, nc))
    dC = da.from_array(C, chunks=(mc, nc))
    dkw = {key: da.from_array(v, chunks=(mc if key != "scale_b" else 1, nc if key == "scale_b" else 1))
           for key, v in kw.items()}
    return dA, dB, dC, dkw


@pytest.mark.parametrize("spec, M, N, mc, nc", [
    (AMPERE, 64, 48, 32, 16),
    (NVFP4, 256, 32, 128, 16),
    (SPARSE, 48, 24, 16, 8),
])
def test_dask_gemm_equals_in_process_gemm_on_the_threaded_scheduler(spec, M, N, mc, nc):
    m = mmasim.MMA(*spec)
    A, B, C, kw = _operands(m, M, N, 4, "dask " + spec[1])
    want = mmasim.gemm(A, B, C, model=m, threads=1, **kw)
    dA, dB, dC, dkw = _chunked(A, B, C, kw, mc, nc, m.k * 2 + (1 if m.k > 1 else 0))
    lazy = mmasim.gemm(dA, dB, dC, model=m, **dkw)
    assert isinstance(lazy, da.Array)
    assert lazy.numblocks == (M // mc, N // nc) and lazy.dtype == want.dtype
    got = lazy.compute(scheduler="threads")
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_dask_gemm_keeps_the_k_order():
    m = mmasim.MMA(*AMPERE)
    A, B, C, kw = _operands(m, 32, 16, 3, "k order", kind="near_one")
    dA, dB, dC, _ = _chunked(A, B, C, kw, 16, 8, 16)
    for order in ("reverse", [2, 0, 1]):
        got = mmasim.gemm(dA, dB, dC, *AMPERE, k_order=order).compute(scheduler="threads")
        assert np.array_equal(got, mmasim.gemm(A, B, C, *AMPERE, k_order=order))


def test_the_order_of_k_tiles_shows_in_dask_results():
    # K tile 0: sixteen products 2^20 (sum 2^24); K tile 1: sixteen products 0.5 (sum 8). Forward, the
    # 2^24 already in C sets the window and truncates each 0.5 away; reverse keeps 2^24 + 8.
    m = mmasim.MMA(*AMPERE)
    A = np.zeros((16, 32), np.uint16)
    A[:, :16], A[:, 16:] = f16(1024.0), f16(1.0)
    B = np.zeros((32, 8), np.uint16)
    B[:16], B[16:] = f16(1024.0), f16(0.5)
    C = np.zeros((16, 8), np.uint32)
    dA, dB, dC = da.from_array(A, chunks=(16, 16)), da.from_array(B, chunks=(16, 8)), da.from_array(C)
    fwd = mmasim.gemm(dA, dB, dC, model=m).compute()
    rev = mmasim.gemm(dA, dB, dC, model=m, k_order="reverse").compute()
    assert (fwd == f32(2.0 ** 24)).all()
    assert (rev == f32(2.0 ** 24 + 8)).all()


def test_values_in_give_typed_values_out():
    m = mmasim.MMA(*AMPERE)
    rng = np.random.default_rng(3)
    A = rng.integers(-4, 5, size=(32, 32)).astype(np.float16)
    B = rng.integers(-4, 5, size=(32, 16)).astype(np.float16)
    C = rng.integers(-50, 50, size=(32, 16)).astype(np.float32)
    lazy = mmasim.gemm(da.from_array(A, chunks=16), da.from_array(B, chunks=(32, 8)), da.from_array(C, chunks=(16, 8)),
                       model=m)
    assert lazy.dtype == np.float32
    got = lazy.compute()
    # small integers: every partial sum is exact
    assert got.dtype == np.float32 and np.array_equal(got, A.astype(np.int64) @ B.astype(np.int64) + C)
    # words on request: the f32 words of the same values
    lazy_words = mmasim.gemm(da.from_array(A, chunks=16), da.from_array(B, chunks=(32, 8)),
                             da.from_array(C, chunks=(16, 8)), model=m, words=True)
    assert lazy_words.dtype == np.uint32 and np.array_equal(lazy_words.compute(), got.view(np.uint32))


def test_numpy_operands_mix_with_dask_ones():
    m = mmasim.MMA(*AMPERE)
    A, B, C, _ = _operands(m, 32, 16, 2, "mixed operands")
    lazy = mmasim.gemm(da.from_array(A, chunks=(16, 32)), B, C, model=m)
    assert lazy.numblocks == (2, 1)
    assert np.array_equal(lazy.compute(), mmasim.gemm(A, B, C, model=m))


@pytest.mark.parametrize("axis", ["M", "N"])
def test_chunks_not_aligned_to_the_instruction_tiles_are_refused(axis):
    m = mmasim.MMA(*AMPERE)
    A, B, C, _ = _operands(m, 64, 32, 2, "misaligned")
    dA = da.from_array(A, chunks=(24 if axis == "M" else 16, 32))
    dB = da.from_array(B, chunks=(32, 12 if axis == "N" else 8))
    with pytest.raises(mmasim.ShapeError, match=f"the {axis} chunks of {'A' if axis == 'M' else 'B'} .* multiple of"):
        mmasim.gemm(dA, dB, C, model=m)


def test_shape_and_dtype_errors_are_raised_before_anything_is_computed():
    m = mmasim.MMA(*AMPERE)

    def z(shape, dtype, chunks="auto"):
        return da.zeros(shape, dtype=dtype, chunks=chunks)

    B16, C32 = z((32, 16), np.uint16), z((32, 16), np.uint32)
    with pytest.raises(mmasim.ShapeError, match="K = 40 is not a positive multiple"):
        mmasim.gemm(z((32, 40), np.uint16, 16), z((40, 16), np.uint16), C32, model=m)
    with pytest.raises(mmasim.DtypeError, match="mix container words"):
        mmasim.gemm(z((32, 32), np.float16), B16, C32, model=m)
    with pytest.raises(mmasim.OperandError, match="no tqdm bar"):
        mmasim.gemm(z((32, 32), np.uint16), B16, C32, model=m, progress=True)
    x = z((32, 32), np.uint16)
    with pytest.raises(mmasim.ShapeError, match="unknown chunk sizes"):
        mmasim.gemm(x[x[:, 0] == 0], B16, np.zeros((32, 16), np.uint32), model=m)
    with pytest.raises(mmasim.ScaleError):     # NVFP4 without its scales
        mmasim.gemm(z((128, 64), np.uint8), z((64, 8), np.uint8), z((128, 8), np.uint32), *NVFP4)
    with pytest.raises(mmasim.backends.BackendError, match="unknown backend"):
        mmasim.gemm(z((32, 32), np.uint16), B16, C32, model=m, backend="opencl")
    with pytest.raises(mmasim.ThreadCountError):
        mmasim.gemm(z((32, 32), np.uint16), B16, C32, model=m, threads=0)


def test_dask_gemm_on_a_local_cluster_of_two_worker_processes():
    distributed = pytest.importorskip("dask.distributed", reason="dask.distributed is not installed "
                                      "(pip install 'mmasim-exact[dask]')")
    m = mmasim.MMA(*NVFP4)
    A, B, C, kw = _operands(m, 256, 32, 2, "cluster")
    want = mmasim.gemm(A, B, C, model=m, threads=1, **kw)
    dA, dB, dC, dkw = _chunked(A, B, C, kw, 128, 16, 64)
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None,
                                  silence_logs=40) as cluster, distributed.Client(cluster, timeout=120) as client:
        lazy = mmasim.gemm(dA, dB, dC, model=m, backend="numpy", **dkw)
        with distributed.get_task_stream(client) as stream:
            got = client.compute(lazy).result(timeout=240)
        # the four (M, N) blocks ran as tasks in the worker processes, not here
        blocks = [t for t in stream.data if "mmasim-gemm" in str(t["key"])]
        assert len(blocks) == 4
        assert {t["worker"] for t in blocks} <= set(client.scheduler_info()["workers"])
    assert got.dtype == want.dtype and np.array_equal(got, want)


def test_tasks_use_one_thread_unless_threads_says_more(monkeypatch):
    # dask runs the tasks side by side; each task's own threads default to one
    from mmasim.execution import threads as mt
    monkeypatch.setattr(mt, "MIN_ELEMENTS_PER_THREAD", 1)
    monkeypatch.setenv("MMASIM_THREADS", "4")
    runs, real = [], mt.workers

    def workers(*args):     # the thread count each call decides on
        runs.append(real(*args))
        return runs[-1]

    monkeypatch.setattr(mt, "workers", workers)
    m = mmasim.MMA(*AMPERE)
    A, B, C, kw = _operands(m, 64, 16, 2, "task threads")
    dA, dB, dC, _ = _chunked(A, B, C, kw, 32, 16, 32)
    want = mmasim.gemm(A, B, C, model=m, threads=1)
    assert np.array_equal(mmasim.gemm(dA, dB, dC, model=m).compute(scheduler="sync"), want)
    assert runs and set(runs) == {1}
    runs.clear()
    assert np.array_equal(mmasim.gemm(dA, dB, dC, model=m, threads=2).compute(scheduler="sync"), want)
    assert 2 in runs
