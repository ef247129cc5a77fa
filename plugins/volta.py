"""NVIDIA Volta (V100, sm_70): mma.sync m8n8k4.

Arithmetic comes entirely from core parts composed by ``archs/volta.toml``.
"""

from mmasim.tables import table_hook

mmasim_architectures = table_hook("volta.toml")
