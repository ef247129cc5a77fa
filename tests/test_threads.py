"""Every core: Model.dot, the matrix form and gemm compute row chunks on several threads
(``threads=``, ``MMASIM_THREADS``), and the words are those of one thread.

Every row of a batch is computed on its own and each chunk writes its own slice, so
the D words cannot depend on how the rows are shared out: threads=1 is the oracle.
The batches here are small, so the tests lower the size threshold
(``MIN_ELEMENTS_PER_THREAD``) to make them share out, and check that they did.
"""

import os
import threading

import numpy as np
import pytest

import mmasim
from mmasim.execution import threads as mt
from wordgen import gemm_operands, operands, seed

# one datapath of each family of kernels (and lean numpy paths)
FAMILIES = {
    "window": ("Ampere", "m16n8k16.f32.f16.f16.f32"),
    "block-scaled window (B200 NVFP4)": ("B200", "tcgen05.kind::mxf4nvf4.4X"),
    "grouped scaled window": ("RTX Blackwell", "mma.sync.kind::mxf4nvf4.block_scale.scale_vec::4X.block16."
                                               "m16n8k64.f32.e2m1.e2m1.ue8m0"),
    "ieee fma chain": ("Ampere", "mma.sync.m8n8k4.f64.f64.f64"),
    "integer": ("Ampere", "mma.sync.m16n8k32.s32.s8.s8"),
    "sparse window": ("Ampere", "mma.sync.sp.m16n8k32.f32.f16.f16"),
    "two-stage window": ("CDNA3", "v_mfma.m32n32k4.f32.f16.f16"),
}
BACKENDS = ["numpy"] + (["numba"] if "numba" in mmasim.backends.available() else [])


@pytest.fixture
def spread(monkeypatch):
    """Share out even small batches, and record the workers of every run."""
    monkeypatch.setattr(mt, "MIN_ELEMENTS_PER_THREAD", 1)
    runs = []
    real = mt.run_chunks

    def run(n, chunk, work, nworkers, *args, **kwargs):
        runs.append(nworkers)
        return real(n, chunk, work, nworkers, *args, **kwargs)

    monkeypatch.setattr(mt, "run_chunks", run)
    return runs


def _batch(model, name, rows=700):
    rng = np.random.default_rng(seed(name))
    parts = [operands(model, rows // 2, rng, "mixed"), operands(model, rows - rows // 2, rng, "near_one")]
    a, b, c = (np.concatenate([p[i] for p in parts]) for i in range(3))
    kw = {key: np.concatenate([p[3][key] for p in parts]) for key in parts[0][3]}
    return a, b, c, kw


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_dot_words_do_not_depend_on_the_thread_count(family, backend, spread):
    m = mmasim.MMA(*FAMILIES[family])
    a, b, c, kw = _batch(m, family)
    one = m.dot(a, b, c, backend=backend, threads=1, **kw)
    assert spread == [1]
    for n in (2, 4):
        got = m.dot(a, b, c, backend=backend, threads=n, **kw)
        assert spread[-1] == n
        assert got.dtype == one.dtype and np.array_equal(got, one)


def _matrices(model, name, M, N, tiles=1):
    rng = np.random.default_rng(seed("matrix " + name))
    return gemm_operands(model, M, N, tiles, rng)


def _mn(model):
    return model.legal_m[0], model.legal_n[0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("family", FAMILIES)
def test_matrix_form_words_do_not_depend_on_the_thread_count(family, backend, spread):
    m = mmasim.MMA(*FAMILIES[family])
    M, N = _mn(m)
    A, B, C, kw = _matrices(m, family, M, N)
    one = m(A, B, C, backend=backend, threads=1, **kw)
    for n in (2, 4):
        got = m(A, B, C, backend=backend, threads=n, **kw)
        assert spread[-1] == n
        assert np.array_equal(got, one)


@pytest.mark.parametrize("family", FAMILIES)
def test_gemm_words_do_not_depend_on_the_thread_count(family, spread):
    m = mmasim.MMA(*FAMILIES[family])
    tm, tn = _mn(m)
    M, N = 2 * tm, 2 * tn
    # sparse: (M, 3 * words), each K tile's metadata words of a row, tile after tile
    A, B, C, kw = _matrices(m, family, M, N, tiles=3)
    one = mmasim.gemm(A, B, C, model=m, threads=1, **kw)
    for n in (2, 4):
        got = mmasim.gemm(A, B, C, model=m, threads=n, k_order=[1, 2, 0], **kw)
        ref = mmasim.gemm(A, B, C, model=m, threads=1, k_order=[1, 2, 0], **kw)
        assert max(spread) == n
        assert np.array_equal(got, ref)
    assert np.array_equal(mmasim.gemm(A, B, C, model=m, threads=3, **kw), one)


def test_values_in_values_out_on_several_threads(spread):
    m = mmasim.MMA(*FAMILIES["window"])
    rng = np.random.default_rng(7)
    a = rng.integers(-8, 9, size=(500, 16)).astype(np.float16)
    b = rng.integers(-8, 9, size=(500, 16)).astype(np.float16)
    c = rng.integers(-100, 100, size=500).astype(np.float32)
    got = m.dot(a, b, c, threads=4)
    assert spread[-1] == 4
    # small integers: every partial sum is exact in f32
    assert got.dtype == np.float32 and np.array_equal(got, (a.astype(np.int64) * b).sum(-1) + c)


def test_run_computes_chunks_on_concurrent_threads():
    # the two chunks after the warm-up meet at a barrier: one thread alone would time out
    barrier = threading.Barrier(2, timeout=30)
    seen, lock = [], threading.Lock()

    def work(s, e):
        with lock:
            seen.append((s, e, threading.get_ident()))
            first_two = len(seen) in (2, 3)
        if first_two:
            barrier.wait()

    mt.run_chunks(1000, 1000, work, 2, elements_per_row=16)
    spans = sorted((s, e) for s, e, _ in seen)
    assert spans[0][0] == 0 and spans[-1][1] == 1000
    assert all(x[1] == y[0] for x, y in zip(spans, spans[1:]))     # contiguous, no overlap
    assert len({t for *_, t in seen}) == 2


def test_first_warm_rows_run_before_any_other_thread_starts():
    # the numba first compile and the plan's caches are filled once, on the calling thread
    order = []
    me = threading.get_ident()

    def work(s, e):
        order.append((s, threading.get_ident()))

    mt.run_chunks(5000, 5000, work, 4, elements_per_row=16)
    assert order[0] == (0, me)


def test_a_failing_chunk_raises_the_error_one_thread_raises():
    # chunks fail at rows 300 and 900; on one thread the chunk at 300 fails first, and on
    # four threads (where the chunk at 900 may fail first) the error must be the same one
    def work(s, e):
        for bad in (300, 900):
            if s <= bad < e:
                raise mmasim.OperandError(f"row {bad}")

    said = []
    for n in (1, 4):
        with pytest.raises(mmasim.OperandError) as err:
            mt.run_chunks(1000, 50, work, n, elements_per_row=16)
        said.append(str(err.value))
    assert said == ["row 300", "row 300"]


def _fails_once(after: int):
    """A predicate that is true once: on the call after ``after`` calls (thread-safe)."""
    calls, lock = [0], threading.Lock()

    def fail() -> bool:
        with lock:
            calls[0] += 1
            return calls[0] == after + 1
    return fail


def test_a_gemm_block_computed_again_after_a_failed_attempt_is_written_once():
    # threads.run_chunks redoes a failed attempt on one thread in one chunk of all M rows: the blocks
    # the first attempt finished must not be stacked onto the result (a (64, 8) came back (80, 8))
    from mmasim.execution.threads import by_rows

    M, N, fail = 64, 8, _fails_once(after=3)

    def block(rows):
        if fail():
            raise RuntimeError("transient")
        return np.arange(rows.start, rows.stop, dtype=np.float64)[:, None] * np.ones(N)

    got = by_rows(M, 1 << 20, block, 4, None, 1)
    assert got.shape == (M, N) and np.array_equal(got, np.arange(M)[:, None] * np.ones(N))


@pytest.mark.parametrize("options", [{}, {"promote_every": 32}])
def test_a_gemm_whose_threaded_attempt_failed_gives_the_one_thread_words(options, spread, monkeypatch):
    # the plain chain's and a composition's blocks of rows: the fourth block call of the threaded
    # attempt fails (the first is the one-row warm-up); the redo gives the words of threads=1
    from mmasim.composition import mainloop

    m = mmasim.MMA("H100", "wgmma.mma_async.k32.f32.e4m3.e4m3")
    rng = np.random.default_rng(11)
    A = rng.integers(0x30, 0x40, (256, 64)).astype(np.uint8)
    B = rng.integers(0x30, 0x40, (64, 8)).astype(np.uint8)
    want = mmasim.gemm(A, B, None, model=m, threads=1, backend="numpy", **options)
    module, name = (mainloop, "accumulate") if options else (mainloop, "chain")
    real, fail = getattr(module, name), _fails_once(after=3)

    def flaky(*args, **kwargs):
        if fail():
            raise RuntimeError("transient")
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, flaky)
    got = mmasim.gemm(A, B, None, model=m, threads=4, backend="numpy", **options)
    assert max(spread) == 4 and got.shape == (256, 8) and np.array_equal(got, want)


def test_an_illegal_selector_is_named_by_its_case_in_the_whole_batch_on_any_thread_count(spread):
    m = mmasim.MMA(*FAMILIES["sparse window"])
    a, b, c, kw = _batch(m, "failing", rows=1000)
    md = kw["sparse_metadata"].copy()
    illegal = sorted(set(range(16)) - set(m.sparse_rule.selectors))
    md[300, 0] = (md[300, 0] & ~np.uint64(0xF)) | np.uint64(illegal[0])
    md[900, 0] = (md[900, 0] & ~np.uint64(0xF)) | np.uint64(illegal[-1])
    kw["sparse_metadata"] = md
    for n in (1, 4):
        with pytest.raises(mmasim.SparseMetadataError,
                           match=rf"selector 0x{illegal[0]:X} for chunk 0 of sparse_metadata\[300\] "):
            m.dot(a, b, c, threads=n, **kw)


def test_small_batches_stay_on_the_calling_thread():
    assert mt.workers(8, 100, 16) == 1                      # 1600 products
    assert mt.workers(8, 1, 10 ** 9) == 1                   # one row cannot be shared
    assert mt.workers(8, 10 ** 6, 16) == 8
    assert mt.workers(8, 3 * mt.MIN_ELEMENTS_PER_THREAD, 1) == 3


@pytest.mark.parametrize("bad", [0, -2, 1.5, "2", True, np.bool_(True), [2]])
def test_threads_argument_must_be_a_positive_integer(bad):
    m = mmasim.MMA(*FAMILIES["window"])
    a = np.zeros((4, 16), np.uint16)
    with pytest.raises(mmasim.ThreadCountError, match="threads must be a positive integer"):
        m.dot(a, a, np.zeros(4, np.uint32), threads=bad)
    with pytest.raises(mmasim.ThreadCountError):
        m(np.zeros((16, 16), np.uint16), np.zeros((16, 8), np.uint16), np.zeros((16, 8), np.uint32), threads=bad)
    with pytest.raises(mmasim.ThreadCountError):
        mmasim.gemm(np.zeros((16, 32), np.uint16), np.zeros((32, 8), np.uint16), np.zeros((16, 8), np.uint32),
                    model=m, threads=bad)


def test_thread_count_error_is_an_mma_error_and_a_value_error():
    assert issubclass(mmasim.ThreadCountError, mmasim.MMAError)
    assert issubclass(mmasim.ThreadCountError, ValueError)


def test_numpy_integer_thread_counts_are_accepted():
    assert mt.thread_count(np.int64(3)) == 3


def test_mmasim_threads_environment_variable_is_honoured(monkeypatch, spread):
    m = mmasim.MMA(*FAMILIES["window"])
    a, b, c, _ = _batch(m, "env", rows=400)
    monkeypatch.setenv("MMASIM_THREADS", "3")
    assert mt.thread_count() == 3
    got = m.dot(a, b, c)
    assert spread[-1] == 3
    assert np.array_equal(got, m.dot(a, b, c, threads=1))    # the argument wins over the variable
    assert spread[-1] == 1
    monkeypatch.setenv("MMASIM_THREADS", " 2 ")
    assert mt.thread_count() == 2


@pytest.mark.parametrize("bad", ["0", "-1", "two", "1.5", "2x"])
def test_mmasim_threads_must_be_a_positive_integer(monkeypatch, bad):
    monkeypatch.setenv("MMASIM_THREADS", bad)
    m = mmasim.MMA(*FAMILIES["window"])
    with pytest.raises(mmasim.ThreadCountError, match="MMASIM_THREADS must be a positive integer"):
        m.dot(np.zeros(16, np.uint16), np.zeros(16, np.uint16), 0)


def test_every_core_by_default(monkeypatch):
    monkeypatch.delenv("MMASIM_THREADS", raising=False)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None
    assert mt.thread_count() == mt.default_threads() >= 1
    if cores is not None:
        assert mt.default_threads() == cores
    monkeypatch.setenv("MMASIM_THREADS", "")
    assert mt.thread_count() == mt.default_threads()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX only")
def test_a_forked_child_computes_on_several_threads_without_hanging(spread):
    # the parent's pool threads do not exist in a forked child: it must not wait on them
    m = mmasim.MMA(*FAMILIES["window"])
    a, b, c, _ = _batch(m, "fork", rows=400)
    want = m.dot(a, b, c, threads=2, backend="numpy")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:    # the child: report, then leave at once
        ok = False
        try:
            ok = bool(np.array_equal(m.dot(a, b, c, threads=2, backend="numpy"), want))
        finally:
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
    os.close(w)
    import select
    ready, _, _ = select.select([r], [], [], 120)
    if not ready:
        os.kill(pid, 9)
    os.waitpid(pid, 0)
    assert ready and os.read(r, 1) == b"1"


def test_gemm_names_the_first_illegal_selector_in_k_tile_order(spread):
    # gemm runs K tile 0 over every row before tile 2: row 30's bad selector in tile 0 is the
    # first one met, before row 2's in tile 2, on any thread count
    m = mmasim.MMA(*FAMILIES["sparse window"])
    A, B, C, kw = _matrices(m, "gemm error", 32, 8, tiles=3)
    md = kw["sparse_metadata"]
    assert md.shape == (32, 3)      # one metadata word per row and K tile
    illegal = sorted(set(range(16)) - set(m.sparse_rule.selectors))
    md[2, 2] = (md[2, 2] & ~np.uint64(0xF)) | np.uint64(illegal[0])
    md[30, 0] = (md[30, 0] & ~np.uint64(0xF)) | np.uint64(illegal[-1])
    for n in (1, 2, 4):
        with pytest.raises(mmasim.SparseMetadataError,
                           match=f"selector 0x{illegal[-1]:X} for chunk 0 of row 30, K tile 0 of sparse_metadata"):
            mmasim.gemm(A, B, C, model=m, threads=n, **kw)
    with pytest.raises(mmasim.SparseMetadataError, match="row 2, K tile 2 of sparse_metadata"):
        mmasim.gemm(A, B, C, model=m, k_order="reverse", **kw)
