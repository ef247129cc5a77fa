"""mmasim.torch's convolutions and attention modes under ``backend="cuda"`` with CUDA tensors
(issue 31): the im2col and filter reshapes, the softmax steps and the quantization run where the
tensors lie, each GEMM on the device (mmasim/torch/on_device.py); nothing comes to the host but
flags and scalars (FA3's per-matrix amax and descales).  Run in numba-cuda's simulator
(a subprocess, tests/cuda_sim.py), a CUDA tensor stood in for by ``OnDevice``: a CPU tensor that
exposes ``__cuda_array_interface__`` and counts each call that would bring it to the host.

Expectations: the same function on CPU tensors under the numpy backend (the host path, whose
words tests/test_torch_conv.py and tests/test_torch_attention_presets.py check by hand).
"""

from __future__ import annotations

import textwrap

import pytest

from cuda_sim import TORCH, fixture

pytest.importorskip("torch")

_SCRIPT = TORCH + textwrap.dedent("""
    import attrs
    import mmasim.torch as mt
    from mmasim.torch import attention, conv, flash_attention

    # FA3's blocks made small (64 queries, 32 keys; host and device alike): the simulator is slow
    flash_attention.block_m, flash_attention.block_n = (lambda d: 64), (lambda d: 32)

    rng = np.random.default_rng(5)

    def rand(*shape):
        return torch.from_numpy((rng.standard_normal(shape) * 2.0 ** rng.integers(-3, 3, shape)).astype(np.float32))

    def conv_case(nd, xs, ws, stride, pad, groups, transposed, size):
        # the host: conv.conv with autograd on CPU tensors; the device: its three implicit GEMMs as
        # its autograd Function calls them (autograd hands backward plain tensors, not OnDevice ones)
        em = mt.preset("A100-bf16")
        geo = conv.geometry(nd, ws[2:], stride, pad, 1, groups)
        spec = conv.Spec(geo, transposed, size, em, "rsc", None)
        x, w = rand(*xs).requires_grad_(), rand(*ws).requires_grad_()
        backend("numpy")
        y = conv.conv(x, w, spec)
        dy = rand(*y.shape)
        y.backward(dy)
        backend("cuda")
        ops = [on_device(t) for t in (x, w, dy)]

        def run():
            x, w, dy = ops
            if transposed:
                return (conv.dgrad(x, w, geo, size, em, "forward", "rsc", None, "c"),
                        conv.fprop(dy, w, geo, em, "dgrad", "rsc", None, "k"),
                        conv.wgrad(dy, x, geo, w.shape[2:], em, "wgrad", "rsc", None, grad_is_x=True))
            return (conv.fprop(x, w, geo, em, "forward", "rsc", None),
                    conv.dgrad(dy, w, geo, x.shape[2:], em, "dgrad", "rsc", None),
                    conv.wgrad(x, dy, geo, w.shape[2:], em, "wgrad", "rsc", None))
        return (y.detach(), x.grad, w.grad), run, ops

    def sdpa_case(preset, shape, causal, keys=None, **options):
        em = attrs.evolve(mt.preset(preset), **options)
        kv = shape if keys is None else (*shape[:-2], keys, shape[-1])
        q, k, v = rand(*shape), rand(*kv), rand(*kv)
        backend("numpy")
        with torch.no_grad():
            want = attention.sdpa(q, k, v, None, 0.0, causal, None, False, em, None, None)
        backend("cuda")
        ops = [on_device(t) for t in (q, k, v)]

        def run():
            with torch.no_grad():
                return (attention.sdpa(*ops, None, 0.0, causal, None, False, em, None, None),)
        return (want,), run, ops

    cases = {
        "conv2d, 2 groups, stride 2, forward and backward": lambda: conv_case(
            2, (1, 2, 4, 4), (2, 1, 3, 3), (2, 1), 1, 2, False, None),
        "conv_transpose1d, forward and backward": lambda: conv_case(1, (1, 2, 3), (2, 2, 3), (2,), 0, 1, True, (7,)),
        "softmax attention, causal": lambda: sdpa_case("A100-bf16", (1, 1, 8, 16), True),
        "fa3-fp8": lambda: sdpa_case("H100-fp8-fa3", (1, 2, 8, 16), False),
        "cudnn-mxfp8": lambda: sdpa_case("B200-mxfp8-sdpa", (1, 1, 8, 16), False),
        "fa3-fp8-flash, two key blocks": lambda: sdpa_case("H100-fp8-fa3", (1, 1, 8, 16), False, keys=40,
                                                           attention="fa3-fp8-flash"),
        "sage3-nvfp4, two key blocks": lambda: sdpa_case("RTX5090-nvfp4-sage3", (1, 1, 4, 32), False, keys=130),
    }
    out = {}
    for name, case in cases.items():
        want, run, ops = case()
        views = [plain(t).numpy() for t in ops]
        del copies[:], escapes[:]
        got = run()
        seen = list(copies)
        out[name] = {
            "same": all(torch.equal(plain(g), w) for g, w in zip(got, want)),
            "types": [type(g).__name__ for g in got],
            "escapes": escapes[:],
            "operand copies": copied(views),
            "big copies": [[str(x.dtype), list(x.shape)] for x in seen if x.size > 1 and x.dtype.kind != "b"],
        }
    print(json.dumps(out))
""")

simulated = fixture(_SCRIPT, None)


def test_device_tensors_give_the_host_paths_words(simulated):
    for name, rec in simulated.items():
        assert rec["same"], (name, rec)


def test_the_outputs_stay_on_the_device(simulated):
    """The convolution's output and gradients, the attention's output."""
    for name, rec in simulated.items():
        assert set(rec["types"]) == {"OnDevice"}, (name, rec)


def test_no_operand_or_intermediate_comes_to_the_host(simulated):
    for name, rec in simulated.items():
        assert rec["operand copies"] == 0 and rec["big copies"] == [], (name, rec)
        if not name.startswith("fa3-fp8"):
            assert rec["escapes"] == [], (name, rec)


def test_fa3_fp8_brings_only_each_matrixs_amax_to_the_host(simulated):
    """Transformer Engine's current scaling of Q, K and V per (batch, head): one amax a matrix."""
    assert simulated["fa3-fp8"]["escapes"] == [["cpu", 2], ["numpy", 2]] * 3
    assert simulated["fa3-fp8-flash, two key blocks"]["escapes"] == [["cpu", 1], ["numpy", 1]] * 3
