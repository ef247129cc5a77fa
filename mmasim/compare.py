"""Searching for inputs on which two datapaths disagree (``mmasim compare``).

Two models (two architectures, or two datapaths of one architecture) whose
operands have the same formats are run on the same generated inputs: uniform
random words, values near one, cancellation-heavy rows and adversarial rows
(one dominant term and terms just below the window, subnormals, overflow,
C on binade boundaries).  :func:`compare` reports how often the output words
differ, the largest difference in ULPs of the output format, and the smallest
differing example it can find (greedily shrunk by zeroing terms), with every
operand decoded and the exact rational result for reference.

Nothing here knows an architecture: the generators read the formats of the two
models.
"""

from __future__ import annotations

from fractions import Fraction

import attrs
import numpy as np

from .decode import NAN, ZERO
from .display import exact_values, fraction_text, hex_word, safe, value_text
from .errors import MMAError
from .sparse import select

KINDS = ("random", "near-one", "cancellation", "adversarial")
_SHARE = (0.25, 0.30, 0.25, 0.20)


class IncompatibleDatapaths(MMAError):
    """The two datapaths cannot be run on the same inputs (formats, K, scales or sparsity differ)."""


# ------------------------------------------------------------------ formats
def _same_format(fa, fb) -> bool:
    return fa.name == fb.name and fa.container_bits == fb.container_bits and fa.integer == fb.integer


def check_compatible(ma, mb) -> None:
    """Refuse, with the reason, two models that cannot share inputs."""
    problems = []
    for op in ("a", "b", "c", "d"):
        fa, fb = getattr(ma, f"{op}_format"), getattr(mb, f"{op}_format")
        if not _same_format(fa, fb):
            what = "output" if op == "d" else "operand"
            problems.append(f"{what} {op.upper()}: {fa.name} ({fa.container_bits}-bit) vs {fb.name} ({fb.container_bits}-bit)")
    if ma.k != mb.k:
        problems.append(f"K: {ma.k} vs {mb.k}")
    da, db = ma.datapath, mb.datapath
    if (ma.scale_format is None) != (mb.scale_format is None):
        problems.append("one is block-scaled, the other is not")
    elif ma.scale_format is not None:
        if not _same_format(ma.scale_format, mb.scale_format):
            problems.append(f"scale format: {ma.scale_format.name} vs {mb.scale_format.name}")
        if da.block != db.block:
            problems.append(f"scale block: {da.block} vs {db.block} elements")
    if (da.sparse or None) != (db.sparse or None):
        problems.append(f"sparsity: {da.sparse or 'dense'} vs {db.sparse or 'dense'}")
    if problems:
        raise IncompatibleDatapaths(
            f"cannot compare {ma.arch} {ma.instruction} with {mb.arch} {mb.instruction}: "
            + "; ".join(problems)
            + ". compare needs the same operand and output formats, K, scales and sparsity."
        )


class _FormatGen:
    """Random container words of one float or integer format."""

    def __init__(self, fmt, padding: bool):
        self.f = fmt
        self.padding = padding   # random bits outside the element field (only when both sides read the same format)

    @property
    def emax_field(self) -> int:
        top = (1 << self.f.exp_bits) - 1
        return top - 1 if self.f.nan == "ieee" else top

    def pack(self, rng, sign, e_field, frac):
        f = self.f
        x = (np.asarray(e_field, dtype=np.int64) << f.man_bits) | np.asarray(frac, dtype=np.int64)
        if f.signed:
            x = x | (np.asarray(sign, dtype=np.int64) << (f.exp_bits + f.man_bits))
        words = x.astype(np.uint64) << np.uint64(f.field_shift)
        if self.padding and f.field_bits < f.container_bits:
            field_mask = ((1 << f.field_bits) - 1) << f.field_shift
            pad_mask = ((1 << f.container_bits) - 1) & ~field_mask
            noise = rng.integers(0, 1 << min(f.container_bits, 62), size=words.shape, dtype=np.uint64)
            words = words | (noise & np.uint64(pad_mask))
        return words

    def uniform(self, rng, shape, finite_only=False):
        f = self.f
        if f.integer:
            return rng.integers(0, 1 << f.container_bits, size=shape, dtype=np.uint64)
        sign = rng.integers(0, 2, size=shape)
        e = rng.integers(0, 1 << f.exp_bits, size=shape)
        special = rng.random(shape) < 0.3
        top = (1 << f.exp_bits) - 1
        choices = np.array([0, min(1, top), top, max(top - 1, 0), min(f.bias, top)])
        e = np.where(special, choices[rng.integers(0, len(choices), size=shape)], e)
        if finite_only:
            e = np.minimum(e, self.emax_field)
        frac = rng.integers(0, 1 << f.man_bits, size=shape) if f.man_bits else np.zeros(shape, dtype=np.int64)
        return self.pack(rng, sign, e, frac)

    def near(self, rng, shape, lo, hi, center=0):
        """Finite values with unbiased exponents in [center+lo, center+hi] (clipped to the format)."""
        f = self.f
        if f.integer:
            top = 1 << (f.container_bits - (1 if f.signed else 0))
            v = rng.integers(-top if f.signed else 0, top, size=shape)
            return (v & ((1 << f.container_bits) - 1)).astype(np.uint64)
        sign = rng.integers(0, 2, size=shape)
        e = rng.integers(lo, hi + 1, size=shape) + center + f.bias
        e = np.clip(e, 0, self.emax_field)
        frac = rng.integers(0, 1 << f.man_bits, size=shape) if f.man_bits else np.zeros(shape, dtype=np.int64)
        if f.nan == "max":  # avoid the all-ones NaN pattern
            frac = np.where(e == (1 << f.exp_bits) - 1, np.minimum(frac, (1 << f.man_bits) - 2), frac)
        return self.pack(rng, sign, e, frac)

    def negate(self, words):
        f = self.f
        if f.integer or not f.signed:
            return words
        return words ^ np.uint64(1 << (f.field_shift + f.exp_bits + f.man_bits))


def encode_exact(fmt, value: Fraction):
    """The container word of ``value`` in float format ``fmt`` if it is exactly representable, else ``None``."""
    if fmt.integer or fmt.exp_bits == 0:
        return None
    if value == 0:
        return 0
    neg = value < 0
    mag = abs(value)
    num, den = mag.numerator, mag.denominator
    if den & (den - 1):
        return None
    e = num.bit_length() - den.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    emin = 1 - fmt.bias
    e_eff = max(e, emin)
    m = mag / Fraction(2) ** (e_eff - fmt.man_bits)
    if m.denominator != 1:
        return None
    m = int(m)
    if e < emin:
        e_field = 0
        if not fmt.subnormals:
            return None
    else:
        e_field = e + fmt.bias
        m -= 1 << fmt.man_bits
    top = (1 << fmt.exp_bits) - 1
    if e_field > top or (fmt.nan == "ieee" and e_field == top):
        return None
    if fmt.nan == "max" and e_field == top and m == (1 << fmt.man_bits) - 1:
        return None
    if neg and not fmt.signed:
        return None
    x = (e_field << fmt.man_bits) | m
    if neg:
        x |= 1 << (fmt.exp_bits + fmt.man_bits)
    return x << fmt.field_shift


# ------------------------------------------------------------------ inputs
@attrs.frozen(eq=False)
class Inputs:
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    scale_a: np.ndarray | None
    scale_b: np.ndarray | None
    sparse_metadata: np.ndarray | None
    kind: np.ndarray           # index into KINDS per row

    def __len__(self):
        return int(self.c.shape[0])

    def row(self, i):
        take = lambda x: None if x is None else x[i:i + 1].copy()
        return Inputs(take(self.a), take(self.b), take(self.c), take(self.scale_a), take(self.scale_b),
                      take(self.sparse_metadata), take(self.kind))

    def kwargs(self) -> dict:
        kw = {}
        if self.scale_a is not None:
            kw["scale_a"], kw["scale_b"] = self.scale_a, self.scale_b
        if self.sparse_metadata is not None:
            kw["sparse_metadata"] = self.sparse_metadata
        return kw


def generate(ma, mb, n: int, seed: int = 0) -> Inputs:
    """``n`` input rows for two compatible models, split over :data:`KINDS`."""
    rng = np.random.default_rng(seed)
    K = ma.k
    ga = _FormatGen(ma.a_format, ma.a_format == mb.a_format)
    gb = _FormatGen(ma.b_format, ma.b_format == mb.b_format)
    gc = _FormatGen(ma.c_format, ma.c_format == mb.c_format)
    counts = [int(n * s) for s in _SHARE]
    counts[1] += n - sum(counts)
    kind = np.repeat(np.arange(len(KINDS)), counts)
    a = np.zeros((n, K), dtype=np.uint64)
    b = np.zeros((n, K), dtype=np.uint64)
    c = np.zeros(n, dtype=np.uint64)
    integer = ma.a_format.integer

    # 1. uniform random words (in some rows every special value redrawn as finite)
    r = kind == 0
    nr = int(r.sum())
    finite_rows = rng.random(nr) < 0.6
    a[r] = np.where(finite_rows[:, None], ga.uniform(rng, (nr, K), True), ga.uniform(rng, (nr, K)))
    b[r] = np.where(finite_rows[:, None], gb.uniform(rng, (nr, K), True), gb.uniform(rng, (nr, K)))
    c[r] = np.where(finite_rows, gc.uniform(rng, (nr,), True), gc.uniform(rng, (nr,)))

    # 2. near one: every fractional bit of the sum shows
    r = kind == 1
    nr = int(r.sum())
    a[r], b[r], c[r] = ga.near(rng, (nr, K), -3, 3), gb.near(rng, (nr, K), -3, 3), gc.near(rng, (nr,), -3, 3)

    # 3. cancellation: pairs of products cancel exactly, C cancels a product, small survivors
    r = np.flatnonzero(kind == 2)
    nr = len(r)
    if nr:
        A = ga.near(rng, (nr, K), -12, 12)
        B = gb.near(rng, (nr, K), -2, 2)
        pairs = rng.random((nr, K // 2)) < 0.6
        for j in range(K // 2):
            A[:, 2 * j + 1] = np.where(pairs[:, j], ga.negate(A[:, 2 * j]), A[:, 2 * j + 1])
            B[:, 2 * j + 1] = np.where(pairs[:, j], B[:, 2 * j], B[:, 2 * j + 1])
        C = gc.near(rng, (nr,), -6, 6)
        a[r], b[r], c[r] = A, B, C
        if not integer:
            _cancel_c(ma, a, b, c, r, rng)

    # 4. adversarial: one dominant product, terms just below the window, subnormals, overflow
    r = np.flatnonzero(kind == 3)
    nr = len(r)
    if nr:
        if integer:
            top_a = np.array([0, 1, (1 << ma.a_format.container_bits) - 1, 1 << (ma.a_format.container_bits - 1)],
                             dtype=np.uint64)
            a[r] = top_a[rng.integers(0, 4, size=(nr, K))]
            b[r] = top_a[rng.integers(0, 4, size=(nr, K))]
            topc = np.array([0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0], dtype=np.uint64)
            c[r] = topc[rng.integers(0, 4, size=nr)]
        else:
            sub = rng.integers(0, 5, size=nr)
            emax = ma.a_format.bias
            A = ga.near(rng, (nr, K), -1, 1)
            B = gb.near(rng, (nr, K), -1, 1)
            # terms 20..30 binades below the dominant one (split over a and b)
            drop = rng.integers(18, 31, size=(nr, K))
            A_small = _shift_exponent(ga, A, -(drop // 2))
            B_small = _shift_exponent(gb, B, -(drop - drop // 2))
            small = rng.random((nr, K)) < 0.7
            small[:, 0] = False
            A = np.where((sub[:, None] == 0) & small, A_small, A)
            B = np.where((sub[:, None] == 0) & small, B_small, B)
            # subnormals and zeros
            tiny = (sub[:, None] == 1) & (rng.random((nr, K)) < 0.7)
            A = np.where(tiny, ga.near(rng, (nr, K), -emax - 4, -emax + 2), A)
            # ... times small B: products near the bottom of the range, where a
            # zero term's exponent or a window floor shows
            low = (sub[:, None] == 1) & (rng.random((nr, K)) < 0.5)
            B = np.where(low, _shift_exponent(gb, B, -rng.integers(0, 40, size=(nr, K))), B)
            zero = (sub[:, None] == 1) & (rng.random((nr, K)) < 0.3)
            A = np.where(zero, np.uint64(0), A)
            # near overflow
            big = (sub[:, None] == 2) & (rng.random((nr, K)) < 0.5)
            A = np.where(big, ga.near(rng, (nr, K), emax - 1, emax + 1), A)
            B = np.where(big, gb.near(rng, (nr, K), ma.b_format.bias - 1, ma.b_format.bias + 1), B)
            # every product near the bottom of the range (zero terms, window floors
            # and subnormal results show here); C zero or tiny
            bottom = sub[:, None] == 4
            A = np.where(bottom, ga.near(rng, (nr, K), -emax - 3, -emax + 3), A)
            depth = rng.integers(0, 40, size=(nr, 1)) + rng.integers(0, 16, size=(nr, K))
            B = np.where(bottom, _shift_exponent(gb, gb.near(rng, (nr, K), -1, 1), -depth), B)
            A = np.where(bottom & (rng.random((nr, K)) < 0.25), np.uint64(0), A)
            C = gc.near(rng, (nr,), -2, 2)
            C = np.where(sub == 4, np.where(rng.random(nr) < 0.5, np.uint64(0),
                                            gc.near(rng, (nr,), -ma.c_format.bias - 8, -ma.c_format.bias + 2)), C)
            # C on a binade boundary (1, 2^k, or just below: all fraction bits ones)
            fc = ma.c_format
            e = rng.integers(-3, 4, size=nr) + fc.bias
            ones = rng.random(nr) < 0.5
            frac = np.where(ones, (1 << fc.man_bits) - 1, 0)
            boundary = gc.pack(rng, rng.integers(0, 2, size=nr), e, frac)
            C = np.where(sub == 3, boundary, C)
            a[r], b[r], c[r] = A, B, C
            if K >= 2:
                _cancel_c(ma, a, b, c, r[sub == 3], rng, only_some=True)

    scale_a = scale_b = None
    if ma.scale_format is not None:
        gs = _FormatGen(ma.scale_format, ma.scale_format == mb.scale_format)
        blocks = ma.datapath.blocks
        scale_a = gs.near(rng, (n, blocks), -3, 3)
        scale_b = gs.near(rng, (n, blocks), -3, 3)
        wild = rng.random((n, blocks)) < 0.15
        scale_a = np.where(wild, gs.near(rng, (n, blocks), -60, 60), scale_a)
        wild = rng.random((n, blocks)) < 0.15
        scale_b = np.where(wild, gs.near(rng, (n, blocks), -60, 60), scale_b)
    md = None
    rule = ma.sparse_rule
    if rule is not None:
        legal = np.array(sorted(rule.selectors), dtype=np.uint64)
        chunks = rule.chunks(K)
        nib = legal[rng.integers(0, len(legal), size=(n, chunks))]
        words = rule.words(K)
        nib = np.concatenate([nib, np.zeros((n, words * 8 - chunks), dtype=np.uint64)], axis=1)
        shifts = (np.arange(8, dtype=np.uint64) * np.uint64(4))
        md = (nib.reshape(n, words, 8) << shifts).sum(axis=-1).astype(np.uint64)
    return Inputs(a, b, c, scale_a, scale_b, md, kind)


def _shift_exponent(gen, words, delta):
    """Move the exponent field of finite normal words by ``delta`` (clipped at the subnormal range)."""
    f = gen.f
    x = (words >> np.uint64(f.field_shift)).astype(np.int64)
    e = (x >> f.man_bits) & ((1 << f.exp_bits) - 1)
    e2 = np.clip(e + delta, 1 if f.subnormals else 0, gen.emax_field)
    x = (x & ~(((1 << f.exp_bits) - 1) << f.man_bits)) | (e2 << f.man_bits)
    pad = words & ~np.uint64(((1 << f.field_bits) - 1) << f.field_shift)
    return (x.astype(np.uint64) << np.uint64(f.field_shift)) | pad


def _cancel_c(ma, a, b, c, rows, rng, only_some=False):
    """Set C = -(a0*b0) exactly (moved by an ulp in some rows) where C's format holds it."""
    if len(rows) == 0:
        return
    va = exact_values(ma.decode("a", a[rows, 0]))
    vb = exact_values(ma.decode("b", b[rows, 0]))
    nudge = rng.random(len(rows)) < 0.3
    for j, i in enumerate(rows):
        if only_some and rng.random() < 0.5:
            continue
        x, y = va[j], vb[j]
        if not (isinstance(x, Fraction) and isinstance(y, Fraction)):
            continue
        if ma.scale_format is not None:
            continue
        w = encode_exact(ma.c_format, -(x * y))
        if w is None:
            continue
        if nudge[j] and w:
            w ^= 1 << ma.c_format.field_shift
        c[i] = w


# ------------------------------------------------------------------ analysis
def exact_results(model, inputs: Inputs) -> list:
    """The exact rational ``C + sum(a*b*scales)`` per row (``None`` where an input is inf or NaN)."""
    a, b = inputs.a, inputs.b
    if model.sparse_rule is not None:
        a, b = select(model.sparse_rule, model.k, inputs.sparse_metadata, a, b)
    n, k = a.shape
    va = exact_values(model.decode("a", a))
    vb = exact_values(model.decode("b", b))
    vc = exact_values(model.decode("c", inputs.c))
    if model.scale_format is not None:
        blk = model.datapath.block
        sa = exact_values(model.decode("scale", np.repeat(inputs.scale_a, blk, axis=-1)))
        sb = exact_values(model.decode("scale", np.repeat(inputs.scale_b, blk, axis=-1)))
    out = []
    for i in range(n):
        total = vc[i]
        if not isinstance(total, Fraction):
            out.append(None)
            continue
        ok = True
        for j in range(k):
            x, y = va[i * k + j], vb[i * k + j]
            factors = [x, y]
            if model.scale_format is not None:
                factors += [sa[i * k + j], sb[i * k + j]]
            if not all(isinstance(f, Fraction) for f in factors):
                ok = False
                break
            p = Fraction(1)
            for f in factors:
                p *= f
            total += p
        out.append(total if ok else None)
    return out


def _ordered(words, fmt_bits, integer, model):
    """Words as integers on which a difference of 1 is one ULP (float) or one unit (integer)."""
    w = np.asarray(words).astype(np.uint64)
    if integer:
        v = w.astype(np.int64)
        return np.where(v >= 1 << (fmt_bits - 1), v - (1 << fmt_bits), v)
    sign = (w >> np.uint64(fmt_bits - 1)) & np.uint64(1)
    mag = (w & np.uint64((1 << (fmt_bits - 1)) - 1)).astype(np.int64)
    return np.where(sign == 1, -mag, mag)


@attrs.frozen
class OutputGrid:
    """The values a datapath's result can take: its output format's exponent
    range with the fraction bits its rounding keeps.

    Usually the D format itself (f32: 23 fraction bits); a datapath that rounds
    to fewer bits than its word holds (``rz-e8m13``: 13 fraction bits in an f32
    word, docs/datapaths.md §2) has the coarser grid, and differences are
    counted in its ULPs.  Duck-types the ``bias`` / ``man_bits`` of a format
    for :func:`ulp_of`.
    """

    name: str           # "f32", "E8M13", ...
    bias: int
    man_bits: int       # fraction bits kept


def output_grid(*models) -> OutputGrid:
    """The output grid of ``models`` (the coarsest one when their roundings keep different bits)."""
    grids = []
    for m in models:
        enc, fd = m.encoding, m.d_format
        if enc.frac_bits == fd.man_bits and enc.exp_bits == fd.exp_bits:
            grids.append(OutputGrid(fd.name, fd.bias, fd.man_bits))
        else:
            grids.append(OutputGrid(f"E{enc.exp_bits}M{enc.frac_bits}", enc.bias, enc.frac_bits))
    return min(grids, key=lambda g: g.man_bits)


def ulp_of(fmt, x: Fraction) -> Fraction:
    """One ULP of float format ``fmt`` (or an :class:`OutputGrid`) at the exact value ``x``."""
    emin = 1 - fmt.bias
    if x == 0:
        return Fraction(2) ** (emin - fmt.man_bits)
    mag = abs(x)
    e = mag.numerator.bit_length() - mag.denominator.bit_length()
    if Fraction(2) ** e > mag:
        e -= 1
    return Fraction(2) ** (max(e, emin) - fmt.man_bits)


def ulp_distance(fmt, x, y) -> float:
    """``|x - y|`` in ULPs of ``fmt`` at the smaller nonzero magnitude (adjacent words are 1 apart,
    also across a binade boundary); inf if either is inf or NaN."""
    if not (isinstance(x, Fraction) and isinstance(y, Fraction)):
        return float("inf")
    mags = [abs(v) for v in (x, y) if v != 0]
    return float(abs(x - y) / ulp_of(fmt, min(mags) if mags else Fraction(0)))


@attrs.frozen(eq=False)
class Example:
    """A differing case, shrunk."""

    inputs: Inputs
    da: int
    db: int
    support: int


@attrs.frozen(eq=False)
class Comparison:
    model_a: object
    model_b: object
    inputs: Inputs
    da: np.ndarray
    db: np.ndarray
    differ: np.ndarray           # bool per case
    nan_payload_only: int        # both NaN, different words (not counted as differing)
    ulps: np.ndarray             # per case |difference| in ULPs of ``grid`` (inf where a special value differs)
    example: Example | None
    grid: OutputGrid | None = None   # the output grid the ULPs count (None: integer output, units)
    seed: int = 0

    @property
    def unit(self) -> str:
        return "units" if self.grid is None else f"ULPs of {self.grid.name}"

    @property
    def cases(self) -> int:
        return len(self.inputs)

    @property
    def count(self) -> int:
        return int(self.differ.sum())

    @property
    def max_ulps(self):
        finite = self.ulps[self.differ & np.isfinite(self.ulps)]
        return float(finite.max()) if finite.size else None

    @property
    def special_differences(self) -> int:
        return int((self.differ & ~np.isfinite(self.ulps)).sum())

    def by_kind(self) -> dict:
        return {k: (int((self.differ & (self.inputs.kind == i)).sum()), int((self.inputs.kind == i).sum()))
                for i, k in enumerate(KINDS)}


def _run(model, inputs: Inputs):
    return np.asarray(model.dot(inputs.a, inputs.b, inputs.c, **inputs.kwargs())).astype(np.uint64)


def _differs(ma, mb, da, db):
    nan_a = ma.decode("d", da).cls == NAN
    nan_b = mb.decode("d", db).cls == NAN
    both_nan = nan_a & nan_b
    return (da != db) & ~both_nan, int(((da != db) & both_nan).sum())


def _support(model, inputs: Inputs, i: int) -> int:
    dec_a = model.decode("a", inputs.a[i])
    dec_b = model.decode("b", inputs.b[i])
    terms = int(((dec_a.cls != ZERO) & (dec_b.cls != ZERO)).sum())
    return terms + int(model.decode("c", inputs.c[i:i + 1]).cls[0] != ZERO)


def shrink(ma, mb, inputs: Inputs) -> Inputs:
    """Greedily zero terms (and C) of a one-row differing case while it still differs;
    then try replacing B elements by 1."""
    cur = inputs

    def differs(x):
        try:
            d, _ = _differs(ma, mb, _run(ma, x), _run(mb, x))
        except MMAError:
            return False
        return bool(d[0])

    K = cur.a.shape[1]
    for k in range(K):
        if int(cur.a[0, k]) == 0 and int(cur.b[0, k]) == 0:
            continue
        trial = attrs.evolve(cur, a=cur.a.copy(), b=cur.b.copy())
        trial.a[0, k] = 0
        trial.b[0, k] = 0
        if differs(trial):
            cur = trial
    if int(cur.c[0]):
        trial = attrs.evolve(cur, c=np.zeros_like(cur.c))
        if differs(trial):
            cur = trial
    one_b = encode_exact(ma.b_format, Fraction(1))
    if one_b is not None:
        for k in range(K):
            if int(cur.a[0, k]) == 0 or int(cur.b[0, k]) == one_b:
                continue
            trial = attrs.evolve(cur, b=cur.b.copy())
            trial.b[0, k] = one_b
            if differs(trial):
                cur = trial
    if cur.scale_a is not None:
        one_s = encode_exact(ma.scale_format, Fraction(1))
        if one_s is not None:
            for name in ("scale_a", "scale_b"):
                for j in range(getattr(cur, name).shape[1]):
                    arr = getattr(cur, name).copy()
                    if int(arr[0, j]) == one_s:
                        continue
                    arr[0, j] = one_s
                    trial = attrs.evolve(cur, **{name: arr})
                    if differs(trial):
                        cur = trial
    return cur


def compare(model_a, model_b, cases: int = 4096, seed: int = 0, shrink_example: bool = True) -> Comparison:
    """Run both models on ``cases`` generated rows and analyse where they differ."""
    check_compatible(model_a, model_b)
    if cases < 1:
        raise ValueError("cases must be at least 1")
    inputs = generate(model_a, model_b, cases, seed)
    da, db = _run(model_a, inputs), _run(model_b, inputs)
    differ, nan_only = _differs(model_a, model_b, da, db)
    fd = model_a.d_format
    grid = None if fd.integer else output_grid(model_a, model_b)
    bits = model_a.encoding.word_bits
    if fd.integer:
        oa = _ordered(da, bits, True, model_a)
        ob = _ordered(db, bits, True, model_b)
        ulps = np.abs(oa - ob).astype(np.float64)
    else:
        ulps = np.zeros(len(da), dtype=np.float64)
        idx = np.flatnonzero(differ)
        va = exact_values(model_a.decode("d", da[idx]))
        vb = exact_values(model_b.decode("d", db[idx]))
        for i, x, y in zip(idx, va, vb):
            ulps[i] = ulp_distance(grid, x, y)
    example = None
    idx = np.flatnonzero(differ)
    if idx.size:
        # prefer finite differences, then the fewest nonzero terms, then the largest difference
        cand = idx[np.argsort(~np.isfinite(ulps[idx]), kind="stable")][:256]
        best = min(cand, key=lambda i: (not np.isfinite(ulps[i]), _support(model_a, inputs, int(i)), -ulps[i]))
        row = inputs.row(int(best))
        if shrink_example:
            row = shrink(model_a, model_b, row)
        ea, eb = int(_run(model_a, row)[0]), int(_run(model_b, row)[0])
        example = Example(row, ea, eb, _support(model_a, row, 0))
    return Comparison(model_a, model_b, inputs, da, db, differ, nan_only, ulps, example, grid, seed)


def compare_many(models, cases: int = 4096, seed: int = 0, shrink_example: bool = True) -> list:
    """Each of ``models[1:]`` against ``models[0]`` (the reference): one :class:`Comparison` each.

    All pairs are checked for compatibility before anything runs.
    """
    models = list(models)
    if len(models) < 2:
        raise IncompatibleDatapaths("compare needs at least two datapaths")
    for m in models[1:]:
        check_compatible(models[0], m)
    return [compare(models[0], m, cases=cases, seed=seed, shrink_example=shrink_example) for m in models[1:]]


# ------------------------------------------------------------------ report
def _num(x) -> str:
    x = float(x)
    return str(int(x)) if x.is_integer() and abs(x) < 1e15 else f"{x:.4g}"


def _params_diff(ma, mb) -> list:
    da, db = ma.datapath, mb.datapath
    out = []
    if da.accumulator != db.accumulator:
        out.append(f"accumulator: {da.accumulator} vs {db.accumulator}")
    pa, pb = da.parameters, db.parameters
    for key in sorted(set(pa) | set(pb)):
        if pa.get(key) != pb.get(key):
            out.append(f"{key}: {pa.get(key, '-')} vs {pb.get(key, '-')}")
    ca, cb = da.chunk or da.stored_k, db.chunk or db.stored_k
    if ca != cb:
        out.append(f"elements per step (L): {ca} vs {cb}")
    if da.rounding != db.rounding:
        out.append(f"rounding: {da.rounding} vs {db.rounding}")
    for op in ("a", "b", "c"):
        fa, fb = getattr(ma, f"{op}_format"), getattr(mb, f"{op}_format")
        if fa != fb:
            out.append(f"{op.upper()} container/decoder: {fa.describe()} vs {fb.describe()}")
    return out


def _steps_text(model) -> str:
    dp = model.datapath
    chunk = dp.chunk or dp.stored_k
    return f"{dp.stored_k // chunk} x {chunk}"


def example_table(cmp: Comparison) -> list:
    """The smallest example as text lines: every operand decoded, products, exact sum, both results."""
    ex = cmp.example
    ma, mb = cmp.model_a, cmp.model_b
    x = ex.inputs
    lines = []
    fa, fb, fc = ma.a_format, ma.b_format, ma.c_format
    a_vals = exact_values(ma.decode("a", x.a[0]))
    b_vals = exact_values(ma.decode("b", x.b[0]))
    rows = []
    blk = ma.datapath.block
    for k in range(x.a.shape[1]):
        if int(x.a[0, k]) == 0 and int(x.b[0, k]) == 0:
            continue
        p = a_vals[k] * b_vals[k] if all(isinstance(v, Fraction) for v in (a_vals[k], b_vals[k])) else "special"
        rows.append((str(k), hex_word(x.a[0, k], fa.container_bits), value_text(ma, "a", x.a[0, k]),
                     hex_word(x.b[0, k], fb.container_bits), value_text(ma, "b", x.b[0, k]),
                     fraction_text(p) if isinstance(p, Fraction) else p))
    zero_terms = x.a.shape[1] - len(rows)
    head = ("k", "a word", "a value", "b word", "b value", "a*b")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        lines.append("    " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if zero_terms:
        lines.append(f"    (the other {zero_terms} elements of a and b are +0)")
    if x.scale_a is not None:
        for name in ("scale_a", "scale_b"):
            arr = getattr(x, name)[0]
            lines.append(f"    {name} (one per {blk}) = " + ", ".join(
                f"{hex_word(w, ma.scale_format.container_bits)} ({value_text(ma, 'scale', w)})" for w in arr))
    if x.sparse_metadata is not None:
        lines.append("    sparse_metadata = " + ", ".join(hex_word(w, 32) for w in x.sparse_metadata[0]))
    lines.append(f"    c = {hex_word(x.c[0], fc.container_bits)} ({value_text(ma, 'c', x.c[0])})")
    exact = exact_results(ma, x)[0]
    if exact is not None:
        lines.append(f"    exact c + sum(a*b) = {fraction_text(exact)}")
    bits = ma.encoding.word_bits
    for name, model, d in ((f"A: {safe(ma.arch)}", ma, ex.da), (f"B: {safe(mb.arch)}", mb, ex.db)):
        err = ""
        if exact is not None and cmp.grid is not None:
            vd = exact_values(model.decode("d", np.array([d], dtype=np.uint64)))[0]
            if isinstance(vd, Fraction):
                e = (vd - exact) / ulp_of(cmp.grid, exact)
                err = f"   error vs exact: {float(e):+.4g} ulp"
        lines.append(f"    {name:20s} D = {hex_word(d, bits)} ({value_text(model, 'd', d)}){err}")
    if ma.d_format.integer:
        oa = _ordered(np.array([ex.da]), bits, True, ma)[0]
        ob = _ordered(np.array([ex.db]), bits, True, mb)[0]
        lines.append(f"    difference: {abs(int(oa) - int(ob))} units")
    else:
        x = exact_values(ma.decode("d", np.array([ex.da], dtype=np.uint64)))[0]
        y = exact_values(mb.decode("d", np.array([ex.db], dtype=np.uint64)))[0]
        lines.append(f"    difference: {_num(ulp_distance(cmp.grid, x, y))} ulp of {cmp.grid.name}"
                     " (at the smaller nonzero result)")
    return lines


def report(cmp: Comparison) -> str:
    ma, mb = cmp.model_a, cmp.model_b
    lines = [
        f"compare  A: {safe(ma.arch)}  {safe(ma.instruction)}  ({safe(ma.status.kind)})",
        f"         B: {safe(mb.arch)}  {safe(mb.instruction)}  ({safe(mb.status.kind)})",
        safe(f"  A: {ma.datapath.accumulator} {ma.datapath.parameters}, steps {_steps_text(ma)}, "
             f"rounding {ma.datapath.rounding}"),
        safe(f"  B: {mb.datapath.accumulator} {mb.datapath.parameters}, steps {_steps_text(mb)}, "
             f"rounding {mb.datapath.rounding}"),
    ]
    diffs = _params_diff(ma, mb)
    lines.append("  the datapaths differ in: " + (safe("; ".join(diffs)) if diffs else "nothing in their tables"))
    n, c = cmp.cases, cmp.count
    lines.append(f"cases: {n:,}; results differ in {c:,} ({100.0 * c / n:.2f} %)")
    for kind, (bad, tot) in cmp.by_kind().items():
        if tot:
            lines.append(f"  {kind:13s} {bad:6,} of {tot:6,} ({100.0 * bad / tot:.2f} %)")
    if cmp.nan_payload_only:
        lines.append(f"  ({cmp.nan_payload_only} cases where both are NaN with different payloads are not counted)")
    if c:
        unit = cmp.unit
        mx = cmp.max_ulps
        lines.append(f"largest difference: {_num(mx) if mx is not None else '-'} {unit}"
                     + ("" if ma.d_format.integer else " (at the smaller nonzero result)")
                     + (f"; {cmp.special_differences} cases differ in a special value (inf/NaN)" if cmp.special_differences else ""))
        finite = cmp.ulps[cmp.differ & np.isfinite(cmp.ulps)]
        if finite.size:
            top = cmp.grid.man_bits if cmp.grid is not None else 23
            edges = [0, 1, 2, 4, 16, 256, 2 ** top]
            names = ["<1", "1", "2-3", "4-15", "16-255", f"256-2^{top}", f">=2^{top}"]
            which = np.searchsorted(edges, finite, side="right") - 1
            parts = [f"{names[j]}: {int((which == j).sum())}" for j in range(len(names)) if (which == j).any()]
            lines.append(f"  differences by size ({unit}): " + ", ".join(parts))
        ex = cmp.example
        lines.append(f"smallest example found ({ex.support} nonzero terms incl. C, of K={ma.k} products + C):")
        lines += example_table(cmp)
    else:
        lines.append("no difference found")
    return "\n".join(lines)


def _side(model) -> dict:
    return {"arch": model.arch, "instruction": model.instruction, "status": model.status.kind}


def to_json(results, cases: int, seed: int) -> dict:
    """The ``mmasim.compare/1`` document for comparisons against one reference
    (docs/user-guide.md, "JSON output")."""
    results = list(results)
    pairs = []
    for r in results:
        ex = None
        if r.example is not None:
            x = r.example.inputs
            bits_a, bits_b = r.model_a.a_format.container_bits, r.model_a.b_format.container_bits
            ex = {
                "a": [hex_word(w, bits_a) for w in x.a[0]],
                "b": [hex_word(w, bits_b) for w in x.b[0]],
                "c": hex_word(x.c[0], r.model_a.c_format.container_bits),
                "scale_a": None if x.scale_a is None else [hex_word(w, r.model_a.scale_format.container_bits) for w in x.scale_a[0]],
                "scale_b": None if x.scale_b is None else [hex_word(w, r.model_a.scale_format.container_bits) for w in x.scale_b[0]],
                "sparse_metadata": None if x.sparse_metadata is None else [hex_word(w, 32) for w in x.sparse_metadata[0]],
                "d_reference": hex_word(r.example.da, r.model_a.encoding.word_bits),
                "d_other": hex_word(r.example.db, r.model_b.encoding.word_bits),
                "nonzero_terms": r.example.support,
            }
        pairs.append({
            "other": _side(r.model_b),
            "cases": r.cases,
            "differ": r.count,
            "nan_payload_only": r.nan_payload_only,
            "unit": r.unit,
            "max_difference": r.max_ulps,
            "special_differences": r.special_differences,
            "by_kind": {k: {"differ": bad, "cases": tot} for k, (bad, tot) in r.by_kind().items()},
            "example": ex,
        })
    return {"schema": "mmasim.compare/1", "reference": _side(results[0].model_a) if results else None,
            "cases": cases, "seed": seed, "pairs": pairs}


#: image types ``plot`` writes (matplotlib's Agg backend)
PLOT_TYPES = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp")


def abs_errors(model, grid, exact, words) -> tuple:
    """``|D - exact|`` in ULPs of ``grid`` for each finite case, and how many
    cases had no finite exact value or a special D (left out)."""
    vals = exact_values(model.decode("d", words))
    out, skipped = [], 0
    for e, v in zip(exact, vals):
        if e is None or not isinstance(v, Fraction):
            skipped += 1
            continue
        out.append(float(abs(v - e) / ulp_of(grid, e)))
    return np.asarray(out, dtype=np.float64), skipped


def plot(results, path, max_points: int = 20000) -> None:
    """Histogram of each datapath's error against the exact result ``C + sum(a*b)``.

    ``results``: a :class:`Comparison` or a list of them against one reference
    (:func:`compare_many`).  The x axis is ``|D - exact|`` in ULPs of the output
    grid (:func:`output_grid`: the D format with the fraction bits the rounding
    keeps), on a log scale (bins of a factor of 2), the y axis the number of
    cases, log scale; exact results are counted in the legend.  The image type
    comes from the file name (:data:`PLOT_TYPES`).

    Needs matplotlib (optional dependency); raises :class:`ImportError` with
    an explanation when it is missing.
    """
    results = [results] if isinstance(results, Comparison) else list(results)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib (pip install matplotlib); it is an optional dependency") from exc
    first = results[0]
    ma = first.model_a
    if ma.d_format.integer:
        raise IncompatibleDatapaths("--plot draws float errors; the output format is an integer")
    grid = output_grid(ma, *(r.model_b for r in results))
    n = min(first.cases, max_points)
    sides = [(ma, first.da[:n], first.inputs)] + [(r.model_b, r.db[:n], r.inputs) for r in results]
    series = []
    for model, words, inputs in sides:
        sub = inputs if n == len(inputs) else Inputs(
            *(None if v is None else v[:n] for v in attrs.astuple(inputs, recurse=False)))
        err, skipped = abs_errors(model, grid, exact_results(ma, sub), words)
        series.append((model, err, skipped))
    nonzero = np.concatenate([e[e > 0] for _, e, _ in series] + [np.zeros(0)])
    lo = np.floor(np.log2(nonzero.min())) if nonzero.size else -1.0
    hi = np.ceil(np.log2(nonzero.max())) if nonzero.size else 1.0
    bins = 2.0 ** np.arange(lo, max(hi, lo + 1) + 1)
    fig, ax = plt.subplots(figsize=(9, 5))
    differs = [None] + [r.count for r in results]
    for (model, err, skipped), count in zip(series, differs):
        label = f"{model.arch}: exact in {int((err == 0).sum()):,} of {len(err):,}"
        if skipped:
            label += f" ({skipped:,} inf/NaN left out)"
        if count is not None:
            label += f"; differs from {ma.arch} in {count:,} of {first.cases:,}"
        ax.hist(err[err > 0], bins=bins, label=label, histtype="step", linewidth=1.4)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(f"|D - exact result| in units of the last place (ULPs) of {grid.name}, log scale")
    ax.set_ylabel("number of cases (log scale)")
    ax.set_title(f"{ma.instruction}: error of each result against the exact C + sum(a*b)\n"
                 f"{n:,} generated cases (seed {first.seed}); bins of a factor of 2", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path)
    finally:
        plt.close(fig)
