"""gemm(promote_every=P): each chunk of K chained from zero, added into a binary32
accumulator that starts at C; promotion scales by one FFMA of the scale product.
Expectations: single matrix-form instructions per K tile plus numpy float32 FADD and
the Fraction FFMA of tests/ieee_reference.py."""

import numpy as np
import pytest

import mmasim
from gemm_compositions import (B200_MXF8, HOPPER_FP8, chain, e4m3_words, f32, promoted, stand_in, words,
                               zeros)
from helpers import f32 as f32_word


@pytest.fixture(scope="module")
def hopper():
    return mmasim.MMA(*HOPPER_FP8)


def test_promotion_adds_each_chunk_chain_into_f32(hopper):
    rng = np.random.default_rng(0)
    M, N, K = 64, 8, 256
    A, B = e4m3_words(rng, (M, K)), e4m3_words(rng, (K, N))
    C = words(rng.normal(0, 100, (M, N)))
    want = promoted(hopper, A, B, C, 0, K // 32, every=64)
    got = mmasim.gemm(A, B, C, model=hopper, promote_every=64, backend="numpy")
    assert got.dtype == np.uint32 and (got == words(want)).all()
    plain = mmasim.gemm(A, B, C, model=hopper, backend="numpy")
    assert (plain != got).any()         # promotion changes the words here


def test_a_last_shorter_chunk_is_promoted_too(hopper):
    rng = np.random.default_rng(1)
    M, N, K = 64, 8, 160                # chunks of 64, 64 and 32
    A, B = e4m3_words(rng, (M, K)), e4m3_words(rng, (K, N))
    want = promoted(hopper, A, B, None, 0, K // 32, every=64)
    got = mmasim.gemm(A, B, None, model=hopper, promote_every=64, backend="numpy")
    assert (got == words(want)).all()


def test_promotion_keeps_small_terms_the_chain_truncates(hopper):
    # worked by hand: tile 0 is 32 products 16 x 32 = 512 (sum 2^14); tile 1 is 32 products 0.5 x 1.
    # Chained, C = 2^14 sets the F = 13 window's quantum to 2^(14-13) = 2 and every 0.5 truncates to 0:
    # D = 16384.  Promoted every 32, tile 1 is its own chain (16, exact) and one FADD gives 16400.
    e4m3 = {16.0: 0x58, 32.0: 0x60, 0.5: 0x30, 1.0: 0x38}
    A = np.zeros((64, 64), np.uint8)
    B = np.zeros((64, 8), np.uint8)
    A[:, :32], B[:32] = e4m3[16.0], e4m3[32.0]
    A[:, 32:], B[32:] = e4m3[0.5], e4m3[1.0]
    chained = mmasim.gemm(A, B, zeros(64, 8), model=hopper, backend="numpy")
    promoted_ = mmasim.gemm(A, B, zeros(64, 8), model=hopper, promote_every=32, backend="numpy")
    assert (chained == f32_word(16384.0)).all()
    assert (promoted_ == f32_word(16400.0)).all()


def test_promotion_scales_apply_one_ffma_of_the_scale_product(hopper):
    rng = np.random.default_rng(2)
    M, N, K = 64, 16, 256
    A, B = e4m3_words(rng, (M, K)), e4m3_words(rng, (K, N))
    sa = rng.uniform(0.5, 2, (M, K // 128)).astype(np.float32)          # full-precision binary32 scales
    sb = rng.uniform(0.5, 2, (K // 128, N // 8)).astype(np.float32)
    C = words(rng.normal(0, 10, (M, N)))
    want = promoted(hopper, A, B, C, 0, K // 32, every=128, psa=sa, psb=sb, bk=128, bn=8)
    got = mmasim.gemm(A, B, C, model=hopper, promote_every=128, promotion_scale_a=sa, promotion_scale_b=sb,
                      backend="numpy")
    assert (got == words(want)).all()
    # the FFMA is not an FMUL then an FADD: written that way, some words differ
    unfused = f32(C).copy()
    for c in range(2):
        part = f32(chain(hopper, A, B, zeros(M, N), 4 * c, 4 * c + 4))
        s = (sa[:, c][:, None] * np.repeat(sb[c], 8)[None, :]).astype(np.float32)
        unfused = (unfused + (part * s).astype(np.float32)).astype(np.float32)
    assert (words(unfused) != got).any()


def test_promotion_scales_may_come_from_quantized_operands(hopper):
    rng = np.random.default_rng(3)
    M, N, K = 64, 8, 256
    A, B = e4m3_words(rng, (M, K)), e4m3_words(rng, (K, N))
    sa = rng.uniform(0.5, 2, (M, 2)).astype(np.float32)
    sb = rng.uniform(0.5, 2, (2, 1)).astype(np.float32)
    qa = stand_in(A, "e4m3", sa, "f32", "promotion", (1, 128))
    qb = stand_in(B, "e4m3", sb, "f32", "promotion", (128, 128))
    want = promoted(hopper, A, B, None, 0, K // 32, every=128, psa=sa, psb=sb, bk=128, bn=8)
    got = mmasim.gemm(qa, qb, None, model=hopper, promote_every=128, backend="numpy")
    assert got.dtype == np.float32 and (got.view(np.uint32) == words(want)).all()     # values: floats were held


def test_promotion_of_a_block_scaled_instruction_reads_each_chunks_scales():
    m = mmasim.MMA(*B200_MXF8)
    rng = np.random.default_rng(4)
    M, N, K = 128, 8, 256
    A, B = e4m3_words(rng, (M, K)), e4m3_words(rng, (K, N))
    sa = rng.integers(120, 135, (M, K // 32)).astype(np.uint8)         # ue8m0 words near 2^0
    sb = rng.integers(120, 135, (K // 32, N)).astype(np.uint8)
    want = promoted(m, A, B, None, 0, K // 32, every=64, scale_a=sa, scale_b=sb)
    got = mmasim.gemm(A, B, None, model=m, scale_a=sa, scale_b=sb, promote_every=64, backend="numpy")
    assert (got == words(want)).all()
    qa = stand_in(A, "e4m3", sa, "ue8m0", "instruction", 32)
    qb = stand_in(B, "e4m3", sb, "ue8m0", "instruction", 32)
    assert (mmasim.gemm(qa, qb, None, model=m, promote_every=64, backend="numpy", words=True) == got).all()


def test_threads_do_not_change_the_promoted_words(hopper):
    rng = np.random.default_rng(5)
    M, N, K = 128, 8, 128
    A, B = e4m3_words(rng, (M, K)), e4m3_words(rng, (K, N))
    want = words(promoted(hopper, A, B, None, 0, K // 32, every=64))
    for threads in (1, 3):
        got = mmasim.gemm(A, B, None, model=hopper, promote_every=64, threads=threads, backend="numpy")
        assert (got == want).all()


def test_typed_operands_give_float32_values(hopper):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(6)
    A, B = e4m3_words(rng, (64, 64)), e4m3_words(rng, (64, 8))
    want = promoted(hopper, A, B, None, 0, 2, every=32)
    got = mmasim.gemm(A.view(ml_dtypes.float8_e4m3fn), B.view(ml_dtypes.float8_e4m3fn), None, model=hopper,
                      promote_every=32, backend="numpy")
    assert got.dtype == np.float32 and (got.view(np.uint32) == words(want)).all()


@pytest.mark.parametrize("every, message", [(48, "not a positive multiple of"), (0, "positive integer"),
                                            (-32, "positive integer"), (32.0, "positive integer")])
def test_promote_every_must_be_a_multiple_of_the_instruction_k(hopper, every, message):
    A, B = np.zeros((64, 128), np.uint8), np.zeros((128, 8), np.uint8)
    with pytest.raises(mmasim.GemmOptionError, match=message):
        mmasim.gemm(A, B, None, model=hopper, promote_every=every)


def test_promotion_scales_need_a_promotion_that_fits_their_blocks(hopper):
    A, B = np.zeros((64, 256), np.uint8), np.zeros((256, 8), np.uint8)
    sa, sb = np.ones((64, 2), np.float32), np.ones((2, 1), np.float32)
    with pytest.raises(mmasim.GemmOptionError, match="give promote_every"):
        mmasim.gemm(A, B, None, model=hopper, promotion_scale_a=sa, promotion_scale_b=sb)
    with pytest.raises(mmasim.GemmOptionError, match="must divide the promotion scales' K block 128"):
        mmasim.gemm(A, B, None, model=hopper, promote_every=96, promotion_scale_a=sa, promotion_scale_b=sb)
    with pytest.raises(mmasim.ScaleError, match="in pairs"):
        mmasim.gemm(A, B, None, model=hopper, promote_every=128, promotion_scale_a=sa)
    with pytest.raises(mmasim.DtypeError, match="float32"):
        mmasim.gemm(A, B, None, model=hopper, promote_every=128, promotion_scale_a=sa.astype(np.float64),
                    promotion_scale_b=sb)
    with pytest.raises(mmasim.ScaleError, match=r"\(M, K / bk\)"):
        mmasim.gemm(A, B, None, model=hopper, promote_every=128, promotion_scale_a=np.ones((64, 3), np.float32),
                    promotion_scale_b=sb)


def test_promotion_refuses_what_binary32_cannot_hold_and_the_other_paths():
    dmma = mmasim.MMA("A100", "m8n8k4.f64.f64.f64.f64")
    with pytest.raises(mmasim.GemmOptionError, match="binary32"):
        mmasim.gemm(np.zeros((8, 8), np.uint64), np.zeros((8, 8), np.uint64), None, model=dmma, promote_every=4)
    hopper = mmasim.MMA(*HOPPER_FP8)
    A, B = np.zeros((64, 64), np.uint8), np.zeros((64, 8), np.uint8)
    with pytest.raises(mmasim.GemmOptionError, match="k_order"):
        mmasim.gemm(A, B, None, model=hopper, promote_every=32, k_order="reverse")
    da = pytest.importorskip("dask.array")
    with pytest.raises(mmasim.GemmOptionError, match="dask"):
        mmasim.gemm(da.from_array(A), B, None, model=hopper, promote_every=32)


def test_quantized_operands_must_match_the_instruction(hopper):
    A, B = np.zeros((64, 64), np.uint8), np.zeros((64, 8), np.uint8)
    with pytest.raises(mmasim.DtypeError, match="quantized to e5m2"):
        mmasim.gemm(stand_in(A, "e5m2"), B, None, model=hopper, promote_every=32)
    with pytest.raises(mmasim.ScaleError, match="not block-scaled"):
        mmasim.gemm(stand_in(A, "e4m3", np.zeros((64, 2), np.uint8), "ue8m0", "instruction"), B, None,
                    model=hopper)


def test_a_missing_c_is_a_zero_start_of_the_plain_chain(hopper):
    rng = np.random.default_rng(7)
    A, B = e4m3_words(rng, (64, 96)), e4m3_words(rng, (96, 8))
    assert (mmasim.gemm(A, B, None, model=hopper, backend="numpy") == chain(hopper, A, B, zeros(64, 8), 0, 3)).all()


def test_promotion_of_a_sparse_instruction_reads_each_chunks_metadata():
    from gemm_compositions import near_one

    m = mmasim.MMA("A100", "mma.sync.sp.m16n8k32.f32.f16.f16")
    rng = np.random.default_rng(8)
    M, N, K = 16, 8, 128
    A, B = near_one(rng, (M, K), 5, 10, (13, 17), np.uint16), near_one(rng, (K, N), 5, 10, (13, 17), np.uint16)
    sel = np.array(sorted(m.sparse_rule.selectors), np.uint64)
    nibbles = sel[rng.integers(0, len(sel), (M, K // 32, 8))]
    md = (nibbles << (np.arange(8, dtype=np.uint64) * np.uint64(4))).sum(axis=-1).astype(np.uint32)
    acc = np.zeros((M, N), np.float32)
    for c in range(2):
        D = zeros(M, N)
        for t in (2 * c, 2 * c + 1):
            cut = slice(32 * t, 32 * (t + 1))
            D = m.dot(A[:, None, cut], B[cut].T[None], D, sparse_metadata=md[:, None, t:t + 1], backend="numpy")
        acc = (acc + f32(D)).astype(np.float32)
    got = mmasim.gemm(A, B, None, model=m, sparse_metadata=md, promote_every=64, backend="numpy")
    assert (got == words(acc)).all()
