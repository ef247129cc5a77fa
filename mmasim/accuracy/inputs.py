"""The random inputs of an accuracy study: float32 values from a stated distribution,
cast to the instruction's formats (RNE, saturating at the largest finite value) or
quantized by a scheme of :mod:`mmasim.quantize`."""

from __future__ import annotations

import numpy as np

from mmasim.quantization import casts
from mmasim.errors import AccuracyError
from mmasim.quantization.quantize import quantize

#: distribution name -> what it draws (float32 values; one generator per seed and K)
DISTRIBUTIONS = {
    "uniform": "uniform on [0, 1)",
    "signed-uniform": "uniform on [-1, 1)",
    "normal": "normal, mean 0, standard deviation 1",
}

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
    at the format's largest finite value (:func:`mmasim.quantization.casts.cast`, the casts of ``quantize``)."""
    if fmt.integer:
        raise AccuracyError(f"accuracy: no cast of float inputs into {fmt.name}")
    return casts.cast(fmt, np.asarray(x, dtype=np.float32), saturate=True, what="input")


def operands(model, dist, seed: int, M: int, K: int, N: int, scheme=None):
    """``(A, B)`` of one study: words of the instruction's formats, or quantized tensors."""
    rng = np.random.default_rng([seed, K])
    a, b = draw(dist, rng, (M, K)), draw(dist, rng, (K, N))
    if scheme is None:
        if model.scale_format is not None:
            raise AccuracyError(f"accuracy: {model.instruction} is block-scaled; give a scheme that computes its "
                                "scales (--scheme)")
        return cast(a, model.a_format), cast(b, model.b_format)
    return quantize(a, scheme, axis=-1), quantize(b, scheme, axis=0)


__all__ = ["DISTRIBUTIONS", "draw", "cast", "operands"]
