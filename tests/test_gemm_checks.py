"""gemm checks its operands once, the same way on every path (the plain chain, promotion,
split-K, the epilogue, quantized operands): C is (M, N) or None, plain operands and scales are
all words or all values, every composition option needs a D binary32 holds, and alpha / beta
are binary32 numbers.  Expectations: the errors, and hand-worked words."""

import collections
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mmasim
from gemm_compositions import B200_MXF8, HOPPER_FP8

M, N, K = 64, 8, 64
E4M3_ONE, E4M3_HALF = 0x38, 0x30


@pytest.fixture(scope="module")
def hopper():
    return mmasim.MMA(*HOPPER_FP8)


def _ab():
    return np.full((M, K), E4M3_ONE, np.uint8), np.full((K, N), E4M3_HALF, np.uint8)


def _quantized():
    return mmasim.quantize(np.ones((M, K)), "e4m3"), mmasim.quantize(np.full((K, N), 0.5), "e4m3")


#: every path of gemm: (options, whether A and B are quantized tensors)
PATHS = {
    "plain chain": ({}, False),
    "promotion": ({"promote_every": 32}, False),
    "split-K": ({"split_k": 2}, False),
    "tree split-K": ({"split_k": 2, "split_reduce": "tree"}, False),
    "epilogue": ({"alpha": 1.0, "beta": 1.0}, False),
    "epilogue, C unread": ({"beta": 0.0}, False),
    "quantized": ({}, True),
    "quantized, promoted": ({"promote_every": 32}, True),
}


# ---------------------------------------------------------------- C is (M, N) everywhere
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.sampled_from([0, 1, 8, 64, 128]), min_size=0, max_size=3).map(tuple),
       path=st.sampled_from(sorted(PATHS)))
def test_c_must_be_m_by_n_on_every_path(hopper, shape, path):
    options, quantized = PATHS[path]
    A, B = _quantized() if quantized else _ab()
    C = np.zeros(shape, np.uint32)
    if shape != (M, N):
        with pytest.raises(mmasim.ShapeError):
            mmasim.gemm(A, B, C, model=hopper, backend="numpy", **options)
        return
    d = mmasim.gemm(A, B, C, model=hopper, backend="numpy", words=True, **options)
    assert d.shape == (M, N) and (d == 0x42000000).all()          # 64 products of 0.5: 32.0


@pytest.mark.parametrize("shape", [(128, 8), (8,), (1, 8), (64, 1), (1, 64, 8)])
def test_a_c_promotion_once_cut_or_broadcast_is_a_shape_error(hopper, shape):
    # the campaign's shapes: cut to 64 rows, broadcast, or a 3-D D
    A, B = _ab()
    with pytest.raises(mmasim.ShapeError, match=r"\(M,N\)|2-D"):
        mmasim.gemm(A, B, np.zeros(shape, np.uint32), model=hopper, promote_every=32)


# ---------------------------------------------------------------- words or values, scales included
def _mxf8():
    m = mmasim.MMA(*B200_MXF8)
    A = np.full((128, 64), E4M3_ONE, np.uint8)
    B = np.full((64, 8), E4M3_HALF, np.uint8)
    sa, sb = np.full((128, 2), 127, np.uint8), np.full((2, 8), 127, np.uint8)     # ue8m0 2^0
    return m, A, B, sa, sb


@pytest.mark.parametrize("options", [{}, {"promote_every": 32}, {"split_k": 2}, {"alpha": 1.0}],
                         ids=["plain", "promotion", "split-K", "epilogue"])
def test_value_scales_with_word_operands_are_refused_on_every_path(options):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    m, A, B, sa, sb = _mxf8()
    vsa, vsb = sa.view(ml_dtypes.float8_e8m0fnu), sb.view(ml_dtypes.float8_e8m0fnu)
    with pytest.raises(mmasim.DtypeError, match="mix container words"):
        m.dot(A[:, None, :32], B[:32].T[None], np.zeros((128, 8), np.uint32), scale_a=vsa[:, None, :1],
              scale_b=vsb[:1].T[None])                             # Model.dot refuses it
    with pytest.raises(mmasim.DtypeError, match="mix container words"):
        mmasim.gemm(A, B, None, model=m, scale_a=vsa, scale_b=vsb, backend="numpy", **options)
    # the reverse: value operands, word scales
    vA, vB = A.view(ml_dtypes.float8_e4m3fn), B.view(ml_dtypes.float8_e4m3fn)
    with pytest.raises(mmasim.DtypeError, match="mix container words"):
        mmasim.gemm(vA, vB, None, model=m, scale_a=sa, scale_b=sb, backend="numpy", **options)
    # all words, or all values, compute: 64 products of 0.5 = 32
    assert (mmasim.gemm(A, B, None, model=m, scale_a=sa, scale_b=sb, backend="numpy", words=True,
                        **options) == 0x42000000).all()
    assert (mmasim.gemm(vA, vB, None, model=m, scale_a=vsa, scale_b=vsb, backend="numpy", **options) == 32).all()


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_c_of_values_with_word_operands_is_refused_on_every_path(hopper, path):
    options, quantized = PATHS[path]
    A, B = _ab()
    if quantized:
        return          # quantized tensors are neither words nor values: C alone sets the mode
    with pytest.raises(mmasim.DtypeError, match="mix container words"):
        mmasim.gemm(A, B, np.zeros((M, N), np.float32), model=hopper, **options)


# ---------------------------------------------------------------- integer D: the plain chain only
INT8 = ("A100", "mma.sync.m16n8k32.s32.s8.s8.s32")
F64 = ("A100", "mma.sync.m8n8k4.f64.f64.f64")


@pytest.mark.parametrize("options, named", [
    ({"split_k": 1}, "split_k=1"), ({"split_k": 2}, "split_k=2"), ({"split_reduce": "tree"}, "split_reduce='tree'"),
    ({"promote_every": 32}, "promote_every=32"), ({"alpha": 1.0}, "alpha"), ({"out_format": "f32"}, "out_format"),
    ({"saturate": True}, "saturate")])
def test_every_composition_option_on_an_integer_d_is_refused_by_name(options, named):
    m = mmasim.MMA(*INT8)
    A, B = np.ones((16, 32), np.uint8), np.ones((32, 8), np.uint8)
    assert (mmasim.gemm(A, B, np.zeros((16, 8), np.uint32), model=m) == 32).all()    # 32 products of 1
    with pytest.raises(mmasim.GemmOptionError, match=f"{named}.*binary32.*s32 D"):
        mmasim.gemm(A, B, np.zeros((16, 8), np.uint32), model=m, **options)


def test_a_composition_on_an_f64_d_is_refused():
    m = mmasim.MMA(*F64)
    one = np.float64(1.0).view(np.uint64)
    A, B = np.full((8, 4), one, np.uint64), np.full((4, 8), one, np.uint64)
    assert (mmasim.gemm(A, B, None, model=m) == np.float64(4.0).view(np.uint64)).all()
    with pytest.raises(mmasim.GemmOptionError, match="split_k=1.*f64 D"):
        mmasim.gemm(A, B, None, model=m, split_k=1)
    with pytest.raises(mmasim.GemmOptionError, match="a quantized A.*f64 D"):
        mmasim.gemm(mmasim.quantize(np.ones((8, 4)), "f64"), B, None, model=m)


# ---------------------------------------------------------------- alpha and beta: binary32 numbers
@pytest.mark.parametrize("name", ["alpha", "beta"])
@pytest.mark.parametrize("value", [10 ** 400, -(10 ** 400), Fraction(10 ** 400, 3), 2 ** 60 + 1, Fraction(1, 3)],
                         ids=["1e400", "-1e400", "fraction-1e400", "2^60+1", "1/3"])
def test_alpha_and_beta_that_are_no_binary32_value_are_refused(hopper, name, value):
    A, B = _ab()
    C = np.zeros((M, N), np.uint32) if name == "beta" else None
    with pytest.raises(mmasim.GemmOptionError, match=f"{name} = .*not a binary32 value"):
        mmasim.gemm(A, B, C, model=hopper, **{name: value})


def test_a_large_alpha_that_binary32_holds_scales_d_exactly(hopper):
    A, B = _ab()
    d = mmasim.gemm(A, B, None, model=hopper, alpha=2 ** 60, backend="numpy", words=False)
    assert d.dtype == np.float32 and (d == np.float32(32.0 * 2.0 ** 60)).all()


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_quantized_c_is_refused_on_every_path(hopper, path):
    options, quantized = PATHS[path]
    A, B = _quantized() if quantized else _ab()
    C = mmasim.quantize(np.zeros((M, N), np.float32), "f32")
    with pytest.raises(mmasim.DtypeError, match="C is a quantized tensor"):
        mmasim.gemm(A, B, C, model=hopper, **options)


# ---------------------------------------------------------------- once, not once per K tile
def _count_word_checks(monkeypatch) -> collections.Counter:
    """The word check (``checked_words``, under every name a module of mmasim holds it by)
    replaced by one that counts the operands it checks."""
    from mmasim.operands import words as words_module

    real, seen = words_module.checked_words, collections.Counter()

    def counting(arr, mode, fmt, what):
        seen[what] += 1
        return real(arr, mode, fmt, what)

    for module in list(sys.modules.values()):
        if getattr(module, "__name__", "").startswith("mmasim") and getattr(module, "checked_words", None) is real:
            monkeypatch.setattr(module, "checked_words", counting)
    return seen


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("threads", [1, 4])
def test_a_gemm_of_eight_k_tiles_checks_its_operands_once(hopper, monkeypatch, path, threads):
    from mmasim.composition import operands
    from mmasim.execution.model import Model

    options, quantized = PATHS[path]
    K8 = 8 * hopper.k
    A, B = (mmasim.quantize(np.ones((M, K8)), "e4m3"), mmasim.quantize(np.full((K8, N), 0.5), "e4m3")) \
        if quantized else (np.full((M, K8), E4M3_ONE, np.uint8), np.full((K8, N), E4M3_HALF, np.uint8))
    C = np.zeros((M, N), np.uint32)
    seen = _count_word_checks(monkeypatch)
    real_check, checks = operands.check, []
    monkeypatch.setattr(operands, "check", lambda *a, **kw: checks.append(1) or real_check(*a, **kw))

    def no_dot(*args, **kwargs):
        raise AssertionError("a K tile went through Model.dot, which checks its operands again")

    monkeypatch.setattr(Model, "dot", no_dot)
    d = mmasim.gemm(A, B, C, model=hopper, backend="numpy", threads=threads, words=True, **options)
    assert (d == 0x43000000).all()          # 256 products of 1.0 * 0.5: 128.0, exact on every path
    assert len(checks) == 1                 # one check of the GEMM's operands ...
    # ... in which each plain operand's words are checked once (a quantized tensor's by its container)
    assert seen == collections.Counter({"C": 1} if quantized else {"A": 1, "B": 1, "C": 1})


@pytest.mark.parametrize("backend", ["numpy", "auto"])
def test_the_matrix_form_checks_each_operand_once(hopper, monkeypatch, backend):
    # int64 words: each must be checked against its container (uint8 words of an 8-bit
    # container need no check, and get none)
    A, B = np.full((M, hopper.k), E4M3_ONE, np.int64), np.full((hopper.k, N), E4M3_HALF, np.int64)
    seen = _count_word_checks(monkeypatch)
    d = hopper(A, B, np.zeros((M, N), np.int64), backend=backend)
    assert (d == 0x41800000).all()          # 32 products of 0.5: 16.0
    assert seen == collections.Counter({"a": 1, "b": 1, "c": 1})
    seen.clear()
    hopper(A.astype(np.uint8), B.astype(np.uint8), np.zeros((M, N), np.uint32), backend=backend)
    assert not seen
    with pytest.raises(mmasim.WordRangeError, match="operand b"):
        hopper(A, B + 0x100, np.zeros((M, N), np.int64), backend=backend)
