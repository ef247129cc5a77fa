"""No module imports one of a higher floor, at import or at run time.

``tests/test_architecture.py`` reads the import statements of ``mmasim/`` with :mod:`ast`; an
import by name at run time (``importlib.import_module("...")``, a list of plugin names, a
``"module.Class"`` string) is invisible to it.  Here a fresh interpreter watches every import
as it happens (``builtins.__import__`` and ``importlib.import_module`` wrapped, the importer
read from the globals of the code that imports) while it builds the registry, resolves a
datapath, runs a dot, a GEMM, a warp, rebuilds the plugins and asks the harness for an
emitter and a device: every edge is judged by the floors of docs/architecture.md
(``test_architecture.LAYERS``).  The top package (``mmasim``) is the highest floor: only the
tools may use it as the public API.  The built-in plugins (``mmasim_plugins``) are imported by
the top alone, which names them (``mmasim.DEFAULT_PLUGINS``), and they import only the core's
packages (``hookimpl`` from ``mmasim.registry.hookspecs``), never the top.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from test_architecture import CORE_LAYERS, _package, upward_imports

#: run first in the fresh interpreter: every import of an mmasim module (or of a built-in plugin)
#: by one, recorded as (importer, imported); the code to watch follows, then the edges are printed
WATCHER = r'''
import builtins, importlib, importlib.util, json, sys

EDGES = set()
_import, _import_module = builtins.__import__, importlib.import_module


def _ours(name):
    return bool(name) and (name == "mmasim" or name.startswith(("mmasim.", "mmasim_plugins")))


def _absolute(name, globals_, level):
    if not level:
        return name
    package = globals_.get("__package__")
    if not package:
        package = globals_["__name__"] if "__path__" in globals_ else globals_["__name__"].rpartition(".")[0]
    return importlib.util.resolve_name("." * level + name, package)


def _record(importer, targets):
    if _ours(importer):
        EDGES.update((importer, t) for t in targets if _ours(t) and t != importer)


def watched_import(name, globals=None, locals=None, fromlist=(), level=0):
    module = _import(name, globals, locals, fromlist, level)
    importer = (globals or {}).get("__name__")
    if _ours(importer):
        base = _absolute(name, globals, level)
        # "from pkg import mod" imports the module, "from mod import name" the module holding it
        targets = [f"{base}.{x}" if f"{base}.{x}" in sys.modules else base for x in fromlist or ()] or [base]
        _record(importer, targets)
    return module


def watched_import_module(name, package=None):
    importer = sys._getframe(1).f_globals.get("__name__")
    module = _import_module(name, package)
    _record(importer, [module.__name__])
    return module


builtins.__import__ = watched_import
importlib.import_module = watched_import_module
'''

#: what the watched interpreter does: import, build, resolve, compute, rebuild, harness look-ups
WORK = r'''
import numpy as np
import mmasim
from mmasim.registry import registration

mmasim.get_registry()
m = mmasim.MMA("A100", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", backend="numpy")
assert int(m.dot([0x3C00] * 16, [0x3C00] * 16, 0)) == 0x41800000          # 16.0
A = np.full((16, 32), 0x3C00, dtype=np.uint16)
B = np.full((32, 8), 0x3C00, dtype=np.uint16)
D = mmasim.gemm(A, B, np.zeros((16, 8), dtype=np.uint32), arch="A100", instruction=m.instruction,
                backend="numpy", promote_every=16)
assert int(np.asarray(D)[0, 0]) == 0x42000000                               # 32.0, two K tiles
regs = m.warp(m.fragments("a", A[:, :16]), m.fragments("b", B[:16]), m.fragments("c", np.zeros((16, 8), np.uint32)))
assert int(m.unfragment("d", regs)[0, 0]) == 0x41800000
registration.status()
registration.reset()                     # the built-in plugins loaded again, at run time
mmasim.MMA("B200", "tcgen05.mma.kind::tf32")
from mmasim.harness import generate, measure
generate.model_specs(m)
measure.device_class(m)
'''


def watched_edges(work: str) -> set:
    """Every ``(importer, imported)`` edge between mmasim modules (and the built-in plugins)
    that a fresh interpreter runs through while it runs ``work``."""
    script = WATCHER + "\n" + textwrap.dedent(work) + "\nprint(json.dumps(sorted(EDGES)))\n"
    env = dict(os.environ, MMASIM_BACKEND="numpy")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return {tuple(edge) for edge in json.loads(done.stdout.strip().splitlines()[-1])}


CORE = {p for layer in CORE_LAYERS for p in layer}


def wrong_edges(edges: set) -> list:
    """``(importer, imported, why)`` of every edge that runs from a floor up to a higher one."""
    out, inside = [], {}
    for importer, target in sorted(edges):
        if target.startswith("mmasim_plugins"):
            if importer != "mmasim":
                out.append((importer, target, "only the top of the package (mmasim.DEFAULT_PLUGINS) imports "
                                              "a built-in plugin"))
        elif importer.startswith("mmasim_plugins"):
            if target == "mmasim" or _package(target) not in CORE:
                out.append((importer, target, "a built-in plugin imports only the core's packages (hookimpl from "
                                              "mmasim.registry.hookspecs), never the top or a tool"))
        else:
            inside.setdefault(importer, set()).add(target)
    return out + [(a, b, "a lower floor imports a higher one") for a, b in upward_imports(inside)]


def test_the_watcher_sees_run_time_imports_by_name():
    # a registry module that imports the CLI by name inside a function, and a plugin that
    # imports the top package: both at run time, both upward
    edges = watched_edges('''
        import mmasim
        exec("def later():\\n    import importlib\\n    return importlib.import_module('mmasim.cli.main')\\n"
             "later()\\n", {"__name__": "mmasim.registry.manager"})
        exec("from mmasim import hookimpl\\nfrom . import families\\n",
             {"__name__": "mmasim_plugins.toy", "__package__": "mmasim_plugins"})
    ''')
    assert ("mmasim.registry.manager", "mmasim.cli.main") in edges
    assert ("mmasim_plugins.toy", "mmasim") in edges and ("mmasim_plugins.toy", "mmasim_plugins.families") in edges
    wrong = {(a, b) for a, b, _ in wrong_edges(edges)}
    assert {("mmasim.registry.manager", "mmasim.cli.main"), ("mmasim_plugins.toy", "mmasim"),
            ("mmasim_plugins.toy", "mmasim_plugins.families")} <= wrong


def test_the_edge_rules_name_each_wrong_floor():
    edges = {("mmasim.registry.manager", "mmasim.backends.numba"),      # the registry imports a backend
             ("mmasim_plugins.archs", "mmasim"),                         # a built-in plugin imports the top
             ("mmasim_plugins.archs", "mmasim.harness.measure"),             # ... or a tool
             ("mmasim.registry.manager", "mmasim_plugins.archs"),        # the registry imports a plugin
             ("mmasim", "mmasim_plugins.archs"),                         # the top names them: fine
             ("mmasim_plugins.archs", "mmasim.placement.loader"),        # a plugin uses the core: fine
             ("mmasim.harness.generate", "mmasim"),                      # a tool uses the public API: fine
             ("mmasim.execution.model", "mmasim")}                       # the core may not
    assert sorted((a, b) for a, b, _ in wrong_edges(edges)) == [
        ("mmasim.execution.model", "mmasim"), ("mmasim.registry.manager", "mmasim.backends.numba"),
        ("mmasim.registry.manager", "mmasim_plugins.archs"), ("mmasim_plugins.archs", "mmasim"),
        ("mmasim_plugins.archs", "mmasim.harness.measure")]


def test_no_import_runs_from_a_floor_up_to_a_higher_one_at_import_or_run_time():
    edges = watched_edges(WORK)
    # the watcher saw the import of the package and the run-time imports by name
    assert len(edges) > 300, len(edges)
    assert ("mmasim", "mmasim_plugins.families") in edges          # the top loads the built-ins
    assert ("mmasim.harness.table", "mmasim.harness.nv_sync") in edges     # the emitter, by name
    wrong = wrong_edges(edges)
    assert not wrong, "imports from a floor up to a higher one:\n" + "\n".join(
        f"{a} -> {b}: {why}" for a, b, why in wrong)
