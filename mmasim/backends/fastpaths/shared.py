"""What every family's fast-path decision reads: the records, the word tables and their facts.

The reference accumulators (:mod:`mmasim.accumulators`) are the spec.  Beside them the numpy
backend's lean paths (:mod:`mmasim.backends.numpy.lean`) and the compiled kernels
(:mod:`mmasim.backends.numba.kernels`, and the per-row bodies of :mod:`mmasim.backends.cuda.rows`)
compute the same words in fewer operations, where their arithmetic is proved exact.  Each
family's module of this package decides which of them takes a plan and proves them exact; this
one holds what they share:

- the records: a :class:`Decision` (truthy where a path applies; else ``reason`` says why
  not), a :class:`Bound` (one proof evaluated), the tile kernels' :class:`TileLayout`;
- **the word tables**: the registered decoder's outputs over every container word
  (:func:`word_tables`) or over the codes above the fraction field (:func:`code_tables`),
  and what the proofs read of them (:func:`table_facts`);
- the joint A x B table of narrow formats (:func:`joint_table`: the grouped window and the
  group-scaled window read A and B pairwise through it), the decision of a built-in family's
  kernel (:func:`builtin_decision`) and the packed decode table's bound (:func:`packed_bound`,
  every kernel's decode specs).

Imports neither numba nor a backend: the numba tile kernels' layout constants come in as a
:class:`TileLayout`.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from mmasim.arith.codes import GROUP_DEAD   # the joint q of an A x B pair with a zero factor (grouped paths)
from mmasim.arith.decode import FINITE, INF, ZERO, decode_float

CODE_BITS = 12       # the largest table over a wide format's bits above its fraction


# ------------------------------------------------------------------ records
class Decision:
    """Whether fast path ``path`` applies to one plan: truthy where it does, else ``reason``
    says why not.  ``facts`` (each also an attribute) are what the path is built from."""

    def __init__(self, path: str, reason: str = "", **facts):
        self.path, self.reason, self.ok, self.facts = path, reason, not reason, facts
        self.__dict__.update(facts)

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"<{self.path}: {'applies' if self.ok else self.reason}>"


class Bound(NamedTuple):
    """One bound proof evaluated: ``holds`` (also the truth value) and the values it compared."""

    name: str
    holds: bool
    values: dict

    def __bool__(self) -> bool:
        return self.holds

    def why_not(self) -> str:
        return f"{self.name} fails ({', '.join(f'{k} {v}' for k, v in self.values.items())})"


class TileLayout(NamedTuple):
    """The numba tile kernels' layout constants the proofs depend on: ``tcode`` low bits of a
    tabled element hold ``r + rbias``; ``2**-quantum`` is built for ``|quantum| <= neg_f``;
    ``dead`` is the grouped kernel's joint q of a pair with a zero factor."""

    tcode: int
    rbias: int
    neg_f: int
    dead: int


class TableFacts(NamedTuple):
    """What the proofs read of one decode table; ``live`` entries are the ones a path takes
    as finite values (FINITE words; for a code table every code below INF)."""

    sane: bool          # every class ZERO .. NAN, sign 0 / 1, significand >= 0
    m_max_all: int      # the largest significand of any entry
    q_abs_all: int      # the largest |q| of any entry
    r_abs_all: int      # the largest |r| of any entry
    live: bool          # a live entry exists
    specials: bool      # an inf / NaN entry exists
    exact_zero: bool    # every FINITE significand > 0, every ZERO one 0
    m_max: int          # the largest live significand (0 without one)
    q_min: int          # the smallest / largest live q (0 without one)
    q_max: int
    q_abs: int          # the largest live |q| (0 without one)
    r_abs: int          # the largest live |r| (0 without one)
    offsets: tuple      # the distinct r - q of the live entries
    below_r1: bool      # every live value is below 2**(r + 1)


class JointTable(NamedTuple):
    """The grouped paths' joint A x B table, indexed by ``(a << bshift) | b``: ``P`` the signed
    product of the two significands aligned to the formats' smallest q, ``Q`` the sum of the two
    q (:data:`GROUP_DEAD` with a zero factor); ``roff`` = r - q of a product, ``q0`` the sum of
    the smallest q."""

    P: np.ndarray
    Q: np.ndarray
    roff: int
    q0: int
    bshift: int


# -------------------------------------------------------------- word tables
@functools.lru_cache(maxsize=None)
def word_tables(fmt, decoder):
    """``(cls, sign, m, q, r)`` (int64) of every container word of a format of at
    most 16 bits, decoded once by its registered decoder."""
    dec = decoder(fmt, np.arange(1 << fmt.container_bits, dtype=np.uint64))
    return tuple(np.asarray(x, dtype=np.int64).reshape(-1) for x in (dec.cls, dec.sign, dec.m, dec.q, dec.r))


@functools.lru_cache(maxsize=None)
def code_tables(fmt, decoder):
    """``(cls, sign, m, q, r)`` of every code of the container bits above the
    fraction field (sign and exponent: at most ``CODE_BITS``), each decoded by the
    decoder with a zero fraction; ``None`` unless every word decodes as its code
    with the fraction field added to ``m``, an inf / NaN code staying inf / NaN
    (checked against :func:`mmasim.arith.decode.decode_float`, the one decoder taken
    here, on sample fractions and low container bits)."""
    M, shift = fmt.man_bits, fmt.field_shift + fmt.man_bits
    if decoder is not decode_float or fmt.container_bits > 32 or not 0 < fmt.container_bits - shift <= CODE_BITS:
        return None
    codes = np.arange(1 << (fmt.container_bits - shift), dtype=np.int64)
    dec = decoder(fmt, (codes << shift).astype(np.uint64))
    cls, sign, m, q, r = (np.asarray(x, dtype=np.int64) for x in (dec.cls, dec.sign, dec.m, dec.q, dec.r))
    rng = np.random.default_rng(0)
    fracs = np.unique(np.concatenate([[0, (1 << M) - 1], 1 << np.arange(M), rng.integers(0, 1 << M, 16)]))
    low = rng.integers(0, 1 << fmt.field_shift, (len(codes), len(fracs))) if fmt.field_shift else 0
    words = (codes[:, None] << shift) | (fracs[None, :] << fmt.field_shift) | low
    got = decoder(fmt, words.astype(np.uint64))
    special = (cls >= INF)[:, None]
    want_m = m[:, None] + fracs[None, :]
    if not ((got.cls >= INF) == special).all():
        return None
    fin = ~special & np.ones(words.shape, dtype=bool)
    if not ((got.m == want_m)[fin].all() and (got.cls == np.where(want_m > 0, FINITE, ZERO))[fin].all()
            and all((getattr(got, k) == t[:, None])[fin].all() for k, t in (("sign", sign), ("q", q), ("r", r)))):
        return None
    return cls, sign, m, q, r


def table_facts(tables, live) -> TableFacts:
    """:class:`TableFacts` of decode tables ``(cls, sign, m, q, r)``, ``live`` the mask of
    the entries taken as finite values."""
    cls, sign, m, q, r = tables
    fin = cls == FINITE
    lm, lq, lr = m[live], q[live], r[live]
    return TableFacts(
        sane=bool(cls.min() >= 0 and cls.max() <= 3 and sign.min() >= 0 and sign.max() <= 1 and m.min() >= 0),
        m_max_all=int(m.max()), q_abs_all=int(np.abs(q).max()), r_abs_all=int(np.abs(r).max()),
        live=bool(live.any()), specials=bool((cls >= INF).any()),
        exact_zero=bool((m[fin] > 0).all() and (m[cls == ZERO] == 0).all()),
        m_max=int(lm.max(initial=0)), q_min=int(lq.min(initial=0)), q_max=int(lq.max(initial=0)),
        q_abs=int(np.abs(lq).max(initial=0)), r_abs=int(np.abs(lr).max(initial=0)),
        offsets=tuple(int(x) for x in np.unique(lr - lq)),
        below_r1=bool((lm < np.int64(1) << np.clip(lr - lq + 1, 0, 62)).all()))


@functools.lru_cache(maxsize=None)
def word_facts(fmt, decoder) -> TableFacts:
    """:func:`table_facts` of a format's :func:`word_tables` (live: the FINITE words)."""
    tables = word_tables(fmt, decoder)
    return table_facts(tables, tables[0] == FINITE)


@functools.lru_cache(maxsize=None)
def code_facts(fmt, decoder):
    """:func:`table_facts` of a format's :func:`code_tables` (live: every code below INF,
    a zero code holding the subnormals), or ``None`` without code tables."""
    tables = code_tables(fmt, decoder)
    return None if tables is None else table_facts(tables, tables[0] < INF)


def scale_facts(fmt, decoder):
    """``(word_facts, "")`` of a scale format tabled by every fast path (a container of up to
    16 bits with a finite word), else ``(None, the reason)``."""
    if fmt.container_bits > 16:
        return None, f"scale format {fmt.key}: container over 16 bits"
    facts = word_facts(fmt, decoder)
    if not facts.live:
        return None, f"scale format {fmt.key}: no finite word"
    return facts, ""


class NarrowFormat(NamedTuple):
    """A narrow A / B format of the grouped paths: per container word the value ``v * 2**qmin``
    (``v`` signed), its ``q`` (:data:`GROUP_DEAD` for a zero) and the constant r - q ``off``."""

    v: np.ndarray
    q: np.ndarray
    off: int
    qmin: int


@functools.lru_cache(maxsize=None)
def narrow_format(fmt, decoder) -> Decision:
    """:class:`NarrowFormat` (as ``narrow``) of a format of at most 8 bits whose every word is
    finite or zero, r - q constant, every value below 2**(r + 1), q within 16 binades and
    every ``v`` of at most 16 bits (a joint entry then fits int32 with room for the group)."""
    path = "narrow A / B decode"
    if fmt.container_bits > 8:
        return Decision(path, f"{fmt.key}: container over 8 bits")
    cls, sign, m, q, r = word_tables(fmt, decoder)
    f = word_facts(fmt, decoder)
    if not f.live or ((cls != FINITE) & (cls != ZERO)).any():
        return Decision(path, f"{fmt.key}: no finite word, or an inf / NaN word")
    if not f.exact_zero or f.m_max_all >= 1 << 16:
        return Decision(path, f"{fmt.key}: a significand out of range")
    if len(f.offsets) != 1 or not f.below_r1:
        return Decision(path, f"{fmt.key}: r - q not constant, or a value not below 2**(r + 1)")
    if f.q_max - f.q_min > 16 or abs(f.q_min) > 1 << 20:
        return Decision(path, f"{fmt.key}: q spans {f.q_max - f.q_min} > 16 binades")
    fin = cls == FINITE
    v = np.where(fin, m << np.where(fin, q - f.q_min, 0), 0)
    if int(v.max()).bit_length() > 16:
        return Decision(path, f"{fmt.key}: an aligned significand over 16 bits")
    return Decision(path, narrow=NarrowFormat(np.where(sign == 1, -v, v), np.where(fin, q, GROUP_DEAD),
                                              f.offsets[0], f.q_min))


def joint_table(plan) -> Decision:
    """The :class:`JointTable` (as ``joint``) of a plan's A and B: both :func:`narrow_format` s,
    in containers of 16 bits together (the grouped paths read A and B pairwise through it)."""
    path = "joint A x B table"
    fa, fb = plan.a_format, plan.b_format
    if fa.container_bits + fb.container_bits > 16:
        return Decision(path, "A and B containers over 16 bits together")
    ab = [narrow_format(fmt, plan.decoder(fmt)) for fmt in (fa, fb)]
    for d in ab:
        if not d:
            return Decision(path, d.reason)
    na, nb = ab[0].narrow, ab[1].narrow
    P = (na.v[:, None] * nb.v[None, :]).reshape(-1)
    Q = np.where((na.q[:, None] == GROUP_DEAD) | (nb.q[None, :] == GROUP_DEAD), GROUP_DEAD,
                 na.q[:, None] + nb.q[None, :]).reshape(-1)
    if int(np.abs(P).max()) >= 1 << 31:
        return Decision(path, "a joint entry beyond int32")
    return Decision(path, joint=JointTable(P.astype(np.int32), Q.astype(np.int32), na.off + nb.off,
                                           na.qmin + nb.qmin, fb.container_bits))


# ------------------------------------------------------------- shared decisions and proofs
def builtin_decision(plan, family, path, scaled=None, modes=("rz", "rne")):
    """Decision of a numba kernel of the built-in ``family`` that needs declared parameters,
    an encoding mode of ``modes`` and (``scaled`` True / False) scales or none."""
    if not plan.builtin or plan.datapath.accumulator != family:
        return Decision(path, f"not the built-in {family!r} accumulator")
    if scaled is not None and (plan.datapath.scale is not None) != scaled:
        return Decision(path, "no block scales" if scaled else "block scales")
    if plan.encoding.mode not in modes:
        return Decision(path, f"rounding mode {plan.encoding.mode!r} ({' or '.join(modes)} only)")
    if not plan.declared:
        return Decision(path, "parameters not declared by the accumulator's Params")
    return Decision(path)


def packed_bound(fmt, decoder) -> Bound:
    """The numba decode table of ``fmt`` packs every word into one int64 (``cls | sign << 2 |
    m << 3 | (q + 2**15) << 23 | (r + 2**15) << 39``, 63 bits): exact when every class fits 2
    bits, the sign 1, m 20 and q, r 16 as offsets from 2**15."""
    f = word_facts(fmt, decoder)
    return Bound("packed word bound", f.sane and f.m_max_all < 1 << 20 and f.q_abs_all < 1 << 15
                 and f.r_abs_all < 1 << 15, dict(sane=f.sane, m_max=f.m_max_all, q_abs=f.q_abs_all,
                                                 r_abs=f.r_abs_all))
