"""Warp-level execution: a model's operands as the lanes hold them.

The layouts come from :mod:`mmasim.placement.bind` (``layout(model, operand)``).  ``warp`` unpacks
A, B and C from registers, computes with the model's matrix form (so it equals the
matrix form by construction) and packs D.  For ``wgmma.mma_async`` B (and A when
its descriptor is given) is read from a shared-memory image through its matrix descriptor
(:func:`mmasim.placement.smem.read_operand`, the canonical layouts of
:class:`mmasim.placement.SmemLayout`).  Every ``tcgen05.mma`` model goes to
:mod:`mmasim.placement.tcgen05_warp`.
"""

from __future__ import annotations

import inspect

import numpy as np

from mmasim.errors import OperandError, TableError
from mmasim.placement.bind import _options, layout, scale_operands, sparse_operand
from mmasim.placement.expr import SELECTORS
from mmasim.placement.fragment import MATRICES
from mmasim.placement.smem_packed import read_model_operand
from mmasim.placement.tcgen05_warp import warp as _tcgen05_warp     # every tcgen05.mma form


def _wgmma_operands(model, a, b, a_descriptor, b_descriptor, a_major, b_major, la, M, N):
    """A and B of ``wgmma.mma_async``: B (and A when ``a_descriptor`` is given) read from
    shared-memory images through their descriptors (:func:`mmasim.placement.smem.read_operand`),
    A otherwise unpacked from the warpgroup's registers with ``la``."""
    dp = model.datapath
    for name, major, fmt in (("a_major", a_major, model.a_format), ("b_major", b_major, model.b_format)):
        if major not in ("K", "MN"):
            raise OperandError(f"{name} must be 'K' or 'MN'; got {major!r}")
        if major == "MN" and fmt.name not in ("f16", "bf16"):
            raise OperandError(f"{model.instruction}: {name}='MN' (the transpose) exists only for .f16 / .bf16 "
                               f"operands, not .{fmt.name}")
    if b_descriptor is None:
        raise OperandError(f"{model.instruction}: B is a shared-memory image; pass b_descriptor (its 64-bit "
                           "matrix descriptor, start address relative to the image)")
    B = read_model_operand(model, "b", b, b_descriptor, N, dp.k, b_major, "wgmma").T
    if a_descriptor is None:
        if a_major != "K":
            raise OperandError(f"{model.instruction}: a_major applies to A in shared memory (pass a_descriptor)")
        return la.unpack(a), B
    ka = dp.stored_k if dp.sparse else dp.k
    return read_model_operand(model, "a", a, a_descriptor, M, ka, a_major, "wgmma"), B


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
    dp = model.datapath
    if dp.op == "tcgen05.mma":      # shared-memory / Tensor Memory images: mmasim.placement.tcgen05_warp
        return _tcgen05_warp(model, a_regs, b_regs, c_regs, sparse_metadata=sparse_metadata, backend=backend,
                             sparsity_selector=sparsity_selector, a_descriptor=a_descriptor,
                             b_descriptor=b_descriptor, a_major=a_major, b_major=b_major, scale_a=scale_a,
                             scale_b=scale_b, byte_id_a=byte_id_a, byte_id_b=byte_id_b, thread_id_a=thread_id_a,
                             thread_id_b=thread_id_b, lane_alignment=lane_alignment, **options)
    if lane_alignment:
        layout(model, "d", lane_alignment=lane_alignment, **options)    # OperandError: no such selector
    if dp.op == "wgmma.mma_async":
        la, lc, ld = (layout(model, o, **options) for o in ("a", "c", "d"))
        A, B = _wgmma_operands(model, a_regs, b_regs, a_descriptor, b_descriptor, a_major, b_major, la,
                              la.rows, ld.cols)
        lb = la
    else:
        if a_descriptor is not None or b_descriptor is not None or (a_major, b_major) != ("K", "K"):
            raise OperandError(f"{model.instruction}: its operands are registers; a_descriptor, b_descriptor, "
                               "a_major and b_major are for wgmma / tcgen05 shared-memory operands")
        la, lb, lc, ld = (layout(model, o, **options) for o in MATRICES)
        A, B = la.unpack(a_regs), lb.unpack(b_regs)
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
