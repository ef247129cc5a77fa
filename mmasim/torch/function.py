"""The emulated batched GEMM with autograd: ``D[i] = A[i] @ B[i]`` and its two backward GEMMs.

Every op :func:`mmasim.torch.emulate` emulates, but the convolutions, lowers to this (the
convolutions to :mod:`mmasim.torch.conv`).  Each matrix of the batch is one
:func:`mmasim.torch.matmul` (so one :func:`mmasim.gemm`), its operands quantized as tensors of
their own.  The backward GEMMs put the incoming gradient in the A operand, as the FP8 recipes'
``e5m2 x e4m3`` instructions take it: ``dA = dD @ B^T`` (``dgrad``) and
``dB = (dD^T @ A)^T`` (``wgrad``).  Under a cast or per-tensor scaling the words of A and B cast
in the forward are kept for the backward GEMM that reads them in the same format, and dD's
words are cast once for both backward GEMMs (:mod:`mmasim.torch.matmul`'s memo).
"""

from __future__ import annotations

import numpy as np

from mmasim.errors import OperandError
from mmasim.torch.matmul import matmul, on_device


def torch_():
    """torch, or an :class:`~mmasim.errors.OperandError` naming the extra to install."""
    try:
        import torch
    except ImportError as exc:       # pragma: no cover - the [torch] extra
        raise OperandError("mmasim.torch needs torch: pip install 'mmasim-exact[torch]'") from exc
    return torch


def as_numpy(t) -> np.ndarray:
    """A float tensor's values as a float32 numpy array on the host (exact for f16, bf16, f32)."""
    torch = torch_()
    return t.detach().to("cpu", torch.float32).numpy()


def gemms(a: np.ndarray, b: np.ndarray, em, step: str, memo=None, keys=(None, None)) -> np.ndarray:
    """``a[i] @ b[i]`` for each ``i`` (``a`` ``(batch, M, K)``, ``b`` ``(batch, K, N)``), each one
    :func:`mmasim.torch.matmul` with the setting of GEMM ``step``; float32 ``(batch, M, N)``.
    ``keys``: for A and B, ``None`` or ``(name, transposed)``: matrix ``i`` is kept in ``memo`` as
    ``((name, i), transposed)``."""
    batch, m, k = a.shape
    n = b.shape[2]
    out = np.zeros((batch, m, n), np.float32)
    if not (batch and m and n and k):        # no product: D is the zero start
        return out
    setting = em.for_gemm(step)
    for i in range(batch):
        out[i] = matmul(a[i], b[i], setting, memo=memo, keys=batch_keys(keys, i))
    return out


def batch_keys(keys, i) -> tuple:
    """The keys of matrix ``i`` of a batch: ``((name, i), transposed)`` (its delayed-scaling role too)."""
    return tuple(None if key is None else ((key[0], i), key[1]) for key in keys)


def batched(a, b, em, step: str, memo=None, keys=(None, None)):
    """:func:`gemms` of float tensors ``a`` ``(batch, M, K)`` and ``b`` ``(batch, K, N)``: float32
    ``(batch, M, N)`` on ``a``'s device.  CUDA tensors under backend cuda stay on the device (each
    GEMM :func:`mmasim.torch.matmul` of device operands: :mod:`mmasim.torch.on_device`); other
    tensors are computed from host copies."""
    torch = torch_()
    batch, m, k = a.shape
    n = b.shape[2]
    setting = em.for_gemm(step)
    if batch and m and n and k and on_device(a[0], b[0], setting, None):     # CUDA tensors, backend cuda
        return torch.stack([matmul(a[i].float(), b[i].float(), setting, keys=batch_keys(keys, i))
                            for i in range(batch)])
    d = gemms(as_numpy(a), as_numpy(b), em, step, memo, keys)
    return torch.from_numpy(d).to(a.device)


def _run(a, b, em, step, memo, keys, record):
    if record is not None:
        record(step, a.shape[0], a.shape[1], b.shape[2], a.shape[2])
    return batched(a, b, em, step, memo, keys)


def _function():
    torch = torch_()
    from torch.autograd.function import once_differentiable

    class _GEMM(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a, b, em, record):
            ctx.save_for_backward(a, b)
            ctx.em, ctx.record, ctx.memo = em, record, {}
            return _run(a, b, em, "forward", ctx.memo, (("a", False), ("b", False)), record)

        @staticmethod
        @once_differentiable
        def backward(ctx, dd):
            a, b = ctx.saved_tensors      # raises if either was modified in place since
            memo = dict(ctx.memo)         # dD's words: this backward's own
            da = db = None
            if ctx.needs_input_grad[0]:
                da = _run(dd, b.mT, ctx.em, "dgrad", memo, (("dd", False), ("b", True)), ctx.record)
            if ctx.needs_input_grad[1]:
                db = _run(dd.mT, a, ctx.em, "wgrad", memo, (("dd", True), ("a", False)), ctx.record).mT
            return da, db, None, None

    return _GEMM


_FUNCTION: list = []


def bmm(a, b, em, record=None):
    """``a[i] @ b[i]`` (float tensors ``(batch, M, K)`` and ``(batch, K, N)``) through the
    emulated GEMMs, with autograd: float32 ``(batch, M, N)`` on ``a``'s device.  ``record``:
    ``None`` or a callable ``record(step, batch, m, n, k)`` called for each GEMM step run."""
    if not _FUNCTION:
        _FUNCTION.append(_function())
    if a.dim() != 3 or b.dim() != 3 or a.shape[0] != b.shape[0] or a.shape[2] != b.shape[1]:
        raise OperandError(f"emulated bmm: shapes {tuple(a.shape)} and {tuple(b.shape)} do not multiply")
    return _FUNCTION[0].apply(a, b, em, record)
