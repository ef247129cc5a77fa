"""Warp-level execution: a model's operands as the lanes hold them.

``layout(model, operand)`` finds the registered :class:`FragmentRule` for the
model's instruction (the most specific one: an architecture's own beats a generic
one) and binds it to the instruction's shape and element size.  ``warp`` unpacks
A, B and C from registers, computes with the model's matrix form (so it equals the
matrix form by construction) and packs D.
"""

from __future__ import annotations

import numpy as np

from ..errors import OperandError, ShapeError, TableError, UnsupportedDatapath
from .fragment import OPERANDS, FragmentRule

_MAJOR = ("row", "col")

_NOT_IN_REGISTERS = {
    ("wgmma.mma_async", "b"): "B of wgmma.mma_async is read from shared memory through a matrix descriptor "
                              "(see mmasim.placement.SmemLayout)",
    ("tcgen05.mma", "a"): "A of tcgen05.mma is read from shared memory (or TMEM) through a descriptor "
                          "(see mmasim.placement.SmemLayout)",
    ("tcgen05.mma", "b"): "B of tcgen05.mma is read from shared memory through a matrix descriptor "
                          "(see mmasim.placement.SmemLayout)",
}


def _shape(model, operand):
    if model.shape is not None:
        return model.shape
    ms, ns = model.legal_m, model.legal_n
    if len(ms) == 1 and len(ns) == 1:
        return ms[0], ns[0]
    if operand == "a" and len(ms) == 1:     # A (M x K) does not depend on N
        return ms[0], ns[0] if ns else 8
    raise ShapeError(f"{model.instruction}: the layout depends on the shape; name it in the instruction "
                     f"(e.g. m{ms[0] if ms else 64}n{ns[0] if ns else 8}k{model.k})")


def layout(model, operand: str, alayout: str = "row", blayout: str = "col"):
    """The :class:`~mmasim.placement.fragment.Fragment` of ``operand`` of ``model``."""
    if operand not in OPERANDS:
        raise OperandError(f"operand must be one of {', '.join(OPERANDS)}; got {operand!r}")
    for name, v in (("alayout", alayout), ("blayout", blayout)):
        if v not in _MAJOR:
            raise OperandError(f"{name} must be 'row' or 'col'; got {v!r}")
    dp = model.datapath
    if (dp.op, operand) in _NOT_IN_REGISTERS:
        raise UnsupportedDatapath(f"{model.instruction}: {_NOT_IN_REGISTERS[dp.op, operand]}")
    if dp.op == "tcgen05.mma" and dp.qualifiers:
        # the cta_group::1 TMEM rules would bind silently and wrongly (issue 12)
        raise UnsupportedDatapath(
            f"{model.instruction}: the per-CTA TMEM layouts of tcgen05.mma.{'.'.join(dp.qualifiers)} "
            "(PTX data path layouts A, B, C, E, G: mmasim.placement.tmem_datapath) are not bound to "
            "Model.layout yet")
    M, N = _shape(model, operand)
    fmt = model.format_of(operand)
    bits = fmt.container_bits
    key = dict(op=dp.op, m=M, n=N, k=dp.k, operand=operand, bits=bits, arch=model.arch, kind=dp.kind,
               a_type=dp.a, a_bits=model.a_format.container_bits, alayout=alayout, blayout=blayout)
    rules = [r for r in model._reg.layouts.values() if isinstance(r, FragmentRule) and r.matches(**key)]
    if not rules:
        raise UnsupportedDatapath(
            f"{model.arch}: {model.instruction}: no register layout of operand {operand.upper()} "
            f"({fmt.name}, {bits}-bit) is registered for m{M}n{N}k{dp.k}"
            + ("" if (alayout, blayout) == ("row", "col") else f" with .{alayout}.{blayout}"))

    def rank(r):
        return (bool(r.arch), bool(r.types), r.kind is not None, r.m is not None, r.n is not None, r.k is not None)

    best = max(rank(r) for r in rules)
    top = [r for r in rules if rank(r) == best]
    if len(top) > 1:
        raise TableError(f"{model.instruction}: operand {operand.upper()} matches several layouts equally: "
                         + ", ".join(r.name for r in top))
    return top[0].bind(operand, M, N, dp.k, bits)


def fragments(model, operand: str, X, **options) -> np.ndarray:
    """``uint32 (lanes, registers)``: the matrix ``X`` (container words or values in
    the operand's format) packed as the hardware holds it."""
    lay = layout(model, operand, **options)
    words = model.operand_words(operand, X)
    return lay.pack(words)


def unfragment(model, operand: str, registers, **options) -> np.ndarray:
    """The ``operand`` matrix (container words) held in ``registers`` ``(lanes, registers)``."""
    return layout(model, operand, **options).unpack(registers)


def warp(model, a_regs, b_regs, c_regs, scale_a=None, scale_b=None, sparse_metadata=None, backend=None,
         **options) -> np.ndarray:
    """D registers ``uint32 (lanes, registers)`` of the instruction on register operands.

    A, B and C are unpacked, computed with the model's matrix form (``model(A, B, C)``,
    per block where the lanes hold several independent matrices) and D is packed.
    Scale factors and sparse metadata are taken in the matrix form's shapes.
    """
    la, lb, lc, ld = (layout(model, o, **options) for o in OPERANDS)
    A, B, C = la.unpack(a_regs), lb.unpack(b_regs), lc.unpack(c_regs)
    blocks = ld.blocks
    if not la.blocks == lb.blocks == lc.blocks == blocks:
        raise TableError(f"{model.instruction}: the layouts of A, B, C, D disagree on the number of blocks "
                         f"({la.blocks}, {lb.blocks}, {lc.blocks}, {blocks})")
    if blocks == 1:
        D = model(A, B, C, scale_a=scale_a, scale_b=scale_b, sparse_metadata=sparse_metadata, backend=backend)
    else:
        if scale_a is not None or scale_b is not None or sparse_metadata is not None:
            raise OperandError(f"{model.instruction}: scales and sparse metadata of multi-block layouts "
                               "are not modelled")
        M, K = la.rows // blocks, la.cols
        D = np.concatenate([model(A[b * M:(b + 1) * M], B[b * K:(b + 1) * K], C[b * M:(b + 1) * M],
                                  backend=backend) for b in range(blocks)])
    return ld.pack(D)
