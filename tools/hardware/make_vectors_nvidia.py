"""Write the NVIDIA mma.sync hardware facts of T2 (docs/datapaths.md sections 3, 5, 7) as vector files.

    python tools/hardware/make_vectors_nvidia.py [--out vectors/hardware] [--check]

T2 (docs/datapaths.md, sources) measured an RTX 2060 (sm_75), an RTX 5070 Ti (sm_120a) and
an A100 (sm_80) against MMA-Sim.  Every expected D word here is either the
literal word T2 reports (the Turing minimal case) or is derived by code in this
file from the rule T2 measured: exact rational arithmetic (``fractions``), the
tiny per-format decoder and RZ-F32 / RNE-F16 encoders of
``b200_exact.py`` (written independently of the ``mmasim`` package), an
RNE-F32 encoder, a P-style T-FDPA (zero terms count with e_zero, K chained in
steps of L) and an IEEE f32 multiply-then-add chain.  The only thing imported
from mmasim is ``mmasim.vectors.files.save``, for the file format.  Never compute an
expected word by calling the simulator.

``--check`` regenerates in memory and compares with the committed files.
"""

from __future__ import annotations

import argparse
import pathlib
import random
import sys
from fractions import Fraction as Fr

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import b200_exact as ex  # noqa: E402  (independent decoders, encoders, reference datapaths)
import make_vectors_b200 as ref  # noqa: E402  (the case builder and the file writer)

ROOT = ref.ROOT
DATE = "2026-05-02"
GENERATOR = "tools/hardware/make_vectors_nvidia.py"
T2 = "T2 (docs/datapaths.md, sources: the RTX 2060 / RTX 5070 Ti / A100 hardware report filed against MMA-Sim)"

# Formats this file needs beyond the B200 ones: (exp, man, bias, shift, bits, nan rule, signed)
ex.FORMATS.update({
    "e5m2": (5, 2, 15, 0, 8, "ieee", True),
    "e3m2": (3, 2, 3, 0, 6, "none", True),        # bits 5:0, bits 7:6 ignored
    "e2m3": (2, 3, 1, 0, 6, "none", True),        # bits 5:0, bits 7:6 ignored
    "e2m1.sm120": (2, 3, 1, 0, 6, "none", True),  # T2: the e2m1 byte read as e2m3 from bits 5:0
})
dec, mul, Cases, P2 = ex.dec, ex.mul, ref.Cases, ex.P2


# ------------------------------------------------------------------ encoders
def enc_rne(x: Fr, exp_bits: int, man_bits: int, neg_zero: bool = False) -> int:
    """Round to nearest even into an IEEE format; overflow gives inf."""
    bias = (1 << (exp_bits - 1)) - 1
    sign_bit = 1 << (exp_bits + man_bits)
    if x == 0:
        return sign_bit if neg_zero else 0
    sign = sign_bit if x < 0 else 0
    mag = abs(x)
    e = max(ex.floor_log2(mag), 1 - bias)
    q = P2(e - man_bits)
    n, rem = divmod(mag, q)
    if rem * 2 > q or (rem * 2 == q and n % 2 == 1):
        n += 1
    if n == 1 << (man_bits + 1):
        n, e = 1 << man_bits, e + 1
    if e > bias:
        return sign | (((1 << exp_bits) - 1) << man_bits)
    if n < 1 << man_bits:
        return sign | int(n)
    return sign | ((e + bias) << man_bits) | (int(n) - (1 << man_bits))


# --------------------------------------------------- reference datapaths
def p_tfdpa(fa, fb, fc, a, b, c, *, d, F, e_zero, L):
    """MMA-Sim-style T-FDPA (docs/datapaths.md section 3): zero products and a zero C
    count with exponent e_zero; K cut into steps of L, C of each step = D of
    the previous one (already rounded)."""
    for s in range(0, len(a), L):
        prods = [mul(dec(fa, x), dec(fb, y)) for x, y in zip(a[s:s + L], b[s:s + L])]
        cv = dec(fc, c)
        sp = ex.specials(prods + [cv], d)
        if sp is not None:
            c = sp
        else:
            terms = prods + [cv]
            E = max(t.raw if t.kind == "fin" else e_zero for t in terms)
            quantum = P2(E - F)
            total = sum(ex.trunc_to(t.value, quantum) for t in terms if t.kind == "fin")
            c = ex.ENC[d][0](total)
        fc = d
    return c


def ieee_add(x, y):
    """x + y for (value, negative-zero flag) pairs, rounded RNE into f32."""
    s = x[0] + y[0]
    if s == 0:
        both_neg = x[0] == 0 and x[1] and y[0] == 0 and y[1]
        return (Fr(0), both_neg)
    w = enc_rne(s, 8, 23)
    return (dec("f32", w).value, False)


def fmul_fadd_chain(a, b, c, fc):
    """((((p0 + p1) + p2) + p3) + c) in f32 RNE, p_k = a_k*b_k (T2, A100).
    Finite inputs only; returns the f32 word."""
    prods = []
    for x, y in zip(a, b):
        p = mul(dec("f16", x), dec("f16", y))
        assert p.kind in ("fin", "zero")
        prods.append((p.value, p.kind == "zero" and p.neg))
    acc = prods[0]
    for p in prods[1:]:
        acc = ieee_add(acc, p)
    cv = dec(fc, c)
    assert cv.kind in ("fin", "zero")
    acc = ieee_add(acc, (cv.value, cv.kind == "zero" and cv.neg))
    return enc_rne(acc[0], 8, 23, neg_zero=acc[1])


# ------------------------------------------------------------- case makers
def f16w(rng, lo=-3, hi=3):
    """A random finite f16 word with exponent in [lo, hi] (rounded into the subnormals below -14)."""
    e = rng.randint(lo, hi)
    if e >= -14:
        return (rng.getrandbits(1) << 15) | ((15 + e) << 10) | rng.getrandbits(10)
    value = (1 + Fr(rng.getrandbits(10), 1024)) * P2(e)
    return ex.enc_rne_f16(-value if rng.getrandbits(1) else value)


def f32w(rng, lo=-3, hi=3):
    """A random finite f32 word within a few binades of 1."""
    return (rng.getrandbits(1) << 31) | ((127 + rng.randint(lo, hi)) << 23) | rng.getrandbits(23)


def turing_minimal():
    """The T2 minimal case, word for word as measured on the RTX 2060."""
    cs = Cases()
    a = [ex.f16(-(2 ** 13)), ex.f16(Fr(-1, 2)), ex.f16(Fr(-1, 4)), ex.f16(Fr(-1, 8))]
    b = [ex.f16(2 ** 10), ex.f16(1), ex.f16(1), ex.f16(1)]
    c = ex.f32(2 ** 23)
    # reasoning check: F = 23 leaves quantum 2^0, F = 24 keeps -0.5 (MMA-Sim's old answer)
    assert p_tfdpa("f16", "f16", "f32", a, b, c, d="f32", F=23, e_zero=-131, L=4) == 0x00000000
    assert p_tfdpa("f16", "f16", "f32", a, b, c, d="f32", F=24, e_zero=-132, L=4) == 0xBF000000
    cs.add("T2 minimal case: RTX 2060 gives 0x0 (F=24 would give 0xbf000000)", a, b, c, 0x00000000)
    return cs


def turing_random(d, fc, seed):
    """Random near-1 cases through a T-FDPA with F = 23, L = 4 (the T2 rule)."""
    rng = random.Random(seed)
    e_zero = -19 if d == "f16" else -131
    cs = Cases()
    for i in range(64):
        a = [f16w(rng) for _ in range(4)]
        b = [f16w(rng) for _ in range(4)]
        c = f16w(rng) if fc == "f16" else f32w(rng, 0, 8)
        if i % 2:   # C cancels p0 exactly; the small products show the window's width
            top = rng.randint(0, 12)
            a[0], b[0] = f16w(rng, top, top), ex.f16(1)
            a[1:] = [f16w(rng, top - 26, top - 20) for _ in range(3)]
            c = a[0] ^ 0x8000 if fc == "f16" else ex.f32(-dec("f16", a[0]).value)
        dd = p_tfdpa("f16", "f16", fc, a, b, c, d=d, F=23, e_zero=e_zero, L=4)
        f24 = p_tfdpa("f16", "f16", fc, a, b, c, d=d, F=24, e_zero=e_zero - 1, L=4)
        cs.add(f"random near 1 #{i}" + (" (F=24 differs)" if dd != f24 else ""), a, b, c, dd)
    return cs


def turing_zero_f16_c():
    """T2: single products 2047*1025 * 2^e, e = -14..-28, with C = +0 (f16): no bit is lost."""
    cs = Cases()
    for e in range(-14, -29, -1):
        eb = -14 if e < -14 else 0
        ea = e - eb
        a = [(ea + 15) << 10 | 0x3FF, 0, 0, 0]       # 2047/1024 * 2^ea
        b = [(eb + 15) << 10 | 0x001, 0, 0, 0]       # 1025/1024 * 2^eb
        exact = Fr(2047 * 1025, 1 << 20) * P2(e)
        cs.add(f"product exponent {e}, C = +0 f16", a, b, 0x0000, ex.f32(exact))
    return cs


def e2m1_one_hot(d, operand):
    """T2's one-hot probe: one nonzero byte, the other operand 1.0 (e4m3 0x38), C = +0.
    Every byte value: the result is the e2m3 value of bits 5:0 (exact in f32 and f16)."""
    cs = Cases()
    enc = ex.f32 if d == "f32" else ex.f16
    for byte in range(256):
        k = byte % 32
        x = [0] * 32
        x[k] = byte
        one = [0x38] * 32
        a, b = (x, one) if operand == "a" else (one, x)
        v = dec("e2m1.sm120", byte).value
        cs.add(f"byte 0x{byte:02x} at k={k}: bits 5:0 as e2m3 = {v}", a, b, 0, enc(v))
    return cs


def f8f6f4_random(fa, fb, d, seed, n=96):
    """Random bytes, all eight bits random (padding included), through T-FDPA
    F = 25, L = 32 with the T2 container rule; C near 1 or zero."""
    rng = random.Random(seed)
    e_zero = -21 if d == "f16" else -133
    cs = Cases()
    for i in range(n):
        a = [rng.getrandbits(8) for _ in range(32)]
        b = [rng.getrandbits(8) for _ in range(32)]
        if fa == "e5m2" or fb == "e5m2":   # keep e5m2 finite and near 1
            fix = lambda w: (w & 0x83) | (rng.randint(12, 17) << 2)
            a = [fix(w) for w in a] if fa == "e5m2" else a
            b = [fix(w) for w in b] if fb == "e5m2" else b
        if fa == "e4m3" or fb == "e4m3":
            fix = lambda w: (w & 0x87) | (rng.randint(4, 10) << 3)
            a = [fix(w) for w in a] if fa == "e4m3" else a
            b = [fix(w) for w in b] if fb == "e4m3" else b
        c = 0 if i % 4 == 0 else (f16w(rng) if d == "f16" else f32w(rng))
        cs.add(f"random bytes #{i}", a, b, c, p_tfdpa(fa, fb, d, a, b, c, d=d, F=25, e_zero=e_zero, L=32))
    return cs


def ampere_chain(fc, seed):
    """m8n8k4 on the A100: FMUL/FADD, ((((p0+p1)+p2)+p3)+c) in f32 RNE."""
    rng = random.Random(seed)
    cs = Cases()
    cword = (lambda x: ex.f16(x)) if fc == "f16" else (lambda x: ex.f32(x))
    one, big = ex.f16(1), ex.f16(4096)
    # 2^24 + 1 is a tie that rounds to even (2^24) at every step; the exact sum 2^24 + 2 is representable
    a, b = [big, one, one, 0], [big, one, one, 0]
    cs.add("(2^24 + 1) + 1 rounds twice to 2^24; an exact sum would give 2^24 + 2", a, b, cword(0),
           ex.f32(2 ** 24))
    # C is added last: (2^24 + 1) then + c = 1 -> still 2^24
    a, b = [big, one, 0, 0], [big, one, 0, 0]
    cs.add("c is added last, after the rounded product sum", a, b, cword(1), ex.f32(2 ** 24))
    # -0 products and C = -0: IEEE gives -0 (a fixed-point datapath gives +0)
    a, b = [0x8000, 0x8000, 0x8000, 0x8000], [one, one, one, one]
    cs.add("all products -0 and C = -0: IEEE sum is -0", a, b, 0x8000 if fc == "f16" else 0x80000000,
           0x80000000)
    # the second rounding decides: (2^24 + 3) rounds up to 2^24 + 4
    a, b = [big, ex.f16(3), 0, 0], [big, one, 0, 0]
    cs.add("2^24 + 3 is a tie rounding up to 2^24 + 4", a, b, cword(0), ex.f32(2 ** 24 + 4))
    for i in range(124):
        lo, hi = (-3, 3) if i % 2 else (-12, 12)
        a = [f16w(rng, lo, hi) for _ in range(4)]
        b = [f16w(rng, lo, hi) for _ in range(4)]
        c = f16w(rng, lo, hi) if fc == "f16" else f32w(rng, lo, hi)
        cs.add(f"random #{i}", a, b, c, fmul_fadd_chain(a, b, c, fc))
    return cs


# ------------------------------------------------------------------ files
def provenance(source, device, citation, seed=None):
    return {"source": source, "device": device, "tool": GENERATOR, "tool_version": "1", "date": DATE,
            "seed": seed, "generator": GENERATOR, "citation": citation}


RTX2060 = "NVIDIA GeForce RTX 2060 (sm_75)"
RTX5070 = "NVIDIA GeForce RTX 5070 Ti (GB203, sm_120a)"
A100 = "NVIDIA A100-PCIE-40GB (sm_80)"
DERIVED = "none (derived from a rule measured on the {})"


def jobs():
    out = []
    m884 = "m8n8k4.{}.f16.f16.{}"
    out.append(("turing", "m8n8k4.f32.f16.f16.f32.minimal.hardware.npz", "Turing", m884.format("f32", "f32"),
                turing_minimal(),
                provenance("hardware", RTX2060, f"{T2}, section 1 'Minimal case': RTX 2060 returns 0x0; "
                           "docs/datapaths.md section 3 T2 correction"),
                "Turing m8n8k4 runs Volta's F = 23"))
    for d, fc, seed in (("f32", "f32", 75001), ("f32", "f16", 75002), ("f16", "f16", 75003)):
        out.append(("turing", f"m8n8k4.{d}.f16.f16.{fc}.f23.hand-derived.npz", "Turing", m884.format(d, fc),
                    turing_random(d, fc, seed),
                    provenance("hand-derived", DERIVED.format(RTX2060), f"{T2}, section 1: a T-FDPA with "
                               "L = 4, F = 23 gives 0 mismatches on all three m8n8k4 variants", seed),
                    "random near-1 cases through F = 23, L = 4"))
    out.append(("turing", "m8n8k4.f32.f16.f16.f16.zero-c.hand-derived.npz", "Turing", m884.format("f32", "f16"),
                turing_zero_f16_c(),
                provenance("hand-derived", DERIVED.format(RTX2060), f"{T2}, section 1 'Zero accumulator "
                           "with C in f16': no bits of 2047*1025 are lost at product exponents -14..-28"),
                "a zero f16 C does not affect the alignment"))
    f8 = "m16n8k32.kind::f8f6f4.{d}.{a}.{b}.{d}"
    for d in ("f32", "f16"):
        for operand, (fa, fb) in (("a", ("e2m1", "e4m3")), ("b", ("e4m3", "e2m1"))):
            out.append(("rtx_blackwell", f"f8f6f4.{d}.{fa}.{fb}.one-hot.hand-derived.npz", "RTX Blackwell",
                        f8.format(d=d, a=fa, b=fb), e2m1_one_hot(d, operand),
                        provenance("hand-derived", DERIVED.format(RTX5070), f"{T2}, section 2: one-hot "
                                   "probe; an e2m1 byte is read as e2m3 from bits 5:0, bits 7:6 ignored"),
                        "every byte value of an e2m1 operand"))
    pairs = [("e2m1", "e2m1"), ("e2m1", "e3m2"), ("e2m3", "e2m1"), ("e5m2", "e2m1"), ("e2m1", "e4m3"),
             ("e3m2", "e2m3"), ("e2m3", "e4m3"), ("e5m2", "e3m2")]
    for i, (fa, fb) in enumerate(pairs):
        for d in ("f32", "f16"):
            seed = 120000 + 10 * i + (d == "f16")
            ka, kb = (f"{x}.sm120" if x == "e2m1" else x for x in (fa, fb))
            fact = "e2m1 read as e2m3 from bits 5:0" if "e2m1" in (fa, fb) else "fp6 bits 7:6 ignored"
            out.append(("rtx_blackwell", f"f8f6f4.{d}.{fa}.{fb}.random-padding.hand-derived.npz",
                        "RTX Blackwell", f8.format(d=d, a=fa, b=fb), f8f6f4_random(ka, kb, d, seed),
                        provenance("hand-derived", DERIVED.format(RTX5070), f"{T2}, sections 2 and 3: "
                                   f"T-FDPA F = 25, L = 32 with random padding bits; {fact}", seed),
                        f"random padding bits: {fact}"))
    for fc, seed in (("f32", 80001), ("f16", 80002)):
        out.append(("ampere", f"m8n8k4.f32.f16.f16.{fc}.fmul-fadd.hand-derived.npz", "Ampere",
                    m884.format("f32", fc), ampere_chain(fc, seed),
                    provenance("hand-derived", DERIVED.format(A100), f"{T2}, section 1 'Ampere, for "
                               "comparison': ptxas lowers m8n8k4 to FMUL/FADD; (((p0+p1)+p2)+p3)+c in f32 "
                               "RNE, 0 mismatches on 233,452 finite results", seed),
                    "FMUL/FADD chain, not a tensor core"))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "vectors" / "hardware"))
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = ap.parse_args(argv)
    out = pathlib.Path(args.out)
    bad = 0
    for folder, name, arch, instr, cases, prov, notes in jobs():
        arrs = cases.arrays()
        path = out / folder / name
        if args.check:
            with np.load(path, allow_pickle=False) as z:
                diff = [k for k, v in arrs.items() if not np.array_equal(z[k], np.asarray(v, dtype=z[k].dtype))]
            for key in diff:
                print(f"{path}: array {key} differs", file=sys.stderr)
            bad += len(diff)
            continue
        ref.save(path, arch=arch, instruction=instr, provenance=prov, notes=notes, **arrs)
        print(f"wrote {path} ({len(arrs['d'])} cases)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
