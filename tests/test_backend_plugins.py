"""Backends are plugins (``mmasim_backends``), kernels are keyed by (backend, family), a plan is
frozen and each backend keeps its own preparation of it, and the fallback below a compiled
kernel has one rung: the reference (docs/plugins.md, "Backends and kernels")."""

import gc
import weakref

import attrs
import numpy as np
import pytest

import mmasim
from mmasim import backends
from mmasim.backends import numba as numba_backend
from mmasim.backends import numpy as numpy_backend
from mmasim.backends.numpy import NumpyBackend, lean_path
from mmasim.backends.numpy.lean import LeanGrouped, LeanWindow
from mmasim.errors import PluginConflict
from mmasim.operands.wordgen import operands
from mmasim.registry.build import get_registry
from mmasim.registry.manager import get_plugin_manager
from test_plugin_isolation import make_plugin, registered  # noqa: F401

AMPERE_F16 = ("A100", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
B200_NVFP4 = ("B200", "tcgen05.kind::mxf4nvf4.4X")
RTX_NVFP4 = ("RTX 5090", "mma.sync.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.m16n8k64.f32.e2m1.e2m1.ue4m3")
RTX_NVFP4_SPARSE = ("RTX 5090", "mma.sync.sp::ordered_metadata.kind::mxf4nvf4.block_scale.scale_vec::4X.block16."
                                "m16n8k128.f32.e2m1.e2m1.ue4m3")
F16_ONE = 0x3C00


class _ReferenceBackend:
    """A third-party backend: the reference, counting its calls."""

    calls = 0

    def __init__(self):
        self.name = "toy"

    def takes_matrices(self, plan):
        return False

    def compute(self, plan, rows):
        type(self).calls += 1
        return numpy_backend.reference_rows(plan, rows)


class _NoDevice(_ReferenceBackend):
    @staticmethod
    def unavailable():
        return "no toy device here"


# ------------------------------------------------------------------ backends
def test_a_backend_plugin_is_chosen_by_its_name(registered):  # noqa: F811
    registered(make_plugin(mmasim_backends={"toy": _ReferenceBackend}), "toy-backend")
    assert "toy" in backends.BACKENDS and "toy" in backends.available()
    m = mmasim.MMA(*AMPERE_F16, backend="toy")
    ones = np.full(16, F16_ONE, np.uint16)
    before = _ReferenceBackend.calls
    assert int(m.dot(ones, ones, 0)) == 0x41800000          # sixteen products 1.0: 16.0
    assert _ReferenceBackend.calls == before + 1
    assert backends.get("toy").name == "toy"


def test_the_builtin_backends_are_registered_by_their_own_modules():
    assert backends.BACKENDS[:2] == ("numpy", "numba")
    owners = {name: factory for name, factory in get_registry().backends.items()}
    assert owners["numpy"] is NumpyBackend and owners["numba"] is backends.NumbaBackend


def test_an_unknown_backend_lists_the_registered_ones(registered):  # noqa: F811
    registered(make_plugin(mmasim_backends={"toy": _ReferenceBackend}), "toy-backend")
    with pytest.raises(backends.BackendError, match=r"unknown backend 'tpu'.*auto, numpy, numba, cuda, toy"):
        backends.resolve("tpu")


def test_an_unavailable_backend_is_refused_with_its_reason(registered):  # noqa: F811
    registered(make_plugin(mmasim_backends={"toy": _NoDevice}), "toy-backend")
    assert "toy" in backends.BACKENDS and "toy" not in backends.available()
    with pytest.raises(backends.BackendError, match="'toy'.*no toy device here"):
        mmasim.MMA(*AMPERE_F16, backend="toy")


def test_a_backend_name_has_one_owner(registered):  # noqa: F811
    with pytest.raises(PluginConflict, match=r"'evil-backend'.*backend 'numba'.*mmasim.backends.numba"):
        registered(make_plugin(mmasim_backends={"numba": _ReferenceBackend}), "evil-backend")
    assert get_registry().backends["numba"] is backends.NumbaBackend
    registered(make_plugin(mmasim_backends={"toy": _ReferenceBackend}), "toy-backend")
    with pytest.raises(PluginConflict, match=r"'other-toy'.*backend 'toy'.*'toy-backend'"):
        registered(make_plugin(mmasim_backends={"toy": _NoDevice}), "other-toy")


class _LargeJobs(_ReferenceBackend):
    """A backend that ``auto`` gives the jobs of 10,000 products or more."""

    @staticmethod
    def auto_takes(products):
        return products >= 10_000


def test_auto_gives_a_backend_the_jobs_it_takes(registered, monkeypatch):  # noqa: F811
    monkeypatch.delenv(backends.ENV, raising=False)
    registered(make_plugin(mmasim_backends={"toy": _LargeJobs}), "toy-backend")
    m = mmasim.MMA(*AMPERE_F16)
    assert backends.choose(None, m.plan, 10_000) == "toy" and backends.choose("numpy", m.plan, 10_000) == "numpy"
    assert backends.choose(None, m.plan, 9_999) != "toy"
    a = np.full((1000, 16), F16_ONE, np.uint16)           # 16,000 products
    before = _LargeJobs.calls
    assert set(m.dot(a, a, np.zeros(1000, np.uint32)).tolist()) == {0x41800000}
    assert _LargeJobs.calls > before


def test_auto_passes_over_a_backend_that_cannot_be_used_here(registered, monkeypatch):  # noqa: F811
    monkeypatch.delenv(backends.ENV, raising=False)
    unusable = type("Unusable", (_NoDevice,), {"auto_takes": staticmethod(lambda products: True)})
    registered(make_plugin(mmasim_backends={"toy": unusable}), "toy-backend")
    assert backends.choose(None, mmasim.MMA(*AMPERE_F16).plan, 1 << 30) != "toy"


def test_a_request_wants_the_backend_it_names_or_under_auto_one_usable_here(registered, monkeypatch):  # noqa: F811
    """``backends.wants``: a named request (argument, else MMASIM_BACKEND) wants the backend it
    resolves to; ``auto`` wants any registered backend that can be used here, none other."""
    registered(make_plugin(mmasim_backends={"toy": _NoDevice}), "toy-backend")
    monkeypatch.delenv(backends.ENV, raising=False)
    assert backends.requested(None) == "auto" and backends.requested(" NumPy ") == "numpy"
    assert backends.wants(None, "numpy") and backends.wants("AUTO", "numpy")
    assert not backends.wants(None, "toy") and not backends.wants(None, "no-such-backend")
    assert backends.wants("numpy", "numpy") and not backends.wants(" numpy", "numba")
    monkeypatch.setenv(backends.ENV, "numpy")
    assert backends.requested(None) == "numpy" and backends.wants(None, "numpy") and not backends.wants(None, "toy")
    with pytest.raises(backends.BackendError, match="'toy'.*cannot be used here"):
        backends.wants("toy", "toy")
    with pytest.raises(backends.BackendError, match="unknown backend 'no-such-backend'"):
        backends.wants("no-such-backend", "numpy")


# ------------------------------------------------------------------ kernels by (backend, family)
def _builder(plan):
    return None


def _other_builder(plan):
    return None


def test_two_backends_kernels_of_one_family_coexist(registered):  # noqa: F811
    registered(make_plugin(mmasim_kernels={("toy", "window"): _builder}), "toy-kernels")
    kernels = get_registry().kernels
    assert kernels[("toy", "window")] is _builder and ("numba", "window") in kernels
    assert backends.kernel_builders("toy") == {"window": _builder}
    assert backends.kernel_builders()["window"] is not _builder        # numba's own, untouched


def test_the_same_backend_and_family_twice_is_a_conflict(registered):  # noqa: F811
    registered(make_plugin(mmasim_kernels={("toy", "window"): _builder}), "toy-kernels")
    with pytest.raises(PluginConflict, match=r"'evil-kernels'.*\('toy', 'window'\).*'toy-kernels'"):
        registered(make_plugin(mmasim_kernels={("toy", "window"): _other_builder}), "evil-kernels")
    # a family name alone is the numba backend's kernel: the built-in window's
    with pytest.raises(PluginConflict, match=r"\('numba', 'window'\).*mmasim.backends.numba"):
        registered(make_plugin(mmasim_kernels={"window": _other_builder}), "evil-plain")


def test_register_kernel_names_its_backend():
    backends.register_kernel("window", backend="toy")(_builder)
    try:
        assert get_plugin_manager().get_plugin("kernel:toy:window") is not None
        assert backends.kernel_builders("toy") == {"window": _builder}
    finally:
        mmasim.unregister(name="kernel:toy:window")
    assert backends.kernel_builders("toy") == {}


# ------------------------------------------------------------------ a frozen plan
def test_a_plan_is_frozen():
    plan = mmasim.MMA(*AMPERE_F16).plan
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        plan.step = 4
    with pytest.raises((attrs.exceptions.FrozenInstanceError, AttributeError)):
        plan.cache = {}
    assert not hasattr(plan, "cache") and not hasattr(plan, "__dict__")
    assert plan.word_dtypes == (np.uint16, np.uint16, np.uint32)


def test_two_backends_keep_their_preparation_of_one_plan_apart():
    pytest.importorskip("numba")
    m = mmasim.MMA(*AMPERE_F16)
    plan = m.plan
    fields = attrs.astuple(plan, recurse=False)
    a = np.full((4, 16), F16_ONE, np.uint16)
    want = m.dot(a, a, np.zeros(4, np.uint32), backend="numpy")
    lean = lean_path(plan)
    assert isinstance(lean, LeanWindow) and not backends.kernel_in_use(plan)     # numpy's, not numba's
    assert np.array_equal(m.dot(a, a, np.zeros(4, np.uint32), backend="numba"), want)
    assert backends.kernel_in_use(plan) and lean_path(plan) is lean
    assert numba_backend._KERNELS[plan] is not lean
    assert all(x is y for x, y in zip(attrs.astuple(plan, recurse=False), fields))   # the plan is untouched


def test_a_backends_preparation_goes_with_its_plan():
    m = mmasim.MMA(*AMPERE_F16)
    a = np.full((4, 16), F16_ONE, np.uint16)
    m.dot(a, a, np.zeros(4, np.uint32), backend="numpy")
    gone = weakref.ref(m.plan)
    assert lean_path(gone()) is not None
    del m
    gc.collect()
    assert gone() is None           # the lean path does not keep its plan alive


# ------------------------------------------------------------------ the fallback ladder
class _Flagging:
    """The plan's own compiled kernel, with every other row flagged (as a row past int64 is)."""

    def __init__(self, kernel, seen):
        self.kernel, self.seen = kernel, seen
        self.word_dtypes = getattr(kernel, "word_dtypes", None)

    def __call__(self, args, n):
        self.seen.append("kernel")
        words, flags = self.kernel(args, n)
        forced = np.zeros(n, bool)
        forced[::2] = True
        return words, forced if flags is None else flags | forced


def _no_rung(what):
    def refuse(*args, **kw):
        pytest.fail(f"{what} is no rung of the numba backend's fallback")
    return refuse


def _below_the_kernel(monkeypatch, seen):
    """Record the reference's calls from the numba backend in ``seen``; fail on the numpy backend or its lean paths."""
    ref = numba_backend.reference_rows
    monkeypatch.setattr(numba_backend, "reference_rows", lambda *args: seen.append("reference") or ref(*args))
    monkeypatch.setattr(NumpyBackend, "compute", _no_rung("the numpy backend"))
    monkeypatch.setattr(LeanWindow, "__call__", _no_rung("the lean numpy path"))
    monkeypatch.setattr(LeanGrouped, "__call__", _no_rung("the lean numpy path"))


@pytest.mark.parametrize("which", [AMPERE_F16, B200_NVFP4, RTX_NVFP4, RTX_NVFP4_SPARSE],
                         ids=["window", "B200 NVFP4", "RTX NVFP4 group-scaled", "RTX NVFP4 sparse"])
def test_a_flagged_row_goes_from_its_kernel_straight_to_the_reference(which, monkeypatch):
    """At most two levels: the kernel, then the reference for the rows it flags (the sparse rows
    selected again from the rows as given); neither the numpy backend nor its lean path."""
    pytest.importorskip("numba")
    m = mmasim.MMA(*which)
    a, b, c, kw = operands(m, 16, np.random.default_rng(31), "near_one")
    want = m.dot(a, b, c, backend="numpy", **kw)
    kernel = backends.kernel_for(m)
    assert kernel is not None
    seen = []
    monkeypatch.setitem(numba_backend._KERNELS, m.plan, _Flagging(kernel, seen))
    _below_the_kernel(monkeypatch, seen)
    got = m.dot(a, b, c, backend="numba", **kw)
    assert seen == ["kernel", "reference"] and len(seen) <= 2
    assert np.array_equal(got, want)


def test_a_datapath_no_kernel_takes_goes_straight_to_the_reference(monkeypatch):
    pytest.importorskip("numba")
    m = mmasim.MMA(*AMPERE_F16)
    assert lean_path(m.plan) is not None        # numpy's own choice: its lean path
    a, b, c, kw = operands(m, 16, np.random.default_rng(32), "near_one")
    want = m.dot(a, b, c, backend="numpy", **kw)
    seen = []
    monkeypatch.setitem(numba_backend._KERNELS, m.plan, None)
    _below_the_kernel(monkeypatch, seen)
    got = m.dot(a, b, c, backend="numba", **kw)
    assert seen == ["reference"]
    assert np.array_equal(got, want)
