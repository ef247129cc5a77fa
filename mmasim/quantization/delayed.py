"""FP8 delayed scaling, the per-tensor recipe of NVIDIA Transformer Engine's ``DelayedScaling``
(``transformer_engine/common/recipe/__init__.py``): a tensor is cast with the scale computed from
the amax history of earlier steps, and its own amax joins that history.

Gives :class:`DelayedScaling`, one tensor's state: ``quantize`` (TE's per-tensor FP8 cast,
``transformer_engine/common/util/vectorized_pointwise.h``: ``fp8(RN(x * scale))`` saturating,
``scale_inv = RN(1 / scale)`` (``__frcp_rn``), the amax recorded into ``amax_history[0]``) and
``update`` (the fused kernel PyTorch runs after each step,
``transformer_engine/common/recipe/delayed_scaling.cu``, ``kernel_bulk`` of
``amax_and_scale_update_after_reduction``).  docs/quantize.md, "FP8 delayed scaling".
"""

from __future__ import annotations

import numpy as np

from mmasim.errors import QuantizeError
from mmasim.quantization import casts
from mmasim.quantization.quantize import Quantized, _binary32, _read
from mmasim.registry.build import get_registry

F32 = np.float32
#: TE's FP8 formats (``fp8_dtype_max``): HYBRID is e4m3 forward, e5m2 for gradients
FORMATS = ("e4m3", "e5m2")
AMAX_COMPUTE_ALGOS = ("max", "most_recent")


class DelayedScaling:
    """One tensor's delayed-scaling state: ``amax_history`` (float32, ``amax_history_len``
    entries, entry 0 the current step's), ``scale`` (float32, from the last :meth:`update`;
    ``scale`` at first, TE's 1).  ``format``: ``"e4m3"`` or ``"e5m2"``; ``margin``: an integer,
    the scale is ``fp8_max * 2**-margin / amax``; ``amax_compute_algo``: ``"max"`` (the
    largest amax in the history) or ``"most_recent"``."""

    def __init__(self, format: str = "e4m3", *, margin: int = 0, amax_history_len: int = 1024,
                 amax_compute_algo: str = "max", scale: float = 1.0):
        if format not in FORMATS:
            raise QuantizeError(f"delayed scaling casts to {' or '.join(FORMATS)}, not {format!r}")
        if isinstance(margin, (bool, np.bool_)) or not isinstance(margin, (int, np.integer)):
            raise QuantizeError(f"margin must be an integer (TE's DelayedScaling.margin), not {margin!r}")
        if isinstance(amax_history_len, (bool, np.bool_)) or not isinstance(amax_history_len, (int, np.integer)) \
                or amax_history_len < 1:
            raise QuantizeError(f"amax_history_len must be a positive integer, not {amax_history_len!r}")
        if amax_compute_algo not in AMAX_COMPUTE_ALGOS:
            raise QuantizeError(f"amax_compute_algo must be one of {', '.join(map(repr, AMAX_COMPUTE_ALGOS))}, "
                                f"not {amax_compute_algo!r}")
        self.format = get_registry().formats[format]
        self.margin = int(margin)
        self.amax_compute_algo = amax_compute_algo
        self.amax_history = np.zeros(int(amax_history_len), dtype=F32)
        self.scale = F32(scale)
        m, q = casts.largest(self.format)
        #: fp8_max * 2**-margin in binary32 (``scaled_max``)
        self.scaled_max = F32(F32(m * 2.0 ** q) * F32(2.0 ** -self.margin))

    def quantize(self, x):
        """``x`` (finite binary32 values) cast with the current scale: a
        :class:`~mmasim.Quantized` whose ``tensor_scale`` is ``RN(1 / scale)`` (the GEMM's alpha
        takes it); ``max |x|`` is recorded into ``amax_history[0]`` (the largest of the step's
        casts, as TE's ``atomicMaxFloat``)."""
        what = f"delayed scaling ({self.format.name})"
        v = _binary32(_read(x, what), what, "raise")
        amax = self.record(np.max(np.abs(v), initial=F32(0)))
        with np.errstate(over="ignore"):
            scaled = v * self.scale
        words = casts.cast(self.format, scaled, saturate=True, what=what)
        return Quantized(words, None, self.format.name, self.format.key, None, None, None, self.scale_inv,
                         "fp8_delayed", None, amax=amax)

    def record(self, amax) -> np.float32:
        """The step's amax so far: the largest of ``amax_history[0]`` and ``amax`` (a cast's
        ``max |x|``, binary32), as TE's ``atomicMaxFloat``; returns ``amax`` as float32.  The
        cast on a CUDA device (:mod:`mmasim.torch.on_device`) records the amax it reduced there."""
        amax = F32(amax)
        self.amax_history[0] = max(self.amax_history[0], amax)
        return amax

    @property
    def scale_inv(self) -> np.float32:
        """The decode scale of the current scale: ``RN(1 / scale)`` (``__frcp_rn``), the GEMM's alpha."""
        return F32(F32(1) / self.scale)

    def update(self) -> np.float32:
        """The step's end: the amax that sets the next scale, the history rolled, the scale.

        With ``last = amax_history[0]``: if ``last`` is 0 nothing changes (the fused kernel
        skips the roll and keeps the scale).  Otherwise ``amax`` is the largest entry of the
        history (``"max"``) or ``last`` (``"most_recent"``); the history rolls one place toward
        its start, ``last`` to the end and entry 0, cleared, for the next step (``torch.roll(h,
        -1)``, ``h[0] = 0``); ``scale = RN(scaled_max / amax)`` when amax is finite and positive
        (else the old scale), ``FLT_MAX`` where that overflows."""
        h = self.amax_history
        last = h[0]
        if last == 0:
            return self.scale
        amax = np.max(h) if self.amax_compute_algo == "max" else last
        self.amax_history = np.roll(h, -1)
        self.amax_history[0] = 0
        if np.isfinite(amax) and amax > 0:
            with np.errstate(over="ignore", divide="ignore"):
                scale = self.scaled_max / amax
            self.scale = np.finfo(F32).max if np.isinf(scale) else F32(scale)
        return self.scale

    def __repr__(self) -> str:
        return (f"DelayedScaling({self.format.name!r}, margin={self.margin}, amax_history_len="
                f"{len(self.amax_history)}, amax_compute_algo={self.amax_compute_algo!r}, scale={float(self.scale)!r})")


__all__ = ["DelayedScaling", "FORMATS", "AMAX_COMPUTE_ALGOS"]
