"""No package of mmasim reaches into another's private names: no ``from mmasim.x import _name``
across packages, and no module outside ``mmasim/execution/`` reads a private attribute of
``Model`` (what the others need, ``Model`` gives as public attributes: ``registry``,
``placement``, ``tile``, ``check_metadata``, ``backend_name``)."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "mmasim"


def _package(module: str) -> str:
    """The package of mmasim a dotted module name belongs to (``mmasim.x.y`` -> ``x``)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def private_imports(path: pathlib.Path, source: str | None = None) -> list:
    """``(line, module, name)`` of every ``from mmasim.x import _name`` in ``path`` (its text,
    or ``source``) whose module belongs to another package than the file's (relative imports
    resolved)."""
    rel = path.relative_to(ROOT).with_suffix("").parts
    here = ".".join(rel[:-1] if rel[-1] == "__init__" else rel)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    text = path.read_text(encoding="utf-8") if source is None else source
    for node in ast.walk(ast.parse(text, str(path))):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
        else:
            module = node.module or ""
        if not module.startswith("mmasim") or _package(module) == _package(here):
            continue
        found += [(node.lineno, module, a.name) for a in node.names if _private(a.name)]
    return found


def model_privates() -> set:
    """The private attributes of ``Model``: its private members and the ``self._x`` it sets."""
    from mmasim.execution.model import Model

    names = {n for n in vars(Model) if _private(n)}
    tree = ast.parse((PACKAGE / "execution" / "model.py").read_text(encoding="utf-8"))
    names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and _private(n.attr)
              and isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Store)}
    return names


def private_reads(path: pathlib.Path, privates: set) -> list:
    """``(line, text)`` of every ``x._name`` in ``path`` with ``_name`` a private attribute of
    ``Model`` and ``x`` not ``self`` / ``cls``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Attribute) and node.attr in privates \
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            out.append((node.lineno, ast.unparse(node)))
    return out


def test_no_module_imports_a_private_name_of_another_package():
    found = [f"{p.relative_to(ROOT)}:{line}: from {module} import {name}"
             for p in sorted(PACKAGE.rglob("*.py")) for line, module, name in private_imports(p)]
    assert not found, "private names imported across packages:\n" + "\n".join(found)


def test_no_module_outside_execution_reads_a_private_attribute_of_model():
    privates = model_privates()
    assert {"_reg", "_legal", "_compute"} <= privates, "the scan missed Model's private names"
    found = [f"{p.relative_to(ROOT)}:{line}: {text}"
             for p in sorted(PACKAGE.rglob("*.py"))
             if p.relative_to(PACKAGE).parts[0] != "execution"
             for line, text in private_reads(p, privates)]
    assert not found, "private attributes of Model read outside mmasim/execution/:\n" + "\n".join(found)


def test_the_scans_see_a_private_import_and_a_private_read(tmp_path):
    source = ("from mmasim.execution.model import _x, Model\n"
              "from ..placement.bind import _shape\n"
              "from .operands import _container\n"
              "def f(model):\n"
              "    return model._reg.formats, model.registry, self._compute\n")
    path = tmp_path / "probe.py"
    path.write_text(source, encoding="utf-8")
    # read as if it were mmasim/composition/probe_private.py (parsed only, never written)
    found = [(m, n) for _, m, n in private_imports(PACKAGE / "composition" / "probe_private.py", source)]
    assert found == [("mmasim.execution.model", "_x"), ("mmasim.placement.bind", "_shape")]
    assert [t for _, t in private_reads(path, {"_reg", "_compute"})] == ["model._reg"]

