"""Shared pieces of the gemm composition tests: operands, single-instruction chains
written out tile by tile, binary32 arithmetic in numpy float32 (IEEE RNE) and
``tests/ieee_reference.py`` (Fractions) for FFMA, and a duck-typed stand-in for a
quantized tensor."""

from types import SimpleNamespace

import numpy as np

import ieee_reference as ref

HOPPER_FP8 = ("H100", "wgmma.mma_async.k32.f32.e4m3.e4m3")
AMPERE_F16 = ("A100", "m16n8k16.f32.f16.f16.f32")
B200_MXF8 = ("B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e4m3.e4m3.ue8m0")


def near_one(rng, shape, exp_bits, man_bits, exponents, dtype):
    """Random words of a float format: any sign and fraction, the exponent field in ``exponents``."""
    e = rng.integers(*exponents, size=shape)
    f = rng.integers(0, 1 << man_bits, size=shape)
    s = rng.integers(0, 2, size=shape)
    return ((s << (exp_bits + man_bits)) | (e << man_bits) | f).astype(dtype)


def e4m3_words(rng, shape):
    """Random finite e4m3 words with exponents near one (no NaN: 0x7F / 0xFF excluded)."""
    return near_one(rng, shape, 4, 3, (4, 10), np.uint8)


def f32(words):
    """uint32 words as numpy float32 values."""
    return np.asarray(words, dtype=np.uint32).view(np.float32)


def words(values):
    return np.asarray(values, dtype=np.float32).view(np.uint32)


def chain(m, A, B, C, t0, t1, scale_a=None, scale_b=None):
    """D of K tiles t0 .. t1 - 1 by hand: one instruction per output element and tile (Model.dot
    on the tile's row of A and column of B), D into C."""
    k = m.k
    D = C
    for t in range(t0, t1):
        cut = slice(t * k, (t + 1) * k)
        kw = {}
        if scale_a is not None:
            per = k // m.datapath.block
            blocks = slice(t * per, (t + 1) * per)
            kw = dict(scale_a=scale_a[:, None, blocks], scale_b=scale_b[blocks].T[None, :, :])
        D = m.dot(A[:, None, cut], B[cut].T[None, :, :], D, backend="numpy", **kw)
    return D


def zeros(M, N):
    return np.zeros((M, N), dtype=np.uint32)


def promoted(m, A, B, C, t0, t1, every, scale_a=None, scale_b=None, psa=None, psb=None, bk=None, bn=None):
    """The promotion loop written out: numpy float32 FADD, or the FFMA of ieee_reference."""
    M, N = A.shape[0], B.shape[1]
    per = every // m.k
    acc = f32(C).copy() if C is not None else np.zeros((M, N), np.float32)
    for c0 in range(t0, t1, per):
        part = f32(chain(m, A, B, zeros(M, N), c0, min(c0 + per, t1), scale_a, scale_b))
        if psa is None:
            acc = (acc + part).astype(np.float32)
        else:
            kb = c0 * m.k // bk
            out = np.empty_like(acc)
            for i in range(M):
                for j in range(N):
                    s = np.float32(psa[i, kb]) * np.float32(psb[kb, j // bn])      # one FMUL
                    w = ref.fma(int(words(part[i, j])), int(words(s)), int(words(acc[i, j])), ref.F32)
                    out[i, j] = f32(np.uint32(w))
            acc = out
    return acc


def stand_in(words_, fmt, scales=None, scale_format=None, scale_use=None, block=None, tensor_scale=None):
    """A duck-typed quantized tensor (the attributes gemm reads)."""
    return SimpleNamespace(words=words_, scales=scales, format=fmt, scale_format=scale_format, block=block,
                           axis=-1, tensor_scale=tensor_scale, scheme="stand-in", scale_use=scale_use)
