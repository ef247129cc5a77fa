"""NVIDIA Ampere (A100 sm_80, A10 / RTX 3090 sm_86): mma.sync, and the FMUL/FADD m8n8k4 of T2.

Arithmetic comes entirely from core parts composed by ``archs/ampere.toml``.
"""

from mmasim.tables import table_hook

mmasim_architectures = table_hook("ampere.toml")
