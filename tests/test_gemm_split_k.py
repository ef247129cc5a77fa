"""gemm(split_k=S): S slices of K, the first from C and the others from zero, each
chained (or promoted), reduced in binary32: "sequential" from +0 in slice order (CUTLASS's
ReduceSplitK), "tree" pairwise.  Expectations: single-instruction chains per slice and
numpy float32 FADD."""

import numpy as np
import pytest

import mmasim
from gemm_compositions import AMPERE_F16, HOPPER_FP8, chain, e4m3_words, f32, promoted, words, zeros
from helpers import f16, f32 as f32_word


@pytest.fixture(scope="module")
def hopper():
    return mmasim.MMA(*HOPPER_FP8)


def _slices(m, A, B, C, S):
    M, N = A.shape[0], B.shape[1]
    tiles = A.shape[1] // m.k // S
    return [f32(chain(m, A, B, C if s == 0 else zeros(M, N), s * tiles, (s + 1) * tiles)) for s in range(S)]


def test_sequential_reduction_adds_the_slices_in_order_from_zero(hopper):
    rng = np.random.default_rng(10)
    M, N, K = 64, 8, 256
    A, B = e4m3_words(rng, (M, K)), e4m3_words(rng, (K, N))
    C = words(rng.normal(0, 100, (M, N)))
    acc = np.zeros((M, N), np.float32)
    for p in _slices(hopper, A, B, C, 4):
        acc = (acc + p).astype(np.float32)
    got = mmasim.gemm(A, B, C, model=hopper, split_k=4, backend="numpy")
    assert (got == words(acc)).all()


@pytest.mark.parametrize("S", [3, 4])
def test_tree_reduction_adds_pairs(hopper, S):
    rng = np.random.default_rng(11)
    M, N, K = 64, 8, 32 * S * 2
    A, B = e4m3_words(rng, (M, K)), e4m3_words(rng, (K, N))
    C = words(rng.normal(0, 100, (M, N)))
    p = _slices(hopper, A, B, C, S)
    want = (p[0] + p[1]).astype(np.float32)
    want = (want + p[2]).astype(np.float32) if S == 3 else (want + (p[2] + p[3]).astype(np.float32)).astype(np.float32)
    got = mmasim.gemm(A, B, C, model=hopper, split_k=S, split_reduce="tree", backend="numpy")
    assert (got == words(want)).all()


def test_sequential_and_tree_differ_where_f32_rounding_depends_on_the_order():
    # worked by hand: four slices of one K tile each, with the single products 2^24, 1, 1, 1.
    # sequential: ((2^24 + 1) + 1) + 1, each 2^24 + 1 a tie that RNE rounds to 2^24: 16777216.
    # tree: (2^24 + 1) + (1 + 1) = 2^24 + 2, exact: 16777218.
    m = mmasim.MMA(*AMPERE_F16)
    A = np.zeros((16, 64), np.uint16)
    B = np.zeros((64, 8), np.uint16)
    A[:, 0], B[0] = f16(4096.0), f16(4096.0)
    for t in (1, 2, 3):
        A[:, 16 * t], B[16 * t] = f16(1.0), f16(1.0)
    seq = mmasim.gemm(A, B, None, model=m, split_k=4, backend="numpy")
    tree = mmasim.gemm(A, B, None, model=m, split_k=4, split_reduce="tree", backend="numpy")
    assert (seq == f32_word(16777216.0)).all()
    assert (tree == f32_word(16777218.0)).all()


def test_split_k_slices_are_promoted_when_asked(hopper):
    rng = np.random.default_rng(12)
    M, N, K = 64, 8, 256
    A, B = e4m3_words(rng, (M, K)), e4m3_words(rng, (K, N))
    C = words(rng.normal(0, 100, (M, N)))
    s0 = promoted(hopper, A, B, C, 0, 4, every=64)
    s1 = promoted(hopper, A, B, None, 4, 8, every=64)
    want = ((np.float32(0) + s0).astype(np.float32) + s1).astype(np.float32)
    got = mmasim.gemm(A, B, C, model=hopper, split_k=2, promote_every=64, backend="numpy")
    assert (got == words(want)).all()


def test_split_k_one_is_the_chain_read_as_f32(hopper):
    rng = np.random.default_rng(13)
    A, B = e4m3_words(rng, (64, 96)), e4m3_words(rng, (96, 8))
    C = words(rng.normal(0, 100, (64, 8)))
    got = mmasim.gemm(A, B, C, model=hopper, split_k=1, backend="numpy")
    assert (got == chain(hopper, A, B, C, 0, 3)).all()


@pytest.mark.parametrize("kw, message", [
    (dict(split_k=3), "not multiples of"),
    (dict(split_k=0), "positive integer"),
    (dict(split_k=True), "positive integer"),
    (dict(split_k=2, split_reduce="pairwise"), "split_reduce must be one of"),
    (dict(split_k=8, promote_every=32), "not multiples of"),
])
def test_split_k_options_are_checked(hopper, kw, message):
    A, B = np.zeros((64, 128), np.uint8), np.zeros((128, 8), np.uint8)
    with pytest.raises(mmasim.GemmOptionError, match=message):
        mmasim.gemm(A, B, None, model=hopper, **kw)


def test_promotion_scale_blocks_must_not_straddle_slices(hopper):
    A, B = np.zeros((64, 256), np.uint8), np.zeros((256, 8), np.uint8)
    sa, sb = np.ones((64, 1), np.float32), np.ones((1, 1), np.float32)     # one K block of 256
    with pytest.raises(mmasim.GemmOptionError, match="whole scale blocks"):
        mmasim.gemm(A, B, None, model=hopper, split_k=2, promote_every=128, promotion_scale_a=sa,
                    promotion_scale_b=sb)
