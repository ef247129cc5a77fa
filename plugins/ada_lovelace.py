"""NVIDIA Ada Lovelace (L4, L40S, RTX 4090, sm_89): mma.sync incl. fp8.

Arithmetic comes entirely from core parts composed by ``archs/ada_lovelace.toml``.
"""

from mmasim.tables import table_hook

mmasim_architectures = table_hook("ada_lovelace.toml")
