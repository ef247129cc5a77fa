"""The steps the attention kernels' models share (:mod:`mmasim.torch.flash_attention`,
:mod:`mmasim.torch.scaled_attention`), each a torch op where the tensors lie or one of mmasim's
own rules, so that CUDA tensors under ``backend="cuda"`` give the host's words and no matrix
leaves the device:

- :func:`words_of`: a float32 matrix cast into a format (RN, saturating) by the one rounding
  engine (the compiled quantization on the device, :func:`cast_words` on the host);
- :func:`values_of`: the float32 values of a format's words, where the words lie;
- :func:`block_gemm`: one :func:`mmasim.gemm` of an instruction on words (and block scales);
- :func:`tree_sum`: a float32 sum in one fixed order (pairwise halves), the same on every machine
  and device: the kernels' own reduction orders (threads, then quads) are not modelled
  (assumed), and torch's sums differ between the CPU and CUDA;
- :func:`ex2`: ``ex2.approx.ftz.f32`` as :func:`mmasim.arith.ex2.ex2` (2^x correctly rounded,
  assumed);
- :func:`ffma`: ``a * b + c`` rounded once to binary32 (FFMA), by exact binary64 steps
  (:func:`mmasim.arith.ex2.binary32_of_sum`);
- :func:`bf16`: the float32 tensor rounded to bfloat16 (torch's conversion: RNE on the CPU and
  on CUDA).

Divisions and products are torch's binary32 ones (IEEE 754, correctly rounded on the CPU and in
CUDA's non-fast-math kernels that torch ships).
"""

from __future__ import annotations

import numpy as np

from mmasim.arith import ex2 as ex2_rule
from mmasim.arith import ieee
from mmasim.torch.function import torch_

F32 = np.float32


def cast_words(key, x):
    """RN(x) into format ``key``, saturating (``cvt.rn.satfinite``): its words (numpy)."""
    from mmasim.quantization import casts
    from mmasim.quantization.quantize import format_named
    return casts.cast(format_named(key), np.asarray(x, np.float64), saturate=True, what=f"attention {key}")


def host_values(key, words):
    """The values of format ``key``'s words (numpy)."""
    from mmasim.quantization import casts
    from mmasim.quantization.quantize import format_named
    return casts.values(format_named(key), words)


def round_up(n, q):
    return -(-n // q) * q


def pad(x, rows, cols, value=0):
    """``x`` (a numpy matrix or a torch tensor) in the top-left of a ``(rows, cols)`` matrix of ``value``."""
    if isinstance(x, np.ndarray):
        out = np.full((rows, cols), value, dtype=x.dtype)
    else:
        out = x.new_full((rows, cols), value)
    out[:x.shape[0], :x.shape[1]] = x
    return out


def tiles(model):
    """(M, N, K) multiples a GEMM of ``model`` takes."""
    ms, ns = model.legal_m, model.legal_n
    m, n = (min(ms) if ms else 1), (min(ns) if ns else 1)
    if model.shape:
        m, n = model.shape
    return m, n, model.datapath.k


def words_of(key, x, padded, on_device):
    """The words of ``x`` (a float32 tensor, a matrix) cast into format ``key`` (RN, saturating),
    padded with zeros to ``padded``: on the device by the compiled quantization (a device array),
    else by :func:`cast_words` on a host copy (numpy)."""
    if on_device:
        from mmasim.quantization import compiled
        return compiled.quantize(x, key, target="cuda", saturate=True, pad=padded).words
    return cast_words(key, pad(x.numpy(), *padded))


def values_of(key, words, like):
    """The float32 values of format ``key``'s words (a matrix), a tensor where ``like`` lies
    (``like`` ``None``: host words, a CPU tensor)."""
    torch = torch_()
    if like is None:
        return torch.from_numpy(np.ascontiguousarray(host_values(key, words), F32))
    from mmasim.backends.cuda import device
    from mmasim.quantization import compiled
    from mmasim.quantization.quantize import format_named
    out = compiled.values(device.as_device(words), format_named(key), target="cuda")
    return device.as_given_kind(out, like)


def block_gemm(a_words, b_words, model, c, like, scale_a=None, scale_b=None):
    """``a @ b + c`` of ``model`` on words (``scale_a`` / ``scale_b``: block scale words), ``c``
    float32 values (a tensor) or ``None`` (zero): a float32 tensor; on the device, as a tensor
    like ``like``, where the words lie there (``like`` ``None``: host words)."""
    from mmasim import gemm
    torch = torch_()
    scales = dict(scale_a=scale_a, scale_b=scale_b)
    if like is not None:
        from mmasim.torch import on_device as device_gemm
        cw = None if c is None else c.contiguous().view(torch.uint32)
        d = gemm(a_words, b_words, cw, model=model, backend="cuda", **scales)
        return device_gemm.values(d, model, a_words.shape[0], b_words.shape[1], np.float32(1), like)
    cw = None if c is None else np.ascontiguousarray(c.numpy()).view(np.uint32)
    d = np.asarray(gemm(a_words, b_words, cw, model=model, **scales))
    return torch.from_numpy(np.ascontiguousarray(d).view(F32) if d.dtype == np.uint32 else d.astype(F32))


def tree_sum(x, dim=-1):
    """The float32 sum of ``x`` along ``dim`` in one fixed order: the length padded with zeros to
    a power of two, then element ``i`` added to element ``i + n / 2`` until one is left (each
    addition binary32, RNE)."""
    torch = torch_()
    x = x.movedim(dim, -1)
    n = x.shape[-1]
    width = 1 << max(n - 1, 0).bit_length()
    if width != n:
        x = torch.nn.functional.pad(x, (0, width - n))
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        x = x[..., :half] + x[..., half:]
    return x[..., 0] if n else x.new_zeros(x.shape[:-1])


def _differentiable(exact, plain, *args):
    """``exact(*args)``'s values; where a gradient is wanted, the gradient of ``plain(*args)`` (the
    same function in torch's ops: the kernels' rules change the last bits, not the derivative)."""
    torch = torch_()
    if not (torch.is_grad_enabled() and any(t.requires_grad for t in args)):
        return exact(*args)

    class Exact(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *xs):
            ctx.save_for_backward(*xs)
            return exact(*xs)

        @staticmethod
        def backward(ctx, grad):
            xs = [x.detach().requires_grad_(x.requires_grad) for x in ctx.saved_tensors]
            with torch.enable_grad():
                y = plain(*xs)
            wanted = [x for x in xs if x.requires_grad]
            got = iter(torch.autograd.grad(y, wanted, grad, allow_unused=True))
            return tuple(next(got) if x.requires_grad else None for x in xs)

    return Exact.apply(*args)


def ex2(x):
    """``ex2.approx.ftz.f32`` of a float32 tensor (:func:`mmasim.arith.ex2.ex2`), differentiable
    (the derivative of ``2^x``)."""
    return _differentiable(ex2_rule.ex2, torch_().exp2, x)


def _ffma(a, b, c):
    return ex2_rule.binary32_of_sum(*ieee.two_sum(a.double() * b.double(), c.double()))


def ffma(a, b, c):
    """``a * b + c`` (float32 tensors on one device, broadcast) rounded once to binary32 (FFMA): the product
    exact in binary64, the sum's binary64 rounding and its exact error (TwoSum), the pair rounded
    to binary32 once (:func:`mmasim.arith.ex2.binary32_of_sum`); differentiable."""
    return _differentiable(_ffma, lambda x, y, z: x * y + z, a, b, c)


def bf16(x):
    """``x`` (float32) rounded to bfloat16 (RNE), as float32."""
    torch = torch_()
    return x.to(torch.bfloat16).float()
