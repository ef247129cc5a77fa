"""Harness kernels of Hopper's ``wgmma.mma_async`` (PTX ISA 9.0 §9.7.15, ``.sp`` included), in the
protocol of :mod:`mmasim.harness.spec`: :func:`specs`, :func:`place`, :func:`read`, and :func:`simulate`
(the kernel run in software, for :class:`mmasim.harness.measure.SimulatedDevice`).

Owns the warpgroup kernel (:func:`_wgmma_spec`): one per N and per A source, shared memory or
registers.  The shared-memory images are :mod:`mmasim.harness.nv_common`'s, the register
fragments ``Model.fragments``'; Blackwell ``tcgen05.mma`` has its own emitter,
:mod:`mmasim.harness.nv_tcgen05`.  An operand whose layout ``Model.fragments`` refuses (the
wgmma.sp metadata and sparse A where :mod:`mmasim.placement` has none) makes ``place`` raise
:class:`mmasim.UnsupportedDatapath`; the kernel still compiles.
"""

import numpy as np

from mmasim.errors import MMAError, ShapeError, UnsupportedDatapath
from mmasim.arith.sparse import select
from mmasim.harness.nv_common import (
    THREADS,
    _cname,
    _copy_smem,
    _fmt,
    _fragments,
    _missing,
    _regs_loop,
    _resolve_n,
    _smem_addr,
    image_operand,
    operand_image,
    packing,
    smem_layout,
)
from mmasim.harness.host import build_line, source
from mmasim.harness import table
from mmasim.harness.spec import Buffer, KernelSpec, compile_target

__all__ = ["specs", "place", "read", "source", "build_line", "simulate", "operand_image", "image_operand",
           "packing", "smem_layout", "THREADS", "WGMMA_N"]

#: N of the wgmma kernels ``specs`` emits by default: the smallest and the largest legal N
#: (every N gives the same datapath in mmasim; these two cover the accumulator layout's
#: first column block and its full width).  ``specs(model, n=...)`` takes any legal N, or a
#: tuple of them (``n=tuple(model.legal_n)``: every one).  Two N keep the compile check of
#: the test suite small (160 Hopper kernels by default, 2252 with every legal N).
WGMMA_N = ("min", "max")


# ============================================================== wgmma.mma_async
def _wgmma_imms(a_type: str, a_source: str) -> str:
    if a_type in ("f16", "bf16"):
        return "1, 1, 0, 0" if a_source == "smem" else "1, 1, 0"
    if a_type in ("tf32", "e4m3", "e5m2"):
        return "1, 1"
    return ""


def _wgmma_spec(model, n: int, a_source: str) -> KernelSpec:
    """The kernel at N = ``n`` with A from ``a_source`` ("smem" / "registers"): a 128-thread
    warpgroup; B always, A optionally, from shared memory through a 64-bit matrix descriptor
    (K-major, no swizzle: :class:`mmasim.placement.SmemLayout`), A otherwise from registers
    (``Model.fragments("a")``), C loaded into the accumulator registers
    (``Model.fragments("c")``) and ``scale-d = 1``; ``wgmma.fence``, the instruction,
    ``wgmma.commit_group``, ``wgmma.wait_group 0``.  ``options["n"]`` and
    ``options["a_source"]`` record the choice."""
    dp = model.datapath
    M, K = 64, dp.k
    sparse = bool(dp.sparse)
    ka = dp.stored_k if sparse else K
    at, bt, dt = _fmt(model.a_format), _fmt(model.b_format), _fmt(model.d_format)
    abits, bbits = model.a_format.container_bits, model.b_format.container_bits
    asm = (f"wgmma.mma_async{'.sp' if sparse else ''}.sync.aligned.m64n{n}k{K}"
           f"{'.satfinite' if dp.saturate else ''}.{dt}.{at}.{bt}")
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
    nxt = rd
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
    return KernelSpec(arch=model.arch, instruction=model.instruction, qualifiers={},
                      target=compile_target(model, "NVIDIA"),
                      threads=THREADS, name=name, assembly=asm, inputs=tuple(inputs),
                      output=Buffer("d", "registers", rd, layout="Model.layout('d')"), device="".join(code),
                      options={"n": n, "m": M, "a_source": a_source, "family": "wgmma",
                               **({"sparsity_selector": 0} if sparse else {})})


def _shaped(spec, model):
    """The model of the kernel's exact shape (its layouts depend on N)."""
    from mmasim.execution.model import Model
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


def simulate(spec, model, inputs, cases: int) -> np.ndarray:
    """The output buffer a ``wgmma.mma_async`` kernel writes (``(cases, 128 threads, D
    registers)``, flat), computed in software from its input buffers: per case, B's (and A's,
    from shared memory) image with the kernel's descriptor, A's registers otherwise, C's
    accumulator registers and the metadata registers handed to ``Model.warp`` as the kernel
    holds them (:class:`mmasim.harness.measure.SimulatedDevice`)."""
    if spec.options.get("family") != "wgmma":
        raise UnsupportedDatapath(f"{spec.name}: not a wgmma.mma_async kernel")
    shaped = _shaped(spec, model)
    per = {b.operand: np.asarray(x, dtype=np.uint32).reshape(cases, -1) for b, x in zip(spec.inputs, inputs)}
    a_smem = spec.inputs[0].space == "smem"
    extra = {"a_descriptor": spec.inputs[0].descriptor} if a_smem else {}
    out = []
    for i in range(cases):
        a = per["a"][i] if a_smem else per["a"][i].reshape(THREADS, -1)
        if "sparse_metadata" in per:
            extra["sparse_metadata"] = per["sparse_metadata"][i].reshape(THREADS, -1)
            extra["sparsity_selector"] = spec.options.get("sparsity_selector", 0)
        d = shaped.warp(a, per["b"][i], per["c"][i].reshape(THREADS, -1), b_descriptor=spec.inputs[1].descriptor,
                        **extra)
        out.append(np.asarray(d, dtype=np.uint32).reshape(THREADS, -1))
    return np.stack(out).reshape(-1)


def _wgmma_read(spec, model, out):
    lay = _shaped(spec, model).layout("d")
    rd = spec.output.words
    regs = np.asarray(out, dtype=np.uint32).reshape(-1, THREADS, rd)
    return np.stack([lay.unpack(r).astype(np.uint64) for r in regs])


# ============================================================== the protocol
def specs(model, n=None) -> list:
    """The kernels of ``model``'s instruction: one per N of ``n`` (default :data:`WGMMA_N`: the
    smallest and the largest legal N) and per A source (shared memory, registers)."""
    table.refuse_unless_emitted_by(model, __name__)
    ns = WGMMA_N if n is None else (n if isinstance(n, (tuple, list)) else (n,))
    ns = sorted({_resolve_n(model, x) for x in ns})
    return [_wgmma_spec(model, x, src) for x in ns for src in ("smem", "registers")]


def place(spec, model, ops: dict) -> list:
    """The kernel's input buffers (uint32, in ``spec.inputs`` order) for operand matrices ``ops``."""
    return _wgmma_place(spec, model, ops)


def read(spec, model, out) -> np.ndarray:
    """D ``(cases, M, N)`` (uint64 words) from the kernel's output buffer."""
    return _wgmma_read(spec, model, out)
