"""NVIDIA Blackwell datacenter (B200, sm_100): mma.sync, a table that extends the "Blackwell" architecture.

Arithmetic comes entirely from core parts composed by ``archs/blackwell_mma_sync.toml``.
"""

from mmasim.tables import table_hook

mmasim_architectures = table_hook("blackwell_mma_sync.toml")
