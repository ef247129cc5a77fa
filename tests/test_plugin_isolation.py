"""Plugins are isolated: none silently overrides another's parts, and a broken one
does not take mmasim down (docs/plugins.md "Isolation and conflicts").

Test plugins are registered with ``mmasim.register`` (an explicit call: a failure
raises) or as fake entry points (``mmasim.registry.registration.entry_points`` monkeypatched: a
failure is skipped and reported once as a ``PluginWarning``).  Every fixture
restores the plugin manager and the registry.
"""

import sys
import types
import warnings

import attrs
import numpy as np
import pytest

import mmasim
from mmasim.registry import manager as plugin_manager
from mmasim.registry import registration
from mmasim.registry.datapath import Datapath
from mmasim.arith.decode import Decoded, decode_float
from mmasim.arith.encode import Encoding
from mmasim.errors import PluginConflict, PluginError, PluginWarning, TableError
from mmasim.arith.formats import Format
from mmasim.registry.build import datapath_identity, get_registry, reset_registry

ONE = 0x3F800000        # tf32 / f32 1.0
TINY = 0x35800000       # tf32 / f32 2^-20


def tf32_probe():
    """``1 + 2^-20`` on B200 ``kind::tf32``.

    Hand-derived from the T-FDPA rule (docs/datapaths.md §6, F = 25, zeros excluded):
    the window exponent is 0, the quantum 2^-25, so 2^-20 survives and D is
    1 + 2^-20 = 0x3F800008; a window of F = 2 would truncate it to 1.0 (0x3F800000).
    """
    m = mmasim.MMA("B200", "tcgen05.mma.kind::tf32", backend="numpy")
    return int(m.dot([ONE, TINY] + [0] * 6, [ONE] * 8, 0)), m.status.kind


#: An attack: a table naming its architecture "Blackwell" with a
#: tf32 datapath of another window width (a table cannot mark a whole datapath
#: default; the conflict is the architecture name).
EVIL_BLACKWELL = """
[architecture]
name = "Blackwell"
vendor = "NVIDIA"

[[datapath]]
op = "tcgen05.mma"
kind = "tf32"
a = "tf32"
b = "tf32"
d = "f32"
k = 8
m = [64, 128]
n = { from = 8, to = 256, step = 8 }
accumulator = "window"
params = { F = 2, zeros = "excluded" }
rounding = "rz-f32"
status = { kind = "hardware", device = "B200", evidence = "not really" }
"""


def extension(kind="toyx", op="toy.mma", default=False, target="Blackwell", k=8, extra=""):
    return f"""
[architecture]
extends = "{target}"

[[datapath]]
op = "{op}"
kind = "{kind}"
a = "tf32"
b = "tf32"
d = "f32"
k = {k}
accumulator = "window"
params = {{ F = 25, zeros = "excluded" }}
rounding = "rz-f32"
{'default_for = { c = "test default" }' if default else ""}
status = {{ kind = "assumed", evidence = "test extension" }}
{extra}
"""


def new_arch(name="Toy Arch", aliases=("toy-arch-1",), k=4, params='{ F = 25, zeros = "excluded" }'):
    return f"""
[architecture]
name = "{name}"
vendor = "Example"
aliases = {list(aliases)!r}

[[datapath]]
op = "toy.mma"
kind = "f16x"
a = "f16"
b = "f16"
d = "f32"
k = {k}
accumulator = "window"
params = {params}
rounding = "rz-f32"
status = {{ kind = "assumed", evidence = "test" }}
""".replace("'", '"')


def _impl(value):
    def hook():
        if isinstance(value, BaseException):
            raise value
        return value

    return mmasim.hookimpl(hook)


def make_plugin(module_name=None, **hooks):
    """A plugin object (or module) whose hooks return (or raise) the given values."""
    obj = types.ModuleType(module_name) if module_name else types.SimpleNamespace()
    for hook, value in hooks.items():
        setattr(obj, hook, _impl(value))
    return obj


@pytest.fixture
def registered():
    """``registered(plugin, name)``: mmasim.register, undone (and the registry restored) afterwards."""
    names = []

    def register(plugin, name):
        mmasim.register(plugin, name=name)
        names.append(name)

    yield register
    for name in names:
        if registration.get_plugin_manager().get_plugin(name) is not None:
            mmasim.unregister(name=name)
    registration.reset()


class FakeEntryPoint:
    """What mmasim reads of an ``importlib.metadata.EntryPoint``, with a distribution."""

    def __init__(self, name, obj=None, dist="example-dist", version="1.0", error=None):
        self.name, self.value, self._obj, self._error = name, f"{name}_module", obj, error
        self.dist = types.SimpleNamespace(metadata={"Name": dist}, version=version) if dist else None

    def load(self):
        if self._error is not None:
            raise self._error
        return self._obj


@pytest.fixture
def entry_points(monkeypatch):
    """A list of fake ``mmasim`` entry points that the next plugin-manager load reads."""
    eps = []
    monkeypatch.setattr(plugin_manager, "entry_points", lambda: eps)
    registration.reset()
    yield eps
    registration.reset()


def plugin_warnings(record):
    return [str(w.message) for w in record if issubclass(w.category, PluginWarning)]


# ------------------------------------------------------------ 1. no silent overriding
def test_builtin_tf32_probe_is_what_the_window_rule_gives():
    assert tf32_probe() == (0x3F800008, "hardware")


def test_table_naming_an_existing_architecture_is_a_conflict_not_a_merge(registered):
    with pytest.raises(PluginConflict) as info:
        registered(make_plugin(mmasim_architectures=[EVIL_BLACKWELL]), "evil")
    text = str(info.value)
    assert "'evil'" in text and "mmasim_plugins.archs" in text and "blackwell_tcgen05.toml" in text
    assert "extends" in text
    assert tf32_probe() == (0x3F800008, "hardware")
    assert "evil" not in [s.name for s in registration.status()]


def test_entry_point_naming_an_existing_architecture_is_skipped_naming_both_plugins(entry_points):
    entry_points.append(FakeEntryPoint("evil", make_plugin(mmasim_architectures=[EVIL_BLACKWELL]),
                                       dist="evil-dist", version="6.6"))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert tf32_probe() == (0x3F800008, "hardware")
    (message,) = plugin_warnings(record)
    assert "PluginConflict" not in message      # the message itself, not a traceback
    for part in ("'evil'", "entry point evil = evil_module", "evil-dist 6.6", "mmasim_plugins.archs",
                 "blackwell_tcgen05.toml"):
        assert part in message
    (status,) = [s for s in registration.status() if s.name == "evil"]
    assert (status.ok, status.source, status.distribution, status.entry_point) == \
        (False, "entry point", "evil-dist 6.6", "evil = evil_module")
    assert "mmasim_plugins.archs" in status.error


def test_extends_adds_a_new_datapath_to_an_existing_architecture(registered):
    before = len(mmasim.datapaths("B200"))
    registered(make_plugin(mmasim_architectures=[extension()]), "ext")
    assert len(mmasim.datapaths("B200")) == before + 1
    m = mmasim.MMA("B200", "toy.mma.kind::toyx", backend="numpy")
    assert m.arch == "Blackwell" and m.status.kind == "assumed"
    assert get_registry().datapath_plugins[m.datapath] == "ext"
    assert int(m.dot([ONE, TINY] + [0] * 6, [ONE] * 8, 0)) == 0x3F800008   # same window, F = 25
    assert tf32_probe() == (0x3F800008, "hardware")


def test_extends_with_a_datapath_another_plugin_owns_is_a_conflict(registered):
    with pytest.raises(PluginConflict) as info:
        registered(make_plugin(mmasim_architectures=[extension(op="tcgen05.mma", kind="tf32")]), "ext")
    assert "'ext'" in str(info.value) and "mmasim_plugins.archs" in str(info.value)
    assert "blackwell_tcgen05.toml" in str(info.value)
    assert tf32_probe() == (0x3F800008, "hardware")


def test_extension_may_not_add_a_default_datapath(registered):
    with pytest.raises(PluginConflict, match="default"):
        registered(make_plugin(mmasim_architectures=[extension(default=True)]), "ext")


def test_extension_may_not_take_an_existing_instruction_string_as_a_literal_name(registered):
    hijack = extension(extra='names = ["tcgen05.mma.kind::tf32"]')
    with pytest.raises(PluginConflict, match="tcgen05.mma.kind::tf32"):
        registered(make_plugin(mmasim_architectures=[hijack]), "ext")
    assert tf32_probe() == (0x3F800008, "hardware")


def test_extends_an_unknown_architecture_is_a_table_error(registered):
    with pytest.raises(TableError, match="Nowhere"):
        registered(make_plugin(mmasim_architectures=[extension(target="Nowhere")]), "ext")


def test_two_plugins_adding_the_same_datapath_conflict_naming_both(registered):
    registered(make_plugin(mmasim_architectures=[extension()]), "first")
    with pytest.raises(PluginConflict) as info:
        registered(make_plugin(mmasim_architectures=[extension()]), "second")
    assert "'first'" in str(info.value) and "'second'" in str(info.value)
    assert get_registry().datapath_plugins[mmasim.MMA("B200", "toy.mma.kind::toyx").datapath] == "first"


def test_same_datapath_with_another_k_under_the_same_string_is_a_conflict(registered):
    # toy.mma.kind::toyx.f32.tf32.tf32 names no K: a second K would make the first plugin's
    # string ambiguous
    registered(make_plugin(mmasim_architectures=[extension()]), "first")
    with pytest.raises(PluginConflict) as info:
        registered(make_plugin(mmasim_architectures=[extension(k=16)]), "second")
    assert "'first'" in str(info.value) and "'second'" in str(info.value)
    assert [dp.k for dp in mmasim.datapaths("B200") if dp.op == "toy.mma"] == [8]


def test_same_formats_under_another_kind_is_no_conflict(registered):
    registered(make_plugin(mmasim_architectures=[extension()]), "first")
    registered(make_plugin(mmasim_architectures=[extension(kind="toyy", k=16)]), "second")
    ks = sorted(dp.k for dp in mmasim.datapaths("B200") if dp.op == "toy.mma")
    assert ks == [8, 16]


def test_alias_another_plugin_owns_is_a_conflict(registered):
    with pytest.raises(PluginConflict) as info:
        registered(make_plugin(mmasim_architectures=[new_arch(aliases=("B200",))]), "thief")
    assert "'thief'" in str(info.value) and "mmasim_plugins.archs" in str(info.value)
    assert "blackwell_tcgen05.toml" in str(info.value)
    assert mmasim.MMA("B200", "tcgen05.mma.kind::tf32").arch == "Blackwell"


def test_new_architecture_is_welcome(registered):
    registered(make_plugin(mmasim_architectures=[new_arch()]), "toyarch")
    assert "Toy Arch" in mmasim.architectures()
    assert get_registry().owners["Toy Arch"] == "toyarch"
    m = mmasim.MMA("toy-arch-1", "toy.mma.kind::f16x", backend="numpy")
    assert int(m.dot([0x3C00] * 4, [0x4000] * 4, 0)) == 0x41000000   # 4 * (1 * 2) = 8.0


@pytest.mark.parametrize("hook, value, what", [
    ("mmasim_formats", [Format(key="f32", name="f32", container_bits=32, exp_bits=8, man_bits=23, bias=126)],
     "format 'f32'"),
    ("mmasim_decoders", {"float": lambda fmt, words: decode_float(fmt, words)}, "decoder 'float'"),
    ("mmasim_accumulators", {"window": lambda *a, **k: None}, "accumulator 'window'"),
    ("mmasim_encodings", [Encoding(key="rz-f32", format="f32", mode="rne")], "encoding 'rz-f32'"),
])
def test_part_name_another_plugin_owns_is_a_conflict_naming_both(registered, hook, value, what):
    with pytest.raises(PluginConflict) as info:
        registered(make_plugin(**{hook: value}), "squatter")
    text = str(info.value)
    assert what in text and "'squatter'" in text and "mmasim.registry.core_parts" in text
    assert get_registry().encodings["rz-f32"].mode == "rz"


def test_layout_name_another_plugin_owns_is_a_conflict(registered):
    (layout,) = [x for x in mmasim.layouts("B200") if x.name == "tcgen05.tmem.result.tf32"]
    forged = attrs.evolve(layout, pairs=[(0, 0)])
    with pytest.raises(PluginConflict, match="layout 'tcgen05.tmem.result.tf32'.*mmasim_plugins.blackwell"):
        registered(make_plugin(mmasim_layouts=[forged]), "squatter")


def test_registering_the_same_part_again_is_no_conflict(registered):
    f32 = get_registry().formats["f32"]
    registered(make_plugin(mmasim_formats=[f32]), "same")
    assert get_registry().formats["f32"] is f32


def test_builtin_blackwell_tables_use_extends():
    from importlib import resources

    from mmasim.registry.tables import load_table, table_extends

    data = load_table(resources.files("mmasim_archs").joinpath("blackwell_mma_sync.toml"))
    assert table_extends(data) == "Blackwell" and "name" not in data["architecture"]
    reg = get_registry()
    assert reg.owners["Blackwell"] == "mmasim_plugins.archs"
    sync = mmasim.MMA("B200", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32").datapath
    tf32 = mmasim.MMA("B200", "tcgen05.mma.kind::tf32").datapath
    assert reg.datapath_plugins[sync] == reg.datapath_plugins[tf32] == "mmasim_plugins.archs"
    # the extension's datapaths follow the declaring table's, table by table (the order of the names)
    ops = [dp.op for dp in reg.architectures["Blackwell"].datapaths]
    assert ops.index("tcgen05.mma") > max(i for i, op in enumerate(ops) if op == "mma.sync")


def test_two_tables_of_one_plugin_giving_one_architecture_the_same_datapath_is_a_table_error(registered):
    # one plugin may ship several tables of one architecture (extends), but not the same
    # datapath twice: the second table is the plugin's error, not silently merged
    with pytest.raises(TableError) as info:
        again = new_arch().replace('name = "Toy Arch"', 'extends = "Toy Arch"')
        registered(make_plugin(mmasim_architectures=[new_arch(), again]), "twice")
    assert "'twice'" in str(info.value) and "already registers" in str(info.value)
    assert "Toy Arch" not in mmasim.architectures()


def test_datapath_identity_key_ignores_evidence_and_parameters():
    base = dict(arch="X", op="mma.sync", kind=None, a="f16", b="f16", c="f32", d="f32", k=16,
                accumulator="window", rounding="rz-f32")
    one = Datapath(**base, params={"F": 25})
    assert datapath_identity(one) == datapath_identity(Datapath(**base, params={"F": 2}, default_for={"c": "x"}))
    assert datapath_identity(one) != datapath_identity(Datapath(**{**base, "k": 8}))
    assert datapath_identity(one) != datapath_identity(Datapath(**base, saturate=True))
    assert datapath_identity(one) != datapath_identity(Datapath(**base, sparse="pairs4"))


# --------------------------------------------- 2. a broken plugin does not take mmasim down
BROKEN = [
    ("import error", dict(error=ModuleNotFoundError("No module named 'missing_dep'")), "missing_dep"),
    ("hook raises", dict(obj=make_plugin(mmasim_architectures=RuntimeError("boom"))), "boom"),
    ("wrong type", dict(obj=make_plugin(mmasim_formats=42)), "int"),
    ("wrong item type", dict(obj=make_plugin(mmasim_encodings=["rne"])), "str"),
    ("decoders not a dict", dict(obj=make_plugin(mmasim_decoders=[decode_float])), "dict"),
    ("invalid table", dict(obj=make_plugin(mmasim_architectures=[new_arch(k=-8)])), "'k'"),
    ("invalid TOML", dict(obj=make_plugin(mmasim_architectures=["[architecture\nname="])), "invalid TOML"),
]


@pytest.mark.parametrize("case, spec, reason", BROKEN, ids=[b[0] for b in BROKEN])
def test_broken_entry_point_is_skipped_and_reported_once(entry_points, case, spec, reason):
    entry_points.append(FakeEntryPoint("broken", **spec))
    entry_points.append(FakeEntryPoint("fine", make_plugin(mmasim_architectures=[new_arch()])))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert "Blackwell" in mmasim.architectures() and "Toy Arch" in mmasim.architectures()
        assert tf32_probe() == (0x3F800008, "hardware")
        reset_registry()                       # a rebuild does not report it again
        assert "Toy Arch" in mmasim.architectures()
    (message,) = plugin_warnings(record)
    assert "'broken'" in message and reason in message and "\n" not in message.strip()
    status = {s.name: s for s in registration.status()}
    assert status["broken"].ok is False and reason in status["broken"].error
    assert status["fine"].ok and status["fine"].error is None
    assert status["mmasim_plugins.blackwell"].ok


def test_cli_list_works_with_a_broken_entry_point(entry_points, capsys):
    import mmasim.cli.main as cli

    entry_points.append(FakeEntryPoint("broken", make_plugin(mmasim_architectures=RuntimeError("boom"))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert cli.main(["list"]) in (0, None)
    assert "Blackwell" in capsys.readouterr().out


def test_plugin_depending_on_a_skipped_plugin_is_skipped_too(entry_points):
    fmt = Format(key="dep8", name="dep8", container_bits=8, exp_bits=4, man_bits=3, bias=7, nan="max")
    table = new_arch(name="Dep Arch", aliases=()).replace('a = "f16"\nb = "f16"', 'a = "dep8"\nb = "dep8"')
    entry_points.append(FakeEntryPoint("provider", make_plugin(mmasim_formats=[fmt],
                                                               mmasim_decoders=RuntimeError("no"))))
    entry_points.append(FakeEntryPoint("user", make_plugin(mmasim_architectures=[table])))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert "Dep Arch" not in mmasim.architectures()
    messages = plugin_warnings(record)
    assert len(messages) == 2 and any("'dep8'" in m and "'user'" in m for m in messages)


def test_register_raises_for_a_broken_plugin_and_leaves_nothing_behind(registered):
    with pytest.raises(PluginError, match="boom"):
        registered(make_plugin(mmasim_architectures=RuntimeError("boom")), "broken")
    assert "broken" not in [s.name for s in registration.status()]
    assert registration.get_plugin_manager().get_plugin("broken") is None
    assert tf32_probe() == (0x3F800008, "hardware")


def test_good_entry_point_is_listed_with_its_distribution(entry_points):
    entry_points.append(FakeEntryPoint("toyep", make_plugin(mmasim_architectures=[new_arch()]),
                                       dist="toy-dist", version="1.0"))
    (status,) = [s for s in registration.status() if s.name == "toyep"]
    assert status == registration.PluginStatus("toyep", "entry point", "toy-dist 1.0", "toyep = toyep_module",
                                          True, None)
    assert "Toy Arch" in mmasim.architectures()


def test_status_lists_every_builtin_ok():
    status = registration.status()
    builtins = [s for s in status if s.source == "builtin"]
    assert [s.name for s in builtins] == list(mmasim.DEFAULT_PLUGINS)
    assert all(s.ok and s.error is None and s.distribution is None for s in builtins)


def test_broken_builtin_plugin_raises(monkeypatch):
    module = make_plugin("mmasim_test_broken_builtin", mmasim_architectures=RuntimeError("bug"))
    monkeypatch.setitem(sys.modules, "mmasim_test_broken_builtin", module)
    monkeypatch.setattr(mmasim, "DEFAULT_PLUGINS", mmasim.DEFAULT_PLUGINS + ("mmasim_test_broken_builtin",))
    monkeypatch.setattr(plugin_manager, "entry_points", lambda: [])
    registration.reset()
    try:
        with pytest.raises(PluginError, match="built-in plugin 'mmasim_test_broken_builtin'.*bug"):
            get_registry()
    finally:
        monkeypatch.undo()
        registration.reset()
    assert "Blackwell" in mmasim.architectures()


def test_duplicate_entry_point_name_is_skipped(entry_points):
    entry_points.append(FakeEntryPoint("twin", make_plugin(mmasim_architectures=[new_arch()]), dist="a"))
    entry_points.append(FakeEntryPoint("twin", make_plugin(), dist="b"))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        assert "Toy Arch" in mmasim.architectures()
    (message,) = plugin_warnings(record)
    assert "distribution b 1.0" in message and "distribution a 1.0" in message


# ------------------------------------------------- 4. decoders of the wrong shape
def _bad_decoder(fmt, words):
    z = np.zeros((0, 0), dtype=np.int64)
    return Decoded(z.astype(np.int8), z, z, z, z)


def test_decoder_returning_the_wrong_shape_is_a_plugin_error_naming_the_plugin(registered):
    fmt = Format(key="bad8", name="bad8", container_bits=8, exp_bits=4, man_bits=3, bias=7, nan="max",
                 decoder="bad8-decoder")
    table = new_arch(name="Bad Decoder").replace('a = "f16"\nb = "f16"', 'a = "bad8"\nb = "bad8"')
    registered(make_plugin(mmasim_formats=[fmt], mmasim_decoders={"bad8-decoder": _bad_decoder},
                           mmasim_architectures=[table]), "baddec")
    m = mmasim.MMA("Bad Decoder", "toy.mma.kind::f16x", backend="numpy")
    with pytest.raises(PluginError, match=r"decoder 'bad8-decoder' of plugin 'baddec'.*shape \(0, 0\)"):
        m.dot([0x38] * 4, [0x38] * 4, 0)


def test_builtin_decoders_are_not_wrapped():
    assert get_registry().decoders["float"] is decode_float


def test_installed_broken_plugins_are_one_line_each_on_stderr_and_mmasim_list_works(tmp_path):
    """Real entry points (dist-info on sys.path, as pip leaves them): one that does not
    import and one that redeclares Blackwell; `mmasim list` still works."""
    import os
    import subprocess

    for dist, ep, module, code in [
        ("bad_ep", "badep", "bad_ep_mod", "import nonexistent_dependency_of_bad_ep\n"),
        ("evil_ep", "evilep", "evil_ep_mod",
         "from mmasim import hookimpl\n\n\n@hookimpl\ndef mmasim_architectures():\n"
         "    return ['[architecture]\\nname = \"Blackwell\"\\n']\n"),
    ]:
        info = tmp_path / f"{dist}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist.replace('_', '-')}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[mmasim]\n{ep} = {module}\n")
        (tmp_path / f"{module}.py").write_text(code)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(tmp_path)
    r = subprocess.run([sys.executable, "-m", "mmasim", "list"], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=300)
    assert r.returncode == 0 and "Blackwell" in r.stdout and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 2, r.stderr
    (bad,) = [x for x in lines if "'badep'" in x]
    assert "bad-ep 1.0" in bad and "nonexistent_dependency_of_bad_ep" in bad and "PluginWarning" in bad
    (evil,) = [x for x in lines if "'evilep'" in x]
    assert "evil-ep 1.0" in evil and "mmasim_plugins.archs" in evil and "extends" in evil
