"""gemm's epilogue: D = convert(alpha * acc + beta * C) as CUTLASS's LinearCombination
computes it in binary32: X = beta * C (FMUL), D = fma(alpha, acc, X) (FFMA), or alpha * acc
when beta = 0 (C unread); RNE into the output format, fp8 saturating.  Expectations:
single-instruction chains, numpy float32, the Fraction FFMA and rounding of
tests/ieee_reference.py, and values worked by hand."""

from fractions import Fraction

import numpy as np
import pytest

import ieee_reference as ref
import mmasim
from gemm_compositions import HOPPER_FP8, chain, e4m3_words, f32, promoted, stand_in, words, zeros
from helpers import f16, f32 as f32_word

F16 = dict(p=11, emin=-14, emax=15, width=16)
BF16 = dict(p=8, emin=-126, emax=127, width=16)


@pytest.fixture(scope="module")
def hopper():
    return mmasim.MMA(*HOPPER_FP8)


def _ffma(alpha, acc, x):
    out = np.empty(acc.shape, np.float32)
    for idx in np.ndindex(acc.shape):
        w = ref.fma(f32_word(float(alpha)), int(words(acc[idx])), int(words(x[idx])), ref.F32)
        out[idx] = f32(np.uint32(w))
    return out


def _operands(seed, M=64, N=8, K=128):
    rng = np.random.default_rng(seed)
    return e4m3_words(rng, (M, K)), e4m3_words(rng, (K, N)), rng


def test_alpha_beta_in_f32_is_one_fmul_then_one_ffma(hopper):
    A, B, rng = _operands(20)
    C = rng.normal(0, 300, (64, 8)).astype(np.float32)
    alpha, beta = np.float32(1.7), np.float32(-0.3)
    acc = f32(chain(hopper, A, B, zeros(64, 8), 0, 4))       # the K loop starts from zero
    want = _ffma(alpha, acc, (beta * C).astype(np.float32))
    got = mmasim.gemm(A, B, words(C), model=hopper, alpha=alpha, beta=beta, backend="numpy")
    assert got.dtype == np.uint32 and (got == words(want)).all()
    unfused = ((alpha * acc).astype(np.float32) + (beta * C).astype(np.float32)).astype(np.float32)
    assert (words(unfused) != got).any()        # the FFMA is visible in these words


def test_beta_zero_leaves_c_unread(hopper):
    A, B, _ = _operands(21)
    nan_c = np.full((64, 8), 0x7FC00000, np.uint32)
    alpha = np.float32(0.7)
    acc = f32(chain(hopper, A, B, zeros(64, 8), 0, 4))
    got = mmasim.gemm(A, B, nan_c, model=hopper, alpha=alpha, beta=0.0, backend="numpy")
    assert (got == words((alpha * acc).astype(np.float32))).all()


@pytest.mark.parametrize("fmt, spec", [("f16", F16), ("bf16", BF16)])
def test_outputs_round_to_nearest_even(hopper, fmt, spec):
    A, B, rng = _operands(22)
    alpha = np.float32(1.3)
    acc = f32(chain(hopper, A, B, zeros(64, 8), 0, 4))
    d = (alpha * acc).astype(np.float32)
    want = np.array([ref.round_rne(Fraction(float(v)), spec) for v in d.ravel()], np.uint16).reshape(d.shape)
    got = mmasim.gemm(A, B, None, model=hopper, alpha=alpha, out_format=fmt, backend="numpy")
    assert got.dtype == np.uint16 and (got == want).all()


def test_the_source_is_read_in_the_output_format(hopper):
    A, B, _ = _operands(23)
    acc = f32(chain(hopper, A, B, zeros(64, 8), 0, 4))
    C = np.full((64, 8), f16(0.5), np.uint16)
    d = _ffma(np.float32(1), acc, np.full((64, 8), np.float32(2 * 0.5)))
    want = np.array([ref.round_rne(Fraction(float(v)), F16) for v in d.ravel()], np.uint16).reshape(d.shape)
    got = mmasim.gemm(A, B, C, model=hopper, beta=2.0, out_format="f16", backend="numpy")
    assert (got == want).all()


def test_fp8_outputs_saturate_and_f16_overflows_unless_asked(hopper):
    # worked by hand: 32 products 16 x 4 = 64 sum to 2048; alpha = 0.5 gives 1024, past e4m3's
    # largest finite value 448 (0x7E): satfinite gives 0x7E; f16 holds 1024 exactly (0x6400);
    # alpha = 64 gives 131072, past f16's 65504: inf (0x7C00), or 0x7BFF saturated.
    A = np.full((64, 32), 0x58, np.uint8)      # e4m3 16
    B = np.full((32, 8), 0x48, np.uint8)       # e4m3 4
    B[:, 1::2] = 0xC8                          # -4 in odd columns
    e4 = mmasim.gemm(A, B, None, model=hopper, alpha=0.5, out_format="e4m3", backend="numpy")
    assert (e4[:, 0::2] == 0x7E).all() and (e4[:, 1::2] == 0xFE).all()
    h = mmasim.gemm(A, B, None, model=hopper, alpha=0.5, out_format="f16", backend="numpy")
    assert (h[:, 0::2] == 0x6400).all()
    big = mmasim.gemm(A, B, None, model=hopper, alpha=64.0, out_format="f16", backend="numpy")
    assert (big[:, 0::2] == 0x7C00).all() and (big[:, 1::2] == 0xFC00).all()
    sat = mmasim.gemm(A, B, None, model=hopper, alpha=64.0, out_format="f16", saturate=True, backend="numpy")
    assert (sat[:, 0::2] == 0x7BFF).all() and (sat[:, 1::2] == 0xFBFF).all()


def test_epilogue_composes_with_split_k_and_promotion(hopper):
    A, B, rng = _operands(24, K=256)
    C = rng.normal(0, 50, (64, 8)).astype(np.float32)
    s0 = promoted(hopper, A, B, None, 0, 4, every=64)       # with an epilogue every slice starts from zero
    s1 = promoted(hopper, A, B, None, 4, 8, every=64)
    acc = (((np.float32(0) + s0).astype(np.float32)) + s1).astype(np.float32)
    alpha, beta = np.float32(0.37), np.float32(1.0)
    want = _ffma(alpha, acc, (beta * C).astype(np.float32))
    got = mmasim.gemm(A, B, words(C), model=hopper, split_k=2, promote_every=64, alpha=alpha, beta=beta,
                      backend="numpy")
    assert (got == words(want)).all()


def test_tensor_scales_of_quantized_operands_multiply_alpha(hopper):
    A, B, _ = _operands(25)
    ta, tb, alpha = np.float32(0.3), np.float32(1.1), np.float32(3.0)
    acc = f32(chain(hopper, A, B, zeros(64, 8), 0, 4))
    a_eff = (alpha * (ta * tb).astype(np.float32)).astype(np.float32)
    got = mmasim.gemm(stand_in(A, "e4m3", tensor_scale=ta), stand_in(B, "e4m3", tensor_scale=tb), None,
                      model=hopper, alpha=alpha, backend="numpy")
    assert got.dtype == np.float32 and (got.view(np.uint32) == words((a_eff * acc).astype(np.float32))).all()
    alone = mmasim.gemm(stand_in(A, "e4m3", tensor_scale=ta), stand_in(B, "e4m3", tensor_scale=tb), None,
                        model=hopper, backend="numpy", words=True)
    assert (alone == words(((ta * tb).astype(np.float32) * acc).astype(np.float32))).all()


def test_values_in_give_values_of_the_output_format(hopper):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    A, B, _ = _operands(26)
    acc = f32(chain(hopper, A, B, zeros(64, 8), 0, 4))
    got = mmasim.gemm(A.view(ml_dtypes.float8_e4m3fn), B.view(ml_dtypes.float8_e4m3fn), None, model=hopper,
                      alpha=2.0, out_format="bf16", backend="numpy")
    want = np.array([ref.round_rne(Fraction(float(v)), BF16) for v in (2 * acc).ravel()], np.uint16)
    assert got.dtype == ml_dtypes.bfloat16 and (got.view(np.uint16).ravel() == want).all()


@pytest.mark.parametrize("kw, C, message", [
    (dict(alpha=0.1), None, "not a binary32 value"),
    (dict(alpha="2"), None, "binary32 number"),
    (dict(alpha=True), None, "binary32 number"),
    (dict(beta=float("nan")), "C", "NaN"),
    (dict(alpha=2.0), "C", "pass beta"),
    (dict(beta=1.0), None, "C is None"),
    (dict(out_format="f64"), None, "out_format must be one of"),
    (dict(out_format="e4m3", saturate=False), None, "only converted into with saturation"),
    (dict(out_format="f16", saturate=1), None, "saturate must be"),
])
def test_epilogue_options_are_checked(hopper, kw, C, message):
    A, B = np.zeros((64, 32), np.uint8), np.zeros((32, 8), np.uint8)
    c = np.zeros((64, 8), np.uint32) if C == "C" else None
    with pytest.raises(mmasim.GemmOptionError, match=message):
        mmasim.gemm(A, B, c, model=hopper, **kw)


def test_operands_may_not_mix_words_and_values(hopper):
    A, B = np.zeros((64, 32), np.uint8), np.zeros((32, 8), np.uint8)
    with pytest.raises(mmasim.DtypeError, match="mix"):
        mmasim.gemm(A, B, np.zeros((64, 8), np.float32), model=hopper, promote_every=32)


# ------------------------------------------------ the output conversion against ml_dtypes
# The epilogue rounds D through mmasim's own encoder (mmasim.arith.encode), not ml_dtypes; on
# every binary32 input it gives the word ml_dtypes' (numpy's, for f16) RNE conversion gives, after
# the clamp to the largest finite value where it saturates (cvt.rn.satfinite).  NaN: a NaN of
# the format with the sign of D's binary32 NaN (ml_dtypes keeps payload bits mmasim does not).
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from mmasim.composition.epilogue import OUTPUT_FORMATS, convert  # noqa: E402

ml_dtypes = pytest.importorskip("ml_dtypes")
_TYPED = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
          "e5m2": ml_dtypes.float8_e5m2}
_UINT = {1: np.uint8, 2: np.uint16}


def _neighbours(key):
    """Strategy: binary32 values at and between neighbouring values of format ``key`` (its
    midpoints, the ties of RNE, and a quarter either side), its subnormals and its overflow
    threshold included; the formats' values all fit binary32's significand with 2 bits to spare."""
    t = _TYPED[key]
    bits = 8 * np.dtype(t).itemsize
    with np.errstate(invalid="ignore"):
        finite = np.arange(2 ** bits, dtype=_UINT[bits // 8]).view(t).astype(np.float64)
    finite = np.unique(np.abs(finite[np.isfinite(finite)]))
    top = float(ml_dtypes.finfo(t).max)
    ulp_top = top - finite[-2]
    grid = np.concatenate([finite, [top + ulp_top]])          # the value one ulp past the largest
    i = st.integers(0, len(grid) - 2)
    frac = st.sampled_from([0.0, 0.25, 0.5, 0.75])
    return st.builds(lambda k, f, s: np.float32(s * (grid[k] + f * (grid[k + 1] - grid[k]))), i, frac,
                     st.sampled_from([1.0, -1.0]))


def _raw_words():
    return st.integers(0, 2 ** 32 - 1).map(lambda w: np.uint32(w).view(np.float32))


def _ml_dtypes_word(v: np.float32, key: str, saturate: bool) -> int:
    from mmasim.arith import binary32
    f = binary32.to_words(np.array([v], np.float64)).view(np.float32)   # the binary32 word D holds
    if saturate:
        big = np.float32(ml_dtypes.finfo(_TYPED[key]).max)
        f = np.clip(f, -big, big)
    with np.errstate(over="ignore"):
        t = f.astype(_TYPED[key])
    return int(t.view(_UINT[t.dtype.itemsize])[0])


@pytest.mark.parametrize("key", [k for k in OUTPUT_FORMATS if k != "f32"])
@settings(max_examples=400, deadline=None)
@given(data=st.data(), saturate=st.booleans())
def test_the_output_conversion_agrees_with_ml_dtypes_on_ties_subnormals_overflow_and_nan(key, data, saturate):
    if key == "e4m3":
        saturate = True                         # converted into with saturation only
    v = data.draw(st.one_of(_neighbours(key), _raw_words(), st.sampled_from(
        [np.float32(x) for x in (0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan)])))
    fmt = mmasim.get_registry().formats[key]
    got = int(convert(np.array([v], np.float64), fmt, saturate)[0])
    want = _ml_dtypes_word(v, key, saturate)
    if np.isnan(v):
        typed = np.array([got], _UINT[np.dtype(_TYPED[key]).itemsize]).view(_TYPED[key])
        sign = 1 << (8 * np.dtype(_TYPED[key]).itemsize - 1)
        assert np.isnan(typed[0].astype(np.float64)) and (got & sign) == (want & sign), (hex(got), hex(want))
    else:
        assert got == want, (float(v), hex(got), hex(want))
