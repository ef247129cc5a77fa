"""Layout tables: the register / TMEM layout rules are data, TOML files beside the
architecture tables, registered by the table plugin through ``mmasim_layouts`` exactly as a
third party's; ``mmasim.placement.load_layouts`` refuses a malformed row with a TableError
naming the file and the row."""

import pathlib
import re
import sys
import types

import attrs
import numpy as np
import pytest

import mmasim
from mmasim.placement import FragmentRule, load_layouts

ROOT = pathlib.Path(__file__).resolve().parent.parent
LAYOUTS = ROOT / "archs" / "layouts"

# A valid row (PTX ISA 9.0 §9.7.14.5.7: b0, b1 of .f16 m16n8k8 B: row = threadID_in_group * 2 + i,
# col = groupID); the error tests break one thing of it at a time.
GOOD = """
[[layout]]
name = "test.m16n8k8.b"
op = "mma.sync"
operands = ["b"]
m = 16
n = 8
k = 8
bits = 16
elements = 2
row = "2 * t + i"
col = "g"
evidence = "unverified: a test row"
"""


def _write(tmp_path, text, name="bad_layouts.toml"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


# ------------------------------------------------------------------ the built-in tables
def test_builtin_layouts_are_tables_registered_by_the_table_plugin():
    """Every built-in FragmentRule comes from archs/layouts/*.toml through mmasim_plugins.archs'
    mmasim_layouts hook (the core registers none), and each table loads on its own."""
    import mmasim.registry.core_parts
    import mmasim_plugins.archs

    assert not hasattr(mmasim.registry.core_parts, "mmasim_layouts")
    assert not list((ROOT / "mmasim" / "placement").glob("catalog*.py"))
    shipped = sorted(p.name for p in LAYOUTS.glob("*.toml"))
    assert [t.name for t in mmasim_plugins.archs.layout_tables()] == shipped
    assert len(shipped) >= 5
    from_files = [r for p in sorted(LAYOUTS.glob("*.toml")) for r in load_layouts(p)]
    from_hook = list(mmasim_plugins.archs.mmasim_layouts())
    assert from_hook == from_files
    registered = {x.name: x for x in mmasim.layouts() if isinstance(x, FragmentRule)}
    assert {r.name for r in from_files} == set(registered)       # no FragmentRule from anywhere else
    assert all(registered[r.name] == r for r in from_files)


def test_architecture_table_list_leaves_the_layout_folder_out():
    import mmasim_plugins.archs

    names = [t.name for t in mmasim_plugins.archs.tables()]
    assert names == sorted(p.name for p in (ROOT / "archs").glob("*.toml"))
    assert not set(names) & {p.name for p in LAYOUTS.glob("*.toml")}


def test_the_wheel_ships_the_layout_tables():
    """pyproject's package data carries archs/layouts/*.toml (a non-editable install has no
    other way to find them)."""
    try:
        import tomllib
    except ModuleNotFoundError:     # Python 3.10
        import tomli as tomllib
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "layouts/*.toml" in data["tool"]["setuptools"]["package-data"]["mmasim_archs"]


# ------------------------------------------------------------------ validation on load
def test_a_good_row_loads_into_the_rule_it_spells():
    (rule,) = load_layouts(GOOD)
    assert rule == FragmentRule("test.m16n8k8.b", "mma.sync", "b", m=16, n=8, k=8, bits=16, elements=2,
                                row="2 * t + i", col="g", evidence="unverified: a test row")
    assert rule.bind("b", 16, 8, 8, 16).coords(5, 1) == (3, 1)     # lane 5: t = 1, g = 1


def test_unknown_key_names_the_file_the_row_and_the_key(tmp_path):
    path = _write(tmp_path, GOOD.replace('col = "g"', 'col = "g"\ncolumn = "g"'))
    with pytest.raises(mmasim.TableError) as info:
        load_layouts(path)
    text = str(info.value)
    assert "bad_layouts.toml" in text and "'test.m16n8k8.b'" in text and "unknown keys ['column']" in text


def test_missing_evidence_is_refused(tmp_path):
    path = _write(tmp_path, GOOD.replace('evidence = "unverified: a test row"\n', ""))
    with pytest.raises(mmasim.TableError, match=r"bad_layouts\.toml.*'test\.m16n8k8\.b'.*missing key 'evidence'"):
        load_layouts(path)
    path = _write(tmp_path, GOOD.replace('"unverified: a test row"', '"   "'))
    with pytest.raises(mmasim.TableError, match=r"bad_layouts\.toml.*'test\.m16n8k8\.b'.*evidence must say"):
        load_layouts(path)


@pytest.mark.parametrize("formula, why", [
    ("__import__('os').system('true')", "Call"),
    ("lane.real", "Attribute"),
    ("x + 1", "unknown name 'x'"),
    ("2 * t +", "does not parse"),
])
def test_bad_formula_is_refused_naming_the_field(tmp_path, formula, why):
    path = _write(tmp_path, GOOD.replace('row = "2 * t + i"', f'row = "{formula}"'))
    with pytest.raises(mmasim.TableError) as info:
        load_layouts(path)
    text = str(info.value)
    assert "bad_layouts.toml" in text and "'test.m16n8k8.b'" in text and "field 'row'" in text and why in text


def test_a_row_that_is_not_a_bijection_is_refused_on_load(tmp_path):
    """B of m16n8k8 is 8 x 8 = 64 elements over 32 lanes x 2: row = t + i reaches rows 0..4 only,
    so some elements are held twice and others by no lane."""
    path = _write(tmp_path, GOOD.replace('row = "2 * t + i"', 'row = "t + i"'))
    with pytest.raises(mmasim.TableError, match=r"bad_layouts\.toml.*'test\.m16n8k8\.b'.*not a bijection"):
        load_layouts(path)
    # a formula leaving the 8 x 8 matrix
    path = _write(tmp_path, GOOD.replace('row = "2 * t + i"', 'row = "4 * t + i"'))
    with pytest.raises(mmasim.TableError, match=r"'test\.m16n8k8\.b'.*leaves the 8x8 matrix"):
        load_layouts(path)


def test_wrong_types_duplicates_and_sections_are_refused(tmp_path):
    cases = [
        (GOOD.replace("m = 16", 'm = "16"'), r"field 'm' must be an integer"),
        (GOOD.replace("bits = 16", "bits = true"), r"field 'bits' must be an integer or a list"),
        (GOOD.replace('operands = ["b"]', 'operands = ["q"]'), r"operands must be among"),
        (GOOD + GOOD, r"layout 'test\.m16n8k8\.b' is given twice \(\[\[layout\]\] #1 and #2\)"),
        ("[architecture]\nname = 'x'\n" + GOOD, r"unknown sections \['architecture'\]"),
        (GOOD.replace('name = "test.m16n8k8.b"\n', ""), r"#1: missing key 'name'"),
        ("[[layout]\n", r"invalid TOML"),
    ]
    for text, match in cases:
        with pytest.raises(mmasim.TableError, match=match):
            load_layouts(_write(tmp_path, text))


def test_toml_blocks_of_the_layout_guide_load():
    """docs/layouts.md's "Adding a layout" example is a valid layout table."""
    text = (ROOT / "docs" / "layouts.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", text, re.S)
    assert blocks
    for body in blocks:
        assert load_layouts(body)


# ------------------------------------------------------------------ a third party's TOML layout
TOY_TABLE = """
[architecture]
name = "TomlToy"
vendor = "Example"
description = "a toy architecture whose register layout is a layout table"

[[datapath]]
op = "tomltoy.mma"
a = "f16"
b = "f16"
c = "f32"
d = "f32"
m = [4]
n = [4]
k = 4
accumulator = "window"
params = { F = 25, zeros = "excluded" }
rounding = "rz-f32"
status = { kind = "assumed", evidence = "toy" }
"""

# 8 lanes; lane l holds row l // 2 of A, columns 2 * (l % 2) + i (one .f16x2 register); B is
# the transpose; C / D as A
TOY_LAYOUTS = """
[[layout]]
name = "tomltoy.a"
op = "tomltoy.mma"
operands = ["a"]
arch = "TomlToy"
lanes = 8
elements = 2
row = "lane // 2"
col = "2 * (lane % 2) + i"
evidence = "unverified: a toy"

[[layout]]
name = "tomltoy.b"
op = "tomltoy.mma"
operands = "b"
arch = ["TomlToy"]
lanes = 8
elements = 2
row = "2 * (lane % 2) + i"
col = "lane // 2"
evidence = "unverified: a toy"

[[layout]]
name = "tomltoy.cd"
op = "tomltoy.mma"
operands = ["c", "d"]
arch = "TomlToy"
lanes = 8
elements = 2
row = "lane // 2"
col = "2 * (lane % 2) + i"
evidence = "unverified: a toy"
"""


@pytest.fixture
def toml_plugin(tmp_path):
    path = _write(tmp_path, TOY_LAYOUTS, "tomltoy_layouts.toml")
    p = types.SimpleNamespace()

    @mmasim.hookimpl
    def mmasim_architectures():
        return [TOY_TABLE]

    @mmasim.hookimpl
    def mmasim_layouts():
        return load_layouts(path)

    p.mmasim_architectures, p.mmasim_layouts = mmasim_architectures, mmasim_layouts
    mmasim.register(p, name="toml-toy")
    yield p
    mmasim.unregister(name="toml-toy")


def test_third_party_plugin_registers_a_toml_layout(toml_plugin):
    m = mmasim.MMA("TomlToy", "tomltoy.mma.f32.f16.f16", backend="numpy")
    L = m.layout("a")
    assert L.name == "tomltoy.a" and (L.lanes, L.registers, L.elements) == (8, 1, 2)
    assert L.owner(3, 3) == (7, 1)                       # row 3: lanes 6, 7; col 3 = 2 * 1 + 1
    assert m.layout("b").owner(3, 1) == (3, 1)           # B[3][1]: col 1 -> lanes 2, 3; row 3 -> lane 3, i 1
    A = np.full((4, 4), 0x3C00, np.uint16)              # 1.0
    B = np.full((4, 4), 0x4000, np.uint16)              # 2.0
    C = np.zeros((4, 4), np.uint32)
    d = m.warp(m.fragments("a", A), m.fragments("b", B), m.fragments("c", C))
    assert (m.unfragment("d", d) == 0x41000000).all()    # 4 * 1 * 2 = 8.0
    assert {"tomltoy.a", "tomltoy.b", "tomltoy.cd"} <= {x.name for x in mmasim.layouts("TomlToy")}


def test_third_party_toml_layout_with_a_builtin_name_is_a_conflict(tmp_path):
    text = GOOD.replace('name = "test.m16n8k8.b"', 'name = "mma.m16n8k8.b.16bit"')
    rules = load_layouts(_write(tmp_path, text))
    p = types.SimpleNamespace()

    @mmasim.hookimpl
    def mmasim_layouts():
        return rules

    p.mmasim_layouts = mmasim_layouts
    with pytest.raises(mmasim.PluginConflict, match=r"mma\.m16n8k8\.b\.16bit.*mmasim_plugins\.archs"):
        mmasim.register(p, name="toml-squatter")
    assert mmasim.MMA("A100", "mma.sync.m16n8k8.f32.f16.f16").layout("b").evidence.startswith("checked: ")


# ------------------------------------------------------------------ the contributor tool
def _tool():
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import layouts_to_toml
    finally:
        sys.path.pop(0)
    return layouts_to_toml


def test_layouts_to_toml_renders_every_field_and_loads_back():
    """A rule with every field away from its default (kind "" = none, qualifiers () = none,
    sparse False, multi-valued tuples, a formula elements, long text) survives the round trip."""
    tool = _tool()
    fields = {f.name for f in attrs.fields(FragmentRule)}
    assert fields == set(tool.ORDER)
    long = "partly checked: " + " ".join(f"word{j}" for j in range(60)) + " 'quoted' \"double\" back\\slash"
    rule = FragmentRule("every.field", "tcgen05.mma", ("c", "d"), m=64, n=16, k=8, bits=(16, 32), arch=("A", "B"),
                        kind="", types=("f16", "bf16"), abits=(16,), alayout="row", blayout="col", sparse=False,
                        qualifiers=(), storage="tmem", lanes=128, blocks=1, block="0", elements="N // 2",
                        row="lane & 63", col="i + (N // 2) * (lane >> 6)", valid="lane < 128",
                        selectors=("selector",), legal="selector <= 1", description=long, source="s",
                        evidence=long)
    text = tool.render([rule], "a header")
    assert text.startswith("# a header\n")
    (back,) = load_layouts(text)
    assert back == rule and type(back.elements) is str and back.kind == "" and back.qualifiers == ()
    assert back.evidence == long


def test_layouts_to_toml_round_trips_the_builtin_rules():
    rules = [r for p in sorted(LAYOUTS.glob("*.toml")) for r in load_layouts(p)]
    assert load_layouts(_tool().render(rules)) == rules


def test_layouts_to_toml_converts_a_rule_module_of_the_former_catalogue(tmp_path):
    """A rule module written against the removed mmasim.placement.catalog_base (rule_maker and
    an evidence table) converts from its file as it is, every list of rules in order."""
    module = tmp_path / "catalog_toy_former.py"
    module.write_text(
        "from .catalog_base import _ISA, rule_maker\n"
        "_EVIDENCE = {'former.b': 'checked: ' + _ISA + ' §9.7.14.5.7 (.f16 / .bf16 B)'}\n"
        "R = rule_maker(_EVIDENCE)\n"
        "FIRST = [R('former.b', 'mma.sync', 'b', m=16, n=8, k=8, bits=16, elements=2, row='2 * t + i', col='g')]\n"
        "SECOND = [R('former.cd', 'mma.sync', ('c', 'd'), m=16, n=8, elements=4, row='g + 8 * (i >> 1)',\n"
        "          col='2 * t + (i & 1)', evidence='unverified: a test')]\n", encoding="utf-8")
    tool = _tool()
    try:
        rules = tool.load_rules(str(module))
        assert [r.name for r in rules] == ["former.b", "former.cd"]
        assert rules[0].evidence == "checked: PTX ISA 9.0 §9.7.14.5.7 (.f16 / .bf16 B)"
        assert load_layouts(tool.render(rules)) == rules
        assert [r.name for r in tool.load_rules(f"{module}:SECOND")] == ["former.cd"]
    finally:
        for name in ("mmasim.placement.catalog_base", "mmasim.placement.catalog_toy_former"):
            sys.modules.pop(name, None)


def test_load_layouts_takes_a_path_a_file_name_text_or_a_dict(tmp_path):
    path = _write(tmp_path, GOOD, "good_layouts.toml")
    expected = load_layouts(GOOD)
    assert load_layouts(path) == load_layouts(str(path)) == expected
    try:
        import tomllib
    except ModuleNotFoundError:     # Python 3.10
        import tomli as tomllib
    assert load_layouts(tomllib.loads(GOOD)) == expected
    with pytest.raises(mmasim.TableError, match=r"cannot read layout table .*missing_layouts\.toml"):
        load_layouts(str(tmp_path / "missing_layouts.toml"))
