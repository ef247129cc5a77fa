"""The seam between a model and its backends: a Plan (one datapath, resolved once)
and ``backend.compute(plan, rows)``; compiled kernels come from the
``mmasim_kernels`` plugin hook."""

import numpy as np
import pytest

import mmasim
from mmasim import backends
from mmasim.backends.numpy import reference
from mmasim.backends.plan import Plan, Rows
from mmasim.registry.registration import get_plugin_manager, hookimpl

F16_ONE, F32_ONE = 0x3C00, 0x3F800000
F16_2M24 = 0x0001                                   # 2^-24, the smallest f16 subnormal


def test_plan_holds_the_resolved_datapath():
    m = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    plan = m.plan
    assert isinstance(plan, Plan)
    # Ampere reads 16 bytes per step: m16n8k16 f16 is two steps of 8 (docs/datapaths.md §3)
    assert plan.step == 8 and plan.datapath.k == 16
    assert (plan.a_format.name, plan.c_format.name, plan.d_format.name) == ("f16", "f32", "f32")
    assert plan.encoding is m.encoding and plan.scale_format is None and plan.sparse_rule is None
    assert plan.builtin and plan.parameters == m.datapath.parameters
    # one plan per model, built once
    assert m.plan is plan


def test_each_backend_computes_rows_of_a_plan():
    """``compute(plan, rows)`` of every backend: sixteen products 1.0 x 1.0 sum to 16.0;
    a product 2^-24 in the second step is lost against 1.0 (and 2.0) by the RZ f32
    encoding of the step; one row of B broadcast against three of A."""
    plan = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32").plan
    ones = np.full(16, F16_ONE, dtype=np.uint16)
    tiny = np.zeros(16, dtype=np.uint16)
    tiny[0], tiny[8] = F16_ONE, F16_2M24
    a = np.stack([ones, tiny, tiny])
    b = ones[None, :]                                         # broadcast over the batch
    c = np.array([0, 0, F32_ONE], dtype=np.uint32)
    want = [0x41800000, F32_ONE, 0x40000000]                  # 16.0, 1.0, 2.0
    for name in backends.available():
        rows = Rows.batch([a, b, c], (3,), 0, 3)
        got = backends.get(name).compute(plan, rows)
        assert [int(x) for x in got] == want, name
        # a chunk of the same rows
        assert [int(x) for x in backends.get(name).compute(plan, rows.chunk(1, 3))] == want[1:], name
    assert [int(x) for x in reference(plan, a.astype(np.uint64), np.repeat(b, 3, 0).astype(np.uint64),
                                      c.astype(np.uint64))] == want


def test_matrix_rows_are_row_i_of_a_against_column_j_of_b():
    plan = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32").plan
    A = np.zeros((2, 16), dtype=np.uint16)
    A[0, :3] = F16_ONE                                        # row 0: three ones; row 1: zero
    B = np.full((16, 3), F16_ONE, dtype=np.uint16)
    B[:, 2] = 0                                               # column 2: zero
    C = np.full((2, 3), F32_ONE, dtype=np.uint32)
    rows = Rows.outer(A, B.T, C.reshape(-1))
    four, one = 0x40800000, F32_ONE
    for name in backends.available():
        got = backends.get(name).compute(plan, rows).reshape(2, 3)
        assert got.tolist() == [[four, four, one], [one, one, one]], name


class _FlagEverything:
    """A kernel that computes nothing and leaves every row to the reference (flags)."""

    def __init__(self):
        self.calls = 0

    def __call__(self, args, n):
        self.calls += 1
        return np.zeros(n, dtype=np.uint32), np.ones(n, dtype=bool)


#: a plugin's own accumulator family: the built-in integer accumulator under another name,
#: on an architecture of the plugin's own (so its kernel is the plugin's to give)
COPY_TABLE = """
[architecture]
name = "KernelToy"
vendor = "Example"

[[datapath]]
op = "toy.mma"
a = "s8"
b = "s8"
c = "s32"
d = "s32"
k = 32
accumulator = "integer_copy"
rounding = "s32-wrap"
status = { kind = "assumed", evidence = "test" }
"""


def _copy_plugin(**hooks):
    from mmasim.accumulators import BUILTIN_ACCUMULATORS

    plugin = type("Plugin", (), {})()
    plugin.mmasim_accumulators = hookimpl(lambda: {"integer_copy": BUILTIN_ACCUMULATORS["integer"]})
    plugin.mmasim_architectures = hookimpl(lambda: [COPY_TABLE])
    for name, fn in hooks.items():
        setattr(plugin, name, hookimpl(fn))
    return plugin


def test_kernels_come_from_the_mmasim_kernels_hook():
    pytest.importorskip("numba")
    seen = []
    kern = _FlagEverything()
    mmasim.register(_copy_plugin(mmasim_kernels=lambda: {"integer_copy": lambda plan: seen.append(plan) or kern}),
                    name="test-kernels")
    try:
        m = mmasim.MMA("KernelToy", "toy.mma.s32.s8.s8")
        assert backends.kernel_for(m) is kern and seen == [m.plan]
        got = m.dot(np.full((4, 32), 2, np.uint8), np.full((4, 32), 3, np.uint8), np.full(4, 5, np.uint32),
                    backend="numba")
        # every row flagged: the words are the reference's (32 * 2 * 3 + 5), and the kernel ran once
        assert kern.calls == 1 and [int(x) for x in got] == [32 * 6 + 5] * 4
        assert backends.kernel_coverage(m) == "compiled"
    finally:
        mmasim.unregister(name="test-kernels")
    assert "integer_copy" not in backends.compiled_families()


def test_register_kernel_is_a_hook_plugin():
    pytest.importorskip("numba")
    kern = _FlagEverything()
    mmasim.register(_copy_plugin(), name="copy-family")
    try:
        backends.register_kernel("integer_copy")(lambda plan: kern)
        assert get_plugin_manager().get_plugin("kernel:integer_copy") is not None
        assert "integer_copy" in backends.compiled_families()
        m = mmasim.MMA("KernelToy", "toy.mma.s32.s8.s8")
        got = m.dot(np.full((2, 32), 2, np.uint8), np.full((2, 32), 3, np.uint8), np.full(2, 5, np.uint32),
                    backend="numba")
        assert kern.calls == 1 and [int(x) for x in got] == [32 * 6 + 5] * 2
    finally:
        if get_plugin_manager().get_plugin("kernel:integer_copy") is not None:
            mmasim.unregister(name="kernel:integer_copy")
        mmasim.unregister(name="copy-family")
    assert "integer" in backends.compiled_families()


def test_plan_map_keys_by_identity_and_forgets_a_collected_plan():
    import gc

    from mmasim.backends.plan import PlanMap

    class Key:          # stands for a plan: compared by identity, weakly referable
        pass

    prepared, a, b = PlanMap(), Key(), Key()
    prepared[a] = "kernel of a"
    assert prepared.get(a) == "kernel of a" and prepared.get(b, "none") == "none"
    assert a in prepared and b not in prepared and prepared[a] == "kernel of a"
    assert prepared.setdefault(b, {}) == {} and len(prepared) == 2
    del a
    gc.collect()
    assert len(prepared) == 1 and prepared.pop(b) == {} and len(prepared) == 0
