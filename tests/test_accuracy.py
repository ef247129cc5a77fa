"""mmasim.accuracy: the exact reference (hand-worked values, and brute-force Fractions on
small random cases), the statistics on cases whose answer is known, and the command."""

import json
import os
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mmasim
from gemm_compositions import HOPPER_FP8, B200_MXF8, stand_in
from helpers import f16, f32
from mmasim.accuracy import exact_result, reference, statistics
from mmasim.cli.main import main
from mmasim.arith.exact import exact_values

F32_FMT = mmasim.get_registry().formats["f32"]


def _small_integers(rng, shape):
    """0, 1 or 2: every sum of K <= 64 products is exact on every datapath here."""
    return rng.integers(0, 3, size=shape).astype(np.float32)


def _brute(model, A, B):
    """The exact A @ B by Fractions, element by element."""
    va = np.array(exact_values(model.decode("a", A)), dtype=object).reshape(A.shape)
    vb = np.array(exact_values(model.decode("b", B)), dtype=object).reshape(B.shape)
    return [sum((va[i, k] * vb[k, j] for k in range(A.shape[1])), Fraction(0))
            for i in range(A.shape[0]) for j in range(B.shape[1])]


def test_exact_reference_of_a_hand_worked_dot():
    # 1.5 x 2 + 0.25 x -0.125 = 3 - 1/32 = 95/32
    m = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    A = np.array([[f16(1.5), f16(0.25)]], np.uint16)
    B = np.array([[f16(2.0)], [f16(-0.125)]], np.uint16)
    assert exact_result(m, A, B).fractions() == [Fraction(95, 32)]


def test_exact_reference_keeps_what_binary64_loses():
    # 2^60 + 1 - 2^60 = 1 exactly; in binary64 the 1 is lost: (2^60 + 1) - 2^60 = 0
    m = mmasim.MMA("B200", "tcgen05.mma.kind::tf32")
    A = np.array([[f32(2.0 ** 60), f32(1.0), f32(-(2.0 ** 60))]], np.uint32)
    B = np.array([[f32(1.0)], [f32(1.0)], [f32(1.0)]], np.uint32)
    assert (2.0 ** 60 + 1.0) - 2.0 ** 60 == 0.0
    assert exact_result(m, A, B).fractions() == [Fraction(1)]


@pytest.mark.parametrize("instr, bits", [(HOPPER_FP8, 8), (("A100", "m16n8k8.f32.tf32.tf32.f32"), 32)])
def test_exact_reference_equals_fraction_sums_on_random_words(instr, bits):
    m = mmasim.MMA(*instr)
    rng = np.random.default_rng(30)
    M, K, N = 5, 40, 3
    if bits == 8:
        A = rng.integers(0, 256, (M, K)).astype(np.uint8)
        B = rng.integers(0, 256, (K, N)).astype(np.uint8)
        A[(A & 0x7F) == 0x7F] = 0x11            # no NaN
        B[(B & 0x7F) == 0x7F] = 0x22
    else:                                       # f32 words over a wide range: limbs and several planes
        e = rng.integers(60, 200, (M + N, K))
        words = (rng.integers(0, 2, (M + N, K)) << 31) | (e << 23) | rng.integers(0, 1 << 23, (M + N, K))
        A, B = words[:M].astype(np.uint32), words[M:].T.astype(np.uint32)
    assert exact_result(m, A, B).fractions() == _brute(m, A, B)


def test_exact_reference_applies_promotion_and_tensor_scales():
    m = mmasim.MMA(*HOPPER_FP8)
    rng = np.random.default_rng(31)
    M, K, N = 4, 256, 16
    A = rng.integers(0, 0x7F, (M, K)).astype(np.uint8)
    B = rng.integers(0, 0x7F, (K, N)).astype(np.uint8)
    sa = rng.uniform(0.5, 2, (M, 2)).astype(np.float32)
    sb = rng.uniform(0.5, 2, (2, 2)).astype(np.float32)
    ts = np.float32(0.3)
    got = exact_result(m, stand_in(A, "e4m3", sa, "f32", "promotion", tensor_scale=ts),
                       stand_in(B, "e4m3", sb, "f32", "promotion")).fractions()
    va = np.array(exact_values(m.decode("a", A)), dtype=object).reshape(A.shape)
    vb = np.array(exact_values(m.decode("b", B)), dtype=object).reshape(B.shape)
    want = []
    for i in range(M):
        for j in range(N):
            total = sum(Fraction(float(sa[i, k // 128])) * Fraction(float(sb[k // 128, j // 8])) * va[i, k] * vb[k, j]
                        for k in range(K))
            want.append(total * Fraction(float(ts)))
    assert got == want


def test_statistics_of_exact_results_and_of_one_ulp():
    exact = [Fraction(3), Fraction(-5, 4), Fraction(0)]
    s = statistics(3, list(exact), exact, F32_FMT)
    assert (s.fraction_exact, s.max_rel_error, s.median_rel_error, s.max_ulps, s.effective_bits) == (1.0, 0, 0, 0, 24)
    assert s.zero_results == 1 and s.nonfinite == 0
    # worked by hand: 3 + 2^-22 is one f32 ULP above 3 (ULP of [2, 4) is 2^-22): relative 2^-22 / 3
    one = statistics(1, [Fraction(3) + Fraction(1, 2 ** 22)], [Fraction(3)], F32_FMT)
    assert one.max_ulps == 1.0 and one.max_rel_error == pytest.approx(2.0 ** -22 / 3, rel=1e-15)
    assert one.fraction_exact == 0 and one.effective_bits == pytest.approx(-np.log2(2.0 ** -22 / 3))
    inf = statistics(2, [None, Fraction(1)], [Fraction(1), Fraction(1)], F32_FMT)
    assert inf.nonfinite == 1 and inf.fraction_exact == 0.5


def test_exactly_representable_sums_are_all_exact():
    r = mmasim.accuracy(*HOPPER_FP8, k=(32, 64), n=8, dist=_small_integers, backend="numpy")
    assert [row.k for row in r.rows] == [32, 64]
    for row in r.rows:
        assert row.cases == 64 * 8
        assert row.fraction_exact == 1.0 and row.max_rel_error == 0 and row.effective_bits == 24


def test_accuracy_reports_the_errors_of_gemm_against_fraction_sums():
    m = mmasim.MMA(*HOPPER_FP8)
    r = mmasim.accuracy(model=m, k=256, n=8, dist="normal", seed=3, backend="numpy")
    from mmasim.accuracy import inputs
    A, B = inputs.operands(m, "normal", 3, 64, 256, 8)
    d = mmasim.gemm(A, B, None, model=m, backend="numpy").view(np.float32).ravel()
    exact = _brute(m, A, B)
    rel = [abs(Fraction(float(v)) - x) / abs(x) for v, x in zip(d, exact) if x != 0]
    row = r.rows[0]
    assert row.max_rel_error == float(max(rel))
    assert row.fraction_exact == sum(Fraction(float(v)) == x for v, x in zip(d, exact)) / len(exact)
    assert row.median_rel_error == float(np.median([float(x) for x in rel]))


def test_promotion_improves_hopper_fp8_at_long_k():
    plain = mmasim.accuracy(*HOPPER_FP8, k=512, n=8, backend="numpy").rows[0]
    promo = mmasim.accuracy(*HOPPER_FP8, k=512, n=8, promote_every=128, backend="numpy").rows[0]
    assert promo.median_rel_error < plain.median_rel_error


def _fake_quantize(monkeypatch, fn):
    """A stand-in for the quantize the study calls, with scales chosen so the answer is known."""
    inputs = sys.modules["mmasim.accuracy.inputs"]       # mmasim.accuracy is also the function
    monkeypatch.setattr(inputs, "quantize", fn)


def test_schemes_come_from_mmasim_quantize_and_their_scales_enter_the_exact_result(monkeypatch):
    import ml_dtypes

    def quantize(x, scheme, axis=-1):          # e4m3 codes, every block scaled by 2 (ue8m0 word 128)
        codes = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        shape = (x.shape[0], x.shape[1] // 32) if axis == -1 else (x.shape[0] // 32, x.shape[1])
        return stand_in(codes, "e4m3", np.full(shape, 128, np.uint8), "ue8m0", "instruction", 32)

    _fake_quantize(monkeypatch, quantize)
    r = mmasim.accuracy(*B200_MXF8, k=64, n=8, dist=_small_integers, scheme="two", backend="numpy")
    assert r.scheme == "two" and r.rows[0].fraction_exact == 1.0


def test_promotion_scales_of_a_scheme_enter_the_exact_result(monkeypatch):
    import ml_dtypes

    def quantize(x, scheme, axis=-1):          # DeepSeek-like: binary32 scale 0.5 per 1 x 128 / 128 x 128 tile
        codes = x.astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
        shape = (x.shape[0], x.shape[1] // 128) if axis == -1 else (x.shape[0] // 128, max(1, x.shape[1] // 128))
        return stand_in(codes, "e4m3", np.full(shape, 0.5, np.float32), "f32", "promotion")

    _fake_quantize(monkeypatch, quantize)
    r = mmasim.accuracy(*HOPPER_FP8, k=128, n=8, dist=_small_integers, scheme="ds", promote_every=128,
                        backend="numpy")
    assert r.rows[0].fraction_exact == 1.0


def test_a_real_scheme_is_mmasim_quantize():
    # small integers under OCP MXFP8: every element and scale exact, so every result is exact
    r = mmasim.accuracy(*B200_MXF8, k=64, n=8, dist=_small_integers, scheme="mxfp8_e4m3", backend="numpy")
    assert r.scheme == "mxfp8_e4m3" and r.rows[0].fraction_exact == 1.0


@pytest.mark.parametrize("kw, message", [
    (dict(dist="cauchy"), "unknown distribution"),
    (dict(k=0), "positive integers"),
    (dict(k=(32, 1.5)), "positive integers"),
])
def test_bad_requests_are_refused(kw, message):
    with pytest.raises(mmasim.AccuracyError, match=message):
        mmasim.accuracy(*HOPPER_FP8, n=8, backend="numpy", **kw)


def test_block_scaled_instructions_need_a_scheme():
    with pytest.raises(mmasim.AccuracyError, match="block-scaled"):
        mmasim.accuracy(*B200_MXF8, k=32, n=8, backend="numpy")


def test_command_prints_a_table_json_and_a_plot(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    monkeypatch.setenv("MMASIM_BACKEND", "numpy")
    png = tmp_path / "acc.png"
    argv = ["accuracy", *HOPPER_FP8, "--k", "32,64", "--n", "8", "--promote-every", "none,32", "-q"]
    assert main(argv + ["--plot", str(png)]) == 0
    out = capsys.readouterr().out
    assert "no promotion" in out and "promote every 32" in out and "median rel" in out
    assert png.stat().st_size > 10000
    assert main(argv + ["--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "mmasim.accuracy/1" and doc["k"] == [32, 64]
    assert [s["promote_every"] for s in doc["settings"]] == [None, 32]
    assert set(doc["settings"][0]["rows"][0]) >= {"k", "max_rel_error", "median_rel_error", "max_ulps",
                                                  "median_ulps", "fraction_exact", "effective_bits"}


def test_command_usage_errors(capsys):
    assert main(["accuracy", "H100"]) == 2
    assert "pairs" in capsys.readouterr().err
    assert main(["accuracy", *HOPPER_FP8, "--k", "32,x"]) == 2
    assert main(["accuracy", *HOPPER_FP8, "--dist", "cauchy"]) == 2


# ------------------------------------------------------------ every argument checked, memory estimated
ACC = sys.modules["mmasim.accuracy"]        # the package (mmasim.accuracy is also the function)
F16 = ("A100", "m16n8k16.f32.f16.f16.f32")  # K = 16, M = 16, N = 8


@pytest.fixture
def nothing_runs(monkeypatch):
    """The study's arguments are checked, then each setting returns its (model, K values, M, N,
    seed) instead of running; the memory limit out of the way (tested on its own below)."""
    monkeypatch.setattr(ACC, "_setting", lambda model, ks, M, N, dist, seed, **kw: (ks, M, N, seed))
    monkeypatch.setattr(ACC, "memory_limit", lambda: float("inf"))


def _int(x):
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))


anything = st.one_of(st.none(), st.booleans(), st.integers(-5, 200), st.integers(2 ** 120, 2 ** 140),
                     st.floats(allow_nan=True), st.text(max_size=3), st.just(np.int64(32)), st.just(np.float64(32.0)),
                     st.just(64.9), st.just([16, 32]), st.just([]), st.just((16, 2.5)), st.just("16"))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(arg=st.sampled_from(["m", "n", "k", "seed"]), value=anything)
def test_every_study_argument_is_checked_once_and_named(nothing_runs, arg, value):
    kw = {"k": 16, arg: value}
    if arg == "k":
        ks = [value] if _int(value) else value if isinstance(value, (list, tuple)) else None
        ok = bool(ks) and all(_int(x) and x >= 1 and x % 16 == 0 for x in ks)
    elif arg == "seed":
        ok = _int(value) and 0 <= value < 2 ** 128
    else:
        tile = 16 if arg == "m" else 8
        ok = value is None or (_int(value) and value >= 1 and value % tile == 0)
    if not ok:
        with pytest.raises(mmasim.AccuracyError, match=f"accuracy: {arg}"):
            mmasim.accuracy(*F16, **kw)
        return
    ks, M, N, seed = mmasim.accuracy(*F16, **kw)
    assert (ks, M, N, seed) == (tuple(int(x) for x in ([value] if _int(value) else value)) if arg == "k" else (16,),
                                value if arg == "m" and value is not None else 64,
                                value if arg == "n" and value is not None else 64,
                                value if arg == "seed" else 0)


def test_a_study_that_needs_more_memory_than_the_limit_is_refused_before_it_runs(nothing_runs, monkeypatch):
    monkeypatch.setattr(ACC, "memory_limit", lambda: 2 ** 30)
    # by hand: 128 bytes per element of A and B, 512 + 32 * 16 per output
    assert ACC.memory_estimate(mmasim.MMA(*F16), 64, 1024, 64) == 128 * 128 * 1024 + 64 * 64 * (512 + 32 * 16)
    mmasim.accuracy(*F16, k=(256, 1024))                     # 21 MiB: runs
    with pytest.raises(mmasim.AccuracyError) as e:
        mmasim.accuracy(*F16, k=(256, 10 ** 6))              # 128 * 128 * 10^6 = 15.3 GiB
    msg = str(e.value)
    assert "K = 1000000 with 64 x 64 outputs" in msg and "about 15.3 GiB" in msg and "limit of 1.0 GiB" in msg
    with pytest.raises(mmasim.AccuracyError, match="limit"):
        mmasim.accuracy(*F16, k=16, m=2 ** 20, n=2 ** 20)


def test_the_memory_limit_is_half_of_this_machines_memory():
    if not hasattr(os, "sysconf"):
        pytest.skip("no os.sysconf")
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert ACC.MEMORY_FRACTION == 0.5 and ACC.memory_limit() == total // 2


def test_command_refuses_a_huge_k_with_one_line_naming_the_limit(capsys):
    assert main(["accuracy", *F16, "--k", "1000000000", "-q"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mmasim: error: accuracy: K = 1000000000 with 64 x 64 outputs would need about ")
    assert "of this machine's memory" in err and "internal error" not in err and err.count("\n") == 1


@pytest.mark.parametrize("instruction, message", [
    ("m16n8k32.s32.s8.s8.s32", "integer D"), ("mma.sp.m16n8k32.f32.f16.f16.f32", "is sparse")])
def test_instructions_a_study_cannot_run_are_refused_up_front(instruction, message):
    with pytest.raises(mmasim.AccuracyError, match=message):
        mmasim.accuracy("A100", instruction, k=32, n=8, backend="numpy")
