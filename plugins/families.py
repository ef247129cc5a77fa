"""The built-in instruction families: NVIDIA ``mma.sync`` (``mma.sp`` included),
``wgmma.mma_async``, ``tcgen05.mma`` and AMD ``v_mfma`` / ``v_smfmac``, as records
(:class:`mmasim.registry.family.Family`) registered through ``mmasim_families``.

Each record names the family's rules: its PTX / AMD syntax, where its operands live, the
function that runs it at warp level and its compile-target rule (an architecture's ``sm_NN`` /
``gfxNNN`` alias).  Their harness emitters and device classes are the harness's own table
(docs/plugins.md, "Harness emitters and devices").  A new family is one more record here (or
in a third-party plugin) plus the modules its fields name.
"""

from mmasim.registry.hookspecs import hookimpl
from mmasim.placement.smem_packed import smem_packing
from mmasim.registry.family import AliasTarget, Family, Syntax
from mmasim.warp.tensor_memory import tcgen05_mma
from mmasim.warp.warpgroup import wgmma_mma_async

#: NVIDIA kernels: the architecture's ``sm_NNa`` alias (the arch-specific target), else its ``sm_NN``
NVIDIA_TARGET = AliasTarget(r"sm_[0-9]+", preferred=r"sm_[0-9]+a")
#: AMD kernels: the architecture's ``gfxNNN`` alias
AMD_TARGET = AliasTarget(r"gfx[0-9a-f]+")

_PAIRS = (("row", "col"), ("row", "row"), ("col", "row"), ("col", "col"))


def mma_layouts(dp, formats) -> tuple:
    """The ``(.alayout, .blayout)`` pairs PTX allows an ``mma``: any of row/col only for the
    f16 m8n8k4 forms, ``.row.col`` for every other shape."""
    free = dp.m == (8,) and dp.n == (8,) and dp.k == 4 and formats[dp.a].name == "f16"
    return _PAIRS if free else _PAIRS[:1]


def mma_check(qualifiers: frozenset, types: tuple):
    """PTX's single-bit ``mma``: one bit operation, ``.and.popc`` or ``.xor.popc``."""
    ops = qualifiers & {"and", "xor"}
    if len(ops) > 1:
        return ".and and .xor both set the bit operation"
    if bool(ops) != ("popc" in qualifiers):
        return "PTX spells the single-bit operation .xor.popc or .and.popc"
    if "b1" in types and "popc" not in qualifiers:
        return "single-bit mma needs its bit operation: PTX spells it .xor.popc or .and.popc"
    return None


def tcgen05_check(qualifiers: frozenset, types: tuple):
    """PTX defines the weight-stationary ``tcgen05.mma.ws`` for ``cta_group::1`` only."""
    if "ws" in qualifiers and "cta_group::2" in qualifiers:
        return "PTX defines tcgen05.mma.ws for cta_group::1 only"
    return None


#: tcgen05.mma's collector usage hints for A (PTX ISA, tcgen05.mma): they say whether A is kept
#: in or read from the collector buffer, not how it is multiplied
_COLLECTOR = {f"collector::a::{x}": "collector" for x in ("discard", "fill", "use", "lastuse")}
_SCALE_INPUT_D = ("tcgen05.mma's scale-input-d (D = A*B + D * 2^-scale-input-d) is not modelled: how the "
                  "scaled D enters the window was not measured (docs/datapaths.md §6)")

_TMEM = ("tmem",)
FAMILIES = (
    Family("mma.sync", Syntax(lead=("mma",), fixed=("sync", "aligned"), layouts=mma_layouts,
                              layout_note="any .row/.col pair only for the f16 m8n8k4", kind_optional=True,
                              c_type=True, naming=("and", "xor", "popc"), check=mma_check,
                              prefixes=("mma.sync.aligned.",)), target=NVIDIA_TARGET),
    Family("wgmma.mma_async", Syntax(lead=("wgmma", "mma_async"), fixed=("sync", "aligned")),
           storage={"a": ("registers", "smem"), "b": ("smem",)}, descriptor="wgmma", warp=wgmma_mma_async,
           target=NVIDIA_TARGET),
    Family("tcgen05.mma", Syntax(lead=("tcgen05", "mma"), naming=("ws",), hints=_COLLECTOR, cta_group=True,
                                 refused={"scale_input_d": _SCALE_INPUT_D, "scale-input-d": _SCALE_INPUT_D},
                                 check=tcgen05_check),
           storage={"a": ("smem", "tmem"), "b": ("smem",), "c": _TMEM, "d": _TMEM, "scale_a": _TMEM,
                    "scale_b": _TMEM, "sparse_metadata": _TMEM},
           descriptor="tcgen05", smem_packing=smem_packing, warp=tcgen05_mma, target=NVIDIA_TARGET),
    Family("v_mfma", Syntax(lead=("v_mfma",), kind_optional=True, prefixes=("v_mfma_", "v_mfma.")),
           target=AMD_TARGET),
    Family("v_smfmac", Syntax(lead=("v_smfmac",)), target=AMD_TARGET),
)


@hookimpl
def mmasim_families():
    return FAMILIES
