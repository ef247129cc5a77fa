"""Seeded stochastic rounding and the random Hadamard transform by the compiled quantization
(issue 31): NumPy's PCG64 as a target-neutral body (mmasim/backends/cuda/pcg64.py), the
transform's bf16 steps as bodies (mmasim/backends/cuda/hadamard.py) with its group products on
the device's rows (mmasim/quantization/on_device.py), and ``compiled.quantize(..., seed=,
hadamard=)``, on the CPU driver and under numba-cuda's simulator.

Expectations: NumPy's own generator (``PCG64(seed).random_raw``, ``PCG64.advance``: the
documented stream :func:`mmasim.quantization.rounding.random_bits` defines), and the numpy
code (``mmasim.quantize``, :func:`mmasim.quantization.hadamard.transform`), whose rules
tests/test_quantize_stochastic.py and tests/test_quantize_hadamard.py check by hand.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import mmasim
from mmasim.backends.cuda import missing
from mmasim.quantization.rounding import random_bits

numba = pytest.importorskip("numba")

from mmasim.backends.cuda import pcg64  # noqa: E402  (needs numba)
from mmasim.backends.cuda.quantize import CpuArrays  # noqa: E402
from mmasim.quantization import compiled  # noqa: E402

import cuda_sim  # noqa: E402

SEEDS = st.one_of(st.sampled_from([0, 1, 2 ** 63, 2 ** 63 + 1, 2 ** 64 - 1, 2 ** 64, 2 ** 128 - 1]),
                  st.integers(0, 2 ** 64), st.integers(2 ** 63, 2 ** 200))


@settings(max_examples=60, deadline=None)
@given(seed=SEEDS, shape=st.lists(st.integers(0, 7), min_size=0, max_size=3), width=st.integers(1, 32))
def test_pcg64_body_draws_random_bits_word_for_word(seed, shape, width):
    """Element i (C order) gets the top ``width`` bits of output i of PCG64(seed), empty shapes
    and seeds at 0, 2**63 and past 2**64 included."""
    n = int(np.prod(shape, dtype=np.int64))
    got = pcg64.random_bits(seed, (1, n), width, CpuArrays).reshape(shape)
    want = random_bits(seed, tuple(shape), width)
    assert got.shape == want.shape and got.tolist() == want.tolist()


@settings(max_examples=60, deadline=None)
@given(seed=SEEDS, i=st.one_of(st.integers(0, 64), st.integers(0, 2 ** 63 - 2)))
def test_output_i_is_the_state_advanced_i_plus_one_steps(seed, i):
    """The jump-ahead by squaring reaches any output: NumPy's generator advanced i steps, then
    its next raw output (the state is stepped before each output)."""
    gen = np.random.PCG64(seed)
    gen.advance(i)
    assert int(pcg64.raw(pcg64.seeded_state(seed), np.int64(i))) == int(gen.random_raw())


def test_the_seeded_state_is_numpys_own():
    st_ = np.random.PCG64(2 ** 63 + 5).state["state"]
    hi_lo = pcg64.seeded_state(2 ** 63 + 5)[0].tolist()
    assert (hi_lo[0] << 64 | hi_lo[1], hi_lo[2] << 64 | hi_lo[3]) == (st_["state"], st_["inc"])


def _bf16(a) -> np.ndarray:
    return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def _same(want, got):
    assert got.words.tolist() == want.words.tolist()
    assert (want.scales is None) == (got.scales is None)
    if want.scales is not None:
        assert got.scales.tobytes() == want.scales.tobytes()
    assert np.float32(want.tensor_scale or 0).tobytes() == np.float32(got.tensor_scale or 0).tobytes()


@pytest.mark.parametrize("scheme", ["nvfp4", "mxfp8_e4m3", "mxfp4", "e4m3", "e2m1x", "bf16", "f16"])
@settings(max_examples=15, deadline=None)
@given(seed=SEEDS, rows=st.integers(1, 3), axis=st.sampled_from([-1, 0]), data=st.data())
def test_compiled_seeded_stochastic_rounding_gives_the_numpy_words(scheme, seed, rows, axis, data):
    block = 32 if scheme.startswith("mx") else 16
    x = np.array(data.draw(st.lists(st.floats(-500, 500, width=32), min_size=rows * block,
                                    max_size=rows * block)), np.float32).reshape(rows, block)
    x = x if axis == -1 else x.T.copy()
    kw = dict(rounding="stochastic", seed=seed)
    if scheme in ("e4m3", "e2m1x"):
        kw["saturate"] = True
    ax = {} if scheme in ("e4m3", "e2m1x", "bf16", "f16") else {"axis": axis}
    _same(mmasim.quantize(x, scheme, **ax, **kw), compiled.quantize(x, scheme, **ax, **kw))


@settings(max_examples=20, deadline=None)
@given(data=st.data(), axis=st.sampled_from([-1, 0]), stochastic=st.booleans(),
       mask=st.sampled_from([True, 0, 0xFFFF, 0x1234]))
def test_compiled_nvfp4_with_the_hadamard_transform_gives_the_numpy_words(data, axis, stochastic, mask):
    """The transformed tensor's amax, block scales and words, to nearest or from a seed."""
    x = _bf16(np.array(data.draw(st.lists(st.floats(-2 ** 20, 2 ** 20, width=32), min_size=64, max_size=64)))
              .reshape(2, 32))
    x = x if axis == -1 else x.T.copy()
    kw = dict(hadamard=mask, **({"rounding": "stochastic", "seed": data.draw(SEEDS)} if stochastic else {}))
    _same(mmasim.quantize(x, "nvfp4", axis=axis, **kw), compiled.quantize(x, "nvfp4", axis=axis, **kw))


def test_compiled_hadamard_and_seed_on_a_padded_matrix_are_the_padded_matrixs():
    """``pad``: the transform's groups and the random bits are those of the zero-padded matrix
    (a group straddling the edge mixes x with zeros), as mmasim.torch quantizes it."""
    rng = np.random.default_rng(4)
    x = _bf16(rng.standard_normal((5, 24)))
    padded = np.zeros((8, 32), np.float32)
    padded[:5, :24] = x
    kw = dict(hadamard=True, rounding="stochastic", seed=7)
    _same(mmasim.quantize(padded, "nvfp4", **kw), compiled.quantize(x, "nvfp4", pad=(8, 32), **kw))


@pytest.mark.parametrize("bad, error", [((1, 1), 1 + 2.0 ** -10), ((0, 0), np.nan), ((1, 2), np.inf)])
def test_compiled_hadamard_refuses_what_the_numpy_code_refuses(bad, error):
    """A value that is not bf16 (DtypeError), NaN and infinity (NonFiniteError): the numpy
    code's error class and message."""
    x = _bf16(np.linspace(-3, 3, 64).reshape(2, 32))
    x[bad] = error
    with pytest.raises(mmasim.MMAError) as want:
        mmasim.quantize(x, "nvfp4", hadamard=True)
    with pytest.raises(type(want.value)) as got:
        compiled.quantize(x, "nvfp4", hadamard=True)
    assert str(got.value) == str(want.value)


def test_a_block_that_does_not_divide_x_is_the_numpy_codes_refusal():
    """It was quantized in part (the columns past the last whole block left 0)."""
    x = np.ones((2, 20), np.float32)
    with pytest.raises(mmasim.BlockShapeError) as want:
        mmasim.quantize(x, "nvfp4")
    with pytest.raises(mmasim.BlockShapeError) as got:
        compiled.quantize(x, "nvfp4")
    assert str(got.value) == str(want.value)


_SIMULATED = """
    from numba import cuda
    from mmasim.quantization import compiled, on_device
    from mmasim.quantization.hadamard import Hadamard, transform
    from mmasim.quantization.rounding import random_bits
    from mmasim.backends.cuda import pcg64
    from mmasim.backends.cuda.quantize import CudaArrays
    from mmasim.backends.cuda.device import as_device
    import ml_dtypes

    def dev(a):
        '''a, on the "device" where it lies (read in place: a copy of it back to the host is counted)'''
        return as_device(Stub(a))

    def bf16(a):
        return np.asarray(a, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)

    out = {}
    out["bits"] = [pcg64.random_bits(seed, (3, 5), w, CudaArrays).copy_to_host().tolist()
                   == random_bits(seed, (3, 5), w).tolist() for seed, w in ((0, 8), (2 ** 63 + 5, 16), (2 ** 70, 13))]
    rng = np.random.default_rng(2)
    x = bf16(rng.standard_normal((16, 32)) * 2.0 ** rng.integers(-20, 20, (16, 32)))
    x[0, 3], x[1, 4], x[2, 5], x[3, 6] = np.inf, -np.inf, np.nan, 2.0 ** -133
    same = []
    for mask in (True, 0x1234):
        spec = Hadamard.of(mask)
        d = on_device.hadamard(dev(x), spec)
        same.append(np.array_equal(d.copy_to_host(), transform(x, -1, spec, "t"), equal_nan=True))
    out["transform"] = same
    out["transform copies"] = copied([x])
    x = bf16(rng.standard_normal((20, 40)))
    padded = np.zeros((32, 48), np.float32)
    padded[:20, :40] = x
    jobs = [("nvfp4", dict(rounding="stochastic", seed=2 ** 63 + 9)),
            ("nvfp4", dict(hadamard=True, rounding="stochastic", seed=0)),
            ("e4m3", dict(rounding="stochastic", seed=3))]
    del copies[:]
    for scheme, kw in jobs:
        want = mmasim.quantize(padded, scheme, **kw)
        got = compiled.quantize(dev(x), scheme, target="cuda", pad=(32, 48), **kw)
        same = [got.words.copy_to_host().tolist() == want.words.tolist()]
        if want.scales is not None:
            same += [got.scales.copy_to_host().tobytes() == want.scales.tobytes(),
                     bool(got.tensor_scale == want.tensor_scale)]
        out[scheme + " " + " ".join(sorted(kw))] = same
    out["quantize copies"] = copied([x])
    bad = x.copy()
    bad[1, 1] = 1 + 2.0 ** -10
    for f in (lambda: mmasim.quantize(bad, "nvfp4", hadamard=True),
              lambda: compiled.quantize(dev(bad), "nvfp4", target="cuda", hadamard=True)):
        try:
            f()
        except mmasim.MMAError as e:
            out.setdefault("refusal", []).append([type(e).__name__, str(e)])
    print(json.dumps(out))
"""

simulated = cuda_sim.fixture(_SIMULATED, None)


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
def test_cuda_driver_draws_the_seeded_bits_on_the_device(simulated):
    assert simulated["bits"] == [True, True, True]


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
def test_hadamard_transform_on_the_device_is_the_numpy_transform(simulated):
    """Infinities, NaN and a bf16 subnormal among the inputs; TE's signs and another mask; x
    read in place (no copy of it)."""
    assert simulated["transform"] == [True, True] and simulated["transform copies"] == 0


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
def test_seeded_stochastic_nvfp4_and_hadamard_on_the_device_give_the_host_words(simulated):
    """NVFP4 gradients as Transformer Engine rounds them (cvt.rs from a seed), with the
    transform, and a seeded cast: the words, scales and tensor scale of ``mmasim.quantize`` on
    the zero-padded matrix; x never copied to the host."""
    for key in ("nvfp4 rounding seed", "nvfp4 hadamard rounding seed", "e4m3 rounding seed"):
        assert all(simulated[key]) and simulated[key], (key, simulated[key])
    assert simulated["quantize copies"] == 0


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
def test_a_value_that_is_not_bf16_on_the_device_raises_the_numpy_codes_error(simulated):
    (want, got) = simulated["refusal"]
    assert want == got and want[0] == "DtypeError", simulated["refusal"]


def _signature(x, out, scales):
    return tuple(numba.typeof(a) for a in (np.int64(1), x, np.zeros((1, 1), np.int64), np.zeros((1, 15), np.int64),
                                           np.zeros(1, np.int64), np.zeros(1), out, scales, np.zeros(1, np.int8)))


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
@pytest.mark.parametrize("name", ["bits", "bf16_words", "bf16_round", "bf16_values"])
def test_the_bodies_compile_to_ptx_for_sm90a_without_local_memory(name, tmp_path):
    """The same source compiles for CUDA (numba-cuda, no GPU needed): one entry, no local
    memory, and ptxas (where one knows sm_90a) assembles it without a spill."""
    from mmasim.backends.cuda import hadamard, target
    from mmasim.backends.cuda.driver import quantize_cuda
    from test_compiled_quantize import assemble_without_spills

    z = np.zeros((1, 1))
    sigs = {"bits": (pcg64.bits_body, _signature(np.zeros((1, 4), np.uint64), z.astype(np.int64), z.astype(np.int64))),
            "bf16_words": (hadamard.bf16_words_body, _signature(z.astype(np.float32), z.astype(np.uint16),
                                                                z.astype(np.uint32))),
            "bf16_round": (hadamard.bf16_round_body, _signature(z.astype(np.uint32), z.astype(np.float32),
                                                                z.astype(np.float32))),
            "bf16_values": (hadamard.bf16_values_body, _signature(z.astype(np.uint16), z.astype(np.float32),
                                                                  z.astype(np.float32)))}
    body, sig = sigs[name]
    assemble_without_spills(target.compile_ptx(quantize_cuda(body), sig, "sm_90a"), tmp_path / f"{name}.ptx")
