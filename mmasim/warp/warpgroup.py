"""``Model.warp`` for ``wgmma.mma_async``: B (and A when its descriptor is given) read from a
shared-memory image through its matrix descriptor (:func:`mmasim.placement.smem.read_operand`,
the canonical layouts of :class:`mmasim.placement.SmemLayout`), A otherwise from the
warpgroup's registers; C and D are the accumulator registers.
"""

from __future__ import annotations

import numpy as np

from mmasim.errors import OperandError
from mmasim.execution.registers import check_lane_alignment, matrix_form
from mmasim.placement.bind import layout
from mmasim.placement.smem_packed import read_smem_operand


def operands(model, a, b, a_descriptor, b_descriptor, a_major, b_major, la, M, N):
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
    B = read_smem_operand(model.placement, "b", b, b_descriptor, N, dp.k, b_major).T
    if a_descriptor is None:
        if a_major != "K":
            raise OperandError(f"{model.instruction}: a_major applies to A in shared memory (pass a_descriptor)")
        return la.unpack(a), B
    ka = dp.stored_k if dp.sparse else dp.k
    return read_smem_operand(model.placement, "a", a, a_descriptor, M, ka, a_major), B


def wgmma_mma_async(model, a_regs, b_regs, c_regs, *, scale_a=None, scale_b=None, sparse_metadata=None,
                    backend=None, byte_id_a=0, thread_id_a=0, byte_id_b=0, thread_id_b=0, sparsity_selector=0,
                    a_descriptor=None, b_descriptor=None, a_major="K", b_major="K", lane_alignment=0,
                    **options) -> np.ndarray:
    """D registers of ``wgmma.mma_async`` (:meth:`mmasim.Model.warp` says what each operand is)."""
    check_lane_alignment(model, lane_alignment, options)
    la, lc, ld = (layout(model.placement, o, **options) for o in ("a", "c", "d"))
    A, B = operands(model, a_regs, b_regs, a_descriptor, b_descriptor, a_major, b_major, la, la.rows, ld.cols)
    return matrix_form(model, (la, la, lc, ld), A, B, c_regs, backend=backend, scale_a=scale_a, scale_b=scale_b,
                       sparse_metadata=sparse_metadata, byte_id_a=byte_id_a, thread_id_a=thread_id_a,
                       byte_id_b=byte_id_b, thread_id_b=thread_id_b, sparsity_selector=sparsity_selector,
                       lane_alignment=lane_alignment)


__all__ = ["operands", "wgmma_mma_async"]
