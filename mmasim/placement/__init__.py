"""Where operands live: register fragments, TMEM, shared memory, descriptors.

* :class:`FragmentRule` / :class:`Fragment`: which lane holds which element of A, B,
  C, D, packed into 32-bit registers (mma.sync, wgmma, AMD v_mfma), or which TMEM
  lane / column (tcgen05), as formulas; :func:`load_layouts` reads them from a layout
  table (TOML).  The core ships none: the built-in ones (formulas from the PTX ISA and
  AMD's documentation) are the tables ``archs/layouts/*.toml``, registered through the
  ``mmasim_layouts`` hook by the table plugin ``mmasim_plugins.archs``, as a plugin's are.
* :func:`tcgen05_ld`: the ``tcgen05.ld`` shapes (32x32b, 16x64b, 16x128b, 16x256b);
  :func:`tmem_datapath`: the TMEM data path layouts A .. G (cta_group::2 and .ws included).
* :class:`SmemLayout`: canonical K-major / MN-major shared-memory layouts, no
  swizzle or 32 / 64 / 128-byte swizzles; :func:`encode_descriptor` /
  :func:`decode_descriptor` for the 64-bit matrix descriptors; :func:`read_operand` reads
  an operand out of a shared-memory image through its descriptor.
* :func:`a_tmem_layout`: A of a ``tcgen05.mma`` in Tensor Memory (``[a-tmem]``); the tcgen05
  ``.sp`` / ``cta_group::2`` / A-in-TMEM forms of :func:`warp` are in :mod:`.tcgen05_warp`.
* :class:`ResultSlice`: the T1 TMEM result slices.
* :func:`compress` / :func:`expand`: the compressed A of a sparse instruction and back;
  :func:`metadata_words`: 4-bit chunk selectors as the matrix form's metadata words.

(The package is not called ``mmasim.layouts``: that name is the function
:func:`mmasim.layouts` listing the registered layouts.)
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
