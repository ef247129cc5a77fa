"""torch layers and models through bit-exact GEMMs (docs/torch.md).

- :class:`Emulation`, :func:`preset`, :func:`presets`: the instruction and settings of the
  GEMMs of a layer (forward, input and weight gradient); :class:`Presets`, the table of presets
  (``mmasim presets``); a bad setting raises :class:`EmulationError`, an unknown preset
  :class:`UnknownPreset`;
- :class:`DelayedScalings`: the per-role state of ``scaling="delayed"`` (``update()`` after each step);
- :func:`matmul`: one emulated GEMM on float numpy matrices;
- :func:`linear`: ``torch.nn.functional.linear`` with autograd, every GEMM emulated;
- :func:`emulate`: a context manager in which every op that multiplies matrices (linear, matmul,
  einsum, convolutions, attention) runs through emulated GEMMs, forward and backward; it yields
  a :class:`Trace` of every GEMM, and reports (:class:`NotEmulatedWarning`, :class:`NotEmulated`)
  an op it cannot emulate;
- :func:`evaluate`: a model in torch's arithmetic and under each emulation on one batch: each
  module's output error, the logits' KL divergence, top-1 flips and perplexity (:class:`Evaluation`:
  a table, a plot, JSON).

A tool: may import the core packages and the public API ``mmasim``; torch is imported
only when a function that needs it runs.
"""

from mmasim.errors import EmulationError, NotEmulated, NotEmulatedWarning, UnknownPreset
from mmasim.torch.emulation import DelayedScalings, Emulation, Presets, preset, presets
from mmasim.torch.evaluate import Evaluation, evaluate
from mmasim.torch.linear import linear
from mmasim.torch.matmul import matmul
from mmasim.torch.mode import emulate
from mmasim.torch.trace import Call, Trace

__all__ = ["Emulation", "DelayedScalings", "Presets", "preset", "presets", "matmul", "linear", "emulate", "Trace", "Call", "evaluate",
           "Evaluation",
           "EmulationError", "UnknownPreset", "NotEmulated", "NotEmulatedWarning"]
