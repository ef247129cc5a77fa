"""The built-in register / TMEM layouts: formulas from the PTX ISA and AMD's documentation.

Every entry is data (:class:`~mmasim.placement.fragment.FragmentRule`): formulas in
``g = lane >> 2`` (PTX's groupID), ``t = lane % 4`` (threadID_in_group),
``w = lane >> 5`` (warp of a warpgroup), ``lane`` and the element index ``i``.
They are registered through the ``mmasim_layouts`` hook (``mmasim.builtins``), like a
plugin's; an architecture plugin adds or overrides (``arch=``) its own the same way.
"""

from __future__ import annotations

from .catalog_amd import MFMA, SMFMAC
from .catalog_nvidia import BLOCK_SCALE, MMA_SYNC, TCGEN05, WGMMA
from .catalog_sparse import SPARSE, WGMMA_SP
from .catalog_tmem_scales import TMEM_SCALES

BUILTIN_FRAGMENTS = MMA_SYNC + BLOCK_SCALE + SPARSE + SMFMAC + WGMMA + WGMMA_SP + TCGEN05 + TMEM_SCALES + MFMA

__all__ = ["BUILTIN_FRAGMENTS", "MMA_SYNC", "BLOCK_SCALE", "SPARSE", "SMFMAC", "WGMMA", "WGMMA_SP", "TCGEN05", "TMEM_SCALES", "MFMA"]
