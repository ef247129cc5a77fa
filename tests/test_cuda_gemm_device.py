"""``mmasim.gemm`` with promotion and split-K on operands on the CUDA device, without a GPU.

Under numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``, in a subprocess, as
tests/test_cuda_backend.py runs it), device operands (objects exposing only
``__cuda_array_interface__``) of H100's e4m3 wgmma go through ``promote_every`` (with and
without promotion scales) and ``split_k`` (sequential and tree reduce).  Expectation: the numpy
backend's words of ``mmasim.gemm`` on the same (host) operands; and no device -> host copy reads
an operand's memory (the simulator's ``copy_to_host`` counted).
"""

from __future__ import annotations

import pytest

import cuda_sim

#: name -> the gemm options of the case (``scales``: promotion scales of 128 x 4 blocks)
CASES = {
    "promote_every=128": dict(promote_every=128),
    "promote_every=128, promotion scales": dict(promote_every=128, scales=True),
    "promote_every=64, promotion scales, split_k=2": dict(promote_every=64, split_k=2, scales=True),
    "split_k=2": dict(split_k=2),
    "split_k=4": dict(split_k=4),
    "split_k=4, tree": dict(split_k=4, split_reduce="tree"),
    "split_k=2, tree, promote_every=64, no C": dict(split_k=2, split_reduce="tree", promote_every=64, no_c=True),
}

_SCRIPT = """
    rng = np.random.default_rng(31)
    M, K, N = 64, 256, 8
    A = rng.integers(0, 0x100, (M, K)).astype(np.uint8)        # e4m3: negatives and NaN words too
    B = rng.integers(0, 0x100, (K, N)).astype(np.uint8)
    A[A & 0x7F == 0x7F] = 0x3C
    A[0, 0] = 0x7F                                             # one NaN row of D
    B[B & 0x7F == 0x7F] = 0x44
    C = rng.integers(0, 0x4F000000, (M, N)).astype(np.uint32)
    C[1, :] |= 0x80000000
    C[2, 0], C[2, 1], C[2, 2] = 0x7F800000, 0x00000003, 0x80000000   # inf, a subnormal, -0
    sa = (rng.standard_normal((M, K // 128)) * 2.0 ** rng.integers(-140, 10, (M, K // 128))).astype(np.float32)
    sb = rng.standard_normal((K // 128, N // 4)).astype(np.float32)
    # row 3, columns 0 .. 3, promote_every=128: chunk 0 leaves acc = 2**-100, chunk 1's partial is
    # 1 + 2**-11 and its scale 1 + 2**-13, so partial * scale + acc lies just above the binary32
    # halfway point 1 + 2**-11 + 2**-13 + 2**-24: one FFMA rounds up, a binary64 product-sum
    # rounded again into binary32 rounds down (to even)
    A[3, :] = 0
    A[3, 0], A[3, 128], A[3, 129] = 0x38, 0x38, 0x01           # e4m3 1, 1, 2**-9
    B[0, :4], B[128, :4], B[129, :4] = 0x38, 0x38, 0x28          # e4m3 1, 1, 2**-2
    C[3, :] = 0
    sa[3] = [2.0 ** -100, 1 + 2.0 ** -13]
    sb[:, 0] = 1.0
    inst = dict(arch="H100", instruction="wgmma.mma_async.m64n8k32.f32.e4m3.e4m3")
    out = {}
    for name, opts in json.loads(sys.argv[1]).items():
        opts = dict(opts)
        scales, no_c = opts.pop("scales", False), opts.pop("no_c", False)
        c = None if no_c else C
        if scales:
            opts.update(promotion_scale_a=sa, promotion_scale_b=sb)
        want = mmasim.gemm(A, B, c, backend="numpy", **inst, **opts)
        stubs = [Stub(x) for x in (A, B, C, sa, sb)]
        dev_opts = dict(opts, **(dict(promotion_scale_a=stubs[3], promotion_scale_b=stubs[4]) if scales else {}))
        del copies[:]
        dev = mmasim.gemm(stubs[0], stubs[1], None if no_c else stubs[2], backend="cuda", **inst, **dev_opts)
        n_copied = copied([s.a for s in stubs])
        out[name] = {"want": want.tolist(), "device": dev.copy_to_host().tolist(), "device type": type(dev).__name__,
                     "operand copies": n_copied, "nan rows": int(np.isnan(want.view(np.float32)).any(axis=1).sum()),
                     "row 3": want.view(np.float32)[3, :4].tolist()}
    print(json.dumps(out))
"""


simulated = cuda_sim.fixture(_SCRIPT, CASES)


@pytest.mark.parametrize("case", list(CASES))
def test_gemm_promotion_and_split_k_of_device_operands_give_the_numpy_words(simulated, case):
    """Promotion and split-K of device operands on the device: the numpy backend's words, D a device array."""
    rec = simulated[case]
    assert rec["device"] == rec["want"]
    assert rec["device type"] == "FakeCUDAArray"
    assert rec["nan rows"] >= 1       # the canonical NaN word is among those compared


def test_promotion_scales_take_one_fused_rounding_on_the_device(simulated):
    """Row 3 of the scaled case (see the script): the FFMA's single rounding gives
    1 + 2**-11 + 2**-13 + 2**-23 (a double rounding would give 1 + 2**-11 + 2**-13)."""
    rec = simulated["promote_every=128, promotion scales"]
    assert rec["row 3"] == [1 + 2.0 ** -11 + 2.0 ** -13 + 2.0 ** -23] * 4
    assert rec["device"][3][:4] == rec["want"][3][:4]


@pytest.mark.parametrize("case", list(CASES))
def test_gemm_promotion_and_split_k_never_copy_device_operands_to_the_host(simulated, case):
    assert simulated[case]["operand copies"] == 0
