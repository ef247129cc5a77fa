"""mmasim.torch's emulated GEMM under ``backend="cuda"`` with operands on the device
(mmasim/torch/on_device.py): the operands quantized on the device by the compiled bodies, their
words through gemm's plain chain on the device, D's values there; no operand, word or value
comes to the host.  Run in numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``, a subprocess),
the operands objects that expose only ``__cuda_array_interface__``; every device -> host copy
is counted (the simulator's ``copy_to_host``).

Expectations: the same ``mmasim.torch.matmul.matmul`` on numpy operands (the host path: numpy
quantization, the numpy backend), whose rules tests/test_torch_*.py check.
tests/test_torch_on_device_scalings.py: promotion, split-K, output formats, DeepSeek, delayed
scaling, NVFP4, container moves on the device, and what still comes from host copies.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

import cuda_sim

from mmasim.backends.cuda import missing

pytestmark = pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")

_SCRIPT = textwrap.dedent("""
    import json
    import numpy as np
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
    from mmasim.torch import Emulation
    from mmasim.torch.matmul import matmul

    class Stub:
        '''A CUDA tensor as a foreign library hands it over: __cuda_array_interface__ only.'''
        def __init__(self, a):
            self.a = np.ascontiguousarray(a)
            self.shape = self.a.shape
        @property
        def __cuda_array_interface__(self):
            a = self.a
            return {"shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, False), "strides": None,
                    "version": 3}

    copies = []
    _copy = FakeCUDAArray.copy_to_host
    def counted(self, *args, **kwargs):
        copies.append(self._ary)
        return _copy(self, *args, **kwargs)
    FakeCUDAArray.copy_to_host = counted

    h100 = "wgmma.mma_async.k32.f32.e4m3.e4m3"
    cases = {
        "cast e4m3": Emulation("H100", h100, saturate=True),
        "per-tensor e4m3": Emulation("H100", h100, scaling="tensor"),
        "A100 bf16": Emulation("A100", "mma.sync.m16n8k16.f32.bf16.bf16.f32"),
        "MXFP8 (padded)": Emulation("B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.f32.e4m3.e4m3.ue8m0",
                                    scaling="scheme", scheme="mxfp8_e4m3"),
        "MXFP8 rceil": Emulation("B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.f32.e4m3.e4m3.ue8m0",
                                 scaling="scheme", scheme="mxfp8_e4m3", scale_rounding="rceil"),
    }
    rng = np.random.default_rng(11)
    out = {}
    for name, em in cases.items():
        M, K, N = (20, 72, 12) if "padded" in name else (16, 64, 8)
        a = (rng.standard_normal((M, K)) * 2.0 ** rng.integers(-6, 6, (M, K))).astype(np.float32)
        b = (rng.standard_normal((K, N)) * 2.0 ** rng.integers(-6, 6, (K, N))).astype(np.float32)
        want = matmul(a, b, em, backend="numpy")
        A, B = Stub(a), Stub(b)
        del copies[:]
        d = matmul(A, B, em, backend="cuda")
        seen = list(copies)
        got = d.copy_to_host()
        big = [(str(x.dtype), list(x.shape)) for x in seen if x.size > 1 and x.dtype.kind not in "b"]
        operand = sum(np.shares_memory(x, o) for x in seen for o in (a, b))
        out[name] = {"same": got.tobytes() == want.tobytes(), "shape": list(got.shape), "type": type(d).__name__,
                     "big copies": big, "operand copies": int(operand)}
    print(json.dumps(out))
""")


@pytest.fixture(scope="module")
def simulated():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1", MMASIM_BACKEND="numpy")
    r = subprocess.run([sys.executable, "-c", cuda_sim.RECORDER + _SCRIPT], capture_output=True, text=True, env=env,
                       timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    cuda_sim.check_launches(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_emulated_gemm_of_device_operands_gives_the_host_paths_values(simulated):
    for name, rec in simulated.items():
        assert rec["same"] and rec["type"] == "FakeCUDAArray", (name, rec)


def test_emulated_gemm_of_device_operands_copies_no_operand_word_or_value_to_the_host(simulated):
    """What does come back: status flags, the per-tensor amax (one value), gemm's row flags (bool)."""
    for name, rec in simulated.items():
        assert rec["operand copies"] == 0 and rec["big copies"] == [], (name, rec)
