"""Test-session set-up.

Under pytest-xdist (the project's default, ``addopts`` in pyproject.toml) every worker is
its own process and would compile each numba kernel it meets itself, the same kernels in
every worker at the same time.  Unless an earlier session (or ``mmasim warmup``) has
warmed the kernel cache, the controlling process runs ``mmasim warmup`` first
(:func:`mmasim.cli.warmup.warmup`): every kernel signature of the registered datapaths is
compiled into the kernel cache, in processes side by side, and the workers load the kernels
from it.  This changes no test: it only moves compilation.
"""

import os


def pytest_configure(config):
    if getattr(config, "workerinput", None) is not None:
        return                     # an xdist worker: the controller has warmed the cache
    if not getattr(config.option, "numprocesses", None) or getattr(config.option, "dist", "no") == "no":
        return                     # not distributed: each kernel compiles (or loads) once anyway
    try:
        import numba  # noqa: F401
    except ImportError:
        return
    from mmasim.cli.warmup import warmed, warmup

    if warmed():
        return                     # the workers load every kernel from the cache
    try:
        warmup(jobs=max(2, min(os.cpu_count() or 1, 8)), progress=False)
    except Exception:              # noqa: BLE001 - the tests of the kernel report it
        pass
