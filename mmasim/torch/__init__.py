"""torch layers and models through bit-exact GEMMs (docs/torch.md).

- :class:`Emulation`, :func:`preset`, :func:`presets`: the instruction and settings of the
  GEMMs of a layer (forward, input and weight gradient); :class:`Presets`, the table of presets
  (``mmasim presets``); a bad setting raises :class:`EmulationError`, an unknown preset
  :class:`UnknownPreset`;
- :func:`matmul`: one emulated GEMM on float numpy matrices;
- :func:`linear`: ``torch.nn.functional.linear`` with autograd, every GEMM emulated;
- :func:`emulate`: a context manager routing every ``nn.Linear`` of a model through it.

A tool: may import the core packages and the public API ``mmasim``; torch is imported
only when a function that needs it runs.
"""

from mmasim.errors import EmulationError, UnknownPreset
from mmasim.torch.emulation import Emulation, Presets, preset, presets
from mmasim.torch.linear import emulate, linear
from mmasim.torch.matmul import matmul

__all__ = ["Emulation", "Presets", "preset", "presets", "matmul", "linear", "emulate", "EmulationError",
           "UnknownPreset"]
