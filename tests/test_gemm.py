"""mmasim.gemm chains the instruction over K tiles: D of one tile is C of the next."""

import numpy as np
import pytest

import mmasim
from gemm_compositions import near_one
from helpers import f16, f32

AMPERE = ("Ampere", "m16n8k16.f32.f16.f16.f32")


def _near_one_f16(rng, shape):
    return near_one(rng, shape, 5, 10, (13, 17), np.uint16)


def test_k_tiles_chain_like_manual_dot_calls():
    rng = np.random.default_rng(0)
    M, N, K = 32, 16, 64
    A, B = _near_one_f16(rng, (M, K)), _near_one_f16(rng, (K, N))
    C = rng.integers(0, 1 << 32, size=(M, N), dtype=np.uint64).astype(np.uint32) & np.uint32(0x3FFFFFFF)
    m = mmasim.MMA(*AMPERE)
    D = C
    for t in range(K // 16):   # one dot per element, by hand: D of tile t is C of tile t+1
        a = A[:, None, 16 * t:16 * (t + 1)]
        b = B[16 * t:16 * (t + 1), :].T[None, :, :]
        D = m.dot(a, b, D, backend="numpy")
    got = mmasim.gemm(A, B, C, arch="Ampere", instruction="m16n8k16.f32.f16.f16.f32")
    assert got.shape == (M, N) and got.dtype == np.uint32
    assert (got == D).all()


def test_reverse_and_explicit_orders_chain_the_tiles_in_that_order():
    rng = np.random.default_rng(1)
    M, N, K = 16, 8, 48
    A, B = _near_one_f16(rng, (M, K)), _near_one_f16(rng, (K, N))
    C = np.zeros((M, N), np.uint32)
    m = mmasim.MMA(*AMPERE)
    for order in ([2, 1, 0], [1, 2, 0]):
        D = C
        for t in order:
            D = m(A[:, 16 * t:16 * (t + 1)], B[16 * t:16 * (t + 1)], D, backend="numpy")
        got = mmasim.gemm(A, B, C, *AMPERE, k_order=order if order != [2, 1, 0] else "reverse")
        assert (got == D).all()


def test_order_matters_when_truncation_loses_bits():
    # K tile 0: sixteen products 2^20 (sum 2^24); K tile 1: sixteen products 0.5 (sum 8).
    # Forward: C = 2^24 sets the window (F = 24, quantum 2^0) and every 0.5 is truncated away.
    # Reverse: 8 first, then the 2^20 products keep it exactly: 2^24 + 8.
    m = mmasim.MMA(*AMPERE)
    A = np.zeros((16, 32), np.uint16)
    A[:, :16], A[:, 16:] = f16(1024.0), f16(1.0)
    B = np.zeros((32, 8), np.uint16)
    B[:16], B[16:] = f16(1024.0), f16(0.5)
    C = np.zeros((16, 8), np.uint32)
    fwd = mmasim.gemm(A, B, C, *AMPERE)
    rev = mmasim.gemm(A, B, C, *AMPERE, k_order="reverse")
    assert (fwd == f32(2.0 ** 24)).all()
    assert (rev == f32(2.0 ** 24 + 8)).all()
    assert (mmasim.gemm(A, B, C, *AMPERE, k_order=[1, 0]) == rev).all()
    assert m.k == 16


def test_small_integers_give_the_exact_product():
    rng = np.random.default_rng(2)
    M, N, K = 16, 16, 128
    a = rng.integers(-3, 4, size=(M, K))
    b = rng.integers(-3, 4, size=(K, N))
    c = rng.integers(-100, 100, size=(M, N))
    to16 = np.vectorize(lambda v: f16(float(v)))
    to32 = np.vectorize(lambda v: f32(float(v)))
    D = mmasim.gemm(to16(a).astype(np.uint16), to16(b).astype(np.uint16), to32(c).astype(np.uint32), *AMPERE)
    assert (D == to32(a @ b + c)).all()


def test_tf32_gemm_on_b200_exact_for_integers():
    rng = np.random.default_rng(3)
    M, N, K = 128, 16, 32
    a = rng.integers(-8, 9, size=(M, K))
    b = rng.integers(-8, 9, size=(K, N))
    to32 = np.vectorize(lambda v: f32(float(v)))
    D = mmasim.gemm(to32(a).astype(np.uint32), to32(b).astype(np.uint32), np.zeros((M, N), np.uint32),
                    "B200", "tcgen05.mma.kind::tf32")
    assert (D == to32(a @ b)).all()


def test_block_scaled_gemm_slices_the_scales_per_k_tile():
    rng = np.random.default_rng(4)
    m = mmasim.MMA("B200", "tcgen05.kind::mxf8f6f4.block_scale", a_type="e4m3", b_type="e4m3")
    M, N, K = 128, 8, 96
    A = rng.integers(0x30, 0x48, size=(M, K)).astype(np.uint8)
    B = rng.integers(0x30, 0x48, size=(K, N)).astype(np.uint8)
    C = np.zeros((M, N), np.uint32)
    sa = rng.integers(125, 130, size=(M, K // 32)).astype(np.uint8)
    sb = rng.integers(125, 130, size=(K // 32, N)).astype(np.uint8)
    D = C
    for t in range(K // 32):
        D = m(A[:, 32 * t:32 * (t + 1)], B[32 * t:32 * (t + 1)], D, scale_a=sa[:, t:t + 1], scale_b=sb[t:t + 1])
    got = mmasim.gemm(A, B, C, model=m, scale_a=sa, scale_b=sb)
    assert (got == D).all()


def test_both_backends_agree():
    pytest.importorskip("numba")
    rng = np.random.default_rng(5)
    A, B = _near_one_f16(rng, (32, 64)), _near_one_f16(rng, (64, 16))
    C = np.zeros((32, 16), np.uint32)
    assert (mmasim.gemm(A, B, C, *AMPERE, backend="numpy") == mmasim.gemm(A, B, C, *AMPERE, backend="numba")).all()


def test_shapes_the_tile_does_not_divide_are_refused():
    A = np.zeros((16, 40), np.uint16)
    with pytest.raises(mmasim.ShapeError, match="K = 40"):
        mmasim.gemm(A, np.zeros((40, 8), np.uint16), np.zeros((16, 8), np.uint32), *AMPERE)
    with pytest.raises(mmasim.ShapeError, match="M = 24"):
        mmasim.gemm(np.zeros((24, 32), np.uint16), np.zeros((32, 8), np.uint16), np.zeros((24, 8), np.uint32), *AMPERE)
    with pytest.raises(mmasim.ShapeError, match="N = 12"):
        mmasim.gemm(np.zeros((16, 32), np.uint16), np.zeros((32, 12), np.uint16), np.zeros((16, 12), np.uint32), *AMPERE)
    with pytest.raises(mmasim.ShapeError, match="do not fit"):
        mmasim.gemm(np.zeros((16, 32), np.uint16), np.zeros((16, 8), np.uint16), np.zeros((16, 8), np.uint32), *AMPERE)


def test_bad_orders_sparse_and_missing_scales_are_refused():
    A, B, C = np.zeros((16, 32), np.uint16), np.zeros((32, 8), np.uint16), np.zeros((16, 8), np.uint32)
    with pytest.raises(mmasim.OperandError, match="permutation"):
        mmasim.gemm(A, B, C, *AMPERE, k_order=[0, 0])
    with pytest.raises(mmasim.OperandError, match="k_order"):
        mmasim.gemm(A, B, C, *AMPERE, k_order="sideways")
    with pytest.raises(mmasim.MMAError, match="sparse"):
        mmasim.gemm(np.zeros((128, 32), np.uint32), np.zeros((32, 8), np.uint32), np.zeros((128, 8), np.uint32),
                    "B200", "tcgen05.mma.sp.kind::tf32")
    with pytest.raises(mmasim.ScaleError):
        mmasim.gemm(np.zeros((128, 64), np.uint8), np.zeros((64, 8), np.uint8), np.zeros((128, 8), np.uint32),
                    "B200", "tcgen05.kind::mxf4nvf4.4X")


def test_progress_true_draws_one_tqdm_bar_on_stderr(capsys):
    A, B, C = np.zeros((16, 32), np.uint16), np.zeros((32, 8), np.uint16), np.zeros((16, 8), np.uint32)
    mmasim.gemm(A, B, C, *AMPERE, progress=True)
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "2/2" in captured.err and "100%" in captured.err
    assert captured.err.count("\n") == 1          # one bar, updated in place ("\r"), not a line per tile
