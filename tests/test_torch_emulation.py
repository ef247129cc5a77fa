"""mmasim.torch settings: every Emulation field checked when it is made, presets found by name
or with close matches, the presets table and ``mmasim presets`` (docs/torch.md).

What each field accepts is written here from the Emulation docstring and docs/torch.md, not read
from the validators: any other value must raise EmulationError naming the field."""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mmasim
import mmasim.torch as mt
from mmasim.cli.main import main
from mmasim.quantization.casts import element_formats

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "torch.md"
A100 = ("A100", "mma.sync.m16n8k16.f32.bf16.bf16.f32")
#: the recipes mmasim.quantize documents (docs/quantize.md); plain casts are the element formats
RECIPES = ("mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4", "nvfp4", "deepseek_fp8")


def _positive_int(v):
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v >= 1


def _qualifier_entries(v):
    if isinstance(v, dict):
        items = list(v.items())
    elif isinstance(v, (list, tuple)) and all(isinstance(i, tuple) and len(i) == 2 for i in v):
        items = list(v)
    else:
        return False
    return (all(isinstance(k, str) and isinstance(x, (str, int, bool)) for k, x in items)
            and len({k for k, _ in items}) == len(items))


#: field -> (the other fields it is tried with, whether a value is accepted)
FIELDS = {
    "arch": ({}, lambda v: isinstance(v, str) and v.strip() != ""),
    "instruction": ({}, lambda v: isinstance(v, str) and v.strip() != ""),
    "scaling": ({}, lambda v: v in ("cast", "tensor")),         # "scheme" needs scheme=
    "scheme": ({"scaling": "scheme"}, lambda v: isinstance(v, str) and (v in RECIPES or v in element_formats())),
    "saturate": ({}, lambda v: isinstance(v, bool)),
    "promote_every": ({}, lambda v: v is None or _positive_int(v)),
    "split_k": ({}, lambda v: v is None or _positive_int(v)),
    "split_reduce": ({}, lambda v: v in ("sequential", "tree")),
    "output": ({}, lambda v: v is None or (isinstance(v, str) and v in element_formats())),
    "attention": ({}, lambda v: v in ("softmax", "fa3-fp8", "fa3-fp8-flash", "cudnn-mxfp8", "sage3-nvfp4")),
    "b_tile": ({"scaling": "scheme", "scheme": "deepseek_fp8"},
               lambda v: v is None or (isinstance(v, (tuple, list)) and len(v) == 2 and all(map(_positive_int, v)))),
    "qualifiers": ({}, _qualifier_entries),
    "dgrad": ({}, lambda v: v is None or isinstance(v, mt.Emulation)),
    "wgrad": ({}, lambda v: v is None or isinstance(v, mt.Emulation)),
    "description": ({}, lambda v: isinstance(v, str)),
}

_words = st.sampled_from(["", " ", "cast", "tensor", "scheme", "row", "sequential", "tree", "bf16", "f16", "e4m3",
                          "softmax", "fa3-fp8", "fa3", "cudnn-mxfp8", "sage3-nvfp4", "sage3",
                          "nvfp4", "mxfp8", "deepseek_fp8", "H100", "d_type", "f32"])
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 300), st.floats(allow_nan=False, width=32),
                     _words, st.text(max_size=6), st.just(object()),
                     st.just(mt.Emulation(*A100)))
VALUES = st.one_of(
    _scalars,
    st.lists(st.integers(-2, 300), max_size=3),
    st.tuples(st.integers(-2, 300), st.integers(-2, 300)),
    st.lists(st.tuples(st.one_of(_words, st.integers(0, 3)), _scalars), max_size=2),
    st.dictionaries(st.one_of(_words, st.integers(0, 3)), _scalars, max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(field=st.sampled_from(sorted(FIELDS)), value=VALUES)
def test_every_emulation_field_takes_what_it_documents_and_names_itself_otherwise(field, value):
    others, accepted = FIELDS[field]
    kwargs = {"arch": A100[0], "instruction": A100[1], **others, field: value}
    if accepted(value):
        em = mt.Emulation(**kwargs)
        assert hash(em) == hash(mt.Emulation(**kwargs))          # frozen, usable as a key
    else:
        with pytest.raises(mt.EmulationError, match=rf"Emulation: .*\b{field}\b") as e:
            mt.Emulation(**kwargs)
        assert isinstance(e.value, mmasim.MMAError)


def test_the_issues_examples_are_emulation_errors_naming_the_field():
    with pytest.raises(mt.EmulationError, match=r"b_tile must be None or a pair of positive integers.*not 5"):
        mt.Emulation(*A100, b_tile=5)
    with pytest.raises(mt.EmulationError, match=r"qualifiers must be a mapping .*not 5"):
        mt.Emulation(*A100, qualifiers=5)
    with pytest.raises(mt.EmulationError, match=r"b_tile is the tile of B's scales under a scheme that takes tiles \(nvfp4, deepseek_fp8\)"):
        mt.Emulation(*A100, b_tile=(128, 128))                  # ignored before: now refused


def test_qualifiers_are_kept_as_sorted_pairs_and_survive_evolve():
    import attrs
    em = mt.Emulation(*A100, qualifiers={"d_type": "f32", "a_type": "bf16"})
    assert em.qualifiers == (("a_type", "bf16"), ("d_type", "f32"))
    assert attrs.evolve(em, description="x").qualifiers == em.qualifiers


def test_emulate_needs_a_module_or_none_and_linear_an_emulation():
    torch = pytest.importorskip("torch")
    with mt.emulate(None, "A100-bf16") as trace:       # None: every op in the block
        pass
    assert trace.calls == []
    with pytest.raises(mt.EmulationError, match=r"emulate needs a torch.nn.Module .* or None .* not Tensor"):
        with mt.emulate(torch.ones(2), "A100-bf16"):
            pass
    with pytest.raises(mt.EmulationError, match="an mmasim.torch.Emulation or a preset name"):
        mt.linear(torch.ones(2, 16), torch.ones(8, 16), emulation=5)


def _swap(name, i):
    return name[:i] + name[i + 1] + name[i] + name[i + 2:]


@pytest.mark.parametrize("name", sorted(mt.presets()))
def test_a_preset_typo_names_the_preset_meant_and_every_preset(name):
    torch = pytest.importorskip("torch")
    typo = _swap(name, len(name) - 2)                             # A100-bf16 -> A100-bf61
    assert typo != name
    net = torch.nn.Linear(16, 8)
    for look_up in (mt.preset, lambda n: mt.linear(torch.ones(2, 16), net.weight, emulation=n),
                    lambda n: mt.emulate(net, n).__enter__()):
        with pytest.raises(mt.UnknownPreset, match=f"Did you mean [^?]*'{re.escape(name)}'") as e:
            look_up(typo)
        assert all(p in str(e.value) for p in mt.presets())
        assert isinstance(e.value, mt.EmulationError) and isinstance(e.value, LookupError)
    assert all("forward" not in m.__dict__ for m in net.modules())


def test_a_name_like_no_preset_lists_every_preset_without_a_guess():
    with pytest.raises(mt.UnknownPreset) as e:
        mt.preset("zzzz")
    assert "Did you mean" not in str(e.value) and all(p in str(e.value) for p in mt.presets())


# ------------------------------------------------------------------ the table
def test_presets_print_as_a_table_of_arch_instruction_recipe_and_description():
    table = mt.presets()
    text = str(table)
    assert repr(table) == text and "Emulation(" not in text
    lines = text.splitlines()
    assert lines[0].split() == ["preset", "arch", "GEMMs", "instruction", "recipe"]
    flat = " ".join(text.split())
    for name, em in table.items():
        row = next(line for line in lines if line.startswith(name + " "))
        assert row.split()[1] == em.arch and em.instruction in row
        assert " ".join(em.description.split()) in flat         # wrapped below its rows
    # worked by hand from docs/torch.md's table
    assert re.search(r"^H100-fp8-tensor +H100 +forward +wgmma\.mma_async\.k32\.f32\.e4m3\.e4m3 +per-tensor scaling$",
                     text, re.M)
    assert re.search(r"^ +dgrad, wgrad +wgmma\.mma_async\.k32\.f32\.e5m2\.e4m3 +per-tensor scaling$", text, re.M)
    assert re.search(r"^H100-fp8-deepseek .* deepseek_fp8, B tile 128 x 128; promote every 128$", text, re.M)
    assert re.search(r"^B200-nvfp4 +B200 +all +tcgen05\.mma\.kind::mxf4nvf4\S* +nvfp4$", text, re.M)


def test_presets_is_still_a_mapping_of_names_to_emulations():
    table = mt.presets()
    assert list(table) == list(dict(table)) and all(isinstance(v, mt.Emulation) for v in table.values())
    assert table["A100-bf16"] is mt.preset("A100-bf16")


def _documented_json():
    """The mmasim.presets/1 example of docs/user-guide.md's "JSON output" section."""
    text = (DOC.parent / "user-guide.md").read_text(encoding="utf-8")
    docs = [json.loads(body) for body in re.findall(r"```json\n(.*?)```", text[text.index("## JSON output"):], re.S)]
    (doc,) = [d for d in docs if d["schema"] == "mmasim.presets/1"]
    return doc


def test_mmasim_presets_prints_the_table_and_its_json_has_the_documented_keys(capsys):
    assert main(["presets"]) == 0
    assert capsys.readouterr().out.rstrip("\n") == str(mt.presets())
    assert main(["presets", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    doc = _documented_json()
    assert got["schema"] == doc["schema"] == "mmasim.presets/1"
    assert [p["name"] for p in got["presets"]] == list(mt.presets())
    keys = set(doc["presets"][0])
    assert all(set(p) == keys for p in got["presets"])
    deep = next(p for p in got["presets"] if p["name"] == "H100-fp8-deepseek")
    assert deep["b_tile"] == [128, 128] and deep["promote_every"] == 128 and deep["dgrad"] is None
    assert set(deep["wgrad"]) == keys - {"name"} and deep["wgrad"]["b_tile"] is None


def test_mmasim_presets_runs_without_torch():
    """torch made unimportable: the table and its JSON still come, and nothing imports torch."""
    code = ("import sys; sys.modules['torch'] = None\n"
            "from mmasim.cli.main import main\n"
            "assert main(['presets']) == 0 and main(['presets', '--json']) == 0\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert "A100-bf16" in r.stdout and '"schema": "mmasim.presets/1"' in r.stdout
    r = subprocess.run([sys.executable, "-c", "import sys\nfrom mmasim.cli.main import main\nmain(['presets'])\n"
                        "assert 'torch' not in sys.modules, 'torch imported'"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_readme_lists_mmasim_presets():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert re.search(r"^mmasim presets\b", readme, re.M)
