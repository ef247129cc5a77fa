"""The compiled kernels round by one rule: ``primitives._round_code`` is ``encode.round_code``
for one value (RZ and RNE, the modes the kernels run), ``primitives._round_any`` for every mode
(away from zero, ``cvt.rs`` with random bits, ``subnormals=False``: the compiled casts'), and ``tiles._rz_f32`` is the RZ
binary32 encoding ``Encoding.pack`` gives (the ``rz-f32`` encoding)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

numba = pytest.importorskip("numba")

from mmasim.arith.encode import BUILTIN_ENCODINGS, round_code  # noqa: E402
from mmasim.arith.ieee import pack  # noqa: E402
from mmasim.backends.numba.primitives import _MODES, MODE_RNE, MODE_RZ, _round_any, _round_code  # noqa: E402
from mmasim.backends.numba.tiles import _rz_f32  # noqa: E402

#: (emin, frac, max_code) of binary32, binary16, e8m13 and binary64
GRIDS = [(-126, 23, (255 << 23) - 1), (-14, 10, (31 << 10) - 1), (-126, 13, (255 << 13) - 1),
         (-1022, 52, (2047 << 52) - 1)]


@numba.njit
def _one(mag, e0, emin, frac, mode, max_code):
    return _round_code(mag, e0, emin, frac, mode, max_code)


@numba.njit
def _rz(v):
    return _rz_f32(v)


def _mags():
    """Magnitudes below 2**62, ties and near-ties of every width included."""
    return st.one_of(st.integers(0, 2 ** 62 - 1),
                     st.builds(lambda k, b, low: ((2 * k + 1) << b) + low, st.integers(0, 2 ** 20),
                               st.integers(0, 40), st.sampled_from([-1, 0, 1])).filter(lambda m: 0 <= m < 2 ** 62))


@settings(max_examples=600, deadline=None)
@given(mag=_mags(), e0=st.integers(-1200, 1100), grid=st.sampled_from(GRIDS), mode=st.sampled_from(["rz", "rne"]))
def test_the_scalar_rounding_of_the_kernels_is_round_code(mag, e0, grid, mode):
    emin, frac, max_code = grid
    code, over = round_code(np.int64(mag), np.int64(e0), emin=emin, frac=frac, mode=mode, max_code=max_code)
    got = _one(np.int64(mag), np.int64(e0), emin, frac, MODE_RZ if mode == "rz" else MODE_RNE, max_code)
    assert (int(got[0]), bool(got[1])) == (int(code), bool(over))


RZ_F32 = next(e for e in BUILTIN_ENCODINGS if e.key == "rz-f32")


@settings(max_examples=600, deadline=None)
@given(v=st.one_of(st.floats(allow_nan=False, allow_infinity=False),
                   st.floats(min_value=2.0 ** -160, max_value=2.0 ** -120), st.just(-0.0), st.just(2.0 ** 128)))
def test_the_lane_rz_encoding_is_the_rz_f32_encoding(v):
    word = int(pack(np.array([v]), RZ_F32)[0])
    want = float(np.uint32(word).view(np.float32)) + 0.0       # a zero is +0 in the lanes
    got = _rz(v)
    assert got == want and np.signbit(got) == np.signbit(want), (v, got, want)


@numba.njit
def _any(mag, e0, emin, frac, mode, max_code, subnormals, rbits, width):
    return _round_any(mag, e0, emin, frac, mode, max_code, subnormals, rbits, width)


#: (emin, frac, max_code, subnormals) of e4m3, e2m1, bf16 and ue8m0 (every code normal, no zero)
CAST_GRIDS = [(-6, 3, 0x7E, True), (0, 1, 0x7, True), (-126, 7, (255 << 7) - 1, True), (-127, 0, 0xFE, False)]


@settings(max_examples=600, deadline=None)
@given(mag=_mags(), e0=st.integers(-1200, 1100), grid=st.sampled_from(CAST_GRIDS),
       mode=st.sampled_from(["rz", "rne", "away", "rs"]), width=st.sampled_from([8, 13, 16]), data=st.data())
def test_the_scalar_rounding_of_every_mode_is_round_code(mag, e0, grid, mode, width, data):
    emin, frac, max_code, subnormals = grid
    rbits = data.draw(st.integers(0, (1 << width) - 1))
    lead = e0 + mag.bit_length() - 1
    drop = max(lead, emin) - frac - e0          # bits below the kept last bit
    if drop > 0 and data.draw(st.booleans()):   # the random bits at the carry's edge: 2**width - t - {0, 1}
        t = ((mag & ((1 << drop) - 1)) << width) >> drop
        rbits = min(max((1 << width) - t - data.draw(st.integers(0, 1)), 0), (1 << width) - 1)
    code, over = round_code(np.int64(mag), np.int64(e0), emin=emin, frac=frac, mode=mode, max_code=max_code,
                            subnormals=subnormals, rbits=rbits, rbits_width=width)
    got = _any(np.int64(mag), np.int64(e0), emin, frac, _MODES[mode], max_code, subnormals, np.int64(rbits),
               np.int64(width))
    assert (int(got[0]), bool(got[1])) == (int(code), bool(over))
