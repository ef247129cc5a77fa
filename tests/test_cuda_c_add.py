"""D + C after a datapath's steps (``c_add``: fp8 ``mma.sync`` on Hopper and Blackwell) by the
compiled body of mmasim/backends/cuda/c_add.py, so that device operands add C on the device.

Expectations: hand-worked IEEE additions; :func:`mmasim.backends.plan.add_c` (the numpy
reference's addition) for hypothesis's words of D and C, specials among them, on every
datapath with a ``c_add``; and under numba-cuda's simulator (tests/cuda_sim.py) ``Model.dot``
of device operands gives the numpy backend's words with no operand and no D word copied to
the host.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import cuda_sim
import mmasim
from mmasim.backends.cuda import c_add
from mmasim.backends.plan import Plan, add_c
from mmasim.registry.build import get_registry


def _c_add_datapaths():
    reg = get_registry()
    return [(arch.name, dp.canonical(reg.formats)) for arch in reg.architectures.values() if not arch.inherits
            for dp in arch.datapaths if dp.c_add and not dp.refuse]


C_ADD = _c_add_datapaths()


def _plan(arch, instruction):
    return mmasim.MMA(arch, instruction, backend="numpy").plan


#: words of each D format worth hitting: signed zeros, the smallest subnormals, the largest
#: finite, infinities, NaN, one and its neighbours (ties and cancellation)
SPECIAL = {
    "f32": [0x00000000, 0x80000000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00800000, 0x7F7FFFFF, 0xFF7FFFFF,
            0x7F7FFFFE, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00001, 0x3F800000, 0xBF800000, 0x3F800001,
            0x33800000, 0x33800001, 0xB3800000, 0x4B800000, 0x4B800001],
    "f16": [0x0000, 0x8000, 0x0001, 0x8001, 0x03FF, 0x0400, 0x7BFF, 0xFBFF, 0x7BFE, 0x7C00, 0xFC00, 0x7E00,
            0xFE01, 0x3C00, 0xBC00, 0x3C01, 0x1400, 0x1401, 0x9400, 0x6400, 0x6401],
}


def _word_lists(d):
    bits = 32 if d == "f32" else 16
    word = st.one_of(st.sampled_from(SPECIAL[d]), st.integers(0, (1 << bits) - 1))
    return st.lists(st.tuples(word, word), min_size=1, max_size=64)


@pytest.mark.parametrize("d,pairs,want", [
    ("f16", [(0x3C00, 0x3C00), (0x3C00, 0xBC00), (0x8000, 0x8000), (0x0000, 0x8000), (0x7BFF, 0x7BFF),
             (0x7C00, 0xFC00), (0x7C00, 0x3C00), (0x0001, 0x8001), (0x3C00, 0x1000), (0x3C01, 0x1000)],
     # 2, +0 (x - x), -0, +0, overflow to inf, inf - inf: NaN, inf, +0, a tie to even (1), a tie up
     [0x4000, 0x0000, 0x8000, 0x0000, 0x7C00, 0x7FFF, 0x7C00, 0x0000, 0x3C00, 0x3C02]),
    ("f32", [(0x3F800000, 0x33800000), (0x3F800000, 0x33800001), (0x00000001, 0x00000001), (0xFF800000, 0x7FC00000)],
     # 1 + 2**-24: a tie to even (1); just above the tie: up; subnormals add exactly; NaN
     [0x3F800000, 0x3F800001, 0x00000002, 0x7FFFFFFF]),
])
def test_add_c_body_adds_as_one_ieee_rne_addition(d, pairs, want):
    arch, instruction = next(x for x in C_ADD if x[1].startswith(f"mma.sync.m16n8k32.{d}."))
    plan = _plan(arch, instruction)
    dt = plan.encoding.dtype
    got = c_add.add_c(plan, np.array([p[0] for p in pairs], dt), np.array([p[1] for p in pairs], dt))
    nan = plan.c_add.nan_word
    assert [int(x) for x in got] == [nan if w in (0x7FFF, 0x7FFFFFFF) else w for w in want]


@pytest.mark.parametrize("arch,instruction", C_ADD)
def test_add_c_body_on_the_cpu_driver_gives_the_reference_words(arch, instruction):
    plan = _plan(arch, instruction)
    dt = plan.encoding.dtype

    @settings(max_examples=40, deadline=None)
    @given(_word_lists(plan.d_format.key), st.booleans())
    def check(pairs, broadcast):
        d = np.array([p[0] for p in pairs], dt)
        c = np.array([p[1] for p in pairs], plan.word_dtypes[2])
        ic = np.arange(len(c))[::-1].copy() if broadcast else None
        want = add_c(plan, d, c if ic is None else c[ic])
        got = c_add.add_c(plan, d, c, ic)
        assert got.dtype == want.dtype
        assert got.tolist() == want.tolist(), [(hex(x), hex(y), hex(g), hex(w))
                                               for (x, y), g, w in zip(pairs, got, want) if g != w][:4]

    check()


_SCRIPT = """
    from mmasim.operands import wordgen
    from mmasim.backends.cuda import device

    arch, instruction = json.loads(sys.argv[1])
    m = mmasim.MMA(arch, instruction)
    rng = np.random.default_rng(31)
    out = {}
    for kind in ("mixed", "edge"):
        a, b, c, kw = wordgen.operands(m, 24, rng, kind)
        want = m.dot(a, b, c, backend="numpy")
        stubs = [Stub(a.astype(np.uint8)), Stub(b.astype(np.uint8)), Stub(c.astype(np.uint16))]
        del copies[:]
        dev = m.dot(*stubs, backend="cuda")
        d_dtype = np.dtype(m.plan.encoding.dtype)
        out[kind] = {"operand copies": copied([s.a for s in stubs]),
                     "D copies": sum(x.dtype == d_dtype for x in copies),     # C's words too
                     "want": want.tolist(), "device": dev.copy_to_host().tolist(), "type": type(dev).__name__}
    print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def simulated():
    return cuda_sim.run(_SCRIPT, ("H100", "mma.sync.m16n8k32.f16.e4m3.e5m2"))


@pytest.mark.parametrize("kind", ["mixed", "edge"])
def test_device_operands_add_c_on_the_device(simulated, kind):
    """``Model.dot`` of device operands on a datapath that adds C after its steps gives the
    numpy words, as a device array, with no operand and no D word copied to the host."""
    rec = simulated[kind]
    assert rec["device"] == rec["want"]
    assert rec["type"] == "FakeCUDAArray"
    assert rec["operand copies"] == 0
    assert rec["D copies"] == 0


_F64 = st.floats(allow_nan=False, allow_infinity=False, min_value=-2.0 ** 1000, max_value=2.0 ** 1000)


@settings(max_examples=300, deadline=None)
@given(_F64, _F64)
def test_odd_sum_is_the_reference_round_to_odd_sum(a, b):
    """The body's binary64 sum rounded to odd: :func:`mmasim.arith.ieee.odd_sum`'s bits (the bump
    is unobservable in f16 / f32 words: binary64 holds twice their precision and two bits more)."""
    from mmasim.arith import ieee

    want = ieee.odd_sum(np.array([a]), np.array([b]))[0]
    assert np.float64(c_add._odd_sum(a, b)).view(np.int64) == np.float64(want).view(np.int64)
