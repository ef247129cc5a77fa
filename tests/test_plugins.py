"""A toy third-party architecture plugin: its own TOML table and a new decoder."""

import pathlib
import types

import attrs
import numpy as np
import pytest

import mmasim
from mmasim.arith.decode import decode_float
from mmasim.arith.formats import Format

TOY_TABLE = """
[architecture]
name = "Toy"
vendor = "Example"
description = "a toy architecture used by the plugin test"
aliases = ["toy-1", "sm_toy"]

[[datapath]]
op = "toy.mma"
kind = "neg8"
a = "neg8"
b = "neg8"
d = "f32"
k = 4
accumulator = "window"
params = { F = 25, zeros = "excluded" }
rounding = "rz-f32"
status = { kind = "assumed", evidence = "toy" }
"""


def decode_neg8(fmt, words):
    """A decoder quirk: the word's bits are inverted before an e4m3 reading."""
    return decode_float(fmt, (~np.asarray(words, dtype=np.uint64)) & np.uint64(0xFF))


def make_plugin():
    plugin = types.SimpleNamespace()

    @mmasim.hookimpl
    def mmasim_formats():
        return [Format(key="neg8", name="neg8", container_bits=8, exp_bits=4, man_bits=3, bias=7,
                       nan="max", decoder="neg8")]

    @mmasim.hookimpl
    def mmasim_decoders():
        return {"neg8": decode_neg8}

    @mmasim.hookimpl
    def mmasim_architectures():
        return [TOY_TABLE]

    plugin.mmasim_formats = mmasim_formats
    plugin.mmasim_decoders = mmasim_decoders
    plugin.mmasim_architectures = mmasim_architectures
    return plugin


@pytest.fixture
def toy():
    plugin = make_plugin()
    mmasim.register(plugin, name="toy")
    yield plugin
    mmasim.unregister(name="toy")


def test_toy_plugin_resolves_with_MMA_and_computes(toy):
    assert "Toy" in mmasim.architectures()
    m = mmasim.MMA("toy-1", "toy.mma.kind::neg8", a_type="neg8", b_type="neg8", d_type="f32")
    one = (~0x38) & 0xFF          # inverted e4m3 1.0
    two = (~0x40) & 0xFF          # inverted e4m3 2.0
    d = m.dot([one, two, 0xFF, 0xFF], [two, two, 0xFF, 0xFF], 0)   # 0xFF inverts to +0
    assert int(d) == 0x40C00000   # 1*2 + 2*2 = 6.0
    assert "toy" in m.describe()


def test_unregistering_removes_the_architecture(toy):
    mmasim.unregister(name="toy")
    assert "Toy" not in mmasim.architectures()
    with pytest.raises(mmasim.UnknownArchitecture):
        mmasim.MMA("Toy", "toy.mma.kind::neg8")
    mmasim.register(toy, name="toy")   # for the fixture's teardown


def test_builtins_are_registered_like_plugins():
    pm = mmasim.registry.registration.get_plugin_manager()
    names = {pm.get_name(p) for p in pm.get_plugins()}
    assert {"mmasim.registry.core_parts", "mmasim_plugins.blackwell"} <= names


# ------------------------------------------------ built-in plugins
ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_one_table_plugin_registers_every_table_in_archs():
    import mmasim_plugins.archs

    shipped = sorted(p.name for p in (ROOT / "archs").glob("*.toml"))
    assert [t.name for t in mmasim_plugins.archs.mmasim_architectures()] == shipped
    reg = mmasim.get_registry()
    builtin = {name for name, arch in reg.architectures.items()
               if pathlib.Path(arch.source).name in shipped}
    assert {"Blackwell", "Hopper", "CDNA3", "RTX Blackwell", "Volta"} <= builtin
    assert {reg.owners[name] for name in builtin} == {"mmasim_plugins.archs"}


def test_builtin_python_plugins_are_only_those_whose_code_differs():
    # a table needs no code: the other built-in plugins add parts, never tables
    modules = {f"mmasim_plugins.{p.stem}" for p in (ROOT / "plugins").glob("*.py") if p.stem != "__init__"}
    assert modules <= set(mmasim.DEFAULT_PLUGINS)
    pm = mmasim.registry.registration.get_plugin_manager()
    hooks = {}
    for name in modules:
        plugin = pm.get_plugin(name)
        hooks[name] = {h for h in dir(plugin) if h.startswith("mmasim_")
                       and callable(getattr(plugin, h)) and getattr(pm.hook, h, None) is not None}
    # the table plugin: architecture tables and layout tables (archs/layouts/*.toml), no other part
    assert hooks.pop("mmasim_plugins.archs") == {"mmasim_architectures", "mmasim_layouts"}
    assert hooks == {"mmasim_plugins.blackwell": {"mmasim_layouts"},        # B200 TMEM / smem layouts
                     "mmasim_plugins.rtx_blackwell": {"mmasim_formats"},    # the sm_120 e2m1 container
                     "mmasim_plugins.families": {"mmasim_families"}}        # the instruction families


def test_table_hook_of_the_older_plugin_api_still_registers_a_packaged_table(tmp_path, monkeypatch):
    package = tmp_path / "toy_tables_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "toy.toml").write_text(TOY_TABLE.replace('"neg8"', '"e4m3"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    from mmasim.registry.tables import table_hook

    plugin = types.SimpleNamespace(mmasim_architectures=table_hook("toy.toml", package="toy_tables_pkg"))
    mmasim.register(plugin, name="toy-tables")
    try:
        m = mmasim.MMA("toy-1", "toy.mma.kind::e4m3", a_type="e4m3", b_type="e4m3", d_type="f32")
        assert int(m.dot([0x38, 0x40, 0, 0], [0x40, 0x40, 0, 0], 0)) == 0x40C00000   # 1*2 + 2*2 = 6.0
        assert mmasim.get_registry().owners["Toy"] == "toy-tables"
    finally:
        mmasim.unregister(name="toy-tables")


# ------------------------------------------------ the accumulator contract
def test_builtin_accumulators_line_up_file_function_and_registry_key():
    from mmasim.accumulators import BUILTIN_ACCUMULATORS, Accumulator

    reg = mmasim.get_registry()
    files = {p.stem for p in (ROOT / "mmasim" / "accumulators").glob("*.py")} - {"__init__", "accumulator", "params"}
    assert files == set(BUILTIN_ACCUMULATORS)
    for key, acc in BUILTIN_ACCUMULATORS.items():
        assert isinstance(acc, Accumulator)
        assert acc.function.__name__ == key and acc.function.__module__ == f"mmasim.accumulators.{key}"
        assert reg.accumulators[key] is acc            # registered as it is, under its own name


def test_every_builtin_accumulator_states_its_special_values_once():
    from mmasim.accumulators import BUILTIN_ACCUMULATORS
    from mmasim.arith.special import NVIDIA_RULES, rules_for

    for key, acc in BUILTIN_ACCUMULATORS.items():
        assert acc.special_values and rules_for(key, acc) == acc.special_values
    # the AMD two-stage text names its own rules (drop_c, nonfinite_c_r), not the NVIDIA ones
    assert "drop_c" in BUILTIN_ACCUMULATORS["two_stage_window"].special_values
    assert BUILTIN_ACCUMULATORS["window"].special_values == NVIDIA_RULES
    m = mmasim.MMA("CDNA3", "v_mfma_f32_16x16x32_fp8_fp8")
    assert BUILTIN_ACCUMULATORS["two_stage_window"].special_values in m.describe()


def _acc_plugin(accumulators):
    return types.SimpleNamespace(mmasim_accumulators=mmasim.hookimpl(lambda: accumulators))


def _scaled_sum(a, b, c, scale_a, scale_b, encoding, *, F: int):
    raise AssertionError("never called here")


@attrs.frozen(kw_only=True)
class _FParams:
    F: int


@attrs.frozen(kw_only=True)
class _FGParams:
    F: int
    G: int = 1


@pytest.mark.parametrize("record, why", [
    (lambda A: A(_scaled_sum, _FGParams), "Params declares ['G'], which the function does not take"),
    (lambda A: A(_scaled_sum), "the function needs the parameters ['F'], which Params does not declare"),
    (lambda A: A(_scaled_sum, dict), "Params must be an attrs class"),
    (lambda A: A(_scaled_sum, _FParams, scales="sometimes"), "scales must be one of"),
    (lambda A: A(lambda a, b, c: None, None), "takes 3 positional arguments"),
])
def test_inconsistent_accumulator_record_is_refused_when_the_registry_is_built(record, why):
    from mmasim.accumulators import Accumulator

    with pytest.raises(mmasim.PluginError) as info:
        mmasim.register(_acc_plugin({"toy_sum": record(Accumulator)}), name="bad-acc")
    text = str(info.value)
    assert "plugin 'bad-acc'" in text and "accumulator 'toy_sum'" in text and why in text
    assert "toy_sum" not in mmasim.get_registry().accumulators


def test_plain_function_accumulator_of_the_older_plugin_api_still_registers(tmp_path):
    from mmasim.errors import TableError

    calls = []

    def plain(a, b, c, scale_a, scale_b, encoding, *, F):
        calls.append(F)
        return mmasim.get_registry().accumulators["window"](a, b, c, scale_a, scale_b, encoding, F=F)

    plain.Params = _FParams
    plain.special_values = "as the NVIDIA window"
    table = TOY_TABLE.replace('"neg8"', '"e4m3"').replace('"window"', '"plain"').replace(
        'params = { F = 25, zeros = "excluded" }', "params = { F = 25 }")
    plugin = _acc_plugin({"plain": plain})
    plugin.mmasim_architectures = mmasim.hookimpl(lambda: [table])
    mmasim.register(plugin, name="plain-acc")
    try:
        acc = mmasim.get_registry().accumulators["plain"]
        assert (acc.function, acc.Params, acc.special_values) == (plain, _FParams, "as the NVIDIA window")
        m = mmasim.MMA("toy-1", "toy.mma.kind::e4m3", a_type="e4m3", b_type="e4m3", d_type="f32")
        assert int(m.dot([0x38, 0x40, 0, 0], [0x40, 0x40, 0, 0], 0)) == 0x40C00000   # 6.0
        assert calls and set(calls) == {25}
        assert "as the NVIDIA window" in m.describe()
        # its Params still check the tables that use it
        bad = table.replace('name = "Toy"', 'name = "Toy2"').replace('["toy-1", "sm_toy"]', '["toy-2"]').replace(
            "params = { F = 25 }", "params = { F = 25, zeros = 1 }")
        extra = types.SimpleNamespace(mmasim_architectures=mmasim.hookimpl(lambda: [bad]))
        with pytest.raises(TableError, match="'params.zeros'"):
            mmasim.register(extra, name="plain-acc-bad")
    finally:
        mmasim.unregister(name="plain-acc")


PAIRS_TABLE = """
[architecture]
name = "Pairs"
vendor = "Example"

[[datapath]]
op = "toy.mma"
kind = "pairs"
a = "s8"
b = "s8"
d = "s32"
k = 4
accumulator = "pair_sum"
params = { shift = SHIFT }
rounding = "s32-wrap"
status = { kind = "assumed", evidence = "the accumulator example of docs/plugins.md" }
"""


def test_accumulator_example_of_the_plugin_guide_registers_and_computes():
    import re

    text = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")
    (code,) = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if b.startswith("# accumulator")]
    plugin = types.ModuleType("pair_sum_plugin")
    exec(compile(code, "docs/plugins.md", "exec"), plugin.__dict__)
    plugin.mmasim_architectures = mmasim.hookimpl(lambda: [PAIRS_TABLE.replace("SHIFT", "1")])
    mmasim.register(plugin, name="pair-sum")
    try:
        m = mmasim.MMA("Pairs", "toy.mma.kind::pairs", a_type="s8", b_type="s8", d_type="s32")
        # (3*5 - 2*7 + 1*9 + 0) >> 1 = 10 >> 1 = 5, plus C = 10
        assert int(m.dot([3, 0xFE, 1, 0], [5, 7, 9, 0], 10)) == 15
        assert "none: integers have no special values" in m.describe()
        bad = types.SimpleNamespace(mmasim_architectures=mmasim.hookimpl(
            lambda: [PAIRS_TABLE.replace("SHIFT", "99").replace('"Pairs"', '"Pairs2"')]))
        from mmasim.errors import TableError

        with pytest.raises(TableError, match=r"'params.shift'.*99 is outside 0..64"):
            mmasim.register(bad, name="pair-sum-bad")
    finally:
        mmasim.unregister(name="pair-sum")


def test_builtin_accumulator_records_pickle_as_themselves():
    # window.window is the record (file = function = key): a pickled model still finds it by name
    import pickle

    from mmasim.accumulators import BUILTIN_ACCUMULATORS

    for acc in BUILTIN_ACCUMULATORS.values():
        assert pickle.loads(pickle.dumps(acc)) is acc
    m = pickle.loads(pickle.dumps(mmasim.MMA("B200", "tcgen05.mma.kind::tf32", backend="numpy")))
    assert int(m.dot([0x3F800000] * 8, [0x3F800000] * 8, 0)) == 0x41000000   # 8 * 1.0
