"""Exact B200 ``tcgen05.mma`` arithmetic for tools/hardware/make_vectors_b200.py, written
independently of the ``mmasim`` package: a tiny decoder per format, exact rational products
(``fractions.Fraction``), the RZ-F32 / RNE-F16 encoders and the reference datapaths (T-FDPA,
NVFP4 groups) as docs/datapaths.md section 6 states them.  Imports nothing from ``mmasim``.
"""

from __future__ import annotations

from fractions import Fraction as Fr

# --------------------------------------------------------------------------
# Formats: (exp_bits, man_bits, bias, field_shift, field_bits, nan_rule, signed)
# nan_rule: "ieee", "max" (all ones is NaN), "allones", "none"
FORMATS = {
    "f32": (8, 23, 127, 0, 32, "ieee", True),
    "tf32": (8, 10, 127, 13, 19, "ieee", True),   # low 13 bits dropped first
    "f16": (5, 10, 15, 0, 16, "ieee", True),
    "e4m3": (4, 3, 7, 0, 8, "max", True),
    "e2m1x": (2, 1, 1, 0, 4, "none", True),        # packed fp4 kinds: bits 3:0
    "ue4m3": (4, 3, 7, 0, 7, "max", False),        # bit 7 ignored
    "ue8m0": (8, 0, 127, 0, 8, "allones", False),  # 2^(x-127), no subnormals
}


class Val:
    """A decoded element: kind in {"zero", "fin", "inf", "nan"}, exact value, raw exponent."""

    def __init__(self, kind, neg=False, value=Fr(0), raw=None):
        self.kind, self.neg, self.value, self.raw = kind, neg, value, raw

    def __repr__(self):
        return f"Val({self.kind}, {'-' if self.neg else '+'}{self.value}, r={self.raw})"


def dec(fmt: str, word: int) -> Val:
    E, M, bias, shift, bits, nan_rule, signed = FORMATS[fmt]
    x = (word >> shift) & ((1 << bits) - 1)
    neg = bool(signed and (x >> (E + M)) & 1)
    e = (x >> M) & ((1 << E) - 1)
    f = x & ((1 << M) - 1)
    if nan_rule == "ieee" and e == (1 << E) - 1:
        return Val("nan") if f else Val("inf", neg)
    if nan_rule == "max" and (x & ((1 << (E + M)) - 1)) == (1 << (E + M)) - 1:
        return Val("nan")
    if nan_rule == "allones" and x == (1 << bits) - 1:
        return Val("nan")
    if fmt == "ue8m0":
        return Val("fin", False, Fr(2) ** (e - bias), e - bias)
    if e == 0:
        raw = 1 - bias
        sig = Fr(f, 1 << M)
    else:
        raw = e - bias
        sig = 1 + Fr(f, 1 << M)
    if sig == 0:
        return Val("zero", neg, Fr(0), raw)
    v = sig * Fr(2) ** raw
    return Val("fin", neg, -v if neg else v, raw)


def mul(*vals: Val) -> Val:
    kinds = [v.kind for v in vals]
    neg = sum(v.neg for v in vals) % 2 == 1
    if "nan" in kinds or ("inf" in kinds and "zero" in kinds):
        return Val("nan")
    if "inf" in kinds:
        return Val("inf", neg)
    if "zero" in kinds:
        return Val("zero", neg)
    value = Fr(1)
    for v in vals:
        value *= v.value
    return Val("fin", neg, value, sum(v.raw for v in vals))


def floor_log2(x: Fr) -> int:
    """floor(log2(x)) for x > 0, exactly."""
    e = x.numerator.bit_length() - x.denominator.bit_length()
    if Fr(2) ** e > x:
        e -= 1
    if Fr(2) ** (e + 1) <= x:
        e += 1
    return e


def trunc_to(x: Fr, quantum: Fr) -> Fr:
    """x truncated toward zero to a multiple of quantum."""
    n = abs(x) // quantum
    return n * quantum if x >= 0 else -n * quantum


# ------------------------------------------------------------- encoders (rho)
NAN32, INF32, NINF32 = 0x7FFFFFFF, 0x7F800000, 0xFF800000
NAN16, INF16, NINF16 = 0x7FFF, 0x7C00, 0xFC00


def enc_rz_f32(x: Fr) -> int:
    """Truncate the magnitude into f32; zero gives +0; past the range gives inf."""
    if x == 0:
        return 0
    sign = 0x80000000 if x < 0 else 0
    mag = abs(x)
    e = floor_log2(mag)
    if e > 127:
        return sign | INF32
    if e < -126:
        n = mag // Fr(2) ** -149
        return sign | n if n else 0
    n = mag // Fr(2) ** (e - 23)          # 2^23 <= n < 2^24
    return sign | ((e + 127) << 23) | (n - (1 << 23))


def enc_rne_f16(x: Fr) -> int:
    """Round to nearest even into f16; zero gives +0; overflow gives inf."""
    if x == 0:
        return 0
    sign = 0x8000 if x < 0 else 0
    mag = abs(x)
    e = max(floor_log2(mag), -14)
    q = Fr(2) ** (e - 10)
    n, rem = divmod(mag, q)
    if rem * 2 > q or (rem * 2 == q and n % 2 == 1):
        n += 1
    if n == 0:
        return 0
    if n == 1 << 11:                       # rounded up into the next binade
        n, e = 1 << 10, e + 1
    if n < 1 << 10:                        # subnormal
        return sign | int(n)
    if e > 15:
        return sign | INF16
    return sign | ((e + 15) << 10) | (int(n) - (1 << 10))


ENC = {"f32": (enc_rz_f32, NAN32, INF32, NINF32), "f16": (enc_rne_f16, NAN16, INF16, NINF16)}


def specials(terms, d="f32"):
    """docs/datapaths.md section 3 step 1; returns the word or None."""
    _, nan, inf, ninf = ENC[d]
    if any(t.kind == "nan" for t in terms):
        return nan
    pos = any(t.kind == "inf" and not t.neg for t in terms)
    neg = any(t.kind == "inf" and t.neg for t in terms)
    if pos and neg:
        return nan
    if pos:
        return inf
    if neg:
        return ninf
    return None


# --------------------------------------------- reference datapaths (exact)
def tfdpa(fa, fb, fc, a, b, c, d="f32", F=25):
    """B200 unscaled T-FDPA: zeros excluded from the window, one window over K."""
    prods = [mul(dec(fa, x), dec(fb, y)) for x, y in zip(a, b)]
    cv = dec(fc, c)
    sp = specials(prods + [cv], d)
    if sp is not None:
        return sp
    enc = ENC[d][0]
    live = [p for p in prods if p.kind == "fin"]
    if not live:
        return enc(cv.value)            # C itself; -0 becomes +0
    terms = live + ([cv] if cv.kind == "fin" else [])
    quantum = Fr(2) ** (max(t.raw for t in terms) - F)
    return enc(sum(trunc_to(t.value, quantum) for t in terms))


def nvfp4(a, b, c, sa, sb, group=4, block=16):
    """B200 kind::mxf4nvf4 with ue4m3 scales (docs/datapaths.md section 6).

    ``group`` is the product grouping of the non-C-dominant rule: 4 is what the
    hardware does; 1 (per-product truncation) and 16 are the alternatives the
    grouping facts rule out.
    """
    prods = [mul(dec("e2m1x", a[k]), dec("e2m1x", b[k]), dec("ue4m3", sa[k // block]), dec("ue4m3", sb[k // block]))
             for k in range(len(a))]
    cv = dec("f32", c)
    sp = specials(prods + [cv])
    if sp is not None:
        return sp
    live = [p for p in prods if p.kind == "fin"]
    if not live:
        return enc_rz_f32(cv.value)
    max_raw = max(p.raw for p in live)
    scale_raw = max(dec("ue4m3", x).raw + dec("ue4m3", y).raw for x, y in zip(sa, sb))
    value = lambda p: p.value if p.kind == "fin" else Fr(0)
    if cv.kind == "fin" and cv.raw >= max_raw:            # C-dominant
        quantum = Fr(2) ** (cv.raw - 35)
        g = 16
    else:
        top = max([max_raw] + ([cv.raw] if cv.kind == "fin" else []))
        quantum = Fr(2) ** max(top - 39, scale_raw - 35)
        g = group
    total = sum(trunc_to(sum(value(p) for p in prods[i:i + g]), quantum) for i in range(0, len(prods), g))
    total += trunc_to(cv.value if cv.kind == "fin" else Fr(0), quantum)
    return enc_rz_f32(total)


# ------------------------------------------------------------ tiny encoders
def f32(x) -> int:
    """Exact f32 word of a dyadic rational (asserts exactness)."""
    x = Fr(x)
    w = enc_rz_f32(x)
    assert dec("f32", w).value == x, x
    return w


def f16(x) -> int:
    x = Fr(x)
    w = enc_rne_f16(x)
    assert dec("f16", w).value == x, x
    return w


E2M1 = {Fr(v): i for i, v in enumerate([0, Fr(1, 2), 1, Fr(3, 2), 2, 3, 4, 6])}


def e2m1(x) -> int:
    x = Fr(x)
    return E2M1[abs(x)] | (8 if x < 0 else 0)


def e4m3(x) -> int:
    x = Fr(x)
    for w in range(0x7F):
        if dec("e4m3", w).value == abs(x):
            return w | (0x80 if x < 0 else 0)
    raise ValueError(x)


def ue4m3(x) -> int:
    for w in range(0x7F):
        if dec("ue4m3", w).value == Fr(x):
            return w
    raise ValueError(x)


ONE32 = f32(1)
P2 = lambda e: Fr(2) ** e
