"""The random inputs of an accuracy study: float32 values from a stated distribution,
cast to the instruction's formats (RNE, saturating at the largest finite value) or
quantized by a scheme of :mod:`mmasim.quantize`."""

from __future__ import annotations

import importlib

import numpy as np

from ..errors import AccuracyError
from ..words import to_words, typed_dtype

#: distribution name -> what it draws (float32 values; one generator per seed and K)
DISTRIBUTIONS = {
    "uniform": "uniform on [0, 1)",
    "signed-uniform": "uniform on [-1, 1)",
    "normal": "normal, mean 0, standard deviation 1",
}

_CONTAINER = {4: np.uint8, 8: np.uint8, 16: np.uint16, 32: np.uint32}


def draw(dist, rng: np.random.Generator, shape) -> np.ndarray:
    """float32 values of ``dist`` (a name of :data:`DISTRIBUTIONS`, or a callable
    ``dist(rng, shape)`` returning float32 values)."""
    if callable(dist):
        out = np.asarray(dist(rng, shape))
        if out.dtype != np.float32 or out.shape != tuple(shape):
            raise AccuracyError(f"accuracy: a distribution callable must return float32 values of shape "
                                f"{tuple(shape)}; got {out.dtype} {out.shape}")
        return out
    if dist == "uniform":
        return rng.random(shape, dtype=np.float32)
    if dist == "signed-uniform":
        return (rng.random(shape, dtype=np.float32) * np.float32(2) - np.float32(1)).astype(np.float32)
    if dist == "normal":
        return rng.standard_normal(shape, dtype=np.float32)
    raise AccuracyError(f"accuracy: unknown distribution {dist!r}; choose one of {', '.join(DISTRIBUTIONS)}")


def cast(x: np.ndarray, fmt) -> np.ndarray:
    """Container words of float32 values ``x`` in ``fmt``: round to nearest even, saturating
    at the format's largest finite value (numpy / ml_dtypes casts; formats held in a
    binary32 word with fewer fraction bits, tf32, by the same RNE on the word)."""
    td = typed_dtype(fmt)
    if fmt.integer or td is None:
        raise AccuracyError(f"accuracy: no cast of float inputs into {fmt.name}"
                            + ("" if fmt.integer or fmt.typed is None else " (install ml_dtypes)"))
    x = np.asarray(x, dtype=np.float32)
    if td == np.float32 and fmt.man_bits < 23:
        drop = 23 - fmt.man_bits
        w = x.view(np.uint32).astype(np.uint64)
        finite = np.isfinite(x)
        up = w + ((1 << (drop - 1)) - 1) + ((w >> drop) & 1)
        w = np.where(finite, up & ~np.uint64((1 << drop) - 1), w).astype(np.uint32)
        x = np.clip(w.view(np.float32), -np.finfo(np.float32).max, np.finfo(np.float32).max)
        return to_words(x, fmt, "input")[0].astype(np.uint32)
    big = float(np.finfo(td).max) if td.kind == "f" else float(_ml_max(td))
    typed = np.clip(x, -big, big).astype(td)
    return to_words(typed, fmt, "input")[0].astype(_CONTAINER[fmt.container_bits])


def _ml_max(td):
    import ml_dtypes

    return ml_dtypes.finfo(td).max


def operands(model, dist, seed: int, M: int, K: int, N: int, scheme=None):
    """``(A, B)`` of one study: words of the instruction's formats, or quantized tensors."""
    rng = np.random.default_rng([seed, K])
    a, b = draw(dist, rng, (M, K)), draw(dist, rng, (K, N))
    if scheme is None:
        if model.scale_format is not None:
            raise AccuracyError(f"accuracy: {model.instruction} is block-scaled; give a scheme that computes its "
                                "scales (--scheme)")
        return cast(a, model.a_format), cast(b, model.b_format)
    try:
        q = importlib.import_module("mmasim.quantize")
    except ImportError:
        raise AccuracyError("accuracy: --scheme needs mmasim.quantize, which this installation does not have") \
            from None
    return q.quantize(a, scheme, axis=-1), q.quantize(b, scheme, axis=0)


__all__ = ["DISTRIBUTIONS", "draw", "cast", "operands"]
