"""NVIDIA RTX Blackwell (RTX 5070 Ti, RTX 5090, RTX PRO 6000; sm_120/sm_120a): mma.sync.

Arithmetic comes from core parts composed by ``archs/rtx_blackwell.toml``
(registered with every other table by ``mmasim_plugins.archs``).  What differs here is a decoder quirk (docs/datapaths.md section 7, T2): in
``kind::f8f6f4`` the hardware reads an e2m1 byte as e2m3 from bits 5:0, so the
two low padding bits act as two more mantissa bits and bits 7:6 are ignored.
"""

from mmasim.registry.hookspecs import hookimpl
from mmasim.arith.formats import Format

#: e2m1 as the RTX Blackwell f8f6f4 datapath reads its byte: e2m3 in bits 5:0.
E2M1_SM120 = Format(
    key="e2m1.sm120", name="e2m1", container_bits=8, field_bits=6, exp_bits=2, man_bits=3,
    bias=1, nan="none", typed="float4_e2m1fn", typed_shift=2,
    note="RTX Blackwell kind::f8f6f4 container: read as e2m3 from bits 5:0, so bits 1:0 "
         "are two more mantissa bits and bits 7:6 are ignored (T2, RTX 5070 Ti)",
)


@hookimpl
def mmasim_formats():
    return [E2M1_SM120]

