"""``mmasim.arith.ex2``: ``2**x`` correctly rounded to binary32 with ftz, the same words on numpy
and torch.  Every expectation comes from mpmath (``tools/ex2_scan.py``'s ``reference``: ``2**x``
at 200 bits rounded to 24 bits), from hand-worked values, or from the other array library."""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from mmasim.arith import ex2 as ex2_module
from mmasim.arith.ex2 import EXCEPTIONS, approximation, ex2
from mmasim.errors import DtypeError

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _scan_tool():
    spec = importlib.util.spec_from_file_location("ex2_scan", ROOT / "tools" / "ex2_scan.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SCAN = _scan_tool()


def words(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def f32(values) -> np.ndarray:
    return np.array(values, dtype=np.float32)


EDGES = f32([
    0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-45, -1e-45, 1e-40, -1e-40, 2.0 ** -126, -(2.0 ** -126),
    np.nextafter(np.float32(2.0 ** -126), np.float32(0)), 2.0 ** -30, -(2.0 ** -30), 2.0 ** -31,
    -126.0, np.nextafter(np.float32(-126), np.float32(-200)), -127.0, -149.0, -150.0, -151.0, -160.0, -1e30,
    127.0, np.nextafter(np.float32(128), np.float32(0)), 128.0, 129.0, 1e30, 0.5, -0.5, 1 / 64, -1 / 128,
    *range(-126, 128),
])


#: the inputs whose ``s`` is exactly a binary32 midpoint with ``e != 0`` (tools/ex2_scan.py found these
#: three among all binary32 inputs): rounding ``s`` alone would be wrong for some of them
NUDGED = np.array([0x3B429D37, 0xB52D1F9A, 0xBCF3A937], dtype=np.uint32).view(np.float32)
#: a flagged input of the scan (``s + e`` within 2**-53 of a midpoint)
FLAGGED_NEAR = np.array([0xBAEC2B40], dtype=np.uint32).view(np.float32)[0]


def test_ex2_is_2_to_the_x_correctly_rounded_with_ftz_on_random_inputs_and_edges():
    rng = np.random.default_rng(20261205)
    anywhere = rng.integers(0, 1 << 32, 10_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    in_range = rng.uniform(-152, 129, 10_000).astype(np.float32)
    x = np.concatenate([anywhere, in_range, EDGES])
    assert np.array_equal(words(ex2(x)), words(SCAN.reference(x)))


def test_hand_worked_values():
    got = ex2(f32([0, 1, -1, 0.5, -126, -126.5, 127, 128, np.inf, -np.inf, 1e-40, np.nan]))
    assert np.array_equal(words(got), words(f32([1, 2, 0.5, np.float32(2 ** 0.5), 2.0 ** -126, 0, 2.0 ** 127,
                                                 np.inf, np.inf, 0, 1, np.nan])))
    assert words(ex2(f32([-126.5])))[0] == 0          # 2**-126.5 is below 2**-126: flushed to +0, not -0
    assert set(words(ex2(np.array([0x7F99C257, 0xFF996C55, 0x7FC00001], dtype=np.uint32).view(np.float32)))) == {0x7FC00000}


def test_integers_give_exact_powers_of_two():
    n = np.arange(-126, 128)
    assert np.array_equal(ex2(n.astype(np.float32)), np.ldexp(np.float32(1), n).astype(np.float32))


def test_error_of_the_two_word_approximation_is_below_the_scans_bound():
    assert SCAN.max_error(count=2000, seed=7) < 2.0 ** -58


def test_the_tables_are_2_to_the_j_over_64_and_the_taylor_coefficients_of_2_to_the_r():
    import mpmath

    hi, lo, c = ex2_module.tables()
    with mpmath.workprec(200):
        for j in range(64):
            exact = mpmath.mpf(2) ** (mpmath.mpf(j) / 64)
            assert abs(mpmath.mpf(hi[j]) + mpmath.mpf(lo[j]) - exact) < exact * mpmath.mpf(2) ** -104
            assert hi[j] == float(exact)
        for i, ci in enumerate(c, start=1):
            assert ci == float(mpmath.log(2) ** i / mpmath.factorial(i))


def test_numpy_and_torch_cpu_give_the_same_words():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = np.concatenate([rng.integers(0, 1 << 32, 1 << 19, dtype=np.uint64).astype(np.uint32).view(np.float32),
                        rng.uniform(-152, 129, 1 << 19).astype(np.float32), EDGES])
    got = ex2(torch.from_numpy(x))
    assert isinstance(got, torch.Tensor) and got.dtype == torch.float32 and got.device.type == "cpu"
    assert np.array_equal(words(got.numpy()), words(ex2(x)))


def test_numpy_and_torch_cuda_give_the_same_words():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    rng = np.random.default_rng(6)
    x = np.concatenate([rng.uniform(-152, 129, 1 << 20).astype(np.float32), EDGES])
    got = ex2(torch.from_numpy(x).cuda())
    assert got.device.type == "cuda"
    assert np.array_equal(words(got.cpu().numpy()), words(ex2(x)))


def test_each_exception_is_mpmaths_word():
    for word, result in EXCEPTIONS.items():
        x = np.array([word], dtype=np.uint32).view(np.float32)
        assert words(SCAN.reference(x))[0] == result
        assert words(ex2(x))[0] == result


def test_an_exception_replaces_the_computed_word(monkeypatch):
    x = f32([1.5, 2.5, -1.5])
    monkeypatch.setitem(EXCEPTIONS, int(words(x)[2]), 0x3F800001)   # a made-up entry: -1.5 -> 1 + 2**-23
    expected = np.array([words(ex2(x[:1]))[0], words(ex2(x[1:2]))[0], 0x3F800001], dtype=np.uint32)
    assert np.array_equal(words(ex2(x)), expected)
    torch = pytest.importorskip("torch")
    assert np.array_equal(words(ex2(torch.from_numpy(x)).numpy()), expected)


@pytest.mark.parametrize("s, e, expected", [
    (1 + 2.0 ** -24, 2.0 ** -60, 1 + 2.0 ** -23),       # a midpoint, e above: up (RNE of s alone: 1)
    (1 + 2.0 ** -24, -(2.0 ** -60), 1.0),
    (1 + 3 * 2.0 ** -24, -(2.0 ** -60), 1 + 2.0 ** -23),  # RNE of s alone: 1 + 2**-22 (even)
    (1 + 3 * 2.0 ** -24, 2.0 ** -60, 1 + 2.0 ** -22),
    (1 - 2.0 ** -25, 2.0 ** -70, 1.0),                    # a midpoint of the binade below 1
    (1 - 2.0 ** -25, -(2.0 ** -70), 1 - 2.0 ** -24),
    (1 + 2.0 ** -24, 0.0, 1.0),                           # a tie is a tie: to even
    (1 + 2.0 ** -23 + 2.0 ** -52, -(2.0 ** -53), 1 + 2.0 ** -23),
])
def test_a_midpoint_s_is_moved_toward_e_before_rounding(s, e, expected):
    got = ex2_module._round_pair(ex2_module._NumpyOps(None), np.array([s]), np.array([e]))
    assert got.dtype == np.float32 and float(got[0]) == expected


def test_the_inputs_whose_s_is_a_midpoint_round_as_mpmath():
    x = NUDGED
    _, s, e = approximation(x)
    assert np.all(SCAN.is_midpoint(s) & (e != 0))
    assert np.array_equal(words(ex2(x)), words(SCAN.reference(x)))


def test_a_slice_of_the_scan_finds_no_wrong_rounding():
    start = int(words(f32([FLAGGED_NEAR]))[0]) - (1 << 20)
    scanned, hits, bad, _ = SCAN.scan([(start, start + (3 << 20))], chunk=1 << 20)
    assert scanned == 3 << 20
    assert hits.size >= 1 and bad.size == 0
    assert np.array_equal(words(ex2(hits)), words(SCAN.reference(hits)))


def test_scalars_return_numpy_float32_scalars():
    got = ex2(np.float32(0.5))
    assert isinstance(got, np.float32) and got == np.float32(2 ** 0.5)


@pytest.mark.parametrize("bad", [np.array([1.0]), np.array([1], dtype=np.int32), 1.0, [np.float32(1)]])
def test_only_float32_is_taken(bad):
    with pytest.raises(DtypeError, match="float32"):
        ex2(bad)


def test_numpy_input_does_not_import_torch():
    code = ("import sys, numpy as np; from mmasim.arith.ex2 import ex2; ex2(np.float32([1.5]));"
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
