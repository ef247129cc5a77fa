"""Write the B200 ``tcgen05.mma`` hardware facts (T1, docs/datapaths.md section 6) as vector files.

    python tools/hardware/make_vectors_b200.py [--out vectors/hardware/blackwell] [--check]

Every expected D word here comes from code in this file, written independently
of the ``mmasim`` package: exact rational arithmetic (``fractions.Fraction``),
a tiny decoder per format, and tiny RZ-F32 / RNE-F16 encoders, following the
rules as docs/datapaths.md states them; or it is the literal word a fact states
(canonical NaN ``0x7FFFFFFF``, ``+0``).  The only thing imported from mmasim is
``mmasim.vectors.files.save`` to write the file format.  Never compute an expected
word by calling the simulator: that would test nothing.

Provenance per file:

* ``hardware``: T1 states the measured word or behaviour (its TF32 probe
  ladder; canonical NaN; +0 rules; scale NaN).
* ``hand-derived``: the words are derived here from a rule T1 states
  (integer wrap/saturate, the NVFP4 grouping rules, sparse = masked dense).

``--check`` regenerates in memory and compares with the committed files
(arrays only; the date is not compared).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
from fractions import Fraction as Fr

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from mmasim.vectors.files import save  # noqa: E402  (file format only, never the arithmetic)

DATE = "2026-05-01"
ARCH = "B200"
T1 = ("T1 (docs/datapaths.md, sources: the B200 tcgen05 reverse-engineering write-up "
      "\"Reverse-Engineering the B200's Tensor Core, One Bit at a Time\")")
GENERATOR = "tools/hardware/make_vectors_b200.py"

from b200_exact import (  # noqa: E402  (tools/hardware: exact arithmetic, no mmasim)
    INF32, NAN32, NINF32, ONE32, P2, e2m1, e4m3, f16, f32, nvfp4, tfdpa, trunc_to, ue4m3,
)


# ------------------------------------------------------------------ builders
class Cases:
    def __init__(self):
        self.rows = []

    def add(self, label, a, b, c, d, **extra):
        self.rows.append((label, list(a), list(b), c, d, extra))

    def arrays(self):
        out = {
            "labels": [r[0] for r in self.rows],
            "a": np.array([r[1] for r in self.rows], dtype=np.uint64),
            "b": np.array([r[2] for r in self.rows], dtype=np.uint64),
            "c": np.array([r[3] for r in self.rows], dtype=np.uint64),
            "d": np.array([r[4] for r in self.rows], dtype=np.uint64),
        }
        for key in ("scale_a", "scale_b", "sparse_metadata"):
            if self.rows and key in self.rows[0][5]:
                out[key] = np.array([r[5][key] for r in self.rows], dtype=np.uint64)
        return out


def pad(xs, k, fill=0):
    return list(xs) + [fill] * (k - len(xs))


def tf32_case_adder(cs, K):
    """``dot(label, a, b, c, expect)``: add one kind::tf32 case to ``cs``; its D
    word comes from the independent T-FDPA model and must equal ``expect``."""

    def dot(label, a, b, c, expect=None):
        a, b = pad(a, K), pad(b, K)
        d = tfdpa("tf32", "tf32", "f32", a, b, c)
        if expect is not None:
            assert d == expect, (label, hex(d), hex(expect))
        cs.add(label, a, b, c, d)

    return dot


def tf32_ladder_hardware():
    """Every probe of the T1 TF32 ladder whose result T1 states as measured."""
    K = 8
    cs = Cases()
    one = ONE32

    dot = tf32_case_adder(cs, K)

    # Input truncation: bits 0-12 of A and B change nothing.
    dot("a-low13-ignored: (1 | 0x1FFF) * 1 = 1", [one | 0x1FFF], [one], 0, one)
    dot("b-low13-ignored: 1 * (1 | 0x1FFF) = 1", [one], [one | 0x1FFF], 0, one)
    dot("ab-low13-ignored: (1.5 | 0x1555) * (1.25 | 0x0AAA) = 1.875",
        [f32(Fr(3, 2)) | 0x1555], [f32(Fr(5, 4)) | 0x0AAA], 0, f32(Fr(15, 8)))
    dot("bit13-visible: (1 + 2^-10) * 1", [one | 0x2000], [one], 0, f32(1 + P2(-10)))
    dot("low13-ignored-everywhere: 8 lanes of (1 | 0x1FFF)", [one | 0x1FFF] * K, [one | 0x1FFF] * K, 0, f32(8))
    # Visible precision: 1 + 2^-23 shows, 1 + 2^-24 does not.
    dot("visible: 1*1 + 2^-23*1 = 1 + 2^-23", [one, f32(P2(-23))], [one, one], 0, f32(1 + P2(-23)))
    dot("visible: C=1 + 2^-23", [f32(P2(-23))], [one], one, f32(1 + P2(-23)))
    dot("invisible: 1*1 + 2^-24*1 = 1", [one, f32(P2(-24))], [one, one], 0, one)
    dot("invisible: C=1 + 2^-24", [f32(P2(-24))], [one], one, one)
    # Internal precision: -1 + 1 + 2^-25 survives exactly.
    dot("internal: -1 + 1 + 2^-25 = 2^-25", [f32(-1), one, f32(P2(-25))], [one, one, one], 0, f32(P2(-25)))
    dot("internal: C=-1 + 1 + 2^-25 = 2^-25", [one, f32(P2(-25))], [one, one], f32(-1), f32(P2(-25)))
    # Fractional-ULP probes around C = 1 (ulp = 2^-23): all truncated.
    for name, frac in (("0.25", P2(-25)), ("0.5", P2(-24)), ("0.75", 3 * P2(-25))):
        dot(f"fractional-ulp: C=1 + {name} ulp truncates to 1", [f32(frac)], [one], one, one)
    # Special values.
    dot("nan-canonical: qNaN in A", [0x7FC00000], [one], 0, NAN32)
    dot("nan-canonical: negative NaN with payload in A", [0xFFC12000], [one], 0, NAN32)
    dot("nan-canonical: NaN in C", [one], [one], 0x7FC00001, NAN32)
    dot("nan-canonical: f32 NaN in C with payload only in low bits", [one], [one], 0x7F800001, NAN32)
    dot("0*inf = NaN", [0], [INF32], 0, NAN32)
    dot("inf*0 = NaN (B zero)", [INF32], [0x80000000], one, NAN32)
    dot("+inf + -inf = NaN (products)", [INF32, NINF32], [one, one], 0, NAN32)
    dot("+inf + -inf = NaN (product and C)", [INF32], [one], NINF32, NAN32)
    # Underflow and cancellation give +0.
    dot("underflow: 2^-100 * 2^-100 = +0", [f32(P2(-100))], [f32(P2(-100))], 0, 0)
    dot("underflow: -2^-100 * 2^-100 = +0 (not -0)", [f32(-P2(-100))], [f32(P2(-100))], 0, 0)
    dot("cancellation: 1 - 1 = +0", [one, f32(-1)], [one, one], 0, 0)
    dot("cancellation: -1 + 1 with C=-0 = +0", [f32(-1), one], [one, one], 0x80000000, 0)
    dot("cancellation: C=-3 + 1.5*2 = +0", [f32(Fr(3, 2))], [f32(2)], f32(-3), 0)
    # Truncate first, then classify: a NaN whose payload is only in bits 0-12 reads as inf.
    dot("low-payload NaN reads as +inf: 0x7F800001 * 1", [0x7F800001], [one], 0, INF32)
    dot("low-payload NaN reads as -inf: 0xFF801FFF * 1", [0xFF801FFF], [one], 0, NINF32)
    dot("low-payload NaN in B reads as inf: 1 * 0x7F801000", [one], [0x7F801000], f32(5), INF32)
    dot("low-payload NaN reads as inf, times 0 = NaN", [0x7F800001], [0], 0, NAN32)
    dot("low-payload NaN reads as inf, + -inf = NaN", [0x7F800001, NINF32], [one, one], 0, NAN32)
    dot("NaN payload in bit 13 stays NaN", [0x7F802000], [one], 0, NAN32)
    return cs


def tf32_window_derived():
    """Consequences of the shared truncating window, derived from the T1 rule."""
    K = 8
    cs = Cases()
    one = ONE32

    dot = tf32_case_adder(cs, K)

    dot("window: C=1 + 0.5ulp + 0.5ulp = 1 + 1ulp (no per-term rounding)",
        [f32(P2(-24)), f32(P2(-24))], [one, one], one, f32(1 + P2(-23)))
    dot("window: C=1 + 4 x 0.25ulp = 1 + 1ulp", [f32(P2(-25))] * 4, [one] * 4, one, f32(1 + P2(-23)))
    dot("window: -1 + 1 + 2^-26 = +0 (below the 2^-25 quantum)",
        [f32(-1), one, f32(P2(-26))], [one, one, one], 0, 0)
    dot("window: -1 + 1 + 3*2^-26 = 2^-25 (truncated to the quantum)",
        [f32(-1), one, f32(3 * P2(-26))], [one, one, one], 0, f32(P2(-25)))
    dot("window: C=-1 + 1 + (-2^-26) truncates toward zero = +0",
        [one, f32(-P2(-26))], [one, one], f32(-1), 0)
    dot("window: C=2^-30 alone (no window loss without products)", [0], [0], f32(P2(-30)), f32(P2(-30)))
    dot("no product: C = 1 + 2^-23 full f32 (C is not truncated to tf32)", [0], [one], one | 1, one | 1)
    dot("no product: C = -0 gives +0", [0] * K, [one] * K, 0x80000000, 0)
    # With a zero product counting at e_zero = -133 (MMA-Sim's tcgen05), the
    # window would be 2^-158 and -2^-160 would vanish, giving 2^-140 (0x200).
    dot("zeros excluded: a zero product does not raise the window: 2^-140 - 2^-160 -> RZ 2^-140 - 2^-149",
        [0, f32(P2(-70)), f32(-P2(-80))], [one, f32(P2(-70)), f32(P2(-80))], 0, 0x1FF)
    dot("window: 1 - 2^-30 = 1 (the small term truncates toward zero first: no borrow)",
        [one, f32(-P2(-30))], [one, one], 0, one)
    dot("rz: 1 - 2^-25 (kept by the window) truncates to 1 - 2^-24",
        [one, f32(-P2(-25))], [one, one], 0, f32(1 - P2(-24)))
    dot("inf: +inf * 1 + 1 = +inf", [INF32], [one], one, INF32)
    dot("inf: -inf C with finite products = -inf", [one], [one], NINF32, NINF32)
    dot("overflow: 2^127 * 2 + 2^127 * 2 = +inf (RZ past range)",
        [f32(P2(127)), f32(P2(127))], [f32(2), f32(2)], 0, INF32)
    dot("subnormal result: 2^-75 * 2^-74 = 2^-149", [f32(P2(-75))], [f32(P2(-74))], 0, 1)
    return cs


def i8_cases(sa: bool, sb: bool, sat: bool):
    """kind::i8: exact C + sum(a*b), C read as s32, wrapped or saturated (T1)."""
    K = 32
    cs = Cases()

    def w8(v):
        return v & 0xFF

    def dot(label, a, b, c):
        a, b = pad(a, K), pad(b, K)
        val = lambda w, s: (w - 256 if s and w >= 128 else w)
        cv = c - (1 << 32) if c >= 1 << 31 else c
        total = cv + sum(val(x, sa) * val(y, sb) for x, y in zip(a, b))
        if sat:
            total = max(-(1 << 31), min((1 << 31) - 1, total))
        cs.add(label, a, b, c, total & 0xFFFFFFFF)

    dot("C=INT_MAX + 1*1", [1], [1], 0x7FFFFFFF)
    dot("C=INT_MIN + 0xFF*1", [0xFF], [1], 0x80000000)
    dot("C=INT_MIN + 1*0xFF", [1], [0xFF], 0x80000000)
    dot("C=INT_MIN - 1 via 0xFF*0xFF", [0xFF], [0xFF], 0x80000000)
    dot("all 0xFF x 0xFF + C=0x7FF00000", [0xFF] * K, [0xFF] * K, 0x7FF00000)
    dot("all 0x80 x 0x80 + C=0x7FFF0000", [0x80] * K, [0x80] * K, 0x7FFF0000)
    dot("all 0x80 x 0x7F + C=0x80001000", [0x80] * K, [0x7F] * K, 0x80001000)
    dot("all 0x7F x 0x80 + C=0x80000000", [0x7F] * K, [0x80] * K, 0x80000000)
    dot("small exact: 3*5 + 0x81*2 + C=-7", [3, 0x81], [5, 2], (-7) & 0xFFFFFFFF)
    dot("C only: 0xDEADBEEF", [], [], 0xDEADBEEF)
    return cs


def mxf8_special():
    """kind::mxf8f6f4 e4m3 x e4m3, ue8m0 scale, block 32 (docs/datapaths.md section 6)."""
    K = 32
    cs = Cases()
    one8, s1 = e4m3(1), 127
    cases = [
        ("scale NaN in A's block gives canonical NaN", [one8] * K, [one8] * K, 0, 0xFF, s1, NAN32),
        ("scale NaN in B's block gives canonical NaN", [one8] * K, [one8] * K, f32(2), s1, 0xFF, NAN32),
        ("scale NaN with C=-inf gives canonical NaN", [one8], [one8], NINF32, 0xFF, s1, NAN32),
        ("all-zero products, C=-0 gives +0", [0] * K, [one8] * K, 0x80000000, s1, s1, 0),
        ("all-zero operands, C=-0 gives +0", [0] * K, [0] * K, 0x80000000, s1, s1, 0),
        ("negative-zero operands, C=-0 gives +0", [0x80] * K, [one8] * K, 0x80000000, 130, 120, 0),
        ("all-zero products, C=+0 gives +0", [0] * K, [0] * K, 0, s1, s1, 0),
    ]
    for label, a, b, c, xa, xb, expect in cases:
        cs.add(label, pad(a, K), pad(b, K), c, expect, scale_a=[xa], scale_b=[xb])
    return cs


def mxf8_c_passthrough():
    """No nonzero product: the result is C itself (docs/datapaths.md section 6)."""
    K = 32
    cs = Cases()
    for label, c in (("all-zero products, C=1.5 passes through", f32(Fr(3, 2))),
                     ("all-zero products, C=-2.5 passes through", f32(Fr(-5, 2))),
                     ("all-zero products, C=2^-140 (f32 subnormal) passes through", f32(P2(-140)))):
        cs.add(label, [0] * K, [e4m3(6)] * K, c, c, scale_a=[200], scale_b=[3])
    return cs


def nvfp4_special():
    """kind::mxf4nvf4 ue4m3 (NVFP4): scale NaN and all-zero with C=-0."""
    K = 64
    cs = Cases()
    one, s1 = e2m1(1), ue4m3(1)
    cases = [
        ("ue4m3 scale NaN (0x7F) in a used block gives canonical NaN",
         [one] * K, [one] * K, 0, [0x7F, s1, s1, s1], [s1] * 4, NAN32),
        ("ue4m3 scale NaN (0xFF: bit 7 ignored) in a used block gives canonical NaN",
         [one] * K, [one] * K, 0, [s1] * 4, [s1, s1, s1, 0xFF], NAN32),
        ("all-zero products, C=-0 gives +0", [0] * K, [one] * K, 0x80000000, [s1] * 4, [s1] * 4, 0),
        ("negative-zero fp4 codes, C=-0 gives +0", [8] * K, [one] * K, 0x80000000, [s1] * 4, [s1] * 4, 0),
    ]
    for label, a, b, c, xa, xb, expect in cases:
        d = nvfp4(a, b, c, xa, xb)
        assert d == expect, (label, hex(d))
        cs.add(label, a, b, c, d, scale_a=xa, scale_b=xb)
    return cs


def nvfp4_grouping():
    """NVFP4 grouping facts of docs/datapaths.md section 6, hand-derived.

    Each case is built so that the hardware's rule (K=4 groups, or K=16 groups
    when C dominates) gives a different word from per-product truncation and
    from the other grouping; the generator asserts that.
    """
    K = 64
    cs = Cases()
    big_s, tiny_s, one_s = ue4m3(448), ue4m3(P2(-9)), ue4m3(1)

    def case(label, a, b, c, xa, xb, differs_from):
        a, b = pad(a, K), pad(b, K)
        d = nvfp4(a, b, c, xa, xb, group=4)
        for g in differs_from:
            alt = nvfp4(a, b, c, xa, xb, group=g)
            assert alt != d, (label, g, hex(d))
        cs.add(label, a, b, c, d, scale_a=xa, scale_b=xb)
        return d

    # Block 0 (scales 448 x 448, scale raw 16): +6*6 and -6*6 cancel exactly but
    # set the window: max product raw 20, quantum q = 2^max(20-39, 16-35) = 2^-19.
    # Block 1 (scales 2^-9 x 2^-9): 0.5*0.5*2^-18 = 0.5 q, 1.5*0.5*2^-18 = 1.5 q.
    big = [e2m1(6), e2m1(-6)] + [0] * 14
    xa = [big_s, tiny_s, one_s, one_s]
    xb = [big_s, tiny_s, one_s, one_s]
    half = e2m1(Fr(1, 2))
    # four 0.5q products in ONE aligned group of 4: K=4 gives 2q, per-product 0
    a = big + [half] * 4 + [0] * 12
    b = [e2m1(6)] * 16 + [half] * 4 + [0] * 12
    d = case("k4-group-carry: four 0.5-quantum products in one K=4 group sum to 2 quanta (per-product: 0)",
             a, b, 0, xa, xb, differs_from=(1,))
    assert d == f32(2 * P2(-19)), hex(d)
    # one 0.5q product in each of four K=4 groups: K=4 gives 0, K=16 gives 2q
    a = big + [half, 0, 0, 0] * 4
    b = [e2m1(6)] * 16 + [half, 0, 0, 0] * 4
    d = case("k4-not-k16: one 0.5-quantum product per K=4 group truncates to 0 (K=16 grouping: 2 quanta)",
             a, b, 0, xa, xb, differs_from=(16,))
    assert d == 0, hex(d)
    # three 0.5q products in each of two groups: K=4 gives 1+1 = 2q; K=16 3q; per-product 0
    a = big + [half, half, half, 0] * 2 + [0] * 8
    b = [e2m1(6)] * 16 + [half, half, half, 0] * 2 + [0] * 8
    d = case("k4-triples: 2 x (3 x 0.5) quanta = 2 quanta (K=16: 3, per-product: 0)",
             a, b, 0, xa, xb, differs_from=(1, 16))
    assert d == f32(2 * P2(-19)), hex(d)
    # 1.5q + 0.5q in one group = 2q exactly; per-product gives 1q
    a = big + [e2m1(Fr(3, 2)), half, 0, 0] + [0] * 12
    b = [e2m1(6)] * 16 + [half, half, 0, 0] + [0] * 12
    d = case("k4-carry-into-quantum: 1.5q + 0.5q in one K=4 group = 2 quanta (per-product: 1)",
             a, b, 0, xa, xb, differs_from=(1,))
    assert d == f32(2 * P2(-19)), hex(d)
    # negative small products: truncation toward zero per K=4 group
    a = big + [e2m1(Fr(-1, 2))] * 3 + [0] + [0] * 12
    b = [e2m1(6)] * 16 + [half] * 3 + [0] + [0] * 12
    d = case("k4-negative: three -0.5-quantum products in one group = -1 quantum (toward zero; per-product: 0)",
             a, b, 0, xa, xb, differs_from=(1,))
    assert d == f32(-P2(-19)), hex(d)
    q34 = (e2m1(Fr(3, 2)), half)
    # C-dominant: C = -(the big product) so r_c (17) >= max product raw (16);
    # quantum = 2^(17-35) = 2^-18; K=16 group sums: four 0.75q products
    # (0.75*2^-18 each, one per K=4 group) sum to 3 * 2^-18.  The non-C-dominant
    # rule would use quantum 2^-19 and K=4 groups: 4 * 2^-19 = 2^-17.
    bigp = Fr(448) * 448                           # 1 * 1 * 448 * 448
    a = [e2m1(1)] + [0] * 15 + [q34[0], 0, 0, 0] * 4 + [0] * 32
    b = [e2m1(1)] + [0] * 15 + [q34[1], 0, 0, 0] * 4 + [0] * 32
    xa2 = [big_s, ue4m3(P2(-9)), one_s, one_s]
    xb2 = [big_s, ue4m3(P2(-9) * 1), one_s, one_s]
    c = f32(-bigp)
    d = case("c-dominant: C = -(448*448), r_c >= max product raw: quantum r_c-35 with K=16 groups (3*2^-18)",
             a, b, c, xa2, xb2, differs_from=())
    assert d == f32(3 * P2(-18)), hex(d)
    # the same operands without the C-dominant rule would give 2^-17:
    top = 17
    alt_quantum = P2(max(top - 39, 16 - 35))
    alt = trunc_to(-bigp, alt_quantum) + bigp + 4 * trunc_to(Fr(3, 4) * P2(-18), alt_quantum)
    assert f32(alt) != d
    # unit scales: fixed 2^-35 floor with small products (window = max(r)-39 below it)
    a = [e2m1(Fr(1, 2))] * 4 + [0] * 60
    b = [e2m1(Fr(1, 2))] * 4 + [0] * 60
    d = case("unit scales: 4 x 0.25 = 1 exactly", a, b, 0, [one_s] * 4, [one_s] * 4, differs_from=())
    assert d == ONE32
    return cs


def sparse_tf32():
    """tcgen05.mma.sp.kind::tf32: unselected lanes are removed before
    classification; the result equals the dense datapath on the masked vector."""
    K = 16                                # logical K; 8 selected
    cs = Cases()
    one = ONE32

    def case(label, a, b, c, nibbles, expect=None):
        md = sum(n << (4 * i) for i, n in enumerate(nibbles))
        picks = [2 * i + (0 if n == 0x4 else 1) for i, n in enumerate(nibbles)]
        d = tfdpa("tf32", "tf32", "f32", [a[p] for p in picks], [b[p] for p in picks], c)
        if expect is not None:
            assert d == expect, (label, hex(d))
        cs.add(label, a, b, c, d, sparse_metadata=[md])

    a = [one, 0x7FC00000] * 8                  # NaN in every odd (unselected) lane
    b = [f32(Fr(3, 2)), INF32] * 8
    case("NaN/inf only in unselected lanes: 8 x 1.5", a, b, 0, [0x4] * 8, f32(12))
    a = [0x7FC00000, f32(Fr(1, 4))] * 8
    b = [0, f32(-2)] * 8
    case("NaN * 0 only in unselected lanes: C=5 + 8 x -0.5", a, b, f32(5), [0xE] * 8, f32(1))
    a = [one, f32(-1), f32(P2(-25)), 0x7F800000, one, one, one, one,
         one, one, one, one, one, one, one, one]
    b = [one] * 16
    case("cancellation with an inf in an unselected lane: 1 - 1 + 2^-25 = 2^-25",
         a, b, 0, [0x4, 0xE, 0x4, 0xE, 0x4, 0xE, 0x4, 0xE], None)
    a = [0x7FC00000, one] * 8
    b = [one] * 16
    case("control: a NaN in a selected lane gives canonical NaN", a, b, 0, [0x4] + [0xE] * 7, NAN32)
    return cs


def sparse_f16():
    """tcgen05.mma.sp.kind::f16 f16 x f16 -> f32: chunks of 4, selector bits
    1:0 and 3:2 pick two elements."""
    K = 32
    cs = Cases()
    h = lambda x: f16(x)
    NAN_H, INF_H = 0x7E00, 0x7C00

    def case(label, a, b, c, nibbles, expect=None):
        md = sum(n << (4 * i) for i, n in enumerate(nibbles))
        picks = [4 * i + j for i, n in enumerate(nibbles) for j in (n & 3, n >> 2)]
        d = tfdpa("f16", "f16", "f32", [a[p] for p in picks], [b[p] for p in picks], c)
        if expect is not None:
            assert d == expect, (label, hex(d))
        cs.add(label, a, b, c, d, sparse_metadata=[md])

    sel = [0x4, 0x8, 0xC, 0x9, 0xD, 0x6, 0xE, 0x4]
    a, b = [], []
    for n in sel:
        picked = {n & 3, n >> 2}
        for j in range(4):
            a.append(h(Fr(5, 4)) if j in picked else NAN_H)
            b.append(h(Fr(-3, 2)) if j in picked else INF_H)
    case("NaN/inf only in unselected lanes, every legal selector: 16 x (1.25 * -1.5)", a, b, f32(1),
         sel, f32(1 - 16 * Fr(15, 8)))
    a, b = [], []
    for i, n in enumerate(sel):
        picked = sorted({n & 3, n >> 2})
        for j in range(4):
            if j in picked:
                a.append(h(P2(-12 - i)) if j == picked[0] else h(-1 if i % 2 else 1))
            else:
                a.append(NAN_H)
            b.append(h(1) if j in picked else 0)
    case("masked dense window: small and cancelling terms, NaN*0 unselected", a, b, 0, sel)
    return cs


# ------------------------------------------------------------------ files
def provenance(source, citation, seed=None):
    p = {
        "source": source,
        "device": "NVIDIA B200 (sm_100a)",
        "tool": GENERATOR,
        "tool_version": "1",
        "date": DATE,
        "seed": seed,
        "generator": GENERATOR,
        "citation": citation,
    }
    if source == "hand-derived":
        p["device"] = "none (derived from a rule measured on NVIDIA B200, sm_100a)"
    return p


def jobs():
    out = []
    out.append(("tf32-probe-ladder.hardware.npz", "tcgen05.mma.kind::tf32", {}, tf32_ladder_hardware(),
                provenance("hardware", f"{T1}, 'The probe ladder' and 'Special values, from observation'; "
                           "docs/datapaths.md section 6 probe facts. Each word is the measured behaviour the "
                           "write-up states (truncation of bits 0-12, visibility of 2^-23, survival of 2^-25, "
                           "truncation of fractional ulps, canonical NaN 0x7FFFFFFF, +0)."),
                "TF32 probe ladder of the B200 write-up"))
    out.append(("tf32-window.hand-derived.npz", "tcgen05.mma.kind::tf32", {}, tf32_window_derived(),
                provenance("hand-derived", f"{T1}, 'The mechanism': quantum = max(nonzero raws) - 25, "
                           "terms truncated toward zero, RZ to f32; docs/datapaths.md sections 3 and 6"),
                "consequences of the shared truncating window"))
    for sa in (True, False):
        for sb in (True, False):
            for sat in (False, True):
                ta, tb = ("s8" if sa else "u8"), ("s8" if sb else "u8")
                instr = f"tcgen05.mma.kind::i8.s32.{ta}.{tb}" + (".satfinite" if sat else "")
                name = f"i8.{ta}.{tb}.{'saturate' if sat else 'wrap'}.hand-derived.npz"
                out.append((name, instr, {}, i8_cases(sa, sb, sat),
                            provenance("hand-derived", f"{T1}, 'Integer: a genuinely different datapath': "
                                       "exact C + sum(a*b) in s32, wrap or saturate; docs/datapaths.md section 6"),
                            "integer wrap versus saturate"))
    mx = "tcgen05.mma.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.f32.e4m3.e4m3.ue8m0"
    out.append(("mxf8f6f4.e4m3.e4m3.specials.hardware.npz", mx, {}, mxf8_special(),
                provenance("hardware", "docs/datapaths.md section 6 (T1), block-scaled: 'A NaN scale in a used "
                           "block gives canonical NaN. If no product is nonzero the result is C (with -0 "
                           "turned into +0).'"),
                "scale NaN and all-zero block-scaled with C=-0"))
    out.append(("mxf8f6f4.e4m3.e4m3.c-passthrough.hand-derived.npz", mx, {}, mxf8_c_passthrough(),
                provenance("hand-derived", "docs/datapaths.md section 6 (T1): 'If no product is nonzero the "
                           "result is C'"),
                "no nonzero product: D = C"))
    nv = "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3"
    out.append(("nvfp4.specials.hardware.npz", nv, {}, nvfp4_special(),
                provenance("hardware", "docs/datapaths.md section 6 (T1), block-scaled: scale NaN gives "
                           "canonical NaN; all-zero products with C=-0 give +0"),
                "NVFP4 scale NaN and C=-0"))
    out.append(("nvfp4.grouping.hand-derived.npz", nv, {}, nvfp4_grouping(),
                provenance("hand-derived", f"{T1}, 'Block-scaled' (K=4 / K=16 group reduction, the "
                           "nvfp4-k4-product-carry vector, the C-dominant merge); docs/datapaths.md section 6 "
                           "kind::mxf4nvf4 with ue4m3 scales. Each case differs between K=4 grouping and "
                           "per-product truncation or K=16 grouping."),
                "NVFP4 K=4 grouping and C-dominant facts"))
    out.append(("sparse.tf32.masked-dense.hand-derived.npz", "tcgen05.mma.sp.kind::tf32", {}, sparse_tf32(),
                provenance("hand-derived", f"{T1}, 'Sparse': disabled positions are removed before "
                           "special-value classification; sparse equals the masked dense dot; docs/datapaths.md "
                           "section 6 selectors"),
                "sparse equals masked dense, NaN in unselected lanes"))
    out.append(("sparse.f16.masked-dense.hand-derived.npz", "tcgen05.mma.sp.kind::f16.f32.f16.f16", {},
                sparse_f16(),
                provenance("hand-derived", f"{T1}, 'Sparse'; docs/datapaths.md section 6 selectors "
                           "0x4, 0x8, 0xC, 0x9, 0xD, 0x6, 0xE"),
                "sparse equals masked dense, every legal selector"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "vectors" / "hardware" / "blackwell"))
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    bad = 0
    for name, instr, quals, cases, prov, notes in jobs():
        arrs = cases.arrays()
        if args.check:
            with np.load(out / name, allow_pickle=False) as z:
                for key, value in arrs.items():
                    if key == "labels":
                        same = list(z[key]) == list(value)
                    else:
                        same = np.array_equal(z[key], value)
                    if not same:
                        print(f"{name}: array {key} differs", file=sys.stderr)
                        bad += 1
            continue
        save(out / name, arch=ARCH, instruction=instr, qualifiers=quals, provenance=prov, notes=notes,
             **arrs)
        print(f"wrote {out / name} ({len(arrs['d'])} cases)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
