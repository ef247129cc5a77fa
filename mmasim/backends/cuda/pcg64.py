"""NumPy's PCG64 bit generator as a target-neutral numba body (issue 31): the random bits of
``mmasim.quantize(..., rounding="stochastic", seed=s)``
(:func:`mmasim.quantization.rounding.random_bits`) drawn where the words are computed, on the
CPU or on a CUDA device, one element each and in any order.

NumPy's ``PCG64`` is pcg-cpp's 128-bit "pcg64" (``numpy/random/src/pcg64/pcg64.h``): a 128-bit
linear congruential generator ``state <- state * MULTIPLIER + inc`` (mod 2**128) whose 64-bit
output is the XSL-RR function of the state, the state advanced before each output
(``pcg_setseq_128_xsl_rr_64_random_r``: step, then output).  Element ``i`` of
``random_raw`` is therefore the output of the seeded state advanced ``i + 1`` steps, which
:func:`_advance` computes in O(log i) by the LCG's jump-ahead by squaring (Brown, "Random Number
Generation with Arbitrary Strides", 1994; pcg-cpp's ``pcg_advance_lcg_128``).  The 128-bit
integers are pairs of uint64 halves ``(hi, lo)``; every operation wraps as the C code's does.

The seeded state and increment are not recomputed: :func:`seeded_state` reads them from NumPy's
own ``PCG64(seed).state`` (its ``SeedSequence`` seeding), on the host, once per call.

:func:`bits_body` is a body of the quantization drivers (:mod:`.quantize`: the CPU driver, and
:func:`.driver.quantize_cuda`, a thread per element): ``x`` the state ``(1, 4)`` (uint64: state
hi, lo, increment hi, lo), ``P[0]`` the width; ``out[i, j]`` (int64) the top ``width`` bits of output ``i * C + j``.
:func:`random_bits` draws an array of them on either target.
"""

from __future__ import annotations

import numpy as np

from mmasim.backends.cuda.quantize import _element
from mmasim.backends.numba.primitives import _inline, _inline_rows

#: pcg-cpp's ``PCG_DEFAULT_MULTIPLIER_128`` (NumPy's ``PCG_DEFAULT_MULTIPLIER_HIGH`` / ``_LOW``)
MULTIPLIER = 0x2360ED051FC65DA44385DF649FCCF645
_MUL_HI = np.uint64(MULTIPLIER >> 64)
_MUL_LO = np.uint64(MULTIPLIER & (2 ** 64 - 1))
_LOW32 = np.uint64(0xFFFFFFFF)
_U0, _U1, _U32, _U58, _U63, _U64 = (np.uint64(v) for v in (0, 1, 32, 58, 63, 64))


def seeded_state(seed) -> np.ndarray:
    """``(state hi, state lo, increment hi, increment lo)`` (uint64, shape ``(1, 4)``) of
    ``numpy.random.PCG64(seed)`` as NumPy seeds it (``seed`` a non-negative integer, checked by
    the caller: :func:`mmasim.quantization.rounding.random_bits`)."""
    st = np.random.PCG64(int(seed)).state["state"]
    halves = [v >> s & (2 ** 64 - 1) for v in (st["state"], st["inc"]) for s in (64, 0)]
    return np.array([halves], np.uint64)


@_inline
def _mulhi(a, b):
    """The high 64 bits of the 128-bit product of uint64 ``a`` and ``b`` (32-bit halves)."""
    a0 = a & _LOW32
    a1 = a >> _U32
    b0 = b & _LOW32
    b1 = b >> _U32
    t = a1 * b0 + ((a0 * b0) >> _U32)
    w = (t & _LOW32) + a0 * b1
    return a1 * b1 + (t >> _U32) + (w >> _U32)


@_inline
def _mul(ah, al, bh, bl):
    """``a * b`` mod 2**128."""
    return _mulhi(al, bl) + ah * bl + al * bh, al * bl


@_inline
def _add(ah, al, bh, bl):
    """``a + b`` mod 2**128."""
    lo = al + bl
    return ah + bh + (_U1 if lo < al else _U0), lo


@_inline
def _advance(sh, sl, ih, il, delta):
    """The state ``(sh, sl)`` advanced ``delta`` (uint64) steps of ``s <- s * MULTIPLIER + inc``:
    ``s * M + P`` with ``M = MULTIPLIER**delta`` and ``P`` the sum of the increments, both
    built by squaring (``pcg_advance_lcg_128``)."""
    mh, ml = _U0, _U1                   # the accumulated multiplier and increment
    ph, pl = _U0, _U0
    ch, cl = _MUL_HI, _MUL_LO           # the multiplier and increment of 2**k steps
    dh, dl = ih, il
    while delta > _U0:
        if delta & _U1:
            mh, ml = _mul(mh, ml, ch, cl)
            ph, pl = _mul(ph, pl, ch, cl)
            ph, pl = _add(ph, pl, dh, dl)
        eh, el = _add(ch, cl, _U0, _U1)
        dh, dl = _mul(eh, el, dh, dl)
        ch, cl = _mul(ch, cl, ch, cl)
        delta = delta >> _U1
    sh, sl = _mul(mh, ml, sh, sl)
    return _add(sh, sl, ph, pl)


@_inline
def _output(sh, sl):
    """PCG's XSL-RR output of a 128-bit state: ``hi ^ lo`` rotated right by the top 6 bits."""
    x = sh ^ sl
    rot = sh >> _U58
    return (x >> rot) | (x << ((_U64 - rot) & _U63))


@_inline
def raw(state, i):
    """Output ``i`` (0-based, uint64) of ``random_raw`` from the seeded ``state`` (a ``(1, 4)``
    array, :func:`seeded_state`): the state advanced ``i + 1`` steps, then output."""
    sh, sl = _advance(state[0, 0], state[0, 1], state[0, 2], state[0, 3], np.uint64(i) + _U1)
    return _output(sh, sl)


@_inline_rows
def bits_body(b, x, rb, CS, TAB, P, out, scales):
    """Element ``b`` (C order) of ``out``: the top ``P[0]`` bits of output ``b`` of the generator
    whose seeded state is ``x`` (see the module)."""
    i, j = _element(b, out)
    word = raw(x, b)
    out[i, j] = np.int64(word >> (_U64 - np.uint64(P[0])))
    return 0


def random_bits(seed, shape, width: int, arrays):
    """:func:`mmasim.quantization.rounding.random_bits` ``(seed, shape, width)`` (``shape`` 2-D)
    as an int64 array of ``arrays`` (:class:`.quantize.CpuArrays` or :class:`.quantize.CudaArrays`:
    then drawn on the device, nothing copied back but the status flag)."""
    out = arrays.empty(tuple(shape), np.int64)
    n = int(np.prod(shape, dtype=np.int64))
    if n:
        status = arrays.put(np.zeros(1, np.int8))
        arrays.launch(bits_body, n, arrays.put(seeded_state(seed)), arrays.empty((0, 0), np.int64),
                      arrays.put(np.zeros((1, 1), np.int64)), arrays.put(np.zeros(1, np.int64)),
                      arrays.put(np.array([width], np.float64)), out, out, status)
    return out
