"""Warp-level execution: a model's operands as the lanes hold them.

``warp`` runs the function the instruction's family names (``Family.warp``:
:mod:`mmasim.placement.wgmma_warp`, :mod:`mmasim.placement.tcgen05_warp`), else
:func:`registers`.  The layouts come from :mod:`mmasim.placement.bind` (``layout(model, operand)``);
:func:`registers` unpacks A, B and C from registers, computes with the model's matrix form (so it
equals the matrix form by construction) and packs D (:func:`finish`).
"""

from __future__ import annotations

import inspect

import numpy as np

from mmasim.errors import OperandError, TableError
from mmasim.placement.bind import _options, layout, scale_operands, sparse_operand
from mmasim.placement.expr import SELECTORS
from mmasim.placement.fragment import MATRICES


def warp(model, a_regs, b_regs, c_regs, scale_a=None, scale_b=None, sparse_metadata=None, backend=None,
         byte_id_a=0, thread_id_a=0, byte_id_b=0, thread_id_b=0, sparsity_selector=0,
         a_descriptor=None, b_descriptor=None, a_major="K", b_major="K", lane_alignment=0,
         **options) -> np.ndarray:
    """D registers ``uint32 (lanes, registers)`` of the instruction on register operands.

    A, B and C are unpacked, computed with the model's matrix form (``model(A, B, C)``,
    per block where the lanes hold several independent matrices) and D is packed.
    ``scale_a`` / ``scale_b`` are the ``scale-a-data`` / ``scale-b-data`` registers
    ``(lanes, 1)`` of a block-scaled instruction, read with the ``{byte_id_a, thread_id_a}``
    / ``{byte_id_b, thread_id_b}`` selectors; ``sparse_metadata`` the metadata registers
    ``(lanes, 1)`` of a sparse one, read with ``sparsity_selector``; A of a sparse
    instruction holds the compressed A.

    ``wgmma.mma_async``: ``b_regs`` is B's shared-memory image (flat uint8 bytes or uint32
    words) and ``b_descriptor`` its 64-bit matrix descriptor (start address relative to the
    image, LBO, SBO, swizzle: :func:`mmasim.placement.decode_descriptor`); ``a_regs`` is A's
    registers over the 128-thread warpgroup, or, with ``a_descriptor``, A's shared-memory
    image.  ``a_major`` / ``b_major``: ``"K"`` (default) or ``"MN"`` (the instruction's
    transpose, .f16 / .bf16 only).  C and D are the accumulator registers.
    ``tcgen05.mma``, every form (shared-memory and Tensor Memory images, the CTA pair's,
    block scales, sparse metadata): :func:`mmasim.placement.tcgen05_warp.warp`, whose
    docstring gives the operands.  ``lane_alignment`` (0 or 16):
    where the half-data-path layouts C and F (tcgen05 M = 64, M = 128 ``cta_group::2`` sparse)
    start within each 32-lane sub-partition, the same for C / D, A in Tensor Memory and the
    metadata (PTX §9.7.16.10.5); an instruction without such a layout refuses 16 (``OperandError``).
    """
    options = _options(options, also=_WARP_KEYWORDS)
    if any(k in SELECTORS for k in options):
        raise OperandError("warp takes the selectors as byte_id_a, thread_id_a, byte_id_b, thread_id_b and "
                           "sparsity_selector")
    run = model.family.warp or registers
    return run(model, a_regs, b_regs, c_regs, scale_a=scale_a, scale_b=scale_b, sparse_metadata=sparse_metadata,
               backend=backend, byte_id_a=byte_id_a, thread_id_a=thread_id_a, byte_id_b=byte_id_b,
               thread_id_b=thread_id_b, sparsity_selector=sparsity_selector, a_descriptor=a_descriptor,
               b_descriptor=b_descriptor, a_major=a_major, b_major=b_major, lane_alignment=lane_alignment,
               **options)


def check_lane_alignment(model, lane_alignment, options) -> None:
    """``lane_alignment`` other than 0 only where D's layout takes it (else ``OperandError``)."""
    if lane_alignment:
        layout(model, "d", lane_alignment=lane_alignment, **options)


def registers(model, a_regs, b_regs, c_regs, *, scale_a=None, scale_b=None, sparse_metadata=None, backend=None,
              byte_id_a=0, thread_id_a=0, byte_id_b=0, thread_id_b=0, sparsity_selector=0, a_descriptor=None,
              b_descriptor=None, a_major="K", b_major="K", lane_alignment=0, **options) -> np.ndarray:
    """:func:`warp` of a family whose operands are all registers (``mma.sync``, ``v_mfma``)."""
    check_lane_alignment(model, lane_alignment, options)
    if a_descriptor is not None or b_descriptor is not None or (a_major, b_major) != ("K", "K"):
        smem = " / ".join(f.syntax.lead[0] for f in model.registry.families.values()
                          if any("smem" in spaces for spaces in f.storage.values()))
        raise OperandError(f"{model.instruction}: its operands are registers; a_descriptor, b_descriptor, "
                           f"a_major and b_major are for {smem} shared-memory operands")
    la, lb, lc, ld = (layout(model, o, **options) for o in MATRICES)
    return finish(model, (la, lb, lc, ld), la.unpack(a_regs), lb.unpack(b_regs), c_regs, backend=backend,
                  scale_a=scale_a, scale_b=scale_b, sparse_metadata=sparse_metadata, byte_id_a=byte_id_a,
                  thread_id_a=thread_id_a, byte_id_b=byte_id_b, thread_id_b=thread_id_b,
                  sparsity_selector=sparsity_selector, lane_alignment=lane_alignment)


def finish(model, layouts, A, B, c_regs, *, backend, scale_a, scale_b, sparse_metadata, byte_id_a, thread_id_a,
           byte_id_b, thread_id_b, sparsity_selector, lane_alignment) -> np.ndarray:
    """D registers from the unpacked ``A`` / ``B`` and C's registers, the layouts ``(la, lb, lc, ld)``
    given: the scales and metadata read, the matrix form per block, D packed."""
    la, lb, lc, ld = layouts
    C = lc.unpack(c_regs)
    blocks = ld.blocks
    if not la.blocks == lb.blocks == lc.blocks == blocks:
        raise TableError(f"{model.instruction}: the layouts of A, B, C, D disagree on the number of blocks "
                         f"({la.blocks}, {lb.blocks}, {lc.blocks}, {blocks})")
    kw = scale_operands(model, scale_a, scale_b, byte_id_a, byte_id_b, thread_id_a, thread_id_b)
    A, sp = sparse_operand(model, A, sparse_metadata, sparsity_selector, lane_alignment=lane_alignment)
    kw.update(sp)
    if blocks == 1:
        D = model(A, B, C, backend=backend, **kw)
    else:
        if kw:
            raise OperandError(f"{model.instruction}: scales and sparse metadata of multi-block layouts "
                               "are not modelled")
        M, K = la.rows // blocks, la.cols
        D = np.concatenate([model(A[b * M:(b + 1) * M], B[b * K:(b + 1) * K], C[b * M:(b + 1) * M],
                                  backend=backend) for b in range(blocks)])
    return ld.pack(D)


#: the keywords of :func:`warp` beyond the layout options (named when one is misspelt)
_WARP_KEYWORDS = tuple(name for name, p in list(inspect.signature(warp).parameters.items())[4:]
                       if p.kind is p.POSITIONAL_OR_KEYWORD and name not in SELECTORS)
