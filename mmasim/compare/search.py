"""The difference search of ``mmasim compare``: run two models on the same
generated rows, measure how far their words are apart on the output grid, and
find (and greedily shrink) the smallest differing example; keep the case of the largest
difference too."""

from __future__ import annotations

from fractions import Fraction

import attrs
import numpy as np

from mmasim.arith.decode import NAN, ZERO
from mmasim.errors import MMAError
from mmasim.arith.exact import encode_exact, exact_values, ulp_distance
from mmasim.execution.progress import doing, done
from mmasim.compare.inputs import IncompatibleDatapaths, Inputs, Kind, check_compatible, generate


@attrs.frozen
class OutputGrid:
    """The values a datapath's result can take: its output format's exponent
    range with the fraction bits its rounding keeps.

    Usually the D format itself (f32: 23 fraction bits); a datapath that rounds
    to fewer bits than its word holds (``rz-e8m13``: 13 fraction bits in an f32
    word, docs/datapaths.md §2) has the coarser grid, and differences are
    counted in its ULPs.  Duck-types the ``bias`` / ``man_bits`` of a format
    for :func:`mmasim.arith.exact.ulp_of`.
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


def size_bins(grid: OutputGrid | None):
    """The bins differences are counted in, in ULPs of ``grid`` (units for an integer output):
    ``(edges, names)``, bin ``j`` holding ``edges[j] <= x < edges[j + 1]`` (the last one open);
    every difference below one ULP is in the first bin."""
    top = grid.man_bits if grid is not None else 23
    edges = [0, 1, 2, 4, 16, 256, 2 ** top]
    return edges, ["<1", "1", "2-3", "4-15", "16-255", f"256-2^{top}", f">=2^{top}"]


def bin_counts(values, grid: OutputGrid | None) -> list:
    """How many of the finite ``values`` (non-negative) fall in each of :func:`size_bins`."""
    edges, names = size_bins(grid)
    values = np.asarray(values, dtype=np.float64)
    which = np.searchsorted(edges, values[np.isfinite(values)], side="right") - 1
    return [int((which == j).sum()) for j in range(len(names))]


def ordered(words, model) -> np.ndarray:
    """``model``'s output words as integers on which a difference of 1 is one ULP
    (float) or one unit (integer)."""
    bits = model.encoding.word_bits
    w = np.asarray(words).astype(np.uint64)
    if model.d_format.integer:
        v = w.astype(np.int64)
        return np.where(v >= 1 << (bits - 1), v - (1 << bits), v)
    sign = (w >> np.uint64(bits - 1)) & np.uint64(1)
    mag = (w & np.uint64((1 << (bits - 1)) - 1)).astype(np.int64)
    return np.where(sign == 1, -mag, mag)


@attrs.frozen(eq=False)
class Example:
    """A differing case: generated case ``origin``, shrunk (``shrunk``: terms zeroed, B
    elements and scales set to 1, while the results still differ) into a case that need
    not be one of the counted ones."""

    inputs: Inputs
    da: int
    db: int
    support: int
    origin: int = 0
    shrunk: bool = False


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
    largest: Example | None = None   # the counted case of the largest finite difference (max_ulps), as generated

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
        """``{kind name: (differing, cases)}`` in drawing order."""
        return {k.value: (int((self.differ & (self.inputs.kind == k.value)).sum()), int((self.inputs.kind == k.value).sum()))
                for k in Kind}


def output_words(model, inputs: Inputs) -> np.ndarray:
    """``model``'s output words on ``inputs``."""
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
    then try replacing B elements (and scales) by 1."""
    cur = inputs

    def differs(x):
        try:
            d, _ = _differs(ma, mb, output_words(ma, x), output_words(mb, x))
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


#: the most input words (A and B of every case) one comparison holds in memory: 1 GiB of uint64
MAX_WORDS = 1 << 27


class CaseCountError(MMAError, ValueError):
    """A number of cases compare cannot run: fewer than one, or more than its inputs fit in memory."""


def max_cases(model) -> int:
    """The most cases one comparison of ``model``'s instruction runs (:data:`MAX_WORDS`)."""
    return MAX_WORDS // (2 * max(model.k, 1))


#: progress steps of one :func:`compare` (inputs, A, B, differences, example)
STEPS = 5


def compare(model_a, model_b, cases: int = 4096, seed: int = 0, shrink_example: bool = True,
            bar=None) -> Comparison:
    """Run both models on ``cases`` generated rows and analyse where they differ.
    ``bar``: a progress bar (:mod:`mmasim.execution.progress`) advanced by :data:`STEPS` steps."""
    check_compatible(model_a, model_b)
    if isinstance(cases, bool) or not isinstance(cases, (int, np.integer)) or not 1 <= cases <= max_cases(model_a):
        raise CaseCountError(f"cases must be an integer from 1 to {max_cases(model_a):,} for K = {model_a.k} (every "
                             f"case is held in memory: at most {MAX_WORDS:,} input words); got {cases!r}; run "
                             "several seeds (--seed) for more")
    doing(bar, f"{model_b.arch}: generating inputs")
    inputs = generate(model_a, model_b, cases, seed)
    done(bar)
    doing(bar, f"running {model_a.arch}")
    da = output_words(model_a, inputs)
    done(bar)
    doing(bar, f"running {model_b.arch}")
    db = output_words(model_b, inputs)
    done(bar)
    doing(bar, f"{model_b.arch}: measuring the differences")
    differ, nan_only = _differs(model_a, model_b, da, db)
    fd = model_a.d_format
    grid = None if fd.integer else output_grid(model_a, model_b)
    if fd.integer:
        ulps = np.abs(ordered(da, model_a) - ordered(db, model_b)).astype(np.float64)
    else:
        ulps = np.zeros(len(da), dtype=np.float64)
        idx = np.flatnonzero(differ)
        va = exact_values(model_a.decode("d", da[idx]))
        vb = exact_values(model_b.decode("d", db[idx]))
        for i, x, y in zip(idx, va, vb):
            ulps[i] = ulp_distance(grid, x, y)
    done(bar)
    doing(bar, f"{model_b.arch}: shrinking an example")
    example = None
    idx = np.flatnonzero(differ)
    if idx.size:
        # prefer finite differences, then the fewest nonzero terms, then the largest difference
        cand = idx[np.argsort(~np.isfinite(ulps[idx]), kind="stable")][:256]
        best = int(min(cand, key=lambda i: (not np.isfinite(ulps[i]), _support(model_a, inputs, int(i)), -ulps[i])))
        original = inputs.row(best)
        row = shrink(model_a, model_b, original) if shrink_example else original
        ea, eb = int(output_words(model_a, row)[0]), int(output_words(model_b, row)[0])
        example = Example(row, ea, eb, _support(model_a, row, 0), best, row is not original)
    finite = idx[np.isfinite(ulps[idx])]
    largest = None
    if finite.size:
        i = int(finite[np.argmax(ulps[finite])])
        largest = Example(inputs.row(i), int(da[i]), int(db[i]), _support(model_a, inputs, i), i)
    done(bar)
    return Comparison(model_a, model_b, inputs, da, db, differ, nan_only, ulps, example, grid, seed, largest)


def compare_many(models, cases: int = 4096, seed: int = 0, shrink_example: bool = True, bar=None) -> list:
    """Each of ``models[1:]`` against ``models[0]`` (the reference): one :class:`Comparison` each.

    All pairs are checked for compatibility before anything runs.  ``bar``: a progress bar
    advanced by :data:`STEPS` steps per pair.
    """
    models = list(models)
    if len(models) < 2:
        raise IncompatibleDatapaths("compare needs at least two datapaths")
    for m in models[1:]:
        check_compatible(models[0], m)
    return [compare(models[0], m, cases=cases, seed=seed, shrink_example=shrink_example, bar=bar)
            for m in models[1:]]
