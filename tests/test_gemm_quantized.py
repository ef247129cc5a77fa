"""gemm on mmasim.quantize results: the words are read in the container the quantized tensor
says they are in and placed, by value, in the container the instruction reads (every fp4 /
fp6 container x every datapath container), and D comes back as values (words on request).

Expectations: the exact product of the quantized tensors' own element values and scales
(Quantized.element_values, the scale format's decode), computed in binary64 on values chosen so
that every sum is exact in binary32; the tensor scales by one binary32 FMUL each, as the
epilogue's alpha (docs/user-guide.md, "Whole GEMMs")."""

import itertools
import zlib

import numpy as np
import pytest

import mmasim
from mmasim.quantization import casts
from mmasim.registry.build import get_registry

#: e2m1's values: held by e2m1, e2m3 and e3m2 alike
GRID = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])
#: the magnitude of the first element of every block: OCP MX's scale is then 2^0 (docs/quantize.md,
#: shared_exp = floor(log2(amax)) - emax_elem, emax_elem 2 for e2m1 / e2m3, 4 for e3m2, 8 for e4m3)
TOP = {"e2m1": 6.0, "e2m3": 6.0, "e3m2": 16.0, "e4m3": 256.0, "e5m2": 32768.0}
MX = {"e2m1": "mxfp4", "e2m3": "mxfp6_e2m3", "e3m2": "mxfp6_e3m2", "e4m3": "mxfp8_e4m3", "e5m2": "mxfp8_e5m2"}
FP4_FP6 = ("e2m1", "e2m3", "e3m2")


def _containers(name):
    return sorted(k for k, f in get_registry().formats.items() if f.name == name and k in casts.element_formats())


def _models():
    """Every dense, f32-D datapath of the B200 and RTX Blackwell that reads an fp4 or fp6 operand."""
    out = []
    for arch in ("B200", "RTX 5090"):
        for ins in mmasim.instructions(arch):
            s = str(ins)
            if ".sp" in s or ".ws" in s or "cta_group::2" in s or ".f32." not in s:
                continue
            m = mmasim.MMA(arch, s)
            if {m.a_format.name, m.b_format.name} & set(FP4_FP6):
                out.append((arch, s))
    return out


MODELS = _models()


def _values(rng, shape, axis, name, block):
    """Values on e2m1's grid, random signs; the first element of each block along ``axis`` is TOP."""
    v = rng.choice(GRID, size=shape) * rng.choice([-1.0, 1.0], size=shape)
    v = np.moveaxis(v, axis, -1)
    v[..., ::block] = TOP[name]
    return np.moveaxis(v, -1, axis).astype(np.float32)


def _sources(model, x, fmt, axis):
    """The quantized tensors of ``x`` that ``model`` takes for an operand of format ``fmt``: one per
    container of ``fmt``'s element format (plain casts, OCP MX or NVFP4, as the instruction scales)."""
    name = fmt.name
    sf = model.scale_format
    if sf is None:
        return [mmasim.quantize(x, key) for key in _containers(name)]
    if sf.key == "ue8m0" and model.datapath.block == 32:
        return [mmasim.quantize(x, MX[name], axis=axis, container=key) for key in _containers(name)]
    if sf.key == "ue4m3":
        return [mmasim.quantize(x, "nvfp4", axis=axis, container=key) for key in _containers(name)]
    return []          # ue8m0 in blocks of 16: no scheme of mmasim.quantize makes those scales


def _scaled(q, axis):
    """binary64 values of q's elements times their instruction scales (exact)."""
    v = q.element_values()
    if q.scale_use == "instruction":
        s = casts.values(get_registry().formats[q.scale_format], q.scales)
        v = v * np.repeat(s, q.block, axis=axis)
    return v


def _expected(qa, qb):
    acc = _scaled(qa, 1) @ _scaled(qb, 0)
    assert (acc.astype(np.float32) == acc).all()        # exact in binary32: no rounding to model
    ts = [np.float32(q.tensor_scale) for q in (qa, qb) if q.tensor_scale is not None]
    if not ts:
        return acc.astype(np.float32)
    alpha = np.float32(ts[0] * ts[1])                   # binary32 FMUL (1.0 * alpha is exact)
    return np.float32(alpha) * acc.astype(np.float32)


@pytest.mark.parametrize("arch, instruction", MODELS)
def test_every_container_of_a_quantized_fp4_fp6_operand_gives_the_exact_product(arch, instruction):
    m = mmasim.MMA(arch, instruction)
    rng = np.random.default_rng(zlib.crc32(instruction.encode()))
    M, N, K = min(m.legal_m), min(m.legal_n), 2 * m.k
    block = m.datapath.block or 32
    a = _values(rng, (M, K), 1, m.a_format.name, block)
    b = _values(rng, (K, N), 0, m.b_format.name, block)
    pairs = list(itertools.product(_sources(m, a, m.a_format, -1), _sources(m, b, m.b_format, 0)))
    if not pairs:
        pytest.skip(f"{instruction}: no quantization scheme makes its scales")
    for qa, qb in pairs:
        got = mmasim.gemm(qa, qb, None, model=m, backend="numpy")
        assert got.dtype == np.float32, (qa.container, qb.container)
        assert np.array_equal(got, _expected(qa, qb)), (qa.scheme, qa.container, qb.scheme, qb.container)


def test_the_b200_reads_quantized_e2m1_bytes_as_their_values():
    # the campaign's case: 32 products 1 x 0.5 = 16, from quantize(x, "e2m1") (bits 5:2 of a byte)
    qa = mmasim.quantize(np.ones((128, 32)), "e2m1")
    qb = mmasim.quantize(np.full((32, 8), 0.5), "e2m1")
    assert qa.container == "e2m1" and int(qa.words[0, 0]) == 0x08           # 1.0 = 0b0010 in bits 5:2
    got = mmasim.gemm(qa, qb, None, arch="B200", instruction="tcgen05.mma.kind::f8f6f4", a_type="e2m1",
                      b_type="e2m1", d_type="f32", backend="numpy")
    assert (got == 16.0).all()
    # mixed: e4m3 A (2.0) by e2m1 B (1.0): 32 products of 2 = 64
    qa8 = mmasim.quantize(np.full((128, 32), 2.0), "e4m3")
    qb4 = mmasim.quantize(np.ones((32, 8)), "e2m1")
    got = mmasim.gemm(qa8, qb4, None, arch="B200", instruction="tcgen05.mma.kind::f8f6f4", a_type="e4m3",
                      b_type="e2m1", d_type="f32", backend="numpy")
    assert (got == 64.0).all()


def test_a_word_the_instructions_container_cannot_hold_is_refused():
    # RTX Blackwell's e2m1 byte is read as e2m3 from bits 5:0: 0x15 holds 3.25, no e2m1 value
    m = mmasim.MMA("B200", "tcgen05.mma.kind::f8f6f4.f32.e2m1.e2m1")
    q = mmasim.quantize(np.ones((128, 32)), "e2m1.sm120")
    bad = mmasim.Quantized(np.where(np.arange(32) == 5, 0x15, q.words).astype(np.uint8), None, "e2m1",
                           "e2m1.sm120", None, None, None, None, "e2m1.sm120", None)
    with pytest.raises(mmasim.DtypeError, match=r"e2m1.sm120 word 0x15 at index \(0, 5\) holds 3.25"):
        mmasim.gemm(bad, mmasim.quantize(np.ones((32, 8)), "e2m1"), None, model=m, backend="numpy")


def test_a_quantized_operand_of_another_format_is_refused():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::f8f6f4.f32.e2m1.e2m1")
    with pytest.raises(mmasim.DtypeError, match="quantized to e2m3 .* reads its elements as e2m1"):
        mmasim.gemm(mmasim.quantize(np.ones((128, 32)), "e2m3"), mmasim.quantize(np.ones((32, 8)), "e2m1"),
                    None, model=m)


# ---------------------------------------------------------------- values out, words on request
@pytest.fixture(scope="module")
def hopper():
    return mmasim.MMA("H100", "wgmma.mma_async.k32.f32.e4m3.e4m3")


def _ones(hopper):
    return mmasim.quantize(np.ones((64, 64)), "e4m3"), mmasim.quantize(np.full((64, 8), 0.5), "e4m3")


def test_quantized_operands_give_float32_values_and_words_on_request(hopper):
    qa, qb = _ones(hopper)                                     # 64 products of 0.5: 32
    values = mmasim.gemm(qa, qb, None, model=hopper, backend="numpy")
    assert values.dtype == np.float32 and (values == 32.0).all()
    words = mmasim.gemm(qa, qb, None, model=hopper, backend="numpy", words=True)
    assert words.dtype == np.uint32 and (words == 0x42000000).all()


def test_quantized_operands_under_an_epilogue_give_values_of_the_output_format(hopper):
    qa, qb = _ones(hopper)
    d = mmasim.gemm(qa, qb, None, model=hopper, alpha=0.5, out_format="f16", backend="numpy")
    assert d.dtype == np.float16 and (d == 16.0).all()
    w = mmasim.gemm(qa, qb, None, model=hopper, alpha=0.5, out_format="f16", backend="numpy", words=True)
    assert w.dtype == np.uint16 and (w == 0x4C00).all()       # f16 16.0


def test_nvfp4_values_are_d_times_the_tensor_scales():
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    rng = np.random.default_rng(3)
    a, b = _values(rng, (128, 64), 1, "e2m1", 16), _values(rng, (64, 8), 0, "e2m1", 16)
    qa, qb = mmasim.quantize(a, "nvfp4"), mmasim.quantize(b, "nvfp4", axis=0)
    got = mmasim.gemm(qa, qb, None, model=m, backend="numpy")
    assert got.dtype == np.float32 and np.array_equal(got, _expected(qa, qb))


def test_word_operands_still_give_words_and_values_on_request(hopper):
    A, B = np.full((64, 64), 0x38, np.uint8), np.full((64, 8), 0x30, np.uint8)     # e4m3 1.0 and 0.5
    for options in ({}, {"promote_every": 32}, {"split_k": 2}, {"alpha": 1.0}):
        d = mmasim.gemm(A, B, None, model=hopper, backend="numpy", **options)
        assert d.dtype == np.uint32 and (d == 0x42000000).all(), options
        v = mmasim.gemm(A, B, None, model=hopper, backend="numpy", words=False, **options)
        assert v.dtype == np.float32 and (v == 32.0).all(), options


def test_value_operands_give_words_on_request(hopper):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    A = np.ones((64, 64), ml_dtypes.float8_e4m3fn)
    B = np.full((64, 8), 0.5, ml_dtypes.float8_e4m3fn)
    assert (mmasim.gemm(A, B, None, model=hopper, backend="numpy") == 32.0).all()
    for options in ({}, {"promote_every": 32}):
        w = mmasim.gemm(A, B, None, model=hopper, backend="numpy", words=True, **options)
        assert w.dtype == np.uint32 and (w == 0x42000000).all(), options


def test_words_must_be_a_bool_or_none(hopper):
    qa, qb = _ones(hopper)
    with pytest.raises(mmasim.GemmOptionError, match="words must be None"):
        mmasim.gemm(qa, qb, None, model=hopper, words="yes")
