"""The shape of the package: no import circle inside ``mmasim/``.

Every module under ``mmasim/`` is parsed with :mod:`ast`; every ``import`` and
``from ... import`` of an mmasim module counts, wherever it stands (at the top,
or deferred inside a function), since a deferred import is still a dependency
that only hides a circle.  The modules form a graph that must be acyclic.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mmasim"

def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict:
    """``module name -> path`` of every module under mmasim/."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(target: str, known: dict) -> str | None:
    """The known module ``target`` names, or the package holding it (``mmasim.x.y`` as ``mmasim.x``)."""
    while target:
        if target in known:
            return target
        target = target.rpartition(".")[0]
    return None


def imports_of(name: str, path: pathlib.Path, known: dict) -> set:
    """Every mmasim module ``name`` imports, at any depth of its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            # "from . import x" / "from .pkg import mod" import modules, else names of one module
            targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                       for alias in node.names]
        else:
            continue
        for target in targets:
            resolved = _resolve(target, known) if target.startswith("mmasim") else None
            if resolved and resolved != name:
                found.add(resolved)
    return found


def graph() -> dict:
    known = modules()
    return {name: imports_of(name, path, known) for name, path in known.items()}


def cycles(edges: dict) -> list:
    """Every strongly connected component of more than one module (Tarjan), each as a sorted list."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    out = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def a_cycle(edges: dict, component: list) -> list:
    """One import circle inside ``component``, as ``[m1, m2, ..., m1]``."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    while True:
        nxt = sorted(w for w in edges[path[-1]] if w in members)
        back = [w for w in nxt if w in seen]
        if back:
            return path[path.index(back[0]):] + [back[0]]
        path.append(nxt[0])
        seen.add(nxt[0])


def test_the_import_graph_sees_deferred_imports(tmp_path):
    # an import inside a function counts like one at the top, in every spelling
    module = tmp_path / "probe.py"
    module.write_text(
        "import numpy\n"
        "from .errors import MMAError\n"
        "def later():\n"
        "    from .registry import tables\n"
        "    from .accumulators.window import window\n"
        "    import mmasim.registry.lookup\n"
        "    class Inner:\n"
        "        from .arith.special import NVIDIA_RULES\n",
        encoding="utf-8")
    known = modules()
    found = imports_of("mmasim.probe", module, known)
    assert found == {"mmasim.errors", "mmasim.registry.tables", "mmasim.accumulators.window", "mmasim.registry.lookup",
                     "mmasim.arith.special"}
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert a_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}, ["a", "b", "c"]) == ["a", "b", "c", "a"]


def test_no_import_circle_inside_mmasim():
    edges = graph()
    found = cycles(edges)
    report = [f"{', '.join(c)} (e.g. {' -> '.join(a_cycle(edges, c))})" for c in found]
    assert not report, "import circles inside mmasim/:\n" + "\n".join(report)


def test_hook_markers_live_in_the_leaf_hookspecs_module():
    # plugins and the core import hookimpl from a module that imports nothing of mmasim
    edges = graph()
    assert edges["mmasim.registry.hookspecs"] == set()
    import mmasim
    from mmasim.registry import hookspecs
    from mmasim.registry import registration

    assert mmasim.hookimpl is hookspecs.hookimpl is registration.hookimpl


#: the packages of mmasim/, lowest first (docs/architecture.md, "Layers"): a module may import
#: its own package and the packages of lower layers; the tools may also use the public API
#: (the top-level package ``mmasim``), which imports only from lower layers
CORE_LAYERS = (
    ("errors",), ("arith",), ("operands",), ("accumulators",), ("placement",), ("registry",), ("backends",),
    ("quantization",), ("execution",), ("warp",), ("composition",), ("mma_sim_compat",),
)
TOOL_LAYERS = (("vectors", "compare", "accuracy", "torch"), ("characterize",), ("harness",), ("cli",))
LAYERS = CORE_LAYERS + TOOL_LAYERS + (("mmasim", "__main__"),)
TOOLS = {p for layer in TOOL_LAYERS for p in layer}


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "mmasim"


def upward_imports(edges: dict) -> list:
    """``(importer, imported)`` pairs that reach a package of the same or a higher layer."""
    rank = {p: i for i, layer in enumerate(LAYERS) for p in layer}
    out = []
    for name, deps in sorted(edges.items()):
        mine = _package(name)
        for dep in sorted(deps):
            theirs = _package(dep)
            if theirs == mine or (theirs == "mmasim" and dep == "mmasim" and mine in TOOLS):
                continue
            if rank[theirs] >= rank[mine]:
                out.append((name, dep))
    return out


def test_every_package_of_mmasim_has_a_layer():
    assert {_package(name) for name in modules()} == {p for layer in LAYERS for p in layer}


def test_no_package_imports_one_of_its_own_layer_or_above():
    assert upward_imports(graph()) == []


def test_the_layer_check_sees_an_upward_import():
    edges = {"mmasim.arith.decode": {"mmasim.registry.build"}, "mmasim.cli.main": {"mmasim"},
             "mmasim.registry.build": {"mmasim.arith.decode"}, "mmasim.execution.model": {"mmasim"}}
    assert upward_imports(edges) == [("mmasim.arith.decode", "mmasim.registry.build"),
                                     ("mmasim.execution.model", "mmasim")]
