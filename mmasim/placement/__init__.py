"""Where operands live: register and TMEM fragments (:class:`FragmentRule`, read from the
layout tables ``archs/layouts/*.toml`` by :func:`load_layouts`), shared-memory layouts
and descriptors, TMEM loads and result slices, sparse compression, and an instruction's
operands bound to them (:class:`Placement`, what ``Model.placement`` gives).  The core ships
no layout rule: the tables do.  Nothing here computes or takes a model: warp-level execution
is ``Model.warp`` (:mod:`mmasim.execution.registers`, :mod:`mmasim.warp`).

Imports ``mmasim.errors``, ``mmasim.arith`` and ``mmasim.operands``, no registry module:
a family's rules (its ``.row`` / ``.col`` pairs, operand storage) come from its record,
``Placement.family``.
"""

from mmasim.placement.base import Layout
from mmasim.placement.fragment import Fragment, FragmentRule
from mmasim.placement.loader import load_layouts
from mmasim.placement.slices import ResultSlice
from mmasim.placement.smem import (
    CoreMatrixLayout,
    Descriptor,
    SmemLayout,
    decode_descriptor,
    encode_descriptor,
    read_operand,
    swizzle,
)
from mmasim.placement.tmem import TCGEN05_LD_SHAPES, TMEM_DATAPATHS, tcgen05_ld, tmem_datapath
from mmasim.placement.bind import (
    Placement,
    a_tmem_layout,
    compress,
    expand,
    fragments,
    layout,
    metadata_words,
    unfragment,
)

__all__ = [
    "Layout", "Fragment", "FragmentRule", "load_layouts", "ResultSlice", "SmemLayout", "CoreMatrixLayout", "Descriptor",
    "encode_descriptor", "decode_descriptor", "read_operand", "swizzle", "tcgen05_ld", "TCGEN05_LD_SHAPES",
    "tmem_datapath", "TMEM_DATAPATHS",
    "Placement", "layout", "fragments", "unfragment", "compress", "expand", "metadata_words", "a_tmem_layout",
]
