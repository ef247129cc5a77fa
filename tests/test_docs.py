"""The docs stay true: the generated reference, the user guide's examples, the
plugin guide's example plugin (registered and loaded through its entry point; its install
line: tests/test_docs_install_lines.py), the vector format."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

import mmasim
from mmasim import backends
from mmasim.vectors import files as vectors

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _blocks(text, lang=None):
    return [(l, body) for l, body in re.findall(r"```(\w*)\n(.*?)```", text, re.S) if lang in (None, l)]


def test_reference_is_what_the_generator_writes():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_reference
    finally:
        sys.path.pop(0)
    assert (DOCS / "reference.md").read_text(encoding="utf-8") == gen_reference.generate(), \
        "docs/reference.md is stale: run python tools/gen_reference.py"


def test_reference_lists_every_builtin_datapath_with_its_status():
    text = (DOCS / "reference.md").read_text(encoding="utf-8")
    reg = mmasim.get_registry()
    for name in ("Blackwell", "Ampere", "Hopper"):
        if name not in reg.architectures:
            continue
        assert f"## {name}" in text
        for dp in reg.architectures[name].datapaths:
            assert f"`{dp.canonical(reg.formats)}`" in text
    assert "| tcgen05.mma" not in text  # names are code-quoted
    assert "hardware [" in text and "peer [" in text


def test_user_guide_examples_run():
    text = (DOCS / "user-guide.md").read_text(encoding="utf-8")
    scope = {}
    blocks = _blocks(text, "python")
    assert len(blocks) >= 8
    for i, (_, body) in enumerate(blocks):
        exec(compile(body, f"user-guide.md block {i}", "exec"), scope)


def test_quantize_page_examples_run():
    text = (DOCS / "quantize.md").read_text(encoding="utf-8")
    blocks = _blocks(text, "python")
    assert blocks
    scope = {}
    for i, (_, body) in enumerate(blocks):
        exec(compile(body, f"quantize.md block {i}", "exec"), scope)


def test_user_guide_covers_the_topics():
    text = (DOCS / "user-guide.md").read_text(encoding="utf-8").lower()
    for topic in ("raw words", "typed arrays", "matrix form", "block scales", "sparsity", "errors"):
        assert f"## {topic}" in text


def test_vector_format_doc_matches_the_implementation():
    text = (DOCS / "vectors.md").read_text(encoding="utf-8")
    for name in vectors._REQUIRED + vectors._OPTIONAL:
        assert f"`{name}`" in text
    for source in vectors.SOURCES:
        assert f"`{source}`" in text
    for policy in vectors.NAN_POLICIES:
        assert f"`{policy}`" in text
    assert vectors.FORMAT in text and f"v{vectors.VERSION}" in text


# ------------------------------------------------------------ the plugin guide
def _write_example(tmp: pathlib.Path):
    text = (DOCS / "plugins.md").read_text(encoding="utf-8")
    snippets = {}
    for _, body in _blocks(text):
        first = body.splitlines()[0] if body.strip() else ""
        m = re.match(r"# file: (\S+)", first)
        if m:
            path = tmp / m.group(1)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body.split("\n", 1)[1], encoding="utf-8")
        elif first.startswith("# usage") or first.startswith("# register"):
            snippets[first[2:].split()[0]] = body
    assert {"usage", "register"} <= set(snippets)
    pkg = tmp / "mmasim-toyarch"
    assert (pkg / "pyproject.toml").exists() and (pkg / "toyarch" / "__init__.py").exists()
    assert (pkg / "toyarch" / "toy.toml").exists()
    return pkg, snippets


def _env(**extra):
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(extra)
    return env


def _run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, **kw)


def test_plugin_example_registers_at_run_time(tmp_path):
    pkg, snippets = _write_example(tmp_path)
    (tmp_path / "register.py").write_text(snippets["register"])
    r = _run([sys.executable, str(tmp_path / "register.py")], env=_env(PYTHONPATH=str(pkg)), cwd=tmp_path)
    assert r.returncode == 0, r.stderr


def test_plugin_example_loads_through_its_entry_point(tmp_path):
    """What `pip install` leaves behind, written by hand: a dist-info with the
    entry point on sys.path.  Every mmasim process then loads the plugin."""
    pkg, snippets = _write_example(tmp_path)
    dist = pkg / "mmasim_toyarch-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mmasim-toyarch\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[mmasim]\ntoyarch = toyarch\n")
    (tmp_path / "usage.py").write_text(snippets["usage"])
    env = _env(PYTHONPATH=str(pkg))
    r = _run([sys.executable, str(tmp_path / "usage.py")], env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "mma.sync.m16n8k8.f32.toy8.toy8" in r.stdout
    assert "decoder 'toy8-log'" in r.stdout
    r = _run([sys.executable, "-m", "mmasim", "list", "Toy"], env=env, cwd=tmp_path)
    assert r.returncode == 0 and "mma.sync.m16n8k8.f32.toy8.toy8" in r.stdout
    r = _run([sys.executable, "-m", "mmasim", "explain", "TOY-1", "m16n8k8.f32.toy8.toy8"], env=env, cwd=tmp_path)
    assert r.returncode == 0 and "F=20" in r.stdout
    # the guide's "one or the other": the register block on top of the installed plugin conflicts
    (tmp_path / "both.py").write_text("import mmasim\ntry:\n" + "".join(
        "    " + ln + "\n" for ln in snippets["register"].splitlines()) +
        "except mmasim.errors.PluginConflict as exc:\n    print('conflict:', exc)\n")
    r = _run([sys.executable, str(tmp_path / "both.py")], env=env, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith("conflict: plugin 'toyarch'"), (r.stdout, r.stderr)


def _readme_python_blocks():
    text = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    blocks = [body for _, body in _blocks(text, "python")]
    assert len(blocks) >= 3
    return blocks


def _needs_torch(body):
    return re.search(r"^\s*import torch\b|^\s*from torch\b", body, re.M) is not None


def test_readme_python_examples_run(capsys):
    """Every README example that needs only the core and the test extra runs, printing the
    values the README states."""
    scope = {}
    for i, body in enumerate(_readme_python_blocks()):
        if not _needs_torch(body):
            exec(compile(body, f"README.md block {i}", "exec"), scope)
    out = capsys.readouterr().out
    assert "0x41100000" in out and "0x3f800000" in out and "0x42800000" in out   # the values the README states


def test_readme_torch_examples_run():
    """The README's torch examples (the `torch` line under Install), where torch is installed."""
    pytest.importorskip("torch", reason="the README's torch examples need torch (the torch line under Install)")
    blocks = [b for b in _readme_python_blocks() if _needs_torch(b)]
    assert blocks
    for i, body in enumerate(blocks):
        exec(compile(body, f"README.md torch block {i}", "exec"), {})


# installation (tests/test_docs_install_lines.py runs those lines), venv set-up, the test suite
_SETUP = ("pip install", "python3 -m venv", "python -m venv", ". .venv/bin/activate", "pytest")


def _readme_commands():
    """Every command line of the README's ``sh`` blocks, except installation and venv set-up."""
    text = (DOCS.parent / "README.md").read_text(encoding="utf-8")
    out = []
    for _, body in _blocks(text, "sh"):
        for line in body.splitlines():
            line = line.strip()
            if not line or line.startswith("#") or line.startswith(_SETUP):
                continue
            out.append(line)
    return out


def test_readme_commands_are_real_subcommands():
    import shlex

    from mmasim.cli.main import build_parser

    sub = build_parser()._subparsers._group_actions[0].choices
    cmds = _readme_commands()
    assert "mmasim validate" in cmds                     # the main job stays in the README
    for line in cmds:
        words = shlex.split(line, comments=True)
        assert words[0] == "mmasim", line
        assert words[1] in sub or words[1].startswith("--"), line
        assert "..." not in words and "[ARCH]" not in line, f"not a complete command: {line}"


def test_readme_shell_commands_run_verbatim(tmp_path):
    """Each README command, as written, in a shell with this environment's ``mmasim`` first on PATH:
    exit status 0, no traceback, no error message."""
    env = _env(PATH=os.pathsep.join([str(pathlib.Path(sys.executable).parent), os.environ.get("PATH", "")]))
    cmds = _readme_commands()
    assert len(cmds) >= 8
    for line in cmds:
        r = subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
        assert r.returncode == 0, (line, r.stdout[-2000:], r.stderr[-2000:])
        assert r.stdout.strip(), line
        assert "Traceback" not in r.stderr and "error" not in r.stderr, (line, r.stderr)
        if line.startswith("mmasim run") and "33C00000" in line:
            assert "D = 0x3F800000" in r.stdout                  # truncation, as the README says
        elif line.startswith("mmasim run"):
            assert "D = 0x40000000" in r.stdout                  # 1 x 1 + 1 = 2.0, as the README says
        elif line == "mmasim validate":
            assert r.stdout.rstrip().splitlines()[-1].startswith("OK: ")
            assert "cases by evidence source:" in r.stdout


def _documented_schemas():
    text = (DOCS / "user-guide.md").read_text(encoding="utf-8")
    section = text[text.index("## JSON output"):]
    import json

    docs = [json.loads(body) for _, body in _blocks(section, "json")]
    return {d["schema"]: d for d in docs}


def test_json_output_schemas_are_documented(tmp_path, capsys, monkeypatch):
    """Every command's --json document has the keys docs/user-guide.md ("JSON output") shows for its schema."""
    import json

    from mmasim.cli.main import main
    from mmasim.harness import measure as hrun

    documented = _documented_schemas()
    assert set(documented) == {f"mmasim.{c}/1" for c in ("list", "explain", "run", "compare", "validate", "plugins",
                                                         "layout", "harness-generate", "harness-run", "error", "accuracy", "warmup",
                                                         "presets")}
    # harness run on the simulator of the placed registers (no GPU needed)
    monkeypatch.setattr(hrun, "default_device", lambda model: hrun.SimulatedDevice("simulated GPU", "8.0"))
    good = ROOT / "vectors" / "hardware" / "blackwell" / "tf32-probe-ladder.hardware.npz"
    runs = {
        "list": ["list", "B200"],
        "explain": ["explain", "B200", "tcgen05.kind::mxf4nvf4.4X"],
        "run": ["run", "B200", "tcgen05.mma.kind::tf32", "--a", "3F800000 0 0 0 0 0 0 0",
                "--b", "3F800000 0 0 0 0 0 0 0", "--c", "3F800000"],
        "compare": ["compare", "A100", "H100", "m16n8k16.f32.f16.f16.f32", "--cases", "300"],
        "validate": ["validate", "-q", str(good)],
        "plugins": ["plugins"],
        "layout": ["layout", "A100", "mma.sync.m16n8k16.f32.f16.f16"],
        "harness-generate": ["harness", "generate", "Ampere", "mma.sync.m16n8k8.f32.tf32.tf32", "mma.sync.m8n8k4.f16.f16.f16",
                             "--out", str(tmp_path / "k")],
        "harness-run": ["harness", "run", "Ampere", "mma.sync.m16n8k8.f32.tf32.tf32", "mma.sync.m16n8k32.s32.s8.s8",
                        "--probes", "--cases", "1", "--out", str(tmp_path / "v")],
        "error": ["run", "B200", "nope", "--a", "0", "--b", "0", "--c", "0"],
        "accuracy": ["accuracy", "H100", "wgmma.mma_async.k32.f32.e4m3.e4m3", "--k", "32", "--n", "8",
                     "--promote-every", "32"],
        "warmup": ["warmup", "MI100", "--jobs", "1", "-q"],     # the CDNA1 kernels (compiled or loaded)
        "presets": ["presets"],
    }
    if not backends.numba_available():
        del runs["warmup"]          # nothing to compile without numba

    open_maps = ("parameters", "by_kind", "device")   # keys depend on the datapath / the generators / the device

    def same_keys(doc, got, where):
        assert set(doc) == set(got), (where, sorted(doc), sorted(got))
        for key, value in doc.items():
            if key in open_maps:
                continue
            if isinstance(value, dict) and value and isinstance(got[key], dict):
                same_keys(value, got[key], f"{where}.{key}")
            elif isinstance(value, list) and value and isinstance(value[0], dict) and got[key]:
                same_keys(value[0], got[key][0], f"{where}.{key}[0]")

    for cmd, argv in runs.items():
        assert main(argv + ["--json"]) == (1 if cmd == "error" else 0), cmd
        got = json.loads(capsys.readouterr().out)
        doc = documented[f"mmasim.{cmd}/1"]
        assert got["schema"] == doc["schema"]
        same_keys(doc, got, cmd)


def test_plugins_json_example_is_a_real_record(capsys):
    """The user guide's mmasim.plugins/1 example is, value for value, what mmasim plugins --json
    prints for that plugin (source spelling, null distribution and entry point, availability)."""
    import json

    from mmasim.cli.main import main

    (example,) = _documented_schemas()["mmasim.plugins/1"]["plugins"]
    assert main(["plugins", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)["plugins"]}
    assert rows[example["name"]] == example


def test_accuracy_page_commands_print_what_it_shows(tmp_path):
    """docs/accuracy.md: each ``sh`` block is one command followed by a ``text`` block with
    what it prints; each runs as written (in a scratch folder, so the figure lands there)
    and prints exactly that."""
    text = (DOCS / "accuracy.md").read_text(encoding="utf-8")
    blocks = _blocks(text)
    pairs = [(cmd.strip(), out) for (lang, cmd), (nxt, out) in zip(blocks, blocks[1:])
             if lang == "sh" and nxt == "text"]
    assert len(pairs) == sum(1 for lang, _ in blocks if lang == "sh") >= 3
    (tmp_path / "docs").mkdir()
    env = _env(PATH=os.pathsep.join([str(pathlib.Path(sys.executable).parent), os.environ.get("PATH", "")]),
               MMASIM_BACKEND="numpy")
    for cmd, shown in pairs:
        assert cmd.startswith("mmasim accuracy ") and "\n" not in cmd
        r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=900, env=env, cwd=tmp_path)
        assert r.returncode == 0, (cmd, r.stderr[-2000:])
        assert r.stdout == shown, cmd
    for figure in re.findall(r"!\[[^]]*\]\(([^)]+)\)", text):
        assert (DOCS / figure).stat().st_size > 10000, figure          # the committed figure
        assert (tmp_path / "docs" / figure).stat().st_size > 10000, figure   # and the one the command drew


def _shown(doc, real, where):
    """``doc``, a documented JSON value, shows ``real``: equal, a "..." string stands for any value,
    a list ending in "..." for a list that starts so, a float for a real number rounded to the
    significant digits it is written with; a dict shows the keys it names."""
    if doc == "...":
        return
    if isinstance(doc, dict):
        assert isinstance(real, dict), where
        for key, value in doc.items():
            assert key in real, (where, key)
            _shown(value, real[key], f"{where}.{key}")
    elif isinstance(doc, list):
        assert isinstance(real, list), where
        cut = bool(doc) and doc[-1] == "..."
        shown = doc[:-1] if cut else doc
        assert (len(real) >= len(shown)) if cut else (len(real) == len(shown)), (where, doc, real)
        for i, value in enumerate(shown):
            _shown(value, real[i], f"{where}[{i}]")
    elif isinstance(doc, float) and isinstance(real, (int, float)) and not isinstance(real, bool):
        digits = len(re.sub(r"^0\.0*|\.|e.*$", "", repr(doc)).lstrip("0")) or 1
        assert float(f"{real:.{digits}g}") == doc, (where, doc, real)
    else:
        assert doc == real and type(doc) is type(real), (where, doc, real)


def _example_command(schema):
    """The command docs/user-guide.md names as its example of ``schema`` (`the example is `...``)."""
    text = (DOCS / "user-guide.md").read_text(encoding="utf-8")
    m = re.search(rf"`{re.escape(schema)}`[^`]*`[^`]*`; the example is `([^`]+)`", text)
    assert m, f"docs/user-guide.md names no example command for {schema}"
    return " ".join(m.group(1).split())


@pytest.mark.parametrize("schema", ["mmasim.compare/1", "mmasim.accuracy/1"])
def test_json_examples_show_what_their_command_prints(schema, capsys):
    """The compare and accuracy examples are that command's output, value for value (a documented
    example once showed a status and a largest difference the command does not print)."""
    import json
    import shlex

    from mmasim.cli.main import main

    argv = shlex.split(_example_command(schema))
    assert argv[0] == "mmasim" and "--json" in argv
    assert main(argv[1:]) == 0
    _shown(_documented_schemas()[schema], json.loads(capsys.readouterr().out), schema)


def test_json_examples_state_each_datapaths_real_status():
    """Every documented record naming an architecture, an instruction and a status gives the
    status that datapath has."""
    def records(value):
        if isinstance(value, dict):
            if {"arch", "instruction", "status"} <= set(value) and isinstance(value["status"], str):
                yield value
            for v in value.values():
                yield from records(v)
        elif isinstance(value, list):
            for v in value:
                yield from records(v)

    found = [r for doc in _documented_schemas().values() for r in records(doc)]
    assert len(found) >= 3
    for r in found:
        assert mmasim.MMA(r["arch"], r["instruction"]).datapath.status.kind == r["status"], r


def test_a_doctored_json_example_is_caught():
    """The comparison fails on a wrong status, a wrong number, a rounded number that is off and a
    list that is not the start of the real one."""
    real = {"status": "hardware", "max_difference": 8388608.0, "x": 0.0008520853863651519, "a": ["0x1", "0x2", "0x3"]}
    _shown({"status": "hardware", "max_difference": 8388608.0, "x": 0.00085, "a": ["0x1", "..."]}, real, "ok")
    for bad in ({"status": "peer"}, {"max_difference": 1.0}, {"x": 0.00086}, {"a": ["0x2", "..."]}, {"a": ["0x1"]}):
        with pytest.raises(AssertionError):
            _shown(bad, real, "bad")
