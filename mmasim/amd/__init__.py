"""MMA-Sim 2.1.1's ``mmasim.amd`` names over mmasim models (the drop-in, docs/mma-sim.md)."""

from mmasim.amd.sim import MFMA

__all__ = ["MFMA"]
