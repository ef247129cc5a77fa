"""No plugin changes a built-in's words, layouts or instruction strings (docs/plugins.md,
"Isolation and conflicts"): kernels, register layouts and format display names follow the
one-owner rule datapaths follow.  A collision is a ``PluginConflict`` naming both owners
(``mmasim.register``: raised; an entry point: skipped, reported, listed by
``mmasim.registry.registration.status``), and the built-in result is what it was.

The property tests draw built-in parts (kernel families, resolved layouts, datapaths) and
attack each the way a copied part would.
"""

import functools
import warnings

import attrs
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_plugin_isolation import FakeEntryPoint, entry_points, make_plugin, plugin_warnings, registered  # noqa: F401

import mmasim
from mmasim import backends
from mmasim.registry import registration
from mmasim.backends.numba import BUILDERS
from mmasim.errors import PluginConflict, PluginError
from mmasim.harness.spec import layout_name
from mmasim.execution.model import Model
from mmasim.registry.build import get_registry

F16_ONE, F16_MINUS_ONE, F16_2M15 = 0x3C00, 0xBC00, 0x0200
AMPERE_F16 = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def window_facts(model):
    """The two D words of docs/architecture.md "From string to words" (Ampere's F = 24 window):
    1 - 1 + 2^-30 in one step truncates 2^-30 away (+0); 2^-30 alone in the second step
    keeps it (0x30800000)."""
    z = [0] * 13
    one_step = model.dot([F16_ONE, F16_MINUS_ONE, F16_2M15] + z, [F16_ONE, F16_ONE, F16_2M15] + z, 0)
    second = model.dot([F16_ONE, F16_MINUS_ONE] + [0] * 6 + [F16_2M15] + [0] * 7,
                       [F16_ONE, F16_ONE] + [0] * 6 + [F16_2M15] + [0] * 7, 0)
    return int(one_step), int(second)


WINDOW_FACTS = (0x00000000, 0x30800000)


class _WrongWords:
    """A "kernel" that answers 0x7F800000 (+inf) for every row."""

    def __call__(self, args, n):
        return np.full(n, 0x7F800000, dtype=np.uint32), None


def _status(name):
    return next(s for s in registration.status() if s.name == name)


# ------------------------------------------------------------------ kernels
@SETTINGS
@given(family=st.sampled_from(sorted(BUILDERS)))
def test_kernel_for_a_builtin_family_is_a_conflict_naming_both(registered, family):
    with pytest.raises(PluginConflict) as info:
        registered(make_plugin(mmasim_kernels={family: lambda plan: _WrongWords()}), "evil-kernels")
    text = str(info.value)
    assert "'evil-kernels'" in text and "'mmasim.backends.numba'" in text and repr(family) in text
    assert "evil-kernels" not in {s.name for s in registration.status()}
    assert backends.kernel_builders()[family] is not None


def test_register_kernel_for_a_builtin_family_is_a_conflict():
    with pytest.raises(PluginConflict, match="'window'.*mmasim.backends.numba"):
        backends.register_kernel("window")(lambda plan: _WrongWords())
    assert registration.get_plugin_manager().get_plugin("kernel:window") is None


def test_builtin_kernel_names_do_not_depend_on_numba_being_installed(monkeypatch):
    from mmasim.backends import numba as nb

    monkeypatch.setattr(nb, "_numba_ok", False)
    registration.reset()
    try:
        assert set(get_registry().kernels) == {("numba", family) for family in BUILDERS}
        assert backends.compiled_families() == []
    finally:
        monkeypatch.undo()
        registration.reset()


def test_kernel_entry_point_for_a_builtin_family_cannot_change_numba_words(entry_points):  # noqa: F811
    pytest.importorskip("numba")
    entry_points.append(FakeEntryPoint("evil", make_plugin("evil_mod", mmasim_kernels={
        "window": lambda plan: _WrongWords()})))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        m = mmasim.MMA("A100", AMPERE_F16, backend="numba")
        assert window_facts(m) == WINDOW_FACTS
    assert not isinstance(backends.kernel_for(m), _WrongWords) and backends.kernel_coverage(m) == "compiled"
    (msg,) = [w for w in plugin_warnings(record) if "'evil'" in w]
    assert "'window'" in msg and "mmasim.backends.numba" in msg and "skipped" in msg
    st_ = _status("evil")
    assert not st_.ok and "'window'" in st_.error


def test_kernel_hook_that_raises_is_skipped_and_reported_not_fatal(entry_points):  # noqa: F811
    entry_points.append(FakeEntryPoint("raiser", make_plugin("raiser_mod", mmasim_kernels=RuntimeError("boom"))))
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for backend in [None] + (["numba"] if backends.numba_available() else []):   # None: the default
            assert window_facts(mmasim.MMA("A100", AMPERE_F16, backend=backend)) == WINDOW_FACTS, backend
    assert any("'raiser'" in w and "boom" in w for w in plugin_warnings(record))
    st_ = _status("raiser")
    assert not st_.ok and "mmasim_kernels" in st_.error and "RuntimeError: boom" in st_.error


def test_kernel_hook_that_raises_is_refused_by_register(registered):
    with pytest.raises(PluginError, match="mmasim_kernels.*RuntimeError: boom"):
        registered(make_plugin(mmasim_kernels=RuntimeError("boom")), "raiser")
    assert registration.get_plugin_manager().get_plugin("raiser") is None
    assert window_facts(mmasim.MMA("A100", AMPERE_F16)) == WINDOW_FACTS


# ------------------------------------------------------------------ layouts
@functools.lru_cache(maxsize=1)
def placed_operands() -> tuple:
    """``(datapath, operand, rule name)`` of every built-in register operand a layout places
    (at the datapath's one shape)."""
    reg = get_registry()
    out = []
    for arch in reg.architectures.values():
        for dp in arch.datapaths:
            if len(dp.m) != 1 or len(dp.n) != 1 or dp.refuse:
                continue
            model = Model(dp, reg)
            for operand in ("a", "b", "c", "d"):
                try:
                    out.append((dp, operand, model.layout(operand).name))
                except mmasim.MMAError:
                    pass
    return tuple(out)


def _copies(rule, dp, how):
    """``rule`` under a new name, with one more filter that still matches ``dp``."""
    if how == "arch":
        return attrs.evolve(rule, name="evil.copy", arch=(dp.arch,))
    if how == "shape":
        return attrs.evolve(rule, name="evil.copy", m=dp.m[0], n=dp.n[0], k=dp.k)
    return attrs.evolve(rule, name="evil.copy", types=(dp.a,), arch=(dp.arch,), m=dp.m[0], n=dp.n[0], k=dp.k)


@SETTINGS
@given(case=st.sampled_from(placed_operands()), how=st.sampled_from(("arch", "shape", "everything")))
def test_builtin_layout_copied_under_a_new_name_is_a_conflict(registered, case, how):
    dp, operand, name = case
    reg = get_registry()
    copy = _copies(reg.layouts[name], dp, how)
    with pytest.raises(PluginConflict) as info:
        registered(make_plugin(mmasim_layouts=[copy]), "evil-layouts")
    text = str(info.value)
    assert "'evil-layouts'" in text and "'evil.copy'" in text and "mmasim_plugins.archs" in text
    assert "evil.copy" not in get_registry().layouts
    assert Model(dp, get_registry()).layout(operand).name == name


def test_layout_entry_point_cannot_change_layout_fragments_warp_or_harness(entry_points):  # noqa: F811
    m = mmasim.MMA("A100", AMPERE_F16)
    rule = get_registry().layouts[m.layout("b").name]
    # B with its two elements swapped: a bijection still, so only the conflict rule stops it
    swapped = attrs.evolve(rule, name="evil.swapped", arch=("Ampere",), row=f"{rule.row} + 1 - 2 * (i % 2)")
    registration.reset()
    entry_points.append(FakeEntryPoint("evil", make_plugin("evil_mod", mmasim_layouts=[swapped])))
    A = np.arange(256, dtype=np.uint16).reshape(16, 16) % 7 + 0x3C00
    B = np.arange(128, dtype=np.uint16).reshape(16, 8) % 5 + 0x3C00
    C = np.zeros((16, 8), dtype=np.uint32)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        m = mmasim.MMA("A100", AMPERE_F16)
        got = m.layout("b")
    assert got.name == rule.name and layout_name(m, "b") == rule.name
    assert any("'evil'" in w and "'evil.swapped'" in w for w in plugin_warnings(record))
    # fragments place B as the built-in rule says: element i of lane l at its (row, col)
    regs = m.fragments("b", B)
    for lane in (0, 5, 31):
        for i in range(got.elements):
            r, c = got.coords(lane, i)
            assert (int(regs[lane, i // 2]) >> (16 * (i % 2))) & 0xFFFF == B[r, c]
    # and the warp computes the matrix product of those operands
    d = m.unfragment("d", m.warp(m.fragments("a", A), regs, m.fragments("c", C)))
    assert (d == m(A, B, C)).all()
    assert not _status("evil").ok


# ------------------------------------------------------------------ format display names
def _table_of(dp, a_key: str) -> dict:
    """An extension of ``dp``'s architecture: ``dp`` again, with A in the format ``a_key`` (a
    sparse table's ``k`` is the stored K)."""
    fields = {f: getattr(dp, f) for f in ("op", "kind", "b", "c", "d", "k", "accumulator", "rounding", "chunk",
                                          "scale", "block", "scale_vec", "sparse")}
    entry = {k: v for k, v in fields.items() if v is not None}
    entry.update(a=a_key, k=dp.stored_k, m=list(dp.m), n=list(dp.n), params=dp.parameters, saturate=dp.saturate,
                 qualifiers=list(dp.qualifiers), status={"kind": "assumed", "evidence": "test"})
    return {"architecture": {"extends": dp.arch}, "datapath": [entry], "_source": "evil table"}


@functools.lru_cache(maxsize=1)
def resolvable_datapaths() -> tuple:
    """Built-in datapaths whose printed instruction string resolves to themselves."""
    reg = get_registry()
    out = []
    for arch in reg.architectures.values():
        if arch.inherits:
            continue
        for dp in arch.datapaths[::7]:       # a spread of every family, cheaply
            try:
                if mmasim.MMA(arch.name, dp.canonical(reg.formats)).datapath == dp:
                    out.append(dp)
            except mmasim.MMAError:
                pass
    return tuple(out)


@SETTINGS
@given(dp=st.sampled_from(resolvable_datapaths()))
def test_format_with_a_builtin_display_name_cannot_take_a_builtin_string(registered, dp):
    reg = get_registry()
    twin = attrs.evolve(reg.formats[dp.a], key=f"{dp.a}.evil")          # same display name, new key
    text = dp.canonical(reg.formats)
    with pytest.raises(PluginConflict) as info:
        registered(make_plugin(mmasim_formats=[twin], mmasim_architectures=[_table_of(dp, twin.key)]), "evil-format")
    msg = str(info.value)
    assert "'evil-format'" in msg and "mmasim_plugins.archs" in msg and repr(text) in msg
    assert mmasim.MMA(dp.arch, text).datapath == dp


def test_format_with_a_builtin_display_name_is_fine_for_a_new_architecture(registered):
    reg = get_registry()
    twin = attrs.evolve(reg.formats["f16"], key="f16.mine")
    dp = mmasim.MMA("A100", AMPERE_F16).datapath
    table = _table_of(dp, twin.key)
    table["architecture"] = {"name": "Twin Toy", "vendor": "Example"}
    registered(make_plugin(mmasim_formats=[twin], mmasim_architectures=[table]), "twin")
    mine = mmasim.MMA("Twin Toy", AMPERE_F16)
    assert mine.datapath.a == "f16.mine" and window_facts(mine) == WINDOW_FACTS
    assert mmasim.MMA("A100", AMPERE_F16).datapath == dp
