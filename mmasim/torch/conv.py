"""Convolutions as the implicit GEMMs CUTLASS and cuDNN run (``conv1d/2d/3d`` and their
transposes), forward and backward.

For ``x`` ``(N, C, H, W)`` and ``w`` ``(K, C/g, R, S)`` (CUTLASS's letters; ``(S,)`` in 1-D,
``(T, R, S)`` in 3-D) each group is one GEMM per pass:

- forward (fprop): ``y[(n, p, q), k] = sum A[(n, p, q), (r, s, c)] * B[(r, s, c), k]``, A the
  im2col matrix of the zero-padded ``x`` (``x[n, c, p*stride + r*dilation - pad, ...]``),
  B the filter: K = R·S·C in the order ``(r, s, c)`` (NHWC implicit GEMM) or ``(c, r, s)``
  (``k_order="crs"``, NCHW im2col);
- input gradient (dgrad): ``dx[(n, h, w), c] = sum A[(n, h, w), (r, s, k)] * w[k, c, r, s]``,
  A holding ``dy[n, k, p, q]`` where ``p = (h + pad - r*dilation) / stride`` is a whole index
  in range, else 0: K = R·S·K, r and s ascending (CUTLASS's analytic dgrad iterator in
  cross-correlation mode);
- weight gradient (wgrad): ``dw[k, (r, s, c)] = sum dy^T[k, (n, p, q)] * A[(n, p, q), (r, s, c)]``:
  K = N·P·Q.

``conv_transpose`` is the convolution's dgrad (its forward GEMM is the lowering above with
``x`` for ``dy``), its input gradient the convolution's fprop, its weight gradient the wgrad
with the operands' roles exchanged; every backward GEMM has the incoming gradient in A, as
:mod:`mmasim.torch.function` does.  The bias is added in float32 by torch.

The lowering is torch ops on the tensors' own device (pure data movement), each group's GEMM
:func:`mmasim.torch.function.batched`: CUDA tensors under ``backend="cuda"`` stay on the device
(:mod:`mmasim.torch.on_device`), other tensors are computed from host copies.
"""

from __future__ import annotations

import itertools
import math

import attrs

from mmasim.torch.function import batched, torch_

#: K orders: the order of (filter position, channel) in K
K_ORDERS = ("rsc", "crs")
#: per spatial rank: filter, output and input position letters (CUTLASS's)
LETTERS = {1: ("s", "q", "w"), 2: ("rs", "pq", "hw"), 3: ("trs", "zpq", "dhw")}


@attrs.frozen
class Geometry:
    """A convolution's stride, zero padding before (``lo``) and after (``hi``) each spatial
    dimension, dilation and groups."""

    stride: tuple
    lo: tuple
    hi: tuple
    dilation: tuple
    groups: int

    def out_size(self, size, kernel) -> tuple:
        return tuple((h + lo + hi - d * (k - 1) - 1) // s + 1
                     for h, k, s, lo, hi, d in zip(size, kernel, self.stride, self.lo, self.hi, self.dilation))


def k_order(nd: int, order: str, channel: str) -> str:
    """The K order a trace names: ``"(r, s, c)"``; ``channel``: ``c`` (the op's input channels) or ``k``."""
    parts = list(LETTERS[nd][0])
    parts = parts + [channel] if order == "rsc" else [channel] + parts
    return "(" + ", ".join(parts) + ")"


def wgrad_order(nd: int, transposed: bool) -> str:
    return "(" + ", ".join(["n", *LETTERS[nd][2 if transposed else 1]]) + ")"


def _place(x, lo, step, size):
    """Zeros of spatial ``size`` with ``x[..., i]`` at ``lo + i * step`` (what falls outside is
    dropped): a float32 tensor on ``x``'s device."""
    out = x.new_zeros(tuple(x.shape[:2]) + tuple(size), dtype=torch_().float32)
    src, dst = [slice(None)] * 2, [slice(None)] * 2
    for n, o, s, z in zip(x.shape[2:], lo, step, size):
        i0 = 0 if o >= 0 else -(o // s)          # the first i with o + i * s >= 0
        i1 = min(n, (z - 1 - o) // s + 1) if z - 1 - o >= 0 else 0
        if i1 <= i0:
            return out
        src.append(slice(i0, i1))
        dst.append(slice(o + i0 * s, o + (i1 - 1) * s + 1, s))
    out[tuple(dst)] = x[tuple(src)]
    return out


def _im2col(xp, kernel, stride, dilation, out, order: str, reverse=False):
    """The im2col matrix ``(N * prod(out), K)`` of the padded ``xp`` ``(N, C, *)``: row
    ``(n, p, q)``, column ``(r, s, c)`` (``order="rsc"``) or ``(c, r, s)``, holding
    ``xp[n, c, p*stride + r'*dilation, ...]`` with ``r' = r`` (``R - 1 - r`` with ``reverse``)."""
    torch = torch_()
    n, c = xp.shape[:2]
    taps = []
    for offs in itertools.product(*(range(k) for k in kernel)):
        idx = [slice(None), slice(None)]
        for r, k, s, d, o in zip(offs, kernel, stride, dilation, out):
            r = k - 1 - r if reverse else r
            idx.append(slice(r * d, r * d + (o - 1) * s + 1, s))
        taps.append(xp[tuple(idx)])
    t = torch.stack(taps, dim=2)                                  # (N, C, RS, *out)
    nd = len(kernel)
    rows = [0, *range(3, 3 + nd)]
    t = t.permute(rows + ([2, 1] if order == "rsc" else [1, 2]))
    return t.reshape(n * math.prod(out), c * len(taps))


def _filter(w, order: str):
    """``w`` ``(K, C, *R)`` as the GEMM's B ``(R·S·C, K)`` in ``order``."""
    k = w.shape[0]
    nd = w.dim() - 2
    t = w.permute([*range(2, 2 + nd), 1, 0] if order == "rsc" else [1, *range(2, 2 + nd), 0])
    return t.reshape(-1, k)


def _unfilter(m, shape, order: str):
    """A ``(K, R·S·C)`` matrix back to a filter of ``shape`` ``(K, C, *R)``."""
    k, c, *r = shape
    if order == "rsc":
        return m.reshape(k, *r, c).permute([0, len(r) + 1, *range(1, len(r) + 1)])
    return m.reshape(k, c, *r)


def _gemm(a, b, em, step, record, order_name):
    """The groups' GEMMs ``a[g] @ b[g]`` (:func:`mmasim.torch.function.batched`: on the device for
    CUDA tensors under backend cuda), recorded."""
    if record is not None:
        record(step, a.shape[0], a.shape[1], b.shape[2], a.shape[2], order_name)
    return batched(a, b, em, step)


def _to_nchw(d, n: int, spatial):
    """``(G, N * prod(spatial), Kg)`` as ``(N, G * Kg, *spatial)``."""
    g, _, kg = d.shape
    t = d.reshape(g, n, *spatial, kg)
    t = t.movedim(0, -2).reshape(n, *spatial, g * kg)
    return t.movedim(-1, 1).contiguous()


def fprop(x, w, geo: Geometry, em, step, order, record, channel="c"):
    """The forward implicit GEMM: ``conv(x, w)`` ``(N, K, *P)`` (float32 tensors, on their device)."""
    torch = torch_()
    n, c = x.shape[:2]
    kernel = tuple(w.shape[2:])
    g = geo.groups
    cg, kg = c // g, w.shape[0] // g
    out = geo.out_size(x.shape[2:], kernel)
    need = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out, geo.stride, kernel, geo.dilation)]
    xp = _place(x, geo.lo, (1,) * len(kernel), need)
    a = torch.stack([_im2col(xp[:, i * cg:(i + 1) * cg], kernel, geo.stride, geo.dilation, out, order)
                     for i in range(g)])
    b = torch.stack([_filter(w[i * kg:(i + 1) * kg], order) for i in range(g)])
    d = _gemm(a, b, em, step, record, k_order(len(kernel), order, channel))
    return _to_nchw(d, n, out)


def dgrad(dy, w, geo: Geometry, size, em, step, order, record, channel="k"):
    """The input-gradient implicit GEMM: ``conv_transpose(dy, w)`` of spatial ``size`` ``(N, C, *size)``."""
    torch = torch_()
    n, k = dy.shape[:2]
    kernel = tuple(w.shape[2:])
    g = geo.groups
    kg = k // g
    lo = [d * (r - 1) - p for d, r, p in zip(geo.dilation, kernel, geo.lo)]
    full = [h + d * (r - 1) for h, d, r in zip(size, geo.dilation, kernel)]
    dyd = _place(dy, lo, geo.stride, full)
    ones = (1,) * len(kernel)
    a = torch.stack([_im2col(dyd[:, i * kg:(i + 1) * kg], kernel, ones, geo.dilation, size, order, reverse=True)
                     for i in range(g)])
    b = torch.stack([_filter(w[i * kg:(i + 1) * kg].transpose(0, 1), order) for i in range(g)])
    d = _gemm(a, b, em, step, record, k_order(len(kernel), order, channel))
    return _to_nchw(d, n, size)


def wgrad(x, dy, geo: Geometry, kernel, em, step, order, record, grad_is_x=False):
    """The weight-gradient implicit GEMM: ``dw`` ``(K, C/g, *kernel)`` of ``y = conv(x, w)``;
    the gradient in A: ``dy^T @ im2col(x)``, or with ``grad_is_x`` (a transposed convolution,
    whose gradient is the convolution's ``x``) ``(im2col(x)^T @ dy)^T``."""
    torch = torch_()
    n, c = x.shape[:2]
    k = dy.shape[1]
    g = geo.groups
    cg, kg = c // g, k // g
    out = tuple(dy.shape[2:])
    kernel = tuple(kernel)
    need = [(o - 1) * s + (r - 1) * d + 1 for o, s, r, d in zip(out, geo.stride, kernel, geo.dilation)]
    xp = _place(x, geo.lo, (1,) * len(kernel), need)
    cols = [_im2col(xp[:, i * cg:(i + 1) * cg], kernel, geo.stride, geo.dilation, out, order) for i in range(g)]
    dys = [dy[:, i * kg:(i + 1) * kg].movedim(1, -1).reshape(-1, kg) for i in range(g)]
    name = wgrad_order(len(kernel), grad_is_x)
    if grad_is_x:
        d = _gemm(torch.stack([m.T for m in cols]), torch.stack(dys), em, step, record, name).transpose(1, 2)
    else:
        d = _gemm(torch.stack([m.T for m in dys]), torch.stack(cols), em, step, record, name)
    return torch.cat([_unfilter(d[i], (kg, cg, *kernel), order) for i in range(g)])


@attrs.frozen
class Spec:
    """What a convolution call needs beyond its tensors."""

    geometry: Geometry
    transposed: bool
    size: tuple          # the output's spatial size of a transposed convolution
    em: object
    order: str
    record: object


def _function():
    torch = torch_()
    from torch.autograd.function import once_differentiable

    def f32(t):         # the values (exact for f16, bf16, f32) on the tensor's own device
        return t.detach().to(torch.float32)

    class _Conv(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w, spec):
            ctx.save_for_backward(x, w)
            ctx.spec = spec
            xn, wn = f32(x), f32(w)
            if spec.transposed:
                return dgrad(xn, wn, spec.geometry, spec.size, spec.em, "forward", spec.order, spec.record, "c")
            return fprop(xn, wn, spec.geometry, spec.em, "forward", spec.order, spec.record)

        @staticmethod
        @once_differentiable
        def backward(ctx, dy):
            x, w = ctx.saved_tensors
            s = ctx.spec
            xn, wn, dyn = f32(x), f32(w), f32(dy)
            dx = dw = None
            if ctx.needs_input_grad[0]:
                if s.transposed:
                    dx = fprop(dyn, wn, s.geometry, s.em, "dgrad", s.order, s.record, "k")
                else:
                    dx = dgrad(dyn, wn, s.geometry, tuple(x.shape[2:]), s.em, "dgrad", s.order, s.record)
            if ctx.needs_input_grad[1]:
                if s.transposed:
                    dw = wgrad(dyn, xn, s.geometry, w.shape[2:], s.em, "wgrad", s.order, s.record, grad_is_x=True)
                else:
                    dw = wgrad(xn, dyn, s.geometry, w.shape[2:], s.em, "wgrad", s.order, s.record)
            return dx, dw, None

    return _Conv


_FUNCTION: list = []


def _tuple(v, nd: int) -> tuple:
    if isinstance(v, int):
        return (v,) * nd
    t = tuple(int(i) for i in v)
    return t * nd if len(t) == 1 else t


def geometry(nd: int, kernel, stride, padding, dilation, groups) -> Geometry:
    """A :class:`Geometry` from torch's arguments (``padding`` an int, a tuple, ``"valid"`` or ``"same"``)."""
    dil = _tuple(dilation, nd)
    if padding == "valid":
        lo = hi = (0,) * nd
    elif padding == "same":
        total = [d * (k - 1) for d, k in zip(dil, kernel)]
        lo = tuple(t // 2 for t in total)
        hi = tuple(t - t // 2 for t in total)
    else:
        lo = hi = _tuple(padding, nd)
    return Geometry(_tuple(stride, nd), lo, hi, dil, int(groups))


def conv(x, w, spec: Spec):
    """The convolution (or, with ``spec.transposed``, its transpose) of batched ``x`` by ``w``,
    through the emulated implicit GEMMs, with autograd: float32, no bias."""
    if not _FUNCTION:
        _FUNCTION.append(_function())
    return _FUNCTION[0].apply(x, w, spec)
