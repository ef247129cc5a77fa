"""mmasim.torch: linear with autograd, emulate, presets (docs/torch.md).

Expectations come from torch's own arithmetic on exactly representable inputs, from
mmasim.gemm / mmasim.quantize called directly, or from values worked by hand."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

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


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lead=st.lists(st.integers(0, 3), max_size=2), inp=st.sampled_from([0, 1, 5, 17]),
       out=st.sampled_from([0, 1, 3, 9]), with_bias=st.booleans(), seed=st.integers(0, 2 ** 16))
def test_linear_matches_torch_for_every_shape_empty_ones_included(lead, inp, out, with_bias, seed):
    """torch.nn.functional.linear on small integers (bf16-exact, every sum exact): the same
    output and gradients, of the same shapes, for any batch shape and any feature count, 0 too.
    With 0 input features torch returns the bias itself (-0 kept) or zeros without one, and
    gives x and W empty gradients."""
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.integers(-3, 4, size=(*lead, inp)).astype(np.float32))
    w = torch.from_numpy(rng.integers(-3, 4, size=(out, inp)).astype(np.float32))
    b = torch.from_numpy(rng.choice(np.array([-0.0, 0.0, 1.0, -2.0], np.float32), size=out)) if with_bias else None
    dy = torch.from_numpy(rng.integers(-3, 4, size=(*lead, out)).astype(np.float32))
    leaves = [t.clone().requires_grad_() for t in (x, w) + ((b,) if with_bias else ())]
    theirs = [t.clone().requires_grad_() for t in (x, w) + ((b,) if with_bias else ())]
    y = mt.linear(*leaves[:2], leaves[2] if with_bias else None, emulation=A100)
    want = torch.nn.functional.linear(*theirs)
    assert y.shape == want.shape and torch.equal(y, want)
    if inp == 0:                                   # the bias bit for bit: -0 stays -0
        assert torch.equal(y.view(torch.int32), want.view(torch.int32))
    y.backward(dy)
    want.backward(dy)
    for mine, torchs in zip(leaves, theirs):
        assert mine.grad is not None and mine.grad.shape == torchs.grad.shape
        assert torch.equal(mine.grad, torchs.grad)


def _layer(seed, batch, inp, out, em):
    """(y, x, w, dy) of a linear layer on random normal x and w, after y.backward(dy)."""
    rng = np.random.default_rng(seed)
    x, w, dy = (torch.from_numpy(rng.standard_normal(s).astype(np.float32))
                for s in ((batch, inp), (out, inp), (batch, out)))
    x.requires_grad_()
    w.requires_grad_()
    y = mt.linear(x, w, emulation=em)
    y.backward(dy)
    return y, x, w, dy


def test_each_gemm_of_a_linear_layer_is_the_direct_gemm():
    y, x, w, dy = _layer(5, 16, 32, 16, A100)
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


def test_emulate_patches_no_module():
    net = torch.nn.Sequential(torch.nn.Linear(48, 16), torch.nn.ReLU(), torch.nn.Linear(16, 8))
    with torch.no_grad():
        for p in net.parameters():
            p.copy_(torch.round(p * 4))          # small integers: exact in bf16 and in the sums
    x = _ints((8, 48), seed=7)
    before = net(x)
    with mt.emulate(net, A100):
        assert all("forward" not in m.__dict__ for m in net.modules())
        with torch.no_grad():
            inside = net(x)
    assert all("forward" not in m.__dict__ for m in net.modules())
    assert torch.equal(inside, before)
    with pytest.raises(RuntimeError):
        with mt.emulate(net, A100):
            raise RuntimeError("boom")
    assert torch.equal(net(x), before)


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
    with pytest.raises(mmasim.OperandError, match=r"bias \(4,\) does not broadcast to the output \(2, 3\)"):
        mt.linear(torch.ones(2, 5), torch.ones(3, 5), torch.ones(4), emulation=A100)
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


H100_FP8 = mt.preset("H100-fp8-tensor")
#: OCP 8-bit floating point formats: the largest finite e4m3 and e5m2 values
FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}


def _direct_tensor_scaled(a, b, instruction):
    """a @ b under per-tensor FP8 scaling by mmasim.quantize + mmasim.gemm called directly:
    each operand times RN(max / amax), cast, its words padded with +0 (code 0) to wgmma's
    M 64, N 8, K 32; D times RN(RN(1/sa) * RN(1/sb)) in binary32."""
    m = mmasim.Model.lookup("H100", instruction)
    words, inv = [], []
    for x, fmt, tile in ((a, m.a_format, (64, 32)), (b, m.b_format, (32, 8))):
        x = np.asarray(x, np.float32)
        s = np.float32(np.float32(FP8_MAX[fmt.key]) / np.float32(np.abs(x).max()))
        q = mmasim.quantize((x * s).astype(np.float32), fmt.key, saturate=True).words
        shape = [-(-n // t) * t for n, t in zip(x.shape, tile)]
        w = np.zeros(shape, dtype=q.dtype)
        w[:x.shape[0], :x.shape[1]] = q
        words.append(w)
        inv.append(np.float32(np.float32(1) / s))
    c = np.zeros((words[0].shape[0], words[1].shape[1]), dtype=np.uint32)
    d = from_words(mmasim.gemm(words[0], words[1], c, model=m), m.d_format).astype(np.float32)
    return (d[:a.shape[0], :b.shape[1]] * np.float32(inv[0] * inv[1])).astype(np.float32)


def test_h100_fp8_layer_on_partial_tiles_is_the_three_direct_gemms():
    # x and W are cast once for the forward and reused by the backward GEMMs, dy once for both
    y, x, w, dy = _layer(9, 20, 40, 12, H100_FP8)
    xn, wn = x.detach().numpy(), w.detach().numpy()
    e4, e5 = "wgmma.mma_async.k32.f32.e4m3.e4m3", "wgmma.mma_async.k32.f32.e5m2.e4m3"
    assert np.array_equal(y.detach().numpy(), _direct_tensor_scaled(xn, wn.T, e4))
    assert np.array_equal(x.grad.numpy(), _direct_tensor_scaled(dy.numpy(), wn, e5))
    assert np.array_equal(w.grad.numpy(), _direct_tensor_scaled(dy.numpy().T, xn, e5))


def test_a_second_backward_reads_its_own_gradient():
    # the forward's words are kept for every backward; each backward casts its own dy
    rng = np.random.default_rng(10)
    x = torch.from_numpy(rng.standard_normal((8, 32)).astype(np.float32)).requires_grad_()
    w = torch.from_numpy(rng.standard_normal((8, 32)).astype(np.float32))
    y = mt.linear(x, w, emulation=H100_FP8)
    dy1 = torch.from_numpy(rng.standard_normal((8, 8)).astype(np.float32))
    dy2 = torch.from_numpy(rng.standard_normal((8, 8)).astype(np.float32) * 3)
    y.backward(dy1, retain_graph=True)
    g1 = x.grad.clone()
    x.grad = None
    y.backward(dy2)
    e5 = "wgmma.mma_async.k32.f32.e5m2.e4m3"
    assert np.array_equal(g1.numpy(), _direct_tensor_scaled(dy1.numpy(), w.numpy(), e5))
    assert np.array_equal(x.grad.numpy(), _direct_tensor_scaled(dy2.numpy(), w.numpy(), e5))


def test_an_emulation_looks_its_model_up_again_in_a_new_registry():
    from mmasim.registry import build as registry
    em = mt.Emulation("A100", "mma.sync.m16n8k16.f32.bf16.bf16.f32")
    first = em.model()
    assert em.model() is first                       # the GEMMs of a layer share one model
    registry.reset_registry()                        # what registering a plugin does
    again = em.model()
    assert again is not first and again.registry is registry.get_registry()
    assert again.instruction == first.instruction


def _direct_scheme(a, b, em, a_options=None, b_options=None):
    """a @ b by mmasim.quantize (the scheme with ``a_options`` / ``b_options``, blocks along K)
    and mmasim.gemm called directly on the instruction ``em`` names, D's values as float32."""
    qa = mmasim.quantize(a, em.scheme, axis=-1, **(a_options or {}))
    qb = mmasim.quantize(b, em.scheme, axis=0, **(b_options or {}))
    d = np.asarray(mmasim.gemm(qa, qb, None, model=em.model()))
    return d.view(np.float32) if d.dtype == np.uint32 else d.astype(np.float32)


def test_te_mxfp8_layer_is_rceil_mxfp8_e4m3_quantize_and_gemm_for_all_three_gemms():
    # TE's MXFP8BlockScaling with its default Format.E4M3: every operand, dy included, e4m3 in
    # 1 x 32 blocks along the GEMM's K, e8m0 scales by RCEIL; whole tiles (M 128, K 32)
    em = mt.preset("TE-mxfp8")
    assert (em.scheme, em.scale_rounding, em.dgrad, em.wgrad) == ("mxfp8_e4m3", "rceil", None, None)
    y, x, w, dy = _layer(33, 128, 64, 128, em)
    xn, wn, dyn = x.detach().numpy(), w.detach().numpy(), dy.numpy()
    cases = ((y.detach().numpy(), xn, wn.T), (x.grad.numpy(), dyn, wn), (w.grad.numpy(), dyn.T, xn))
    for got, a, b in cases:
        rceil = {"scale_rounding": "rceil"}
        assert np.array_equal(got, _direct_scheme(a, b, em, rceil, rceil))
        assert not np.array_equal(got, _direct_scheme(a, b, em))   # FLOOR scales give other words


def _bf16(x):
    return mmasim.quantize(x, "bf16").dequantize().astype(np.float32)


def test_te_nvfp4_layer_is_quantize_with_tiles_rht_and_stochastic_rounding_and_gemm():
    # TE's NVFP4BlockScaling: forward x (1 x 16, RNE) by W^T (16 x 16 tiles); dgrad dy
    # (stochastic rounding) by W (the same 16 x 16 tiles, read transposed); wgrad dy^T
    # (stochastic) by x, both through the random Hadamard transform along K (the batch)
    em = mt.preset("TE-nvfp4")
    y, x, w, dy = _layer(34, 128, 64, 128, em)
    xn, wn, dyn = x.detach().numpy(), w.detach().numpy(), dy.numpy()
    tiles, sr = {"tile": (16, 16)}, {"rounding": "stochastic", "seed": 0}
    rht = {"hadamard": True}
    cases = ((y.detach().numpy(), xn, wn.T, {}, tiles), (x.grad.numpy(), dyn, wn, sr, tiles),
             (w.grad.numpy(), _bf16(dyn.T), _bf16(xn), {**sr, **rht}, rht))   # RHT reads bf16
    for got, a, b, a_options, b_options in cases:
        assert np.array_equal(got, _direct_scheme(a, b, em, a_options, b_options))
        assert not np.array_equal(got, _direct_scheme(a, b, em))      # plain 1 x 16 RNE gives other words


@pytest.mark.parametrize("fields, message", [
    ({"scheme": "mxfp8_e4m3", "scale_rounding": "ceil"}, "scale_rounding.*'floor', 'rceil'"),
    ({"scheme": "nvfp4", "scale_rounding": "rceil"}, "scale_rounding.*mxfp8_e4m3.*'nvfp4'"),
    ({"scheme": "nvfp4", "a_rounding": "up"}, "a_rounding.*'nearest', 'stochastic'"),
    ({"scheme": "deepseek_fp8", "a_rounding": "stochastic"}, "a_rounding='stochastic'.*deepseek_fp8"),
    ({"scheme": "mxfp4", "hadamard": True}, "hadamard=True.*nvfp4.*mxfp4"),
    ({"scheme": "nvfp4", "hadamard": True, "b_tile": (16, 16)}, "hadamard=True or b_tile"),
    ({"scheme": "nvfp4", "seed": -1}, "seed.*non-negative"),
    ({"scheme": "mxfp8_e4m3", "b_tile": (16, 16)}, "b_tile.*nvfp4.*'mxfp8_e4m3'"),
    ({"scheme": None, "scaling": "cast", "scale_rounding": "rceil"}, "scale_rounding.*None"),
    ({"scheme": None, "scaling": "delayed"}, "scaling='delayed' and delayed="),
    ({"scheme": None, "scaling": "cast", "delayed": 5}, "delayed must be None or an mmasim.torch.DelayedScalings"),
])
def test_recipe_fields_are_refused_where_the_scheme_has_no_such_step(fields, message):
    with pytest.raises(mmasim.EmulationError, match=message):
        mt.Emulation("B200", "x", **{"scaling": "scheme", **fields})


def test_te_fp8_delayed_layer_is_delayed_scaling_quantize_and_gemm_over_two_steps():
    # TE's DelayedScaling (HYBRID): x and W e4m3, dy e5m2, each with its own amax history; the
    # first step casts with scale 1, update() sets each role's scale from the amaxes it recorded
    from mmasim.quantization.delayed import DelayedScaling
    em = mt.preset("TE-fp8-delayed")
    em.delayed.reset()
    e4, e5 = (mmasim.Model.lookup("H100", f"wgmma.mma_async.k32.f32.{a}.e4m3") for a in ("e4m3", "e5m2"))
    roles = {"x": DelayedScaling("e4m3"), "w": DelayedScaling("e4m3"), "dy": DelayedScaling("e5m2")}

    def direct(model, a, ra, b, rb):
        qa, qb = roles[ra].quantize(a), roles[rb].quantize(b)
        d = np.asarray(mmasim.gemm(qa.words, qb.words, None, model=model, words=False), np.float32)
        return (d * np.float32(qa.tensor_scale * qb.tensor_scale)).astype(np.float32)

    for step in (1, 2):
        y, x, w, dy = _layer(40 + step, 64, 64, 64, em)
        xn, wn, dyn = x.detach().numpy(), w.detach().numpy(), dy.numpy()
        assert np.array_equal(y.detach().numpy(), direct(e4, xn, "x", wn.T, "w"))
        assert np.array_equal(x.grad.numpy(), direct(e5, dyn, "dy", wn, "w"))
        assert np.array_equal(w.grad.numpy(), direct(e5, dyn.T, "dy", xn, "x"))
        em.delayed.update()
        for ds in roles.values():
            ds.update()
        assert roles["x"].scale != 1                              # the second step's scales are not 1
    em.delayed.reset()


def test_te_fp8_delayed_keeps_one_history_per_module_and_role_across_steps():
    # TE keeps an fp8_meta per module: two Linear layers of different magnitudes under one
    # TE-fp8-delayed preset get their own amax histories and scales.  Worked by hand: W0 = W1 =
    # 1.75 I, loss = 1.75 * sum(y1), so dy1 = 1.75; x = 1.75 (steps 1, 3) and 3.5 (step 2).
    # Step 1 (scales 1, every value exact): y0 = 1.75 * 1.75 = 3.0625 (recorded as layer 1's
    # input amax before its cast), dy0 = dy1 W1 = 3.0625.  update(): scale = RN(max / amax) with
    # max 448 (e4m3: input, weight) or 57344 (e5m2: gradient), amax the history's largest.
    # Step 2: x = 3.5 joins layer 0's input history (448 / 3.5 = 128); x * 256 = 896 saturates
    # to 448, so y0 = 448 * 448 * 2^-16 = 3.0625 again; dy1 * 32768 = 57344 and W1 * 256 = 448
    # give dy0 = 57344 * 448 * 2^-23 = 3.0625.  Step 3: x = 1.75, the history keeps 3.5.
    em = mt.preset("TE-fp8-delayed")
    state = em.delayed
    state.reset()
    model = torch.nn.Sequential(torch.nn.Linear(4, 4, bias=False), torch.nn.Linear(4, 4, bias=False))
    with torch.no_grad():
        for layer in model:
            layer.weight.copy_(1.75 * torch.eye(4))
    f32 = np.float32
    step1 = {("0", "a"): f32(448) / f32(1.75), ("0", "b"): f32(256), ("0", "dd"): f32(57344) / f32(3.0625),
             ("1", "a"): f32(448) / f32(3.0625), ("1", "b"): f32(256), ("1", "dd"): f32(32768)}
    expected = [step1, {**step1, ("0", "a"): f32(128)}, {**step1, ("0", "a"): f32(128)}]
    try:
        for x_value, want in zip((1.75, 3.5, 1.75), expected):
            with mt.emulate(model, em):
                y = model(torch.full((1, 4), x_value))
                (1.75 * y.sum()).backward()
            state.update()
            fmts = {"a": "e4m3", "b": "e4m3", "dd": "e5m2"}
            got = {(m, r): state.scaling((r, 0), fmts[r], module=m).scale for m, r in want}
            assert got == want
        assert {k[0] for k in state.roles} == {"0", "1"}          # no state outside the two modules
        # the history rolls toward its start each update: the three steps' amaxes at its end
        assert state.scaling(("a", 0), "e4m3", module="0").amax_history[-3:].tolist() == [1.75, 3.5, 1.75]
    finally:
        state.reset()
