"""Harness kernels for NVIDIA's warp-level ``mma.sync`` and ``mma.sp`` (``mma.sp::ordered_metadata``),
in the protocol of :mod:`mmasim.harness.spec`: :func:`specs`, :func:`place`, :func:`read`.

One kernel per instruction: the 32 lanes of one block load their A, B, C registers (and the
sparse metadata, the scale-factor registers), execute the instruction as inline PTX spelled as
the PTX ISA spells it (:func:`assembly`) and store their D registers.  Register counts come
from :meth:`mmasim.Model.layout` where the layout is registered, else from the PTX text
(:func:`_registers`); placement goes through :meth:`mmasim.Model.fragments` /
:meth:`mmasim.Model.unfragment` only.  What each kernel holds: docs/harness.md.
"""
from __future__ import annotations

import re

import numpy as np

from mmasim.errors import MMAError, OperandError, ShapeError, UnsupportedDatapath
from mmasim.harness.host import build_line, source
from mmasim.harness import table
from mmasim.harness.spec import Buffer, KernelSpec, compile_target, layout_name

#: the emitter's software run of a kernel: none (the simulated device runs its registers through Model.warp)
simulate = None

#: the sparsity selector every sparse kernel uses (0 is legal for every mma.sp shape and type)
SPARSITY_SELECTOR = 0
#: the byte-id / thread-id selectors of the block-scale operands (0: byte 0 of the scale register
#: of the first thread of each quad, legal for every scale_vec)
SCALE_SELECTOR = (0, 0)


def handles(model) -> bool:
    """True for the instructions this module emits (the harness's table names it for ``mma.sync``)."""
    return table.emits(model, __name__)


def _ptx_type(name: str) -> str:
    """mmasim format name -> PTX type (``e2m1x`` / ``e2m1.sm120`` -> ``e2m1``)."""
    base = name.split(".")[0]
    return base[:-1] if base.endswith("x") and base != "x" else base


def _shape(model):
    M, N = model.shape if model.shape is not None else (model.legal_m[0], model.legal_n[0])
    return M, N, model.datapath.k


def assembly(model) -> str:
    """The PTX opcode with every qualifier (without operands), as the PTX ISA's syntax blocks
    for ``mma`` and ``mma.sp`` spell it::

        mma.sync.aligned.SHAPE.row.col{.satfinite}.DTYPE.ATYPE.BTYPE.CTYPE{.and|.xor.popc}  d, a, b, c;
        mma.sync.aligned.SHAPE.row.col.kind::f8f6f4.DTYPE.ATYPE.BTYPE.CTYPE                d, a, b, c;
        mma.sync.aligned.SHAPE.row.col.KIND.block_scale.scale_vec::NX.f32.ATYPE.BTYPE.f32.STYPE
            d, a, b, c, scale-a, {byte-id-a, thread-id-a}, scale-b, {byte-id-b, thread-id-b};
        mma.sp{::ordered_metadata}.sync.aligned.SHAPE.row.col...   d, a, b, c, e, f;

    (``e``: the metadata register, ``f``: the sparsity selector, an immediate.)"""
    dp = model.datapath
    M, N, K = _shape(model)
    if dp.sparse:
        head = "mma.sp::ordered_metadata" if model.sparse_rule.ordered else "mma.sp"
    else:
        head = "mma"
    parts = [head, "sync", "aligned", f"m{M}n{N}k{K}", "row", "col"]
    a, b, c, d = (_ptx_type(x) for x in (dp.a, dp.b, dp.c, dp.d))
    if dp.scale:
        parts += [f"kind::{dp.kind}", "block_scale", f"scale_vec::{dp.scale_vec}", d, a, b, c, _ptx_type(dp.scale)]
    else:
        if dp.kind:
            parts.append(f"kind::{dp.kind}")
        if dp.saturate:
            parts.append("satfinite")
        parts += [d, a, b, c]
        parts += list(dp.qualifiers)           # b1: .and.popc / .xor.popc
    return ".".join(parts)


def _bits(model, operand):
    return model.format_of(operand).container_bits


def _registers(model, operand) -> int:
    """32-bit registers per lane of ``operand``: :meth:`mmasim.Model.layout`'s where the layout
    is registered; the sparse A fragment (A compressed to K/2 columns) from the PTX text."""
    M, N, K = _shape(model)
    dp = model.datapath
    if operand == "a" and dp.sparse:
        # the compressed A (M x K/2) of mma.sp (PTX "Matrix fragments for mma.sp")
        return M * (K // 2) * _bits(model, "a") // (32 * 32)
    try:
        return model.layout(operand).registers
    except MMAError:
        rows, cols = {"a": (M, K), "b": (K, N), "c": (M, N), "d": (M, N)}[operand]
        return rows * cols * _bits(model, operand) // (32 * 32)


def _kernel_name(model) -> str:
    s = model.instruction.replace("::", "_")
    return "k_" + re.sub(r"[^A-Za-z0-9_]", "_", s)


def _operand_list(prefix, n, start):
    return "{" + ", ".join(f"%{start + i}" for i in range(n)) + "}", start + n


def device_code(name: str, opcode: str, regs: dict, f64: bool, sparse: bool, scaled: bool) -> str:
    """The kernel source (see :mod:`mmasim.harness.spec` for the signature and buffers)."""
    na, nb, nc, nd = regs["a"], regs["b"], regs["c"], regs["d"]
    order = ["a", "b", "c"] + (["sparse_metadata"] if sparse else []) + (["scale_a", "scale_b"] if scaled else [])
    lines = [f'extern "C" __global__ void {name}(const uint32_t* const* in, uint32_t* out)', "{",
             "    const size_t lane = (size_t)blockIdx.x * 32 + threadIdx.x;"]
    for i, op in enumerate(order):
        n = regs[op]
        lines.append(f"    const uint32_t* p{op} = in[{i}] + lane * {n};")
    lines.append(f"    uint32_t d[{nd}];")
    outs, ins = [], []
    if f64:
        # .f64 operands: one double register per element, from a {lo, hi} pair of words
        for op, n in (("a", na), ("b", nb), ("c", nc)):
            for j in range(n // 2):
                lines.append(f"    const double {op}{j} = __hiloint2double((int)p{op}[{2 * j + 1}], (int)p{op}[{2 * j}]);")
        lines.append(f"    double d64[{nd // 2}];")
        outs = [f'"=d"(d64[{j}])' for j in range(nd // 2)]
        for op, n in (("a", na), ("b", nb), ("c", nc)):
            ins += [f'"d"({op}{j})' for j in range(n // 2)]
        counts = [nd // 2, na // 2, nb // 2, nc // 2]
    else:
        outs = [f'"=r"(d[{j}])' for j in range(nd)]
        for op, n in (("a", na), ("b", nb), ("c", nc)):
            ins += [f'"r"(p{op}[{j}])' for j in range(n)]
        counts = [nd, na, nb, nc]
    pos = 0
    groups = []
    for n in counts:
        g, pos = _operand_list("", n, pos)
        groups.append(g)
    operands = ", ".join(groups)
    if sparse:
        ins.append('"r"(psparse_metadata[0])')
        operands += f", %{pos}, {SPARSITY_SELECTOR:#x}"
        pos += 1
    if scaled:
        ins += ['"r"(pscale_a[0])', '"r"(pscale_b[0])']
        bid, tid = SCALE_SELECTOR           # {byte-id, thread-id} of A and of B (immediates)
        operands += f", %{pos}, {{{bid}, {tid}}}, %{pos + 1}, {{{bid}, {tid}}}"
        pos += 2
    lines.append(f'    asm volatile("{opcode} {operands};"')
    lines.append(f"        : {', '.join(outs)}")
    lines.append(f"        : {', '.join(ins)});")
    if f64:
        for j in range(nd // 2):
            lines.append(f"    d[{2 * j}] = (uint32_t)__double2loint(d64[{j}]); "
                         f"d[{2 * j + 1}] = (uint32_t)__double2hiint(d64[{j}]);")
    lines.append(f"    for (int j = 0; j < {nd}; ++j) out[lane * {nd} + j] = d[j];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def specs(model) -> list:
    """One :class:`KernelSpec` for an ``mma.sync`` / ``mma.sp`` model."""
    if not handles(model):
        raise UnsupportedDatapath(f"{model.instruction}: not an mma.sync instruction (mmasim.harness.nv_sync)")
    dp = model.datapath
    target = compile_target(model, "NVIDIA")
    regs = {op: _registers(model, op) for op in "abcd"}
    sparse, scaled = bool(dp.sparse), bool(dp.scale)
    if sparse:
        regs["sparse_metadata"] = 1
    if scaled:
        regs["scale_a"] = regs["scale_b"] = 1
    name = _kernel_name(model)
    opcode = assembly(model)
    inputs = [Buffer(op, "registers", regs[op], layout=layout_name(model, op)) for op in "abc"]
    if sparse:
        inputs.append(Buffer("sparse_metadata", "registers", 1, layout="mma.sp metadata register"))
    if scaled:
        inputs += [Buffer("scale_a", "registers", 1, layout="block-scale register"),
                   Buffer("scale_b", "registers", 1, layout="block-scale register")]
    options = {}
    if sparse:
        options["sparsity_selector"] = SPARSITY_SELECTOR
    if scaled:
        options["byte_id_a"], options["thread_id_a"] = SCALE_SELECTOR
        options["byte_id_b"], options["thread_id_b"] = SCALE_SELECTOR
    device = device_code(name, opcode, regs, dp.a == "f64", sparse, scaled)
    return [KernelSpec(arch=model.arch, instruction=model.instruction, qualifiers={}, target=target,
                       threads=32, name=name, assembly=opcode, inputs=tuple(inputs),
                       output=Buffer("d", "registers", regs["d"], layout=layout_name(model, "d")),
                       device=device, options=options)]


# ------------------------------------------------------------------ placement
def _blocks(model, operand) -> int:
    try:
        return model.layout(operand).blocks
    except MMAError:
        return 1


def _per_case(model, operand, mats, regs_per_lane):
    """Registers of every case, flat; where the lanes hold several independent matrices (Volta's
    quad pairs) every block gets the case's matrix (and :func:`read` takes block 0)."""
    blocks = _blocks(model, operand) if operand in "abcd" else 1
    out = np.empty((mats.shape[0], 32, regs_per_lane), dtype=np.uint32)
    for k in range(mats.shape[0]):
        x = mats[k] if blocks == 1 else np.concatenate([mats[k]] * blocks)
        out[k] = model.fragments(operand, x)
    return out.reshape(-1)


def _compress(model, A, md):
    """The stored half of a sparse A ``(cases, M, K)`` under metadata ``(cases, M, words)``."""
    from mmasim.arith import sparse as sp
    rule, K = model.sparse_rule, model.datapath.k
    cases, M = A.shape[:2]
    (stored,) = sp.select(rule, K, md.reshape(cases * M, -1), A.reshape(cases * M, K))
    return stored.reshape(cases, M, K // 2)


def selectors(spec) -> dict:
    """The selectors the kernel of ``spec`` was generated with, as :meth:`mmasim.Model.warp`
    takes them (``byte_id_a`` ... ``sparsity_selector``)."""
    keys = ("byte_id_a", "thread_id_a", "byte_id_b", "thread_id_b", "sparsity_selector")
    return {k: spec.options[k] for k in keys if k in spec.options}


def _extra(model, name, mats, **selector):
    """Registers of the scale / metadata operand ``name`` (one 32-bit register per lane), placed with
    the register layout mmasim.placement registers for it, read through ``selector``."""
    out = np.empty((mats.shape[0], 32, 1), dtype=np.uint32)
    try:
        for k in range(mats.shape[0]):
            out[k] = model.fragments(name, mats[k], **selector)
    except (OperandError, TypeError) as e:
        raise UnsupportedDatapath(f"{model.instruction}: no register layout of {name} is registered "
                                  f"(mmasim.placement), so the harness cannot place it: {e}") from None
    return out.reshape(-1)


def place(spec, model, ops: dict) -> list:
    """The input buffers of ``spec`` for the cases ``ops`` (see :mod:`mmasim.harness`)."""
    dp = model.datapath
    A, B, C = (np.asarray(ops[o], dtype=np.uint64) for o in "abc")
    out = {}
    if dp.sparse:
        md = np.asarray(ops["sparse_metadata"], dtype=np.uint64)
        stored = _compress(model, A, md)
        try:
            out["a"] = _per_case(model, "a", stored, spec.inputs[0].words)
        except ShapeError as e:
            raise UnsupportedDatapath(f"{model.instruction}: the register layout of the compressed sparse A "
                                      f"(M x K/2) is not registered (mmasim.placement): {e}") from None
        out["sparse_metadata"] = _extra(model, "sparse_metadata", md, selector=spec.options["sparsity_selector"])
    else:
        out["a"] = _per_case(model, "a", A, spec.inputs[0].words)
    out["b"] = _per_case(model, "b", B, spec.inputs[1].words)
    out["c"] = _per_case(model, "c", C, spec.inputs[2].words)
    if dp.scale:
        o = spec.options
        out["scale_a"] = _extra(model, "scale_a", np.asarray(ops["scale_a"], dtype=np.uint64),
                                byte_id=o["byte_id_a"], thread_id=o["thread_id_a"])
        out["scale_b"] = _extra(model, "scale_b", np.asarray(ops["scale_b"], dtype=np.uint64),
                                byte_id=o["byte_id_b"], thread_id=o["thread_id_b"])
    return [out[b.operand] for b in spec.inputs]


def read(spec, model, out) -> np.ndarray:
    """D ``(cases, M, N)`` uint64 from the output buffer of ``spec``."""
    w = spec.output.words
    M, N, _ = _shape(model)
    regs = np.asarray(out, dtype=np.uint32).reshape(-1, 32, w)
    if not len(regs):
        return np.zeros((0, M, N), dtype=np.uint64)
    return np.stack([model.unfragment("d", r)[:M].astype(np.uint64) for r in regs])
