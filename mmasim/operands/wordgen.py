"""Random container words of a format, by named kind (:class:`WordKind`).

The one word generator of the project: ``mmasim compare`` draws its inputs with it, as do
the backend-equivalence tests and ``benchmarks/bench.py``.  It knows no architecture:
everything is read off the :class:`~mmasim.arith.formats.Format`, and every draw comes from
the ``numpy.random.Generator`` passed in, so one seed gives the same words.
"""

from __future__ import annotations

import enum

import attrs
import numpy as np

from mmasim.arith.formats import Format


class WordKind(enum.Enum):
    """The named kinds of words :meth:`WordGen.words` draws (or their values as strings):

    ``uniform``
        every field drawn uniformly (sign, exponent, fraction; an integer format:
        every value), with 30 % of the exponents moved to the corners (0, 1, the
        top two, the bias) so that subnormals and the inf/NaN exponent show
        (inf itself, a zero fraction, is rare: kind ``edge`` has it).
    ``finite``
        ``uniform`` with the exponent capped at the largest finite one.
    ``near_one``
        finite values with exponents within 3 binades of 1.
    ``subnormal``
        exponents around the bottom of the range: zeros, subnormals, the smallest
        normals.
    ``huge``
        exponents in the top binades: values near overflow.
    ``edge``
        the corners of the encoding (:func:`edge_fields`): zeros, the smallest
        subnormal, the largest finite, inf and NaN patterns, both signs.
    ``mixed``
        80 % ``uniform``, 20 % ``edge``.

    An integer format has no exponent: ``near_one``, ``subnormal`` and ``huge``
    draw every value of it.  With ``padding`` the bits of the container outside
    the element field are random (a datapath must ignore them); without, zero.
    """

    UNIFORM = "uniform"
    FINITE = "finite"
    NEAR_ONE = "near_one"
    SUBNORMAL = "subnormal"
    HUGE = "huge"
    EDGE = "edge"
    MIXED = "mixed"


def edge_fields(fmt: Format) -> np.ndarray:
    """Field values (before the shift into the container) at the corners of ``fmt``."""
    bits = fmt.field_bits
    if fmt.integer:
        top = 1 << (bits - 1)
        vals = [0, 1, 2, top - 1, top, top + 1, (1 << bits) - 1, (1 << bits) - 2]
    else:
        E, M = fmt.exp_bits, fmt.man_bits
        emax = (1 << E) - 1
        mags = [0, 1, (1 << M) - 1 if M else 0, 1 << M, (min(fmt.bias, emax)) << M,
                (emax << M), (emax << M) | 1, (emax << M) | ((1 << M) - 1),
                ((emax - 1) << M) | ((1 << M) - 1), (1 << (E + M)) - 1]
        vals = list(mags)
        if fmt.signed:
            vals += [v | (1 << (E + M)) for v in mags]
    return np.array(sorted({v & ((1 << bits) - 1) for v in vals}), dtype=np.uint64)


@attrs.frozen
class WordGen:
    """Random container words of one float or integer format.

    ``padding``: random bits outside the element field (only where whoever
    reads the words ignores them, e.g. not when two datapaths read the
    container differently).
    """

    fmt: Format
    padding: bool = True

    @property
    def emax_field(self) -> int:
        """The largest exponent field of a finite value (the top one, unless IEEE inf/NaN use it)."""
        top = (1 << self.fmt.exp_bits) - 1
        return top - 1 if self.fmt.nan == "ieee" else top

    def _pad(self, rng, words):
        f = self.fmt
        if self.padding and f.field_bits < f.container_bits:
            field_mask = ((1 << f.field_bits) - 1) << f.field_shift
            pad_mask = ((1 << f.container_bits) - 1) & ~field_mask
            noise = rng.integers(0, 1 << min(f.container_bits, 62), size=words.shape, dtype=np.uint64)
            words = words | (noise & np.uint64(pad_mask))
        return words

    def pack(self, rng, sign, e_field, frac) -> np.ndarray:
        """Words from sign bits, exponent fields and fraction fields (padding drawn from ``rng``)."""
        f = self.fmt
        x = (np.asarray(e_field, dtype=np.int64) << f.man_bits) | np.asarray(frac, dtype=np.int64)
        if f.signed:
            x = x | (np.asarray(sign, dtype=np.int64) << (f.exp_bits + f.man_bits))
        return self._pad(rng, x.astype(np.uint64) << np.uint64(f.field_shift))

    def _frac(self, rng, shape):
        f = self.fmt
        return rng.integers(0, 1 << f.man_bits, size=shape) if f.man_bits else np.zeros(shape, dtype=np.int64)

    def uniform(self, rng, shape, finite_only: bool = False) -> np.ndarray:
        """Kind ``uniform`` (``finite_only``: kind ``finite``)."""
        f = self.fmt
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
        return self.pack(rng, sign, e, self._frac(rng, shape))

    def near(self, rng, shape, lo: int, hi: int, center: int = 0) -> np.ndarray:
        """Finite values with unbiased exponents in [center+lo, center+hi] (clipped to the format)."""
        f = self.fmt
        if f.integer:
            top = 1 << (f.container_bits - (1 if f.signed else 0))
            v = rng.integers(-top if f.signed else 0, top, size=shape)
            return (v & ((1 << f.container_bits) - 1)).astype(np.uint64)
        sign = rng.integers(0, 2, size=shape)
        e = rng.integers(lo, hi + 1, size=shape) + center + f.bias
        e = np.clip(e, 0, self.emax_field)
        frac = self._frac(rng, shape)
        if f.nan == "max":  # avoid the all-ones NaN pattern
            frac = np.where(e == (1 << f.exp_bits) - 1, np.minimum(frac, (1 << f.man_bits) - 2), frac)
        return self.pack(rng, sign, e, frac)

    def edge(self, rng, shape) -> np.ndarray:
        """Kind ``edge``: words of :func:`edge_fields`."""
        edges = edge_fields(self.fmt)
        field = edges[rng.integers(0, len(edges), size=shape)]
        return self._pad(rng, field << np.uint64(self.fmt.field_shift))

    def words(self, rng, shape, kind) -> np.ndarray:
        """``shape`` words of ``kind`` (a :class:`WordKind` or its value)."""
        kind = WordKind(kind)
        bias = 0 if self.fmt.integer else self.fmt.bias
        if kind is WordKind.UNIFORM:
            return self.uniform(rng, shape)
        if kind is WordKind.FINITE:
            return self.uniform(rng, shape, finite_only=True)
        if kind is WordKind.NEAR_ONE:
            return self.near(rng, shape, -3, 3)
        if kind is WordKind.SUBNORMAL:
            return self.near(rng, shape, -bias - 4, -bias + 2)
        if kind is WordKind.HUGE:
            return self.near(rng, shape, bias - 1, bias + 1)
        if kind is WordKind.EDGE:
            return self.edge(rng, shape)
        pick = rng.random(shape) < 0.8
        return np.where(pick, self.uniform(rng, shape), self.edge(rng, shape))

    def negate(self, words) -> np.ndarray:
        """The words with the sign flipped (unsigned and integer formats: unchanged)."""
        f = self.fmt
        if f.integer or not f.signed:
            return words
        return words ^ np.uint64(1 << (f.field_shift + f.exp_bits + f.man_bits))

    def shift_exponent(self, words, delta) -> np.ndarray:
        """Move the exponent field of finite normal words by ``delta`` (clipped at the subnormal range)."""
        f = self.fmt
        x = (words >> np.uint64(f.field_shift)).astype(np.int64)
        e = (x >> f.man_bits) & ((1 << f.exp_bits) - 1)
        e2 = np.clip(e + delta, 1 if f.subnormals else 0, self.emax_field)
        x = (x & ~(((1 << f.exp_bits) - 1) << f.man_bits)) | (e2 << f.man_bits)
        pad = words & ~np.uint64(((1 << f.field_bits) - 1) << f.field_shift)
        return (x.astype(np.uint64) << np.uint64(f.field_shift)) | pad


def words(fmt: Format, shape, rng, kind="uniform", padding: bool = True) -> np.ndarray:
    """``shape`` container words of ``fmt`` of ``kind`` (:class:`WordKind` or its value), as uint64."""
    return WordGen(fmt, padding).words(rng, shape, kind)


def sparse_metadata(rule, k: int, rows: int, rng) -> np.ndarray:
    """``rows`` rows of metadata words of sparsity ``rule`` for logical ``k``, every selector legal."""
    legal = np.array(sorted(rule.selectors), dtype=np.uint64)
    chunks = rule.chunks(k)
    nib = legal[rng.integers(0, len(legal), size=(rows, chunks))]
    n_words = rule.words(k)
    nib = np.concatenate([nib, np.zeros((rows, n_words * 8 - chunks), dtype=np.uint64)], axis=1)
    shifts = np.arange(8, dtype=np.uint64) * np.uint64(4)
    return (nib.reshape(rows, n_words, 8) << shifts).sum(axis=-1).astype(np.uint64)


def operands(model, rows: int, rng, kind="uniform", padding: bool = True):
    """``(a, b, c, kwargs)`` for ``model.dot``: ``rows`` rows of ``kind`` words; ``kwargs``
    holds ``scale_a`` / ``scale_b`` (also of ``kind``) and ``sparse_metadata`` where the
    datapath takes them."""
    dp = model.datapath
    a = words(model.a_format, (rows, dp.k), rng, kind, padding)
    b = words(model.b_format, (rows, dp.k), rng, kind, padding)
    c = words(model.c_format, (rows,), rng, kind, padding)
    kw = {}
    if dp.scale:
        kw["scale_a"] = words(model.scale_format, (rows, dp.blocks), rng, kind, padding)
        kw["scale_b"] = words(model.scale_format, (rows, dp.blocks), rng, kind, padding)
    if dp.sparse:
        kw["sparse_metadata"] = sparse_metadata(model.sparse_rule, model.k, rows, rng)
    return a, b, c, kw


__all__ = ["WordKind", "WordGen", "edge_fields", "words", "sparse_metadata", "operands"]
