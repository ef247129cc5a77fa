"""Harness kernels of NVIDIA's asynchronous MMA instructions: Hopper ``wgmma.mma_async``
(``.sp`` included) and Blackwell ``tcgen05.mma`` (``.sp``, ``.ws``, ``cta_group::2``,
block-scaled kinds).

Every function here follows the protocol of :mod:`mmasim.harness.spec`:
``specs(model)`` lists the kernels of one instruction, ``place(spec, model, ops)`` turns
operand matrices into the kernel's input buffers and ``read(spec, model, out)`` turns its
output buffer into D.

``wgmma.mma_async`` (PTX ISA 9.0 §9.7.15): a 128-thread warpgroup; B always, A optionally,
from shared memory through a 64-bit matrix descriptor (K-major, no swizzle:
:class:`mmasim.placement.SmemLayout`), A otherwise from registers
(``Model.fragments("a")``), C loaded into the accumulator registers
(``Model.fragments("c")``) and ``scale-d = 1``; ``wgmma.fence``, the instruction,
``wgmma.commit_group``, ``wgmma.wait_group 0``.  One kernel per (N, A source):
``options["n"]`` and ``options["a_source"]`` ("smem" / "registers").

``tcgen05.mma`` (PTX ISA 9.0 §9.7.16): A and B from shared memory (K-major, no swizzle),
the accumulator in Tensor Memory: ``tcgen05.alloc`` / ``relinquish_alloc_permit``, C
stored with ``tcgen05.st.32x32b`` (thread ``t`` writes TMEM lane ``t``: so a thread's
words are its lane's columns), one thread issues the MMA with the 32-bit instruction
descriptor :func:`instruction_descriptor`, ``tcgen05.commit`` to an mbarrier, every thread
waits on it, D read with ``tcgen05.ld.32x32b`` and ``tcgen05.wait::ld``, ``dealloc``.
The lane / column of each accumulator element is the data path layout of PTX's "Data Path
Layout Organization" (:func:`mmasim.placement.tmem_datapath`: A, B, C for ``cta_group::2``,
D for M = 128, E / G for ``.ws`` M = 64 / 32, F for M = 64).  ``cta_group::2`` runs on a
2-CTA cluster (``KernelSpec.cluster == 2``, ``__cluster_dims__(2, 1, 1)``): CTA ``r`` of a
case holds rows ``r * M/2 ..`` of A and columns ``r * N/2 ..`` of B in its shared memory and
its own rows of D in its Tensor Memory; CTA 0 issues the MMA and the commit multicasts to
both CTAs' mbarriers (PTX §9.7.16.5 "Issue Granularity": one thread of the pair issues
.mma / .commit, one warp of each CTA .alloc / .dealloc; the split of A's rows and B's
columns between the two CTAs is drawn only in figures: assumed, not run on a device).
One kernel per legal M at the smallest legal N (``specs(model, m=..., n=...)``).  Block
scale factors and sparse metadata are stored into TMEM columns after D with
``tcgen05.st.32x32b`` as well (PTX ISA 9.0 §9.7.16.10.7 asks only that the scale factors
"reside in Tensor Memory", duplicated to all 32-lane partitions; ``tcgen05.cp`` from shared
memory, which CUTLASS uses, is another way to put them there): each is
``Model.fragments(op, X)``'s Tensor Memory image (``scale_a`` / ``scale_b``: scale factor A /
B ID 0, every partition written by its own warp; ``sparse_metadata``: the column pair at
sparsity selector 0), thread ``t`` of CTA ``r`` writing lane ``128 r + t`` of the image;
``place`` puts the compressed A of a sparse instruction in shared memory.  A from Tensor Memory
(``[a-tmem]``) is not emitted.

Not placed (``place`` raises :class:`mmasim.UnsupportedDatapath`, the kernels still
compile): the register layouts of wgmma.sp metadata and sparse A where
:mod:`mmasim.placement` has none, and any other operand whose layout ``Model.fragments``
refuses (tcgen05 ``.ws`` sparse metadata at M = 32 / 64).
"""

from __future__ import annotations

import re

import attrs
import numpy as np

from ..errors import MMAError, ShapeError, UnsupportedDatapath
from ..placement import SmemLayout, tmem_datapath
from ..sparse import select
from .spec import Buffer, KernelSpec

THREADS = 128

#: N of the wgmma kernels ``specs`` emits by default: the smallest and the largest legal N
#: (every N gives the same datapath in mmasim; these two cover the accumulator layout's
#: first column block and its full width).  ``specs(model, n=...)`` takes any legal N, or a
#: tuple of them (``n=tuple(model.legal_n)``: every one).  Measured with CUDA 13.0 ptxas,
#: ``-cubin -arch=sm_90a``, one translation unit, on a shared 2-core machine: the default 160
#: Hopper kernels (40 instructions x 2 N x 2 A sources) 13.6 s wall; every legal N (2252
#: kernels) 3 min 45 s wall (1 min 29 s user), too slow for the test suite's compile check.
WGMMA_N = ("min", "max")


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


# ============================================================== shared-memory images
def smem_layout(rows: int, kbytes: int) -> SmemLayout:
    """The K-major, no-swizzle canonical layout of a ``rows x kbytes`` operand, dense: the
    16-byte K chunks of one 8-row group first (LBO = 128 bytes), then the next 8 rows
    (SBO = 128 * kbytes / 16)."""
    if rows % 8 or kbytes % 16:
        raise ShapeError(f"a shared-memory operand needs rows % 8 == 0 and 16-byte K chunks; got {rows} x {kbytes}B")
    return SmemLayout(f"harness.K.noswizzle.{rows}x{kbytes}B", major="K", swizzle=0, lbo=128,
                      sbo=128 * (kbytes // 16), element_bits=8,
                      description="K-major, no swizzle, LBO 128 bytes, SBO 128 * K-bytes / 16",
                      evidence="chosen by the harness (mmasim.harness.nv_async.smem_layout)")


def packing(kind, fmt) -> tuple:
    """How elements of format ``fmt`` sit in shared memory for a tcgen05 ``kind`` (``None``:
    wgmma): ``("bytes", container_bits)`` (whole 8 / 16 / 32-bit containers), ``("pair", 4)``
    (4-bit codes two per byte, lower K in the low nibble, no padding: PTX 9.0
    §9.7.16.10.4.6, .kind::mxf4 / .kind::mxf4nvf4) or ``("padded", field_bits)`` (the 4- or
    6-bit codes of .kind::f8f6f4 / .kind::mxf8f6f4 packed 16 to a 16-byte chunk, then 64 / 32
    bits of padding: the ``.b4x16_p64`` / ``.b6x16_p32`` forms of PTX §5.5.1.1.1 that
    §9.7.16.10.4.4 draws for these kinds; assumed for .kind::f8f6f4 as well)."""
    if fmt.container_bits == 4:
        return ("pair", 4)
    if kind in ("f8f6f4", "mxf8f6f4") and fmt.field_bits < 8 and not fmt.integer:
        return ("padded", fmt.field_bits)
    return ("bytes", fmt.container_bits)


def operand_image(words, pack=("bytes", 8), field_shift: int = 0):
    """``(rows, K)`` operand words -> (flat uint32 shared-memory image, the SmemLayout used).

    ``pack``: from :func:`packing`; ``field_shift``: where the code sits in a padded
    element's container (``Format.field_shift``)."""
    w = np.asarray(words, dtype=np.uint64)
    if w.ndim != 2:
        raise ShapeError(f"expected a (rows, K) operand; got {w.shape}")
    rows, K = w.shape
    mode, bits = pack
    if mode == "pair":
        by = ((w[:, 0::2] & np.uint64(0xF)) | (w[:, 1::2] & np.uint64(0xF)) << np.uint64(4)).astype(np.uint8)
        lay = smem_layout(rows, K // 2)
        img = lay.to_image(by)
    elif mode == "padded":
        lay = smem_layout(rows, K)
        codes = (w >> np.uint64(field_shift)) & np.uint64((1 << bits) - 1)
        chunks = lay.to_image(codes.astype(np.uint8)).reshape(-1, 16).astype(np.uint64)
        bitsarr = ((chunks[:, :, None] >> np.arange(bits, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
        flat = np.zeros((chunks.shape[0], 128), dtype=np.uint8)
        flat[:, : 16 * bits] = bitsarr.reshape(chunks.shape[0], 16 * bits)
        img = np.packbits(flat, axis=1, bitorder="little").reshape(-1)
    else:
        nb = bits // 8
        by = np.zeros((rows, K * nb), dtype=np.uint8)
        for j in range(nb):
            by[:, j::nb] = ((w >> np.uint64(8 * j)) & np.uint64(0xFF)).astype(np.uint8)
        lay = smem_layout(rows, K * nb)
        img = lay.to_image(by)
    img = np.ascontiguousarray(img, dtype=np.uint8)
    return img.view("<u4").copy(), lay


def image_operand(image, rows: int, K: int, pack=("bytes", 8), field_shift: int = 0) -> np.ndarray:
    """The inverse of :func:`operand_image`: ``(rows, K)`` words (uint64) from a flat uint32 image."""
    by = np.ascontiguousarray(image, dtype="<u4").view(np.uint8)
    mode, bits = pack
    if mode == "pair":
        b = smem_layout(rows, K // 2).from_image(by, rows, K // 2).astype(np.uint64)
        out = np.zeros((rows, K), dtype=np.uint64)
        out[:, 0::2], out[:, 1::2] = b & np.uint64(0xF), b >> np.uint64(4)
        return out
    if mode == "padded":
        flat = np.unpackbits(by.reshape(-1, 16), axis=1, bitorder="little")[:, : 16 * bits]
        codes = (flat.reshape(-1, 16, bits).astype(np.uint64) << np.arange(bits, dtype=np.uint64)).sum(axis=2)
        b = smem_layout(rows, K).from_image(codes.reshape(-1).astype(np.uint8), rows, K).astype(np.uint64)
        return b << np.uint64(field_shift)
    nb = bits // 8
    b = smem_layout(rows, K * nb).from_image(by, rows, K * nb).astype(np.uint64)
    out = np.zeros((rows, K), dtype=np.uint64)
    for j in range(nb):
        out |= b[:, j::nb] << np.uint64(8 * j)
    return out


# ============================================================== shared helpers
def _cname(text: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9]", "_", text)).strip("_")


def _fmt(fmt) -> str:
    return fmt.name


def _missing(model, what: str):
    raise UnsupportedDatapath(f"{model.arch}: {model.instruction}: {what} is not in mmasim.placement yet; "
                              "the harness kernel is generated and compiles, but its operands cannot be placed")


def _fragments(model, operand, X):
    """``model.fragments(operand, X)``, or :class:`UnsupportedDatapath` naming the missing layout."""
    try:
        return np.asarray(model.fragments(operand, X), dtype=np.uint32)
    except UnsupportedDatapath:
        raise
    except MMAError as exc:    # an operand the placement package does not know yet
        _missing(model, f"the register layout of {operand} ({exc})")


def _regs_loop(var, src, count, conv=""):
    return (f"  for (unsigned int i = 0; i < {count}; ++i) {var}[i] = {conv}({src}[i]);\n")


def _copy_smem(var, idx, words):
    return (f"  for (unsigned int i = threadIdx.x; i < {words}u; i += {THREADS}u) "
            f"{var}[i] = in[{idx}][blk * {words}u + i];\n")


def _smem_addr(var):
    return f"(uint32_t)__cvta_generic_to_shared({var})"


def _resolve_n(model, n):
    legal = tuple(model.legal_n)
    if n in ("min", "max"):
        return min(legal) if n == "min" else max(legal)
    if n not in legal:
        raise ShapeError(f"{model.instruction}: N = {n!r} is not a legal N ({', '.join(map(str, legal))})")
    return n


# ============================================================== wgmma.mma_async
def _wgmma_imms(a_type: str, a_source: str) -> str:
    if a_type in ("f16", "bf16"):
        return "1, 1, 0, 0" if a_source == "smem" else "1, 1, 0"
    if a_type in ("tf32", "e4m3", "e5m2"):
        return "1, 1"
    return ""


def _wgmma_spec(model, n: int, a_source: str) -> KernelSpec:
    dp = model.datapath
    M, K = 64, dp.k
    sparse = bool(dp.sparse)
    ka = dp.stored_k if sparse else K
    at, bt, dt = _fmt(model.a_format), _fmt(model.b_format), _fmt(model.d_format)
    abits, bbits = model.a_format.container_bits, model.b_format.container_bits
    asm = (f"wgmma.mma_async{'.sp' if sparse else ''}.sync.aligned.m64n{n}k{K}"
           f"{'.satfinite' if dp.saturate else ''}.{dt}.{at}.{_fmt(model.b_format)}")
    name = _cname(f"{asm.replace('.sync.aligned', '')}_{'rs' if a_source == 'registers' else 'ss'}")
    lay_b = smem_layout(n, K * bbits // 8)
    desc_b = lay_b.descriptor(0, "wgmma")
    wb = n * K * bbits // 32
    rd = M * n * model.d_format.container_bits // 32 // THREADS
    inputs = []
    if a_source == "smem":
        lay_a = smem_layout(M, ka * abits // 8)
        wa = M * ka * abits // 32
        inputs.append(Buffer("a", "smem", wa, descriptor=lay_a.descriptor(0, "wgmma"), align=128,
                             layout=lay_a.name))
    else:
        wa = M * ka * abits // 32 // THREADS
        inputs.append(Buffer("a", "registers", wa, layout="Model.layout('a')" + (" (compressed A)" if sparse else "")))
    inputs.append(Buffer("b", "smem", wb, descriptor=desc_b, align=128, layout=lay_b.name))
    inputs.append(Buffer("c", "registers", rd, layout="Model.layout('c')"))
    if sparse:
        inputs.append(Buffer("sparse_metadata", "registers", 1, layout="Model.layout('sparse_metadata')"))
    f32 = dt == "f32"
    # --- device code
    code = [f'extern "C" __global__ void __launch_bounds__({THREADS}) {name}(const uint32_t* const* in, uint32_t* out) {{\n',
            "  const unsigned int blk = blockIdx.x, t = threadIdx.x;\n"]
    if a_source == "smem":
        code.append(f"  __shared__ __align__(128) uint32_t sa[{wa}];\n")
    code.append(f"  __shared__ __align__(128) uint32_t sb[{wb}];\n")
    if a_source == "smem":
        code.append(_copy_smem("sa", 0, wa))
    else:
        code.append(f"  uint32_t a[{wa}];\n  const uint32_t* pa = in[0] + (blk * {THREADS}u + t) * {wa}u;\n"
                    + _regs_loop("a", "pa", wa))
    code.append(_copy_smem("sb", 1, wb))
    code.append(f"  {'float' if f32 else 'uint32_t'} d[{rd}];\n  const uint32_t* pc = in[2] + (blk * {THREADS}u + t) * {rd}u;\n"
                + _regs_loop("d", "pc", rd, "__uint_as_float" if f32 else ""))
    if sparse:
        code.append(f"  const uint32_t e = in[3][blk * {THREADS}u + t];\n")
    code.append('  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");\n  __syncthreads();\n')
    if a_source == "smem":
        code.append(f"  const uint64_t da = {lay_a.descriptor(0, 'wgmma')}ull | (uint64_t)(({_smem_addr('sa')} >> 4) & 0x3FFFu);\n")
    code.append(f"  const uint64_t db = {desc_b}ull | (uint64_t)(({_smem_addr('sb')} >> 4) & 0x3FFFu);\n")
    # operands: d0..d{rd-1}, then a (registers or descriptor), b descriptor, metadata, scale-d flag
    ops, nxt = [], rd
    if a_source == "smem":
        a_txt, ins = f"%{nxt}", ['"l"(da)']
        nxt += 1
    else:
        a_txt = "{" + ", ".join(f"%{nxt + i}" for i in range(wa)) + "}"
        ins = [f'"r"(a[{i}])' for i in range(wa)]
        nxt += wa
    b_txt = f"%{nxt}"
    ins.append('"l"(db)')
    nxt += 1
    if sparse:
        meta_txt = f"%{nxt}, 0, "
        ins.append('"r"(e)')
        nxt += 1
    else:
        meta_txt = ""
    ins.append('"r"(1)')
    imms = _wgmma_imms(at, a_source)
    d_txt = "{" + ", ".join(f"%{i}" for i in range(rd)) + "}"
    outs = ", ".join(f'"+{"f" if f32 else "r"}"(d[{i}])' for i in range(rd))
    code.append(
        '  asm volatile("{\\n.reg .pred p;\\n'
        f'setp.ne.b32 p, %{nxt}, 0;\\n'
        'wgmma.fence.sync.aligned;\\n'
        f'{asm} {d_txt}, {a_txt}, {b_txt}, {meta_txt}p{", " + imms if imms else ""};\\n'
        'wgmma.commit_group.sync.aligned;\\n'
        'wgmma.wait_group.sync.aligned 0;\\n}"\n'
        f'    : {outs}\n    : {", ".join(ins)}\n    : "memory");\n')
    code.append(f"  uint32_t* po = out + (blk * {THREADS}u + t) * {rd}u;\n"
                + _regs_loop("po", "d", rd, "__float_as_uint" if f32 else ""))
    code.append("}\n")
    return KernelSpec(arch=model.arch, instruction=model.instruction, qualifiers={}, target="sm_90a",
                      threads=THREADS, name=name, assembly=asm, inputs=tuple(inputs),
                      output=Buffer("d", "registers", rd, layout="Model.layout('d')"), device="".join(code),
                      options={"n": n, "m": M, "a_source": a_source, "family": "wgmma",
                               **({"sparsity_selector": 0} if sparse else {})})


def _shaped(spec, model):
    """The model of the kernel's exact shape (its layouts depend on N)."""
    from ..model import Model
    return Model.lookup(model.arch, spec.assembly, backend=model.backend)


def _wgmma_place(spec, model, ops):
    model = _shaped(spec, model)
    dp = model.datapath
    A, B, C = (np.asarray(ops[o], dtype=np.uint64) for o in ("a", "b", "c"))
    cases = A.shape[0]
    n = spec.options["n"]
    if B.shape[1:] != (dp.k, n) or C.shape[1:] != (64, n) or A.shape[1:] != (64, dp.k):
        raise ShapeError(f"{spec.name}: a, b, c must be (cases, 64, {dp.k}), (cases, {dp.k}, {n}), (cases, 64, {n}); "
                         f"got {A.shape}, {B.shape}, {C.shape}")
    if dp.sparse:
        md = np.asarray(ops["sparse_metadata"], dtype=np.uint64)
        A = select(model.sparse_rule, dp.k, md.reshape(cases * 64, -1), A.reshape(cases * 64, dp.k))[0] \
            .reshape(cases, 64, -1)
    bufs = {}
    if spec.inputs[0].space == "smem":
        bufs["a"] = np.concatenate([operand_image(A[i], ("bytes", model.a_format.container_bits))[0] for i in range(cases)])
    else:
        if dp.sparse:
            # the registers hold the compressed (64, K/2) A (PTX "Matrix Fragments for sparse wgmma")
            try:
                lay = model.layout("a")
            except MMAError as exc:
                _missing(model, f"the register layout of the compressed sparse A of wgmma.mma_async.sp ({exc})")
            if lay.shape != (64, dp.stored_k):
                _missing(model, f"a register layout of the compressed (64, {dp.stored_k}) sparse A "
                                f"(registered: {lay.name}, {lay.shape})")
            bufs["a"] = np.concatenate([lay.pack(A[i]).reshape(-1) for i in range(cases)])
        else:
            bufs["a"] = np.concatenate([_fragments(model, "a", A[i]).reshape(-1) for i in range(cases)])
    bufs["b"] = np.concatenate([operand_image(B[i].T, ("bytes", model.b_format.container_bits))[0]
                                for i in range(cases)])
    bufs["c"] = np.concatenate([_fragments(model, "c", C[i]).reshape(-1) for i in range(cases)])
    if dp.sparse:
        bufs["sparse_metadata"] = np.concatenate([_fragments(model, "sparse_metadata", md[i]).reshape(-1)
                                                  for i in range(cases)])
    return [np.ascontiguousarray(bufs[b.operand], dtype=np.uint32) for b in spec.inputs]


def _wgmma_read(spec, model, out):
    lay = _shaped(spec, model).layout("d")
    rd = spec.output.words
    regs = np.asarray(out, dtype=np.uint32).reshape(-1, THREADS, rd)
    return np.stack([lay.unpack(r).astype(np.uint64) for r in regs])


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


def _tmem_st(var, col0, count, base="taddr + lane"):
    out = []
    for s, c in _chunks(count):
        regs = ", ".join(f"%{1 + i}" for i in range(c))
        ins = ", ".join(f'"r"({var}[{s + i}])' for i in range(c))
        out.append(f'  asm volatile("tcgen05.st.sync.aligned.32x32b.x{c}.b32 [%0], {{{regs}}};\\n'
                   f'tcgen05.wait::st.sync.aligned;" :: "r"({base} + {col0 + s}u), {ins} : "memory");\n')
    return "".join(out)


def _tmem_ld(var, col0, count, base="taddr + lane"):
    out = []
    for s, c in _chunks(count):
        regs = ", ".join(f"%{i}" for i in range(c))
        outs = ", ".join(f'"=r"({var}[{s + i}])' for i in range(c))
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


def _tcgen05_spec(model, m: int, n: int) -> KernelSpec:
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
                + _regs_loop("c", "pc", rd) + _tmem_st("c", 0, rd))
    for i, (op, (c0, wds)) in enumerate(extra.items()):
        code.append(f"  uint32_t x{i}[{wds}];\n  const uint32_t* px{i} = in[{3 + i}] + (blk * {THREADS}u + t) * {wds}u;\n"
                    + _regs_loop(f"x{i}", f"px{i}", wds) + _tmem_st(f"x{i}", c0, wds))
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
    code.append(f"  uint32_t d[{rd}];\n" + _tmem_ld("d", 0, rd)
                + f"  uint32_t* po = out + (blk * {THREADS}u + t) * {rd}u;\n" + _regs_loop("po", "d", rd))
    code.append('  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");\n' + sync
                + '  if (w == 0) {\n    asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");\n'
                f'    asm volatile("tcgen05.dealloc.{g}.sync.aligned.b32 %0, {ncols};" :: "r"(taddr) : "memory");\n  }}\n')
    code.append("}\n")
    target = "sm_103a" if model.arch == "Blackwell Ultra" else "sm_100a"
    return KernelSpec(arch=model.arch, instruction=model.instruction, qualifiers={}, target=target,
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
    return type(model)(model.datapath, model._reg, backend=model.backend,
                       resolution=attrs.evolve(model.resolution, m=m, n=n))


def _tmem_extra(spec, model, ops, cases):
    """The per-thread words of the scale factors' and the sparse metadata's TMEM images:
    ``Model.fragments(op, X)`` of each case (``(128 * CTAs, columns)``), CTA ``r``'s lanes
    ``128 r ..`` in the buffer of block ``case * CTAs + r``, thread ``t`` holding lane ``t``."""
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


def _tcgen05_place(spec, model, ops):
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
    images they are (:class:`mmasim.harness.run.SimulatedDevice`)."""
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


def _tcgen05_read(spec, model, out):
    frag = tmem_datapath(spec.options["layout"], spec.options["n"])
    rd, group = spec.output.words, spec.cluster
    regs = np.asarray(out, dtype=np.uint32).reshape(-1, group, THREADS, rd)
    mask = np.uint64((1 << model.d_format.container_bits) - 1)
    return np.stack([np.concatenate([frag.unpack(regs[i, r]).astype(np.uint64) & mask for r in range(group)])
                     for i in range(regs.shape[0])])


# ============================================================== the protocol
def specs(model, n=None, m=None) -> list:
    """The kernels of ``model``'s instruction.

    wgmma: one kernel per N of ``n`` (default :data:`WGMMA_N`: the smallest and the largest
    legal N) and per A source (shared memory, registers).  tcgen05: one kernel per M of
    ``m`` (default: every legal M) at N = ``n`` (default: the smallest legal N)."""
    op = model.datapath.op
    if op == "wgmma.mma_async":
        ns = WGMMA_N if n is None else (n if isinstance(n, (tuple, list)) else (n,))
        ns = sorted({_resolve_n(model, x) for x in ns})
        return [_wgmma_spec(model, x, src) for x in ns for src in ("smem", "registers")]
    if op == "tcgen05.mma":
        nn = _resolve_n(model, "min" if n is None else n)
        ms = tuple(model.legal_m) if m is None else (m if isinstance(m, (tuple, list)) else (m,))
        return [_tcgen05_spec(model, x, nn) for x in ms]
    raise UnsupportedDatapath(f"{model.instruction}: not an asynchronous NVIDIA MMA (wgmma.mma_async / tcgen05.mma)")


def place(spec, model, ops: dict) -> list:
    """The kernel's input buffers (uint32, in ``spec.inputs`` order) for operand matrices ``ops``."""
    return _tcgen05_place(spec, model, ops) if spec.options.get("family") == "tcgen05" \
        else _wgmma_place(spec, model, ops)


def read(spec, model, out) -> np.ndarray:
    """D ``(cases, M, N)`` (uint64 words) from the kernel's output buffer."""
    return _tcgen05_read(spec, model, out) if spec.options.get("family") == "tcgen05" \
        else _wgmma_read(spec, model, out)
