"""mmasim.arith.binary32: FADD, FMUL and FFMA correctly rounded (RNE), against the Fraction
arithmetic of tests/ieee_reference.py, on both roundings into binary32 (the CPU's
conversion and the integer encoder)."""

from fractions import Fraction

import numpy as np
import pytest

import ieee_reference as ref
from mmasim.arith import binary32


def _words(rng, n):
    """binary32 words over the whole range: subnormals, near-overflow, zeros of both signs,
    values one ULP apart (ties and cancellations), inf and NaN."""
    w = rng.integers(0, 1 << 32, size=n, dtype=np.uint64).astype(np.uint32)
    e = rng.integers(0, 3, size=n)
    w[e == 0] &= np.uint32(0x807FFFFF)                        # subnormals and zeros
    w[e == 1] = (w[e == 1] & np.uint32(0x80FFFFFF)) | np.uint32(0x3F000000)   # near one
    w[:8] = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF, 0x00000001, 0x3F800000]
    return w


def _value(word):
    v = ref.value(int(word), ref.F32)
    return v


def _expected(op, *ws):
    vals = [_value(w) for w in ws]
    if op == "fma":
        r = ref.fma(*(int(w) for w in ws), ref.F32)
        return 0x7FFFFFFF if r == ref.NAN else r
    if any(v == ref.NAN or isinstance(v, float) for v in vals):      # inf / NaN: IEEE, from numpy float32
        x, y = (np.uint32(w).view(np.float32) for w in ws)
        with np.errstate(all="ignore"):
            r = x + y if op == "add" else x * y
        return 0x7FFFFFFF if np.isnan(r) else int(np.float32(r).view(np.uint32))
    exact = vals[0] + vals[1] if op == "add" else vals[0] * vals[1]
    if exact == 0:   # the sign of an exact zero: IEEE's rule, as numpy float32 computes it
        x, y = (np.uint32(w).view(np.float32) for w in ws)
        return int(np.float32(x + y if op == "add" else x * y).view(np.uint32))
    return ref.round_rne(Fraction(exact), ref.F32)


@pytest.fixture(params=["cpu", "encoder"])
def path(request, monkeypatch):
    if request.param == "encoder":
        monkeypatch.setattr(binary32, "hardware_rounds", lambda: False)
    else:
        assert binary32.hardware_rounds()
    return request.param


@pytest.mark.parametrize("op", ["add", "mul", "fma"])
def test_operations_are_correctly_rounded(op, path):
    rng = np.random.default_rng({"add": 1, "mul": 2, "fma": 3}[op])
    n = 400
    ws = [_words(rng, n) for _ in range(3 if op == "fma" else 2)]
    if op == "add":      # cancellations: y near -x
        ws[1][n // 2:] = (ws[0][n // 2:] ^ np.uint32(0x80000000)) + rng.integers(0, 3, n - n // 2).astype(np.uint32)
    args = [binary32.from_words(w) for w in ws]
    got = binary32.to_words(getattr(binary32, op)(*args))
    want = np.array([_expected(op, *(w[i] for w in ws)) for i in range(n)], np.uint32)
    assert (got == want).all(), [(hex(int(g)), hex(int(w))) for g, w in zip(got, want) if g != w][:5]


def test_ffma_rounds_once_where_fmul_then_fadd_rounds_twice(path):
    # worked by hand: (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24 exactly, a binary32 value (2^-11 * (1 + 2^-13)).
    # FMUL first: (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 is a tie in binary32, to even 1 + 2^-11; minus 1: 2^-11.
    x = np.array([1 + 2.0 ** -12])
    fused = binary32.fma(x, x, np.array([-1.0]))
    unfused = binary32.add(binary32.mul(x, x), np.array([-1.0]))
    assert fused[0] == 2.0 ** -11 + 2.0 ** -24 and unfused[0] == 2.0 ** -11
