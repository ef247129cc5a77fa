"""NVIDIA instructions with MMA-Sim 2.1.1's classes and call conventions (docs/mma-sim.md);
imported by MMA-Sim's users as ``mmasim.nv_ptx.sim`` (an alias, :mod:`mmasim.mma_sim_compat.paths`).

>>> from mmasim.nv_ptx.sim import MMA
>>> MMA("Ampere", "m16n8k16.f32.f16.f16.f32").k
16
"""

from __future__ import annotations

from mmasim.mma_sim_compat.dropin import MMABlockScaleOperation, MMAOperation


class MMA(MMAOperation):
    """``mma.sync``: ``MMA("Ampere", "m16n8k16.f32.f16.f16.f32")(A, B, C)``."""

    prefix = "mma.sync."


class MMABlockScale(MMABlockScaleOperation):
    """Block-scaled ``mma.sync``:
    ``MMABlockScale("RTX Blackwell", "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3")``."""

    prefix = "mma.sync."


class WGMMA(MMAOperation):
    """``wgmma.mma_async``: ``WGMMA("Hopper", "m64n8k16.f32.f16.f16")``."""

    prefix = "wgmma.mma_async."


class TCGen05MMA(MMAOperation):
    """``tcgen05.mma``: ``TCGen05MMA("Blackwell", "m64n8k16.kind::f16.f32.f16.f16")``."""

    prefix = "tcgen05.mma."


class TCGen05MMABlockScale(MMABlockScaleOperation):
    """Block-scaled ``tcgen05.mma``:
    ``TCGen05MMABlockScale("Blackwell", "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3")``.
    mmasim computes these with the B200 rules measured on hardware, not MMA-Sim's
    (docs/mma-sim.md)."""

    prefix = "tcgen05.mma."


__all__ = ["MMA", "MMABlockScale", "WGMMA", "TCGen05MMA", "TCGen05MMABlockScale"]
