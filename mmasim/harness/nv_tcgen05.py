"""Harness kernels of Blackwell ``tcgen05.mma`` (PTX ISA 9.0 §9.7.16), in the protocol of
:mod:`mmasim.harness.spec`: :func:`specs`, :func:`place`, :func:`read`, and :func:`simulate`
for :class:`mmasim.harness.measure.SimulatedDevice`.

Owns the kernel's sequence and its Tensor Memory columns (:func:`_spec`), the instruction
descriptor (:func:`instruction_descriptor`) and the split of a ``cta_group::2`` case over its
CTA pair.  The shared-memory images are :mod:`mmasim.harness.nv_common`'s, the lane and column
of each element :func:`mmasim.placement.tmem_datapath`'s and ``Model.fragments``'.  Emits no A
from Tensor Memory (``[a-tmem]``); an operand whose layout ``Model.fragments`` refuses makes
``place`` raise :class:`mmasim.UnsupportedDatapath` (the kernel still compiles).
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.errors import MMAError, ShapeError, UnsupportedDatapath
from mmasim.placement import tmem_datapath
from mmasim.arith.sparse import select
from mmasim.harness.nv_common import (
    THREADS,
    _cname,
    _copy_smem,
    _fmt,
    _missing,
    _regs_loop,
    _resolve_n,
    _smem_addr,
    operand_image,
    packing,
)
from mmasim.harness.host import build_line, source
from mmasim.harness import table
from mmasim.harness.spec import Buffer, KernelSpec, compile_target


# ============================================================== tcgen05 instruction descriptor
# PTX ISA 9.0 §9.7.16.4.2 "Instruction descriptor", the tables "Instruction descriptor format
# for .kind::tf32, .kind::f16, .kind::f8f6f4 and .kind::i8", "... for .kind::mxf8f6f4" and
# "... for .kind::mxf4 and .kind::mxf4nvf4".
IDESC_ATYPE = {
    "tf32": {"tf32": 2},
    "f16": {"f16": 0, "bf16": 1},
    "f8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5},
    "mxf8f6f4": {"e4m3": 0, "e5m2": 1, "e2m3": 3, "e3m2": 4, "e2m1": 5},
    "i8": {"u8": 0, "s8": 1},
    "mxf4": {"e2m1": 1},
    "mxf4nvf4": {"e2m1": 1},
}
IDESC_DTYPE = {"f16": 0, "f32": 1, "s32": 2}
IDESC_SCALE_TYPE = {"ue4m3": 0, "ue8m0": 1}
_SCALED = ("mxf8f6f4", "mxf4", "mxf4nvf4")


def instruction_descriptor(kind: str, m: int, n: int, atype: str, btype: str, dtype: str = "f32", *,
                           sparse: bool = False, sparsity_selector: int = 0, saturate: bool = False,
                           negate_a: bool = False, negate_b: bool = False, transpose_a: bool = False,
                           transpose_b: bool = False, max_shift: int = 0, scale_type: str = "ue8m0",
                           scale_a_id: int = 0, scale_b_id: int = 0, k96: bool = False) -> int:
    """The 32-bit ``idesc`` operand of ``tcgen05.mma`` (PTX ISA 9.0 §9.7.16.4.2).

    Non-scaled kinds (tf32, f16, f8f6f4, i8): bits 0-1 sparsity selector, 2 sparsity, 3
    saturate (i8), 4-5 dtype (F16 0, F32 1, S32 2), 7-9 atype, 10-12 btype, 13 / 14 negate
    A / B, 15 / 16 transpose A / B, 17-22 ``N >> 3``, 24-28 ``M >> 4``, 30-31 the maximum
    shift of ``.ws`` B reuse; 6, 23, 29 reserved (0).
    Block-scaled kinds (mxf8f6f4, mxf4, mxf4nvf4): bit 2 sparsity, 4-5 scale factor B ID,
    7-9 atype, 10-12 btype (mxf4 kinds: 10-11, bit 12 reserved), 13-16 negate / transpose,
    17-22 ``N >> 3``, 23 scale type (UE4M3 0, UE8M0 1), 27-28 ``M >> 7``, 29-30 scale factor
    A ID, 31 (mxf4 kinds) K = 96; 0-1, 3, 6, 24-26 reserved.
    """
    if kind not in IDESC_ATYPE:
        raise ShapeError(f"tcgen05 kind must be one of {', '.join(IDESC_ATYPE)}; got {kind!r}")
    types = IDESC_ATYPE[kind]
    for name, t in (("atype", atype), ("btype", btype)):
        if t not in types:
            raise ShapeError(f"kind::{kind}: {name} must be one of {', '.join(types)}; got {t!r}")
    if not isinstance(n, int) or n % 8 or not 8 <= n <= 256:
        raise ShapeError(f"tcgen05 N must be a multiple of 8 in 8..256; got {n!r}")
    word = int(sparse) << 2 | types[atype] << 7 | types[btype] << 10 | int(negate_a) << 13 \
        | int(negate_b) << 14 | int(transpose_a) << 15 | int(transpose_b) << 16 | (n >> 3) << 17
    if kind in _SCALED:
        if m not in (128, 256):
            raise ShapeError(f"kind::{kind}: M must be 128 or 256 (the descriptor holds M >> 7); got {m!r}")
        if scale_type not in IDESC_SCALE_TYPE or (kind != "mxf4nvf4" and scale_type != "ue8m0"):
            raise ShapeError(f"kind::{kind}: scale type {scale_type!r} is not allowed")
        ids = (0, 2) if kind != "mxf8f6f4" else (0, 1, 2, 3)
        if scale_a_id not in ids or scale_b_id not in ids:
            raise ShapeError(f"kind::{kind}: scale factor IDs must be in {ids}")
        if k96 and kind == "mxf8f6f4":
            raise ShapeError("kind::mxf8f6f4 has no K = 96 bit")
        if sparsity_selector or saturate or max_shift:
            raise ShapeError(f"kind::{kind}: no sparsity selector, saturate or max-shift field")
        return word | scale_b_id << 4 | IDESC_SCALE_TYPE[scale_type] << 23 | (m >> 7) << 27 \
            | scale_a_id << 29 | int(k96) << 31
    if not isinstance(m, int) or m % 16 or not 16 <= m <= 256:
        raise ShapeError(f"tcgen05 M must be a multiple of 16 in 16..256; got {m!r}")
    if dtype not in IDESC_DTYPE:
        raise ShapeError(f"tcgen05 dtype must be one of {', '.join(IDESC_DTYPE)}; got {dtype!r}")
    if (kind == "i8") != (dtype == "s32"):
        raise ShapeError(f"kind::{kind} cannot have dtype {dtype!r}")
    if saturate and kind != "i8":
        raise ShapeError("only kind::i8 has the saturate bit")
    if not 0 <= sparsity_selector <= 3 or not 0 <= max_shift <= 3:
        raise ShapeError("sparsity selector and max shift are 2-bit fields")
    return word | sparsity_selector | int(saturate) << 3 | IDESC_DTYPE[dtype] << 4 | (m >> 4) << 24 \
        | max_shift << 30


# ============================================================== tcgen05.mma
def _tcgen05_layout_letter(m: int, ws: bool, cta2: bool, sparse: bool) -> str:
    """PTX 9.0 §9.7.16.10.5 'Data Path Layout Organization': the layout of (M, cta_group, .ws, sparsity)."""
    if cta2:
        return "A" if m == 256 else ("C" if sparse else "B")
    if m == 128:
        return "D"
    if m == 64:
        return "E" if ws else "F"
    if m == 32 and ws:
        return "G"
    raise ShapeError(f"tcgen05: no data path layout for M = {m}" + (" with .ws" if ws else ""))


def _chunks(total: int):
    """``(start, count)`` pieces of ``total`` TMEM columns, each a legal ``.num`` (a power of two <= 32)."""
    out, s = [], 0
    while s < total:
        c = 32
        while c > total - s:
            c //= 2
        out.append((s, c))
        s += c
    return out


def _tmem_access(op, var, col0, count, base="taddr + lane"):
    """CUDA lines moving ``count`` words of array ``var`` to (``op`` "st") or from ("ld") the
    TMEM columns ``col0 ..`` of this thread's lane, with ``tcgen05.{st,ld}.32x32b`` in chunks of
    at most 32 columns, each followed by its ``tcgen05.wait``."""
    out = []
    for s, c in _chunks(count):
        words = [f"{var}[{s + i}]" for i in range(c)]
        if op == "st":
            regs = ", ".join(f"%{1 + i}" for i in range(c))
            ins = ", ".join(f'"r"({w})' for w in words)
            out.append(f'  asm volatile("tcgen05.st.sync.aligned.32x32b.x{c}.b32 [%0], {{{regs}}};\\n'
                       f'tcgen05.wait::st.sync.aligned;" :: "r"({base} + {col0 + s}u), {ins} : "memory");\n')
        else:
            regs = ", ".join(f"%{i}" for i in range(c))
            outs = ", ".join(f'"=r"({w})' for w in words)
            out.append(f'  asm volatile("tcgen05.ld.sync.aligned.32x32b.x{c}.b32 {{{regs}}}, [%{c}];\\n'
                       f'tcgen05.wait::ld.sync.aligned;" : {outs} : "r"({base} + {col0 + s}u) : "memory");\n')
    return "".join(out)


def _pow2_cols(n: int) -> int:
    c = 32
    while c < n:
        c *= 2
    if c > 512:
        raise ShapeError(f"tcgen05: {n} TMEM columns do not fit the 512 of a CTA")
    return c


def specs(model, n=None, m=None) -> list:
    """The kernels of ``model``'s instruction: one per M of ``m`` (default: every legal M) at
    N = ``n`` (default: the smallest legal N)."""
    table.refuse_unless_emitted_by(model, __name__)
    nn = _resolve_n(model, "min" if n is None else n)
    ms = tuple(model.legal_m) if m is None else (m if isinstance(m, (tuple, list)) else (m,))
    return [_spec(model, x, nn) for x in ms]


def _spec(model, m: int, n: int) -> KernelSpec:
    """The kernel at M = ``m``, N = ``n``.  A and B from shared memory (K-major, no swizzle), the
    accumulator in Tensor Memory: ``tcgen05.alloc`` / ``relinquish_alloc_permit``, C stored with
    ``tcgen05.st.32x32b`` (thread ``t`` writes TMEM lane ``t``: so a thread's words are its lane's
    columns), one thread issues the MMA with :func:`instruction_descriptor`, ``tcgen05.commit`` to
    an mbarrier, every thread waits on it, D read with ``tcgen05.ld.32x32b`` and
    ``tcgen05.wait::ld``, ``dealloc``.  The lane / column of each accumulator element is the data
    path layout of PTX's "Data Path Layout Organization" (:func:`mmasim.placement.tmem_datapath`:
    A, B, C for ``cta_group::2``, D for M = 128, E / G for ``.ws`` M = 64 / 32, F for M = 64).

    ``cta_group::2`` runs on a 2-CTA cluster (``KernelSpec.cluster == 2``,
    ``__cluster_dims__(2, 1, 1)``): CTA ``r`` of a case holds rows ``r * M/2 ..`` of A and columns
    ``r * N/2 ..`` of B in its shared memory and its own rows of D in its Tensor Memory; CTA 0
    issues the MMA and the commit multicasts to both CTAs' mbarriers (PTX §9.7.16.5 "Issue
    Granularity": one thread of the pair issues .mma / .commit, one warp of each CTA .alloc /
    .dealloc; the split of A's rows and B's columns between the two CTAs is drawn only in
    figures: assumed, not run on a device).

    Block scale factors and sparse metadata are stored into TMEM columns after D with
    ``tcgen05.st.32x32b`` as well (PTX ISA 9.0 §9.7.16.10.7 asks only that the scale factors
    "reside in Tensor Memory", duplicated to all 32-lane partitions; ``tcgen05.cp`` from shared
    memory, which CUTLASS uses, is another way to put them there); their words are
    :func:`_tmem_extra`'s."""
    dp = model.datapath
    ws = "ws" in dp.qualifiers
    cta2 = "cta_group::2" in dp.qualifiers
    group = 2 if cta2 else 1
    sparse = bool(dp.sparse)
    kind = dp.kind
    K = dp.k
    ka = dp.stored_k if sparse else K
    scaled = dp.scale is not None
    letter = _tcgen05_layout_letter(m, ws, cta2, sparse)
    frag = tmem_datapath(letter, n)
    rows = frag.rows                      # rows of D (and A) per CTA
    cols_b = n // group                   # columns of B per CTA
    pa = packing(kind, model.a_format)
    pb = packing(kind, model.b_format)
    img_a, lay_a = operand_image(np.zeros((rows, ka), dtype=np.uint64), pa)
    img_b, lay_b = operand_image(np.zeros((cols_b, K), dtype=np.uint64), pb)
    wa, wb = img_a.size, img_b.size       # words of one CTA's A and B images
    desc_a, desc_b = lay_a.descriptor(0, "tcgen05"), lay_b.descriptor(0, "tcgen05")
    rd = frag.elements                    # TMEM columns of D per lane
    at, bt, dt = _fmt(model.a_format), _fmt(model.b_format), _fmt(model.d_format)
    if scaled:
        idesc = instruction_descriptor(kind, m, n, at, bt, scale_type=dp.scale)
    else:
        idesc = instruction_descriptor(kind, m, n, at, bt, dt, sparse=sparse, saturate=bool(dp.saturate))
        if sparse:
            idesc |= 1 << 2
    if scaled and sparse:
        idesc |= 1 << 2
    # TMEM columns: D [0, rd), then scale A, scale B, sparse metadata: each its TMEM image's
    # columns (Model.layout(...).registers; a thread's words are its lane's columns)
    col, extra, laid = rd, {}, {}
    shaped = _tcgen05_shaped(model, m, n)
    for op, fallback in (("scale_a", 4), ("scale_b", max(1, -(-n // 32))),
                         ("sparse_metadata", model.sparse_rule.words(K) if sparse else 0)):
        if (op == "sparse_metadata" and not sparse) or (op != "sparse_metadata" and not scaled):
            continue
        try:
            laid[op] = shaped.layout(op)
            width = laid[op].registers
        except MMAError:
            width = fallback          # the kernel compiles; place() refuses (the layout is not modelled)
        extra[op] = (col, width)
        col += width
    ncols = _pow2_cols(col)
    head = ("tcgen05.mma" + (".ws" if ws else "") + (".sp" if sparse else "") + f".cta_group::{group}"
            + f".kind::{kind}" + (f".block_scale.scale_vec::{dp.scale_vec}" if scaled else ""))
    name = _cname(f"{model.instruction}_m{m}n{n}")
    inputs = [Buffer("a", "smem", wa, descriptor=desc_a, align=128, layout=lay_a.name + f" ({pa[0]})"),
              Buffer("b", "smem", wb, descriptor=desc_b, align=128, layout=lay_b.name + f" ({pb[0]})"),
              Buffer("c", "registers", rd, layout=f"tmem_datapath({letter!r}, {n}) via tcgen05.st.32x32b")]
    for op, (c0, w) in extra.items():
        how = f"Model.layout({op!r}) ({laid[op].name})" if op in laid else "layout not modelled"
        inputs.append(Buffer(op, "registers", w, layout=f"TMEM columns {c0}..{c0 + w - 1} of the thread's lane "
                                                          f"via tcgen05.st.32x32b: {how}"))
    g = f"cta_group::{group}"
    code = [f'extern "C" __global__ void {"__cluster_dims__(2, 1, 1) " if cta2 else ""}'
            f'__launch_bounds__({THREADS}) {name}(const uint32_t* const* in, uint32_t* out) {{\n',
            "  const unsigned int blk = blockIdx.x, t = threadIdx.x, w = t >> 5;\n",
            f"  __shared__ __align__(128) uint32_t sa[{wa}];\n  __shared__ __align__(128) uint32_t sb[{wb}];\n",
            "  __shared__ __align__(8) uint64_t mbar;\n  __shared__ uint32_t tbase;\n",
            _copy_smem("sa", 0, wa), _copy_smem("sb", 1, wb)]
    if cta2:
        code.append('  uint32_t rank;\n  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));\n')
    else:
        code.append("  const uint32_t rank = 0;\n")
    sync = ('  asm volatile("barrier.cluster.arrive.release.aligned;\\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");\n'
            if cta2 else "  __syncthreads();\n")
    code.append(f'  if (w == 0) {{\n    asm volatile("tcgen05.alloc.{g}.sync.aligned.shared::cta.b32 [%0], {ncols};" '
                f':: "r"({_smem_addr("&tbase")}) : "memory");\n'
                f'    asm volatile("tcgen05.relinquish_alloc_permit.{g}.sync.aligned;" ::: "memory");\n  }}\n')
    code.append(f'  if (t == 0) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"({_smem_addr("&mbar")}) : "memory");\n')
    code.append('  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");\n')
    if cta2:
        code.append('  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");\n')
    code.append('  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");\n' + sync
                + '  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");\n')
    code.append("  const uint32_t taddr = tbase, lane = (w * 32u) << 16;\n")
    code.append(f"  uint32_t c[{rd}];\n  const uint32_t* pc = in[2] + (blk * {THREADS}u + t) * {rd}u;\n"
                + _regs_loop("c", "pc", rd) + _tmem_access("st", "c", 0, rd))
    for i, (op, (c0, wds)) in enumerate(extra.items()):
        code.append(f"  uint32_t x{i}[{wds}];\n  const uint32_t* px{i} = in[{3 + i}] + (blk * {THREADS}u + t) * {wds}u;\n"
                    + _regs_loop(f"x{i}", f"px{i}", wds) + _tmem_access("st", f"x{i}", c0, wds))
    code.append('  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");\n' + sync
                + '  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");\n')
    # the MMA: one thread (of CTA 0 of the pair)
    operands = ["[%0]", "%1", "%2"]
    ins = ['"r"(taddr)', '"l"(da)', '"l"(db)']
    if sparse:
        operands.append(f"[%{len(ins)}]")
        ins.append(f'"r"(taddr + {extra["sparse_metadata"][0]}u)')
    operands.append(f"%{len(ins)}")
    ins.append(f'"r"({idesc}u)')
    if scaled:
        operands += [f"[%{len(ins)}]", f"[%{len(ins) + 1}]"]
        ins += [f'"r"(taddr + {extra["scale_a"][0]}u)', f'"r"(taddr + {extra["scale_b"][0]}u)']
    pred = len(ins)
    ins.append('"r"(1)')
    operands.append("p")
    mbar = _smem_addr("&mbar")
    commit = (f'tcgen05.commit.{g}.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;" '
              f':: "r"({mbar}), "h"((unsigned short)3) : "memory");\n' if cta2 else
              f'tcgen05.commit.{g}.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"({mbar}) : "memory");\n')
    code.append(
        "  if (t == 0 && rank == 0) {\n"
        f"    const uint64_t da = {desc_a}ull | (uint64_t)(({_smem_addr('sa')} >> 4) & 0x3FFFu);\n"
        f"    const uint64_t db = {desc_b}ull | (uint64_t)(({_smem_addr('sb')} >> 4) & 0x3FFFu);\n"
        f'    asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{pred}, 0;\\n{head} {", ".join(operands)};\\n}}"\n'
        f'      :: {", ".join(ins)} : "memory");\n'
        f'    asm volatile("{commit}'
        "  }\n")
    code.append(
        "  uint32_t done = 0;\n"
        "  while (!done) asm volatile(\"{\\n.reg .pred q;\\nmbarrier.try_wait.parity.shared::cta.b64 q, [%1], 0;\\n"
        f"selp.b32 %0, 1, 0, q;\\n}}\" : \"=r\"(done) : \"r\"({mbar}) : \"memory\");\n"
        '  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");\n')
    code.append(f"  uint32_t d[{rd}];\n" + _tmem_access("ld", "d", 0, rd)
                + f"  uint32_t* po = out + (blk * {THREADS}u + t) * {rd}u;\n" + _regs_loop("po", "d", rd))
    code.append('  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");\n' + sync
                + '  if (w == 0) {\n    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");\n'
                f'    asm volatile("tcgen05.dealloc.{g}.sync.aligned.b32 %0, {ncols};" :: "r"(taddr) : "memory");\n  }}\n')
    code.append("}\n")
    return KernelSpec(arch=model.arch, instruction=model.instruction, qualifiers={},
                      target=compile_target(model, "NVIDIA"),
                      threads=THREADS, name=name, assembly=head, inputs=tuple(inputs),
                      output=Buffer("d", "registers", rd, layout=f"tmem_datapath({letter!r}, {n}) via tcgen05.ld.32x32b"),
                      device="".join(code), cluster=group,
                      options={"n": n, "m": m, "a_source": "smem", "family": "tcgen05", "layout": letter,
                               "idesc": idesc, "tmem_columns": ncols, "a_packing": list(pa),
                               "b_packing": list(pb)})


def _tcgen05_shaped(model, m: int, n: int):
    """``model`` at the shape ``m``, ``n`` (its Tensor Memory layouts depend on the shape)."""
    if model.shape == (m, n):
        return model
    return type(model)(model.datapath, model.registry, backend=model.backend,
                       resolution=attrs.evolve(model.resolution, m=m, n=n))


def _tmem_extra(spec, model, ops, cases):
    """The per-thread words of the scale factors' and the sparse metadata's TMEM images:
    ``Model.fragments(op, X)`` of each case (``(128 * CTAs, columns)``), CTA ``r``'s lanes
    ``128 r ..`` in the buffer of block ``case * CTAs + r``, thread ``t`` holding lane ``t``
    (``scale_a`` / ``scale_b``: scale factor A / B ID 0, every partition written by its own warp;
    ``sparse_metadata``: the column pair at sparsity selector 0)."""
    shaped = _tcgen05_shaped(model, spec.options["m"], spec.options["n"])
    out = {}
    for b in spec.inputs[3:]:
        if b.operand not in ops:
            raise ShapeError(f"{spec.name}: the operands need {b.operand!r}")
        X = np.asarray(ops[b.operand], dtype=np.uint64)
        try:
            imgs = [np.asarray(shaped.fragments(b.operand, X[i]), dtype=np.uint32) for i in range(cases)]
        except UnsupportedDatapath as exc:
            _missing(model, f"the Tensor Memory layout of {b.operand} ({exc})")
        if imgs[0].shape != (THREADS * spec.cluster, b.words):
            _missing(model, f"a Tensor Memory image of {b.operand} with {b.words} columns per lane "
                            f"(Model.fragments gives {imgs[0].shape})")
        out[b.operand] = np.concatenate([im.reshape(-1) for im in imgs])
    return out


def place(spec, model, ops) -> list:
    """The kernel's input buffers (uint32, in ``spec.inputs`` order) for operand matrices ``ops``;
    a sparse instruction's A goes to shared memory compressed."""
    dp = model.datapath
    m, n, group = spec.options["m"], spec.options["n"], spec.cluster
    frag = tmem_datapath(spec.options["layout"], n)
    A, B, C = (np.asarray(ops[o], dtype=np.uint64) for o in ("a", "b", "c"))
    cases = A.shape[0]
    if A.shape[1:] != (m, dp.k) or B.shape[1:] != (dp.k, n) or C.shape[1:] != (m, n):
        raise ShapeError(f"{spec.name}: a, b, c must be (cases, {m}, {dp.k}), (cases, {dp.k}, {n}), (cases, {m}, {n}); "
                         f"got {A.shape}, {B.shape}, {C.shape}")
    extra = _tmem_extra(spec, model, ops, cases)
    if dp.sparse:       # shared memory holds the compressed A (M x K/2)
        md = np.asarray(ops["sparse_metadata"], dtype=np.uint64)
        A = select(model.sparse_rule, dp.k, md.reshape(cases * m, -1), A.reshape(cases * m, dp.k))[0] \
            .reshape(cases, m, -1)
    pa, pb = tuple(spec.options["a_packing"]), tuple(spec.options["b_packing"])
    rows, cb = frag.rows, n // group
    sa, sb, sc = [], [], []
    for i in range(cases):
        for r in range(group):
            sa.append(operand_image(A[i, r * rows:(r + 1) * rows], pa, model.a_format.field_shift)[0])
            sb.append(operand_image(B[i, :, r * cb:(r + 1) * cb].T, pb, model.b_format.field_shift)[0])
            sc.append(frag.pack(C[i, r * rows:(r + 1) * rows].astype(np.uint32)).reshape(-1))
    return [np.concatenate(x).astype(np.uint32) for x in (sa, sb, sc)] + [extra[b.operand] for b in spec.inputs[3:]]


def simulate(spec, model, inputs, cases: int) -> np.ndarray:
    """The output buffer a ``tcgen05.mma`` kernel writes (``(cases, CTAs, threads, D columns)``,
    flat), computed in software from its input buffers: each block's shared-memory images with
    the kernel's descriptors, each thread's TMEM words (thread ``t`` of CTA ``r``: lane
    ``128 r + t``: C, the scale factors, the sparse metadata) handed to ``Model.warp`` as the
    images they are (:class:`mmasim.harness.measure.SimulatedDevice`)."""
    if spec.options.get("family") != "tcgen05":
        raise UnsupportedDatapath(f"{spec.name}: not a tcgen05.mma kernel")
    shaped = _tcgen05_shaped(model, spec.options["m"], spec.options["n"])
    g = spec.cluster
    per = {b.operand: np.asarray(x, dtype=np.uint32).reshape(cases, g, -1) for b, x in zip(spec.inputs, inputs)}
    out = []
    for i in range(cases):
        smem = [tuple(per[o][i]) if g == 2 else per[o][i, 0] for o in ("a", "b")]
        tmem = {b.operand: per[b.operand][i].reshape(g * THREADS, b.words) for b in spec.inputs[2:]}
        d = shaped.warp(*smem, tmem.pop("c"), a_descriptor=spec.inputs[0].descriptor,
                        b_descriptor=spec.inputs[1].descriptor, **tmem)
        out.append(np.asarray(d, dtype=np.uint32).reshape(g, THREADS, -1))
    return np.stack(out).reshape(-1)


def read(spec, model, out) -> np.ndarray:
    """D ``(cases, M, N)`` (uint64 words) from the kernel's output buffer."""
    frag = tmem_datapath(spec.options["layout"], spec.options["n"])
    rd, group = spec.output.words, spec.cluster
    regs = np.asarray(out, dtype=np.uint32).reshape(-1, group, THREADS, rd)
    mask = np.uint64((1 << model.d_format.container_bits) - 1)
    return np.stack([np.concatenate([frag.unpack(regs[i, r]).astype(np.uint64) & mask for r in range(group)])
                     for i in range(regs.shape[0])])

