"""mmasim.torch's emulated GEMM of CUDA operands under the NVFP4 training recipe
(``TE-nvfp4``: 16 x 16 weight tiles, the gradients rounded stochastically from a seed, the wgrad
GEMM's inputs through the random Hadamard transform), all on the device
(mmasim/torch/on_device.py): the seeded bits drawn there (mmasim/backends/cuda/pcg64.py), the
transform computed there (mmasim/quantization/on_device.py), NVFP4's tensor scales applied to
D there.  Run in numba-cuda's simulator (tests/cuda_sim.py), the operands objects that expose
only ``__cuda_array_interface__``, every device -> host copy counted.

Expectations: the same ``mmasim.torch.matmul.matmul`` on numpy operands (the host path: numpy
quantization, the numpy backend), whose rules tests/test_torch_*.py check.
"""

from __future__ import annotations

import pytest

from mmasim.backends.cuda import missing

import cuda_sim

pytestmark = pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")

_SCRIPT = """
    from mmasim.torch.emulation import preset
    from mmasim.torch.matmul import matmul

    te = preset("TE-nvfp4")
    cases = {"forward (16 x 16 weight tiles)": te, "dgrad (stochastic rounding)": te.dgrad,
             "wgrad (stochastic rounding, Hadamard transform)": te.wgrad}
    rng = np.random.default_rng(3)
    out = {}
    for name, em in cases.items():
        M, K, N = 20, 72, 12
        a = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-6, 6, (M, K))).astype(np.float32)
        b = (rng.standard_normal((K, N)) * 2.0 ** rng.integers(-6, 6, (K, N))).astype(np.float32)
        want = matmul(a, b, em, backend="numpy")
        A, B = Stub(a), Stub(b)
        A.shape, B.shape = a.shape, b.shape
        del copies[:]
        d = matmul(A, B, em, backend="cuda")
        seen = list(copies)
        got = d.copy_to_host()
        out[name] = {"same": got.tobytes() == want.tobytes(), "type": type(d).__name__,
                     "big copies": [(str(x.dtype), list(x.shape)) for x in seen if x.size > 1 and x.dtype.kind != "b"],
                     "operand copies": copied([a, b])}
    print(json.dumps(out))
"""

simulated = cuda_sim.fixture(_SCRIPT, None)


def test_nvfp4_recipe_gemms_of_device_operands_give_the_host_paths_values(simulated):
    """Bit for bit, each of TE-nvfp4's three GEMMs (the seed's bits and the transform's bf16
    rounding as the host draws and rounds them)."""
    assert len(simulated) == 3
    for name, rec in simulated.items():
        assert rec["same"] and rec["type"] == "FakeCUDAArray", (name, rec)


def test_stochastic_rounding_and_the_hadamard_transform_copy_no_operand_to_the_host(simulated):
    """What does come back: status flags, tensor amaxes (one value each), gemm's row flags."""
    for name, rec in simulated.items():
        assert rec["operand copies"] == 0 and rec["big copies"] == [], (name, rec)
