"""One name per thing (issue 36): each name below is defined in ``mmasim/`` in the one place
chosen for it, so that a reader who meets it knows which thing it is.

- ``gemm``: :func:`mmasim.gemm`, the whole GEMM (``mmasim/composition/gemm.py``); the exact
  GEMM in integers is ``accuracy/reference.py::exact_gemm``, the one on dask arrays
  ``composition/dask.py::dask_gemm``.
- ``run``: nothing in ``mmasim/`` (``mmasim run`` is the command, ``cli``'s ``cmd_run``): a
  vector file is run by ``run_vector_file``, the harness measures with
  ``harness/measure.py::measure``, the thread pool runs chunks (``run_chunks``), the K loop
  accumulates (``mainloop.accumulate``), compare and characterize read ``output_words`` and
  ``probe_words``, the two command handlers are ``run_studies`` and ``show_presets``.
- ``resolve``: ``mmasim/backends/__init__.py::resolve``, the backend a name selects; the thread
  count is ``threads.thread_count``, the datapath of a lookup ``lookup.datapath_of``, a model
  from a qualifier mapping ``Model.lookup_qualifiers``.
- ``warp``: the package ``mmasim/warp/`` (warp execution above the model; ``Model.warp``, a
  method, is how it is reached).
- ``Operand``: nothing; the two classes are ``BatchOperand`` (``backends/plan.py``, a batch
  operand addressed by row) and ``GemmOperand`` (``composition/operands.py``, a checked GEMM
  operand), beside the package ``mmasim/operands/``.
- ``plugins``: no module of ``mmasim/``: the word is the plugin packages, ``plugins/``
  (installed as ``mmasim_plugins``); changing them is ``registry/registration.py``.

A definition is a module or package of that name, or a module-level ``def``, ``class``,
assignment or ``import ... as`` of it, or a ``classmethod`` / ``staticmethod`` of that name (called
like a module function: ``Model.resolve`` was one).  A function in a module of its own name
(``gemm`` in ``gemm.py``) is one place.  Instance methods and fields are an object's interface
(a harness device's ``run``, ``Model.warp``) and are not counted.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "mmasim"

#: each name and the one file of ``mmasim/`` that defines it (empty: none does)
CHOSEN = {
    "gemm": {"mmasim/composition/gemm.py"},
    "run": set(),
    "resolve": {"mmasim/backends/__init__.py"},
    "warp": {"mmasim/warp/__init__.py"},
    "Operand": set(),
    "plugins": set(),
}


def _module_name(path: pathlib.Path) -> str:
    return path.parent.name if path.name == "__init__.py" else path.stem


def _names_defined(tree: ast.Module) -> set:
    """The names a module defines at its top level (and its classes' class / static methods)."""
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.add(node.name)
        elif isinstance(node, ast.ClassDef):
            out.add(node.name)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                        isinstance(d, ast.Name) and d.id in ("classmethod", "staticmethod") for d in item.decorator_list):
                    out.add(item.name)
        elif isinstance(node, ast.Assign):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out.update(a.asname for a in node.names if a.asname)
    return out


def definitions(root: pathlib.Path = PACKAGE, names=tuple(CHOSEN)) -> dict:
    """``{name: {file relative to the repository}}`` of every definition of ``names`` under ``root``."""
    found = {name: set() for name in names}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent).as_posix()
        defined = _names_defined(ast.parse(path.read_text(encoding="utf-8"), filename=rel))
        defined.add(_module_name(path))
        for name in names:
            if name in defined:
                found[name].add(rel)
    return found


def test_each_name_is_defined_in_the_one_place_chosen_for_it():
    found = definitions()
    wrong = {name: sorted(found[name]) for name in CHOSEN if found[name] != CHOSEN[name]}
    assert not wrong, f"defined elsewhere than chosen ({CHOSEN}): {wrong}"


def test_plugins_is_the_plugin_packages_folder():
    assert (ROOT / "plugins" / "__init__.py").is_file()


def test_the_scan_sees_every_kind_of_definition(tmp_path):
    """A module, a function in a module of its name, a class method, an alias, an assignment:
    each a definition; an instance method is not."""
    pkg = tmp_path / "mmasim"
    (pkg / "run").mkdir(parents=True)
    (pkg / "run" / "__init__.py").write_text("")
    (pkg / "gemm.py").write_text("def gemm(): pass\n")
    (pkg / "a.py").write_text("class Model:\n    @classmethod\n    def resolve(cls): pass\n"
                              "    def warp(self): pass\n")
    (pkg / "b.py").write_text("from x import y as plugins\nOperand = int\n")
    assert definitions(pkg) == {"gemm": {"mmasim/gemm.py"}, "run": {"mmasim/run/__init__.py"},
                                "resolve": {"mmasim/a.py"}, "warp": set(), "Operand": {"mmasim/b.py"},
                                "plugins": {"mmasim/b.py"}}
