"""mmasim.torch: linear with autograd, emulate, presets (docs/torch.md).

Expectations come from torch's own arithmetic on exactly representable inputs, from
mmasim.gemm / mmasim.quantize called directly, or from values worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mmasim  # noqa: E402
import mmasim.torch as mt  # noqa: E402
from mmasim.operands.words import from_words  # noqa: E402

A100 = mt.Emulation("A100", "mma.sync.m16n8k16.f32.bf16.bf16.f32")


def _ints(shape, lo=-3, hi=4, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).integers(lo, hi, size=shape).astype(np.float32))


def _direct(a, b, em):
    """a @ b by mmasim.quantize + mmasim.gemm called directly (cast scaling, whole tiles)."""
    m = em.model()
    qa = mmasim.quantize(np.asarray(a, np.float32), m.a_format.key).words
    qb = mmasim.quantize(np.asarray(b, np.float32), m.b_format.key).words
    c = np.zeros((a.shape[0], b.shape[1]), dtype=np.uint32)
    return from_words(mmasim.gemm(qa, qb, c, model=m), m.d_format).astype(np.float32)


def test_linear_forward_and_gradients_on_exact_inputs_equal_torch():
    # small integers: bf16-exact, every product and sum exact, so the emulated GEMMs equal torch's
    x = _ints((32, 48), seed=1).requires_grad_()
    w = _ints((16, 48), seed=2).requires_grad_()
    b = _ints((16,), seed=3).requires_grad_()
    y = mt.linear(x, w, b, emulation=A100)
    dy = _ints((32, 16), seed=4)
    y.backward(dy)
    x2, w2, b2 = (t.detach().clone().double().requires_grad_() for t in (x, w, b))
    y2 = torch.nn.functional.linear(x2, w2, b2)
    y2.backward(dy.double())
    assert y.dtype == torch.float32
    assert torch.equal(y.double(), y2)
    assert torch.equal(x.grad.double(), x2.grad) and torch.equal(w.grad.double(), w2.grad)
    assert torch.equal(b.grad.double(), b2.grad)


def test_each_gemm_of_a_linear_layer_is_the_direct_gemm():
    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.standard_normal((16, 32)).astype(np.float32)).requires_grad_()
    w = torch.from_numpy(rng.standard_normal((16, 32)).astype(np.float32)).requires_grad_()
    dy = torch.from_numpy(rng.standard_normal((16, 16)).astype(np.float32))
    y = mt.linear(x, w, emulation=A100)
    y.backward(dy)
    assert np.array_equal(y.detach().numpy(), _direct(x.detach().numpy(), w.detach().numpy().T, A100))
    assert np.array_equal(x.grad.numpy(), _direct(dy.numpy(), w.detach().numpy(), A100))
    assert np.array_equal(w.grad.numpy(), _direct(dy.numpy().T, x.detach().numpy(), A100))


def test_non_tile_shapes_are_zero_padded_like_a_kernel_pads_a_partial_tile():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((5, 20)).astype(np.float32)
    b = rng.standard_normal((20, 3)).astype(np.float32)
    pa = np.zeros((16, 32), np.float32); pa[:5, :20] = a
    pb = np.zeros((32, 8), np.float32); pb[:20, :3] = b
    assert np.array_equal(mt.matmul(a, b, A100), _direct(pa, pb, A100)[:5, :3])


def test_per_tensor_fp8_scaling_worked_by_hand():
    # A's row [2, 1]: amax 2, scale RN(448 / 2) = 224, scaled [448, 224] (e4m3-exact); B's column
    # [4, 2]: scale 112, scaled [448, 224].  D = 448 * 448 + 224 * 224 = 250880 (exact in the
    # F = 13 window: 2^17 * 1.9140625).  alpha = RN(RN(1/224) * RN(1/112)), y = RN(250880 * alpha).
    em = mt.Emulation("H100", "wgmma.mma_async.k32.f32.e4m3.e4m3", scaling="tensor")
    a = np.zeros((64, 32), np.float32); a[0, 0], a[0, 1] = 2.0, 1.0
    b = np.zeros((32, 8), np.float32); b[0, 0], b[1, 0] = 4.0, 2.0
    alpha = np.float32(np.float32(1) / np.float32(224)) * np.float32(np.float32(1) / np.float32(112))
    want = np.float32(250880) * np.float32(alpha)
    got = mt.matmul(a, b, em)
    assert got[0, 0] == want and abs(float(want) - 10.0) < 1e-5
    assert not got[1:].any() and not got[0, 1:].any()


def test_emulate_patches_every_linear_and_restores_them():
    net = torch.nn.Sequential(torch.nn.Linear(48, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.round(p * 4))          # small integers: exact in bf16 and in the sums
    x = _ints((8, 48), seed=7)
    before = net(x)
    with mt.emulate(net, A100):
        assert all("forward" in m.__dict__ for m in net.modules() if isinstance(m, torch.nn.Linear))
        with torch.no_grad():
            inside = net(x)
    assert all("forward" not in m.__dict__ for m in net.modules() if isinstance(m, torch.nn.Linear))
    assert torch.equal(inside, before)
    with pytest.raises(RuntimeError):
        with mt.emulate(net, A100):
            raise RuntimeError("boom")
    assert all("forward" not in m.__dict__ for m in net.modules() if isinstance(m, torch.nn.Linear))


def test_emulate_routes_the_gemms_through_the_emulation():
    # with a bf16 emulation, an f32 input that bf16 cannot hold is rounded: the output differs
    net = torch.nn.Linear(32, 8, bias=False)
    with torch.no_grad():
        net.weight.fill_(1.0)
    x = torch.full((16, 32), 1.0 + 2.0 ** -10)
    with mt.emulate(net, A100), torch.no_grad():
        y = net(x)
    assert torch.all(y == 32.0)                 # bf16(1 + 2^-10) = 1
    assert torch.all(net(x) > 32.0)             # restored: torch's f32


@pytest.mark.parametrize("name", sorted(mt.presets()))
def test_every_preset_resolves_and_is_documented(name):
    em = mt.preset(name)
    for which in ("forward", "dgrad", "wgrad"):
        em.for_gemm(which).model()
    assert em.description
    import pathlib
    doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "torch.md").read_text()
    assert f"`{name}`" in doc


def test_bad_emulation_and_tensors_are_refused():
    with pytest.raises(mmasim.MMAError, match="preset"):
        mt.preset("H100-fp9")
    with pytest.raises(mmasim.MMAError, match="scaling"):
        mt.Emulation("H100", "x", scaling="row")
    with pytest.raises(mmasim.MMAError, match="emulation"):
        mt.linear(torch.ones(2, 2), torch.ones(2, 2))
    with pytest.raises(mmasim.MMAError, match="do not match"):
        mt.linear(torch.ones(2, 3), torch.ones(2, 2), emulation=A100)
    with pytest.raises(mmasim.MMAError, match="sparse"):
        mt.linear(torch.ones(2, 2).to_sparse(), torch.ones(2, 2), emulation=A100)
    with pytest.raises(mmasim.MMAError, match="meta"):
        mt.linear(torch.ones(2, 2, device="meta"), torch.ones(2, 2), emulation=A100)


@pytest.mark.parametrize("name", ["H100-fp8-deepseek", "B200-mxfp8", "B200-nvfp4"])
def test_scheme_presets_are_quantize_and_gemm_called_directly(name):
    em = mt.preset(name)
    m = em.model()
    rng = np.random.default_rng(8)
    a = rng.standard_normal((128, 256)).astype(np.float32)
    b = rng.standard_normal((256, 128)).astype(np.float32)
    qa = mmasim.quantize(a, em.scheme, axis=-1)
    qb = mmasim.quantize(b, em.scheme, axis=0, **({"tile": em.b_tile} if em.b_tile else {}))
    if name == "H100-fp8-deepseek":
        assert qb.scales.shape == (2, 1)                 # 128 x 128 weight blocks
    kw = {"promote_every": em.promote_every} if em.promote_every else {}
    d = np.asarray(mmasim.gemm(qa, qb, None, model=m, **kw))
    want = d.view(np.float32) if d.dtype == np.uint32 else d.astype(np.float32)
    assert np.array_equal(mt.matmul(a, b, em), want)
