"""The emulated GEMM of :mod:`mmasim.torch.matmul` on a CUDA device (issue 31): under
``backend="cuda"`` (or ``MMASIM_BACKEND=cuda``) with operands on the device (CUDA tensors,
numba device arrays), nothing comes to the host but flags and scalars.

The operands are quantized where they lie by the compiled quantization
(:mod:`mmasim.quantization.compiled`: a cast, FP8 per-tensor scaling, FP8 delayed scaling, or a
scheme: OCP MX, NVFP4 with its tensor scale, seeded stochastic rounding and Hadamard transform
(:mod:`mmasim.quantization.on_device`), DeepSeek's FP8 tiles with their promotion scales), padded as :func:`mmasim.torch.matmul.matmul` pads them (zeros read past the matrix's
end) and placed by value into the containers the instruction reads
(:func:`mmasim.quantization.compiled.recontainer`: e2m1's 4-bit code, byte and RTX Blackwell
containers); B's blocks run along K, so B is read transposed (a device copy).  Under delayed
scaling the state stays the :class:`~mmasim.quantization.delayed.DelayedScaling`'s: the tensor
is cast on the device with its scale, and its amax, reduced on the device, is recorded (one
value).  Their words go to :func:`mmasim.gemm` on the device (:mod:`mmasim.composition.on_device`:
the plain chain, promotion with or without promotion scales, split-K), and D's words
become float32 values times the decode scales (``alpha``: per-tensor, delayed, NVFP4's tensor
scales) by :func:`mmasim.quantization.compiled.values`, on the device, then, with an output
format, are cast into it (saturating, NaN propagated) and read back, on the device; D is a torch
tensor for torch operands.  What comes to the host: each body's status flag, the tensor amax
of per-tensor and delayed scaling and NVFP4 (one value), the GEMM's own flags.

:func:`takes` says which emulations run so; the others (a Hadamard transform that reads another
format than bf16; a scheme whose rule has no compiled body; a format whose words the bodies
do not decode) are computed from host copies
of the operands, and D returned to the device (:func:`from_host`).
"""

from __future__ import annotations

import numpy as np


#: what :func:`takes` says when neither operand lies on a CUDA device (or numba-cuda is not installed)
NO_DEVICE = "no operand is on a CUDA device"


def _formats(em, model) -> tuple:
    """``(pairs, outputs)``: ``(container the words are made in, container the instruction
    reads)`` of A, B and the instruction scales, and D's format and the output format's
    container: the formats whose words the device decodes."""
    from mmasim.quantization import compiled
    from mmasim.quantization.quantize import format_named

    pairs = []
    for fmt in (model.a_format, model.b_format):
        scheme = em.scheme if em.scaling == "scheme" else fmt.key
        pairs.append((format_named(compiled.placed_in(scheme)), fmt))
    s = em.recipe_scheme()
    if s is not None and s.scale_use == "instruction" and model.scale_format is not None:
        pairs.append((format_named(s.scale_format), model.scale_format))
    out = [model.d_format] + ([format_named(compiled.placed_in(em.output))] if em.output else [])
    return pairs, out


def takes(a, b, em, backend) -> str:
    """Why the GEMM of ``a`` and ``b`` under ``em`` does not run on the device ('' when it does;
    :data:`NO_DEVICE` when it is a GEMM of host operands)."""
    from mmasim import backends
    from mmasim.backends.cuda import missing

    if missing():
        return NO_DEVICE
    from mmasim.backends.cuda import device
    from mmasim.backends.cuda.quantize import spec_rows
    from mmasim.quantization import compiled

    if not (device.is_device(a) or device.is_device(b)):
        return NO_DEVICE
    if not (device.is_device(a) and device.is_device(b)):
        return "an operand is on the host"
    if backends.resolve(backend) != "cuda":
        return "the backend is not cuda"
    if em.hadamard and em.recipe_scheme().hadamard != "bf16":
        return f"the Hadamard transform reads {em.recipe_scheme().hadamard} values, which the device makes from bf16 only"
    if em.scaling == "scheme" and not compiled.takes_rule(em.scheme):
        return f"{em.scheme}'s rule has no compiled body"
    pairs, out = _formats(em, em.model())
    for src, dst in pairs:
        if src.name != dst.name:
            return f"the instruction reads {dst.name}, not {src.name} (the host path refuses it)"
    fmts = list({f.key: f for f in [*(f for pair in pairs for f in pair), *out]}.values())
    bad = [f.key for f in fmts if spec_rows([], [f]) is None]
    if bad:
        return f"the compiled bodies do not decode {', '.join(bad)} words"
    return ""


def _transposed(x):
    """The transpose of a 2-D device matrix, on the device (a C-contiguous copy: the bodies are
    compiled for C-contiguous matrices, :func:`mmasim.backends.cuda.target.device_kernels`)."""
    from mmasim.backends.cuda import device

    return device._gather(device.as_device(x).T)


def _delayed(x, em, fmt, pad, role):
    """``(words, decode scale)`` of ``x`` under delayed scaling, on the device: the state of
    tensor ``role`` (:meth:`mmasim.torch.DelayedScalings.scaling`, on the host) records x's
    amax (reduced on the device, one value read back) and its scale casts x
    (:meth:`~mmasim.quantization.delayed.DelayedScaling.quantize`'s rule: ``RN(x * scale)``,
    saturating); NaN or an infinity is refused by the host code, on a host copy."""
    from mmasim.backends.cuda import device
    from mmasim.backends.cuda.quantize import CudaArrays, tensor_amax
    from mmasim.quantization import compiled

    ds = em.delayed.scaling(role, fmt.key)
    amax = tensor_amax(CudaArrays.put(x), CudaArrays)
    if amax is None:
        ds.quantize(device.to_host(x))      # raises the host code's error
    ds.record(amax)
    words = compiled.quantize(x, fmt.key, target="cuda", saturate=True, pad=pad, prescale=ds.scale).words
    return words, ds.scale_inv


def _operand(x, em, model, fmt, pad, transposed: bool, role):
    """``(words, instruction scales, promotion scales, decode scale)`` of one operand on the
    device: ``x`` ``(rows, K)`` (B read transposed), its words ``pad`` ``(rows', K')`` in
    ``fmt``'s container; words and scales transposed back for B."""
    from mmasim.quantization import compiled, on_device
    from mmasim.quantization.quantize import format_named

    if transposed:
        x, pad = _transposed(x), pad[::-1]
    scales = promotion = None
    decode = np.float32(1)
    if em.scaling == "tensor":
        words, decode = compiled.per_tensor(x, fmt.key, target="cuda", pad=pad)
    elif em.scaling == "delayed":
        words, decode = _delayed(x, em, fmt, pad, role)
    elif em.scaling == "scheme":
        opts = {"scale_rounding": em.scale_rounding} if em.scale_rounding else {}
        if transposed and em.b_tile:
            opts["tile"] = em.b_tile[::-1]
        if em.hadamard:     # as mmasim.torch.matmul: the operand rounded to the scheme's format, then transformed
            x, pad = on_device.bf16_values(compiled.quantize(x, em.recipe_scheme().hadamard, target="cuda",
                                                             pad=pad).words), None
            opts["hadamard"] = True
        if not transposed and em.a_rounding == "stochastic":
            opts.update(rounding="stochastic", seed=em.seed)
        q = compiled.quantize(x, em.scheme, -1, target="cuda", pad=pad, **opts)
        words = compiled.recontainer(q.words, format_named(q.container), fmt, target="cuda")
        if q.scale_use == "promotion":
            promotion = q.scales
        elif q.scales is not None:
            scales = compiled.recontainer(q.scales, format_named(q.scale_format), model.scale_format, target="cuda")
        decode = np.float32(1) if q.tensor_scale is None else np.float32(q.tensor_scale)
    else:
        words = compiled.quantize(x, fmt.key, target="cuda", saturate=em.saturate, pad=pad).words
    if transposed:
        words, scales, promotion = (None if y is None else y.T for y in (words, scales, promotion))
    return words, scales, promotion, decode


def matmul(a, b, em, padded, roles=(None, None)):
    """``a @ b`` (float32 device matrices ``(M, K)`` and ``(K, N)``) through the emulated GEMM on
    the device (:func:`takes` must say ''), padded to ``(M', N', K')``
    (:func:`mmasim.torch.matmul.padded_shape`); ``roles``: A's and B's delayed-scaling roles:
    float32 ``(M, N)`` on the device, a torch tensor for torch operands."""
    from mmasim import gemm
    from mmasim.backends.cuda import device
    from mmasim.quantization import compiled
    from mmasim.quantization.quantize import format_named

    model = em.model()
    M, K = a.shape
    N = b.shape[1]
    Mp, Np, Kp = padded
    wa, sa, pa, da = _operand(a, em, model, model.a_format, (Mp, Kp), False, roles[0])
    wb, sb, pb, db = _operand(b, em, model, model.b_format, (Kp, Np), True, roles[1])
    kwargs = em.gemm_options()
    if sa is not None:
        kwargs.update(scale_a=sa, scale_b=sb)
    if pa is not None:
        kwargs.update(promotion_scale_a=pa, promotion_scale_b=pb)
    d = gemm(wa, wb, None, model=model, backend="cuda", **kwargs)
    composed = any(k in kwargs for k in ("promote_every", "split_k", "promotion_scale_a"))
    like = device.first_on_device((a, b))
    y = values(d, model, M, N, np.float32(da * db), like, format_named("f32") if composed else None)
    if em.output:           # D rounded to the output format (saturating, NaN kept) and read back
        q = compiled.quantize(y, em.output, target="cuda", saturate=True, nan="propagate")
        y = values(q.words, model, M, N, np.float32(1), like, format_named(q.container))
    return y


def values(d, model, M, N, alpha, like, fmt=None):
    """The top-left ``(M, N)`` of words ``d`` (a device matrix of ``fmt``'s words; default:
    ``model``'s D) as float32 values times ``alpha`` (binary32), on the device
    (:func:`mmasim.quantization.compiled.values`): a torch tensor where ``like`` is one.  A
    composition's D (promotion, split-K) is binary32 words: ``fmt`` f32."""
    from mmasim.backends.cuda import device
    from mmasim.quantization import compiled

    out = compiled.values(device.as_device(d), model.d_format if fmt is None else fmt, target="cuda", alpha=alpha,
                          shape=(M, N))
    return device.as_given_kind(out, like)


def from_host(fn, a, b, em, **kwargs):
    """``fn(a, b, em, **kwargs)`` (:func:`mmasim.torch.matmul.matmul`) of operands some of which
    lie on the device, where :func:`takes` says the device does not take it: computed from host
    copies, D returned to the device (a torch tensor for torch operands), as :func:`mmasim.gemm`
    does with the options its device chain does not take."""
    from mmasim.backends.cuda import device

    y = fn(device.to_host(a), device.to_host(b), em, **kwargs)
    return device.as_given_kind(device.cuda_module().to_device(np.ascontiguousarray(y)),
                                device.first_on_device((a, b)))
