"""The mmasim command line: list, explain, run."""

import json
import subprocess
import sys

import pytest

from mmasim.cli.main import main


def test_list_architectures(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "Blackwell" in out and "B200" in out


def test_list_one_architecture(capsys):
    assert main(["list", "B200"]) == 0
    out = capsys.readouterr().out
    assert "tcgen05.mma.kind::tf32.f32.tf32.tf32" in out and "hardware" in out


def test_explain(capsys):
    assert main(["explain", "B200", "tcgen05.kind::mxf4nvf4.4X"]) == 0
    out = capsys.readouterr().out
    assert "ue4m3" in out and "validation: hardware" in out and "window" in out


def test_run_prints_word_and_value(capsys):
    ones = " ".join(["3F800000"] * 8)
    assert main(["run", "B200", "tcgen05.mma.kind::tf32", "--a", ones, "--b", ones, "--c", "0x3F800000"]) == 0
    out = capsys.readouterr().out
    assert "D = 0x41100000" in out and "9.0" in out


def test_run_with_qualifiers_scales_and_sparsity(capsys):
    assert main(["run", "B200", "tcgen05.mma.kind::f8f6f4", "--a-type", "e4m3", "--b-type", "e2m1", "--d-type", "f16",
                 "--a", " ".join(["38"] * 32), "--b", " ".join(["08"] * 32), "--c", "0"]) == 0
    assert "D = 0x5000" in capsys.readouterr().out          # 32 * 1.0 * 1.0 = 32.0 in f16
    assert main(["run", "B200", "tcgen05.kind::mxf4nvf4.4X", "--a", " ".join(["2"] * 64), "--b", " ".join(["2"] * 64),
                 "--c", "0", "--scale-a", "38 38 38 38", "--scale-b", "40 40 40 40"]) == 0
    assert "D = 0x43000000" in capsys.readouterr().out      # 64 * 2.0 = 128.0
    assert main(["run", "B200", "tcgen05.mma.sp.kind::tf32", "--a", " ".join(["3F800000"] * 16),
                 "--b", " ".join(["3F800000"] * 16), "--c", "0", "--sparse-metadata", "44444444"]) == 0
    assert "D = 0x41000000" in capsys.readouterr().out


def test_errors_are_one_line_messages(capsys):
    # a failure (an MMAError) exits 1 with one line on stderr, the candidates on it
    assert main(["run", "B200", "tcgen05.mma.kind::f16", "--a", "0", "--b", "0", "--c", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mmasim: error:") and "matches 3 datapaths" in err
    assert err.count("\n") == 1 and "tcgen05.mma.kind::f16.f32.bf16.bf16" in err
    assert main(["explain", "Nope", "x"]) == 1
    err = capsys.readouterr().err
    assert "unknown architecture" in err and err.count("\n") == 1


def test_console_script_runs_as_module():
    out = subprocess.run([sys.executable, "-m", "mmasim", "list"], capture_output=True, text=True)
    assert out.returncode == 0 and "Blackwell" in out.stdout


def _one_usage_error(capsys, argv, *needles):
    assert main(argv) == 2, argv
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith("mmasim") and ": error: " in err and "Traceback" not in err
    for n in needles:
        assert n in err, (n, err)


F16 = ["A100", "H100", "m16n8k16.f32.f16.f16.f32"]


def test_no_traceback_compare_cases_zero_or_negative(capsys):
    _one_usage_error(capsys, ["compare", *F16, "--cases", "0"], "--cases", "at least 1")
    _one_usage_error(capsys, ["compare", *F16, "--cases", "-5"], "--cases", "at least 1")
    _one_usage_error(capsys, ["compare", *F16, "--cases", "many"], "--cases", "integer")


def test_no_traceback_compare_negative_seed(capsys):
    _one_usage_error(capsys, ["compare", *F16, "--seed", "-1"], "--seed", "at least 0")


def test_no_traceback_compare_plot_into_missing_folder_or_unknown_type(tmp_path, capsys):
    _one_usage_error(capsys, ["compare", *F16, "--plot", str(tmp_path / "nope" / "d.png")], "no folder")
    _one_usage_error(capsys, ["compare", *F16, "--plot", str(tmp_path / "d.xyz")], "image type", ".png")
    _one_usage_error(capsys, ["compare", *F16, "--plot", str(tmp_path / "d")], "image type")


def test_no_traceback_bad_words_and_unknown_options(capsys):
    _one_usage_error(capsys, ["run", "B200", "tcgen05.mma.kind::tf32", "--a", "zz", "--b", "0", "--c", "0"],
                     "not a hex word")
    _one_usage_error(capsys, ["run", "B200", "tcgen05.mma.kind::tf32", "--a", "-1", "--b", "0", "--c", "0"],
                     "not a hex word")
    _one_usage_error(capsys, ["list", "--colour"], "unrecognized arguments")
    _one_usage_error(capsys, ["validate", "--show", "-2"], "--show")
    _one_usage_error(capsys, [], "required")


def test_failure_exits_1_with_one_line(capsys):
    # the wrong number of words: a ShapeError, one line
    assert main(["run", "B200", "tcgen05.mma.kind::tf32", "--a", "0", "--b", "0", "--c", "0"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mmasim: error: ") and err.count("\n") == 1 and "shape" in err


def test_version(capsys):
    from importlib.metadata import version

    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"mmasim {version('mmasim-exact')}"


def test_list_json_schema(capsys):
    assert main(["list", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "mmasim.list/1"
    names = [a["name"] for a in doc["architectures"]]
    assert "Blackwell" in names and "Ampere" in names
    assert main(["list", "B200", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    (bw,) = doc["architectures"]
    assert bw["name"] == "Blackwell" and "B200" in bw["aliases"]
    tf32 = [d for d in bw["datapaths"] if d["instruction"] == "tcgen05.mma.kind::tf32.f32.tf32.tf32"]
    assert tf32 and tf32[0]["status"] == "hardware"


def test_explain_json_schema(capsys):
    assert main(["explain", "B200", "tcgen05.kind::mxf4nvf4.4X", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "mmasim.explain/1" and doc["arch"] == "Blackwell"
    # NVFP4: e2m1 operands, ue4m3 scales, one per 16 elements, K = 64
    assert doc["formats"]["a"]["name"] == "e2m1" and doc["scale"]["format"]["name"] == "ue4m3"
    assert doc["scale"]["block"] == 16 and doc["k"] == 64
    assert doc["status"]["kind"] == "hardware" and "validation: hardware" in doc["text"]


def test_run_json_schema(capsys):
    ones = " ".join(["3F800000"] * 8)
    assert main(["run", "B200", "tcgen05.mma.kind::tf32", "--a", ones, "--b", ones, "--c", "3F800000", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "mmasim.run/1"
    assert doc["d"]["word"] == "0x41100000" and doc["d"]["value"].startswith("9.0")     # 8 * 1 * 1 + 1
    assert len(doc["inputs"]["a"]) == 8 and doc["inputs"]["c"]["word"] == "0x3F800000"


def test_compare_json_schema_and_more_than_two_architectures(capsys):
    # f16 m16n8k16: Ampere and Ada chain two F=24 steps of 8, Hopper and RTX Blackwell one F=25 window
    # over all 16 (docs/datapaths.md §3): each is compared with the first architecture named
    argv = ["compare", "A100", "H100", "L40S", "RTX 5090", "m16n8k16.f32.f16.f16.f32", "--cases", "600"]
    assert main(argv + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "mmasim.compare/1" and doc["cases"] == 600 and doc["seed"] == 0
    assert doc["reference"]["arch"] == "Ampere"
    pairs = {p["other"]["arch"]: p for p in doc["pairs"]}
    assert list(pairs) == ["Hopper", "Ada Lovelace", "RTX Blackwell"]
    for name in ("Hopper", "RTX Blackwell"):
        p = pairs[name]
        assert p["cases"] == 600 and p["differ"] > 0 and p["unit"] == "ULPs of f32"
        assert p["example"]["d_reference"] != p["example"]["d_other"]
    assert pairs["Ada Lovelace"]["differ"] == 0 and pairs["Ada Lovelace"]["example"] is None
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "summary: each against Ampere" in out and "Ada Lovelace     differs in      0 cases" in out


def test_plugins_lists_every_plugin_with_status(capsys):
    import mmasim

    assert main(["plugins"]) == 0
    out = capsys.readouterr().out
    for name in mmasim.DEFAULT_PLUGINS:
        assert name in out
    assert " 0 failed" in out
    assert main(["plugins", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "mmasim.plugins/1"
    rows = {r["name"]: r for r in doc["plugins"]}
    assert set(mmasim.DEFAULT_PLUGINS) <= set(rows)
    for r in rows.values():
        assert set(r) == {"name", "source", "distribution", "entry_point", "ok", "error", "available",
                          "why_unavailable"}
    assert rows["mmasim_plugins.blackwell"]["ok"] is True


def test_plugins_shows_a_failed_plugin(capsys, monkeypatch):
    import attrs

    from mmasim.registry import registration

    @attrs.frozen
    class Rec:
        name: str
        source: str
        distribution: str
        entry_point: str
        ok: bool
        error: str
        unavailable: str | None = None

    monkeypatch.setattr(registration, "status", lambda: [
        Rec("good", "entry point", "good-dist", "good", True, ""),
        Rec("broken", "entry point", "bad-dist", "broken", False, "ImportError: no module named 'x'\x1b[2J")],
        raising=False)
    assert main(["plugins"]) == 1
    out = capsys.readouterr().out
    assert "FAILED: ImportError: no module named 'x'\\x1b[2J" in out and "\x1b" not in out
    assert "2 plugins, 1 failed" in out


def test_control_characters_from_tables_are_escaped(capsys):
    import mmasim

    table = {
        "architecture": {"name": "Evil\x1b[2J", "vendor": "x", "description": "clears\x1b[2J\nOK: fake",
                         "aliases": ["evil"]},
        "datapath": [{"op": "mma.sync", "a": "f16", "b": "f16", "d": "f32", "k": 16, "accumulator": "window",
                      "params": {"F": 24, "zeros": -132}, "rounding": "rz-f32", "m": [16], "n": [8]}],
    }

    class P:
        @mmasim.hookimpl
        def mmasim_architectures(self):
            return [table]

    # tables are refused at load (mmasim.registry.tables), so the text never reaches a terminal;
    # the display layer's escaping is checked on vector files above
    with pytest.raises(mmasim.TableError, match="control characters"):
        mmasim.register(P(), name="evil-table")
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "Evil" not in out


# ------------------------------------------------------------ mmasim list agrees with MMA()
def _listed(capsys, arch):
    """The instructions ``mmasim list ARCH`` prints, and those ``--json`` gives."""
    assert main(["list", arch]) == 0
    text = [line.split()[0] for line in capsys.readouterr().out.splitlines()[1:]]
    assert main(["list", arch, "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["architectures"]
    return text, [d["instruction"] for d in entry["datapaths"]]


def test_every_datapath_list_shows_resolves_with_MMA_and_every_other_is_refused(capsys):
    import mmasim

    reg = mmasim.get_registry()
    assert main(["list"]) == 0
    counts = {line[:16].strip(): int(line[16:].split()[0]) for line in capsys.readouterr().out.splitlines()
              if "datapaths" in line}
    for arch in mmasim.architectures():
        text, doc = _listed(capsys, arch)
        assert text == doc and len(text) == counts[arch], arch
        for instruction in text:
            assert mmasim.MMA(arch, instruction).datapath.canonical(reg.formats) == instruction
        for dp in reg.architectures[arch].datapaths:      # what list leaves out, MMA() refuses
            name = dp.canonical(reg.formats)
            if name not in text:
                with pytest.raises(mmasim.UnsupportedDatapath):
                    mmasim.MMA(arch, name)


def test_blackwell_ultra_lists_no_integer_tcgen05_mma(capsys):
    # PTX ISA 9.0, tcgen05.mma Target ISA Notes: .kind::i8 on sm_100a / sm_101a (sm_110a), not sm_103a
    text, _ = _listed(capsys, "B300")
    assert text and not [i for i in text if "kind::i8" in i]
    b200, _ = _listed(capsys, "B200")
    assert len([i for i in b200 if i.startswith("tcgen05") and "kind::i8" in i]) == 48
    assert len(text) == len(b200) - 48
