"""MMA-Sim 2.1.1's ``mmasim.nv_ptx`` names over mmasim models (the drop-in, docs/mma-sim.md).

Kept at this path because MMA-Sim's users import it here; imports only ``mmasim.interop``.
"""

from mmasim.nv_ptx.sim import MMA, WGMMA, MMABlockScale, TCGen05MMA, TCGen05MMABlockScale

__all__ = ["MMA", "MMABlockScale", "WGMMA", "TCGen05MMA", "TCGen05MMABlockScale"]
