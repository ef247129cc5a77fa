"""``linear``: ``torch.nn.functional.linear`` with autograd, its three GEMMs emulated.

The forward ``y = x W^T + b``, the input gradient ``dx = dy W`` and the weight gradient
``dW = dy^T x`` are each one :func:`mmasim.torch.matmul` (an :func:`mmasim.gemm`), through
:func:`mmasim.torch.function.bmm`; the bias is added, and its gradient summed, in float32 by
torch (the epilogue and a reduction outside the tensor core).  torch is imported only when this
runs.  :func:`mmasim.torch.emulate` routes a model's ``F.linear`` calls (and every other op that
multiplies matrices) the same way.
"""

from __future__ import annotations

from mmasim.errors import EmulationError, OperandError
from mmasim.torch.contract import linear as _contract
from mmasim.torch.emulation import Emulation, preset
from mmasim.torch.function import torch_
from mmasim.torch.ops import epilogue


def _emulation(emulation) -> Emulation:
    if isinstance(emulation, str):
        return preset(emulation)
    if not isinstance(emulation, Emulation):
        raise EmulationError(f"emulation must be an mmasim.torch.Emulation or a preset name (mmasim presets), "
                             f"not {type(emulation).__name__}")
    return emulation


def _check(t):
    torch = torch_()
    if not isinstance(t, torch.Tensor):
        raise OperandError(f"mmasim.torch: tensors only, not {type(t).__name__}")
    if t.is_sparse or t.layout != torch.strided:
        raise OperandError("mmasim.torch: sparse tensors are not supported; call .to_dense() first")
    if t.device.type == "meta":
        raise OperandError("mmasim.torch: meta tensors hold no values")
    if not t.is_floating_point():
        raise OperandError(f"mmasim.torch: float tensors only, not {t.dtype}")


def linear(x, weight, bias=None, emulation=None):
    """``x W^T + b`` as ``torch.nn.functional.linear`` computes it, each GEMM emulated.

    ``x``: ``(..., in)``, ``weight``: ``(out, in)``, ``bias``: ``(out,)`` or ``None``;
    ``emulation``: an :class:`Emulation` or a preset name.  Returns float32 ``(..., out)``;
    gradients flow to ``x``, ``weight`` and ``bias``."""
    torch = torch_()
    if emulation is None:
        raise EmulationError("mmasim.torch.linear needs emulation= (an Emulation or a preset name)")
    em = _emulation(emulation)
    for t in (x, weight) + (() if bias is None else (bias,)):
        _check(t)
    if weight.dim() != 2 or x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise OperandError(f"mmasim.torch.linear: x {tuple(x.shape)} and weight {tuple(weight.shape)} do not match "
                           "(x is (..., in), weight (out, in))")
    out = (*x.shape[:-1], weight.shape[0])
    if bias is not None:
        try:
            fits = torch.broadcast_shapes(bias.shape, out) == out
        except RuntimeError:
            fits = False
        if not fits:
            raise OperandError(f"mmasim.torch.linear: bias {tuple(bias.shape)} does not broadcast to the output "
                               f"{out} (bias is (out,))")
    return epilogue(_contract(x, weight, em), bias, empty=x.shape[-1] == 0)
