"""NVIDIA Blackwell datacenter (B200, sm_100a): the ``tcgen05`` TMEM and shared-memory layouts.

Arithmetic comes entirely from core parts composed by ``archs/blackwell_tcgen05.toml``
(registered with every other table by ``mmasim_plugins.archs``); this plugin adds
the TMEM / shared-memory layout facts of the B200 write-up (docs/datapaths.md
section 6, source T1).
"""

from mmasim.registry.hookspecs import hookimpl
from mmasim.placement import CoreMatrixLayout, ResultSlice

_T1 = "T1: B200 tcgen05 reverse-engineering write-up (docs/datapaths.md, sources), probed on a real B200"


@hookimpl
def mmasim_layouts():
    return [
        ResultSlice(
            name="tcgen05.tmem.result.tf32",
            arch="Blackwell",
            description="kind::tf32 results in the TMEM load: threads 0-31 x registers 0-3 (128 words)",
            pairs=[(t, r) for t in range(32) for r in range(4)],
            evidence=_T1,
        ),
        ResultSlice(
            name="tcgen05.tmem.result.bf16",
            arch="Blackwell",
            description="kind::f16 (bf16) results: threads 0-15 x registers 0-3, then threads 16-31 x registers 0-1 (96 words)",
            pairs=[(t, r) for t in range(16) for r in range(4)] + [(t, r) for t in range(16, 32) for r in range(2)],
            evidence=_T1,
        ),
        CoreMatrixLayout(
            name="tcgen05.smem.operand.bf16",
            arch="Blackwell",
            description="bf16 A/B operands in shared memory: offset(i, k) = (i & 7)*8 + (i >> 3)*32 + (k & 7) + (k >> 3)*64 elements",
            T=8, SBO=32, LBO=64,
            evidence=_T1 + "; every isolated A and B lane contributes exactly 1.0 only with this layout",
        ),
    ]
