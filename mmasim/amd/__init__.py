"""MMA-Sim 2.1.1's ``mmasim.amd`` names over mmasim models (the drop-in, docs/mma-sim.md).

Kept at this path because MMA-Sim's users import it here; imports only ``mmasim.interop``.
"""

from mmasim.amd.sim import MFMA

__all__ = ["MFMA"]
