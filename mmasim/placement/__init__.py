"""Where operands live: register and TMEM fragments (:class:`FragmentRule`, read from the
layout tables ``archs/layouts/*.toml`` by :func:`load_layouts`), shared-memory layouts
and descriptors, TMEM loads and result slices, sparse compression, and warp-level
execution of a model (:func:`warp`).  The core ships no layout rule: the tables do.

Imports ``mmasim.errors``, ``mmasim.arith`` and ``mmasim.operands``, no registry module:
a family's rules (its ``.row`` / ``.col`` pairs, operand storage, warp execution) come from
the model's record, ``Model.family``.
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
from mmasim.placement.tcgen05_warp import a_tmem_layout
from mmasim.placement.bind import compress, expand, fragments, layout, metadata_words, unfragment
from mmasim.placement.warp import warp

__all__ = [
    "Layout", "Fragment", "FragmentRule", "load_layouts", "ResultSlice", "SmemLayout", "CoreMatrixLayout", "Descriptor",
    "encode_descriptor", "decode_descriptor", "read_operand", "swizzle", "tcgen05_ld", "TCGEN05_LD_SHAPES",
    "tmem_datapath", "TMEM_DATAPATHS",
    "layout", "fragments", "unfragment", "warp", "compress", "expand", "metadata_words", "a_tmem_layout",
]
