"""mmasim's own encoder (``mmasim.arith.encode``, through ``casts.cast``) against ``ml_dtypes``'
and numpy's casts from binary64, on every input that decides a rounding: each representable
value, each midpoint between neighbours and the binary64 numbers on either side of it, the
half-way points below the smallest subnormal and above the largest finite value, binary64's
extremes, ±0, ±inf and ±NaN; both signs; saturating and not.

The expected words are the reference libraries' alone: ``ml_dtypes.astype`` (numpy's
``astype`` for f16, f32 and f64), and for a saturating cast the same of the value first clamped
to the format's largest finite value.  Where mmasim deliberately differs (e2m1 / e2m3 / e3m2
overflow and NaN, ue8m0's 0, negative inputs of unsigned formats) the cast must refuse.
"""

import ml_dtypes
from hypothesis import given, settings
from hypothesis import strategies as st
import numpy as np
import pytest

import mmasim
from mmasim.quantization import casts
from mmasim.registry.build import get_registry

#: format key -> (reference dtype, reference word -> mmasim word (container placement), codes)
REFS = {
    "bf16": (ml_dtypes.bfloat16, 0, 1 << 16),
    "f16": (np.float16, 0, 1 << 16),
    "e4m3": (ml_dtypes.float8_e4m3fn, 0, 256),
    "e5m2": (ml_dtypes.float8_e5m2, 0, 256),
    "e3m2": (ml_dtypes.float6_e3m2fn, 0, 64),
    "e2m3": (ml_dtypes.float6_e2m3fn, 0, 64),
    "e2m1": (ml_dtypes.float4_e2m1fn, 2, 16),          # bits 5:2 of a byte
    "e2m1x": (ml_dtypes.float4_e2m1fn, 0, 16),
    "e2m1.sm120": (ml_dtypes.float6_e2m3fn, 0, 64),    # RTX Blackwell's byte: e2m3 in bits 5:0
    "e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, 0, 256),
    "e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, 0, 256),
    "ue8m0": (ml_dtypes.float8_e8m0fnu, 0, 255),       # 0xFF is NaN
    "ue4m3": (ml_dtypes.float8_e4m3fn, 0, 128),        # the non-negative e4m3 codes
}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def ref_values(dtype, codes):
    """The binary64 values of reference words (ml_dtypes reads them, not mmasim)."""
    dt = np.dtype(dtype)
    with np.errstate(invalid="ignore"):
        return np.asarray(codes).astype(_UINT[dt.itemsize]).view(dt).astype(np.float64)


def ref_words(dtype, x):
    dt = np.dtype(dtype)
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, dtype=np.float64).astype(dt).view(_UINT[dt.itemsize]).astype(np.uint64)


def deciding_inputs(grid: np.ndarray, signed: bool) -> np.ndarray:
    """Every value of ``grid`` (a format's finite values), every midpoint of neighbours and the
    binary64 numbers either side of both, the midpoints below the smallest positive value and
    above the largest, binary64's extremes, ±0, ±inf and NaN; negated too where ``signed``."""
    pos = np.unique(grid[grid >= 0])
    top = pos[-1]
    above = top + (top - pos[-2]) / 2                  # the midpoint above the largest finite value
    mids = np.concatenate([(pos[:-1] + pos[1:]) / 2, [pos[0] / 2 if pos[0] else pos[1] / 2, above, 2 * top]])
    pts = np.concatenate([pos, mids])
    x = np.concatenate([pts, np.nextafter(pts, np.inf), np.nextafter(pts, 0), [5e-324, 2.0**-1074 * 3, 1e300,
                                                                               np.finfo(np.float64).max, np.inf]])
    x = np.unique(x[x >= 0])
    if signed:
        x = np.concatenate([x, -x])
    return np.concatenate([x, [0.0, -0.0, np.nan, -np.nan]])


def _cases():
    for key, (dtype, shift, n) in REFS.items():
        for saturate in (False, True):
            yield pytest.param(key, saturate, id=f"{key}-{'sat' if saturate else 'nosat'}")


@pytest.mark.parametrize("key,saturate", list(_cases()))
def test_cast_equals_ml_dtypes_on_every_deciding_input(key, saturate):
    fmt = get_registry().formats[key]
    dtype, shift, n = REFS[key]
    grid = ref_values(dtype, np.arange(n))
    grid = grid[np.isfinite(grid)]
    top = grid.max()
    x = deciding_inputs(grid, fmt.signed)
    if not fmt.signed:
        x = x[~(np.signbit(x) & (x != 0))]             # negative values: refused below
        x = np.where(x == 0, 0.0, x)                    # -0 reads as +0 (ue4m3's bit 7 is ignored)
    if not fmt.subnormals:
        x = x[x != 0]                                   # no zero in ue8m0: refused below
    sat_x = np.where(np.isnan(x), x, np.clip(x, -top, top))
    want = ref_words(dtype, sat_x if saturate else x)
    # rounds past the largest finite value: the reference's word is infinity or NaN
    with np.errstate(invalid="ignore"):
        past = ~np.isnan(x) & np.isnan(ref_values(dtype, want)) | np.isinf(ref_values(dtype, want)) & ~np.isinf(x)
        past |= np.isinf(x)
    keep = np.ones(x.shape, bool)
    if fmt.nan == "none":
        # ml_dtypes clamps, so "past" is read off the grid: the largest values of e3m2 (28 = 7 * 2^2),
        # e2m3 (7.5 = 15 * 2^-1) and e2m1 (6 = 3 * 2^1) have odd significands, so from the midpoint
        # above on a value rounds past them; refused unless saturating, as NaN always is
        pos = np.unique(grid[grid >= 0])
        past = np.abs(x) >= top + (top - pos[-2]) / 2
        keep = ~np.isnan(x) & (saturate | ~past)
    got = casts.cast(fmt, x[keep], saturate=saturate, nan="propagate").astype(np.uint64)
    assert np.array_equal(got, want[keep] << np.uint64(shift)), \
        [(float(v), hex(int(g)), hex(int(w) << shift)) for v, g, w in zip(x[keep], got, want[keep]) if g != w << shift][:8]
    assert keep.sum() > 2 * len(grid) and (not saturate or past.any())


@pytest.mark.parametrize("key", ["e3m2", "e2m3", "e2m1", "e2m1x"])
def test_formats_without_nan_or_infinity_refuse_what_ml_dtypes_clamps(key):
    fmt = get_registry().formats[key]
    dtype, _, n = REFS[key]
    grid = ref_values(dtype, np.arange(n))
    top = grid[np.isfinite(grid)].max()
    above = top + (top - np.unique(grid[grid >= 0])[-2]) / 2
    assert casts.cast(fmt, [np.nextafter(above, 0)]).size == 1   # just below the midpoint above: the largest
    for v in (above, -above, np.inf):
        with pytest.raises(mmasim.FormatRangeError, match="saturate=True"):
            casts.cast(fmt, [v], nan="propagate")
    with pytest.raises(mmasim.NonFiniteError, match="no NaN"):
        casts.cast(fmt, [np.nan], nan="propagate")


def test_unsigned_and_zeroless_formats_refuse_what_ml_dtypes_turns_into_nan():
    reg = get_registry().formats
    with pytest.raises(mmasim.FormatRangeError, match="no zero"):
        casts.cast(reg["ue8m0"], [1.0, 0.0])            # ml_dtypes: 0xFF, NaN
    for key in ("ue8m0", "ue4m3"):
        with pytest.raises(mmasim.FormatRangeError, match="unsigned"):
            casts.cast(reg[key], [-1.0])


@pytest.mark.parametrize("key,dtype", [("f32", np.float32), ("f64", np.float64)])
def test_cast_equals_numpy_on_sampled_words_and_their_midpoints(key, dtype):
    fmt = get_registry().formats[key]
    bits = np.dtype(dtype).itemsize * 8
    rng = np.random.default_rng(33)
    w = rng.integers(0, 1 << 63, size=20000, dtype=np.uint64) >> np.uint64(64 - bits)
    edges = np.array([0, 1, 2, (1 << (bits - 1)) >> 8, ((1 << (bits - 1)) - 1) ^ ((1 << (bits - 12)) - 1)],
                     dtype=np.uint64)    # 0, the smallest subnormals, a normal, near the largest
    with np.errstate(invalid="ignore"):
        v = np.concatenate([w, edges]).astype(_UINT[bits // 8]).view(dtype).astype(np.float64)
    v = np.abs(v[np.isfinite(v)])
    x = [v]
    if key == "f32":       # midpoints of each value and its upper neighbour, and either side of them
        up = np.nextafter(v.astype(np.float32), np.float32(np.inf)).astype(np.float64)
        mid = (v + up) / 2
        x += [mid, np.nextafter(mid, 0), np.nextafter(mid, np.inf), [np.finfo(np.float32).max * (1 + 2.0**-24)]]
    x = np.concatenate(x)
    x = np.concatenate([x, -x, [0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e300]])
    for saturate in (False, True):
        ref = np.where(np.isnan(x), x, np.clip(x, -np.finfo(dtype).max, np.finfo(dtype).max)) if saturate else x
        want = ref_words(dtype, ref)
        got = casts.cast(fmt, x, saturate=saturate, nan="propagate").astype(np.uint64)
        assert np.array_equal(got, want), [(float(a), hex(int(g)), hex(int(b))) for a, g, b in zip(x, got, want)
                                           if g != b][:8]


@settings(max_examples=200, deadline=None)
@given(x=st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=64),
       key=st.sampled_from(["bf16", "f16", "f32", "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz"]), saturate=st.booleans())
def test_cast_equals_the_reference_on_any_binary64_values(x, key, saturate):
    fmt = get_registry().formats[key]
    dtype = {"f32": np.float32}.get(key) or REFS[key][0]
    top = float(ml_dtypes.finfo(dtype).max)
    x = np.array(x, dtype=np.float64)
    x = np.where(np.isnan(x), np.copysign(np.nan, x), x)   # a NaN's payload is not carried (numpy's casts keep some)
    want = ref_words(dtype, np.where(np.isnan(x), x, np.clip(x, -top, top)) if saturate else x)
    assert np.array_equal(casts.cast(fmt, x, saturate=saturate, nan="propagate").astype(np.uint64), want)


def test_a_format_read_by_a_plugin_decoder_is_refused_not_encoded_as_if_generic():
    from test_plugins import make_plugin      # neg8: e4m3 with every bit inverted, its own decoder
    mmasim.register(make_plugin(), name="toy-encoder")
    try:
        with pytest.raises(mmasim.DtypeError, match="'neg8' decoder"):
            mmasim.quantize([1.0], "neg8")
    finally:
        mmasim.unregister(name="toy-encoder")
