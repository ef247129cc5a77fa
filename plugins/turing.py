"""NVIDIA Turing (T4, RTX 2060, sm_75): mma.sync m16n8k8, and Volta's m8n8k4 (T2 correction).

Arithmetic comes entirely from core parts composed by ``archs/turing.toml``.
"""

from mmasim.tables import table_hook

mmasim_architectures = table_hook("turing.toml")
