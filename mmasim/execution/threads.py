"""Every core: how many threads a computation uses, and the pool that runs its row chunks.

Gives :func:`thread_count` (first match wins: the ``threads=`` argument, ``MMASIM_THREADS``, every
core this process may run on, :func:`default_threads`), :func:`workers` and :func:`run_chunks`, which
computes ``Model.dot``'s, the matrix form's and :func:`mmasim.gemm`'s row chunks on several
threads at once (the compiled kernels release the GIL; numpy releases it inside its array
operations).  Every row is computed on its own and each chunk writes its own slice, so the
words do not depend on the number of threads.  Refuses a count that is not a positive integer
(:class:`~mmasim.ThreadCountError`).  docs/user-guide.md, "Every core, and beyond one machine".
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from mmasim.errors import ThreadCountError
from mmasim.operands.text import parse_count

__all__ = ["ENV", "MIN_ELEMENTS_PER_THREAD", "default_threads", "check", "thread_count", "workers", "run_chunks", "by_rows"]

ENV = "MMASIM_THREADS"

#: products (rows times K) each thread must have before a batch is shared out
MIN_ELEMENTS_PER_THREAD = 1 << 16

#: products computed on the calling thread before the others start: the first call
#: compiles the numba kernel and fills the plan's caches once, not in a race
WARM_ELEMENTS = 1 << 10

#: chunks per thread (later chunks even out threads that ran slower)
CHUNKS_PER_THREAD = 4


def default_threads() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    count = getattr(os, "process_cpu_count", None)
    if count is not None:
        n = count()
    elif hasattr(os, "sched_getaffinity"):
        n = len(os.sched_getaffinity(0))
    else:
        n = os.cpu_count()
    return max(1, int(n or 1))


def check(threads=None):
    """``threads`` checked: a positive ``int``, or ``None`` for every core (``threads=None``
    reads ``MMASIM_THREADS``).  Cheap: the core count is asked only when a batch is shared out."""
    if threads is None:
        raw = os.environ.get(ENV)
        text = None if raw is None else raw.strip(" \t\r\n")
        if not text:
            return None
        value = parse_count(text)
        if value is None or value < 1:
            raise ThreadCountError(
                f"environment variable {ENV} must be a positive integer (the threads to compute on), "
                f"not {raw!r}; unset it to use every core ({default_threads()})"
            )
        return value
    if isinstance(threads, (bool, np.bool_)) or not isinstance(threads, (int, np.integer)) or threads < 1:
        raise ThreadCountError(
            f"threads must be a positive integer or None ({ENV}, else every core), not {threads!r}"
        )
    return int(threads)


def thread_count(threads=None) -> int:
    """The thread count for ``threads`` (``None``: ``MMASIM_THREADS``, else every core)."""
    checked = check(threads)
    return default_threads() if checked is None else checked


def workers(threads, rows: int, elements_per_row: int) -> int:
    """Threads worth using for ``rows`` rows of ``elements_per_row`` products each
    (``threads``: as :func:`check` returns it, ``None`` for every core; 1: compute on
    the calling thread).  A batch too small to repay the hand-off (fewer than
    :data:`MIN_ELEMENTS_PER_THREAD` products per thread) runs on the calling thread alone."""
    if threads == 1 or rows <= 1:
        return 1
    enough = (rows * max(1, elements_per_row)) // MIN_ELEMENTS_PER_THREAD
    if enough < 2:
        return 1
    want = default_threads() if threads is None else threads
    return max(1, min(want, enough, rows))


_pool = None
_pool_size = 0
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads do not exist there; start afresh."""
    global _pool, _pool_size, _pool_lock
    _pool, _pool_size, _pool_lock = None, 0, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _executor(size: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < size:
            # a larger pool replaces the smaller one; the old one is left to finish (and
            # idle) rather than shut down under a call still submitting to it
            _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="mmasim")
            _pool_size = size
        return _pool


def run_chunks(n: int, chunk: int, work, nworkers: int, elements_per_row: int = 1, warm=None,
        per_thread: int = CHUNKS_PER_THREAD) -> None:
    """Call ``work(start, stop)`` on consecutive chunks of at most ``chunk`` rows that
    cover ``0 .. n``, on ``nworkers`` threads (the calling thread one of them), about
    ``per_thread`` chunks per thread.

    With more than one worker, ``warm()`` (default: the first rows, about
    :data:`WARM_ELEMENTS` products) runs on the calling thread first, then the
    threads take the (remaining) chunks in order.  When a chunk raises, no further
    chunk starts, and the chunks are computed again on the calling thread, one
    after the other, so that the error raised is the one a single thread raises
    (its message, too: it may name a row of its chunk).  ``work`` must write only
    its own rows, so that running a chunk twice does no harm.
    """
    chunk = max(1, int(chunk))
    if nworkers <= 1 or n <= 1:
        _one_thread(n, chunk, work)
        return
    try:
        _shared(n, chunk, work, nworkers, elements_per_row, warm, per_thread)
        return
    except Exception:       # noqa: BLE001 - one thread's error, below
        pass
    _one_thread(n, chunk, work)     # raises as one thread raises (or, if the error does not recur, computes)


def _one_thread(n: int, chunk: int, work) -> None:
    for s in range(0, n, chunk):
        work(s, min(n, s + chunk))


def _shared(n, chunk, work, nworkers, elements_per_row, warm, per_thread) -> None:
    if warm is None:
        first = min(n, chunk, max(1, WARM_ELEMENTS // max(1, elements_per_row)))
        work(0, first)
    else:
        first = 0
        warm()
    rest = n - first
    if rest <= 0:
        return
    size = min(chunk, max(1, -(-rest // (nworkers * max(1, per_thread)))))
    lock = threading.Lock()
    state = {"next": first, "stop": False}
    errors = []

    def loop():
        while True:
            with lock:
                s = state["next"]
                if state["stop"] or s >= n:
                    return
                state["next"] = e = min(n, s + size)
            try:
                work(s, e)
            except BaseException as exc:  # noqa: BLE001 - re-raised below, on the calling thread
                with lock:
                    state["stop"] = True
                    errors.append((s, exc))
                return

    pool = _executor(nworkers - 1)
    futures = [pool.submit(loop) for _ in range(nworkers - 1)]
    loop()
    for f in futures:
        if not f.cancel():      # a loop not yet started (the pool busy elsewhere) has nothing left to do
            f.result()
    if errors:
        raise min(errors, key=lambda x: x[0])[1]


def by_rows(M: int, per_row: int, block, nworkers: int, bar, tiles: int, warm=None,
            per_thread: int = CHUNKS_PER_THREAD):
    """``block(rows)`` on blocks of rows, on ``nworkers`` threads: each block does all of its
    work (one hand-off per block, not one per K tile) and writes its rows of the result, so
    that a block computed again (:func:`run_chunks` redoes a failed attempt on one thread, in blocks
    of another size) only writes the same rows again.  ``bar`` is advanced by ``tiles`` per
    row's worth of work, in whole steps, at most ``tiles``; ``per_thread``: blocks per thread."""
    out, lock, rows_done = [None], threading.Lock(), [0]

    def work(s, e):
        d = block(slice(s, e))
        with lock:
            if out[0] is None:
                out[0] = np.empty((M,) + d.shape[1:], dtype=d.dtype)
            out[0][s:e] = d
            if bar is not None:     # whole K tiles' worth of rows done, in whole steps
                before = tiles * rows_done[0] // M
                rows_done[0] = min(M, rows_done[0] + e - s)
                bar.update(tiles * rows_done[0] // M - before)

    run_chunks(M, M, work, nworkers, per_row, warm=warm, per_thread=per_thread)
    return out[0]
