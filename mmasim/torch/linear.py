"""``linear`` with autograd and ``emulate``: torch layers through bit-exact GEMMs.

The forward ``y = x W^T + b``, the input gradient ``dx = dy W`` and the weight gradient
``dW = dy^T x`` are each one :func:`mmasim.torch.matmul` (an :func:`mmasim.gemm`); the bias
is added, and its gradient summed, in float32 by torch (the epilogue and a reduction outside
the tensor core).  torch is imported only when these run.
"""

from __future__ import annotations

import contextlib

import numpy as np

from mmasim.errors import EmulationError, OperandError
from mmasim.torch.emulation import Emulation, preset
from mmasim.torch.matmul import matmul


def _torch():
    try:
        import torch
    except ImportError as exc:       # pragma: no cover - the [torch] extra
        raise OperandError("mmasim.torch needs torch: pip install 'mmasim-exact[torch]'") from exc
    return torch


def _emulation(emulation) -> Emulation:
    if isinstance(emulation, str):
        return preset(emulation)
    if not isinstance(emulation, Emulation):
        raise EmulationError(f"emulation must be an mmasim.torch.Emulation or a preset name (mmasim presets), "
                             f"not {type(emulation).__name__}")
    return emulation


def _check(t):
    torch = _torch()
    if not isinstance(t, torch.Tensor):
        raise OperandError(f"mmasim.torch: tensors only, not {type(t).__name__}")
    if t.is_sparse or t.layout != torch.strided:
        raise OperandError("mmasim.torch: sparse tensors are not supported; call .to_dense() first")
    if t.device.type == "meta":
        raise OperandError("mmasim.torch: meta tensors hold no values")
    if not t.is_floating_point():
        raise OperandError(f"mmasim.torch: float tensors only, not {t.dtype}")


def _np(t):
    torch = _torch()
    _check(t)
    return t.detach().to("cpu", torch.float32).numpy()


def _mm(a, b, em, which, memo, keys):
    torch = _torch()
    y = matmul(_np(a), _np(b), em.for_gemm(which), memo=memo, keys=keys)
    return torch.from_numpy(y).to(a.device)


def _function():
    torch = _torch()

    class _Linear(torch.autograd.Function):
        # the words of x and W cast in the forward are kept (ctx.memo) for the backward GEMMs that
        # read them in the same format; dy's words only within one backward (matmul's memo)
        @staticmethod
        def forward(ctx, x2, weight, em):
            ctx.save_for_backward(x2, weight)
            ctx.em, ctx.memo = em, {}
            return _mm(x2, weight.t(), em, "forward", ctx.memo, (("x", False), ("w", True)))

        @staticmethod
        def backward(ctx, dy):
            x2, weight = ctx.saved_tensors      # raises if either was modified in place since
            memo = dict(ctx.memo)
            dx = _mm(dy, weight, ctx.em, "dgrad", memo, (("dy", False), ("w", False))) \
                if ctx.needs_input_grad[0] else None
            dw = _mm(dy.t(), x2, ctx.em, "wgrad", memo, (("dy", True), ("x", False))) \
                if ctx.needs_input_grad[1] else None
            return dx, dw, None

    return _Linear


_FUNCTION = []


def linear(x, weight, bias=None, emulation=None):
    """``x W^T + b`` as ``torch.nn.functional.linear`` computes it, each GEMM emulated.

    ``x``: ``(..., in)``, ``weight``: ``(out, in)``, ``bias``: ``(out,)`` or ``None``;
    ``emulation``: an :class:`Emulation` or a preset name.  Returns float32 ``(..., out)``;
    gradients flow to ``x``, ``weight`` and ``bias``."""
    torch = _torch()
    if emulation is None:
        raise EmulationError("mmasim.torch.linear needs emulation= (an Emulation or a preset name)")
    em = _emulation(emulation)
    for t in (x, weight) + (() if bias is None else (bias,)):
        _check(t)
    if not _FUNCTION:
        _FUNCTION.append(_function())
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise OperandError(f"mmasim.torch.linear: x {tuple(x.shape)} and weight {tuple(weight.shape)} do not match "
                           "(x is (..., in), weight (out, in))")
    lead, out = x.shape[:-1], (*x.shape[:-1], weight.shape[0])
    x2 = x.reshape(lead.numel(), x.shape[-1])      # not -1: with no input features that is ambiguous
    y = _FUNCTION[0].apply(x2, weight, em).reshape(out)
    if bias is None:
        return y
    try:
        fits = torch.broadcast_shapes(bias.shape, out) == out
    except RuntimeError:
        fits = False
    if not fits:
        raise OperandError(f"mmasim.torch.linear: bias {tuple(bias.shape)} does not broadcast to the output {out} "
                           "(bias is (out,))")
    b = bias.to(torch.float32)
    # with no input features there is no product: torch returns the bias itself (addmm's
    # beta * C for k = 0), -0 included, where the empty sum's +0 plus the bias would give +0;
    # torch.where keeps the GEMM in the graph, so x and W get their (empty) gradients
    return y + b if x.shape[-1] else torch.where(torch.ones((), dtype=torch.bool), b, y)


@contextlib.contextmanager
def emulate(model, emulation):
    """Within the block, every ``torch.nn.Linear`` of ``model`` runs :func:`linear` with
    ``emulation``; the modules are restored on exit (also on an exception).  Works under
    ``torch.no_grad()`` and in training loops."""
    torch = _torch()
    if not isinstance(model, torch.nn.Module):
        raise EmulationError(f"emulate needs a torch.nn.Module (the model whose nn.Linear layers to emulate), "
                             f"not {type(model).__name__}")
    em = _emulation(emulation)
    patched = []
    try:
        for module in model.modules():
            if isinstance(module, torch.nn.Linear):
                had = "forward" in module.__dict__
                old = module.__dict__.get("forward")

                def forward(inp, _m=module):
                    return linear(inp, _m.weight, _m.bias, emulation=em)

                module.forward = forward
                patched.append((module, had, old))
        yield model
    finally:
        for module, had, old in patched:
            if had:
                module.forward = old
            else:
                del module.forward
