"""NVIDIA Hopper (H100, H200, GH200, sm_90/sm_90a): mma.sync and wgmma.mma_async.

Arithmetic comes entirely from core parts composed by ``archs/hopper.toml``.
"""

from mmasim.tables import table_hook

mmasim_architectures = table_hook("hopper.toml")
