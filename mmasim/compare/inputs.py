"""The inputs of ``mmasim compare``: which models can share them, and the rows it draws.

Rows come in four named kinds (:class:`Kind`), each drawn by its own strategy
from the formats of the two models (words from :mod:`mmasim.operands.wordgen`):
uniform random words, values near one, cancellation-heavy rows and
adversarial rows (one dominant term and terms just below the window,
subnormals, overflow, C on binade boundaries).  Nothing here knows an
architecture.
"""

from __future__ import annotations

import enum
from fractions import Fraction

import attrs
import numpy as np

from mmasim.errors import MMAError
from mmasim.arith.exact import encode_exact, exact_values
from mmasim.operands.wordgen import WordGen, WordKind, sparse_metadata


class IncompatibleDatapaths(MMAError):
    """The two datapaths cannot be run on the same inputs (formats, K, scales or sparsity differ)."""


class Kind(enum.Enum):
    """The kinds of rows :func:`generate` draws, in the order it draws them; the value is the
    name reports and ``--json`` (``by_kind``) use."""

    RANDOM = "random"
    NEAR_ONE = "near-one"
    CANCELLATION = "cancellation"
    ADVERSARIAL = "adversarial"


#: the kind names, in drawing order
KINDS = tuple(k.value for k in Kind)
#: the share of the rows each kind gets (:data:`Kind.NEAR_ONE` also takes what rounding leaves)
SHARE = {Kind.RANDOM: 0.25, Kind.NEAR_ONE: 0.30, Kind.CANCELLATION: 0.25, Kind.ADVERSARIAL: 0.20}


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


# ------------------------------------------------------------------ inputs
@attrs.frozen(eq=False)
class Inputs:
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    scale_a: np.ndarray | None
    scale_b: np.ndarray | None
    sparse_metadata: np.ndarray | None
    kind: np.ndarray           # the :class:`Kind` value (name) of each row

    def __len__(self):
        return int(self.c.shape[0])

    def row(self, i):
        take = lambda x: None if x is None else x[i:i + 1].copy()
        return Inputs(take(self.a), take(self.b), take(self.c), take(self.scale_a), take(self.scale_b),
                      take(self.sparse_metadata), take(self.kind))

    def head(self, n: int):
        """The first ``n`` rows."""
        return Inputs(*(None if v is None else v[:n] for v in attrs.astuple(self, recurse=False)))

    def kwargs(self) -> dict:
        kw = {}
        if self.scale_a is not None:
            kw["scale_a"], kw["scale_b"] = self.scale_a, self.scale_b
        if self.sparse_metadata is not None:
            kw["sparse_metadata"] = self.sparse_metadata
        return kw


@attrs.frozen(eq=False)
class _Draw:
    """What a row strategy draws for and into: the reference model, one word
    generator per operand, the operand arrays, the generator of random numbers."""

    model: object
    ga: WordGen
    gb: WordGen
    gc: WordGen
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    rng: np.random.Generator


def _random_rows(d: _Draw, r) -> None:
    """Uniform random words (in some rows every special value redrawn as finite)."""
    rng, K, nr = d.rng, d.a.shape[1], len(r)
    finite_rows = rng.random(nr) < 0.6
    for g, out, shape, pick in ((d.ga, d.a, (nr, K), finite_rows[:, None]), (d.gb, d.b, (nr, K), finite_rows[:, None]),
                                (d.gc, d.c, (nr,), finite_rows)):
        out[r] = np.where(pick, g.words(rng, shape, WordKind.FINITE), g.words(rng, shape, WordKind.UNIFORM))


def _near_one_rows(d: _Draw, r) -> None:
    """Values near one: every fractional bit of the sum shows."""
    rng, K, nr = d.rng, d.a.shape[1], len(r)
    for g, out, shape in ((d.ga, d.a, (nr, K)), (d.gb, d.b, (nr, K)), (d.gc, d.c, (nr,))):
        out[r] = g.words(rng, shape, WordKind.NEAR_ONE)


def _cancellation_rows(d: _Draw, r) -> None:
    """Pairs of products cancel exactly, C cancels a product, small survivors."""
    rng, K, nr = d.rng, d.a.shape[1], len(r)
    if not nr:
        return
    A = d.ga.near(rng, (nr, K), -12, 12)
    B = d.gb.near(rng, (nr, K), -2, 2)
    pairs = rng.random((nr, K // 2)) < 0.6
    for j in range(K // 2):
        A[:, 2 * j + 1] = np.where(pairs[:, j], d.ga.negate(A[:, 2 * j]), A[:, 2 * j + 1])
        B[:, 2 * j + 1] = np.where(pairs[:, j], B[:, 2 * j], B[:, 2 * j + 1])
    C = d.gc.near(rng, (nr,), -6, 6)
    d.a[r], d.b[r], d.c[r] = A, B, C
    if not d.model.a_format.integer:
        _cancel_c(d, r)


def _adversarial_integer_rows(d: _Draw, r) -> None:
    """Integers at the ends of their range: where wrapping and saturation show."""
    rng, K, nr, bits = d.rng, d.a.shape[1], len(r), d.model.a_format.container_bits
    top_a = np.array([0, 1, (1 << bits) - 1, 1 << (bits - 1)], dtype=np.uint64)
    d.a[r] = top_a[rng.integers(0, 4, size=(nr, K))]
    d.b[r] = top_a[rng.integers(0, 4, size=(nr, K))]
    topc = np.array([0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0], dtype=np.uint64)
    d.c[r] = topc[rng.integers(0, 4, size=nr)]


def _adversarial_rows(d: _Draw, r) -> None:
    """One dominant product, terms just below the window, subnormals, overflow, C on binade boundaries."""
    rng, K, nr, ma, ga, gb, gc = d.rng, d.a.shape[1], len(r), d.model, d.ga, d.gb, d.gc
    if not nr:
        return
    if ma.a_format.integer:
        _adversarial_integer_rows(d, r)
        return
    sub = rng.integers(0, 5, size=nr)
    emax = ma.a_format.bias
    A = ga.near(rng, (nr, K), -1, 1)
    B = gb.near(rng, (nr, K), -1, 1)
    # terms 20..30 binades below the dominant one (split over a and b)
    drop = rng.integers(18, 31, size=(nr, K))
    A_small = ga.shift_exponent(A, -(drop // 2))
    B_small = gb.shift_exponent(B, -(drop - drop // 2))
    small = rng.random((nr, K)) < 0.7
    small[:, 0] = False
    A = np.where((sub[:, None] == 0) & small, A_small, A)
    B = np.where((sub[:, None] == 0) & small, B_small, B)
    # subnormals and zeros
    tiny = (sub[:, None] == 1) & (rng.random((nr, K)) < 0.7)
    A = np.where(tiny, ga.words(rng, (nr, K), WordKind.SUBNORMAL), A)
    # ... times small B: products near the bottom of the range, where a
    # zero term's exponent or a window floor shows
    low = (sub[:, None] == 1) & (rng.random((nr, K)) < 0.5)
    B = np.where(low, gb.shift_exponent(B, -rng.integers(0, 40, size=(nr, K))), B)
    zero = (sub[:, None] == 1) & (rng.random((nr, K)) < 0.3)
    A = np.where(zero, np.uint64(0), A)
    # near overflow
    big = (sub[:, None] == 2) & (rng.random((nr, K)) < 0.5)
    A = np.where(big, ga.words(rng, (nr, K), WordKind.HUGE), A)
    B = np.where(big, gb.words(rng, (nr, K), WordKind.HUGE), B)
    # every product near the bottom of the range (zero terms, window floors
    # and subnormal results show here); C zero or tiny
    bottom = sub[:, None] == 4
    A = np.where(bottom, ga.near(rng, (nr, K), -emax - 3, -emax + 3), A)
    depth = rng.integers(0, 40, size=(nr, 1)) + rng.integers(0, 16, size=(nr, K))
    B = np.where(bottom, gb.shift_exponent(gb.near(rng, (nr, K), -1, 1), -depth), B)
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
    d.a[r], d.b[r], d.c[r] = A, B, C
    if K >= 2:
        _cancel_c(d, r[sub == 3], only_some=True)


#: the strategy that draws each kind of row
STRATEGIES = {Kind.RANDOM: _random_rows, Kind.NEAR_ONE: _near_one_rows,
              Kind.CANCELLATION: _cancellation_rows, Kind.ADVERSARIAL: _adversarial_rows}


def _cancel_c(d: _Draw, rows, only_some=False):
    """Set C = -(a0*b0) exactly (moved by an ulp in some rows) where C's format holds it."""
    if len(rows) == 0:
        return
    ma, rng = d.model, d.rng
    va = exact_values(ma.decode("a", d.a[rows, 0]))
    vb = exact_values(ma.decode("b", d.b[rows, 0]))
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
        d.c[i] = w


def generate(ma, mb, n: int, seed: int = 0) -> Inputs:
    """``n`` input rows for two compatible models, split over the kinds (:data:`SHARE`)."""
    rng = np.random.default_rng(seed)
    K = ma.k
    counts = {kind: int(n * share) for kind, share in SHARE.items()}
    counts[Kind.NEAR_ONE] += n - sum(counts.values())
    kind = np.repeat([k.value for k in Kind], [counts[k] for k in Kind])
    d = _Draw(ma, WordGen(ma.a_format, ma.a_format == mb.a_format), WordGen(ma.b_format, ma.b_format == mb.b_format),
              WordGen(ma.c_format, ma.c_format == mb.c_format), np.zeros((n, K), dtype=np.uint64),
              np.zeros((n, K), dtype=np.uint64), np.zeros(n, dtype=np.uint64), rng)
    for k in Kind:
        STRATEGIES[k](d, np.flatnonzero(kind == k.value))

    scale_a = scale_b = None
    if ma.scale_format is not None:
        gs = WordGen(ma.scale_format, ma.scale_format == mb.scale_format)
        blocks = ma.datapath.blocks
        scale_a = gs.near(rng, (n, blocks), -3, 3)
        scale_b = gs.near(rng, (n, blocks), -3, 3)
        wild = rng.random((n, blocks)) < 0.15
        scale_a = np.where(wild, gs.near(rng, (n, blocks), -60, 60), scale_a)
        wild = rng.random((n, blocks)) < 0.15
        scale_b = np.where(wild, gs.near(rng, (n, blocks), -60, 60), scale_b)
    md = None if ma.sparse_rule is None else sparse_metadata(ma.sparse_rule, K, n, rng)
    return Inputs(d.a, d.b, d.c, scale_a, scale_b, md, kind)
