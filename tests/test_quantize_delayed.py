"""FP8 delayed scaling (``mmasim.quantization.delayed.DelayedScaling``), a history worked by hand
from Transformer Engine's fused update (``transformer_engine/common/recipe/delayed_scaling.cu``,
``kernel_bulk``) and its per-tensor cast (``vectorized_pointwise.h``):

    cast:    words = fp8_satfinite(RN(x * scale)),  scale_inv = RN(1 / scale),  history[0] = max(history[0], amax)
    update:  last = history[0]; last == 0: nothing changes; else
             amax = max(history) ("max") or last ("most_recent"), history = roll(history, -1) with
             entry 0 cleared, scale = RN(fp8_max * 2**-margin / amax) (FLT_MAX where that overflows)

e4m3: 2 = 0x40, -0.5 = 0xB0, 224 = 1.75 * 2**7 = 0x76, 448 = 0x7E.
"""

import numpy as np
import pytest

import mmasim
from mmasim.quantization.delayed import DelayedScaling

F32 = np.float32


def step(ds, *values):
    q = ds.quantize(np.array(values, dtype=F32))
    return q, ds.update()


def test_a_history_of_length_four_under_max():
    ds = DelayedScaling("e4m3", amax_history_len=4)
    assert ds.scale == 1 and ds.amax_history.tolist() == [0, 0, 0, 0]
    # step 1, amax 2, cast with scale 1: 2 -> 0x40, -0.5 -> 0xB0.  history [2, 0, 0, 0] -> max 2,
    # rolled [0, 0, 0, 2]; scale 448 / 2 = 224
    q, s = step(ds, 2.0, -0.5)
    assert q.words.tolist() == [0x40, 0xB0] and q.tensor_scale == 1 and q.amax == 2
    assert s == 224 and ds.amax_history.tolist() == [0, 0, 0, 2]
    # step 2, amax 1: 1 * 224 = 224 (0x76), scale_inv RN(1/224) = 2**-8 * 8/7 rounded; history
    # [1, 0, 0, 2] -> max 2: scale stays 224; rolled [0, 0, 2, 1]
    q, s = step(ds, 1.0)
    assert q.words.tolist() == [0x76] and q.tensor_scale == F32(1) / F32(224)
    assert s == 224 and ds.amax_history.tolist() == [0, 0, 2, 1]
    # step 3, amax 4, still cast with 224: 896 saturates to 448 (0x7E) -- the delay; history
    # [4, 0, 2, 1] -> max 4: scale 112; rolled [0, 2, 1, 4]
    q, s = step(ds, 4.0)
    assert q.words.tolist() == [0x7E] and s == 112 and ds.amax_history.tolist() == [0, 2, 1, 4]
    # step 4, all zeros: last = 0, the fused kernel neither rolls nor rescales
    q, s = step(ds, 0.0, -0.0)
    assert q.words.tolist() == [0x00, 0x80] and s == 112 and ds.amax_history.tolist() == [0, 2, 1, 4]
    # steps 5-7, amaxes 0.5, 0.25, 0.25: the 4 stays in the window (max 4, scale 112) while it is in
    # the history before the roll: [0.5, 2, 1, 4], [0.25, 1, 4, 0.5], [0.25, 4, 0.5, 0.25]
    for amax, after in ((0.5, [0, 1, 4, 0.5]), (0.25, [0, 4, 0.5, 0.25]), (0.25, [0, 0.5, 0.25, 0.25])):
        q, s = step(ds, amax)
        assert s == 112 and ds.amax_history.tolist() == after
    # step 8: [0.25, 0.5, 0.25, 0.25] -> max 0.5, scale 448 / 0.5 = 896
    q, s = step(ds, 0.25)
    assert s == 896 and ds.amax_history.tolist() == [0, 0.25, 0.25, 0.25]


def test_most_recent_follows_the_last_amax():
    ds = DelayedScaling("e4m3", amax_history_len=4, amax_compute_algo="most_recent")
    assert [float(step(ds, a)[1]) for a in (2.0, 4.0, 1.0)] == [224, 112, 448]


def test_two_casts_in_one_step_record_the_larger_amax():
    ds = DelayedScaling("e4m3", amax_history_len=2)
    ds.quantize(np.array([3.0], dtype=F32))
    ds.quantize(np.array([-7.0], dtype=F32))
    assert ds.amax_history.tolist() == [7, 0] and ds.update() == 64         # 448 / 7


def test_margin_and_e5m2():
    # margin 1: scaled_max = 448 / 2 = 224, amax 2 -> 112; e5m2: 57344 / 2 = 28672
    assert step(DelayedScaling("e4m3", margin=1, amax_history_len=2), 2.0)[1] == 112
    assert step(DelayedScaling("e5m2", amax_history_len=2), 2.0)[1] == 28672


def test_a_tiny_amax_gives_the_largest_binary32_scale():
    # 448 / 2**-149 overflows binary32: FLT_MAX
    assert step(DelayedScaling(amax_history_len=1), 2.0 ** -149)[1] == np.finfo(F32).max


def test_the_scale_inverse_is_the_tensor_scale_gemm_multiplies_by():
    # A = [[1, 2]] cast after a step of amax 2 (scale 224): 224, 448 -> 0x76, 0x7E and
    # tensor_scale = scale_inv = RN(1/224), which dequantize (and gemm's alpha) multiplies in;
    # B = [[1], [1]] cast with the first scale, 1: 0x38
    ds = DelayedScaling(amax_history_len=1)
    step(ds, 2.0)
    qa = ds.quantize(np.array([[1.0, 2.0]], dtype=F32))
    qb = DelayedScaling(amax_history_len=1).quantize(np.array([[1.0], [1.0]], dtype=F32))
    assert np.array_equal(qa.dequantize(), np.array([[224, 448]]) * float(F32(1) / F32(224)))
    assert qa.words.tolist() == [[0x76, 0x7E]] and qb.words.tolist() == [[0x38], [0x38]]
    assert qa.tensor_scale == F32(1) / F32(224) and qb.tensor_scale == 1 and qa.scale_use is None


def test_options_are_checked():
    with pytest.raises(mmasim.QuantizeError, match="e4m3 or e5m2"):
        DelayedScaling("e2m1")
    with pytest.raises(mmasim.QuantizeError, match="margin"):
        DelayedScaling(margin=0.5)
    with pytest.raises(mmasim.QuantizeError, match="amax_history_len"):
        DelayedScaling(amax_history_len=0)
    with pytest.raises(mmasim.QuantizeError, match="amax_compute_algo"):
        DelayedScaling(amax_compute_algo="mean")
    with pytest.raises(mmasim.NonFiniteError):
        DelayedScaling().quantize(np.array([np.inf], dtype=F32))
