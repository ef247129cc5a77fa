"""Tables are checked when they load, with the file, datapath and field in the message
(docs/tables.md "Checks").  Each accumulator declares its
parameters (``acc.Params``) and a datapath's ``params`` are checked against them."""

import inspect
import pathlib

import attrs
import pytest

import mmasim
from mmasim.accumulators import BUILTIN_ACCUMULATORS
from mmasim.errors import TableError
from mmasim.registry.build import get_registry
from mmasim.registry.tables import MAX_K, build_architecture, load_table

ROOT = pathlib.Path(__file__).resolve().parent.parent

HEAD = """
[architecture]
name = "Checked"
vendor = "Example"
"""

DATAPATH = {
    "op": '"toy.mma"', "kind": '"x"', "a": '"f16"', "b": '"f16"', "d": '"f32"', "k": "8",
    "accumulator": '"window"', "params": '{ F = 25, zeros = "excluded" }', "rounding": '"rz-f32"',
}


def table(tmp_path, head=HEAD, extra_top="", **fields):
    """A one-datapath table file (``fields`` override or, set to None, drop DATAPATH keys)."""
    dp = {**DATAPATH, **fields}
    body = "\n".join(f"{k} = {v}" for k, v in dp.items() if v is not None)
    path = tmp_path / "checked.toml"
    path.write_text(f"{head}\n{extra_top}\n[[datapath]]\n{body}\n", encoding="utf-8")
    return path


def load(path):
    return build_architecture(load_table(path), get_registry().accumulators)


def rejects(path, *parts):
    with pytest.raises(TableError) as info:
        load(path)
    text = str(info.value)
    assert "checked.toml" in text, text
    for part in parts:
        assert part in text, text
    return text


def test_valid_table_loads(tmp_path):
    arch = load(table(tmp_path))
    (dp,) = arch.datapaths
    assert (dp.k, dp.parameters) == (8, {"F": 25, "zeros": "excluded"})


@pytest.mark.parametrize("k", ["0", "-8"])
def test_k_zero_or_negative_is_rejected(tmp_path, k):
    rejects(table(tmp_path, k=k), "datapath #1", "'k'", f"K = {k}")


def test_k_1e8_is_rejected_as_not_an_integer(tmp_path):
    rejects(table(tmp_path, k="1e8"), "datapath #1", "'k'", "integer", "float")


def test_k_beyond_the_bound_is_rejected(tmp_path):
    rejects(table(tmp_path, k=str(MAX_K + 1)), "'k'", str(MAX_K))
    assert load(table(tmp_path, k=str(MAX_K))).datapaths[0].k == MAX_K


def test_parameter_the_accumulator_does_not_take_is_rejected(tmp_path):
    rejects(table(tmp_path, params="{ F = 25, Q = 1 }"), "datapath #1", "'params.Q'", "'window'")


def test_parameter_of_the_wrong_type_is_rejected(tmp_path):
    rejects(table(tmp_path, params='{ F = "x" }'), "'params.F'", "integer")
    rejects(table(tmp_path, params="{ F = true }"), "'params.F'", "integer")       # a bool is no int
    rejects(table(tmp_path, params='{ F = 25, zeros = "sometimes" }'), "'params.zeros'", "excluded")


def test_missing_required_parameter_is_rejected(tmp_path):
    rejects(table(tmp_path, params='{ zeros = "excluded" }'), "'params.F'", "missing")


def test_nested_parameter_table_is_checked(tmp_path):
    rejects(table(tmp_path, params="{ F = 39, c_dominant = { F = 35 } }"), "'params.c_dominant'", "group")
    rejects(table(tmp_path, params='{ F = 39, c_dominant = { F = 35, group = "x" } }'),
            "'params.c_dominant.group'")


def test_parameters_of_other_accumulators_are_checked(tmp_path):
    rejects(table(tmp_path, accumulator='"ftz_mul_add"', params="{ P = 3 }", rounding='"rne-f32"'),
            "'params.P'")
    rejects(table(tmp_path, accumulator='"integer"', params="{ F = 1 }", a='"s8"', b='"s8"', d='"s32"',
                  rounding='"s32-wrap"'), "'params.F'", "takes: bitop")
    rejects(table(tmp_path, accumulator='"integer"', params='{ bitop = "and" }', a='"s8"', b='"s8"', d='"s32"',
                  rounding='"s32-wrap"'), "'params.bitop'", "'xor'")
    rejects(table(tmp_path, accumulator='"two_stage_window"', params="{ F = 24, F2 = 31, even_odd = 1 }",
                  rounding='"rne-f32"'), "'params.even_odd'", "true or false")


def test_unknown_sparse_rule_is_rejected(tmp_path):
    rejects(table(tmp_path, sparse='"pairs5"'), "'sparse'", "pairs5", "pairs4")


@pytest.mark.parametrize("field, value, reason", [
    ("op", "3", "string"),
    ("a", "[1]", "string"),
    ("chunk", "0", "1.."),
    ("block", '"32"', "integer"),
    ("scale_vec", '"3X"', "1X"),
    ("saturate", '"no"', "true or false"),
    ("default_for", "1", "inline table"),
    ("m", "[0]", "1.."),
    ("n", "{ from = 8, to = 100000000 }", "1.."),
    ("names", '"one"', "list"),
])
def test_wrong_types_are_rejected_naming_the_field(tmp_path, field, value, reason):
    rejects(table(tmp_path, **{field: value}), "datapath #1", f"'{field}'", reason)


def test_unknown_keys_are_rejected(tmp_path):
    rejects(table(tmp_path, bogus="1"), "datapath #1", "unknown keys", "bogus")
    rejects(table(tmp_path, by_d='{ f32 = { rouding = "rz-f32" } }'), "unknown keys", "rouding")
    rejects(table(tmp_path, head=HEAD + 'codename = "x"\n'), "[architecture]", "codename")
    rejects(table(tmp_path, extra_top="[defaults]\nopp = 1\n"), "[defaults]", "opp")
    rejects(table(tmp_path, extra_top="[vendor_notes]\nx = 1\n"), "unknown sections", "vendor_notes")


def test_evidence_match_on_an_unknown_attribute_is_rejected(tmp_path):
    path = table(tmp_path)
    path.write_text(path.read_text() + '\n[[evidence]]\nmatch = { knd = "x" }\nstatus = "assumed"\n')
    rejects(path, "evidence #1", "knd")


def test_missing_key_is_rejected(tmp_path):
    rejects(table(tmp_path, k=None), "datapath #1", "missing key 'k'")


def test_invalid_table_through_a_plugin_names_the_plugin(tmp_path):
    plugin = type("P", (), {})()
    path = table(tmp_path, k="-8")
    plugin.mmasim_architectures = mmasim.hookimpl(lambda: [path])
    with pytest.raises(TableError) as info:
        mmasim.register(plugin, name="bad-table")
    text = str(info.value)
    assert "plugin 'bad-table'" in text and "checked.toml" in text and "'k'" in text
    assert "Checked" not in mmasim.architectures()


def test_every_builtin_accumulator_declares_the_parameters_it_takes():
    """``Params`` fields are exactly the accumulator's keyword-only parameters, with the same defaults."""
    for name, acc in BUILTIN_ACCUMULATORS.items():
        declared = attrs.fields_dict(acc.Params)
        takes = {p.name: p for p in inspect.signature(acc.function).parameters.values()
                 if p.kind == p.KEYWORD_ONLY}
        assert set(declared) == set(takes), name
        for key, p in takes.items():
            required = p.default is inspect.Parameter.empty
            assert (declared[key].default is attrs.NOTHING) == required, (name, key)
            if not required:
                assert declared[key].default == p.default, (name, key)


def test_every_builtin_table_passes_the_checks():
    accumulators = get_registry().accumulators
    files = sorted((ROOT / "archs").glob("*.toml"))
    assert len(files) >= 11
    for path in files:
        arch = build_architecture(load_table(path), accumulators)
        assert arch.datapaths or arch.inherits, path   # an inheriting table lists none of its own


def test_third_party_accumulator_without_declared_parameters_is_not_checked(tmp_path):
    def free_acc(a, b, c, scale_a, scale_b, encoding, **params):
        raise AssertionError("never called here")

    arch = build_architecture(load_table(table(tmp_path, accumulator='"free"', params="{ anything = 1 }")),
                              {"free": free_acc})
    assert arch.datapaths[0].parameters == {"anything": 1}


def test_control_characters_in_table_text_are_rejected(tmp_path):
    # explain prints names and notes as they are: a newline or escape in them could fake output
    path = tmp_path / "ctl.toml"
    path.write_text('[architecture]\nname = "Evil\\nOK"\n\n[[datapath]]\nop = "toy.mma"\na = "f16"\nb = "f16"\n'
                    'd = "f32"\nk = 4\naccumulator = "window"\nparams = { F = 25, zeros = "excluded" }\n'
                    'rounding = "rz-f32"\n', encoding="utf-8")
    with pytest.raises(TableError, match="control characters"):
        build_architecture(load_table(path))


# ------------------------------------------------- accumulators and block scales
def test_block_scaled_datapath_needs_an_accumulator_that_takes_scales(tmp_path):
    # fma (the AMD FMA chain) has no scale input: a block-scaled datapath on it is a table error
    rejects(table(tmp_path, accumulator='"fma"', params="{}", a='"f32"', b='"f32"', k="32",
                  scale='"ue8m0"', block="32"),
            "datapath #1", "'accumulator'", "'fma'", "takes no block scales")


def test_accumulator_that_needs_scales_is_refused_on_an_unscaled_datapath(tmp_path):
    # GST-FDPA multiplies each group sum by its block's scale product: without scales it has none
    rejects(table(tmp_path, accumulator='"group_scaled_window"', params="{ F = 35, group = 16, zeros = -139 }",
                  k="32"),
            "datapath #1", "'accumulator'", "'group_scaled_window'", "needs block scales")


def test_window_serves_both_unscaled_and_block_scaled_datapaths():
    # the truncating window is the T-FDPA of f16 mma.sync and of B200 block-scaled kinds alike
    scaled = {bool(dp.scale) for arch in get_registry().architectures.values() for dp in arch.datapaths
              if dp.accumulator == "window"}
    assert scaled == {False, True}
    assert BUILTIN_ACCUMULATORS["window"].scales == "optional"


def test_scale_check_runs_when_a_plugin_registers_the_table(tmp_path):
    plugin = type("P", (), {})()
    path = table(tmp_path, accumulator='"exact_sum"', params="{}", k="32", scale='"ue8m0"', block="32")
    plugin.mmasim_architectures = mmasim.hookimpl(lambda: [path])
    with pytest.raises(TableError, match="plugin 'scaled-fma'.*takes no block scales"):
        mmasim.register(plugin, name="scaled-fma")
    assert "Checked" not in mmasim.architectures()


@pytest.mark.parametrize("k, chunk, sparse, step", [
    (16, None, None, 16),     # no chunk: one step holds all of K
    (16, 8, None, 8),         # Ampere/Ada mma.sync k16 in steps of 8
    (16, 32, None, 16),       # a chunk wider than K is all of K
    (32, None, "pairs4", 16),  # sparse: the stored half of the logical K
    (32, 8, "pairs4", 8),
])
def test_datapath_step_is_the_chunk_or_all_of_the_stored_k(k, chunk, sparse, step):
    from mmasim.registry.datapath import Datapath

    dp = Datapath(arch="X", op="mma.sync", kind=None, a="f16", b="f16", c="f32", d="f32", k=k,
                  accumulator="window", rounding="rz-f32", chunk=chunk, sparse=sparse)
    assert dp.step == step
