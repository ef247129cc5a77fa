"""Test-session set-up.

Under pytest-xdist (the project's default, ``addopts`` in pyproject.toml) every worker is
its own process and would compile each numba kernel it meets itself, the same kernels in
every worker at the same time.  The controlling process compiles them once instead, before
the workers start: one small batch per compiled signature through the numba backend fills numba's
on-disk cache, which the workers then load.  This changes no test: it only moves compilation.
"""

import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np


def _datapaths():
    from mmasim.registry import get_registry

    reg = get_registry()
    for arch in reg.architectures.values():
        if arch.inherits:          # the same datapaths as the architecture it inherits
            continue
        for dp in arch.datapaths:
            if not dp.sparse:      # sparse datapaths run the dense kernels
                yield dp


def _warm(part, nparts):
    """Run one small batch through numba for every ``nparts``-th compiled signature (from
    ``part``) among the datapaths: a kernel and the word and result dtypes it is called
    with (the datapaths sharing them share its compiled code).  Part 0 also takes the first lean window
    kernel and runs words with inf / NaN, which compiles the general window kernel too
    (the lean kernels' rows with a special value, passed as int64 words: one signature
    for all); the others run finite words near one, which keep their lean kernels from
    compiling it again."""
    from mmasim import backends, wordgen
    from mmasim.model import Model
    from mmasim.registry import get_registry

    reg = get_registry()
    rng = np.random.default_rng(0)
    kind = "mixed" if part == 0 else "near_one"
    seen = set()
    first_lean, dealt = True, 0
    for dp in _datapaths():
        try:
            m = Model(dp, reg, backend="numba")
            kern = backends.kernel_for(m)
            key = None if kern is None else (kern.fn.__name__, type(kern).__name__, m.plan.word_dtypes,
                                             kern.encoding.dtype, kern.out_kind)
            if key is None or key in seen:
                continue
            seen.add(key)
            if first_lean and type(kern).__name__ == "LeanWindowKernel":
                first_lean = False
                if part != 0:      # part 0 runs it with inf / NaN: window_kernel compiles too
                    continue
            else:
                dealt += 1
                if dealt % nparts != part:
                    continue
            rows = 64
            a = wordgen.words(m.a_format, (rows, m.k), rng, kind)
            b = wordgen.words(m.b_format, (rows, m.k), rng, kind)
            c = wordgen.words(m.c_format, (rows,), rng, kind)
            kw = {}
            if dp.scale:
                kw = {s: wordgen.words(m.scale_format, (rows, dp.blocks), rng, "near_one")
                      for s in ("scale_a", "scale_b")}
            m.dot(a, b, c, **kw)
        except Exception:          # the tests themselves report any real failure
            continue


def _warm_numba_cache(workers):
    try:
        import numba  # noqa: F401
    except ImportError:
        return
    # the signatures dealt round-robin to the processes: different kernels compile side
    # by side, none twice
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_warm, range(workers), [workers] * workers))


def pytest_configure(config):
    if getattr(config, "workerinput", None) is not None:
        return                     # an xdist worker: the controller has warmed the cache
    if not getattr(config.option, "numprocesses", None) or getattr(config.option, "dist", "no") == "no":
        return                     # not distributed: each kernel compiles once anyway
    _warm_numba_cache(max(2, min(os.cpu_count() or 1, 8)))
