"""Warp-level execution of register operands: what ``Model.warp`` runs where the instruction's
family names no function of its own (``Family.warp`` is ``None``: every operand in registers,
``mma.sync``, ``v_mfma``, an op no plugin gives a family).

:func:`registers` unpacks A, B and C from their registers with the instruction's layouts
(:mod:`mmasim.placement`), computes with the model's matrix form (so it equals the matrix form
by construction) and packs D; :func:`matrix_form` is that last part, shared with the families
whose A or B is read from a shared-memory image (:mod:`mmasim.warp`).
"""

from __future__ import annotations

import numpy as np

from mmasim.errors import OperandError, TableError
from mmasim.placement.bind import layout, scale_operands, sparse_operand
from mmasim.placement.fragment import MATRICES


def check_lane_alignment(model, lane_alignment, options) -> None:
    """``lane_alignment`` other than 0 only where D's layout takes it (else ``OperandError``)."""
    if lane_alignment:
        layout(model.placement, "d", lane_alignment=lane_alignment, **options)


def registers(model, a_regs, b_regs, c_regs, *, scale_a=None, scale_b=None, sparse_metadata=None, backend=None,
              byte_id_a=0, thread_id_a=0, byte_id_b=0, thread_id_b=0, sparsity_selector=0, a_descriptor=None,
              b_descriptor=None, a_major="K", b_major="K", lane_alignment=0, **options) -> np.ndarray:
    """``Model.warp`` of a family whose operands are all registers (``mma.sync``, ``v_mfma``)."""
    check_lane_alignment(model, lane_alignment, options)
    if a_descriptor is not None or b_descriptor is not None or (a_major, b_major) != ("K", "K"):
        smem = " / ".join(f.syntax.lead[0] for f in model.registry.families.values()
                          if any("smem" in spaces for spaces in f.storage.values()))
        raise OperandError(f"{model.instruction}: its operands are registers; a_descriptor, b_descriptor, "
                           f"a_major and b_major are for {smem} shared-memory operands")
    la, lb, lc, ld = (layout(model.placement, o, **options) for o in MATRICES)
    return matrix_form(model, (la, lb, lc, ld), la.unpack(a_regs), lb.unpack(b_regs), c_regs, backend=backend,
                       scale_a=scale_a, scale_b=scale_b, sparse_metadata=sparse_metadata, byte_id_a=byte_id_a,
                       thread_id_a=thread_id_a, byte_id_b=byte_id_b, thread_id_b=thread_id_b,
                       sparsity_selector=sparsity_selector, lane_alignment=lane_alignment)


def matrix_form(model, layouts, A, B, c_regs, *, backend, scale_a, scale_b, sparse_metadata, byte_id_a, thread_id_a,
                byte_id_b, thread_id_b, sparsity_selector, lane_alignment) -> np.ndarray:
    """D registers from the unpacked ``A`` / ``B`` and C's registers, the layouts ``(la, lb, lc, ld)``
    given: the scales and metadata read, the model's matrix form per block, D packed."""
    la, lb, lc, ld = layouts
    C = lc.unpack(c_regs)
    blocks = ld.blocks
    if not la.blocks == lb.blocks == lc.blocks == blocks:
        raise TableError(f"{model.instruction}: the layouts of A, B, C, D disagree on the number of blocks "
                         f"({la.blocks}, {lb.blocks}, {lc.blocks}, {blocks})")
    kw = scale_operands(model.placement, scale_a, scale_b, byte_id_a, byte_id_b, thread_id_a, thread_id_b)
    A, sp = sparse_operand(model.placement, A, sparse_metadata, sparsity_selector, lane_alignment=lane_alignment)
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


__all__ = ["registers", "matrix_form", "check_lane_alignment"]
