"""Which fast path computes a plan, and why each fast path is exact.

The reference accumulators (:mod:`mmasim.accumulators`) are the spec.  Beside them the numpy
backend's lean paths (:mod:`mmasim.backends.numpy.lean`) and the numba backend's kernels
(:mod:`mmasim.backends.numba.kernels`) compute the same words in fewer operations, where
their arithmetic is proved exact.  This module owns, for every one of them:

- **eligibility**: one function per fast path, returning a :class:`Decision` (truthy where
  the path applies; else ``reason`` says why not);
- **the word tables**: the registered decoder's outputs over every container word
  (:func:`word_tables`) or over the codes above the fraction field (:func:`code_tables`),
  and what the proofs read of them (:func:`table_facts`);
- **the bound proofs**: one function per proof, returning a :class:`Bound` (the values it
  compares and whether it holds), the proof its docstring.

The paths lay their own tables out from these (the lean path's folded tables, the kernels'
packed and lane tables).  The numba tile kernels' layout constants come in as a
:class:`TileLayout`, so that this module imports neither numba nor a backend.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from mmasim.arith.codes import GROUP_DEAD   # the joint q of an A x B pair with a zero factor (grouped paths)
from mmasim.arith.decode import FINITE, INF, ZERO, decode_float

CODE_BITS = 12       # the largest table over a wide format's bits above its fraction

#: the parameters of the window accumulator that make more than one product per group
#: or that read C beyond its window (the grouped paths and the general kernels')
GROUP_RULES = ("c_dominant", "c_relative", "subnormal_redo")


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


# ------------------------------------------------------------- eligibility
def _window_base(plan):
    """The reason the built-in window accumulator's fast paths cannot take ``plan``, or ''."""
    if not plan.builtin or plan.datapath.accumulator != "window":
        return "not the built-in 'window' accumulator"
    if plan.encoding.mode not in ("rz", "rne"):
        return f"rounding mode {plan.encoding.mode!r} (rz or rne only)"
    if not plan.declared:
        return "parameters not declared by the accumulator's Params"
    return ""


def one_product_window(plan) -> Decision:
    """Whether ``plan`` is the truncating window with one product per group (``group`` 1,
    none of :data:`GROUP_RULES`), scaled or not, of the built-in accumulator: the datapaths
    of the one-product fast paths of both backends (:func:`lean_window`, :func:`lane_tiles`;
    sparse datapaths reach the compiled kernel as dense rows)."""
    path = "one product per group"
    why = _window_base(plan)
    if why:
        return Decision(path, why)
    p = plan.datapath.parameters
    if int(p.get("group", 1)) != 1:
        return Decision(path, f"group {p['group']}")
    rules = [rule for rule in GROUP_RULES if p.get(rule) is not None]
    if rules:
        return Decision(path, "group rules " + ", ".join(rules))
    if p.get("scale_floor") is not None and plan.datapath.scale is None:
        return Decision(path, "scale_floor without scales")
    return Decision(path)


class LeanFormat(NamedTuple):
    """The lean numpy decode of one format: ``tables`` over every word (``shift`` None) or over
    the codes above the fraction field (``shift`` = the fraction field's end, ``low`` its
    mask); every live entry's r - q is ``off``; significands have at most ``bits`` bits."""

    tables: tuple
    shift: object
    low: int
    off: int
    bits: int


@functools.lru_cache(maxsize=None)
def lean_format(fmt, decoder, whole=True) -> Decision:
    """The lean numpy decode of one format (:class:`LeanFormat` as ``lean``): through
    :func:`word_tables` (``whole``, containers of up to 16 bits), else :func:`code_tables`.
    Its folding of the classes into q needs |m| < 2**30 and |q| < 2**20 (zero at
    ``LZQ`` = -2**30, inf / NaN at ``LSQ`` = 2**36, a product's q alone telling them apart),
    and a product's raw exponent read as q plus one offset per format pair needs r - q
    constant over the live entries."""
    path = "lean numpy decode"
    if whole and fmt.container_bits <= 16:
        tables, facts, shift, low = word_tables(fmt, decoder), word_facts(fmt, decoder), None, 0
    else:
        tables, facts = code_tables(fmt, decoder), code_facts(fmt, decoder)
        if tables is None:
            return Decision(path, f"{fmt.key}: no word or code tables")
        shift, low = fmt.field_shift + fmt.man_bits, (1 << fmt.man_bits) - 1
    if not facts.sane or facts.m_max_all >= 1 << 30:
        return Decision(path, f"{fmt.key}: a class, sign or significand out of range")
    if shift is None and not facts.exact_zero:
        return Decision(path, f"{fmt.key}: a finite word with m 0 or a zero with m != 0")
    if facts.q_abs >= 1 << 20:
        return Decision(path, f"{fmt.key}: |q| {facts.q_abs} >= 2**20")
    if len(facts.offsets) > 1:
        return Decision(path, f"{fmt.key}: r - q not constant ({facts.offsets})")
    off = facts.offsets[0] if facts.offsets else 0
    return Decision(path, lean=LeanFormat(tables, shift, low, off, int(facts.m_max + low).bit_length()))


def _scale_facts(fmt, decoder):
    """``(word_facts, "")`` of a scale format tabled by every fast path (a container of up to
    16 bits with a finite word), else ``(None, the reason)``."""
    if fmt.container_bits > 16:
        return None, f"scale format {fmt.key}: container over 16 bits"
    facts = word_facts(fmt, decoder)
    if not facts.live:
        return None, f"scale format {fmt.key}: no finite word"
    return facts, ""


def lean_window(plan) -> Decision:
    """The numpy :class:`~mmasim.backends.numpy.lean.LeanWindow`: the dense one-product window
    (:func:`one_product_window`) with A and B of a :func:`lean_format`, scales (if any) in
    containers of up to 16 bits with a finite word, and :func:`lean_window_bound`.  Facts:
    ``a``, ``b`` (:class:`LeanFormat`), ``roff`` (r - q of an A x B product), ``bound``."""
    path = "numpy LeanWindow"
    if plan.datapath.sparse:
        return Decision(path, "sparse (the reference selects)")
    shape = one_product_window(plan)
    if not shape:
        return Decision(path, shape.reason)
    ab = [lean_format(fmt, plan.decoder(fmt)) for fmt in (plan.a_format, plan.b_format)]
    for d in ab:
        if not d:
            return Decision(path, d.reason)
    a, b = ab[0].lean, ab[1].lean
    roff = a.off + b.off
    F = int(plan.parameters["F"])
    bits, below, nf, soff = a.bits + b.bits, a.bits <= a.off + 1 and b.bits <= b.off + 1, 2, 0
    if plan.datapath.scale is not None:
        s, why = _scale_facts(plan.scale_format, plan.decoder(plan.scale_format))
        if s is None:
            return Decision(path, why)
        soff, nf = s.offsets[0], 4
        bits += 2 * s.m_max.bit_length()
        below = below and s.below_r1
    bound = lean_window_bound(F, roff, soff, bits, nf, plan.step, below)
    if not bound:
        return Decision(path, bound.why_not())
    return Decision(path, a=a, b=b, roff=roff, bound=bound)


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


def lean_grouped(plan) -> Decision:
    """The numpy :class:`~mmasim.backends.numpy.lean.LeanGrouped` (and, through
    :func:`grouped_tiles`, the numba grouped kernel): the dense grouped block-scaled window,
    zeros excluded, more than one product per group or group rules, every group (and
    C-dominant group) inside one scale block and every block inside one step, A and B
    :func:`narrow_format` s of 16 bits together, scales in containers of up to 16 bits with
    finite words at or above their q, and :func:`grouped_bound`.  Facts: ``joint``
    (:class:`JointTable`), ``group``, ``cd`` (``(F, group)`` of ``c_dominant`` or None),
    ``bound``."""
    path = "numpy LeanGrouped"
    dp = plan.datapath
    why = _window_base(plan)
    if why:
        return Decision(path, why)
    if dp.sparse:
        return Decision(path, "sparse (the reference selects)")
    if dp.scale is None:
        return Decision(path, "no block scales")
    p = plan.parameters
    if p.get("zeros", "excluded") != "excluded":
        return Decision(path, "zeros counted (e_zero)")
    if one_product_window(plan):
        return Decision(path, "one product per group (numpy LeanWindow's)")
    g = int(p.get("group", 1))
    cd = None if p.get("c_dominant") is None else (int(p["c_dominant"]["F"]), int(p["c_dominant"]["group"]))
    block, k, step = dp.block, dp.k, plan.step
    cg = cd[1] if cd else g
    if not block or block % g or block % cg or cg % g or step % block or k % step:
        return Decision(path, f"groups {g} / {cg} not inside blocks of {block}, or blocks not inside steps of {step}")
    jt = joint_table(plan)
    if not jt:
        return Decision(path, jt.reason)
    joint = jt.joint
    s, why = _scale_facts(plan.scale_format, plan.decoder(plan.scale_format))
    if s is None:
        return Decision(path, why)
    bound = grouped_bound(int(p["F"]), cd[0] if cd else 0, cg, step, int(np.abs(joint.P).max()), joint.roff,
                          s.offsets[0], s.below_r1)
    if not bound:
        return Decision(path, bound.why_not())
    return Decision(path, joint=joint, group=g, cd=cd, bound=bound)


class LaneFacts(NamedTuple):
    """An A / B (or scale) format of the numba tile kernels: ``mode`` 0 tabled (every word),
    1 decoded arithmetically (wide IEEE formats with subnormals); significands of at most
    ``bits`` bits, every |r| at most ``rmax``."""

    mode: int
    bits: int
    rmax: int


@functools.lru_cache(maxsize=None)
def lane_format(fmt, decoder, layout: TileLayout) -> Decision:
    """The binary64 lane decode of an A / B format (:class:`LaneFacts` as ``lane``).

    Containers of up to 16 bits are tabled: every live word's exact value is a binary64 of at
    most 52 - ``tcode`` significant bits (its low ``tcode`` bits then hold r + ``rbias``, with
    every |r| below ``rbias / 2``), |q| < 2**9, and every value below 2**(r + 1) (the sum bound
    of :func:`lane_bound`).  Wider formats: decoded arithmetically where they are
    :func:`~mmasim.arith.decode.decode_float` IEEE formats with subnormals, signed, of at most
    32 bits, E <= 11, M <= 26 and bias <= 1022 (their values are exact binary64s scaled by
    2**(1023 - bias))."""
    path = "lane decode"
    if fmt.container_bits > 16:
        E, M = fmt.exp_bits, fmt.man_bits
        if (decoder is decode_float and fmt.nan == "ieee" and fmt.subnormals and fmt.signed
                and not fmt.integer and fmt.container_bits <= 32 and E <= 11 and M <= 26 and fmt.bias <= 1022):
            return Decision(path, lane=LaneFacts(1, M + 1, max(fmt.bias, (1 << E) - 1 - fmt.bias)))
        return Decision(path, f"{fmt.key}: over 16 bits and not an IEEE format decoded arithmetically")
    f = word_facts(fmt, decoder)
    if not f.sane or not f.exact_zero or f.m_max_all >= 1 << (52 - layout.tcode):
        return Decision(path, f"{fmt.key}: a class, sign or significand out of range")
    if f.q_abs >= 1 << 9 or f.r_abs >= layout.rbias // 2:
        return Decision(path, f"{fmt.key}: |q| {f.q_abs} or |r| {f.r_abs} out of range")
    if not f.below_r1:
        return Decision(path, f"{fmt.key}: a value not below 2**(r + 1)")
    return Decision(path, lane=LaneFacts(0, f.m_max.bit_length(), f.r_abs))


@functools.lru_cache(maxsize=None)
def lane_scale(fmt, decoder, layout: TileLayout) -> Decision:
    """The scale format of the tile kernels (:class:`LaneFacts` as ``lane``): containers of up
    to 16 bits with a finite word, every value below 2**(r + 1) and |q| < ``neg_f / 2`` (the
    product of two scales is scaled exactly by ``tiles._lane_scales``)."""
    path = "lane scale decode"
    f, why = _scale_facts(fmt, decoder)
    if f is None:
        return Decision(path, why)
    if not f.below_r1:
        return Decision(path, f"scale format {fmt.key}: a value not below 2**(r + 1)")
    if f.q_abs >= layout.neg_f // 2:
        return Decision(path, f"scale format {fmt.key}: |q| {f.q_abs} >= {layout.neg_f // 2}")
    return Decision(path, lane=LaneFacts(0, f.m_max.bit_length(), f.r_abs))


def _lane_ab(plan, layout, path):
    ab = [lane_format(fmt, plan.decoder(fmt), layout) for fmt in (plan.a_format, plan.b_format)]
    for d in ab:
        if not d:
            return None, Decision(path, d.reason)
    return (ab[0].lane, ab[1].lane), None


def lane_tiles(plan, layout: TileLayout, c_kind: int, d_kind: int) -> Decision:
    """The numba tile kernel (``tiles.lean_variant``) in binary64 lanes: the one-product
    window (:func:`one_product_window`), A and B of a :func:`lane_format`, decoded alike;
    scales (if any) of a :func:`lane_scale`, A and B tabled, and not e_zero with a
    scale floor; C and D of a tile decode (``c_kind`` / ``d_kind`` > 0:
    ``tiles._c_kind`` of their decode specs), an even step (two elements per pass), and
    :func:`lane_bound`.  Facts: ``mode`` (A / B decode), ``bound``."""
    path = "numba lane tiles"
    lanes, no = _lane_ab(plan, layout, path)
    if no is not None:
        return no
    shape = one_product_window(plan)
    if not shape:
        return Decision(path, shape.reason)
    a, b = lanes
    bits, rmax, nf = a.bits + b.bits, a.rmax + b.rmax, 2
    p = plan.parameters
    if plan.datapath.scale is not None:
        s = lane_scale(plan.scale_format, plan.decoder(plan.scale_format), layout)
        if not s:
            return Decision(path, s.reason)
        if a.mode or b.mode:
            return Decision(path, "block scales with an A / B format decoded arithmetically")
        if p.get("zeros", "excluded") != "excluded" and p.get("scale_floor") is not None:
            return Decision(path, "e_zero with a scale floor")
        bits, rmax, nf = bits + 2 * s.lane.bits, rmax + 2 * s.lane.rmax, 4
    cd_r = max(max(f.bias, (1 << f.exp_bits) - f.bias) for f in (plan.c_format, plan.d_format))
    bound = lane_bound(int(p["F"]), plan.step, bits, nf, rmax, cd_r, layout.neg_f)
    if not bound:
        return Decision(path, bound.why_not())
    if plan.step % 2:
        return Decision(path, f"odd step {plan.step} (two elements per pass)")
    if a.mode != b.mode:
        return Decision(path, "A and B decoded differently (one tabled, one arithmetically)")
    if c_kind <= 0 or d_kind <= 0:
        return Decision(path, "C or D not an IEEE format with subnormals decoded arithmetically")
    return Decision(path, mode=a.mode, bound=bound)


def grouped_tiles(plan, layout: TileLayout) -> Decision:
    """The numba grouped kernel (``window.grouped_variant``): A and B of a
    :func:`lane_format` (the kernel shares the tile kernels' build), more than one product
    per group or a C-dominant group, the numpy :func:`lean_grouped` (its joint table and its
    bound), and the kernel's dead code that of the joint table.  Facts: ``joint``."""
    path = "numba grouped tiles"
    _, no = _lane_ab(plan, layout, path)
    if no is not None:
        return no
    p = plan.parameters
    if int(p.get("group", 1)) <= 1 and p.get("c_dominant") is None:
        return Decision(path, "one product per group, no C-dominant group")
    g = lean_grouped(plan)
    if not g:
        return Decision(path, g.reason)
    if layout.dead != GROUP_DEAD:
        return Decision(path, f"the kernel's dead code {layout.dead} is not the joint table's {GROUP_DEAD}")
    return Decision(path, joint=g.joint, bound=g.bound)


def numba_window(plan) -> Decision:
    """The numba general window kernel (``window.window_kernel``, every word, every
    parameter; also what the tile kernels fall back to): the built-in window, a scale floor
    or subnormal redo only with scales, and steps of whole groups and C-dominant groups."""
    path = "numba window_kernel"
    why = _window_base(plan)
    if why:
        return Decision(path, why)
    p = plan.parameters
    if (p.get("scale_floor") is not None or p.get("subnormal_redo") is not None) and plan.datapath.scale is None:
        return Decision(path, "scale_floor / subnormal_redo without scales")
    cd = p.get("c_dominant")
    if plan.step % int(p.get("group", 1)) or (cd is not None and plan.step % int(cd["group"])):
        return Decision(path, f"step {plan.step} not whole groups")
    return Decision(path)


def _builtin(plan, family, path, scaled=None, modes=("rz", "rne")):
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


def numba_integer(plan) -> Decision:
    """The numba integer kernels: s32 wrap / saturate, products or ``bitop`` xor."""
    d = _builtin(plan, "integer", "numba integer", modes=("wrap", "sat"))
    if d and plan.parameters.get("bitop") not in (None, "xor"):
        return Decision(d.path, f"bitop {plan.parameters['bitop']!r} (xor only)")
    return d


def numba_group_scaled(plan) -> Decision:
    """The numba group-scaled window kernel: scaled, steps of whole groups."""
    d = _builtin(plan, "group_scaled_window", "numba group_scaled", scaled=True)
    if d and plan.step % int(plan.parameters["group"]):
        return Decision(d.path, f"step {plan.step} not whole groups")
    return d


def group_scaled_joint(plan, layout: TileLayout) -> Decision:
    """The numba group-scaled joint kernel (``families.group_scaled_joint_kernel``): a plan of
    :func:`numba_group_scaled` with every group inside one scale block, A and B read through
    their :func:`joint_table`, scales in containers of up to 16 bits with a finite word and every
    value below 2**(r + 1), the kernel's dead code that of the joint table, and
    :func:`group_scaled_bound`.  Facts: ``joint``, ``bound``."""
    path = "numba group_scaled joint"
    d = numba_group_scaled(plan)
    if not d:
        return Decision(path, d.reason)
    group, block = int(plan.parameters["group"]), int(plan.datapath.block or 0)
    if not block or block % group:
        return Decision(path, f"groups of {group} not inside scale blocks of {block}")
    jt = joint_table(plan)
    if not jt:
        return Decision(path, jt.reason)
    s, why = _scale_facts(plan.scale_format, plan.decoder(plan.scale_format))
    if s is None:
        return Decision(path, why)
    if layout.dead != GROUP_DEAD:
        return Decision(path, f"the kernel's dead code {layout.dead} is not the joint table's {GROUP_DEAD}")
    j = jt.joint
    bound = group_scaled_bound(int(plan.parameters["F"]), group, plan.step, int(np.abs(j.P).max()), j.q0, s.m_max,
                               s.below_r1)
    if not bound:
        return Decision(path, bound.why_not())
    return Decision(path, joint=j, bound=bound)


def numba_two_stage(plan) -> Decision:
    """The numba two-stage window kernel: unscaled."""
    return _builtin(plan, "two_stage_window", "numba two_stage", scaled=False)


def numba_exact_sum(plan) -> Decision:
    """The numba exact-sum kernel: unscaled (rows past int64 are flagged when computed)."""
    return _builtin(plan, "exact_sum", "numba exact_sum", scaled=False)


def _ieee_chain(plan, family, path):
    """The IEEE chain families: the built-in accumulator, unscaled, RNE into f32 or f64,
    one step over the whole K."""
    d = _builtin(plan, family, path, scaled=False, modes=("rne",))
    if d and plan.encoding.format not in ("f32", "f64"):
        return Decision(path, f"rounding into {plan.encoding.format} (f32 or f64 only)")
    if d and plan.step != plan.datapath.stored_k:
        return Decision(path, f"steps of {plan.step}, not one over K {plan.datapath.stored_k}")
    return d


def numba_fma(plan) -> Decision:
    """The numba FMA chain kernels: :func:`_ieee_chain`; into f32 with :func:`fma_product_bound`."""
    d = _ieee_chain(plan, "fma", "numba fma")
    if d and plan.encoding.format == "f32":
        bound = fma_product_bound(plan.a_format, plan.b_format)
        if not bound:
            return Decision(d.path, bound.why_not())
    return d


def numba_mul_add(plan) -> Decision:
    """The numba multiply-then-add kernels: :func:`_ieee_chain`."""
    return _ieee_chain(plan, "mul_add_chain", "numba mul_add")


def numba_ftz(plan) -> Decision:
    """The numba FTZ mul-add kernel: :func:`_ieee_chain` into f32, partial sums of 2 or 4
    products dividing K."""
    d = _ieee_chain(plan, "ftz_mul_add", "numba ftz_mul_add")
    P = plan.parameters.get("P")
    if d and (plan.encoding.format != "f32" or P not in (2, 4) or plan.datapath.stored_k % P):
        return Decision(d.path, f"into {plan.encoding.format} with P {P} (f32, P 2 or 4 dividing K)")
    return d


# ------------------------------------------------------------------ proofs
def lean_window_bound(F, roff, scale_off, bits, factors, step, below_r1) -> Bound:
    """Every int64 of the numpy LeanWindow is exact.

    A live product ``p * 2**q`` (``p`` the signed product of the A, B (and two scale)
    significands, at most ``bits`` bits) has the raw exponent ``r_p = q + roff`` (+ the two
    scales' r - q, each at least ``scale_off``), and the window's quantum is at least
    ``E - F >= r_p - F``.  Its truncation ``shift(|p|, q - quantum)`` shifts left by at most
    ``S = max(0, F - roff - 2 * scale_off)`` (``scale_off`` 0 unscaled), so every shifted
    product is below ``2**(bits + S) <= 2**62``.  Every factor below 2**(r + 1) (``below_r1``:
    A / B significands of at most r - q + 1 bits, every scale word), a product is below
    ``2**(r_p + factors)`` and its truncation below ``2**(F + factors)``; C's, by the
    decoder's meaning of r (docs/datapaths.md §1), below ``2**(F + 1)``: a step's total is
    below ``(step + 1) * 2**(F + factors) <= 2**(F + factors + bits(step)) <= 2**62``."""
    S = max(0, F - roff - 2 * scale_off)
    total = F + factors + int(step).bit_length()
    return Bound("lean window int64 bound", bits + S <= 62 and below_r1 and total <= 62,
                 dict(bits=bits, S=S, shifted_bits=bits + S, below_r1=below_r1, total_bits=total, limit=62))


def grouped_bound(F, Fc, cg, step, p_max, roff, scale_off, below_r1) -> Bound:
    """Every int32 and int64 of the grouped paths (numpy LeanGrouped, the numba grouped
    kernel) is exact.

    A joint table entry is at most ``p_max`` in magnitude and a group (or C-dominant group)
    sums ``cg`` of them: below ``2**31`` when ``p_max * cg < 2**31`` (the int32 group sums).
    The joint exponents sit at or below the raws (``roff`` >= 0, every scale's r - q >=
    ``scale_off`` >= 0).  Every finite factor is below 2**(r + 1) (A / B by
    :func:`narrow_format`; the scales: ``below_r1``), so a group sum is below
    ``cg * 2**(gr + 4)`` (four factors) and every quantum is at least ``gr - max(F, Fc)``: a
    truncated group sum has at most ``max(F, Fc) + 4 + bits(cg)`` bits, the step's total of at
    most ``step`` groups and C ``bits(step) + 1`` more, at most 62."""
    total = max(F, Fc) + 4 + int(cg).bit_length() + int(step).bit_length() + 1
    holds = p_max * cg < 1 << 31 and roff >= 0 and scale_off >= 0 and below_r1 and total <= 62
    return Bound("grouped int32 / int64 budget", holds,
                 dict(group_sum=p_max * cg, int32_limit=1 << 31, roff=roff, scale_off=scale_off, below_r1=below_r1,
                      total_bits=total, limit=62))


def group_scaled_bound(F, group, step, p_max, q0, scale_m, below_r1) -> Bound:
    """Every int64 of the numba group-scaled joint kernel is exact.

    A group's sum of joint entries (each at most ``p_max``, the value of an A x B pair being
    its entry times ``2**q0``) is at most ``group * p_max``, and times its block's scale product
    (two significands of at most ``scale_m``) below ``2**62`` (``scaled_bits``).  Every scale
    below 2**(r + 1) (``below_r1``), a scaled group sum is below ``group * p_max * 2**(q0 + sr
    + 2)``, ``sr`` the sum of its scales' raws; a group with a live product and a nonzero scale
    product counts with ``sr`` in the window exponent, so the quantum is at least ``sr - F``
    and the group's truncation (exact where it shifts left: the result fits) has at most
    ``F + 2 + q0 + ceil(log2(group * p_max))`` bits (``contrib_bits``); any other group adds 0.
    C's truncation is below 2**(F + 1) (the decoder's meaning of r, docs/datapaths.md §1): the
    step's total of ``step / group`` groups and C has at most ``max(contrib_bits, F + 1) +
    bits(step / group)`` bits, at most 62."""
    scaled = int(group * p_max * scale_m * scale_m).bit_length()
    contrib = max(0, F + 2 + q0 + int(group * p_max - 1).bit_length())
    total = max(contrib, F + 1) + int(step // group).bit_length()
    return Bound("group-scaled int64 budget", scaled <= 62 and below_r1 and total <= 62,
                 dict(scaled_bits=scaled, below_r1=below_r1, contrib_bits=contrib, total_bits=total, limit=62))


def lane_bound(F, step, bits, factors, rmax, cd_r, neg_f) -> Bound:
    """The numba tile kernel's binary64 lanes are exact.

    Every factor is below 2**(r + 1) (checked per format by :func:`lane_format` /
    :func:`lane_scale`), so a live product is below ``2**(r_p + factors)`` with ``r_p <= E``,
    and its truncation ``trunc(p * 2**-quantum)`` (quantum >= E - F) below
    ``2**(F + factors)``.  The product is exact in binary64 when its significand has at most
    53 bits (``bits``, the factors' together); scaling it by a power of two is exact (or the
    result is below 1 and truncates to 0 either way); truncation is exact; every partial sum
    of the step's truncated products is an integer below ``step * 2**(F + factors) <=
    2**(F + factors + bits(step)) <= 2**53``, so exact.  Every |r| (products: ``rmax``, C and
    D: ``cd_r``) stays inside the range where ``2**-quantum`` is built:
    ``max(rmax, cd_r) + F + 64 < neg_f``."""
    total = F + factors + int(step).bit_length()
    reach = max(rmax, cd_r) + F + 64
    return Bound("binary64 lane bound", bits <= 53 and total <= 53 and reach < neg_f,
                 dict(product_bits=bits, total_bits=total, limit=53, exponent_reach=reach, neg_f=neg_f))


def fma_product_bound(a_format, b_format) -> Bound:
    """The f32 FMA chain kernel's products are exact in binary64, as the reference needs
    (it refuses otherwise): float significands of ``man_bits + 1`` bits each, a product of at
    most ``man_a + man_b + 2 <= 53`` bits."""
    bits = a_format.man_bits + b_format.man_bits + 2
    floats = not (a_format.integer or b_format.integer)
    return Bound("f32 fma product bound", floats and bits <= 53, dict(floats=floats, product_bits=bits, limit=53))


def packed_bound(fmt, decoder) -> Bound:
    """The numba decode table of ``fmt`` packs every word into one int64 (``cls | sign << 2 |
    m << 3 | (q + 2**15) << 23 | (r + 2**15) << 39``, 63 bits): exact when every class fits 2
    bits, the sign 1, m 20 and q, r 16 as offsets from 2**15."""
    f = word_facts(fmt, decoder)
    return Bound("packed word bound", f.sane and f.m_max_all < 1 << 20 and f.q_abs_all < 1 << 15
                 and f.r_abs_all < 1 << 15, dict(sane=f.sane, m_max=f.m_max_all, q_abs=f.q_abs_all,
                                                 r_abs=f.r_abs_all))
