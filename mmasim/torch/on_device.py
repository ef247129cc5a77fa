"""The emulated GEMM of :mod:`mmasim.torch.matmul` on a CUDA device (issue 31): under
``backend="cuda"`` (or ``MMASIM_BACKEND=cuda``) with operands on the device (CUDA tensors,
numba device arrays), nothing comes to the host but flags and scalars.

The operands are quantized where they lie by the compiled quantization
(:mod:`mmasim.quantization.compiled`: a cast, FP8 per-tensor scaling, or a scheme whose scales
the instruction applies: OCP MX, NVFP4 with its seeded stochastic rounding and Hadamard
transform, :mod:`mmasim.quantization.on_device`), padded as :func:`mmasim.torch.matmul.matmul` pads them
(zeros read past the matrix's end); B's blocks run along K, so B is read transposed (a device
copy). Their words go to :func:`mmasim.gemm`'s plain chain on the device
(:mod:`mmasim.composition.on_device`) and D's words become float32 values times the decode
scales (``alpha``) by :func:`mmasim.backends.cuda.quantize.values_body`, on the device; D is a
torch tensor for torch operands.  What comes to the host: each body's status flag, the tensor
amax of per-tensor scaling and NVFP4 (one value), the GEMM's own flags.

:func:`takes` says which emulations run so; the others (promotion, split-K, an output format,
DeepSeek's promotion scales, delayed scaling, an output other than f32 / f16 words) are
computed from host copies of the operands, and D returned to the device (:func:`from_host`).
"""

from __future__ import annotations

import numpy as np


#: what :func:`takes` says when neither operand lies on a CUDA device (or numba-cuda is not installed)
NO_DEVICE = "no operand is on a CUDA device"


def takes(a, b, em, backend) -> str:
    """Why the GEMM of ``a`` and ``b`` under ``em`` does not run on the device ('' when it does;
    :data:`NO_DEVICE` when it is a GEMM of host operands)."""
    from mmasim import backends
    from mmasim.backends.cuda import missing

    if missing():
        return NO_DEVICE
    from mmasim.backends.cuda import device
    from mmasim.quantization import compiled

    if not (device.is_device(a) or device.is_device(b)):
        return NO_DEVICE
    if not (device.is_device(a) and device.is_device(b)):
        return "an operand is on the host"
    if backends.resolve(backend) != "cuda":
        return "the backend is not cuda"
    if em.scaling not in ("cast", "tensor", "scheme"):
        return f"scaling={em.scaling!r} keeps its state on the host"
    if em.promote_every or em.split_k or em.output:
        return "promotion, split-K and an output format run on the host"
    if em.hadamard and em.recipe_scheme().hadamard != "bf16":
        return f"the Hadamard transform reads {em.recipe_scheme().hadamard} values, which the device makes from bf16 only"
    if em.scaling == "scheme" and em.recipe_scheme().scale_use != "instruction":
        return "a scheme's promotion scales run on the host"
    model = em.model()
    if model.plan.encoding.format not in ("f32", "f16"):
        return "D's words are read as f32 or f16 values"
    for fmt in (model.a_format, model.b_format):
        scheme = em.scheme if em.scaling == "scheme" else fmt.key
        if compiled.placed_in(scheme) != fmt.key:
            return f"{scheme}'s words are moved into the {fmt.key} container on the host"
    return ""


def _transposed(x):
    """The transpose of a 2-D device matrix, on the device (a C-contiguous copy: the bodies are
    compiled for C-contiguous matrices, :func:`mmasim.backends.cuda.target.device_kernels`)."""
    from mmasim.backends.cuda import device

    return device._gather(device.as_device(x).T)


def _operand(x, em, fmt, pad, transposed: bool):
    """``(words, scales, decode scale)`` of one operand on the device: ``x`` ``(rows, K)`` (B
    read transposed), its words ``pad`` ``(rows', K')``; words and scales transposed back for B."""
    from mmasim.quantization import compiled, on_device

    if transposed:
        x, pad = _transposed(x), pad[::-1]
    scales, decode = None, np.float32(1)
    if em.scaling == "tensor":
        words, decode = compiled.per_tensor(x, fmt.key, target="cuda", pad=pad)
    elif em.scaling == "scheme":
        opts = {"scale_rounding": em.scale_rounding} if em.scale_rounding else {}
        if transposed and em.b_tile:
            opts["tile"] = em.b_tile
        if em.hadamard:     # as mmasim.torch.matmul: the operand rounded to the scheme's format, then transformed
            x, pad = on_device.bf16_values(compiled.quantize(x, em.recipe_scheme().hadamard, target="cuda",
                                                             pad=pad).words), None
            opts["hadamard"] = True
        if not transposed and em.a_rounding == "stochastic":
            opts.update(rounding="stochastic", seed=em.seed)
        q = compiled.quantize(x, em.scheme, -1, target="cuda", pad=pad, **opts)
        words, scales = q.words, q.scales
        decode = np.float32(1) if q.tensor_scale is None else np.float32(q.tensor_scale)
    else:
        words = compiled.quantize(x, fmt.key, target="cuda", saturate=em.saturate, pad=pad).words
    if transposed:
        words, scales = words.T, None if scales is None else scales.T
    return words, scales, decode


def matmul(a, b, em, padded):
    """``a @ b`` (float32 device matrices ``(M, K)`` and ``(K, N)``) through the emulated GEMM on
    the device (:func:`takes` must say ''), padded to ``(M', N', K')``
    (:func:`mmasim.torch.matmul.padded_shape`): float32 ``(M, N)`` on the device, a torch tensor
    for torch operands."""
    from mmasim import gemm
    from mmasim.backends.cuda import device

    model = em.model()
    M, K = a.shape
    N = b.shape[1]
    Mp, Np, Kp = padded
    wa, sa, da = _operand(a, em, model.a_format, (Mp, Kp), False)
    wb, sb, db = _operand(b, em, model.b_format, (Kp, Np), True)
    scales = {"scale_a": sa, "scale_b": sb} if sa is not None else {}
    d = gemm(wa, wb, None, model=model, backend="cuda", **scales)
    return values(d, model, M, N, np.float32(da * db), device.first_on_device((a, b)))


def values(d, model, M, N, alpha, like):
    """The top-left ``(M, N)`` of D's words ``d`` (a device matrix of ``model``'s D: f32 or f16)
    as float32 values times ``alpha`` (binary32), on the device
    (:func:`mmasim.backends.cuda.quantize.values_body`): a torch tensor where ``like`` is one."""
    from mmasim.backends.cuda import device
    from mmasim.backends.cuda.quantize import CudaArrays, values_body

    out = CudaArrays.empty((M, N), np.float32)
    spec = np.array([model.plan.encoding.format == "f16", alpha], np.float64)
    CudaArrays.launch(values_body, M * N, device.as_device(d), CudaArrays.empty((0, 0), np.int64),
                      CudaArrays.put(np.zeros((2, 15), np.int64)), CudaArrays.put(np.zeros(1, np.int64)),
                      CudaArrays.put(spec), out, out, CudaArrays.put(np.zeros(1, np.int8)))
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
