"""AMD ``v_mfma`` with MMA-Sim 2.1.1's class and call conventions (docs/mma-sim.md); imported by
MMA-Sim's users as ``mmasim.amd.sim`` (an alias, :mod:`mmasim.mma_sim_compat.paths`).

>>> from mmasim.amd.sim import MFMA
>>> MFMA("CDNA3", "f32_16x16x16_f16").k
16
"""

from __future__ import annotations

from mmasim.mma_sim_compat.dropin import MMAOperation


class MFMA(MMAOperation):
    """``v_mfma_<suffix>``: ``MFMA("CDNA3", "f32_16x16x16_f16")(A, B, C)``."""

    prefix = "v_mfma_"

    def __init__(self, arch: str, suffix: str):
        super().__init__(arch, suffix)
        self.suffix = suffix


__all__ = ["MFMA"]
