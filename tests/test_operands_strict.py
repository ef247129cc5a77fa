"""Operands: words are words, values are values, never mixed silently;
a shape in the instruction string is a promise (section 1); gemm progress (section 4).

Expectations come from the formats' definitions (fraction bits, signedness, container
widths), the user guide's contract, and the instruction strings themselves."""

import io
import sys

import ml_dtypes
import numpy as np
import pytest

import mmasim
from mmasim.execution.model import Model

ONE = 0x3F800000                                     # f32 / tf32 word of 1.0


def tf32():
    return mmasim.MMA("B200", "tcgen05.mma.kind::tf32")


def nvfp4():
    return mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")


# ------------------------------------------------- 1. words or values, never mixed
def test_list_mixing_int_words_and_float_values_is_a_dtype_error():
    # today one 0.0 turned the whole list into values: 0x3F800000 read as 1065353216.0
    with pytest.raises(mmasim.DtypeError, match="mixes"):
        tf32().dot([ONE] + [0.0] * 7, [ONE] * 8, 0)
    with pytest.raises(mmasim.DtypeError, match="mixes"):
        tf32().dot([[ONE] * 8, [1.0] * 8], [ONE] * 8, 0)


def test_a_call_mixing_word_arrays_and_value_arrays_is_a_dtype_error():
    m = tf32()
    words = np.full(8, ONE, dtype=np.uint32)
    values = np.ones(8, dtype=np.float32)
    with pytest.raises(mmasim.DtypeError, match="mix"):
        m.dot(words, values, 0)                      # a words, b values
    with pytest.raises(mmasim.DtypeError, match="mix"):
        m.dot(values, values, 0)                     # c = 0 is a word: values and a word
    with pytest.raises(mmasim.DtypeError, match="mix"):
        m.dot(words, words, np.float32(0.5))         # words with a value C
    fp4 = nvfp4()
    e2m1 = np.full(64, 1.0, dtype=ml_dtypes.float4_e2m1fn)
    with pytest.raises(mmasim.DtypeError, match="mix"):  # values with word scales
        fp4.dot(e2m1, e2m1, np.float32(0), scale_a=[0x38] * 4, scale_b=[0x38] * 4)


def test_c_is_in_its_own_format_but_in_the_same_mode():
    h = mmasim.MMA("B200", "tcgen05.mma.kind::f16.f32.f16.f16")
    a = np.full(16, 1.5, dtype=np.float16)
    # C as float32 (its own format f32) or as float64 values exact in f32: both fine
    assert float(h.dot(a, a, np.float32(0.25))) == 16 * 2.25 + 0.25
    assert float(h.dot(a, a, 0.25)) == 16 * 2.25 + 0.25
    # all words: f16 words for A and B, an f32 word for C
    assert int(h.dot(np.full(16, 0x3E00, np.uint16), np.full(16, 0x3E00, np.uint16), 0x3E800000)) == 0x42110000


@pytest.mark.parametrize("bad", [
    np.zeros(8, dtype=[("x", np.uint32)]),           # structured
    np.zeros(8, dtype="m8[s]"),                      # timedelta
    np.zeros(8, dtype="M8[s]"),                      # datetime
    np.zeros(8, dtype=np.complex64),
    np.zeros(8, dtype=np.complex128),
    np.zeros(8, dtype=bool),
    np.array([ONE] * 8, dtype=object),
    np.array(["1.0"] * 8),
    np.array([b"x"] * 8),
    np.zeros(8, dtype="V4"),                         # raw void
], ids=["structured", "timedelta", "datetime", "complex64", "complex128", "bool", "object", "str", "bytes",
        "void"])
def test_unsupported_dtypes_are_dtype_errors(bad):
    m = tf32()
    with pytest.raises(mmasim.DtypeError):
        m.dot(bad, np.full(8, ONE, np.uint32), 0)
    with pytest.raises(mmasim.DtypeError):
        m.dot(np.full(8, ONE, np.uint32), np.full(8, ONE, np.uint32), bad[:1].reshape(()))


def test_ragged_lists_bools_and_complex_in_lists_are_dtype_errors():
    m = tf32()
    with pytest.raises(mmasim.DtypeError, match="ragged"):
        m.dot([[ONE] * 8, [ONE] * 7], [ONE] * 8, 0)
    with pytest.raises(mmasim.DtypeError, match="bool"):
        m.dot([True] + [0] * 7, [ONE] * 8, 0)        # numpy would make it int64 words silently
    with pytest.raises(mmasim.DtypeError):
        m.dot([1j] + [0.0] * 7, [1.0] * 8, 0.0)
    with pytest.raises(mmasim.DtypeError):
        m.dot([None] * 8, [ONE] * 8, 0)


def test_python_ints_beyond_the_container_are_word_range_errors():
    m = tf32()
    for a in ([2**70] + [0] * 7, [-(2**70)] + [0] * 7, [-1] + [0] * 7, [-1] + [2**63] * 7, [2**64] * 8):
        with pytest.raises(mmasim.WordRangeError):
            m.dot(a, [ONE] * 8, 0)
    with pytest.raises(mmasim.WordRangeError):
        m.dot([ONE] * 8, [ONE] * 8, 2**70)
    with pytest.raises(mmasim.WordRangeError):
        m.dot([ONE] * 8, [ONE] * 8, -1)
    with pytest.raises(mmasim.WordRangeError):   # 2**32 is past f32's 32-bit container
        m.dot([ONE] * 8, [ONE] * 8, 2**32)
    f64 = mmasim.MMA("CDNA2", "f64_16x16x4f64")
    with pytest.raises(mmasim.WordRangeError):   # past every 64-bit container
        f64.dot([2**64] * 4, [0] * 4, 0)
    assert int(f64.dot([0] * 4, [0] * 4, 2**64 - 1)) != 0   # the largest 64-bit word is a word (a NaN)


# -------------------------------------------- 2. values the format cannot hold exactly
# (architecture, instruction, qualifiers, operand dtype, a value the format holds, one it does not):
# the second differs from the first in a fraction bit the format does not have
INEXACT = [
    ("B200", "tcgen05.mma.kind::tf32", {}, np.float32, 1 + 2**-10, 1.0000001),       # tf32: 10 fraction bits
    ("B200", "tcgen05.mma.kind::tf32", {}, np.float64, 1 + 2**-10, 1 + 2**-11),
    ("B200", "tcgen05.mma.kind::f16.f32.f16.f16", {}, np.float32, 1 + 2**-10, 1 + 2**-11),
    ("B200", "tcgen05.mma.kind::f16.f32.bf16.bf16", {}, np.float32, 1 + 2**-7, 1 + 2**-8),
    ("B200", "tcgen05.mma.kind::f8f6f4.f32.e4m3.e4m3", {}, np.float32, 1 + 2**-3, 1 + 2**-4),
    ("B200", "tcgen05.mma.kind::f8f6f4.f32.e5m2.e5m2", {}, np.float32, 1 + 2**-2, 1 + 2**-3),
    ("B200", "tcgen05.mma.kind::f8f6f4.f32.e3m2.e3m2", {}, np.float32, 1 + 2**-2, 1 + 2**-3),
    ("B200", "tcgen05.mma.kind::f8f6f4.f32.e2m3.e2m3", {}, np.float32, 1 + 2**-3, 1 + 2**-4),
    ("B200", "tcgen05.mma.kind::f8f6f4.f32.e2m1.e2m1", {}, np.float32, 1.5, 1.25),
    ("CDNA3", "f32_16x16x8_xf32", {}, np.float32, 1 + 2**-10, 1 + 2**-11),             # AMD xf32
    ("CDNA3", "f32_16x16x32_fp8_fp8", {}, np.float32, 1 + 2**-3, 1 + 2**-4),          # e4m3fnuz
    ("CDNA3", "f32_16x16x32_bf8_bf8", {}, np.float32, 1 + 2**-2, 1 + 2**-3),          # e5m2fnuz
]


@pytest.mark.parametrize("arch,ins,q,dtype,held,not_held", INEXACT,
                         ids=[f"{r[1]}-{np.dtype(r[3]).name}-{r[5]}" for r in INEXACT])
def test_a_value_the_format_cannot_hold_is_an_error_for_every_format(arch, ins, q, dtype, held, not_held):
    m = mmasim.MMA(arch, ins, **q)
    k = m.k
    ones = np.ones(k, dtype=dtype)
    exact = np.full(k, held, dtype=dtype)
    d = m.dot(exact, ones, np.float32(0))           # held exactly: accepted, equals k * held
    assert d.dtype == np.float32 and float(d) == k * held
    bad = ones.copy()
    bad[k // 2] = not_held
    with pytest.raises(mmasim.DtypeError, match="not exactly representable") as e:
        m.dot(bad, ones, np.float32(0))
    assert f"index ({k // 2},)" in str(e.value)


def test_float32_1_0000001_is_not_silently_truncated_to_tf32():
    m = tf32()
    x = np.float32(1.0000001)                        # 0x3F800001: a low bit tf32 does not read
    assert int(np.array(x).view(np.uint32)) == 0x3F800001
    with pytest.raises(mmasim.DtypeError, match="tf32"):
        m.dot(np.full(8, x), np.ones(8, np.float32), np.float32(0))
    # the word form still reads the hardware's way: bits 12:0 ignored
    assert int(m.dot([0x3F800001] * 8, [ONE] * 8, 0)) == 0x41000000


def test_tf32_nan_values_stay_nan_and_a_low_bit_nan_is_refused():
    m = tf32()
    qnan = np.array([0x7FC00001] + [ONE] * 7, dtype=np.uint32).view(np.float32)   # NaN for tf32 too
    assert np.isnan(m.dot(qnan, np.ones(8, np.float32), np.float32(0)))
    low = np.array([0x7F800001] + [ONE] * 7, dtype=np.uint32).view(np.float32)    # tf32 would read inf
    with pytest.raises(mmasim.DtypeError):
        m.dot(low, np.ones(8, np.float32), np.float32(0))


def test_inexact_c_values_are_refused_in_c_format():
    h = mmasim.MMA("B200", "tcgen05.mma.kind::f16.f16.f16.f16")
    a = np.ones(16, np.float16)
    assert float(h.dot(a, a, np.float32(0.5))) == 16.5      # 0.5 is an f16 value
    with pytest.raises(mmasim.DtypeError, match="c"):
        h.dot(a, a, np.float32(1 + 2**-11))                  # not an f16 value


def test_exactness_check_is_vectorized_over_large_arrays():
    # a million float32 values go through the check without a Python loop per element
    import time

    m = tf32()
    a = np.ones((1 << 17, 8), np.float32)
    start = time.perf_counter()
    from mmasim.operands.words import to_words

    words, values = to_words(a, m.a_format, "a")
    took = time.perf_counter() - start
    assert values and words.shape == a.shape and (words == ONE).all()
    assert took < 1.0, took                          # a per-element Python loop takes several seconds
    a[-1, -1] = 1.0000001
    with pytest.raises(mmasim.DtypeError, match=r"index \(131071, 7\)"):
        to_words(a, m.a_format, "a")


# ------------------------------------------------------------------ 3. typed scales
def test_typed_ue4m3_scales_are_non_negative_float8_e4m3fn():
    m = nvfp4()                                       # NVFP4: e2m1 elements, ue4m3 scales, block 16
    a = np.full(64, 2.0, dtype=ml_dtypes.float4_e2m1fn)
    b = np.full(64, 0.5, dtype=ml_dtypes.float4_e2m1fn)
    s = np.array([2.0, 1.0, 1.0, 1.0], dtype=ml_dtypes.float8_e4m3fn)
    one = np.ones(4, dtype=ml_dtypes.float8_e4m3fn)
    d = m.dot(a, b, np.float32(0), scale_a=s, scale_b=one)
    assert d.dtype == np.float32 and float(d) == 16 * 2 + 48      # block 0 scaled by 2
    words = m.dot([0x4] * 64, [0x1] * 64, 0, scale_a=[0x40, 0x38, 0x38, 0x38], scale_b=[0x38] * 4)
    assert int(np.float32(d).view(np.uint32)) == int(words)
    # float64 values exact in ue4m3 are converted too
    assert float(m.dot(a, b, 0.0, scale_a=[2.0, 1.0, 1.0, 1.0], scale_b=[1.0] * 4)) == 80.0
    neg = np.array([-2.0, 1.0, 1.0, 1.0], dtype=ml_dtypes.float8_e4m3fn)
    with pytest.raises(mmasim.DtypeError, match="negative"):
        m.dot(a, b, np.float32(0), scale_a=neg, scale_b=one)
    with pytest.raises(mmasim.DtypeError):           # 1.1 is not an e4m3 value
        m.dot(a, b, 0.0, scale_a=[1.1, 1.0, 1.0, 1.0], scale_b=[1.0] * 4)
    # -0.0 is the value 0, which ue4m3 holds (word 0x00)
    z = np.array([-0.0, 1.0, 1.0, 1.0], dtype=ml_dtypes.float8_e4m3fn)
    assert float(m.dot(a, b, np.float32(0), scale_a=z, scale_b=one)) == 48.0


def test_typed_ue8m0_scales_are_float8_e8m0fnu():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X")   # ue8m0 scales, block 32
    a = np.full(64, 1.0, dtype=ml_dtypes.float4_e2m1fn)
    s = np.array([4.0, 0.5], dtype=ml_dtypes.float8_e8m0fnu)
    one = np.ones(2, dtype=ml_dtypes.float8_e8m0fnu)
    d = m.dot(a, a, np.float32(0), scale_a=s, scale_b=one)
    assert float(d) == 32 * 4 + 32 * 0.5
    assert int(np.float32(d).view(np.uint32)) == int(
        m.dot([0x2] * 64, [0x2] * 64, 0, scale_a=[0x81, 0x7E], scale_b=[0x7F, 0x7F]))
    with pytest.raises(mmasim.DtypeError):           # 3.0 is not a power of two
        m.dot(a, a, 0.0, scale_a=[3.0, 1.0], scale_b=[1.0, 1.0])


# ------------------------------------------------- 4. result dtype from the datapath only
_WORD_DTYPE = {"f32": np.uint32, "s32": np.uint32, "f16": np.uint16, "f64": np.uint64}
_VALUE_DTYPE = {"f32": np.float32, "f16": np.float16, "f64": np.float64}


def _zero_call(model, n_rows=None):
    dp = model.datapath
    kw = {}
    rows = () if n_rows is None else (n_rows,)
    if dp.scale:
        kw = dict(scale_a=np.zeros(rows + (dp.blocks,), np.uint8), scale_b=np.zeros(rows + (dp.blocks,), np.uint8))
    if dp.sparse:
        nib = next(iter(model.sparse_rule.selectors))
        kw["sparse_metadata"] = np.full(rows + (model.sparse_rule.words(dp.k),), nib * 0x11111111, np.uint64)
    return kw


def test_result_dtype_depends_only_on_the_datapath():
    reg = mmasim.get_registry()
    seen = set()
    for arch in mmasim.architectures():
        for dp in mmasim.datapaths(arch):
            if dp.refuse:                            # MMA() refuses it: nothing to return
                continue
            m = Model(dp, reg, backend="numpy")
            want = _WORD_DTYPE[m.d_format.name]
            kw = _zero_call(m)
            for dt in (np.int64, np.uint64, np.uint8, None):
                a = [0] * dp.k if dt is None else np.zeros(dp.k, dt)
                d = m.dot(a, a, 0 if dt is None else np.zeros((), dt), **kw)
                assert d.dtype == want, (arch, m.instruction, dt, d.dtype)
            if m.d_format.integer:
                typed = np.zeros(dp.k, np.int8)
                assert m.dot(typed, typed, np.int32(0), **kw).dtype == np.uint32, m.instruction
            M, N = min(m.legal_m), min(m.legal_n)
            kw = _zero_call(m, M)
            if dp.scale:
                kw["scale_b"] = kw["scale_b"][:1].repeat(N, 0).T.copy()
            D = m(np.zeros((M, dp.k), np.int64), np.zeros((dp.k, N), np.uint16), np.zeros((M, N), np.uint8), **kw)
            assert D.dtype == want and D.shape == (M, N), (arch, m.instruction, D.dtype)
            seen.add((m.d_format.name, dp.rounding))
    assert {"f32", "f16", "f64", "s32"} <= {d for d, _ in seen}
    assert {"s32-wrap", "s32-sat"} <= {r for _, r in seen}


def test_s32_d_is_uint32_words_for_every_input_dtype():
    # today: int32 for int8 input, uint32 for int64 input
    m = mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.s8")
    want = (32 * 9 - 300) % 2**32
    for a, c in ((np.full(32, -3, np.int8), np.int32(-300)),
                 (np.full(32, 0xFD, np.int64), np.int64(2**32 - 300)),
                 ([0xFD] * 32, 2**32 - 300),
                 (np.full(32, 0xFD, np.uint8), np.uint32(2**32 - 300))):
        d = m.dot(a, a, c)
        assert d.dtype == np.uint32 and int(d) == want
    A = np.full((128, 32), -3, np.int8)
    B = np.full((32, 8), -3, np.int8)
    for backend in ("numpy", "numba"):
        D = m(A, B, np.full((128, 8), -300, np.int32), backend=backend)
        assert D.dtype == np.uint32 and (D == want).all(), backend


@pytest.mark.parametrize("arch,ins,want", [("B200", "tcgen05.mma.kind::f16.f16.f16.f16", np.uint16),
                                           ("B200", "tcgen05.mma.kind::tf32", np.uint32),
                                           ("Ampere", "m16n8k16.f32.f16.f16.f32", np.uint32)])
def test_compiled_matrix_form_returns_the_datapaths_word_dtype(arch, ins, want):
    pytest.importorskip("numba")
    m = mmasim.MMA(arch, ins)
    M, N, k = min(m.legal_m), min(m.legal_n), m.k
    rng = np.random.default_rng(11)
    one = 0x3C00 if m.a_format.name == "f16" else ONE
    A = (one + rng.integers(0, 64, (M, k))).astype(np.int64)          # int64 words: the dtype must not leak
    B = (one + rng.integers(0, 64, (k, N))).astype(np.int64)
    C = np.zeros((M, N), np.int64)
    got = m(A, B, C, backend="numba")
    ref = m(A, B, C, backend="numpy")
    assert got.dtype == want and ref.dtype == want and (got == ref).all()


def test_values_in_give_the_d_formats_float_dtype():
    for ins, want in (("tcgen05.mma.kind::f16.f32.f16.f16", np.float32),
                      ("tcgen05.mma.kind::f16.f16.f16.f16", np.float16)):
        m = mmasim.MMA("B200", ins)
        a = np.ones(16, np.float16)
        assert m.dot(a, a, 0.0).dtype == want
        assert m.dot(a.astype(np.float64), a, np.float64(0)).dtype == want   # any float dtype in
    f64 = mmasim.MMA("CDNA2", "f64_16x16x4f64")
    assert f64.dot(np.ones(4), np.ones(4), 0.0).dtype == np.float64


# ------------------------------------------------- 5. matrix-form and gemm argument checks
def test_matrix_form_1d_scale_a_is_a_scale_error_with_the_shapes():
    m = nvfp4()
    A, B, C = np.zeros((128, 64), np.uint8), np.zeros((64, 8), np.uint8), np.zeros((128, 8), np.uint32)
    with pytest.raises(mmasim.ScaleError, match=r"\(128, 4\).*\(4, 8\).*got \(4,\) and \(4, 8\)"):
        m(A, B, C, scale_a=np.full(4, 0x38), scale_b=np.full((4, 8), 0x38))
    with pytest.raises(mmasim.ScaleError, match=r"got \(128, 4\) and \(8, 4\)"):
        m(A, B, C, scale_a=np.full((128, 4), 0x38), scale_b=np.full((8, 4), 0x38))


def test_matrix_form_1d_sparse_metadata_is_a_sparse_metadata_error_with_the_shapes():
    m = mmasim.MMA("B200", "tcgen05.mma.sp.kind::tf32")
    A, B, C = np.zeros((64, 16), np.uint32), np.zeros((16, 8), np.uint32), np.zeros((64, 8), np.uint32)
    with pytest.raises(mmasim.SparseMetadataError, match=r"\(64, 1\).*got \(1,\)"):
        m(A, B, C, sparse_metadata=np.array([0x44444444]))
    assert (m(A, B, C, sparse_metadata=np.full((64, 1), 0x44444444)) == 0).all()


@pytest.mark.parametrize("order", [None, [0.5, 1], [0.0, 1.0], [True, False], 3, object()],
                         ids=["None", "fraction", "float-ints", "bools", "int", "object"])
def test_gemm_k_order_must_be_a_direction_or_a_permutation_of_integers(order):
    A, B, C = np.zeros((16, 32), np.uint16), np.zeros((32, 8), np.uint16), np.zeros((16, 8), np.uint32)
    with pytest.raises(mmasim.OperandError, match="k_order"):
        mmasim.gemm(A, B, C, "Ampere", "m16n8k16.f32.f16.f16.f32", k_order=order)
    assert mmasim.gemm(A, B, C, "Ampere", "m16n8k16.f32.f16.f16.f32", k_order=np.array([1, 0])).shape == (16, 8)


# ------------------------------------------------- 6. a shape in the string is a promise
def test_shape_in_the_string_is_a_promise_for_the_matrix_form():
    m = mmasim.MMA("Blackwell", "m128n8k16.kind::f16.f32.bf16.bf16")
    assert m.shape == (128, 8)
    with pytest.raises(mmasim.ShapeError, match=r"A is \(4, 16\), so M = 4.*M = 128"):
        m(np.zeros((4, 16), np.uint16), np.zeros((16, 8), np.uint16), np.zeros((4, 8), np.uint32))
    # N = 16 is legal for tcgen05, but the string names N = 8
    with pytest.raises(mmasim.ShapeError, match=r"B is \(16, 16\), so N = 16.*N = 8"):
        m(np.zeros((128, 16), np.uint16), np.zeros((16, 16), np.uint16), np.zeros((128, 16), np.uint32))
    assert m(np.zeros((128, 16), np.uint16), np.zeros((16, 8), np.uint16), np.zeros((128, 8), np.uint32)).shape \
        == (128, 8)
    ampere = mmasim.MMA("A100", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    with pytest.raises(mmasim.ShapeError, match=r"M = 32"):
        ampere(np.zeros((32, 16), np.uint16), np.zeros((16, 8), np.uint16), np.zeros((32, 8), np.uint32))


def test_without_a_shape_in_the_string_any_legal_shape():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::f16.f32.f16.f16")     # M 64 or 128, N 8..256 step 8
    assert m.shape is None
    for M, N in ((64, 8), (128, 256), (64, 24)):
        assert m(np.zeros((M, 16), np.uint16), np.zeros((16, N), np.uint16), np.zeros((M, N), np.uint32)).shape \
            == (M, N)
    for M, N in ((32, 8), (64, 12), (4, 8)):
        with pytest.raises(mmasim.ShapeError):
            m(np.zeros((M, 16), np.uint16), np.zeros((16, N), np.uint16), np.zeros((M, N), np.uint32))


def test_gemm_and_matrix_form_share_the_shape_promise():
    # gemm tiles M and N by the string's M and N: M = 64 is legal for tcgen05, not for m128n8k16
    A, B = np.zeros((64, 32), np.uint16), np.zeros((32, 8), np.uint16)
    with pytest.raises(mmasim.ShapeError, match=r"A is \(64, 32\), so M = 64"):
        mmasim.gemm(A, B, np.zeros((64, 8), np.uint32), "B200", "m128n8k16.kind::f16.f32.bf16.bf16")
    assert mmasim.gemm(A, B, np.zeros((64, 8), np.uint32), "B200", "tcgen05.mma.kind::f16.f32.bf16.bf16").shape \
        == (64, 8)
    D = mmasim.gemm(np.zeros((256, 32), np.uint16), np.zeros((32, 16), np.uint16), np.zeros((256, 16), np.uint32),
                    "B200", "m128n8k16.kind::f16.f32.bf16.bf16")
    assert D.shape == (256, 16)


def test_shape_errors_report_the_shapes_the_user_passed():
    # today: "got (64, 1, 128)" for a (64, 128) A (the matrix form broadcast before checking)
    m = tf32()
    with pytest.raises(mmasim.ShapeError) as e:
        m(np.zeros((64, 128), np.uint32), np.zeros((128, 8), np.uint32), np.zeros((64, 8), np.uint32))
    text = str(e.value)
    assert "(64, 128)" in text and "(128, 8)" in text and "(64, 1, 128)" not in text


# ------------------------------------------------------------------ 7. gemm progress
def _small_gemm(**kw):
    A, B, C = np.zeros((16, 32), np.uint16), np.zeros((32, 8), np.uint16), np.zeros((16, 8), np.uint32)
    return mmasim.gemm(A, B, C, "Ampere", "m16n8k16.f32.f16.f16.f32", **kw)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_progress_false_prints_nothing(monkeypatch):
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    monkeypatch.setattr(sys.modules["mmasim.composition.gemm"], "PROGRESS_DELAY", 0)
    _small_gemm(progress=False)
    assert term.getvalue() == ""


def test_progress_auto_on_a_non_terminal_prints_nothing(capsys, monkeypatch):
    monkeypatch.setattr(sys.modules["mmasim.composition.gemm"], "PROGRESS_DELAY", 0)   # even for long work
    _small_gemm()
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == ""


def test_progress_auto_on_a_terminal_only_when_the_work_is_long(monkeypatch):
    term = _Terminal()
    monkeypatch.setattr(sys, "stderr", term)
    _small_gemm()                                    # milliseconds: under the 2 s delay, no bar
    assert term.getvalue() == ""
    monkeypatch.setattr(sys.modules["mmasim.composition.gemm"], "PROGRESS_DELAY", 0)   # every run counts as "long"
    _small_gemm()
    out = term.getvalue()
    assert "2/2" in out and out.count("\n") <= 1     # one bar updated in place


def test_progress_true_writes_one_tqdm_bar(capsys):
    _small_gemm(progress=True)
    err = capsys.readouterr().err
    assert "mmasim.gemm 16x8x32" in err and "2/2" in err and err.count("\n") == 1


def test_progress_must_be_none_true_or_false():
    with pytest.raises(mmasim.OperandError, match="progress"):
        _small_gemm(progress="yes")
