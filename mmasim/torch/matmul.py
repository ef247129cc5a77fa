"""One emulated GEMM on float matrices: ``a @ b`` as an :class:`~mmasim.torch.Emulation` says.

Floats become words (a cast, per-tensor FP8 scaling, or a ``mmasim.quantize`` scheme), the
matrices are padded with zeros to whole instruction tiles (zero rows, columns and K elements,
as a kernel pads a partial tile), :func:`mmasim.gemm` computes D from a zero start (C = None), and D's words
become float32 values (scaled back in binary32 for per-tensor scaling, rounded to the output
format where one is named).  numpy in, numpy out; :mod:`mmasim.torch.linear` wraps it for torch.
"""

from __future__ import annotations

import numpy as np

from mmasim.errors import OperandError
from mmasim.operands.words import from_words


def _f32():
    from mmasim.registry.build import get_registry
    return get_registry().formats["f32"]


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


def _max_finite(fmt) -> float:
    from mmasim.quantization.casts import largest
    m, q = largest(fmt)
    return float(m) * 2.0 ** q


def _tensor_scale(x: np.ndarray, fmt) -> np.float32:
    """Per-tensor scale ``max_finite / amax`` in binary32 (1 for an all-zero tensor), as
    Transformer Engine's current scaling computes it (no margin)."""
    amax = np.float32(np.max(np.abs(x))) if x.size else np.float32(0)
    if not np.isfinite(amax):
        raise OperandError("per-tensor scaling: the tensor holds inf or NaN")
    if amax == 0:
        return np.float32(1)
    return np.float32(np.float32(_max_finite(fmt)) / amax)


def _operand(x: np.ndarray, fmt, em, axis: int):
    """(words or Quantized, binary32 decode scale to multiply D by) of one operand."""
    from mmasim import quantize
    if em.scaling == "scheme":      # block and tensor scales travel with the operand into gemm
        tile = em.b_tile if axis == 0 and em.b_tile else None
        return quantize(x, em.scheme, axis=axis, **({"tile": tile} if tile else {})), np.float32(1)
    if em.scaling == "tensor":
        s = _tensor_scale(x, fmt)
        with np.errstate(over="ignore"):
            scaled = (x * s).astype(np.float32)
        q = quantize(scaled, fmt.key, saturate=True)
        return q.words, np.float32(np.float32(1) / s)
    return quantize(x, fmt.key, saturate=em.saturate).words, np.float32(1)


def matmul(a, b, emulation, *, progress=False, threads=None, backend=None) -> np.ndarray:
    """``a @ b`` (float ``(M, K)`` by ``(K, N)``) through the emulated GEMM: float32 ``(M, N)``."""
    from mmasim import gemm
    a = np.asarray(a, dtype=np.float32)
    b = np.asarray(b, dtype=np.float32)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise OperandError(f"emulated matmul: shapes {a.shape} and {b.shape} do not multiply")
    em = emulation
    model = em.model()
    M, K = a.shape
    N = b.shape[1]
    tm, tn, tk = _tiles(model, em.promote_every)
    if em.scaling == "scheme" and em.scheme == "deepseek_fp8":
        tm, tk = max(tm, 1), max(tk, 128)
        tn = _round_up(max(tn, 128), tn)
    if em.split_k:
        tk *= em.split_k
    Mp, Np, Kp = _round_up(max(M, 1), tm), _round_up(max(N, 1), tn), _round_up(max(K, 1), tk)
    ap, bp = _pad(a, Mp, Kp), _pad(b, Kp, Np)
    qa, sa = _operand(ap, model.a_format, em, axis=-1)
    qb, sb = _operand(bp, model.b_format, em, axis=0)
    kwargs = {}
    if em.promote_every:
        kwargs["promote_every"] = em.promote_every
    if em.split_k:
        kwargs["split_k"] = em.split_k
        kwargs["split_reduce"] = em.split_reduce
    d = gemm(qa, qb, None, model=model, progress=progress, threads=threads, backend=backend, **kwargs)
    d = np.asarray(d)
    if d.dtype.kind in "ui":        # D's words, or binary32 words where gemm accumulates in f32
        fmt = model.d_format if d.dtype.itemsize * 8 == model.d_format.container_bits else _f32()
        d = from_words(d, fmt)
    y = np.asarray(d, dtype=np.float32)[:M, :N]
    if sa != 1 or sb != 1:      # alpha = the two decode scales, D = alpha * D, binary32 (the epilogue)
        y = (y * np.float32(sa * sb)).astype(np.float32)
    if em.output:
        from mmasim import quantize
        q = quantize(y, em.output, saturate=True, nan="propagate")
        y = q.dequantize().astype(np.float32)
    return y
