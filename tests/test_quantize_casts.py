"""Plain casts (``mmasim.quantize(x, FORMAT)``): round to nearest even into every element
format, saturation, the NaN policy, and the errors.

Every expected word is worked out by hand from the format's definition (docs/datapaths.md
section 1: bias, fraction bits, what the top codes mean) and IEEE 754's roundTiesToEven; the
comment next to each says how.  The round trip checks every finite word of each format against
its value as ``ml_dtypes`` (or ``struct``) reads it, never against mmasim's own decoder.
"""

import struct

import ml_dtypes
import numpy as np
import pytest

import mmasim
from helpers import bf16, f16, f32


def words(x, scheme, **kw):
    return [int(w) for w in np.ravel(mmasim.quantize(np.asarray(x, dtype=np.float64), scheme, **kw).words)]


# --------------------------------------------------------------- hand-worked roundings
def test_bf16_rounds_ties_to_even_and_rounds_once_from_binary64():
    # bf16 keeps 7 fraction bits: 1 + 2^-8 is the midpoint of 1.0 (0x3F80) and 1 + 2^-7 (0x3F81): even
    # is 0x3F80; 1 + 3*2^-8 is the midpoint of 0x3F81 and 0x3F82: even is 0x3F82.  1 + 2^-8 + 2^-30 is
    # above the midpoint, so 0x3F81 -- a cast through binary32 would first lose 2^-30 and give 0x3F80.
    assert words([1 + 2**-8, 1 + 3 * 2**-8, 1 + 2**-8 + 2**-30], "bf16") == [0x3F80, 0x3F82, 0x3F81]
    assert words([-2.5, 0.0, -0.0], "bf16") == [bf16(-2.5), 0x0000, 0x8000]


def test_f16_ties_overflow_and_subnormals():
    # f16 keeps 10 fraction bits: 1 + 2^-11 is a tie -> 0x3C00 (even); 2^-40 more -> 0x3C01.
    # 65520 is the midpoint of the largest 65504 (0x7BFF, odd significand) and 65536: even is
    # 65536, past the range: inf 0x7C00.  2^-25 is half the smallest subnormal 2^-24: a tie with
    # 0, which is even -> +0; 3 * 2^-26 = 0.75 * 2^-24 rounds up to 0x0001.
    assert words([1 + 2**-11, 1 + 2**-11 + 2**-40, 65520.0, 2**-25, 3 * 2**-26], "f16") == \
        [0x3C00, 0x3C01, 0x7C00, 0x0000, 0x0001]
    assert words([65520.0, -np.inf], "f16", saturate=True) == [0x7BFF, 0xFBFF]
    assert words([np.inf, -np.inf], "f16") == [0x7C00, 0xFC00]


def test_f32_and_f64():
    # f32: 1 + 2^-24 is a tie -> 1.0; 2^-50 above it -> 1 + 2^-23 (0x3F800001)
    assert words([1 + 2**-24, 1 + 2**-24 + 2**-50, 0.1], "f32") == [0x3F800000, 0x3F800001, f32(np.float32(0.1))]
    one_third = struct.unpack("<Q", struct.pack("<d", 1 / 3))[0]
    assert words([1 / 3], "f64") == [one_third]


def test_tf32_rounds_to_ten_fraction_bits_in_an_f32_word():
    # tf32: 10 fraction bits at bit 13 of an f32 word, the low 13 bits zero.  1 + 2^-11 is a tie
    # -> 1.0; 2^-30 more -> 1 + 2^-10 (0x3F802000); 1 + 3 * 2^-11 is a tie between 1 + 2^-10 and
    # 1 + 2^-9 -> the even one, 1 + 2^-9 (0x3F804000).  The largest tf32 is (2 - 2^-10) * 2^127
    # (0x7F7FE000); (2 - 2^-11) * 2^127 is the midpoint above it, its significand odd: inf.
    big = (2 - 2**-11) * 2.0**127
    assert words([1 + 2**-11, 1 + 2**-11 + 2**-30, 1 + 3 * 2**-11, big], "tf32") == \
        [0x3F800000, 0x3F802000, 0x3F804000, 0x7F800000]
    assert words([big, -big], "tf32", saturate=True) == [0x7F7FE000, 0xFF7FE000]
    assert words([1 + 2**-11 + 2**-30], "xf32") == [0x3F802000]


def test_e4m3_has_no_infinity_so_overflow_needs_saturate_or_nan():
    # e4m3 (bias 7, 3 fraction bits): the largest is 448 = 1.75 * 2^8 (0x7E; 0x7F is NaN).  464 is
    # the midpoint of 448 (significand 14, even) and 480: even is 448.  465 is past it: e4m3 has no
    # infinity, so it is refused unless saturated (0x7E) or, under nan='propagate', NaN (0x7F: the
    # OCP 8-bit conversion without saturation).  2^-10 is half the smallest subnormal 2^-9: tie
    # with 0 -> +0; 3 * 2^-11 = 0.75 * 2^-9 -> 0x01.  -0.0 keeps its sign (0x80).
    assert words([464.0, 2**-10, 3 * 2**-11, -0.0, 3.0], "e4m3") == [0x7E, 0x00, 0x01, 0x80, 0x44]
    with pytest.raises(mmasim.FormatRangeError, match="saturate=True"):
        mmasim.quantize([465.0], "e4m3")
    with pytest.raises(mmasim.FormatRangeError, match="infinity"):
        mmasim.quantize([np.inf], "e4m3")
    assert words([465.0, -1e9, -np.inf], "e4m3", saturate=True) == [0x7E, 0xFE, 0xFE]
    assert words([465.0, np.inf], "e4m3", nan="propagate") == [0x7F, 0x7F]


def test_e5m2_overflows_to_infinity():
    # e5m2 (bias 15, 2 fraction bits): the largest is 57344 = 1.75 * 2^15 (0x7B, odd significand 7);
    # 61440 is the midpoint with 65536: even is 65536, past the range: inf 0x7C.  3.0 = 1.5 * 2 = 0x42.
    assert words([61440.0, 3.0, -3.0], "e5m2") == [0x7C, 0x42, 0xC2]
    assert words([61440.0], "e5m2", saturate=True) == [0x7B]


def test_fp6_and_fp4_have_neither_infinity_nor_nan():
    # e3m2 (bias 3): largest 28 = 1.75 * 2^4 (0x1F); 30 is the midpoint above (odd significand): past
    # the range.  e2m3 (bias 1): largest 7.5 = 1.875 * 2^2 (0x1F); 7.7 rounds to it, 7.75 is the
    # midpoint above: past the range.  e2m1 (bias 1): 0, 0.5, 1, 1.5, 2, 3, 4, 6 are codes 0..7;
    # 5 is a tie of 4 (code 6, even) and 6 (code 7) -> 4; 0.25 a tie of 0 and 0.5 -> 0; 0.75 a tie of
    # 0.5 (code 1) and 1 (code 2) -> 1; -0.25 -> -0 (code 8); 7 is the midpoint past 6: refused.
    assert words([28.0, 24.0, 0.25], "e3m2") == [0x1F, 0x1E, 0x04]
    assert words([7.7, 6.0], "e2m3") == [0x1F, 0x1C]
    assert words([5.0, 0.25, 0.75, -0.25, 3.0, -6.0], "e2m1x") == [0x6, 0x0, 0x2, 0x8, 0x5, 0xF]
    for scheme, past in (("e3m2", 30.0), ("e2m3", 7.75), ("e2m1x", 7.0)):
        with pytest.raises(mmasim.FormatRangeError, match="saturate=True"):
            mmasim.quantize([past], scheme)
        with pytest.raises(mmasim.FormatRangeError):
            mmasim.quantize([past], scheme, nan="propagate")
        with pytest.raises(mmasim.NonFiniteError, match="no NaN"):
            mmasim.quantize([np.nan], scheme, nan="propagate")
    assert words([7.0, -np.inf], "e2m1x", saturate=True) == [0x7, 0xF]
    assert words([30.0], "e3m2", saturate=True) == [0x1F]


def test_e2m1_containers():
    # kind::f8f6f4 holds e2m1 in bits 5:2 of a byte ("e2m1"), the packed kinds a 4-bit code
    # ("e2m1x"); RTX Blackwell's container ("e2m1.sm120") is the same byte
    x = [3.0, -0.5, 6.0]                      # codes 0x5, 0x9, 0x7
    assert words(x, "e2m1x") == [0x5, 0x9, 0x7]
    assert words(x, "e2m1") == [0x14, 0x24, 0x1C]
    assert words(x, "e2m1.sm120") == [0x14, 0x24, 0x1C]
    q = mmasim.quantize(x, "e2m1x")
    assert q.format == "e2m1" and q.container == "e2m1x"
    assert [int(w) for w in q.words_for("e2m1")] == [0x14, 0x24, 0x1C]
    assert [int(w) for w in mmasim.quantize(x, "e2m1x", container="e2m1").words] == [0x14, 0x24, 0x1C]
    with pytest.raises(mmasim.UnknownScheme, match="containers of e2m1"):
        q.words_for("e4m3")


def test_amd_fnuz_formats():
    # e4m3fnuz (bias 8): largest 240 = 1.875 * 2^7 (0x7F); 248 is the midpoint above (odd
    # significand): past the range; its only NaN is 0x80, which is also why -0.0 becomes +0.
    assert words([240.0, -0.0, 1.0], "e4m3fnuz") == [0x7F, 0x00, 0x40]
    assert words([248.0], "e4m3fnuz", nan="propagate") == [0x80]
    assert words([248.0], "e4m3fnuz", saturate=True) == [0x7F]
    with pytest.raises(mmasim.FormatRangeError):
        mmasim.quantize([248.0], "e4m3fnuz")
    assert words([1.0], "e5m2fnuz") == [0x40]          # bias 16: 2^0 is exponent field 16


def test_nan_policy():
    with pytest.raises(mmasim.NonFiniteError, match="nan='propagate'"):
        mmasim.quantize([1.0, np.nan], "bf16")
    assert words([np.nan], "bf16", nan="propagate") == [0x7FC0]
    assert words([np.nan], "e4m3", nan="propagate") == [0x7F]
    assert words([np.nan], "tf32", nan="propagate") == [0x7FFFE000]
    q = mmasim.quantize([np.nan, 1.0], "f32", nan="propagate")
    assert np.isnan(q.dequantize()[0]) and q.dequantize()[1] == 1.0
    with pytest.raises(mmasim.QuantizeError, match="'raise', 'propagate'"):
        mmasim.quantize([1.0], "bf16", nan="ignore")


# --------------------------------------------------------------- round trips
_TYPED = {"bf16": ml_dtypes.bfloat16, "f16": np.float16, "e4m3": ml_dtypes.float8_e4m3fn,
          "e5m2": ml_dtypes.float8_e5m2, "e3m2": ml_dtypes.float6_e3m2fn, "e2m3": ml_dtypes.float6_e2m3fn,
          "e2m1x": ml_dtypes.float4_e2m1fn, "e4m3fnuz": ml_dtypes.float8_e4m3fnuz,
          "e5m2fnuz": ml_dtypes.float8_e5m2fnuz}


@pytest.mark.parametrize("scheme", sorted(_TYPED))
def test_every_finite_word_round_trips(scheme):
    """Each finite word's value (as ml_dtypes reads the word) quantizes back to that word."""
    dt = np.dtype(_TYPED[scheme])
    bits = {1: np.uint8, 2: np.uint16}[dt.itemsize]
    n = 16 if scheme == "e2m1x" else 64 if scheme in ("e3m2", "e2m3") else 1 << (8 * dt.itemsize)
    all_words = np.arange(n, dtype=bits)
    with np.errstate(invalid="ignore"):
        vals = all_words.view(dt).astype(np.float64)
    keep = np.isfinite(vals)
    q = mmasim.quantize(vals[keep], scheme)
    assert np.array_equal(q.words.astype(np.uint64), all_words[keep].astype(np.uint64))
    assert np.array_equal(q.dequantize(), vals[keep]) and np.array_equal(np.signbit(q.dequantize()),
                                                                          np.signbit(vals[keep]))


def test_f32_and_tf32_round_trip_on_random_words():
    rng = np.random.default_rng(7)
    w = rng.integers(0, 1 << 32, size=4000, dtype=np.uint64).astype(np.uint32)
    with np.errstate(invalid="ignore"):
        v = w.view(np.float32).astype(np.float64)
    keep = np.isfinite(v)
    assert np.array_equal(mmasim.quantize(v[keep], "f32").words, w[keep])
    t = w[keep] & np.uint32(0xFFFFE000)
    assert np.array_equal(mmasim.quantize(t.view(np.float32), "tf32").words, t)


def test_typed_inputs_are_read_exactly():
    x = np.array([1.5, -0.25], dtype=ml_dtypes.bfloat16)
    assert words(x.astype(np.float64), "e4m3") == [int(w) for w in mmasim.quantize(x, "e4m3").words] == [0x3C, 0xA8]


# --------------------------------------------------------------- errors
def test_unknown_scheme_lists_the_accepted_names():
    with pytest.raises(mmasim.UnknownScheme) as exc:
        mmasim.quantize([1.0], "mxfp5")
    text = str(exc.value)
    for name in ("mxfp4", "mxfp8_e4m3", "nvfp4", "deepseek_fp8", "bf16", "e2m1x", "tf32"):
        assert name in text
    assert "did you mean" in text
    with pytest.raises(mmasim.UnknownScheme):
        mmasim.quantize([1.0], "s8")               # an integer format is not a cast target
    assert set(mmasim.quantize_schemes()) >= {"mxfp4", "nvfp4", "deepseek_fp8", "e4m3", "f16"}


@pytest.mark.parametrize("bad", [np.array([1, 2], dtype=np.int32), [1, 2], np.array([True]),
                                 np.array([1 + 2j]), ["1.0"]])
def test_non_float_input_is_a_dtype_error(bad):
    with pytest.raises(mmasim.DtypeError):
        mmasim.quantize(bad, "bf16")


def test_option_values_are_checked():
    with pytest.raises(mmasim.QuantizeError, match="saturate"):
        mmasim.quantize([1.0], "bf16", saturate="yes")
    with pytest.raises(mmasim.QuantizeError, match="tile"):
        mmasim.quantize([1.0], "bf16", tile=(1, 128))
    with pytest.raises(mmasim.UnknownScheme, match="container"):
        mmasim.quantize([1.0], "e4m3", container="e5m2")
    with pytest.raises(mmasim.UnknownScheme, match="container"):
        mmasim.quantize([1.0], "e4m3", container="nope")


def test_torch_tensors_are_read_as_values():
    torch = pytest.importorskip("torch")
    t = torch.tensor([1.5, -0.25, 3.0], dtype=torch.bfloat16)
    assert words(np.array([1.5, -0.25, 3.0]), "e4m3") == [int(w) for w in mmasim.quantize(t, "e4m3").words]
    q = mmasim.quantize(torch.ones(32), "mxfp8_e4m3")
    assert isinstance(q.words, np.ndarray) and q.scales.tolist() == [0x77]     # amax 1: 2^(0 - 8)
    with pytest.raises(mmasim.DtypeError, match="integers"):
        mmasim.quantize(torch.ones(4, dtype=torch.int32), "bf16")


def test_empty_inputs():
    assert mmasim.quantize(np.zeros(0), "bf16").words.shape == (0,)
    q = mmasim.quantize(np.zeros((0, 32), dtype=np.float32), "nvfp4")
    assert q.words.shape == (0, 32) and q.scales.shape == (0, 2)



def test_element_formats_are_a_fresh_dict_read_again_from_a_new_registry():
    from mmasim.quantization import casts
    from test_plugins import make_plugin      # a toy architecture whose A and B are a new format
    first = casts.element_formats()
    assert "e4m3" in first and "neg8" not in first
    first.pop("e4m3")
    assert "e4m3" in casts.element_formats()         # a fresh dict each call
    mmasim.register(make_plugin(), name="toy-elements")
    try:
        assert "neg8" in casts.element_formats()     # read again from the new registry
    finally:
        mmasim.unregister(name="toy-elements")
    assert "neg8" not in casts.element_formats()
