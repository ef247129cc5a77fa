"""docs/architecture.md stays true: every file, module and dotted name it gives exists,
every name a package table places in a module is defined in that module, and its "from
string to words" example runs as written.

The map names files by path (``mmasim/backends/plan.py``, ``plugins/archs.py``, globs such as
``archs/*.toml``), by a path relative to the backends (``numba/window.py``), by a bare file
name inside a row about one package (``primitives.py``), and code by dotted names
(``mmasim_plugins.archs``, ``Datapath.step``, ``intmath.exact_sum``).  A module that is
renamed or removed, or a name that moves, fails here, so the map cannot go stale silently.
"""

from __future__ import annotations

import ast
import functools
import pathlib
import re

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "architecture.md"
PACKAGE = ROOT / "mmasim"
#: installed package name -> source folder (pyproject's package-dir)
INSTALLED = {"mmasim": PACKAGE, "mmasim_plugins": ROOT / "plugins", "mmasim_archs": ROOT / "archs"}
FILE_SUFFIXES = (".py", ".toml", ".md")


def _text() -> str:
    return DOC.read_text(encoding="utf-8")


def _code_spans(text: str) -> list:
    """Every inline code span (fenced blocks left out)."""
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    return re.findall(r"`([^`\n]+)`", prose)


PATH = r"[\w./*-]+"
ROOT_PATH = re.compile(r"(mmasim|plugins|archs|tests|docs|benchmarks|tools)/[\w/*]+/?")


def _file_tokens(text: str) -> set:
    """Every file or folder the page names in code spans."""
    return {tok for span in _code_spans(text) for tok in re.findall(PATH, span)
            if tok.endswith(FILE_SUFFIXES) or ROOT_PATH.fullmatch(tok)}


def _links(text: str) -> set:
    """Targets of the page's relative links (anchors dropped)."""
    return {t.split("#")[0] for t in re.findall(r"\]\(([^)\s]+)\)", text)
            if not t.startswith(("http:", "https:", "#"))}


def _resolve_file(tok: str) -> list:
    """The paths ``tok`` can mean (a glob may match several; empty: none exists)."""
    if tok.startswith(("numba/", "numpy/")):
        tok = "mmasim/backends/" + tok
    if "/" not in tok.rstrip("/"):
        # a bare file name, in a row about one package: it must exist somewhere in the source
        return [p for base in (PACKAGE, ROOT / "plugins") for p in base.rglob(tok)]
    return sorted(ROOT.glob(tok.rstrip("/"))) if "*" in tok else [p for p in [ROOT / tok.rstrip("/")] if p.exists()]


@functools.lru_cache(maxsize=None)
def _tree(path: pathlib.Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def _defined(body) -> set:
    """Names bound at the top of ``body`` (defs, classes, assignments, imports)."""
    names = set()
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                names |= {n.id for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.If, ast.Try)):
            names |= _defined(node.body) | _defined(getattr(node, "orelse", []))
    return names


def _modules() -> dict:
    """Source file of every module of the three installed packages, by dotted name."""
    out = {}
    for name, base in INSTALLED.items():
        for p in base.rglob("*.py"):
            parts = p.relative_to(base).with_suffix("").parts
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            out[".".join((name,) + parts)] = p
    return out


def _classes() -> dict:
    """``class name -> [ClassDef, ...]`` over every module of mmasim/."""
    out: dict = {}
    for p in PACKAGE.rglob("*.py"):
        for node in _tree(p).body:
            if isinstance(node, ast.ClassDef):
                out.setdefault(node.name, []).append(node)
    return out


def _dotted(text: str) -> set:
    """Dotted code names in code spans (``a.b``; calls' parentheses dropped), file names left out."""
    found = set()
    for span in _code_spans(text):
        span = re.sub(PATH + r"\.(py|toml|md)\b", " ", span)
        found |= set(re.findall(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", span))
    return found


def _problem(name: str, modules: dict, classes: dict) -> str | None:
    """Why dotted ``name`` does not resolve, or ``None`` when it does (or is not code of ours).
    MMA-Sim's import paths (``mmasim.nv_ptx.sim``, an alias with no file) resolve in their home
    module (:data:`mmasim.mma_sim_compat.paths.PACKAGES`)."""
    from mmasim.mma_sim_compat.paths import PACKAGES

    for alias, home in PACKAGES.items():
        for prefix in (alias + ".sim", alias):
            if name == prefix or name.startswith(prefix + "."):
                name = home + name[len(prefix):]
                break
        else:
            continue
        break
    parts = name.split(".")
    if parts[0] in INSTALLED:
        # the longest prefix that is a module; the next part must be a name bound in it
        for cut in range(len(parts), 0, -1):
            mod = ".".join(parts[:cut])
            if mod in modules:
                rest = parts[cut:]
                if rest and rest[0] not in _defined(_tree(modules[mod]).body):
                    return f"{mod} ({modules[mod].relative_to(ROOT)}) defines no {rest[0]!r}"
                return None
        return "no such module"
    if parts[0][0].isupper():
        if parts[0] not in classes:
            return f"no class {parts[0]!r} in mmasim/"
        members = set().union(*(_defined(c.body) for c in classes[parts[0]]))
        return None if parts[1] in members else f"class {parts[0]} has no member {parts[1]!r}"
    basenames = {m.rsplit(".", 1)[-1]: p for m, p in modules.items() if m.startswith("mmasim.")}
    if parts[0] in basenames and parts[0] != "mmasim":
        found = [p for m, p in modules.items() if m.startswith("mmasim.") and m.rsplit(".", 1)[-1] == parts[0]]
        if not any(parts[1] in _defined(_tree(p).body) for p in found):
            return f"module {parts[0]} defines no {parts[1]!r}"
    return None     # PTX spellings (mma.sync, tcgen05.mma), variables in prose (m.dot)


def test_every_file_the_architecture_map_names_exists():
    tokens = _file_tokens(_text())
    assert len(tokens) >= 60, f"the map names only {len(tokens)} files: the parser missed them"
    missing = sorted(t for t in tokens if not _resolve_file(t))
    assert not missing, f"docs/architecture.md names files that do not exist: {missing}"


def test_every_page_the_architecture_map_links_exists():
    links = _links(_text())
    assert "datapaths.md" in links
    missing = sorted(t for t in links if not (DOC.parent / t).exists())
    assert not missing, f"docs/architecture.md links pages that do not exist: {missing}"


def test_every_mmasim_module_file_exists_and_is_named_in_the_map():
    """Each module of mmasim/ is on the map (by path, by its folder's row, or by file name),
    so a new module is placed on it."""
    tokens = _file_tokens(_text())
    named = {p.resolve() for t in tokens for p in _resolve_file(t)}
    covered = set()
    for p in PACKAGE.rglob("*.py"):
        if p.resolve() in named or any(p.resolve().is_relative_to(d.resolve()) for d in named if d.is_dir()):
            covered.add(p)
    missing = sorted(str(p.relative_to(ROOT)) for p in PACKAGE.rglob("*.py") if p not in covered)
    assert not missing, f"modules of mmasim/ that docs/architecture.md does not place: {missing}"


def test_every_dotted_name_the_architecture_map_gives_resolves():
    text = _text()
    names = _dotted(text)
    assert {"mmasim_plugins.archs", "Datapath.step", "Plan.build"} <= names, "the parser missed dotted names"
    modules, classes = _modules(), _classes()
    problems = {n: why for n in sorted(names) if (why := _problem(n, modules, classes))}
    assert not problems, f"docs/architecture.md names code that does not exist: {problems}"


def test_every_name_given_after_a_file_is_defined_in_it():
    """In "`file.py` (`name`, ...)" each name is bound at the top of that file, or is a
    member of one of its classes (the rule table points at functions this way)."""
    checked, problems = 0, {}
    for path, inside in re.findall(r"`(" + PATH + r"\.py)` \(([^)]*)\)", _text()):
        names = re.findall(r"`([A-Za-z_]\w*)`", inside)
        for target in _resolve_file(path):
            tree = _tree(target)
            bound = _defined(tree.body)
            bound |= {m for node in tree.body if isinstance(node, ast.ClassDef) for m in _defined(node.body)}
            for name in names:
                checked += 1
                if name not in bound:
                    problems.setdefault(path, []).append(name)
    assert checked >= 30, f"only {checked} names checked: the parser missed them"
    assert not problems, f"docs/architecture.md names code its file does not define: {problems}"


def _package_rows(text: str) -> list:
    """``(module path, [names])`` of every row of a ``| module | defines | owns |`` table."""
    rows, in_table = [], False
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells is None:
            in_table = False
        elif cells[:2] == ["module", "defines"]:
            in_table = True
        elif in_table and not set(cells[0]) <= set("-: "):
            module = re.fullmatch(r"`(" + PATH + r"\.py)`", cells[0])
            assert module, f"a package table row does not start with one module: {line!r}"
            rows.append((module.group(1), re.findall(r"`([A-Za-z_]\w*)`", cells[1])))
    return rows


def _undefined(rows: list) -> dict:
    """``module -> names`` its file does not bind at the top (def, class, assignment, import)."""
    problems = {}
    for module, names in rows:
        bound = _defined(_tree(ROOT / module).body)
        missing = [n for n in names if n not in bound]
        if missing:
            problems[module] = missing
    return problems


def test_every_name_a_package_table_places_in_a_module_is_defined_there():
    rows = _package_rows(_text())
    assert len(rows) >= 100, f"only {len(rows)} package table rows: the parser missed them"
    assert all(names for _, names in rows), [m for m, names in rows if not names]
    missing = sorted(m for m, _ in rows if not (ROOT / m).is_file())
    assert not missing, f"package tables name modules that do not exist: {missing}"
    problems = _undefined(rows)
    assert not problems, f"docs/architecture.md places names in modules that do not define them: {problems}"


def test_the_package_table_check_sees_a_misplaced_name():
    text = ("| module | defines | owns |\n|---|---|---|\n"
            "| `mmasim/arith/formats.py` | `Format`, `decode_float` | formats |\n")
    rows = _package_rows(text)
    assert rows == [("mmasim/arith/formats.py", ["Format", "decode_float"])]
    assert _undefined(rows) == {"mmasim/arith/formats.py": ["decode_float"]}


def test_every_package_of_mmasim_is_installed():
    """``pip install .`` ships exactly the packages pyproject lists: every folder of mmasim/
    with an ``__init__.py`` (each one on the map) must be among them, or the installed
    package cannot import it (the editable install of the tests would not notice)."""
    try:
        import tomllib
    except ModuleNotFoundError:     # Python 3.10
        import tomli as tomllib
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]["packages"])
    packages = {".".join(p.parent.relative_to(ROOT).parts) for p in PACKAGE.rglob("__init__.py")}
    assert packages <= listed, f"packages pyproject.toml does not install: {sorted(packages - listed)}"


def test_the_string_to_words_example_runs():
    """The walk-through's example, as written.  Its words were worked out by hand (§3 with
    F = 24, L = 8, e_zero -132): 1 - 1 + 2^-30 in one step has E = 0, so 2^-30 is below the
    quantum 2^-24 and D = +0; with 2^-30 alone in the second step (C = +0 counts at -132),
    E = -30 keeps it exactly and D is the f32 word of 2^-30, 0x30800000."""
    blocks = re.findall(r"```python\n(.*?)```", _text(), re.S)
    assert blocks, "docs/architecture.md has no python example"
    scope: dict = {}
    for i, body in enumerate(blocks):
        exec(compile(body, f"architecture.md block {i}", "exec"), scope)
