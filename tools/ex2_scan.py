"""Exhaustive check of ``mmasim.arith.ex2``'s rounding: every binary32 ``x`` it must decide.

Scans every binary32 ``x`` with ``|x| >= 2**-30`` and ``-151 <= x < 128``, in chunks of
``2**22`` with numpy: the approximation ``s + e`` of ``2**(x - n)``
(:func:`mmasim.arith.ex2.approximation`) and its distance to the nearest binary32 midpoint,
relative.  Outside that range the result is decided without it: ``x >= 128`` is +inf,
``x < -151`` (indeed ``x < -126``) is flushed to +0, NaN is NaN, and ``|x| < 2**-30`` gives 1
(``2**x`` lies within ``2**-30`` of 1, much closer than the nearest midpoints ``1 - 2**-25``
and ``1 + 2**-24``; ``|x| < 2**-126`` is read as 0 anyway).  Where the distance is at least
:data:`FLAG` (``2**-53``, 32 times the error bound ``2**-58`` of ``s + e``, whose largest
value on random inputs is measured here too), ``s + e`` and ``2**x`` round alike, and
``ex2`` rounds ``s + e`` exactly (its docstring); every ``x`` closer than that is *flagged*
and its ``ex2`` word checked against mpmath at 200 bits (:func:`reference`).  An ``x`` whose
word is wrong belongs in ``ex2.EXCEPTIONS``.

Run it with ``nice python tools/ex2_scan.py`` (about 30 s on one core); it prints the counts
that ``ex2``'s docstring quotes.
"""

from __future__ import annotations

import sys
import time

import mpmath
import numpy as np

from mmasim.arith.ex2 import approximation, ex2

FLAG = 2.0 ** -53
CHUNK = 1 << 22
#: the input words scanned: [2**-30, 128) and [-151, -2**-30] (sign-magnitude words)
RANGES = ((0x30800000, 0x43000000), (0xB0800000, 0xC3170001))


def reference(x: np.ndarray, prec: int = 200) -> np.ndarray:
    """The rule's words from mpmath: ``2**x`` at ``prec`` bits rounded to nearest even to 24
    bits (unbounded exponent), ftz of the input, a result below ``2**-126`` flushed to +0,
    ``>= 2**128`` +inf, NaN NaN (float32 words, as an array of float32)."""
    out = np.empty(np.shape(x), dtype=np.float32)
    flat = out.reshape(-1)
    for i, v in enumerate(np.asarray(x, dtype=np.float32).reshape(-1)):
        v = float(v)
        if v != v:
            flat[i] = np.nan
            continue
        if abs(v) < 2.0 ** -126:
            v = 0.0
        if v == float("inf"):
            flat[i] = np.inf
            continue
        if v == float("-inf") or v < -200:
            flat[i] = 0.0
            continue
        with mpmath.workprec(prec):
            exact = mpmath.mpf(2) ** mpmath.mpf(v)
        with mpmath.workprec(24):
            rounded = +exact
        if rounded >= mpmath.mpf(2) ** 128:
            flat[i] = np.inf
        elif rounded < mpmath.mpf(2) ** -126:
            flat[i] = 0.0
        else:
            flat[i] = float(rounded)
    return out


def midpoint_distance(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The distance of ``s + e`` (``s`` in ``(1/2, 2)``) to the nearest binary32 midpoint,
    relative to ``s``."""
    scale = np.where(s >= 1.0, 2.0 ** 23, 2.0 ** 24)
    y = s * scale
    return np.abs((y - (np.floor(y) + 0.5)) + e * scale) / y


def is_midpoint(s: np.ndarray) -> np.ndarray:
    """Whether binary64 ``s`` (normal) is exactly a binary32 midpoint: its low 29 mantissa bits
    are ``1 << 28``."""
    return (s.view(np.uint64) & np.uint64((1 << 29) - 1)) == np.uint64(1 << 28)


def flagged(words: np.ndarray):
    """``(flagged, nudged)``: the inputs (float32) among the binary32 ``words`` whose ``s + e``
    lies within :data:`FLAG` of a midpoint, and those whose ``s`` is a midpoint with ``e != 0``
    (where ``ex2`` moves ``s`` toward ``e`` before rounding)."""
    x = words.astype(np.uint32).view(np.float32)
    _, s, e = approximation(x)
    return x[midpoint_distance(s, e) < FLAG], x[is_midpoint(s) & (e != 0)]


def wrong(x: np.ndarray) -> np.ndarray:
    """The inputs among ``x`` whose ``ex2`` word differs from mpmath's."""
    return x[ex2(x).view(np.uint32) != reference(x).view(np.uint32)]


def max_error(count: int = 4000, seed: int = 0) -> float:
    """The largest relative error of ``s + e`` against ``2**(x - n)`` (mpmath at 200 bits) on
    ``count`` random binary32 inputs of the scanned range."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-151, 128, count).astype(np.float32)
    x = np.concatenate([x, (rng.uniform(-1, 1, count) * 2.0 ** rng.integers(-30, 0, count)).astype(np.float32)])
    n, s, e = approximation(x)
    worst = mpmath.mpf(0)
    with mpmath.workprec(200):
        for xi, ni, si, ei in zip(x.tolist(), n.tolist(), s.tolist(), e.tolist()):
            exact = mpmath.mpf(2) ** (mpmath.mpf(xi) - ni)
            worst = max(worst, abs((mpmath.mpf(si) + mpmath.mpf(ei)) / exact - 1))
    return float(worst)


def scan(ranges=RANGES, chunk: int = CHUNK, progress=None):
    """``(scanned, flagged inputs, wrong inputs, nudged inputs)`` over the word ``ranges``
    (start, stop)."""
    scanned, hits, nudged = 0, [np.zeros(0, np.float32)], [np.zeros(0, np.float32)]
    for start, stop in ranges:
        for lo in range(start, stop, chunk):
            words = np.arange(lo, min(lo + chunk, stop), dtype=np.uint64)
            near, mid = flagged(words)
            hits.append(near)
            nudged.append(mid)
            scanned += words.size
            if progress:
                progress(scanned)
    hits = np.concatenate(hits)
    return scanned, hits, wrong(hits), np.concatenate(nudged)


def main() -> int:
    t0 = time.time()
    err = max_error()
    scanned, hits, bad, nudged = scan(progress=lambda k: print(f"  {k} scanned, {time.time() - t0:.0f} s",
                                                         file=sys.stderr) if k % (1 << 26) == 0 else None)
    _, s, e = approximation(hits)
    print(f"inputs scanned: {scanned}")
    print(f"max relative error of s + e on 8000 random inputs: 2**{np.log2(err):.2f}")
    print(f"flagged (within 2**-53 of a binary32 midpoint): {hits.size}")
    for x, d in zip(hits, midpoint_distance(s, e)):
        print(f"  x = {float(x)!r} (0x{int(x.view(np.uint32)):08x}), distance 2**{np.log2(d):.2f}")
    print(f"s a binary32 midpoint with e != 0 (nudged): {nudged.size}")
    for x in nudged:
        print(f"  x = {float(x)!r} (0x{int(x.view(np.uint32)):08x})")
    print(f"rounded wrong (exceptions): {bad.size}")
    for x in bad:
        print(f"  0x{int(x.view(np.uint32)):08x}: 0x{int(reference(x).view(np.uint32)):08x}")
    print(f"{time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
