"""Every ``pip install`` line of the README and docs/ runs as written and installs mmasim.

How a line is run without a network: each line is handed to ``bash`` as the docs print it,
with this environment's ``pip`` first on ``PATH``; pip's own environment variables swap the
package index for a local folder (``PIP_NO_INDEX``, ``PIP_FIND_LINKS``; ``PIP_CONFIG_FILE``
points at nothing so no configuration of this machine takes part) and ask for a resolution
only (``PIP_DRY_RUN``, ``PIP_IGNORE_INSTALLED``: as into a fresh environment; ``PIP_REPORT``:
what pip would install, as JSON).  The folder stands in for the index:

- this project's wheel, built from a copy of the working tree (``pip wheel``, once per module);
- for every other distribution installed here, a wheel of its metadata only (name, version,
  ``Requires-Dist``): the dependency graph the index would serve at the versions this
  environment holds;
- a stand-in for what the index serves under the name ``mmasim``: MMA-Sim 2.1.1, another
  project, whose own package would overwrite this one's files.  A line that names
  ``mmasim`` resolves to it and fails the test, as it fails a user;
- a package no test environment installs (NVIDIA's compiler wheels) gets an empty
  placeholder, so its line is still run: there the check is that pip accepts the line.

A full install into a fresh virtual environment would need every dependency's real wheel,
which cannot be had offline; the plugin example is the one line installed for real (into a
``--target`` folder by ``PIP_TARGET``: the plugin and mmasim from the wheel built here, the
dependencies as metadata over the ones this environment imports), and its usage example
then runs on what that line installed.

What the stand-in cannot tell apart is which index serves torch (the local folder replaces
every index), so a line that installs torch is checked to name PyTorch's CPU index.
Lines that begin with a path to another environment's ``pip`` (the MMA-Sim environment of
docs/peer-vectors.md) are not lines for mmasim's environment and are not collected.
"""

import email
import importlib.metadata
import json
import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import zipfile

import pytest
from test_docs import _blocks, _write_example

ROOT = pathlib.Path(__file__).resolve().parent.parent
DISTRIBUTION = "mmasim-exact"
CPU_INDEX = "--index-url https://download.pytorch.org/whl/cpu"
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))

pytestmark = pytest.mark.xdist_group("docs_install_lines")   # one worker builds the wheel once


def canonicalize_name(name):
    """A distribution name as indexes compare it (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(text):
    """The distribution a requirement (``name[extras] ; marker``, ``name==1.0``) names, or None."""
    m = re.match(r"\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*(\[|[<>=!~;@ ]|$)", text)
    return canonicalize_name(m.group(1)) if m else None


def doc_install_lines():
    """``(doc, line)`` for every ``pip install`` command the docs give: a code-block line that
    starts with it, or an inline code span in the prose."""
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        found = []
        for _, body in _blocks(text):
            found += [ln.strip() for ln in body.splitlines() if ln.strip().startswith("pip install ")]
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        found += re.findall(r"`(pip install [^`]+)`", prose)
        out += [(doc.relative_to(ROOT).as_posix(), line) for line in dict.fromkeys(found)]
    return out


LINES = doc_install_lines()


def _requirement_words(line):
    """The requirements a ``pip install`` line gives, as written (not paths, not options)."""
    words = shlex.split(line, comments=True)
    words = words[2:words.index("&&")] if "&&" in words else words[2:]
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        if w in ("--index-url", "-i", "--extra-index-url", "-f", "--find-links", "-c", "-r"):
            skip = True
            continue
        if w.startswith("-") or w.startswith((".", "/")):
            continue
        if requirement_name(w):
            out.append(w)
    return out


def _requirements(line):
    """The requirement names a ``pip install`` line gives (not paths, not options)."""
    return [requirement_name(w) for w in _requirement_words(line)]


def _stand_in_version(requirement):
    """A version that satisfies ``requirement``'s specifier (its pin, its lower bound, or 0)."""
    from packaging.requirements import Requirement

    spec = Requirement(requirement).specifier
    bounds = [s.version.removesuffix(".*") for s in spec if s.operator in ("==", ">=", "~=", "===")]   # 13.0.* -> 13.0
    candidates = bounds + ["0", "9999"]
    return next(v for v in candidates if spec.contains(v, prereleases=True))


def _wheel(folder: pathlib.Path, name, version, requires=(), extras=(), python=None):
    """A wheel of metadata only: ``name``'s dist-info, no code."""
    stem = f"{re.sub(r'[-_.]+', '_', name)}-{version}"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Python: {python}"] if python else []
    meta += [f"Provides-Extra: {e}" for e in extras] + [f"Requires-Dist: {r}" for r in requires]
    files = {f"{stem}.dist-info/METADATA": "\n".join(meta) + "\n",
             f"{stem}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: mmasim tests\nRoot-Is-Purelib: true\n"
                                        "Tag: py3-none-any\n"}
    files[f"{stem}.dist-info/RECORD"] = "".join(f"{p},,\n" for p in files) + f"{stem}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(folder / f"{stem}-py3-none-any.whl", "w") as z:
        for path, text in files.items():
            z.writestr(path, text)


def _pip_env(index: pathlib.Path, **pip):
    """The environment of a pip run against the stand-in index.  Builds use this environment's
    setuptools (``PIP_NO_BUILD_ISOLATION=0`` is how pip reads ``--no-build-isolation`` from the
    environment; an isolated build would fetch setuptools from the index, which holds only its
    metadata)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_") and k != "PYTHONPATH"}
    env.update(PATH=os.pathsep.join([str(pathlib.Path(sys.executable).parent), os.environ.get("PATH", "")]),
               PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(index),
               PIP_DISABLE_PIP_VERSION_CHECK="1", PIP_NO_INPUT="1", PIP_NO_BUILD_ISOLATION="0", **pip)
    return env


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    """The stand-in index and a copy of the working tree (the ``.`` of the README's lines),
    with the plugin guide's example package written into it (``./mmasim-toyarch``)."""
    base = tmp_path_factory.mktemp("install")
    src, index = base / "mmasim", base / "index"
    index.mkdir()
    ignore = shutil.ignore_patterns(".venv", ".git", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache")
    shutil.copytree(ROOT, src, ignore=ignore)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(index), "."],
                       cwd=src, capture_output=True, text=True, timeout=600, env=_pip_env(index))
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    shutil.rmtree(src / "build", ignore_errors=True)
    installed = {}
    for dist in importlib.metadata.distributions():
        name = dist.metadata["Name"]
        key = canonicalize_name(name or "")
        if not name or key in installed or key in (DISTRIBUTION, "mmasim"):
            continue
        installed[key] = dist.version
        _wheel(index, name, dist.version, dist.requires or (), dist.metadata.get_all("Provides-Extra") or (),
               dist.metadata.get("Requires-Python"))
    # what PyPI serves as "mmasim": MMA-Sim 2.1.1 (tools/peer/requirements.txt), torch and all
    _wheel(index, "mmasim", "2.1.1", ["torch", "numpy"])
    # what no test environment need hold: the requirements the docs' lines name and those of this
    # project's extras (torch, dask ... on a machine set up by the README's test line alone; the
    # [cuda] extra's CUDA 13.0 pins where a newer NVIDIA wheel is installed), at a version their
    # specifiers accept, with the extras they ask for
    from packaging.requirements import Requirement

    wanted = [w for _, line in LINES for w in _requirement_words(line)]
    wanted += [r.split(";")[0] for r in _wheel_metadata(index).get_all("Requires-Dist")]
    written = set()
    for text in wanted:
        req = Requirement(text)
        name, version = canonicalize_name(req.name), _stand_in_version(text)
        held = installed.get(name)
        if name in (DISTRIBUTION, "mmasim") or (name, version) in written:
            continue
        if held is None or not req.specifier.contains(held, prereleases=True):
            _wheel(index, req.name, version, extras=sorted(req.extras))
            written.add((name, version))
    _write_example(src)
    return src, index


def _wheel_metadata(index: pathlib.Path):
    (whl,) = index.glob("mmasim_exact-*.whl")
    with zipfile.ZipFile(whl) as z:
        (meta,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return email.message_from_bytes(z.read(meta))


def _resolve(line, src, index, tmp_path):
    report = tmp_path / "report.json"
    env = _pip_env(index, PIP_DRY_RUN="1", PIP_IGNORE_INSTALLED="1", PIP_REPORT=str(report), PIP_QUIET="1")
    r = subprocess.run(["bash", "-c", line], cwd=src, capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, (line, r.stdout[-3000:], r.stderr[-3000:])
    doc = json.loads(report.read_text(encoding="utf-8"))
    return {canonicalize_name(i["metadata"]["name"]): i for i in doc["install"]}


def _extras(line):
    """The extras of this project a line asks for: ``.[a,b]`` -> {a, b}."""
    return {e.strip() for group in re.findall(r"(?:^|\s)'?\.\[([^]]*)\]", line) for e in group.split(",")}


def _names_this_project(line):
    words = shlex.split(line, comments=True)[2:]
    return any(w == "." or w.startswith((".[", "./mmasim")) or canonicalize_name(w.split("[")[0]) == DISTRIBUTION
               for w in words if not w.startswith("-") or w == "-e")


def test_the_docs_give_the_install_lines():
    """The lines this module runs are the ones a newcomer meets (a collection that found
    nothing would pass every check below)."""
    lines = {line for _, line in LINES}
    assert "pip install ." in lines and "pip install ./mmasim-toyarch" in lines
    assert any("mmasim-exact[dask]" in ln for ln in lines)
    assert any(ln.startswith("pip install torch==") for ln in lines)


def test_the_wheel_is_mmasim_exact_with_its_extras(stand_in):
    meta = _wheel_metadata(stand_in[1])
    assert meta["Name"] == DISTRIBUTION
    extras = set(meta.get_all("Provides-Extra"))
    assert {"typed", "fast", "plot", "dask", "torch", "test"} <= extras
    assert {requirement_name(r) for r in meta.get_all("Requires-Dist")
            if "extra ==" not in r} >= {"numpy", "pluggy", "attrs", "tqdm"}


@pytest.mark.parametrize(("doc", "line"), LINES, ids=[f"{d}: {ln}" for d, ln in LINES])
def test_install_line_resolves_to_this_project(doc, line, stand_in, tmp_path):
    src, index = stand_in
    install = _resolve(line, src, index, tmp_path)
    assert "mmasim" not in install, f"{doc}: {line!r} installs MMA-Sim (PyPI's mmasim), not {DISTRIBUTION}"
    if "torch" in _requirements(line):
        assert CPU_INDEX in line, f"{doc}: {line!r} installs torch without naming PyTorch's CPU index"
    if not _names_this_project(line):
        return
    assert DISTRIBUTION in install, (doc, line, sorted(install))
    meta = _wheel_metadata(index)
    for extra in install[DISTRIBUTION].get("requested_extras") or ():
        wanted = {requirement_name(r) for r in meta.get_all("Requires-Dist")
                  if re.search(rf"extra\s*==\s*['\"]{extra}['\"]", r)}
        assert wanted, f"{doc}: {line!r} asks for an extra [{extra}] that {DISTRIBUTION} does not have"
        assert wanted <= set(install), (doc, line, extra, sorted(wanted - set(install)))


def test_a_torch_extra_line_follows_the_cpu_torch_line():
    """``.[torch]`` keeps the torch it finds: the docs install the CPU build first."""
    for doc in DOCS:
        lines = [ln for d, ln in LINES if d == doc.relative_to(ROOT).as_posix()]
        for i, line in enumerate(lines):
            if "torch" in _extras(line):
                assert any(ln.startswith("pip install torch") and CPU_INDEX in ln for ln in lines[:i]), (doc, line)


def test_no_doc_or_message_names_the_other_projects_extras():
    """``mmasim[...]`` is MMA-Sim with an extra it does not have; the extras are mmasim-exact's."""
    for path in DOCS + sorted((ROOT / "mmasim").rglob("*.py")) + sorted((ROOT / "tests").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not re.search(r"(?<![\w-])mmasim\[\w", text), path


def test_plugin_example_installs_as_written_and_runs(stand_in, tmp_path):
    """The plugin guide's ``pip install ./mmasim-toyarch``, really installed (into a target
    folder): its declared dependency brings mmasim-exact from the wheel built here, and
    the usage example runs on what was installed, the plugin found through its entry point."""
    src, index = stand_in
    target = tmp_path / "site"
    env = _pip_env(index, PIP_TARGET=str(target), PIP_QUIET="1")
    r = subprocess.run(["bash", "-c", "pip install ./mmasim-toyarch"], cwd=src, capture_output=True, text=True,
                       timeout=600, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    installed = {canonicalize_name(p.name.split("-")[0]) for p in target.glob("*.dist-info")}
    assert {"mmasim-toyarch", DISTRIBUTION} <= installed and "mmasim" not in installed, sorted(installed)
    assert (target / "mmasim" / "__init__.py").exists() and (target / "toyarch" / "toy.toml").exists()
    _, snippets = _write_example(tmp_path / "example")
    usage = tmp_path / "usage.py"
    usage.write_text("import mmasim, pathlib\nassert pathlib.Path(mmasim.__file__).is_relative_to("
                     f"{str(target)!r}), mmasim.__file__\n" + snippets["usage"], encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PIP_")}
    env["PYTHONPATH"] = str(target)
    r = subprocess.run([sys.executable, str(usage)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                       env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "mma.sync.m16n8k8.f32.toy8.toy8" in r.stdout
