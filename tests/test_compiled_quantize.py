"""The compiled quantization (mmasim/backends/cuda/quantize.py: target-neutral bodies, their CPU
driver and their CUDA driver; mmasim/quantization/compiled.py: the host side) gives the numpy code's words, scales and refusals for every
built-in scheme and every plain cast; the CUDA drivers under numba-cuda's simulator give the
CPU driver's; the bodies compile to PTX for sm_90a that ptxas assembles without a spill.

Expectations: ``mmasim.quantize`` (the numpy code, the spec: each of its rules is checked
against hand-worked values and its sources in tests/test_quantize_*.py), on the same inputs,
drawn by hypothesis around what a rounding can get wrong: ties between adjacent words,
subnormals, the overflow threshold, infinities, NaN, zero blocks, scales at e8m0's ends.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import cuda_sim
from hypothesis import given, settings
from hypothesis import strategies as st

import mmasim
from mmasim.backends.cuda import missing
from mmasim.quantization import casts
from mmasim.quantization.rounding import RBITS
from mmasim.registry.build import get_registry

numba = pytest.importorskip("numba")

from mmasim.quantization import compiled  # noqa: E402  (needs numba)

CAST_FORMATS = sorted(casts.element_formats())
MX = ["mxfp8_e4m3", "mxfp8_e5m2", "mxfp6_e3m2", "mxfp6_e2m3", "mxfp4"]


def _same(call):
    """``call(mmasim.quantize)`` and ``call(compiled.quantize)``: the same words, scales and
    fields, or the same error and message."""
    try:
        want = call(mmasim.quantize)
    except mmasim.MMAError as e:
        with pytest.raises(type(e)) as got:
            call(compiled.quantize)
        assert str(got.value) == str(e)
        return None
    got = call(compiled.quantize)
    assert got.words.dtype == want.words.dtype and got.words.shape == want.words.shape
    assert got.words.tolist() == want.words.tolist()
    for field in ("format", "container", "scale_format", "block", "axis", "scheme", "scale_use"):
        assert getattr(got, field) == getattr(want, field), field
    for field in ("scales", "tile_scales"):
        w, g = getattr(want, field), getattr(got, field)
        assert (w is None) == (g is None), field
        if w is not None:
            assert g.dtype == w.dtype and g.shape == w.shape and g.view(np.uint8).tolist() == w.view(np.uint8).tolist()
    for field in ("tensor_scale", "amax"):
        w, g = getattr(want, field), getattr(got, field)
        assert (w is None) == (g is None) and (w is None or np.float32(w).tobytes() == np.float32(g).tobytes()), field
    return want


def _edges(key) -> np.ndarray:
    """Values of format ``key`` where a cast can go wrong: its words' values (subnormals, the
    largest, zeros of both signs), the midpoints between neighbours (ties), the overflow
    threshold and past it, a quarter past the smallest subnormal, infinities, NaN (binary32
    values: tf32, xf32, f32 and f64 by their binary32 neighbours of the same points)."""
    fmt = get_registry().formats[key]
    if fmt.container_bits <= 16:
        v = casts.values(fmt, np.arange(1 << fmt.field_bits, dtype=np.uint64) << np.uint64(fmt.field_shift))
    else:
        v = np.array([0.0, 2.0 ** -149, 2.0 ** -126, 1.0, 1.0 + 2.0 ** -10, 1.0 + 2.0 ** -23, 3.0 * 2 ** 127,
                      float(np.finfo(np.float32).max)])
    v = np.unique(np.abs(v[np.isfinite(v)]))
    mids = (v[1:] + v[:-1]) / 2
    m, q = casts.largest(fmt)
    big = float(np.ldexp(float(m), q))
    extra = [big * (1 + 2.0 ** -(fmt.man_bits + 1)), big * 2, v[1] / 4 if len(v) > 1 else 0.0, np.inf, np.nan]
    out = np.concatenate([v, mids, extra])
    out = np.concatenate([out, -out])
    with np.errstate(over="ignore"):
        return out[(out.astype(np.float32) == out) | ~np.isfinite(out)]


def _elements(key):
    return st.one_of(st.sampled_from(_edges(key).tolist()), st.floats(width=32))


@pytest.mark.parametrize("key", CAST_FORMATS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_compiled_cast_gives_the_numpy_casts_words_or_its_refusal(key, data):
    """Ties, subnormals, overflow, infinities, NaN, zeros of both signs: RNE, saturating or not,
    NaN refused or propagated; ``cvt.rs`` with given random bits into its formats."""
    x = np.array(data.draw(st.lists(_elements(key), min_size=1, max_size=24)), np.float32)
    saturate = data.draw(st.sampled_from([None, True, False]))
    nan = data.draw(st.sampled_from(casts.NAN_POLICIES))
    name = get_registry().formats[key].name
    if name in RBITS and data.draw(st.booleans()):
        rbits = np.array(data.draw(st.lists(st.integers(0, (1 << RBITS[name]) - 1), min_size=len(x),
                                            max_size=len(x))), np.int64)
        _same(lambda q: q(x, key, saturate=saturate, nan=nan, rounding="stochastic", rbits=rbits))
    else:
        _same(lambda q: q(x.reshape(-1, 1 if len(x) % 2 else 2), key, saturate=saturate, nan=nan))


def _words(fmt) -> np.ndarray:
    """Words of ``fmt``: every word of a container of up to 16 bits, else those of :func:`_edges`
    (an integer format: its ends, zero and a few between)."""
    if fmt.integer:
        return np.array([0, 1, 0xFFFFFFFF, 0x80000000, 0x7FFFFFFF, 0x00BC614E, 0x01000001], np.uint32)
    if fmt.container_bits <= 16:
        return (np.arange(1 << fmt.field_bits, dtype=np.uint64) << np.uint64(fmt.field_shift)).astype(
            casts.word_dtype(fmt))
    return casts.cast(fmt, _edges(fmt.key), saturate=True, nan="propagate")


@pytest.mark.parametrize("key", CAST_FORMATS + ["s32"])
def test_compiled_values_are_the_words_values_in_binary32_times_alpha(key):
    """What D's words and an output format's words become in :func:`mmasim.torch.matmul.matmul`:
    each word's value (:func:`mmasim.quantization.casts.values`; an integer word's) rounded to
    binary32, then times alpha in binary32; NaN stays NaN."""
    fmt = get_registry().formats[key]
    words = _words(fmt)
    exact = words.view(np.int32).astype(np.float64) if fmt.integer else casts.values(fmt, words)
    for alpha in (np.float32(1), np.float32(0.75), np.float32(3.0e38)):
        with np.errstate(over="ignore", invalid="ignore"):
            want = exact.astype(np.float32) * alpha if alpha != 1 else exact.astype(np.float32)
        got = compiled.values(words.reshape(1, -1), fmt, alpha=alpha)[0]
        nan = np.isnan(want)
        assert (np.isnan(got) == nan).all() and got[~nan].tobytes() == want[~nan].tobytes(), (key, alpha)


@pytest.mark.parametrize("src, dst", [("e2m1", "e2m1x"), ("e2m1x", "e2m1"), ("e2m1x", "e2m1.sm120"),
                                      ("e2m1.sm120", "e2m1"), ("e4m3", "e5m2"), ("e5m2", "f16")])
def test_compiled_recontainer_places_every_word_by_value_or_gives_the_numpy_codes_refusal(src, dst):
    """:func:`mmasim.quantization.casts.recontainer` (e2m1's 4-bit code, byte and RTX Blackwell
    containers; e4m3 words e5m2 does not hold: refused, naming the first)."""
    formats = get_registry().formats
    words = _words(formats[src])
    try:
        want = casts.recontainer(words, formats[src], formats[dst])
    except mmasim.MMAError as e:
        with pytest.raises(type(e)) as got:
            compiled.recontainer(words, formats[src], formats[dst])
        assert str(got.value) == str(e)
        return
    got = compiled.recontainer(words, formats[src], formats[dst])
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


def _blocks(data, rows, cols, *, binary32: bool, specials: bool):
    """A ``(rows, cols)`` matrix of blocks of 16: each of its own magnitude (``2**e``, at e8m0's
    ends for binary64), some all zero, some with an element's edge value; NaN / inf where
    ``specials``."""
    lo, hi = (-150, 127) if binary32 else (-1100, 1000)
    out = np.zeros((rows, cols))
    for r in range(rows):
        for c in range(0, cols, 16):
            kind = data.draw(st.sampled_from(["zero", "values", "values", "edge"]))
            if kind == "zero":
                continue
            e = data.draw(st.integers(lo, hi))
            m = np.array(data.draw(st.lists(st.floats(-2, 2, width=32), min_size=16, max_size=16)))
            out[r, c:c + 16] = np.ldexp(m, e) if binary32 else m * 2.0 ** e
            if kind == "edge":
                out[r, c + data.draw(st.integers(0, 15))] = data.draw(st.sampled_from(
                    [0.0, -0.0, 2.0 ** -149, 448.0, 464.0, 6.0, 5.0, 2.0 ** 127, float(np.finfo(np.float32).max)]
                    + ([np.nan, np.inf, -np.inf] if specials else [])))
    with np.errstate(over="ignore"):        # 2 * 2**127 is inf in binary32: the recipes refuse it
        return out.astype(np.float32) if binary32 else out


@pytest.mark.parametrize("scheme", MX)
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_compiled_mx_gives_the_numpy_words_and_scales(scheme, data):
    """OCP MX (FLOOR: binary64 inputs, scales at 2**-127 and past 2**127, NaN blocks refused or
    given 0xFF) and RCEIL (binary32), to nearest or stochastically, along either axis."""
    scale_rounding = data.draw(st.sampled_from(["floor", "rceil"]))
    x = _blocks(data, data.draw(st.integers(1, 3)), 32 * data.draw(st.integers(1, 2)),
                binary32=scale_rounding == "rceil", specials=data.draw(st.booleans()))
    axis = data.draw(st.sampled_from([-1, 0]))
    x = x if axis == -1 else x.T.copy()
    nan = data.draw(st.sampled_from(casts.NAN_POLICIES))
    opts = dict(scale_rounding=scale_rounding, nan=nan)
    if data.draw(st.booleans()):
        width = RBITS[get_registry().formats[get_registry().schemes[scheme].element].name]
        opts.update(rounding="stochastic", rbits=np.asarray(data.draw(
            st.lists(st.integers(0, (1 << width) - 1), min_size=x.size, max_size=x.size)), np.int64).reshape(x.shape))
    _same(lambda q: q(x, scheme, axis=axis, **opts))


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_compiled_nvfp4_gives_the_numpy_words_and_scales(data):
    """NVFP4: 1 x 16 blocks and 16 x 16 tiles with the tensor scale (an all-zero tensor: S_enc
    1), to nearest or stochastically; NaN / inf refused."""
    x = _blocks(data, 16 * data.draw(st.integers(1, 2)), 16 * data.draw(st.integers(1, 2)), binary32=True,
                specials=data.draw(st.integers(0, 4)) == 0)
    axis = data.draw(st.sampled_from([-1, 0]))
    opts = {"tile": (16, 16)} if data.draw(st.booleans()) else {}
    if data.draw(st.booleans()):
        opts.update(rounding="stochastic", rbits=np.asarray(data.draw(
            st.lists(st.integers(0, 255), min_size=x.size, max_size=x.size)), np.int64).reshape(x.shape))
    _same(lambda q: q(x, "nvfp4", axis=axis, **opts))


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_compiled_deepseek_gives_the_numpy_words_and_tile_scales(data):
    """DeepSeek FP8: tiles of any shape (the amax floor 1e-4 of zero tiles included)."""
    t0, t1 = data.draw(st.sampled_from([1, 2, 16])), data.draw(st.sampled_from([1, 16, 32]))
    x = _blocks(data, t0 * data.draw(st.integers(1, 2)), 32 * data.draw(st.integers(1, 2)), binary32=True,
                specials=data.draw(st.integers(0, 4)) == 0)
    axis = data.draw(st.sampled_from([-1, 0]))
    _same(lambda q: q(x, "deepseek_fp8", axis=axis, tile=(t0, t1)))


def test_compiled_deepseek_default_groups_and_refusals_are_the_numpy_codes():
    x = np.linspace(-3, 3, 2 * 128, dtype=np.float32).reshape(2, 128)
    _same(lambda q: q(x, "deepseek_fp8"))
    _same(lambda q: q(x, "deepseek_fp8", axis=0))                      # 128 x 1 groups: 2 rows do not divide
    _same(lambda q: q(x.astype(np.float64) + 1e-12, "deepseek_fp8"))   # not binary32


def test_what_the_compiled_quantization_leaves_to_numpy_is_named():
    assert compiled.compiled(container="e2m1") == "another container"
    assert compiled.compiled(hadamard=True, seed=1, rounding="stochastic") == ""     # tests/test_compiled_seed_hadamard.py
    assert compiled.compiled(tile=(16, 16), scale_rounding="rceil") == ""


@pytest.mark.parametrize("scheme, opts", [("e4m3", {"saturate": True}), ("bf16", {}), ("mxfp8_e4m3", {}),
                                           ("mxfp8_e5m2", {"scale_rounding": "rceil"}), ("nvfp4", {}),
                                           ("nvfp4", {"tile": (16, 16)}), ("deepseek_fp8", {"tile": (16, 32)})])
@pytest.mark.parametrize("axis", [-1, 0])
def test_compiled_padding_quantizes_the_zero_padded_matrix(scheme, opts, axis):
    """``pad``: the words (and scales) of the matrix padded with zeros, as mmasim.torch pads
    its operands, read from the unpadded one."""
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((20, 40)) * 2.0 ** rng.integers(-8, 8, (20, 40))).astype(np.float32)
    padded = np.zeros((32, 64), np.float32)
    padded[:20, :40] = x
    want = mmasim.quantize(padded, scheme, axis=axis, **opts)
    got = compiled.quantize(x, scheme, axis=axis, pad=(32, 64), **opts)
    assert got.words.tolist() == want.words.tolist()
    if want.scales is not None:
        assert got.scales.tobytes() == want.scales.tobytes() and got.tensor_scale == want.tensor_scale


@pytest.mark.parametrize("key", ["e4m3", "e5m2"])
@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_compiled_per_tensor_scaling_is_current_scale_then_a_saturating_cast(key, data):
    """FP8 per-tensor scaling: the scale of x's amax (current_scale), RN(x * scale) in binary32
    cast saturating, and the decode scale RN(1 / scale); a tensor with NaN or inf refused."""
    from mmasim.quantization.quantize import current_scale

    x = np.array(data.draw(st.lists(_elements(key), min_size=2, max_size=24)), np.float32)
    x = x[: len(x) // 2 * 2].reshape(2, -1)
    amax = np.float32(np.max(np.abs(x)))
    if not np.isfinite(amax):
        with pytest.raises(mmasim.OperandError, match="per-tensor scaling: the tensor holds inf or NaN"):
            compiled.per_tensor(x, key)
        return
    scale = current_scale(amax, key)
    with np.errstate(over="ignore"):
        want = mmasim.quantize((x * scale).astype(np.float32), key, saturate=True).words
    words, decode = compiled.per_tensor(x, key)
    assert words.tolist() == want.tolist() and decode == np.float32(np.float32(1) / scale)


_SIMULATED = textwrap.dedent("""
    import json
    import numpy as np
    from numba import cuda
    import mmasim
    from mmasim.quantization import compiled

    rng = np.random.default_rng(5)
    x = (rng.standard_normal((32, 64)) * 2.0 ** rng.integers(-20, 20, (32, 64))).astype(np.float32)
    x[0, :32] = 0
    x[1, 3] = 2.0 ** -140
    jobs = [("e4m3", {"saturate": True}), ("bf16", {}), ("e5m2", {"nan": "propagate"}),
            ("mxfp8_e4m3", {}), ("mxfp8_e5m2", {"scale_rounding": "rceil"}), ("mxfp4", {}),
            ("nvfp4", {}), ("nvfp4", {"tile": (16, 16)}), ("deepseek_fp8", {"tile": (16, 32)}),
            ("e4m3", {"rounding": "stochastic", "rbits": rng.integers(0, 1 << 16, (32, 64))}),
            ("nvfp4", {"rounding": "stochastic", "rbits": rng.integers(0, 1 << 8, (32, 64))})]
    out = {}
    for scheme, kw in jobs:
        cpu = compiled.quantize(x, scheme, **kw)
        dev_kw = dict(kw, rbits=cuda.to_device(kw["rbits"])) if "rbits" in kw else kw
        dev = compiled.quantize(cuda.to_device(x), scheme, target="cuda", **dev_kw)
        same = [dev.words.copy_to_host().tolist() == cpu.words.tolist()]
        if cpu.scales is not None:
            same.append(dev.scales.copy_to_host().tobytes() == cpu.scales.tobytes())
        same.append(bool(dev.tensor_scale == cpu.tensor_scale))
        out[scheme + json.dumps(sorted(k for k in kw))] = same
    bad = x.copy()
    bad[2, 2] = np.nan
    for f in (lambda: compiled.quantize(cuda.to_device(bad), "mxfp8_e4m3", target="cuda"),
              lambda: mmasim.quantize(bad, "mxfp8_e4m3")):
        try:
            f()
        except mmasim.MMAError as e:
            out.setdefault("refusal", []).append([type(e).__name__, str(e)])
    print(json.dumps(out))
""")


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
def test_cuda_drivers_under_the_simulator_give_the_cpu_drivers_words():
    """numba-cuda's simulator runs the CUDA driver of every body (a thread per element / block /
    tile) on device arrays: the CPU driver's words, scales and tensor scales, and the numpy
    code's refusal of a NaN block."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    r = subprocess.run([sys.executable, "-c", cuda_sim.RECORDER + _SIMULATED], capture_output=True, text=True, env=env,
                       timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    cuda_sim.check_launches(r.stderr)
    result = json.loads(r.stdout.strip().splitlines()[-1])
    refusal = result.pop("refusal")
    assert len(result) == 11 and all(all(v) for v in result.values()), result
    assert len(refusal) == 2 and refusal[0] == refusal[1] and refusal[0][0] == "NonFiniteError", refusal


def _ptxas() -> str | None:
    """A ptxas that knows sm_90a (the CUDA wheels', PATH's)."""
    import pathlib
    import shutil

    cands = [shutil.which("ptxas")] + [str(p) for e in sys.path for p in pathlib.Path(e or ".").glob("nvidia/*/bin/ptxas")]
    for path in filter(None, cands):
        r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
        if "sm_90a" in r.stdout:
            return path
    return None


@pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed")
@pytest.mark.parametrize("name", ["cast", "mx_floor", "mx_rceil", "nvfp4", "deepseek", "amax", "values",
                                  "recontainer"])
def test_quantize_bodies_compile_to_ptx_for_sm90a_without_spills(name, tmp_path):
    """Each body's CUDA driver (float32 input, byte words) compiles to one PTX entry with no
    local memory, and ptxas assembles it with no stack frame, spill or local memory."""
    from mmasim.backends.cuda import target
    from mmasim.backends.cuda.driver import quantize_cuda
    from mmasim.backends.cuda.quantize import BODIES

    body = BODIES[name]
    scales = np.zeros((1, 1), np.float32 if name == "deepseek" else np.float64 if name == "amax" else np.uint8)
    out = np.zeros((1, 1), {"amax": np.float64, "values": np.float32}.get(name, np.uint8))
    words = {"values": np.uint32, "recontainer": np.uint8}
    arrays = (np.int64(1), np.zeros((1, 1), words.get(name, np.float32)), np.zeros((1, 1), np.int64),
              np.zeros((3, 15), np.int64),
              np.zeros(1, np.int64), np.zeros(4), out, scales, np.zeros(1, np.int8))
    assemble_without_spills(target.compile_ptx(quantize_cuda(body), tuple(numba.typeof(a) for a in arrays), "sm_90a"),
                            tmp_path / f"{name}.ptx")


def assemble_without_spills(ptx: str, path):
    """``ptx``: one entry with no local memory, which ptxas (skipped where none knows sm_90a)
    assembles with no stack frame, spill or local memory (written to ``path`` first)."""
    assert ptx.count(".entry") == 1 and ".local" not in ptx
    ptxas = _ptxas()
    if ptxas is None:
        pytest.skip("no ptxas knows sm_90a (pip install nvidia-cuda-nvcc)")
    path.write_text(ptx)
    r = subprocess.run([ptxas, "-v", "-arch=sm_90a", str(path), "-o", str(path) + ".cubin"], capture_output=True,
                       text=True, timeout=300)
    report = r.stdout + r.stderr
    assert r.returncode == 0, report[-2000:]
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, report
    assert "lmem" not in report, report
