"""The fixed probe ladders of docs/characterize.md (after docs/datapaths.md §3, §4, §8).

``probe_cases(model)`` returns one fixed, non-adaptive batch of dot-product cases built only
from the instruction's *shape* (its A, B, C, D and scale formats, K, block size and sparse
rule), never from its accumulator, parameters, step or rounding.  A device runs the whole batch
at once (``mmasim harness run --probes``); :func:`mmasim.characterize.infer` reads the D words
back.  Every probe is a handful of exact terms (products at stored positions of K, C, unit
block scales unless the ladder says otherwise); each ladder (``Probe.ladder``) varies one rung
argument so that one parameter decides on which side of a threshold the rung falls.  The
ladders, their terms and what each reads are the table of docs/characterize.md.
"""

from __future__ import annotations

from fractions import Fraction

import attrs
import numpy as np

from mmasim.errors import CharacterizeError
from mmasim.arith.sparse import RULES as SPARSE_RULES
from mmasim.characterize.values import Realizer

#: the deepest rung of the visibility ladders (window fraction bits up to KMAX - 1 are read)
KMAX = 48
TWO = Fraction(2)


def P2(e: int) -> Fraction:
    return TWO ** e


@attrs.frozen
class Probe:
    """One case: exact terms ``((position, value, raw), ...)`` of the stored K (a term's value
    includes its block's scales), C, and ``((block, scale of A, scale of B), ...)`` for the blocks
    whose scales are not 1."""

    label: str
    ladder: str
    arg: int
    p: int | None
    terms: tuple
    c: object                      # Fraction, or "inf"
    s: int | None = None           # the anchor exponent
    extra: tuple = ()              # ladder-specific facts (e.g. the tie terms' positions)
    scales: tuple = ()
    words: tuple = ()              # (a words, b words, c word, scale_a words, scale_b words)


class _Builder:
    def __init__(self, model):
        self.model = model
        dp = model.datapath
        ints = [x for x in ("a", "b", "c", "d") if model.format_of(x).integer]
        if ints:
            raise CharacterizeError(
                f"{model.instruction}: {', '.join(ints)} {'is' if len(ints) == 1 else 'are'} integer: the probe "
                "ladders characterize floating-point window datapaths (an integer MMA has no window, docs/datapaths.md §10)")
        self.ks = dp.stored_k
        self.R = Realizer(model)
        self.cfmt = model.c_format
        self.dfmt = model.d_format
        reg = model.registry
        self.encodings = [e for e in reg.encodings.values()
                          if e.format == self.dfmt.key and e.mode in ("rz", "rne")]
        self.ps = sorted({e.frac_bits for e in self.encodings})
        self.rne = any(e.mode == "rne" for e in self.encodings)
        self.rz = any(e.mode == "rz" for e in self.encodings)
        self.probes = []
        self.labels = set()
        self.blocks = dp.blocks if dp.scale else 0
        self.block = dp.block
        # the largest exponent C and D hold with room to spare
        cbias = (1 << (self.cfmt.exp_bits - 1)) - 1
        dbias = (1 << (self.dfmt.exp_bits - 1)) - 1
        self.smax = min(cbias, dbias, 100) - 2
        self.dmin = 1 - dbias - (self.dfmt.man_bits)          # smallest D subnormal exponent

    # ---------------------------------------------------------------- helpers
    def add(self, label, ladder, arg, p, terms, c, s=None, extra=(), scales=()):
        """Realize ``terms`` ``[(position, value, need_normal)]``; skip the rung if impossible."""
        if label in self.labels:
            return False
        if any(pos >= self.ks for pos, _, _ in terms):
            return False
        a = [0] * self.ks
        b = [0] * self.ks
        real = []
        for pos, v, normal in terms:
            scale = 1
            for blk, sva, svb in scales:
                if self.block and pos // self.block == blk:
                    scale = sva * svb
            hit = self.R.product(Fraction(v) / scale, normal=normal)
            if hit is None:
                return False
            a[pos], b[pos], r = hit
            real.append((pos, Fraction(v), r))
        if c == "inf":
            cw = self._c_inf()
            if cw is None:
                return False
        else:
            cw = self.R.c_word(c)
            if cw is None:
                return False
        sa = sb = ()
        if self.blocks:
            sa = [self.R.one_scale] * self.blocks
            sb = list(sa)
            for blk, sva, svb in scales:
                wa, wb = self.R.S.word(sva), self.R.S.word(svb)
                if wa is None or wb is None or blk >= self.blocks:
                    return False
                sa[blk], sb[blk] = wa, wb
        self.labels.add(label)
        self.probes.append(Probe(label, ladder, arg, p, tuple(real), c, s, tuple(extra), tuple(scales),
                                 (tuple(a), tuple(b), cw, tuple(sa), tuple(sb))))
        return True

    def _c_inf(self):
        f = self.cfmt
        if f.nan != "ieee":
            return None
        return ((1 << f.exp_bits) - 1) << f.man_bits << f.field_shift

    def product_ok(self, v, normal=False):
        return self.R.product(v, normal=normal) is not None

    def anchor_c(self, t_small: list):
        """The C anchor exponent s for a rung whose small products sit at s - d for d in
        ``t_small``: the largest s <= smax (and at most max(d) above 0) with every small product
        realizable."""
        deepest = max(t_small)
        for s in range(min(self.smax, max(deepest, 0) + 8), -self.smax, -1):
            if all(self.product_ok(P2(s - d)) for d in t_small):
                return s
        return None

    def anchor_p(self, t_small: list):
        """A product anchor 2^s (normal factors) with products 2^(s-d) realizable."""
        lo, hi = self.R.normal_range
        for s in range(min(hi, self.smax), lo - 1, -1):
            if self.product_ok(P2(s), normal=True) and all(self.product_ok(P2(s - d)) for d in t_small):
                return s
        return None


def _ladders(bld: _Builder):
    ps = bld.ps
    # F-neg: C = 2^s, product -2^(s-k)
    for k in range(1, KMAX + 1):
        s = bld.anchor_c([k])
        if s is not None:
            bld.add(f"F-neg k={k}", "F-neg", k, None, [(0, -P2(s - k), False)], P2(s), s)
    # F-tie (RNE outputs, and the two-stage floor F2)
    for p in ps:
        for k in range(p + 2, KMAX + 1):
            s = bld.anchor_c([p + 1, k])
            if s is not None:
                bld.add(f"F-tie p={p} k={k}", "F-tie", k, p,
                        [(0, P2(s - p - 1), False), (1, P2(s - k), False)], P2(s), s)
    # products-only anchor
    for k in range(1, KMAX + 1):
        s = bld.anchor_p([k])
        if s is not None:
            bld.add(f"Fp-neg k={k}", "Fp-neg", k, None,
                    [(0, P2(s), True), (1, -P2(s - k), False)], Fraction(0), s)
    for p in ps:
        for k in range(p + 2, KMAX + 1):
            s = bld.anchor_p([p + 1, k])
            if s is not None:
                bld.add(f"Fp-tie p={p} k={k}", "Fp-tie", k, p,
                        [(0, P2(s), True), (1, P2(s - p - 1), False), (2, P2(s - k), False)], Fraction(0), s)
    # rounding: 2^(s+1)(1 + 2^-p + 2^-(p+1))
    for p in ps:
        s = bld.anchor_c([0, p - 1, p])
        if s is not None:
            bld.add(f"round p={p}", "round", p, p,
                    [(0, P2(s), False), (1, P2(s + 1 - p), False), (2, P2(s - p), False)], P2(s), s)
    # rounding with the carry in C: C = 2^(s+1)(1 + 2^-p), one product 2^(s-p)
    for p in ps:
        s = bld.anchor_c([p - 1])
        if s is not None:
            s -= 1
            bld.add(f"round-c p={p}", "round-c", p, p, [(0, P2(s - p), False)], P2(s + 1) * (1 + P2(-p)), s + 1)
    _zeros(bld)
    if bld.blocks:
        _scaled(bld)
    # step: positions 0 and j
    js = sorted({j for j in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96) if j < bld.ks})
    for p in ps:
        s = bld.anchor_c([p + 1])
        for j in js:
            if s is not None:
                half = P2(s - p - 1)
                bld.add(f"step-c p={p} j={j}", "step-c", j, p, [(0, half, False), (j, half, False)], P2(s), s)
        s2 = bld.anchor_c([0, p])
        for j in js:
            if s2 is not None and s2 < bld.smax:
                bld.add(f"step-carry p={p} j={j}", "step-carry", j, p,
                        [(0, P2(s2), False), (j, P2(s2 - p), False)], P2(s2) * (1 + P2(-p)), s2)
        # the carry made by a product (C narrower than D): C = 2^s, 2^s and 2^(s-p) at 0 and 1
        s3 = bld.anchor_c([0, p])
        for j in js:
            if s3 is not None and j >= 2:
                bld.add(f"step-carry2 p={p} j={j}", "step-carry2", j, p,
                        [(0, P2(s3), False), (1, P2(s3 - p), False), (j, P2(s3 - p), False)], P2(s3), s3)
    # two-stage facts (docs/datapaths.md §8)
    for d in (26, 30, 34, 38):
        s = bld.anchor_p([d])
        if s is not None:
            bld.add(f"eo d={d}", "eo", d, None, [(0, P2(s), True), (1, -P2(s - d), False)], Fraction(0), s)
    for d in range(20, 41):
        s = bld.anchor_p([0])
        if s is not None and bld.R.c_word(-P2(s - d)) is not None:
            bld.add(f"dropc d={d}", "dropc", d, None, [(0, P2(s), True)], -P2(s - d), s)
    lo, hi = bld.R.normal_range
    for x in range(max(lo, 100), min(hi, 140) + 1):
        bld.add(f"overflow x={x}", "overflow", x, None, [(0, P2(x), True), (1, -P2(x), True)], Fraction(0), x)
    for x in range(max(lo, 0), min(hi, 40) + 1):
        bld.add(f"infc x={x}", "infc", x, None, [(0, P2(x), True)], "inf", x)


def _zeros(bld: _Builder):
    """C = 0; anchor 2^t (normal product) at the lowest t whose rungs D can show; and a lone
    product 2^t for every t D can show (``zeros-1``: it survives iff t >= e_zero - F)."""
    lo, hi = bld.R.normal_range
    dmin = bld.dmin
    if not bld.blocks:
        for t in range(min(hi, 0), max(lo, dmin) - 1, -1):
            if bld.product_ok(P2(t), normal=True):
                bld.add(f"zeros-1 t={t}", "zeros-1", t, None, [(0, P2(t), True)], Fraction(0), t)
    if bld.rz:
        # RZ: D = 2^t - 2^u must differ from 2^t: 2^t above the smallest D subnormal
        for t in range(max(lo, dmin + 1), hi + 1):
            if bld.product_ok(P2(t), normal=True):
                break
        else:
            t = None
        if t is not None:
            for u in range(t - 1, t - KMAX - 2, -1):
                bld.add(f"zeros-neg t={t} u={u}", "zeros-neg", u, None,
                        [(0, P2(t), True), (1, -P2(u), False)], Fraction(0), t)
    if bld.rne:
        for p in bld.ps:
            # the tie: a lone 2^(dmin-1) (half the smallest subnormal), else 2^t + 2^(t-p-1)
            t = dmin - 1
            if bld.product_ok(P2(t), normal=True):
                tie = [(0, P2(t), True)]
            else:
                tie = None
                for t in range(max(lo, 1 - ((1 << (bld.dfmt.exp_bits - 1)) - 1)), hi + 1):
                    if bld.product_ok(P2(t), normal=True) and bld.product_ok(P2(t - p - 1)):
                        tie = [(0, P2(t), True), (2, P2(t - p - 1), False)]
                        break
            if tie is None:
                continue
            for u in range(t - 1, t - KMAX - 2, -1):
                bld.add(f"zeros-tie p={p} t={t} u={u}", "zeros-tie", u, p, tie + [(1, P2(u), False)],
                        Fraction(0), t)


def _scaled(bld: _Builder):
    """Block-scaled shapes: the zero-handling ladder with the exponents carried by the scales,
    and the group ladders (which products are summed exactly before truncation)."""
    def halves(x):
        return P2(x - x // 2), P2(x // 2)
    S = bld.R.S
    one_exps = sorted(S.by_odd.get((1, False), ()))
    pairs = {a + b for a in one_exps for b in one_exps}
    # zeros-s: 1 * 2^sigma (a normal product times the scales) and -2^u, in block 1 when there
    # is one (its own scales), else in block 0
    sigma = bld.dmin + 1
    if bld.rz and sigma in pairs and bld.product_ok(Fraction(1), normal=True):
        for u in range(sigma - 1, sigma - KMAX - 2, -1):
            if bld.blocks >= 2:
                if u not in pairs:
                    continue
                bld.add(f"zeros-s t={sigma} u={u}", "zeros-s", u, None,
                        [(0, P2(sigma), True), (bld.block, -P2(u), True)], Fraction(0), sigma,
                        scales=((0, *halves(sigma)), (1, *halves(u))))
            else:
                bld.add(f"zeros-s t={sigma} u={u}", "zeros-s", u, None,
                        [(0, P2(sigma), True), (1, -P2(u), False)], Fraction(0), sigma,
                        scales=((0, *halves(sigma)),))
    js = sorted({j for j in (1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48) if j < bld.ks})
    # group: C = 2^s, -2^(s-k-1) at positions 0 and j (unit scales): C dominates the window
    for k in range(16, KMAX + 1):
        s = bld.anchor_c([k + 1])
        if s is None:
            continue
        for j in js:
            bld.add(f"group k={k} j={j}", "group", j, None,
                    [(0, -P2(s - k - 1), False), (j, -P2(s - k - 1), False)], P2(s), s, extra=(k,))
    if bld.blocks >= 2:
        _floors(bld, pairs, halves)
    # group-p: C = 0; block 0 holds the anchor 1 * 2^s0, block 1 two products of -2^(s0-k-1)
    # (half a quantum) at its positions 0 and j: the products set the window
    if bld.blocks < 2:
        return
    prod_exps = sorted(set(bld.R.a_pow) | set(bld.R.A.by_odd.get((1, False), ())))
    for k in range(16, KMAX + 1):
        done = False
        for s0 in sorted(pairs, reverse=True):
            if done or s0 > 40:
                continue
            for t in (0, -1, -2, 1, 2, -3, -4):
                s1 = s0 - k - 1 - t
                if s1 in pairs and s1 < s0:
                    ok = True
                    for j in [x for x in js if x < bld.block]:
                        ok &= bld.add(f"group-p k={k} j={j}", "group-p", j, None,
                                      [(0, P2(s0), True), (bld.block, -P2(s0 - k - 1), False),
                                       (bld.block + j, -P2(s0 - k - 1), False)], Fraction(0), s0,
                                      extra=(k,), scales=((0, *halves(s0)), (1, *halves(s1))))
                    if ok:
                        done = True
                        break


def _floors(bld: _Builder, pairs, halves):
    """Product-anchored ladders with the small term in block 1 (its own, smaller scale): ``Fp-s``
    with the anchor 2^S a product of unit-scaled normal factors at two raws S (the largest and 0),
    reading min(F, S + scale floor); ``crel``: the same with a smaller, non-dominant C = 2^(S-1),
    reading where a group below C is truncated (the C-relative rule, docs/datapaths.md §6)."""
    top = max((e for e in bld.R.normal_range[1:] if bld.product_ok(P2(e), normal=True)), default=None)
    anchors = sorted({x for x in (top, 0) if x is not None and bld.product_ok(P2(x), normal=True)}, reverse=True)
    prod_exps = sorted(set(bld.R.A.by_odd.get((1, False), ())) | set(bld.R.a_pow))

    def small(s, k):
        # -2^(s-k) as (product) * (block 1's scales), the scale raw at most 0
        for sig in sorted((x for x in pairs if x <= 0), reverse=True):
            if bld.product_ok(P2(s - k - sig)):
                return sig
        return None

    # block 0's scales lift the anchor (a narrow scale format reaches deeper below it)
    s0 = max((x for x in pairs if x <= 16), default=0)
    for S in anchors:
        for k in range(1, KMAX + 1):
            sig = small(S + s0, k)
            if sig is not None:
                bld.add(f"Fp-s S={S} k={k}", "Fp-s", k, None,
                        [(0, P2(S + s0), True), (bld.block, -P2(S + s0 - k), False)], Fraction(0), S + s0,
                        extra=(S, s0), scales=((0, *halves(s0)), (1, *halves(sig))))
    S = anchors[0] if anchors else None
    if S is not None and bld.R.c_word(P2(S + s0 - 1)) is not None:
        for d in range(1, KMAX + 1):
            u = S + s0 - 1 - d
            sig = small(S + s0 - 1, d)
            if sig is not None:
                bld.add(f"crel S={S} u={u}", "crel", u, None,
                        [(0, P2(S + s0), True), (bld.block, -P2(u), False)], P2(S + s0 - 1), S + s0,
                        extra=(S, s0), scales=((0, *halves(s0)), (1, *halves(sig))))


def build(model) -> list:
    """Every probe of ``model``'s shape, in a fixed order."""
    bld = _Builder(model)
    _ladders(bld)
    return bld.probes


def _metadata(rule, k: int):
    """Selector words keeping, in every chunk, the first stored elements in increasing order."""
    nib = next(s for s, picks in sorted(rule.selectors.items()) if list(picks) == sorted(picks)
               and picks[0] == 0 and (len(picks) == 1 or picks[1] == 1))
    chunks = rule.chunks(k)
    words = [0] * rule.words(k)
    for i in range(chunks):
        words[i // 8] |= nib << (4 * (i % 8))
    pos = rule.positions(np.array([[nib] * chunks]))[0]
    return words, pos


def probe_cases(model) -> dict:
    """The probe batch of ``model`` as dot-product arrays (docs/vectors.md): ``a``, ``b``
    ``(N, K)`` uint64 (the logical K), ``c`` ``(N,)``, ``labels`` ``(N,)`` and, where the
    instruction takes them, ``scale_a`` / ``scale_b`` ``(N, blocks)`` and ``sparse_metadata``
    ``(N, words)`` (a fixed legal selector keeping the first stored elements of every chunk)."""
    probes = build(model)
    return _arrays(model, probes)


def _arrays(model, probes) -> dict:
    dp = model.datapath
    n = len(probes)
    a = np.zeros((n, dp.k), dtype=np.uint64)
    b = np.zeros((n, dp.k), dtype=np.uint64)
    if dp.sparse:
        words, pos = _metadata(SPARSE_RULES[dp.sparse], dp.k)
    else:
        pos = np.arange(dp.k)
    for i, pr in enumerate(probes):
        a[i, pos] = pr.words[0]
        b[i, pos] = pr.words[1]
    out = {"a": a, "b": b, "c": np.array([pr.words[2] for pr in probes], dtype=np.uint64),
           "labels": np.array([pr.label for pr in probes])}
    if dp.scale:
        out["scale_a"] = np.array([pr.words[3] for pr in probes], dtype=np.uint64).reshape(n, dp.blocks)
        out["scale_b"] = np.array([pr.words[4] for pr in probes], dtype=np.uint64).reshape(n, dp.blocks)
    if dp.sparse:
        out["sparse_metadata"] = np.tile(np.array(words, dtype=np.uint64), (n, 1))
    return out


def probe_words(model, cases: dict, backend: str | None = "numpy") -> np.ndarray:
    """D words of ``cases`` through ``model`` (the simulator path; the numpy backend by default,
    which needs no compilation for a batch this small: every backend gives the same words)."""
    kw = {"backend": backend}
    if "scale_a" in cases:
        kw.update(scale_a=cases["scale_a"], scale_b=cases["scale_b"])
    if "sparse_metadata" in cases:
        kw["sparse_metadata"] = cases["sparse_metadata"]
    return np.asarray(model.dot(cases["a"], cases["b"], cases["c"], **kw)).astype(np.uint64)


__all__ = ["Probe", "KMAX", "build", "probe_cases", "probe_words"]
