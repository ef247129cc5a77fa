"""The per-row bodies of every family (mmasim/backends/cuda/rows.py), run by their CPU driver,
give the numpy reference's words; the target-neutral primitives they are written with keep
the CPU's values.  Needs numba; the simulator check needs numba-cuda (``pip install '.[cuda]'``).

Expectations: the numpy reference (``Model.dot(backend="numpy")``) on the same words,
hand-worked bounds for the rows a body leaves to the reference, ``np.trunc`` /
``int.bit_length`` for the primitives.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import attrs
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mmasim
from mmasim.backends.cuda import missing
from mmasim.backends.plan import Rows, compute
from mmasim.errors import SparseMetadataError
from mmasim.execution.model import Model
from mmasim.operands import wordgen
from mmasim.operands.wordgen import WordKind
from mmasim.registry.build import get_registry

numba = pytest.importorskip("numba")

from mmasim.backends.cuda import flow, rows  # noqa: E402  (needs numba)
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
    out, flags = flow.cpu_run(body, rows.dense_args(model.plan, a, b, c, kw.get("scale_a"), kw.get("scale_b")),
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


#: per family, the body that takes it and datapaths of it: dense and sparse, each parameter
#: variant the built-in tables use (rounding, saturation, the two-stage rules, K in steps)
FAMILY_DATAPATHS = {
    "window_groups_row": [
        ("B200", "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3"),
        ("B200", "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X.block32.f32.e2m1.e2m1.ue8m0"),
        ("B200", "tcgen05.mma.sp.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3"),
    ],
    "window_row": [
        ("A100", "mma.sync.sp.m16n8k16.f32.f16.f16"),
        ("H100", "wgmma.mma_async.sp.m64n8k64.f16.e4m3.e4m3"),
        ("B200", "mma.sync.m16n8k32.f32.e4m3.e4m3"),
        ("B200", "tcgen05.mma.sp.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e4m3.e4m3.ue8m0"),
    ],
    "group_scaled_row": [
        ("RTX Blackwell", "mma.sync.kind::mxf4.block_scale.scale_vec::2X.block32.m16n8k64.f32.e2m1.e2m1.ue8m0"),
        ("RTX Blackwell",
         "mma.sync.sp::ordered_metadata.kind::mxf4.block_scale.scale_vec::2X.block32.m16n8k128.f32.e2m1.e2m1.ue8m0"),
    ],
    "two_stage_row": [
        ("CDNA3", "v_mfma.m32n32k4.f32.xf32.xf32"),
        ("CDNA3", "v_mfma.m16n16k16.f32.f16.f16"),
        ("CDNA3", "v_mfma.m16n16k32.f32.e5m2fnuz.e5m2fnuz"),
        ("CDNA3", "v_smfmac.sp.m16n16k64.f32.e5m2fnuz.e5m2fnuz"),
    ],
    "exact_sum_row": [
        ("CDNA1", "v_mfma.m32n32k8.f32.f16.f16"),
        ("CDNA1", "v_mfma.m16n16k8.f32.bf16.bf16"),
    ],
    "integer_row": [
        ("A100", "mma.sync.m16n8k32.s32.s8.s8"),
        ("A100", "mma.sync.m16n8k32.s32.s8.s8.satfinite"),
        ("A100", "mma.sync.m16n8k64.s32.s4.s4"),
        ("A100", "mma.sync.m8n8k128.s32.b1.b1.and.popc"),
        ("A100", "mma.sync.sp.m16n8k64.s32.s4.s4.satfinite"),
        ("CDNA3", "v_smfmac.sp.m16n16k64.s32.s8.s8"),
    ],
    "integer_xor_row": [("A100", "mma.sync.m8n8k128.s32.b1.b1.xor.popc")],
    "fma_f64_body": [("A100", "mma.sync.m8n8k4.f64.f64.f64.f64"), ("H100", "mma.sync.m16n8k16.f64.f64.f64")],
    "fma_f32_body": [("CDNA1", "v_mfma.m32n32k2.f32.f32.f32"), ("CDNA1", "v_mfma.m32n32k1.f32.f32.f32")],
    "mul_add_f32_body": [("Ampere", "mma.sync.m8n8k4.f32.f16.f16")],
    # no built-in datapath multiplies then adds in binary64: Ampere's m8n8k4 into f64, made in code
    "mul_add_f64_body": [("Ampere", "mma.sync.m8n8k4.f32.f16.f16 into f64")],
    "ftz_mul_add_body": [("CDNA2", "v_mfma.kind::1k.m32n32k8.f32.bf16.bf16"), ("CDNA2", "v_mfma.m32n32k4.f32.bf16.bf16")],
}
_CASES = [(body, arch, instruction) for body, dps in FAMILY_DATAPATHS.items() for arch, instruction in dps]
_KINDS = [kind.value for kind in WordKind]


def _model(arch, instruction):
    """The model of ``instruction``; ``... into f64``: its datapath with C and D in binary64."""
    if instruction.endswith(" into f64"):
        dp = mmasim.MMA(arch, instruction[:-len(" into f64")]).datapath
        return Model(attrs.evolve(dp, c="f64", d="f64", rounding="rne-f64"), get_registry())
    return mmasim.MMA(arch, instruction)


def _operands(a, b, c, kw):
    return [a, b, c] + [kw[k] for k in ("scale_a", "scale_b", "sparse_metadata") if k in kw]


def _body_words(model, a, b, c, kw, dtype=None, specialise=False):
    """D words of the plan's body by its CPU driver (the selection first where sparse), as a
    backend computes rows (the plan's order of K and C added after the steps included)."""
    ops = _operands(a, b, c, kw)
    return compute(flow.CpuRows(dtype, specialise), model.plan, Rows.batch(ops, (len(c),), 0, len(c)))


@pytest.mark.parametrize("body,arch,instruction", _CASES)
def test_family_body_on_the_cpu_gives_the_reference_words(body, arch, instruction):
    """Every word kind of the generator (random, finite, near one, subnormal, huge, the
    encodings' corners, mixed), the plan's own containers; the body as it reads the plan's
    arrays, and specialised (the plan's constants compiled in)."""
    m = _model(arch, instruction)
    assert rows.body_for(m.plan)[0] is rows.ALL_BODIES[body]
    assert rows.body_for(m.plan, specialise=True)[0].py_func.__name__.startswith(body + "_")
    rng = np.random.default_rng(31)
    for kind in _KINDS:
        a, b, c, kw = wordgen.operands(m, 300, rng, kind)
        want = m.dot(a, b, c, backend="numpy", **kw)
        for specialise in (False, True):
            got = _body_words(m, a, b, c, kw, specialise=specialise)
            assert got.dtype == want.dtype
            bad = np.flatnonzero(got != want)
            assert bad.size == 0, (kind, specialise, bad[:5], got[bad[:5]], want[bad[:5]])


def test_a_datapath_no_body_takes_is_named_with_the_reason():
    """A window datapath whose step is not whole groups (made in code): the general window's
    decision refuses it, and computing it on the bodies says so."""
    from mmasim.errors import UnsupportedDatapath

    dp = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X").datapath
    m = Model(attrs.evolve(dp, chunk=6), get_registry())
    assert rows.body_for(m.plan) is None
    a, b, c, kw = wordgen.operands(m, 2, np.random.default_rng(0), "near_one")
    with pytest.raises(UnsupportedDatapath, match="step 6 not whole groups"):
        _body_words(m, a, b, c, kw)


def test_every_body_of_the_family_table_is_tested():
    assert set(FAMILY_DATAPATHS) == set(rows.ALL_BODIES)


_EXACT = mmasim.MMA("CDNA1", "v_mfma.m32n32k8.f32.f16.f16")     # exact sum, 2 steps of 4


def test_exact_sum_body_leaves_a_sum_past_int64_to_the_reference():
    """f16 x f16, the exact sum at the last bit of its smallest term: the largest product
    65504**2 = 2047**2 * 2**10 ends at 2**32, the smallest subnormal's square 2**-48 has its
    last bit at 2**-48: 80 bits, past int64's 62 (less 3 guard bits for 5 terms), so the body
    flags the row; 65504**2 + 1.0 * 1.0 (1024 * 2**-10 squared: last bit at 2**-20) spans
    52 + 3 bits, which it sums."""
    a = np.array([[0x7BFF, 0x0001, 0, 0, 0, 0, 0, 0], [0x7BFF, 0x3C00, 0, 0, 0, 0, 0, 0]], np.uint64)
    b = a.copy()
    c = np.zeros(2, np.uint64)
    body, arrays = rows.body_for(_EXACT.plan)
    _, flags = flow.cpu_run(body, rows.dense_args(_EXACT.plan, a, b, c), arrays, np.uint32)
    assert flags.tolist() == [True, False]
    assert _body_words(_EXACT, a, b, c, {}).tolist() == _EXACT.dot(a, b, c, backend="numpy").tolist()


_SPARSE = mmasim.MMA("A100", "mma.sync.sp.m16n8k16.f32.f16.f16")


def test_sparse_selection_picks_the_stored_elements():
    """distinct4, chunks of 4: selector 0x4 keeps elements 0 and 1, 0xE elements 2 and 3 (PTX
    metadata: bits 1:0 and 3:2 index the chunk); metadata 0xE4 keeps 0, 1 of chunk 0 and 2, 3
    of chunk 1, and so on for the nibbles 0x4, 0xE of the rest."""
    a = np.arange(16, dtype=np.uint16)[None, :]
    md = np.array([[0xE4E4E4E4]], np.uint32)
    args = rows.select_args(_SPARSE.plan, a, a + 100, md)
    ok = np.zeros(1, np.bool_)
    rows.select_cpu(*args, ok)
    assert ok.tolist() == [True]
    assert args[-2].tolist() == [[0, 1, 6, 7, 8, 9, 14, 15]]
    assert args[-1].tolist() == [[100, 101, 106, 107, 108, 109, 114, 115]]


def test_an_illegal_sparse_selector_is_the_reference_error():
    """0x5 picks element 1 twice: PTX calls it invalid; the selection flags the row and the
    reference raises its error."""
    m = _SPARSE
    a, b, c, kw = wordgen.operands(m, 3, np.random.default_rng(1), "near_one")
    md = kw["sparse_metadata"].copy()
    md[1, 0] = (md[1, 0] & ~np.uint64(0xF)) | np.uint64(0x5)
    args = rows.select_args(m.plan, a, b, md)
    ok = np.zeros(3, np.bool_)
    rows.select_cpu(*args, ok)
    assert ok.tolist() == [True, False, True]
    with pytest.raises(SparseMetadataError, match="illegal sparse selector 0x5"):
        _body_words(m, a, b, c, dict(kw, sparse_metadata=md))


def _builtin_models():
    """Every built-in datapath once (an architecture that inherits another shares its datapaths)."""
    reg, seen = get_registry(), set()
    for arch in reg.architectures.values():
        for dp in arch.datapaths:
            if id(dp) not in seen:
                seen.add(id(dp))
                yield Model(dp, reg)


def test_every_builtin_datapath_is_taken_by_a_body_that_gives_the_reference_words():
    """A few rows of every built-in datapath (mixed words, and the encodings' corners), every
    operand in int64 words (one compile per body); the reference computed once per datapath.
    The datapaths no body takes are listed with the reason, and there are none; those the
    registry itself refuses (no model, so no reference) are counted apart."""
    rng = np.random.default_rng(2031)
    refused, mismatched, taken, unmodelled = [], [], {}, 0
    for m in _builtin_models():
        if m.datapath.refuse:
            unmodelled += 1
            continue
        body, arrays, why = rows.choose(m.plan)
        if body is None:
            refused.append(f"{m.instruction}: {why}")
            continue
        taken[body.py_func.__name__] = taken.get(body.py_func.__name__, 0) + 1
        parts = [wordgen.operands(m, 4, rng, kind) for kind in ("mixed", "edge")]
        a, b, c = (np.concatenate([p[i] for p in parts]) for i in range(3))
        kw = {k: np.concatenate([p[3][k] for p in parts]) for k in parts[0][3]}
        want = m.dot(a, b, c, backend="numpy", **kw)
        got = _body_words(m, a, b, c, kw, np.int64)
        if not np.array_equal(got, want):
            mismatched.append(m.instruction)
    assert not mismatched, mismatched[:10]
    assert refused == []
    assert set(taken) == set(rows.ALL_BODIES) - {"mul_add_f64_body"}, taken
    assert sum(taken.values()) + unmodelled == len(list(_builtin_models())), (taken, unmodelled)


def test_bodies_give_the_words_of_every_bundled_vector_file():
    """The bundled vector files (hardware-measured, and peer simulators' words), every case:
    the bodies by their CPU driver give the expected D words (NaN as the file's policy says),
    as ``mmasim validate`` checks the numpy and numba backends."""
    from mmasim.vectors import files as vectors

    paths = vectors.find()
    assert len(paths) > 400
    wrong, untaken = [], []
    for path in paths:
        vf = vectors.load(path)
        model = vectors.model_for(vf)
        if rows.body_for(model.plan) is None:
            untaken.append(f"{path}: {rows.choose(model.plan)[2]}")
            continue
        extra = vectors.extra_operands(vf, model)
        got = _body_words(model, vf.a, vf.b, vf.c, extra, np.int64).astype(np.uint64)
        want = vectors.expected_words(vf, model)
        same = got == want
        if vf.nan_policy == "any":
            same |= (model.decode("d", got).cls == 3) & (model.decode("d", want).cls == 3)
        if not same.all():
            wrong.append(f"{path}: {np.count_nonzero(~same)} of {len(same)}")
    assert untaken == []
    assert wrong == []


@pytest.fixture
def bodies_compute(monkeypatch):
    """Every model computes with the per-row bodies by their CPU driver (:class:`flow.CpuRows`),
    whatever backend it is asked for: ``Model.dot``, the matrix form, every chunk."""
    monkeypatch.setattr(Model, "_backend", lambda self, backend, products=None: flow.CpuRows())


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_window_groups_body_keeps_the_b200_fp4_rules(bodies_compute, sparse):
    """The hand-worked cases of tests/test_b200_fp4_rules.py with their expected words, by the
    bodies (dot and matrix form): the scale floor counts only blocks holding a nonzero
    product (every FP4 kind), the ue8m0 subnormal redo applies to a nonzero RZ-F32
    subnormal only."""
    import test_b200_fp4_rules as fp4

    if not sparse:
        fp4.test_a_block_of_zero_products_does_not_raise_the_scale_floor()
    fp4.test_zero_scale_block_does_not_raise_the_nvfp4_scale_floor(sparse)
    for kind in fp4.KINDS:
        fp4.test_zero_product_block_with_huge_scale_does_not_raise_the_scale_floor(kind, sparse)
    for kind in fp4.UE8M0_KINDS:
        fp4.test_nonzero_subnormal_rz_result_is_redone(kind, sparse)
        for negative in (False, True):
            fp4.test_sum_below_2m126_that_truncates_to_zero_is_not_redone(kind, negative, sparse)


def test_window_groups_body_keeps_the_b200_fp4_facts(bodies_compute):
    """The hand-derived facts of tests/test_b200_facts.py, by the bodies: NVFP4 groups of 4,
    the C-dominant merge of groups of 16 at r_c - 35, the ue8m0 C-relative truncation and
    subnormal redo."""
    import test_b200_facts as facts

    facts.test_nvfp4_products_are_summed_in_aligned_groups_of_4_before_truncation()
    facts.test_nvfp4_c_dominant_merge_truncates_k16_group_sums_at_rc_minus_35()
    facts.test_mxf4_ue8m0_group_at_or_below_c_is_truncated_relative_to_c("tcgen05.kind::mxf4.block_scale", {})
    facts.test_mxf4_ue8m0_group_at_or_below_c_is_truncated_relative_to_c("tcgen05.kind::mxf4nvf4.2X", {})
    facts.test_mxf4_ue8m0_subnormal_result_is_redone_without_tiny_lower_scale_groups()


@pytest.mark.parametrize("arch,instruction,body,why", [
    ("B200", "tcgen05.kind::mxf4nvf4.4X", "window_groups_row", "group 4"),
    ("A100", "mma.sync.m8n8k4.f64.f64.f64.f64", "fma_f64_body", "not the built-in 'window'"),
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
    import attrs
    import numpy as np
    from numba import cuda
    import mmasim
    from mmasim.backends.cuda import flow, rows
    from mmasim.backends.cuda.driver import cuda_driver, select_cuda
    from mmasim.execution.model import Model
    from mmasim.operands import wordgen
    from mmasim.registry.build import get_registry

    def host(x):    # the simulator hands a kernel its arrays wrapped; the CPU-compiled body reads numpy arrays
        return getattr(x, "_ary", x)

    def model(arch, instruction):
        if instruction.endswith(" into f64"):
            dp = mmasim.MMA(arch, instruction[:-len(" into f64")]).datapath
            return Model(attrs.evolve(dp, c="f64", d="f64", rounding="rne-f64"), get_registry())
        return mmasim.MMA(arch, instruction)

    select = cuda.jit(select_cuda(lambda d, *xs: rows.select_row(d, *map(host, xs))))
    result = {}
    for arch, instruction in json.loads(sys.argv[1]):     # one launch at a time: the simulator is not thread-safe
        m = model(arch, instruction)
        body, arrays = rows.body_for(m.plan)
        a, b, c, kw = wordgen.operands(m, 50, np.random.default_rng(7), "mixed")
        legal = np.zeros(len(c), np.bool_)
        if m.plan.sparse_rule is not None:
            sel = rows.select_args(m.plan, a, b, kw["sparse_metadata"])
            select[2, 32](*sel, legal)
            a, b = sel[-2:]
        args = rows.dense_args(m.plan, a, b, c, kw.get("scale_a"), kw.get("scale_b"))
        out, flags = np.zeros(len(c), m.plan.encoding.dtype), np.zeros(len(c), np.bool_)
        kernel = cuda.jit(cuda_driver(lambda d, *xs: body(d, *map(host, xs))))
        kernel[2, 32](*args, *arrays, out, flags)
        cpu, cpu_flags = flow.cpu_run(body, args, arrays, m.plan.encoding.dtype)
        result[instruction] = [out.tolist(), flags.tolist(), legal.tolist(), cpu.tolist(), cpu_flags.tolist()]
    print(json.dumps(result))
""")


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
def test_cuda_drivers_under_the_simulator_give_the_cpu_drivers_words():
    """numba-cuda's simulator runs the CUDA drivers (a thread per row, 64 threads for 50 rows:
    the bound check) of every body, and of the sparse selection, in one process, launches one
    after another: the words and flags of the CPU driver (which give the reference's words:
    the tests above)."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    picked = [dps[0] for dps in FAMILY_DATAPATHS.values()] + [FAMILY_DATAPATHS["window_groups_row"][2]]
    r = subprocess.run([sys.executable, "-c", _SIMULATED, json.dumps(picked)], capture_output=True, text=True,
                       env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(result) == {instruction for _, instruction in picked}
    for (arch, instruction) in picked:
        out, flags, legal, cpu, cpu_flags = result[instruction]
        assert (out, flags) == (cpu, cpu_flags), instruction
        assert all(legal) == bool(_model(arch, instruction).datapath.sparse), instruction
