"""Every scaling of mmasim.torch's emulated GEMM on the CUDA device (issue 31,
mmasim/torch/on_device.py): promotion, split-K, an output format, DeepSeek's FP8 tiles with their
promotion scales, FP8 delayed scaling over several steps, NVFP4 with its tensor scale, words
moved by value into the container the instruction reads, a D that is neither f32 nor f16.  Run
in numba-cuda's simulator (tests/cuda_sim.py: operands that expose only
``__cuda_array_interface__``, every device -> host copy counted).

Expectations: the same ``mmasim.torch.matmul.matmul`` on numpy operands (the host path: numpy
quantization, the numpy backend), whose rules tests/test_torch*.py and tests/test_quantize*.py
check against hand-worked values; under delayed scaling, also the host path's state (amax
history and scale) after each step.
"""

from __future__ import annotations

import pytest

import cuda_sim

BF16 = "mma.sync.m16n8k16.f32.bf16.bf16.f32"
#: name -> (arch, instruction, Emulation keywords; ``shape``: (M, K, N), else (16, 64, 8))
CASES = {
    "promotion": ("A100", BF16, dict(promote_every=32)),
    "split-K, sequential": ("A100", BF16, dict(split_k=2)),
    "split-K, tree, promotion": ("A100", BF16, dict(split_k=2, split_reduce="tree", promote_every=16)),
    "output e4m3": ("A100", BF16, dict(output="e4m3")),
    "output e5m2": ("A100", BF16, dict(output="e5m2")),
    "output bf16": ("A100", BF16, dict(output="bf16")),
    "output e2m1 (RTX Blackwell's container)": ("A100", BF16, dict(output="e2m1.sm120")),
    "DeepSeek FP8, 128 x 128 B tiles, promotion scales": (
        "H100", "mma.sync.m16n8k32.f32.e4m3.e4m3.f32",
        dict(scaling="scheme", scheme="deepseek_fp8", promote_every=128, b_tile=(128, 128))),
    "DeepSeek FP8, 1 x 128 groups, promotion scales": (
        "H100", "mma.sync.m16n8k32.f32.e4m3.e4m3.f32", dict(scaling="scheme", scheme="deepseek_fp8",
                                                            promote_every=128)),
    "NVFP4, tensor scale": ("B200", "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.ue4m3",
                            dict(scaling="scheme", scheme="nvfp4")),
    "NVFP4, 16 x 16 B tiles, tensor scale, output bf16": (
        "B200", "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.ue4m3",
        dict(scaling="scheme", scheme="nvfp4", b_tile=(16, 16), output="bf16", shape=(16, 64, 16))),
    "MXFP4 moved into the e2m1 byte container": (
        "B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.f32.e2m1.e2m1.ue8m0", dict(scaling="scheme", scheme="mxfp4")),
    "cast into RTX Blackwell's e2m1 container": ("RTX Blackwell", "mma.sync.kind::f8f6f4.m16n8k32.f32.e2m1.e4m3", {}),
    "D f64": ("A100", "mma.sync.m8n8k4.f64.f64.f64", {}),
}
#: delayed scaling: steps of one GEMM, its state updated after each
STEPS = 3
#: NVFP4's seeded stochastic rounding and Hadamard transform (mmasim.quantization.on_device)
HOST = {
    "Hadamard transform": dict(hadamard=True),
    "seeded stochastic rounding": dict(a_rounding="stochastic"),
}

_SCRIPT = """
    from mmasim.torch import DelayedScalings, Emulation
    from mmasim.torch import on_device
    from mmasim.torch.matmul import matmul

    class Tensor(Stub):
        shape = property(lambda self: self.a.shape)

    cases, steps, host = json.loads(sys.argv[1])
    rng = np.random.default_rng(31)

    def operands(M=16, K=64, N=8):
        a = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-6, 6, (M, K))).astype(np.float32)
        b = (rng.standard_normal((K, N)) * 2.0 ** rng.integers(-6, 6, (K, N))).astype(np.float32)
        return a, b

    def on_the_device(a, b, em):
        A, B = Tensor(a), Tensor(b)
        takes = on_device.takes(A, B, em, "cuda")
        del copies[:]
        d = matmul(A, B, em, backend="cuda")
        seen = list(copies)
        return d.copy_to_host(), {"takes": takes, "operand copies": copied([a, b]), "type": type(d).__name__,
                                  "value copies": [list(x.shape) for x in seen if x.dtype.kind == "f" and x.size > 1]}

    out = {}
    for name, (arch, inst, kw) in cases.items():
        if "b_tile" in kw:
            kw["b_tile"] = tuple(kw["b_tile"])
        shape = kw.pop("shape", (16, 64, 8))
        em = Emulation(arch, inst, **kw)
        a, b = operands(*shape)
        want = matmul(a, b, em, backend="numpy")
        got, rec = on_the_device(a, b, em)
        out[name] = dict(rec, same=got.tobytes() == want.tobytes(), finite=bool(np.isfinite(want).all()),
                         nonzero=int(np.count_nonzero(want)))

    inst = "mma.sync.m16n8k32.f32.e4m3.e4m3.f32"
    ds_host, ds_dev = DelayedScalings(amax_history_len=2), DelayedScalings(amax_history_len=2)
    em_host = Emulation("H100", inst, scaling="delayed", delayed=ds_host)
    em_dev = Emulation("H100", inst, scaling="delayed", delayed=ds_dev)
    for step in range(steps):
        a, b = operands()
        a *= np.float32(2.0 ** (4 * step - 4))          # the amax moves: each step's scale differs
        want = matmul(a, b, em_host, backend="numpy")
        got, rec = on_the_device(a, b, em_dev)
        states = [(ds.roles[(None, r, "e4m3")].amax_history.tolist(), float(ds.roles[(None, r, "e4m3")].scale))
                  for ds in (ds_host, ds_dev) for r in ("A", "B")]
        ds_host.update()
        ds_dev.update()
        updated = [float(ds.roles[(None, r, "e4m3")].scale) for ds in (ds_host, ds_dev) for r in ("A", "B")]
        out[f"delayed scaling, step {step}"] = dict(rec, same=got.tobytes() == want.tobytes(), host_state=states[:2],
                                                    device_state=states[2:], host_scales=updated[:2],
                                                    device_scales=updated[2:], finite=bool(np.isfinite(want).all()),
                                                    nonzero=int(np.count_nonzero(want)))

    nvfp4 = "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.ue4m3"
    for name, kw in host.items():
        em = Emulation("B200", nvfp4, scaling="scheme", scheme="nvfp4", **kw)
        a, b = operands()
        want = matmul(a, b, em, backend="numpy")
        got, rec = on_the_device(a, b, em)
        out["host: " + name] = dict(rec, same=got.tobytes() == want.tobytes())
    print(json.dumps(out))
"""

simulated = cuda_sim.fixture(_SCRIPT, [CASES, STEPS, HOST])

ON_DEVICE = list(CASES) + [f"delayed scaling, step {s}" for s in range(STEPS)]


@pytest.mark.parametrize("case", ON_DEVICE)
def test_each_scaling_of_device_operands_runs_on_the_device_with_the_host_paths_values(simulated, case):
    rec = simulated[case]
    assert rec["takes"] == "" and rec["type"] == "FakeCUDAArray", rec
    assert rec["same"], rec
    assert rec["finite"] and rec["nonzero"] > 0, rec        # the comparison is of real values


@pytest.mark.parametrize("case", ON_DEVICE)
def test_each_scaling_of_device_operands_copies_no_operand_or_value_to_the_host(simulated, case):
    """What does come back: status flags, an amax or two (one value each), gemm's own row flags."""
    rec = simulated[case]
    assert rec["operand copies"] == 0 and rec["value copies"] == [], rec


@pytest.mark.parametrize("step", range(STEPS))
def test_delayed_scaling_on_the_device_records_the_host_paths_amax_history_and_scale(simulated, step):
    rec = simulated[f"delayed scaling, step {step}"]
    assert rec["device_state"] == rec["host_state"], rec
    assert rec["device_scales"] == rec["host_scales"], rec
    if step:        # the state moved: a scale from an amax, not the first step's 1
        assert all(s != 1.0 for s in rec["host_scales"]), rec


@pytest.mark.parametrize("case", list(HOST))
def test_nvfp4_with_the_hadamard_transform_or_seeded_stochastic_rounding_runs_on_the_device_too(simulated, case):
    rec = simulated["host: " + case]
    assert rec["takes"] == "" and rec["same"] and rec["operand copies"] == 0, rec
