"""The binary32 ``ex2`` of the attention kernels: one fixed rule, the same words on every machine.

CUDA's fast-math ``exp2f`` compiles to ``ex2.approx.ftz.f32``.  The PTX ISA gives that
instruction's error bound, not its words, and NVIDIA publishes no bit-exact description, so
no simulator can reproduce it; numpy's and torch's ``exp2`` are no substitute either (numpy's
float32 ``exp2`` changes its last bit with the CPU's SIMD level, torch's differs between CPU
and CUDA).  The rule adopted here (assumed, not measured) is the one that needs no machine:

* ``2**x`` correctly rounded to binary32: round to nearest even to 24 significant bits, with
  an unbounded exponent;
* an input of magnitude below ``2**-126`` is read as 0 (ftz), so its result is 1;
* a result below ``2**-126`` is flushed to +0 (every ``x < -126``);
* ``x >= 128`` (a rounded result ``>= 2**128``) gives +inf; NaN gives NaN (the word
  ``0x7fc00000``, whatever the input's payload), +inf gives +inf, -inf gives +0.

:func:`ex2` takes a numpy float32 array or scalar, or a torch float32 tensor on any device, and
returns the same kind.  It uses only IEEE basic binary64 operations (``+ - *``, exact
conversions, ``floor``, comparisons, ``where``, table gathers, ``nextafter``, bit views), each
correctly rounded on every target, never a library ``exp``/``pow`` and never an fma; so numpy,
torch on the CPU and torch on CUDA give the same words.  torch is imported only when a tensor
comes in (and is recognised without importing it).

The algorithm (:func:`_two_word`): ``x = n + j/64 + r`` with ``k = floor(64 x + 1/2)`` (exact),
``n = floor(k/64)``, ``j = k - 64 n``, ``r = x - k/64`` (exact: ``|r| <= 2**-7``);
``2**(j/64)`` as a double-double ``(T_hi, T_lo)`` from a table, ``p = 2**r - 1`` by Horner on
the Taylor coefficients ``ln(2)**i / i!`` (``i = 1..6``; both computed once with
:mod:`decimal` at 50 digits), ``lo = T_hi p + T_lo (1 + p)`` and Fast2Sum
``s + e = T_hi + lo`` exactly, ``s`` in ``[2**(-1/128), 2**(127/128)]``.  The relative error of
``s + e`` against ``2**(x - n)`` is below ``2**-58`` (truncation ``(r ln 2)**7/7! < 2**-65``;
the roundings in ``p`` about ``2.2 * 2**-53`` of ``p``, those of ``T_hi p`` and ``lo`` each
``2**-53`` of a value below ``2**-6.5``, ``|p| < 2**-7.5``: ``2**-58.4`` in all); the largest
observed on random inputs is printed by the scan.
``s + e`` is rounded to binary32 by converting ``s`` (round to nearest even): the result is
that of ``s + e`` because ``|e| <= ulp(s)/2`` and a binary32 midpoint is a binary64 number,
so none lies strictly between ``s`` and ``s + e`` -- except when ``s`` *is* a midpoint and
``e != 0``, where ``s`` is first moved one binary64 ulp toward ``e`` (:func:`_round_pair`).
The result ``float(r32) * 2**n`` is exact.  ``2**x`` is never exactly a midpoint (for a
non-integer rational ``x`` it is irrational; for an integer it is a power of two), so "correct
rounding" needs no tie rule beyond the one an exact power of two never meets.

Verified exhaustively by ``tools/ex2_scan.py``: every binary32 ``x`` with
``2**-30 <= |x|`` and ``-151 <= x < 128`` (``|x| < 2**-30`` gives 1: ``2**x`` lies within
``2**-30`` of 1, closer than the midpoints ``1 - 2**-25`` and ``1 + 2**-24``), with the distance
of ``s + e`` to the nearest binary32 midpoint; each ``x`` closer than ``2**-53`` relative
(32 times the error bound) is checked against mpmath at 200 bits.  Its summary (about 30 s)::

    inputs scanned: 622264321
    max relative error of s + e on 8000 random inputs: 2**-59.08
    flagged (within 2**-53 of a binary32 midpoint): 5, each rounded as mpmath rounds
    s a binary32 midpoint with e != 0 (nudged): 3 (0x3b429d37, 0xb52d1f9a, 0xbcf3a937)
    rounded wrong (exceptions): 0

An ``x`` the algorithm would round wrong goes to :data:`EXCEPTIONS` (input bits -> result
bits); tests/test_ex2.py checks each against mpmath.
"""

from __future__ import annotations

import decimal
import functools

import numpy as np

from mmasim.errors import DtypeError

#: input bits -> result bits of the binary32 ``x`` the algorithm rounds wrong (tools/ex2_scan.py)
EXCEPTIONS: dict[int, int] = {}

_TABLE_SIZE = 64
_TAYLOR_TERMS = 6
_MIN_NORMAL = 2.0 ** -126
_HALF_ULP_BITS = 1 << 28        # a binary64 whose low 29 mantissa bits are this is a binary32 midpoint
_LOW_BITS = (1 << 29) - 1


@functools.lru_cache(maxsize=1)
def tables() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(T_hi, T_lo, c)``: ``2**(j/64) = T_hi[j] + T_lo[j]`` to about 2**-106 (``j = 0..63``),
    and the Taylor coefficients ``c[i-1] = ln(2)**i / i!`` (``i = 1..6``) rounded to binary64,
    computed with :mod:`decimal` at 50 digits (``float`` of a ``Decimal`` is correctly rounded)."""
    ctx = decimal.Context(prec=50)
    hi, lo = [], []
    for j in range(_TABLE_SIZE):
        t = ctx.power(decimal.Decimal(2), ctx.divide(decimal.Decimal(j), decimal.Decimal(_TABLE_SIZE)))
        h = float(t)
        hi.append(h)
        lo.append(float(ctx.subtract(t, decimal.Decimal(h))))
    ln2 = ctx.ln(decimal.Decimal(2))
    coeffs, term = [], decimal.Decimal(1)
    for i in range(1, _TAYLOR_TERMS + 1):
        term = ctx.divide(ctx.multiply(term, ln2), decimal.Decimal(i))
        coeffs.append(float(term))
    return np.array(hi), np.array(lo), np.array(coeffs)


class _NumpyOps:
    """The operations whose spelling differs, for numpy arrays."""

    f32, f64, i32, i64 = np.float32, np.float64, np.int32, np.int64

    def __init__(self, x):
        pass

    def table(self, values):
        return np.asarray(values, dtype=np.float64)

    def to(self, a, dtype):
        with np.errstate(invalid="ignore"):     # a signaling NaN cast quiets
            return a.astype(dtype)

    def view(self, a, dtype):
        return a.view(dtype)

    def where(self, c, a, b):
        return np.where(c, a, b)

    def floor(self, a):
        return np.floor(a)

    def nextafter(self, a, b):
        return np.nextafter(a, b)

    def isnan(self, a):
        return np.isnan(a)

    def from_bits(self, word):
        return np.int32(word).view(np.float32)


class _TorchOps:
    """The same operations for torch tensors, on the tensor's device."""

    def __init__(self, x):
        import torch

        self.torch, self.device = torch, x.device
        self.f32, self.f64, self.i32, self.i64 = torch.float32, torch.float64, torch.int32, torch.int64

    def table(self, values):
        return self.torch.as_tensor(np.asarray(values, dtype=np.float64), device=self.device)

    def to(self, a, dtype):
        return a.to(dtype)

    def view(self, a, dtype):
        return a.view(dtype)

    def where(self, c, a, b):
        t = self.torch
        dtype = next((v.dtype for v in (a, b) if t.is_tensor(v)), t.float64)
        a, b = (v if t.is_tensor(v) else t.tensor(v, dtype=dtype, device=self.device) for v in (a, b))
        return t.where(c, a, b)

    def floor(self, a):
        return self.torch.floor(a)

    def nextafter(self, a, b):
        return self.torch.nextafter(a, b)

    def isnan(self, a):
        return self.torch.isnan(a)

    def from_bits(self, word):
        return self.torch.tensor(word, dtype=self.torch.int32, device=self.device).view(self.torch.float32)


def _is_tensor(x) -> bool:
    return type(x).__module__.partition(".")[0] == "torch"


def _ops(x):
    if _is_tensor(x):
        if str(x.dtype) != "torch.float32":
            raise DtypeError(f"ex2 takes float32 values; got a torch {x.dtype} tensor (convert it with .float())")
        return _TorchOps(x)
    dtype = getattr(x, "dtype", None)
    if dtype != np.float32:
        raise DtypeError(f"ex2 takes float32 values (a numpy float32 array or scalar, a torch float32 tensor); "
                         f"got {type(x).__name__}" + (f" of dtype {dtype}" if dtype is not None else ""))
    return _NumpyOps(x)


def _reduce(ops, x):
    """``(n, j, r)`` with ``xd = n + j/64 + r`` exactly, ``xd`` the binary64 input after ftz and
    clamping to [-160, 129] (NaN read as 0: its result is set apart)."""
    xd = ops.to(x, ops.f64)
    xd = ops.where(abs(xd) < _MIN_NORMAL, 0.0, xd)
    xd = ops.where(ops.isnan(xd), 0.0, xd)
    xd = ops.where(xd < -160.0, -160.0, ops.where(xd > 129.0, 129.0, xd))
    k = ops.floor(xd * 64.0 + 0.5)
    n = ops.floor(k * (1.0 / 64))
    j = k - 64.0 * n
    return n, j, xd - k * (1.0 / 64)


def _two_word(ops, j, r):
    """``(s, e)``: ``s + e`` approximates ``2**(j/64 + r)`` (``s = fl(s + e)``)."""
    t_hi, t_lo, c = tables()
    index = ops.to(j, ops.i64)
    hi, lo = ops.table(t_hi)[index], ops.table(t_lo)[index]
    p = float(c[-1]) * r
    for coeff in c[-2::-1]:
        p = (p + float(coeff)) * r
    low = hi * p + lo * (p + 1.0)
    s = hi + low
    return s, low - (s - hi)


def _round_pair(ops, s, e):
    """``s + e`` (``|e| <= ulp(s)/2``) rounded to nearest even binary32: ``s`` converted, moved
    first one binary64 ulp toward ``e`` where it is a binary32 midpoint and ``e != 0``.  A
    midpoint is a binary64 whose low 29 mantissa bits are ``1 << 28`` where ``|s| >= 2**-126``,
    an odd multiple of ``2**-150`` below (the subnormal binary32 grid)."""
    normal = abs(s) >= _MIN_NORMAL
    t = ops.where(normal, 0.0, s) * 2.0 ** 150  # exact, below 2**24
    whole = ops.floor(t)
    odd = (t == whole) & (whole - 2.0 * ops.floor(whole * 0.5) == 1.0)
    midpoint = ops.where(normal, (ops.view(s, ops.i64) & _LOW_BITS) == _HALF_ULP_BITS, odd)
    nudge = midpoint & (e != 0)
    toward = ops.where(e > 0, float("inf"), float("-inf"))
    return ops.to(ops.where(nudge, ops.nextafter(s, toward), s), ops.f32)


def binary32_of_sum(s, e):
    """``s + e`` rounded once to nearest even binary32 (subnormal results kept, overflow to
    infinity, NaN and infinities as ``s``'s): ``s`` and ``e`` binary64 numpy arrays or torch
    tensors, ``e`` the exact error of the binary64 sum ``s`` (a TwoSum's pair, ``|e| <= ulp(s)/2``).
    The float32 result is of ``s``'s kind; FFMA's single rounding
    (:func:`mmasim.torch.attention_steps.ffma`) is one."""
    ops = _TorchOps(s) if _is_tensor(s) else _NumpyOps(s)
    e = ops.where(e == e, e, 0.0)               # NaN errors (s infinite or NaN) nudge nothing
    return _round_pair(ops, s, e)


def approximation(x: np.ndarray):
    """``(n, s, e)`` for a numpy float32 array ``x`` (finite, ``-160 <= x <= 129``): ``2**x`` is
    approximated by ``(s + e) * 2**n``, ``s = fl(s + e)``; what tools/ex2_scan.py measures."""
    ops = _NumpyOps(x)
    n, j, r = _reduce(ops, np.asarray(x, dtype=np.float32))
    s, e = _two_word(ops, j, r)
    return n, s, e


def ex2(x):
    """``2**x`` correctly rounded to binary32 with ftz (the module's rule), elementwise; ``x`` a
    numpy float32 array or scalar or a torch float32 tensor, the result of the same kind."""
    ops = _ops(x)
    scalar = not _is_tensor(x) and np.ndim(x) == 0 and not isinstance(x, np.ndarray)
    if scalar:
        x = np.asarray(x)
    elif _is_tensor(x):
        x = x.detach()
    n, j, r = _reduce(ops, x)
    s, e = _two_word(ops, j, r)
    pow_n = ops.view(ops.to(n + 1023.0, ops.i64) << 52, ops.f64)
    y = ops.to(_round_pair(ops, s, e), ops.f64) * pow_n
    y = ops.where(y < _MIN_NORMAL, 0.0, ops.where(y >= 2.0 ** 128, float("inf"), y))
    y = ops.where(ops.isnan(ops.to(x, ops.f64)), float("nan"), y)
    out = ops.to(y, ops.f32)
    for word, result in EXCEPTIONS.items():
        out = ops.where(ops.view(x, ops.i32) == _signed(word), ops.from_bits(_signed(result)), out)
    return out[()] if scalar else out


def _signed(word: int) -> int:
    return word - (1 << 32) if word >= 1 << 31 else word
