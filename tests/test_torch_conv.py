"""mmasim.torch.emulate: convolutions as implicit GEMMs, forward and backward, word for word the
GEMMs of an explicit lowering written here element by element (im2col, the dgrad gather, the
wgrad product) and run by mmasim.quantize + mmasim.gemm directly (tests/torch_direct.py).

The lowering (docs/torch.md): fprop ``A[(n, p, q), (r, s, c)] = x[n, c, p*stride + r*dil - pad,
...]`` (0 outside), ``B[(r, s, c), k] = w[k, c, r, s]``; dgrad ``A[(n, h, w), (r, s, k)] =
dy[n, k, (h + pad - r*dil) / stride, ...]`` where that is a whole index in range, else 0,
``B[(r, s, k), c] = w[k, c, r, s]``; wgrad ``dw[k, (r, s, c)] = dy^T[k, (n, p, q)] @ A``; one GEMM
per group."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import mmasim.torch as mt  # noqa: E402
from torch_direct import direct, host, rand, same  # noqa: E402

pytestmark = pytest.mark.filterwarnings("error")


def _t(shape, seed):
    return rand(shape, seed, grad=True)


def _taps(kernel, channels, order):
    """The K columns in order: ``(offsets, channel)`` pairs."""
    if order == "rsc":
        return [(o, c) for o in itertools.product(*map(range, kernel)) for c in range(channels)]
    return [(o, c) for c in range(channels) for o in itertools.product(*map(range, kernel))]


def _gather(t, positions, taps, index):
    """Rows ``(n, *position)``, columns ``taps`` ``(offsets, channel)``: ``t[n, channel, *index(position,
    offsets)]``, 0 where ``index`` gives ``None``."""
    rows = []
    for i in range(t.shape[0]):
        for pos in itertools.product(*map(range, positions)):
            row = []
            for offs, ch in taps:
                idx = index(pos, offs)
                row.append(0.0 if idx is None else t[(i, ch, *idx)])
            rows.append(row)
    return np.array(rows, np.float32)


def im2col(x, kernel, stride, pad, dil, out, order="rsc"):
    """fprop's A: row (n, *p), column (offsets, c): x at p*stride + r*dil - pad, 0 outside."""
    size = x.shape[2:]

    def index(p, offs):
        idx = [pi * s + r * d - lo for pi, s, r, d, lo in zip(p, stride, offs, dil, pad)]
        return idx if all(0 <= j < h for j, h in zip(idx, size)) else None
    return _gather(x, out, _taps(kernel, x.shape[1], order), index)


def dgrad_gather(dy, kernel, stride, pad, dil, size, order="rsc"):
    """dgrad's A: row (n, *h), column (offsets, k): dy at (h + pad - r*dil) / stride where whole and in range."""
    out = dy.shape[2:]

    def index(h, offs):
        num = [hi + lo - r * d for hi, lo, r, d in zip(h, pad, offs, dil)]
        ok = all(v % s == 0 and 0 <= v // s < o for v, s, o in zip(num, stride, out))
        return [v // s for v, s in zip(num, stride)] if ok else None
    return _gather(dy, size, _taps(kernel, dy.shape[1], order), index)


def filter_matrix(w, order="rsc"):
    """B ``[(offsets, c), k] = w[k, c, *offsets]`` of a ``(K, C, *R)`` filter."""
    k, c, *kernel = w.shape
    return np.array([[w[(j, ch, *offs)] for j in range(k)] for offs, ch in _taps(kernel, c, order)], np.float32)


def unfilter(m, k, c, kernel, order="rsc"):
    """A ``(K, (offsets, c))`` matrix as a ``(K, C, *R)`` filter."""
    w = np.zeros((k, c, *kernel), np.float32)
    for col, (offs, ch) in enumerate(_taps(kernel, c, order)):
        w[(slice(None), ch, *offs)] = m[:, col]
    return w


def nchw(rows, n, spatial):
    """``(N * prod(spatial), K)`` rows as ``(N, K, *spatial)``."""
    return np.moveaxis(rows.reshape(n, *spatial, -1), -1, 1)


def groups_of(t, g, axis=1):
    return np.split(t, g, axis=axis)


def conv_expected(x, w, dy, stride, pad, dil, g, order="rsc"):
    """(y, dx, dw) of conv(x, w) by the explicit lowering, one direct GEMM per group."""
    n, c, *size = x.shape
    kernel = w.shape[2:]
    out = dy.shape[2:]
    ys, dxs, dws = [], [], []
    for xg, wg, dyg in zip(groups_of(x, g), groups_of(w, g, 0), groups_of(dy, g)):
        cols = im2col(xg, kernel, stride, pad, dil, out, order)
        ys.append(nchw(direct(cols, filter_matrix(wg, order)), n, out))
        a = dgrad_gather(dyg, kernel, stride, pad, dil, size, order)
        dxs.append(nchw(direct(a, filter_matrix(wg.swapaxes(0, 1), order)), n, size))
        dym = np.moveaxis(dyg, 1, -1).reshape(-1, dyg.shape[1])
        dws.append(unfilter(direct(dym.T, cols), wg.shape[0], wg.shape[1], kernel, order))
    return np.concatenate(ys, 1), np.concatenate(dxs, 1), np.concatenate(dws, 0)


def conv_transpose_expected(x, w, dy, stride, pad, dil, g):
    """(y, dx, dw) of conv_transpose(x, w): y the dgrad gather of x, dx the fprop of dy, dw with dy in A."""
    n, cin, *hin = x.shape
    kernel = w.shape[2:]
    size = dy.shape[2:]
    ys, dxs, dws = [], [], []
    for xg, wg, dyg in zip(groups_of(x, g), groups_of(w, g, 0), groups_of(dy, g)):
        a = dgrad_gather(xg, kernel, stride, pad, dil, size)
        ys.append(nchw(direct(a, filter_matrix(wg.swapaxes(0, 1))), n, size))
        cols = im2col(dyg, kernel, stride, pad, dil, hin)
        dxs.append(nchw(direct(cols, filter_matrix(wg)), n, hin))
        xm = np.moveaxis(xg, 1, -1).reshape(-1, xg.shape[1])
        dws.append(unfilter(direct(cols.T, xm).T, wg.shape[0], wg.shape[1], kernel))
    return np.concatenate(ys, 1), np.concatenate(dxs, 1), np.concatenate(dws, 0)


#: (spatial rank, x shape, filter shape, stride, padding, dilation, groups)
CONVS = {
    "2d stride 2 pad 1": (2, (2, 3, 6, 5), (4, 3, 3, 3), (2, 2), (1, 1), (1, 1), 1),
    "2d groups dilation": (2, (1, 4, 7, 6), (6, 2, 2, 3), (1, 2), (1, 2), (2, 1), 2),
    "1d": (1, (2, 3, 9), (5, 3, 3), (2,), (1,), (1,), 1),
    "3d": (3, (1, 2, 3, 4, 4), (3, 2, 2, 2, 3), (1, 2, 1), (0, 1, 1), (1, 1, 1), 1),
}


@pytest.mark.parametrize("case", sorted(CONVS))
def test_conv_forward_and_backward_are_the_explicit_implicit_gemms(case):
    nd, xs, ws, stride, pad, dil, g = CONVS[case]
    x, w, b = _t(xs, 1), _t(ws, 2), _t((ws[0],), 3)
    fn = getattr(F, f"conv{nd}d")
    with mt.emulate(None, "A100-bf16") as trace:
        y = fn(x, w, b, stride=stride, padding=pad, dilation=dil, groups=g)
        dy = rand(tuple(y.shape), 4)
        y.backward(dy)
    want_y, want_dx, want_dw = conv_expected(host(x), host(w), host(dy), stride, pad, dil, g)
    assert same(y, want_y + host(b).reshape(-1, *(1,) * nd))
    assert same(x.grad, want_dx) and same(w.grad, want_dw)
    letters = {1: "s", 2: "r, s", 3: "t, r, s"}[nd]
    positions = {1: "n, q", 2: "n, p, q", 3: "n, z, p, q"}[nd]
    assert [(c.step, c.batch, c.k_order) for c in trace.calls] == [
        ("forward", g, f"({letters}, c)"), ("dgrad", g, f"({letters}, k)"), ("wgrad", g, f"({positions})")]


@pytest.mark.parametrize("nd, xs, ws, stride, pad, out_pad, dil, g", [
    (2, (2, 4, 3, 4), (4, 3, 3, 3), (2, 2), (1, 1), (1, 0), (1, 1), 2),
    (1, (1, 3, 5), (3, 2, 4), (3,), (2,), (1,), (2,), 1),
])
def test_conv_transpose_is_the_convolutions_dgrad_and_its_backward_the_fprop_and_wgrad(nd, xs, ws, stride, pad,
                                                                                   out_pad, dil, g):
    x, w = _t(xs, 5), _t(ws, 6)
    fn = getattr(F, f"conv_transpose{nd}d")
    with mt.emulate(None, "A100-bf16") as trace:
        y = fn(x, w, stride=stride, padding=pad, output_padding=out_pad, groups=g, dilation=dil)
        dy = rand(tuple(y.shape), 7)
        y.backward(dy)
    assert y.shape == fn(x, w, stride=stride, padding=pad, output_padding=out_pad, groups=g, dilation=dil).shape
    want_y, want_dx, want_dw = conv_transpose_expected(host(x), host(w), host(dy), stride, pad, dil, g)
    assert same(y, want_y) and same(x.grad, want_dx) and same(w.grad, want_dw)
    assert [c.step for c in trace.calls] == ["forward", "dgrad", "wgrad"]


def test_crs_order_puts_the_channel_outermost_in_k():
    x, w = _t((1, 3, 5, 5), 8), _t((2, 3, 3, 3), 9)
    with mt.emulate(None, "A100-bf16", conv_k_order="crs") as trace:
        y = F.conv2d(x, w, padding=1)
        dy = rand(tuple(y.shape), 10)
        y.backward(dy)
    want_y, want_dx, want_dw = conv_expected(host(x), host(w), host(dy), (1, 1), (1, 1), (1, 1), 1, order="crs")
    assert same(y, want_y) and same(x.grad, want_dx) and same(w.grad, want_dw)
    assert [c.k_order for c in trace.calls] == ["(c, r, s)", "(k, r, s)", "(n, p, q)"]


def test_k_order_changes_the_words_where_the_k_tiles_differ():
    # K = 27 in tiles of 16: (r, s, c) and (c, r, s) put different products in each tile
    x, w = rand((1, 3, 6, 6), 11), rand((8, 3, 3, 3), 12)
    with mt.emulate(None, "A100-bf16"):
        rsc = F.conv2d(x, w)
    with mt.emulate(None, "A100-bf16", conv_k_order="crs"):
        crs = F.conv2d(x, w)
    assert not torch.equal(rsc, crs)


def test_conv_modules_same_padding_reflect_padding_and_unbatched_input():
    torch.manual_seed(0)
    same_pad = torch.nn.Conv2d(2, 3, 3, padding="same", bias=False)
    reflect = torch.nn.Conv1d(2, 3, 3, padding=1, padding_mode="reflect", bias=False)
    x2, x1 = rand((2, 5, 4), 13), rand((2, 6), 14)
    with mt.emulate(None, "A100-bf16"), torch.no_grad():
        y2, y1 = same_pad(x2), reflect(x1)
    cols = im2col(host(x2)[None], (3, 3), (1, 1), (1, 1), (1, 1), (5, 4))
    assert same(y2, nchw(direct(cols, filter_matrix(host(same_pad.weight))), 1, (5, 4))[0])
    padded = np.pad(host(x1), [(0, 0), (1, 1)], mode="reflect")[None]
    cols = im2col(padded, (3,), (1,), (0,), (1,), (6,))
    assert same(y1, nchw(direct(cols, filter_matrix(host(reflect.weight))), 1, (6,))[0])
