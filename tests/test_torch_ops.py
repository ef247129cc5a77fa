"""mmasim.torch.emulate: every op that multiplies matrices, forward and backward, word for word
the GEMMs mmasim.quantize + mmasim.gemm give when called directly on the same operands
(tests/torch_direct.py), as docs/torch.md lowers each op.  The convolutions: test_torch_conv.py.

Small shapes and the A100-bf16 preset (operands cast to bf16, one GEMM per matrix of a batch)
unless a test says otherwise; the backward GEMMs put the gradient in A:
``dA = dD @ B^T``, ``dB = (dD^T @ A)^T``."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import mmasim.torch as mt  # noqa: E402
from mmasim.arith.ex2 import ex2  # noqa: E402
from torch_direct import (A100 as A100_NAMES, H100_E4M3, H100_E5M2, batched, direct,  # noqa: E402
                          direct_tensor_scaled, ffma, host, rand, same, tree_sum)

pytestmark = pytest.mark.filterwarnings("error")


def _t(shape, seed):
    return rand(shape, seed, grad=True)


def _run(fn, *leaves, dy_seed=99, preset="A100-bf16"):
    """``fn(*leaves)`` under emulate (no model) and its backward with a random dy: (y, dy, trace)."""
    with mt.emulate(None, preset) as trace:
        y = fn(*leaves)
        dy = rand(tuple(y.shape), dy_seed)
        y.backward(dy)
    return y, dy, trace


def test_linear_with_leading_dimensions_folds_them_into_m():
    x, w, b = _t((2, 3, 24), 1), _t((10, 24), 2), _t((10,), 3)
    y, dy, trace = _run(F.linear, x, w, b)
    x2, dy2 = host(x).reshape(6, 24), host(dy).reshape(6, 10)
    assert same(y, (direct(x2, host(w).T) + host(b)).reshape(2, 3, 10))
    assert same(x.grad, direct(dy2, host(w)).reshape(2, 3, 24))
    assert same(w.grad, direct(dy2.T, x2))
    assert same(b.grad, dy.sum((0, 1)))                           # torch's own float32 sum
    assert [(c.step, c.m, c.n, c.k) for c in trace.calls] == [("forward", 6, 10, 24), ("dgrad", 6, 24, 10),
                                                             ("wgrad", 10, 24, 6)]


@pytest.mark.parametrize("spelling", ["matmul", "@", "method", "rmatmul", "linalg"])
def test_matmul_3d_by_2d_is_one_gemm_of_the_folded_rows(spelling):
    fn = {"matmul": torch.matmul, "@": lambda a, b: a @ b, "method": lambda a, b: a.matmul(b),
          "rmatmul": lambda a, b: b.__rmatmul__(a), "linalg": torch.linalg.matmul}[spelling]
    a, b = _t((2, 5, 20), 4), _t((20, 7), 5)
    y, dy, trace = _run(fn, a, b)
    a2, dy2 = host(a).reshape(10, 20), host(dy).reshape(10, 7)
    assert same(y, direct(a2, host(b)).reshape(2, 5, 7))
    assert same(a.grad, direct(dy2, host(b).T).reshape(2, 5, 20))
    assert same(b.grad, direct(dy2.T, a2).T)
    assert {c.batch for c in trace.calls} == {1}


@pytest.mark.parametrize("op", ["bmm", "matmul", "einsum"])
def test_batched_matmul_is_one_gemm_per_matrix(op):
    fn = {"bmm": torch.bmm, "matmul": torch.matmul,
          "einsum": lambda a, b: torch.einsum("bmk,bkn->bmn", a, b)}[op]
    a, b = _t((3, 6, 18), 6), _t((3, 18, 5), 7)
    y, dy, trace = _run(fn, a, b)
    assert same(y, batched(direct, host(a), host(b)))
    assert same(a.grad, batched(direct, host(dy), host(b).transpose(0, 2, 1)))
    assert same(b.grad, batched(direct, host(dy).transpose(0, 2, 1), host(a)).transpose(0, 2, 1))
    assert [(c.step, c.batch) for c in trace.calls] == [("forward", 3), ("dgrad", 3), ("wgrad", 3)]


def test_broadcast_batch_dimensions_repeat_the_shared_matrix_and_sum_its_gradient():
    a, b = _t((2, 1, 4, 8), 8), _t((3, 8, 5), 9)
    y, dy, trace = _run(torch.matmul, a, b)
    an, bn, dyn = host(a), host(b), host(dy)
    assert same(y, np.stack([[direct(an[i, 0], bn[j]) for j in range(3)] for i in range(2)]))
    da = np.stack([[direct(dyn[i, j], bn[j].T) for j in range(3)] for i in range(2)])
    assert same(a.grad, da.sum(axis=1, keepdims=True))
    db = np.stack([[direct(dyn[i, j].T, an[i, 0]).T for j in range(3)] for i in range(2)])
    assert same(b.grad, db.sum(axis=0))


def test_vectors_mm_mv_dot_inner_and_tensordot():
    a, b, v, u = _t((6, 20), 10), _t((20, 9), 11), _t((20,), 12), _t((20,), 13)
    with mt.emulate(None, "A100-bf16"):
        mm, mv, vm = torch.mm(a, b), torch.mv(a, v), v @ b
        dot, inner = torch.dot(v, u), torch.inner(a, rand((4, 20), 14))
        td = torch.tensordot(a, b, dims=1)
    an, bn, vn, un = host(a), host(b), host(v), host(u)
    assert same(mm, direct(an, bn)) and same(td, direct(an, bn))
    assert same(mv, direct(an, vn[:, None])[:, 0])
    assert same(vm, direct(vn[None], bn)[0])
    assert same(dot, direct(vn[None], un[:, None])[0, 0])
    assert same(inner, direct(an, host(_t((4, 20), 14)).T))


@pytest.mark.parametrize("op", ["addmm", "baddbmm", "addmv", "addbmm"])
def test_add_family_adds_beta_c_to_alpha_times_the_gemm_in_float32(op):
    shapes = {"addmm": ((6, 9), (6, 16), (16, 9)), "baddbmm": ((2, 6, 9), (2, 6, 16), (2, 16, 9)),
              "addmv": ((6,), (6, 16), (16,)), "addbmm": ((6, 9), (3, 6, 16), (3, 16, 9))}[op]
    c, a, b = (_t(s, 20 + i) for i, s in enumerate(shapes))
    y, dy, trace = _run(lambda c, a, b: getattr(torch, op)(c, a, b, beta=0.5, alpha=2.0), c, a, b)
    cn, an, bn, dyn = host(c), host(a), host(b), host(dy)
    if op == "addmm":
        d, da, db = direct(an, bn), direct(dyn * 2, bn.T), direct((dyn * 2).T, an).T
    elif op == "baddbmm":
        d = batched(direct, an, bn)
        da, db = batched(direct, dyn * 2, bn.transpose(0, 2, 1)), batched(direct, (dyn * 2).transpose(0, 2, 1), an)
        db = db.transpose(0, 2, 1)
    elif op == "addmv":
        d, da, db = direct(an, bn[:, None])[:, 0], direct((dyn * 2)[:, None], bn[None]), direct((dyn * 2)[None], an)[0]
    else:                                       # addbmm: K runs over the batch and k, one GEMM
        a2, b2 = an.transpose(1, 0, 2).reshape(6, 48), bn.reshape(48, 9)
        d, da, db = direct(a2, b2), direct(dyn * 2, b2.T), direct((dyn * 2).T, a2).T
        da, db = da.reshape(6, 3, 16).transpose(1, 0, 2), db.reshape(3, 16, 9)
    assert same(y, np.float32(2.0) * d + np.float32(0.5) * cn)
    assert same(a.grad, da) and same(b.grad, db)
    assert same(c.grad, dyn * np.float32(0.5))


def test_in_place_add_family_writes_self():
    c, a, b = rand((6, 9), 30), rand((6, 16), 31), rand((16, 9), 32)
    want = direct(host(a), host(b)) + host(c)
    with mt.emulate(None, "A100-bf16"):
        out = c.addmm_(a, b)
    assert out is c and same(c, want)


def test_einsum_with_two_k_labels_and_a_permuted_output():
    a, b = _t((2, 3, 4, 5), 40), _t((4, 5, 2, 6), 41)
    y, dy, trace = _run(lambda a, b: torch.einsum("bxkl,klbn->nbx", a, b), a, b)
    an, bn = host(a).reshape(2, 3, 20), host(b).reshape(20, 2, 6).transpose(1, 0, 2)    # K = (k, l)
    assert same(y, batched(direct, an, bn).transpose(2, 0, 1))
    dyn = host(dy).transpose(1, 2, 0)                                                    # (b, x, n)
    assert same(a.grad, batched(direct, dyn, bn.transpose(0, 2, 1)).reshape(2, 3, 4, 5))
    db = batched(direct, dyn.transpose(0, 2, 1), an).transpose(0, 2, 1)                # (b, kl, n)
    assert same(b.grad, db.transpose(1, 0, 2).reshape(4, 5, 2, 6))
    assert [(c.batch, c.m, c.n, c.k) for c in trace.calls][0] == (2, 3, 6, 20)


def test_einsum_ellipsis_sublists_and_implicit_output():
    a, b = rand((2, 3, 4), 42), rand((2, 4, 5), 43)
    want = batched(direct, host(a), host(b))
    with mt.emulate(None, "A100-bf16") as trace:
        ys = [torch.einsum("...ij,...jk->...ik", a, b), torch.einsum("ij,jk", a[0], b[0]),
              torch.einsum(a, [0, 1, 2], b, [0, 2, 3], [0, 1, 3])]
        torch.einsum("bij->bj", a)                                 # no product: not a GEMM
        torch.einsum("bij,bij->bij", a, a)                         # elementwise: not a GEMM
    assert same(ys[0], want) and same(ys[2], want)
    assert same(ys[1], want[0])                                    # implicit output: 'ik'
    assert len(trace.calls) == 3


def _sdpa_direct(q, k, v, scale, causal, dout):
    """Attention composed of direct GEMMs and torch's float32 softmax: (O, dQ, dK, dV)."""
    qn, kn, vn = (host(t).reshape(-1, *t.shape[-2:]) for t in (q, k, v))
    s = batched(direct, qn, kn.transpose(0, 2, 1))
    st = torch.from_numpy(s).requires_grad_()
    scaled = st * scale
    if causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
        scaled = scaled.masked_fill(~keep, float("-inf"))
    p = torch.softmax(scaled, -1)
    pn = host(p)
    o = batched(direct, pn, vn)
    don = host(dout).reshape(o.shape)
    dp = batched(direct, don, vn.transpose(0, 2, 1))
    ds = host(torch.autograd.grad(p, st, torch.from_numpy(dp))[0])
    dq = batched(direct, ds, kn)
    dk = batched(direct, ds.transpose(0, 2, 1), qn)
    dv = batched(direct, don.transpose(0, 2, 1), pn).transpose(0, 2, 1)
    return (x.reshape(t.shape) for x, t in ((o, dout), (dq, q), (dk, k), (dv, v)))


@pytest.mark.parametrize("causal", [False, True])
def test_scaled_dot_product_attention_is_two_gemms_around_a_float32_softmax(causal):
    q, k, v = _t((2, 2, 5, 8), 50), _t((2, 2, 7, 8), 51), _t((2, 2, 7, 6), 52)
    y, dy, trace = _run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v)
    o, dq, dk, dv = _sdpa_direct(q, k, v, 1 / math.sqrt(8), causal, dy)
    assert same(y, o)
    assert same(q.grad, dq) and same(k.grad, dk) and same(v.grad, dv)
    assert {(c.part, c.step) for c in trace.calls} == {(p, s) for p in ("QK^T", "PV")
                                                      for s in ("forward", "dgrad", "wgrad")}
    assert all(c.batch == 4 for c in trace.calls)


def test_attention_dropout_drops_p_as_torch_dropout_does_before_the_pv_gemm():
    q, k, v = rand((1, 2, 6, 8), 54), rand((1, 2, 6, 8), 55), rand((1, 2, 6, 4), 56)
    torch.manual_seed(7)
    with mt.emulate(None, "A100-bf16"):
        y = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    s = batched(direct, host(q)[0], host(k)[0].transpose(0, 2, 1))
    p = torch.softmax(torch.from_numpy(s) * (1 / math.sqrt(8)), -1)
    torch.manual_seed(7)
    p = torch.dropout(p, 0.5, True)
    assert (host(p) == 0).any()
    assert same(y, batched(direct, host(p), host(v)[0])[None])


def test_multihead_attention_is_its_projections_and_attention_each_emulated():
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    x = rand((2, 5, 8), 53)
    with mt.emulate(mha, "A100-bf16") as trace, torch.no_grad():
        y, _ = mha(x, x, x, need_weights=False)
        y2, weights = mha(x, x, x)                      # with weights: torch's bmm path
    w_in, b_in = host(mha.in_proj_weight), host(mha.in_proj_bias)
    qkv = direct(host(x).reshape(10, 8), w_in.T) + b_in                       # one packed projection
    q, k, v = (qkv[:, i * 8:(i + 1) * 8].reshape(2, 5, 2, 4).transpose(0, 2, 1, 3) for i in range(3))
    o, *_ = _sdpa_direct(*(torch.from_numpy(np.ascontiguousarray(t)) for t in (q, k, v)), 0.5, False,
                         torch.zeros(2, 2, 5, 4))
    o = o.transpose(0, 2, 1, 3).reshape(10, 8)
    want = direct(o, host(mha.out_proj.weight).T) + host(mha.out_proj.bias)
    assert same(y, want.reshape(2, 5, 8))
    assert all(c.emulated for c in trace.calls) and all(c.module == "" for c in trace.calls)
    ops = [c.op for c in trace.calls]
    assert ops[:4] == ["torch.nn.functional.linear", "torch.nn.functional.scaled_dot_product_attention",
                       "torch.nn.functional.scaled_dot_product_attention", "torch.nn.functional.linear"]
    assert ops[4:] == ["torch.nn.functional.linear", "torch.bmm", "torch.bmm", "torch.nn.functional.linear"]
    assert not torch.equal(y2, mha(x, x, x)[0])         # after the block: torch's float32 again


def test_bf16_operands_give_a_bf16_result_rounded_from_the_float32_d():
    a, b = rand((4, 16), 60).bfloat16(), rand((16, 8), 61).bfloat16()
    with mt.emulate(None, "A100-bf16"):
        y = a @ b
    assert y.dtype == torch.bfloat16
    want = torch.from_numpy(direct(host(a.float()), host(b.float()))).bfloat16()
    assert torch.equal(y.view(torch.int16), want.view(torch.int16))


def test_per_tensor_fp8_scales_each_matrix_of_a_batch_and_backward_uses_e5m2():
    a, b = _t((2, 8, 40), 70), _t((2, 40, 12), 71)
    y, dy, trace = _run(torch.bmm, a, b, preset="H100-fp8-tensor")
    an, bn, dyn = host(a), host(b), host(dy)
    assert same(y, batched(direct_tensor_scaled, an, bn))
    assert same(a.grad, batched(direct_tensor_scaled, dyn, bn.transpose(0, 2, 1), instruction=H100_E5M2))
    db = batched(direct_tensor_scaled, dyn.transpose(0, 2, 1), an, instruction=H100_E5M2)
    assert same(b.grad, db.transpose(0, 2, 1))
    assert [c.instruction for c in trace.calls] == [H100_E4M3[1], H100_E5M2[1], H100_E5M2[1]]


def test_fa3_fp8_attention_is_flashattention3s_fp8_forward_composed_by_hand():
    # per (batch, head): Q, K, V times RN(448 / amax), cast to e4m3; S = the e4m3 GEMM;
    # c = RN(RN(scale * log2 e) * RN(dq * dk)); P = exp2(RN(S * c - RN(RN(max * c) - 8))) (P <= 2^8);
    # l = sum of P; O = GEMM(e4m3(P), e4m3(V * sv)) * RN(RN(1 / l) * dv)   (hopper/softmax.h)
    q, k, v = rand((1, 2, 16, 32), 80), rand((1, 2, 16, 32), 81), rand((1, 2, 16, 8), 82)
    with mt.emulate(None, "H100-fp8-fa3") as trace:
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    f32 = np.float32
    log2 = f32(np.float64(f32(1 / math.sqrt(32))) * math.log2(math.e))
    want = np.zeros((2, 16, 8), f32)
    for h in range(2):
        qh, kh, vh = (host(t)[0, h] for t in (q, k, v))
        sq, sk, sv = (f32(f32(448) / f32(np.abs(t).max())) for t in (qh, kh, vh))
        s = direct((qh * sq).astype(f32), (kh * sk).astype(f32).T, H100_E4M3, (64, 8, 32))
        s = np.where(np.tril(np.ones((16, 16), bool)), s, -np.inf).astype(f32)
        c = f32(log2 * f32(f32(1 / sq) * f32(1 / sk)))
        shift = (s.max(-1, keepdims=True) * c - f32(8)).astype(f32)
        p = torch.from_numpy(ex2(ffma(s, c, -shift)))              # FFMA, then ex2 (correctly rounded)
        inv = 1 / torch.from_numpy(tree_sum(host(p), 1))[:, None]
        acc = direct(host(p), (vh * sv).astype(f32), H100_E4M3, (64, 8, 32))
        want[h] = acc * host(inv * torch.tensor(f32(1 / sv)))
    assert same(y, want[None])
    assert float(host(p).max()) == 256.0                 # the row maximum: 2^8
    assert [c.part for c in trace.calls] == ["QK^T", "PV"]


def test_fa3_fp8_attention_refuses_what_flashattention3_does_not_do():
    q = rand((1, 1, 4, 32), 83)
    with mt.emulate(None, "H100-fp8-fa3"):
        with pytest.raises(mt.EmulationError, match="no dropout"):
            F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
        with pytest.raises(mt.EmulationError, match="no additive mask"):
            F.scaled_dot_product_attention(q, q, q, attn_mask=torch.zeros(4, 4))
    with pytest.raises(mt.EmulationError, match="needs an FP8 instruction"):
        with mt.emulate(None, mt.Emulation(*A100_NAMES, attention="fa3-fp8")):
            F.scaled_dot_product_attention(q, q, q)
    with pytest.raises(mt.EmulationError, match="needs scaling 'cast' or 'tensor'"):
        mt.Emulation(*A100_NAMES, scaling="scheme", scheme="nvfp4", attention="fa3-fp8")
