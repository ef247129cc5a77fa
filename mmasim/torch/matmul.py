"""One emulated GEMM on float matrices: ``a @ b`` as an :class:`~mmasim.torch.Emulation` says.

Floats become words (a cast, per-tensor FP8 scaling, or a ``mmasim.quantize`` scheme), the
matrices are padded with zeros to whole instruction tiles (zero rows, columns and K elements,
as a kernel pads a partial tile), :func:`mmasim.gemm` computes D from a zero start (C = None), and D's values
(``words=False``) become float32 values (scaled back in binary32 for per-tensor scaling, rounded to the output
format where one is named).  numpy in, numpy out; :mod:`mmasim.torch.linear` wraps it for torch.

A cast or per-tensor scaling acts on each element alone: the unpadded matrix is cast and its
words padded with the word of +0 (the word a zero element is cast to), and a ``memo`` keeps the
words of a named tensor, so that the GEMMs of a layer that read the same tensor in the same
format (x and W in the forward and a backward GEMM, dy in both) cast it once.
"""

from __future__ import annotations

import math

import numpy as np

from mmasim.errors import OperandError


def _round_up(n: int, q: int) -> int:
    return -(-n // q) * q


def _tiles(model, promote_every):
    """(M multiple, N multiple, K multiple) a GEMM of ``model`` needs."""
    ms, ns = model.legal_m, model.legal_n
    m = min(ms) if ms else 1
    n = min(ns) if ns else 1
    if model.shape:
        m, n = model.shape
    k = model.datapath.k
    if promote_every:
        k = promote_every
    return m, n, k


def _pad(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    if x.shape == (rows, cols):
        return x
    out = np.zeros((rows, cols), dtype=x.dtype)
    out[:x.shape[0], :x.shape[1]] = x
    return out


def _tensor_scale(x: np.ndarray, fmt) -> np.float32:
    """Per-tensor scale of ``x`` as Transformer Engine's current scaling computes it
    (:func:`mmasim.quantization.quantize.current_scale`)."""
    from mmasim.quantization.quantize import current_scale, refuse_nonfinite_amax
    amax = np.float32(np.max(np.abs(x))) if x.size else np.float32(0)
    refuse_nonfinite_amax(amax)
    return current_scale(amax, fmt)


def _operand(x: np.ndarray, fmt, em, axis: int, role=None):
    """(words or Quantized, binary32 decode scale to multiply D by) of one operand (``role``: the
    tensor's name, whose delayed-scaling state ``scaling="delayed"`` reads and records into)."""
    from mmasim import quantize
    if em.scaling == "delayed":
        q = em.delayed.scaling(role, fmt.key).quantize(x)
        return q.words, q.tensor_scale
    if em.scaling == "scheme":      # block and tensor scales travel with the operand into gemm
        tile = em.b_tile if axis == 0 and em.b_tile else None
        opts = {"tile": tile} if tile else {}
        if em.scale_rounding:
            opts["scale_rounding"] = em.scale_rounding
        if em.hadamard:     # the transform's kernel reads the scheme's format: the operand rounded to it (RNE)
            opts["hadamard"] = True
            x = quantize(x, em.recipe_scheme().hadamard).dequantize().astype(np.float32)
        if axis != 0 and em.a_rounding == "stochastic":
            opts.update(rounding="stochastic", seed=em.seed)
        return quantize(x, em.scheme, axis=axis, **opts), np.float32(1)
    if em.scaling == "tensor":
        s = _tensor_scale(x, fmt)
        with np.errstate(over="ignore"):
            scaled = (x * s).astype(np.float32)
        q = quantize(scaled, fmt.key, saturate=True)
        return q.words, np.float32(np.float32(1) / s)
    return quantize(x, fmt.key, saturate=em.saturate).words, np.float32(1)


def _elementwise(x: np.ndarray, fmt, em, rows: int, cols: int, memo, key):
    from mmasim import quantize
    """(words padded to ``rows`` x ``cols`` with +0's word, decode scale) of ``x`` under a cast or
    per-tensor scaling.  ``key``: ``None``, or ``(name, transposed)``: ``x`` is the tensor ``name``
    (or its transpose), whose words ``memo`` keeps per format and scaling."""
    tag = None if memo is None or key is None else (key[0], fmt.key, em.scaling, em.saturate)
    if tag is not None and tag in memo:
        words, scale = memo[tag]
    else:
        own = x.T if key is not None and key[1] else x
        words, scale = _operand(own, fmt, em, axis=-1, role=None if key is None else key[0])
        if tag is not None:
            memo[tag] = words, scale
    if key is not None and key[1]:
        words = words.T
    if words.shape != (rows, cols):
        zero = quantize(np.zeros((1, 1), np.float32), fmt.key).words[0, 0]   # +0 under every scaling
        out = np.full((rows, cols), zero, dtype=words.dtype)
        out[:words.shape[0], :words.shape[1]] = words
        words = out
    return np.ascontiguousarray(words), scale


def padded_shape(em, model, M: int, N: int, K: int) -> tuple:
    """``(M', N', K')``: the sides the GEMM of an ``(M, K)`` by ``(K, N)`` product is padded to
    (whole instruction tiles, promotion intervals, split-K parts and scale tiles)."""
    tm, tn, tk = _tiles(model, em.promote_every)
    if em.scaling == "scheme":      # whole scale tiles of the scheme cover the padded matrices
        pm, pn, pk = em.recipe_scheme().pad
        tm, tn, tk = math.lcm(tm, pm), math.lcm(tn, pn), math.lcm(tk, pk)
    if em.split_k:
        tk *= em.split_k
    return _round_up(max(M, 1), tm), _round_up(max(N, 1), tn), _round_up(max(K, 1), tk)


def device_route(a, b, em, backend) -> str | None:
    """``None`` for host operands; for operands on a CUDA device, why ``a @ b`` does not run there
    ('' when it does: :func:`mmasim.torch.on_device.takes`)."""
    if isinstance(a, np.ndarray) and isinstance(b, np.ndarray):
        return None
    from mmasim.torch import on_device as device_gemm
    why = device_gemm.takes(a, b, em, backend)
    return None if why == device_gemm.NO_DEVICE else why


def on_device(a, b, em, backend) -> bool:
    """Whether ``a @ b`` runs on the CUDA device."""
    return device_route(a, b, em, backend) == ""


def _keys(em, keys) -> tuple:
    """A's and B's ``keys``; under delayed scaling an unnamed operand's role is its side."""
    ka, kb = keys
    if em.scaling == "delayed":
        ka, kb = ka or ("A", False), kb or ("B", False)
    return ka, kb


def matmul(a, b, emulation, *, progress=False, threads=None, backend=None, memo=None,
           keys=(None, None)) -> np.ndarray:
    """``a @ b`` (float ``(M, K)`` by ``(K, N)``) through the emulated GEMM: float32 ``(M, N)``.

    ``memo`` (a dict) and ``keys`` (for ``a`` and ``b``: ``None`` or ``(name, transposed)``):
    under a cast or per-tensor scaling, the words of the tensors so named are cast once and
    kept in ``memo`` for the next GEMM that reads them (see the module)."""
    from mmasim import gemm
    route = device_route(a, b, emulation, backend)
    if route is not None:
        from mmasim.torch import on_device as device_gemm
        if route == "":             # CUDA operands under backend="cuda": all on the device
            pad = padded_shape(emulation, emulation.model(), a.shape[0], b.shape[1], a.shape[1])
            return device_gemm.matmul(a, b, emulation, pad, tuple(k and k[0] for k in _keys(emulation, keys)))
        return device_gemm.from_host(matmul, a, b, emulation, progress=progress, threads=threads, backend=backend,
                                     memo=memo, keys=keys)
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise OperandError(f"emulated matmul: shapes {a.shape} and {b.shape} do not multiply")
    em = emulation
    model = em.model()
    M, K = a.shape
    N = b.shape[1]
    Mp, Np, Kp = padded_shape(em, model, M, N, K)
    if em.scaling == "scheme":      # block scales: the padded matrix is quantized
        qa, sa = _operand(_pad(a, Mp, Kp), model.a_format, em, axis=-1)
        qb, sb = _operand(_pad(b, Kp, Np), model.b_format, em, axis=0)
    else:
        ka, kb = _keys(em, keys)
        qa, sa = _elementwise(a, model.a_format, em, Mp, Kp, memo, ka)
        qb, sb = _elementwise(b, model.b_format, em, Kp, Np, memo, kb)
    d = gemm(qa, qb, None, model=model, progress=progress, threads=threads, backend=backend, words=False,
             **em.gemm_options())
    y = np.asarray(d, dtype=np.float32)[:M, :N]     # D's values (f16 / bf16 / f32: exact in float32)
    if sa != 1 or sb != 1:      # alpha = the two decode scales, D = alpha * D, binary32 (the epilogue)
        y = (y * np.float32(sa * sb)).astype(np.float32)
    if em.output:
        from mmasim import quantize
        q = quantize(y, em.output, saturate=True, nan="propagate")
        y = q.dequantize().astype(np.float32)
    return y
