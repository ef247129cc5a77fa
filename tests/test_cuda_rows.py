"""The per-row window body (mmasim/backends/cuda/rows.py), run by its CPU driver, gives the
numpy reference's words; the target-neutral primitives it is written with keep the CPU's
values.  Needs numba; the simulator check needs numba-cuda (``pip install '.[cuda]'``).

Expectations: the numpy reference (``Model.dot(backend="numpy")``) on the same words, and
``np.trunc`` / ``int.bit_length`` for the primitives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mmasim
from mmasim.backends.cuda import missing
from mmasim.operands import wordgen

numba = pytest.importorskip("numba")

from mmasim.backends.cuda import rows  # noqa: E402  (needs numba)
from mmasim.backends.numba import primitives  # noqa: E402

#: window datapaths with one product per group: f16 decoded arithmetically, e4m3 by table,
#: D in f16 (RNE), zeros excluded, tf32, block-scaled with zeros excluded and counted
DATAPATHS = [
    ("A100", "mma.sync.m16n8k16.f32.f16.f16.f32"),
    ("H100", "wgmma.mma_async.m64n8k32.f32.e4m3.e4m3"),
    ("H100", "wgmma.mma_async.m64n8k32.f16.e4m3.e4m3"),
    ("B200", "tcgen05.mma.kind::tf32.f32.tf32.tf32"),
    ("B200", "tcgen05.mma.kind::f16.f16.f16.f16"),
    ("B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e4m3.e4m3.ue8m0"),
    ("RTX Blackwell", "mma.sync.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.m16n8k32.f32.e4m3.e4m3.ue8m0"),
]

def _cpu_words(model, a, b, c, kw):
    """D words of the window body run by the CPU driver (compiled once per test process); no row flagged."""
    body, arrays = rows.body_for(model.plan)
    out, flags = rows.cpu_run(body, rows.dense_args(model.plan, a, b, c, kw.get("scale_a"), kw.get("scale_b")),
                              arrays, model.plan.encoding.dtype)
    assert not flags.any()
    return out


@pytest.mark.parametrize("arch,instruction", DATAPATHS)
def test_window_body_on_the_cpu_gives_the_reference_words(arch, instruction):
    m = mmasim.MMA(arch, instruction)
    rng = np.random.default_rng(31)
    for kind in ("mixed", "edge", "subnormal", "huge", "near_one"):
        a, b, c, kw = wordgen.operands(m, 1500, rng, kind)
        got = _cpu_words(m, a, b, c, kw)
        want = m.dot(a, b, c, backend="numpy", **kw)
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, (kind, bad[:5], got[bad[:5]], want[bad[:5]])


_F16 = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16.f32")


@settings(max_examples=60, deadline=None)
@given(a=st.lists(st.integers(0, 0xFFFF), min_size=16, max_size=16),
       b=st.lists(st.integers(0, 0xFFFF), min_size=16, max_size=16),
       c=st.integers(0, 0xFFFFFFFF))
def test_window_body_on_the_cpu_gives_the_reference_word_for_any_f16_row(a, b, c):
    a, b, c = np.array([a], np.uint64), np.array([b], np.uint64), np.array([c], np.uint64)
    assert _cpu_words(_F16, a, b, c, {})[0] == _F16.dot(a, b, c, backend="numpy")[0]


@pytest.mark.parametrize("arch,instruction,body,why", [
    ("B200", "tcgen05.kind::mxf4nvf4.4X", "window_groups_row", "group 4"),
    ("A100", "mma.sync.m8n8k4.f64.f64.f64.f64", "fma_f64_row_body", "not the built-in 'window'"),
])
def test_window_body_takes_only_the_one_product_window(arch, instruction, body, why):
    plan = mmasim.MMA(arch, instruction).plan
    assert rows.body_for(plan)[0] is not rows.window_row
    assert rows.body_for(plan)[0].py_func.__name__ == body
    decision = rows.BODIES["window"][0].decision(plan)
    assert not decision and why in decision.reason


def test_target_neutral_trunc_and_leading_zeros_keep_the_cpu_values():
    @numba.njit
    def trunc_all(x, out):
        for i in range(x.shape[0]):
            out[i] = primitives._ftrunc(x[i])

    @numba.njit
    def bitlen_all(x, out):
        for i in range(x.shape[0]):
            out[i] = primitives._bitlen(x[i])

    x = np.array([0.0, -0.0, 2.5, -2.5, 0.999, -1e300, 2.0 ** 60 + 0.5 * 2 ** 8, 4503599627370497.5, np.inf, -np.inf])
    out = np.empty_like(x)
    trunc_all(x, out)
    assert out.view(np.uint64).tolist() == np.trunc(x).view(np.uint64).tolist()    # signs of zero included
    ints = np.array([0, 1, 2, 3, 255, 256, (1 << 40) + 7, (1 << 62), (1 << 63) - 1, -5], np.int64)
    got = np.empty_like(ints)
    bitlen_all(ints, got)
    assert got.tolist() == [int(v).bit_length() if v > 0 else 0 for v in ints.tolist()]


_SIMULATED = textwrap.dedent("""
    import json, sys
    import numpy as np
    from numba import cuda
    import mmasim
    from mmasim.backends.cuda import rows
    from mmasim.backends.cuda.driver import cuda_driver
    from mmasim.operands import wordgen

    def host(x):    # the simulator hands a kernel its arrays wrapped; the CPU-compiled body reads numpy arrays
        return x.copy_to_host() if hasattr(x, "copy_to_host") else x

    result = {}
    for arch, instruction in json.loads(sys.argv[1]):     # one launch at a time: the simulator is not thread-safe
        m = mmasim.MMA(arch, instruction)
        body, arrays = rows.body_for(m.plan)
        a, b, c, kw = wordgen.operands(m, 80, np.random.default_rng(7), "mixed")
        out, flags = np.zeros(len(c), m.plan.encoding.dtype), np.zeros(len(c), np.bool_)
        kernel = cuda.jit(cuda_driver(lambda d, *xs: body(d, *map(host, xs))))
        kernel[3, 32](*rows.dense_args(m.plan, a, b, c, kw.get("scale_a"), kw.get("scale_b")), *arrays, out, flags)
        result[instruction] = [out.tolist(), m.dot(a, b, c, backend="numpy", **kw).tolist()]
    print(json.dumps(result))
""")


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
def test_cuda_driver_under_the_simulator_gives_the_reference_words():
    """numba-cuda's simulator runs the CUDA driver (a thread per row, 96 threads for 80 rows:
    the bound check) in one process, launches one after another."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    picked = [DATAPATHS[1], DATAPATHS[5]]
    r = subprocess.run([sys.executable, "-c", _SIMULATED, json.dumps(picked)], capture_output=True, text=True,
                       env=env, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(result) == {instruction for _, instruction in picked}
    for instruction, (got, want) in result.items():
        assert got == want, instruction
