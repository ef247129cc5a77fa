"""Importing mmasim writes nothing: not into the installed package (its ``__pycache__``
folders included), not into the kernel cache folder.  Files are written only by the work
that needs them (a compiled kernel, a harness build, a vector file).

Every module of the three installed packages is imported in a fresh process (Python's own
bytecode writing switched off), the registry is built, and the listing of the source
folders (name, size, modification time of every file but Python's bytecode) is compared
with the one before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = [ROOT / "mmasim", ROOT / "plugins", ROOT / "archs"]

IMPORT_EVERYTHING = textwrap.dedent("""
    import importlib, json, pkgutil
    import mmasim, mmasim_plugins, mmasim_archs
    imported, optional = [], []
    for pkg in (mmasim, mmasim_plugins):
        for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
            if info.name.endswith(".__main__"):      # runs the command line
                continue
            try:
                importlib.import_module(info.name)
            except ImportError as exc:       # an optional extra (torch, dask, numba, matplotlib)
                optional.append(f"{info.name}: {exc}")
            else:
                imported.append(info.name)
    mmasim.MMA("A100", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    print(json.dumps({"imported": imported, "optional": optional}))
""")


def _listing() -> dict:
    """``path -> (size, mtime)`` of every file of the source folders, Python's own bytecode
    (``__pycache__/*.pyc``) left out: another test process may write that at any time."""
    out = {}
    for folder in FOLDERS:
        for p in folder.rglob("*"):
            if p.is_file() and not (p.parent.name == "__pycache__" and p.suffix == ".pyc"):
                st = p.stat()
                out[str(p.relative_to(ROOT))] = (st.st_size, st.st_mtime_ns)
    return out


def test_importing_every_module_of_mmasim_changes_no_file_of_the_package(tmp_path):
    cache = tmp_path / "never"
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1", MMASIM_CACHE_DIR=str(cache),
               MMASIM_HARNESS_CACHE=str(tmp_path / "never-harness"), MMASIM_BACKEND="numpy")
    before = _listing()
    run = subprocess.run([sys.executable, "-c", IMPORT_EVERYTHING], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert "mmasim.backends.numba.cache" in report["imported"] + [o.split(":")[0] for o in report["optional"]]
    assert len(report["imported"]) >= 100, report
    after = _listing()
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    assert not changed, f"importing mmasim wrote into the package: {changed}"
    assert not cache.exists() and not (tmp_path / "never-harness").exists()
