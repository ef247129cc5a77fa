"""Formats and word generators of tools/peer/generate_vectors.py: container words of each
element format (fields, specials, decoding to exact values) and the random case kinds.  Loaded by
the generator from this folder by file path (the generator keeps this folder off ``sys.path`` so
that ``import mmasim`` is the peer's); imports neither ``mmasim``.
"""

from __future__ import annotations


import numpy as np
import torch

# ---------------------------------------------------------------------------
# Formats.  (container width, exponent bits, mantissa bits, bias, specials)
# specials: "ieee" (inf + NaN at max exponent), "fn" (e4m3fn: only S.1111.111
# is NaN), "fnuz" (AMD fp8/bf8: 0x80 is the only NaN, no -0, no inf),
# "none" (fp6/fp4: all codes finite).
# ---------------------------------------------------------------------------
FMT = {
    "f64": (64, 11, 52, 1023, "ieee"),
    "f32": (32, 8, 23, 127, "ieee"),
    "tf32": (32, 8, 23, 127, "ieee"),  # f32 container, peer truncates low 13 bits
    "xf32": (32, 8, 23, 127, "ieee"),  # AMD, same container rule as tf32
    "f16": (16, 5, 10, 15, "ieee"),
    "bf16": (16, 8, 7, 127, "ieee"),
    "e4m3": (8, 4, 3, 7, "fn"),
    "e5m2": (8, 5, 2, 15, "ieee"),
    "fp8": (8, 4, 3, 8, "fnuz"),
    "bf8": (8, 5, 2, 16, "fnuz"),
    "e3m2": (6, 3, 2, 3, "none"),  # byte, code in bits 5:0, bits 7:6 random
    "e2m3": (6, 2, 3, 1, "none"),  # byte, code in bits 5:0, bits 7:6 random
    "e2m1": (4, 2, 1, 1, "none"),  # byte, code in bits 5:2, 7:6 random, 1:0 zero
    "e2m1x": (4, 2, 1, 1, "none"),  # mxf4: one element per entry, bits 3:0
    "ue8m0": (8, 8, 0, 127, "e8m0"),
    "ue4m3": (8, 4, 3, 7, "fn"),  # bit 7 always 0
}
CODE_BITS = {k: (1 + v[1] + v[2]) if k not in ("ue8m0", "ue4m3") else (8 if k == "ue8m0" else 7)
             for k, v in FMT.items()}

TORCH_OF = {
    torch.float64: "f64",
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float8_e4m3fn: "e4m3",
    torch.float8_e5m2: "e5m2",
    torch.float8_e4m3fnuz: "fp8",
    torch.float8_e5m2fnuz: "bf8",
    torch.float8_e8m0fnu: "ue8m0",
}


def container_bits(fmt: str) -> int:
    return {64: 64, 32: 32, 16: 16}.get(FMT[fmt][0], 8)


def split_fields(fmt, code):
    _, E, M, _, _ = FMT[fmt]
    code = code.astype(np.uint64)
    mant = code & np.uint64((1 << M) - 1)
    ef = (code >> np.uint64(M)) & np.uint64((1 << E) - 1)
    sign = (code >> np.uint64(E + M)) & np.uint64(1)
    return sign, ef, mant


def make_code(fmt, sign, ef, mant):
    _, E, M, _, _ = FMT[fmt]
    return ((np.asarray(sign, np.uint64) << np.uint64(E + M))
            | (np.asarray(ef, np.uint64) << np.uint64(M))
            | np.asarray(mant, np.uint64))


def code_to_word(fmt, code, rng):
    """Place a format code into its container word (with padding rules)."""
    code = code.astype(np.uint64)
    if fmt in ("e3m2", "e2m3"):
        pad = rng.integers(0, 4, size=code.shape, dtype=np.uint64)
        return code | (pad << np.uint64(6))
    if fmt == "e2m1":
        pad = rng.integers(0, 4, size=code.shape, dtype=np.uint64)
        return (code << np.uint64(2)) | (pad << np.uint64(6))  # bits 1:0 zero
    if fmt == "ue4m3":
        return code & np.uint64(0x7F)
    return code


def word_to_code(fmt, word):
    word = word.astype(np.uint64)
    if fmt in ("e3m2", "e2m3"):
        return word & np.uint64(0x3F)
    if fmt == "e2m1":
        return (word >> np.uint64(2)) & np.uint64(0xF)
    if fmt == "e2m1x":
        return word & np.uint64(0xF)
    return word


def decode(fmt, word):
    """Container words -> float64 values (NaN for NaN).  tf32/xf32 truncated."""
    word = np.asarray(word, np.uint64)
    if fmt == "f64":
        return word.view(np.float64).copy()
    if fmt in ("f32", "tf32", "xf32"):
        w = word.astype(np.uint32)
        if fmt != "f32":
            w = w & np.uint32(0xFFFFE000)
        return w.view(np.float32).astype(np.float64)
    if fmt == "f16":
        return word.astype(np.uint16).view(np.float16).astype(np.float64)
    if fmt == "bf16":
        return (word.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    if fmt == "ue8m0":
        v = np.ldexp(1.0, word.astype(np.int64) - 127)
        return np.where(word == 0xFF, np.nan, v)
    code = word_to_code(fmt, word)
    _, E, M, bias, spec = FMT[fmt]
    if fmt == "ue4m3":
        code = code & np.uint64(0x7F)
    sign, ef, mant = split_fields(fmt, code)
    ef_i = ef.astype(np.int64)
    m = mant.astype(np.float64)
    val = np.where(ef_i == 0, np.ldexp(m, 1 - bias - M), np.ldexp(m + (1 << M), ef_i - bias - M))
    val = np.where(sign == 1, -val, val)
    if spec == "ieee":
        maxe = (1 << E) - 1
        val = np.where((ef_i == maxe) & (mant == 0), np.copysign(np.inf, val), val)
        val = np.where((ef_i == maxe) & (mant != 0), np.nan, val)
    elif spec == "fn":
        val = np.where((ef_i == (1 << E) - 1) & (mant == (1 << M) - 1), np.nan, val)
    elif spec == "fnuz":
        val = np.where(code == 0x80, np.nan, val)
    return val


def encode_c(fmt, x):
    """float64 -> C container words (C is f16, f32 or f64), RNE."""
    x = np.asarray(x, np.float64)
    if fmt == "f64":
        return x.view(np.uint64).copy()
    if fmt == "f32":
        return x.astype(np.float32).view(np.uint32).astype(np.uint64)
    if fmt == "f16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).view(np.uint16).astype(np.uint64)
    raise ValueError(fmt)


def exp_limits(fmt):
    """(min, max) exponent field of finite normal numbers."""
    _, E, M, _, spec = FMT[fmt]
    top = (1 << E) - 1
    return 1, (top - 1 if spec == "ieee" else top)


# ---------------------------------------------------------------------------
# Word generators.  All return uint64 arrays of container words.
# ---------------------------------------------------------------------------
def gen_uniform(fmt, shape, rng, finite_rows=None):
    """Uniform random container words, biased 30% towards special exponents.

    Rows flagged in `finite_rows` get only finite values (NaN/inf words are
    redrawn), so that random full-range finite arithmetic is covered too and
    not every long row collapses to a NaN/inf result."""
    w = _gen_uniform(fmt, shape, rng)
    if finite_rows is None:
        return w
    want = np.broadcast_to(finite_rows.reshape((-1,) + (1,) * (len(shape) - 1)), shape)
    for _ in range(64):
        bad = want & ~np.isfinite(decode(fmt, w))
        if not bad.any():
            break
        w = np.where(bad, _gen_uniform(fmt, shape, rng), w)
    bad = want & ~np.isfinite(decode(fmt, w))
    return np.where(bad, np.uint64(0), w)


def _gen_uniform(fmt, shape, rng):
    if fmt == "ue8m0":
        return rng.integers(0, 256, size=shape, dtype=np.uint64)
    nb = CODE_BITS[fmt]
    hi = np.uint64(0xFFFFFFFFFFFFFFFF) if nb == 64 else np.uint64((1 << nb) - 1)
    code = rng.integers(0, 1 << 63, size=shape, dtype=np.uint64) * np.uint64(2) + \
        rng.integers(0, 2, size=shape, dtype=np.uint64)
    code &= hi
    if fmt in ("ue4m3",):
        return code_to_word(fmt, code, rng)
    _, E, M, bias, spec = FMT[fmt]
    special = rng.random(shape) < 0.30
    top = (1 << E) - 1
    ef = rng.choice(np.array([0, 0, 1, top, top, top - 1, bias], np.uint64), size=shape)
    sign, _, mant = split_fields(fmt, code)
    zero_mant = rng.random(shape) < 0.4
    mant = np.where(zero_mant, np.uint64(0), mant)
    code = np.where(special, make_code(fmt, sign, ef, mant), code)
    return code_to_word(fmt, code, rng)


def gen_near(fmt, shape, rng, spread=3, center=0):
    """Random sign, exponent within `spread` binades of `center`, random mantissa."""
    if fmt == "ue8m0":
        e = np.clip(127 + center + rng.integers(-spread, spread + 1, size=shape), 0, 254)
        return e.astype(np.uint64)
    _, E, M, bias, spec = FMT[fmt]
    lo, hi = exp_limits(fmt)
    ef = np.clip(bias + center + rng.integers(-spread, spread + 1, size=shape), lo, hi).astype(np.uint64)
    if M == 0:
        mant = np.zeros(shape, np.uint64)
    elif M >= 63:
        raise ValueError(fmt)
    else:
        mant = rng.integers(0, 1 << M, size=shape, dtype=np.uint64)
    if spec == "fn":  # avoid the NaN code S.1111.111
        bad = (ef == (1 << E) - 1) & (mant == (1 << M) - 1)
        mant = np.where(bad, mant - np.uint64(1), mant)
    sign = rng.integers(0, 2, size=shape, dtype=np.uint64)
    if fmt == "ue4m3":
        sign = np.zeros(shape, np.uint64)
    return code_to_word(fmt, make_code(fmt, sign, ef, mant), rng)


def gen_sparse(fmt, shape, rng, p_zero=0.5, tiny_rows=None):
    """Zero-heavy, tiny and subnormal operands."""
    if fmt == "ue8m0":
        return np.where(rng.random(shape) < 0.5, rng.integers(0, 8, size=shape),
                        rng.integers(120, 135, size=shape)).astype(np.uint64)
    _, E, M, bias, spec = FMT[fmt]
    sign = rng.integers(0, 2, size=shape, dtype=np.uint64)
    if spec == "fnuz" or fmt == "ue4m3":
        sign_zero = np.zeros(shape, np.uint64)  # 0x80 is NaN for fnuz
    else:
        sign_zero = sign
    r = rng.random(shape)
    if tiny_rows is not None:
        # these rows have no near-1 values at all: only zeros, subnormals and
        # the smallest normals (exercises e_zero / subnormal alignment)
        r = np.where(tiny_rows.reshape((-1,) + (1,) * (len(shape) - 1)), r * (p_zero + 0.35), r)
    mant = rng.integers(0, 1 << M, size=shape, dtype=np.uint64) if M else np.zeros(shape, np.uint64)
    sub_mant = np.maximum(mant, np.uint64(1)) if M else mant
    lo, hi = exp_limits(fmt)
    tiny_ef = np.minimum(rng.integers(1, 4, size=shape), hi).astype(np.uint64)
    near_ef = np.clip(bias + rng.integers(-3, 4, size=shape), lo, hi).astype(np.uint64)
    if spec == "fn":
        near_ef = np.minimum(near_ef, np.uint64((1 << E) - 2))
    code = np.where(
        r < p_zero, make_code(fmt, sign_zero, 0, 0),
        np.where(r < p_zero + 0.2, make_code(fmt, sign, 0, sub_mant if M else 0),
                 np.where(r < p_zero + 0.35, make_code(fmt, sign, tiny_ef, mant),
                          make_code(fmt, sign, near_ef, mant))))
    if fmt == "ue4m3":
        code &= np.uint64(0x7F)
    return code_to_word(fmt, code, rng)


def perturb_ulps(fmt, word, rng, k=3):
    """Move finite nonzero C words by a few ulps (integer step on the word)."""
    val = decode(fmt, word)
    bits = container_bits(fmt)
    d = rng.integers(-k, k + 1, size=word.shape).astype(np.int64)
    w = word.astype(np.int64) if bits < 64 else word.view(np.int64)
    mag_mask = (1 << (bits - 1)) - 1
    mag = w & mag_mask
    new_mag = mag + d
    ok = np.isfinite(val) & (val != 0) & (new_mag > 0)
    new = (w & ~mag_mask) | np.where(ok, new_mag, mag)
    new_w = new.view(np.uint64) if bits == 64 else new.astype(np.uint64)
    ok2 = np.isfinite(decode(fmt, new_w))
    return np.where(ok2, new_w, word)
