"""Per-row scalar bodies of every accumulator family, target-neutral, and their CPU driver.

A body computes the D word of one dot product from the operand arrays and holds nothing
but scalars: no work array (a CUDA thread keeps them in registers; a kernel that allocates
cannot go to CUDA).  Where the CPU kernels (:mod:`mmasim.backends.numba`) keep a step's
products in a work array, a body forms each product again (decode and multiply) in every
pass that reads it: the window finds its quantum in one pass, then sums the groups (each
group's smallest exponent, then its exact sum), the C-dominant groups and, for the
subnormal redo, the groups once more.  Every rule is the CPU kernels' own
(:mod:`mmasim.backends.numba.window`, :mod:`mmasim.backends.numba.families`,
:mod:`mmasim.backends.numba.primitives`): the steps of a row are
:func:`~mmasim.backends.numba.primitives.row_steps`, the IEEE rows are the kernels' rows
themselves, all compiled by numba for the CPU and by numba-cuda for CUDA (:mod:`.target`)
from this one source.

:data:`BODIES` says which body takes a plan, by the decisions of the CPU kernels
(:data:`mmasim.backends.fastpaths.KERNELS`, from each family's module of
:mod:`mmasim.backends.fastpaths`); a sparse datapath is its selection (:func:`select_row`:
the stored elements of each row, by the rule's own table) and then its dense body.  A body
returns ``(word, bad)``: ``bad`` where the CPU kernel would flag the row (a sum the
reference refuses, beyond int64) or the selection is illegal; the reference computes those
rows (or raises its error).  :class:`CpuRows` runs them on the CPU, as a backend's
``compute``.
"""

from __future__ import annotations

import hashlib
from collections import namedtuple

import numpy as np

from mmasim.backends import fastpaths
from mmasim.errors import UnsupportedDatapath
from mmasim.backends.numba import kernels, unscaled
from mmasim.backends.numba.cache import jit as _jit
from mmasim.backends.numba.families import (
    IEEE_ROWS,
    INTEGER_STEPS,
    _exact_add,
    _exact_note,
    _exact_pack,
    _exact_start,
    _exact_unit,
    _gs_block,
    _gs_group_r,
    _gs_term,
    _two_stage_odd,
    _two_stage_product,
    _two_stage_sum,
    ftz_mul_add_row,
)
from mmasim.backends.numba.primitives import (
    A_FMT,
    B_FMT,
    C_FMT,
    D_FMT,
    FINITE,
    INF,
    NAN,
    NEG,
    NO_SPECIAL,
    SCALE_FMT,
    ZERO,
    EncodingSpec,
    FormatSpec,
    StepFormats,
    _bitcast,
    _decode,
    _element_product,
    _f32_word,
    _fmt,
    _inline,
    _inline_rows,
    _note_special,
    _pack,
    _product_class,
    _special_result,
    _trunc,
    row_steps,
)
from mmasim.backends.numba.window import (
    LQBIG,
    _c_dominant_total,
    _c_relative_quantum,
    _d_or_c,
    _group_add,
    _group_min_q,
    _group_term,
    _group_unit,
    _redo_applies,
    _redo_keeps,
    _redo_limit,
    _window_params,
    _window_quantum,
)


# ------------------------------------------------------------------ the window
@_inline
def _product(wa, wb, sa, sb, ra, rb, rsa, rsb, kk, block, scaled, fp, TAB):
    """The product of element ``kk`` of the row, times its block's two scales where
    ``scaled``: ``(cls, sign, m, q, r)`` as :func:`~mmasim.backends.numba.primitives._element_product`
    (special.product's class of every factor, the exact significand product, 0 unless finite)
    and ``sr``, the scales' raw sum (0 unscaled)."""
    cls, sg, m, q, r = _element_product(wa, wb, ra, rb, kk, fp, TAB)
    sr = np.int64(0)
    if scaled:
        xc, xsg, xm, xq, xr = _decode(np.int64(sa[rsa, kk // block]), fp.scale, TAB)
        yc, ysg, ym, yq, yr = _decode(np.int64(sb[rsb, kk // block]), fp.scale, TAB)
        # the class of A x B already says inf x 0: NaN; INF (no zero) and ZERO (no inf) then combine
        cls = _product_class(cls == NAN or xc == NAN or yc == NAN, cls == INF or xc == INF or yc == INF,
                             cls == ZERO or xc == ZERO or yc == ZERO)
        sg = sg ^ xsg ^ ysg
        m = m * xm * ym if cls == FINITE else np.int64(0)
        q = q + xq + yq
        sr = xr + yr
        r = r + sr
    return cls, sg, m, q, r, sr


@_inline
def _window_pass(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, scaled, fp, TAB):
    """The first pass of a window step over its products: ``(sp, max_r, max_sr, any_live,
    dead)``, the specials noted, the largest raw of the live products (NEG for none), the
    largest scale raw of the blocks holding one, whether one is live, whether one is not."""
    sp = NO_SPECIAL
    max_r = np.int64(NEG)
    max_sr = np.int64(NEG)
    any_live = False
    dead = False
    for kk in range(s0, s0 + step):
        cls, sg, m, q, r, sr = _product(wa, wb, sa, sb, ra, rb, rsa, rsb, kk, block, scaled, fp, TAB)
        sp = _note_special(cls, sg == 1, sp)
        if cls == FINITE:
            any_live = True
            max_r = max(max_r, r)
            if scaled:
                max_sr = max(max_sr, sr)     # the blocks holding a nonzero product
        else:
            dead = True
    return sp, max_r, max_sr, any_live, dead


@_inline
def _window_start(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R):
    """The window of a step from its products (:func:`_window_pass`) and C: ``(special, cterm,
    quantum, any_live, max_sr)``, the specials ``(nan, inf, inf_neg)``, C as the window's sum
    reads it ``(live, r, sign, magnitude, q, dominant)`` and the quantum
    (:func:`~mmasim.backends.numba.window._window_quantum`)."""
    ccls, csg, cm, cq, cr = c
    sp, max_r, max_sr, any_live, dead = _window_pass(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block,
                                                     R.scaled == 1, fp, TAB)
    c_live = ccls == FINITE
    quantum, cdom = _window_quantum(max_r, any_live, dead, c_live, cr, max_sr, R)
    cterm = (c_live, cr, csg == 1, cm if c_live else np.int64(0), cq, cdom)
    return _special_result(_note_special(ccls, csg == 1, sp)), cterm, quantum, any_live, max_sr


@_inline
def _window_row_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, rec, enc, W):
    """One hardware step of the window with one product per group (``window_step`` of the CPU
    kernels with ``group`` 1), in two passes over the products: ``(word, False)``."""
    R = _window_params(rec)
    scaled = R.scaled == 1
    special, cterm, quantum, any_live, max_sr = _window_start(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block,
                                                              c, fp, TAB, R)
    nan, inf, inf_neg = special
    c_live, cr, c_neg, c_mag, cq, cdom = cterm
    total = _trunc(c_neg, c_mag, cq, quantum)
    for kk in range(s0, s0 + step):      # pass two: every product truncated at the quantum
        cls, sg, m, q, r, sr = _product(wa, wb, sa, sb, ra, rb, rsa, rsb, kk, block, scaled, fp, TAB)
        total += _trunc(sg == 1, m, q, quantum)     # m is 0 unless the product is finite
    oneg, omag, e0 = _d_or_c(total, quantum, R.excl == 1, any_live, c_neg, c_mag, cq)
    return _pack(oneg, omag, e0, nan, inf, inf_neg, False, enc), False


@_inline
def _row_group(wa, wb, sa, sb, ra, rb, rsa, rsb, lo, hi, block, scaled, clog, fp, TAB):
    """The exact sum of the products ``lo .. hi`` of the row (:func:`_product`, formed twice):
    ``(sum, qmin, bad, gr, gsr)`` as :func:`~mmasim.backends.numba.window._group_sum`, the
    largest raw of its live products ``gr`` (NEG for none) and its largest scale raw ``gsr``."""
    qmin = np.int64(LQBIG)
    gr = np.int64(NEG)
    gsr = np.int64(NEG)
    for kk in range(lo, hi):
        cls, sg, m, q, r, sr = _product(wa, wb, sa, sb, ra, rb, rsa, rsb, kk, block, scaled, fp, TAB)
        qmin = _group_min_q(qmin, m, q)
        gr = max(gr, r if cls == FINITE else np.int64(NEG))
        gsr = max(gsr, sr)
    qmin = _group_unit(qmin)
    tot = np.int64(0)
    bad = False
    for kk in range(lo, hi):
        cls, sg, m, q, r, sr = _product(wa, wb, sa, sb, ra, rb, rsa, rsb, kk, block, scaled, fp, TAB)
        tot, bad = _group_add(tot, bad, m, q, sg, qmin, clog)
    return tot, qmin, bad, gr, gsr


@_inline
def _window_groups_row_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, rec, enc, W):
    """One hardware step of the window with every parameter (``_window_step`` of the CPU
    kernels): the window from the products, then the groups' exact sums and their terms,
    the C-dominant groups, C, and the subnormal redo, each group formed again where it is
    read.  ``(word, bad)``."""
    R = _window_params(rec)
    scaled = R.scaled == 1
    group = R.group
    special, cterm, quantum, any_live, max_sr = _window_start(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block,
                                                              c, fp, TAB, R)
    nan, inf, inf_neg = special
    c_live, cr, c_neg, c_mag, cq, cdom = cterm
    qrel = _c_relative_quantum(cr, quantum, R)
    ptot = np.int64(0)
    bad = False
    for lo in range(s0, s0 + step, group):
        v, gq, b, gr, gsr = _row_group(wa, wb, sa, sb, ra, rb, rsa, rsb, lo, lo + group, block, scaled, R.clog_g,
                                       fp, TAB)
        bad = bad or b
        ptot += _group_term(v, gq, gr, c_live, cr, qrel, quantum, R)
    ctot = np.int64(0)
    if R.has_cd == 1 and R.cdG != group:
        for lo in range(s0, s0 + step, R.cdG):
            v, gq, b, gr, gsr = _row_group(wa, wb, sa, sb, ra, rb, rsa, rsb, lo, lo + R.cdG, block, scaled,
                                           R.clog_cd, fp, TAB)
            bad = bad or b
            ctot += _trunc(v < 0, abs(v), gq, quantum)
    ctr = _trunc(c_neg, c_mag, cq, quantum)
    total = _c_dominant_total(ptot, ctot, cdom, R) + ctr
    if R.has_sr == 1 and not cdom and _redo_applies(total, quantum):
        limit = _redo_limit(R.srT, quantum)
        total = ctr
        for lo in range(s0, s0 + step, group):
            v, gq, b, gr, gsr = _row_group(wa, wb, sa, sb, ra, rb, rsa, rsb, lo, lo + group, block, scaled,
                                           R.clog_g, fp, TAB)
            t = _group_term(v, gq, gr, c_live, cr, qrel, quantum, R)
            if _redo_keeps(t, limit, gsr, max_sr):
                total += t
    oneg, omag, e0 = _d_or_c(total, quantum, R.excl == 1, any_live, c_neg, c_mag, cq)
    return _pack(oneg, omag, e0, nan, inf, inf_neg, False, enc), bad


# ------------------------------------------------------- the other fixed-point families
@_inline
def _group_scaled_row_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R, enc, W):
    """One hardware step of the group-scaled window (``_group_scaled_step`` of the CPU kernels):
    the specials of the scaled products, each group's exponent, then the groups' exact sums
    (of the unscaled products, formed again) times their block's scale product.  ``(word, bad)``."""
    ccls, csg, cm, cq, cr = c
    group = R.group
    sp = NO_SPECIAL
    for kk in range(s0, s0 + step):
        cls, sg, m, q, r, sr = _product(wa, wb, sa, sb, ra, rb, rsa, rsb, kk, block, True, fp, TAB)
        sp = _note_special(cls, sg == 1, sp)
    nan, inf, inf_neg = _special_result(_note_special(ccls, csg == 1, sp))
    c_live = ccls == FINITE
    E = cr if c_live else R.ezero
    for lo in range(s0, s0 + step, group):
        anyl = False
        for kk in range(lo, lo + group):
            cls, sg, m, q, r = _element_product(wa, wb, ra, rb, kk, fp, TAB)
            anyl = anyl or m != 0
        scls, smag, sq, sr = _gs_block(sa, sb, rsa, rsb, lo // block, fp, TAB)
        E = max(E, _gs_group_r(anyl, scls, sr, R.ezero))
    quantum = E - R.F
    total = np.int64(0)
    bad = False
    for lo in range(s0, s0 + step, group):
        tot, qmin, b, gr, gsr = _row_group(wa, wb, sa, sb, ra, rb, rsa, rsb, lo, lo + group, block, False,
                                           R.clog_g, fp, TAB)
        bad = bad or b
        scls, smag, sq, sr = _gs_block(sa, sb, rsa, rsb, lo // block, fp, TAB)
        total += _gs_term(tot, qmin, smag, sq, quantum)
    total += _trunc(csg == 1, cm if c_live else np.int64(0), cq, quantum)
    return _pack(total < 0, abs(total), quantum, nan, inf, inf_neg, False, enc), bad


@_inline
def _two_stage_row_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R, enc, W):
    """One hardware step of the two-stage window (``_two_stage_step`` of the CPU kernels): the
    specials and each group's largest raw, then the groups' truncated sums.  ``(word, False)``."""
    sp = NO_SPECIAL
    E0 = np.int64(NEG)
    E1 = np.int64(NEG)
    for k in range(step):
        cls, sg, m, q, r = _two_stage_product(wa, wb, ra, rb, s0 + k, fp, TAB, R)
        sp = _note_special(cls, sg == 1, sp)
        lr = r if cls == FINITE else np.int64(NEG)
        if _two_stage_odd(k, R):
            E1 = max(E1, lr)
        else:
            E0 = max(E0, lr)
    S0 = np.int64(0)
    S1 = np.int64(0)
    for k in range(step):
        cls, sg, m, q, r = _two_stage_product(wa, wb, ra, rb, s0 + k, fp, TAB, R)
        if _two_stage_odd(k, R):
            S1 += _trunc(sg, m, q, E1 - R.F)
        else:
            S0 += _trunc(sg, m, q, E0 - R.F)
    return _two_stage_sum(E0, E1, S0, S1, c, sp, R, enc), False


@_inline
def _exact_sum_row_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R, enc, W):
    """One hardware step of the exact sum (``_exact_sum_step`` of the CPU kernels): the terms'
    range, then their exact sum.  ``(word, bad)``."""
    ccls, csg, cm, cq, cr = c
    c_m = cm if ccls == FINITE else np.int64(0)
    sp = NO_SPECIAL
    qmin, top, anyl = _exact_start()
    for k in range(s0, s0 + step):
        cls, sg, m, q, r = _element_product(wa, wb, ra, rb, k, fp, TAB)
        sp = _note_special(cls, sg == 1, sp)
        qmin, top, anyl = _exact_note(qmin, top, anyl, m, q)
    special = _special_result(_note_special(ccls, csg == 1, sp))
    qmin, top, anyl = _exact_note(qmin, top, anyl, c_m, cq)
    qmin, bad = _exact_unit(qmin, top, anyl, step)
    if bad:
        return np.int64(0), True       # beyond int64: the reference's exact integers
    total = np.int64(0)
    for k in range(s0, s0 + step):
        cls, sg, m, q, r = _element_product(wa, wb, ra, rb, k, fp, TAB)
        total = _exact_add(total, m, q, sg, qmin)
    total = _exact_add(total, c_m, cq, csg, qmin)
    return _exact_pack(total, qmin, special, enc), False


# ------------------------------------------------------------------ the bodies
#: What a body reads besides the operands, as constants of a body specialised for one plan
#: (:func:`specialised`): the A / B / scale decode specs (:data:`StepFormats`), the C and D
#: decode specs, the family's parameter record (its namedtuple), the encoding
#: (:data:`EncodingSpec`), the stored K, the elements per step and per scale block.
Constants = namedtuple("Constants", "fp fp2 fp3 R enc K step block")


def _constants(plan, kern) -> Constants:
    """The :class:`Constants` of ``plan`` from its CPU kernel ``kern`` (Python ints)."""
    fm = [FormatSpec(*(int(x) for x in kern.FM[i].item())) for i in range(len(kern.FM))]
    return Constants(StepFormats(fm[A_FMT], fm[B_FMT], fm[SCALE_FMT]), fm[C_FMT], fm[D_FMT],
                     type(kern.record)(*(int(x) for x in kern.R[0].item())),
                     EncodingSpec(*(int(x) for x in kern.ENC[0].item())), int(plan.datapath.stored_k),
                     int(kern.step), int(kern.block))


def _named(fn, name):
    fn.__qualname__ = fn.__name__ = name
    return _inline_rows(fn)


class _Maker:
    """One body in two forms: ``generic`` reads the decode specs, the record and the encoding
    from its arrays (one compile serves every plan of its argument types); ``specialise(k)``
    is the same body with the :class:`Constants` ``k`` of one plan compiled in (the branches
    of the formats, parameters and encoding fold away: far fewer registers on CUDA)."""

    def __init__(self, name, generic, specialise):
        self.name, self.generic, self._specialise, self._made = name, generic, specialise, {}

    def specialise(self, k: Constants):
        key = repr(k)
        if key not in self._made:       # named by its constants: the CPU driver's kernel cache keys it by name
            digest = hashlib.sha256(key.encode()).hexdigest()[:16]
            self._made[key] = _named(self._specialise(k), f"{self.name}_{digest}")
        return self._made[key]


def _fixed(step_fn, name) -> _Maker:
    """The body of a fixed-point family from its step function (one that reads no work array):
    the steps of the row (:func:`~mmasim.backends.numba.primitives.row_steps`)."""
    steps = row_steps(step_fn)

    def generic(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block):
        fp = StepFormats(_fmt(FM, A_FMT), _fmt(FM, B_FMT), _fmt(FM, SCALE_FMT))
        return steps(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, wa.shape[1], step, block, fp,
                     _fmt(FM, C_FMT), _fmt(FM, D_FMT), TAB, RA[0], ENC[0], None)

    def specialise(k):
        fp, fp2, fp3, R, enc, K, step, block = k

        def body(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step_, block_):
            return steps(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, K, step, block, fp, fp2, fp3, TAB, R,
                         enc, None)

        return body

    return _Maker(name, _named(generic, name), specialise)


@_inline
def _f64_word(x, nan_word):
    """The binary64 word of ``x`` (unsigned); a NaN is the encoding's NaN word (as the CPU kernels' words)."""
    return np.uint64(nan_word) if x != x else np.uint64(_bitcast(x))


@_inline
def _f32_word_of(x, nan_word):
    """The binary32 word of ``x``; a NaN is the encoding's NaN word (as the CPU kernels' words)."""
    return nan_word if x != x else _f32_word(np.float64(x))


def _ieee(fused, f64) -> _Maker:
    """The body of an IEEE chain: its row (:data:`~mmasim.backends.numba.families.IEEE_ROWS`),
    the value as D's word."""
    row = IEEE_ROWS[fused, f64]
    word = _f64_word if f64 else _f32_word_of

    def generic(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block):
        x = row(d, wa, wb, wc, ia, ib, ic, isa, isb, ncols, wa.shape[1], _fmt(FM, A_FMT), _fmt(FM, B_FMT),
                _fmt(FM, C_FMT), TAB)
        return word(x, ENC[0].nan_word), False

    def specialise(k):
        fa, fb, fc, nan_word, K = k.fp.a, k.fp.b, k.fp2, k.enc.nan_word, k.K

        def body(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block):
            return word(row(d, wa, wb, wc, ia, ib, ic, isa, isb, ncols, K, fa, fb, fc, TAB), nan_word), False

        return body

    return _Maker(row.py_func.__name__.replace("_row", "_body"), _named(generic, row.py_func.__name__.replace(
        "_row", "_body")), specialise)


def _ftz() -> _Maker:
    """The body of the FTZ mul-add chain: its row (:func:`~mmasim.backends.numba.families.ftz_mul_add_row`)
    with the products per partial sum of the record, the value as D's word."""

    def generic(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block):
        x = ftz_mul_add_row(d, wa, wb, wc, ia, ib, ic, isa, isb, ncols, wa.shape[1], RA[0].P, _fmt(FM, A_FMT),
                            _fmt(FM, B_FMT), _fmt(FM, C_FMT), TAB)
        return _f32_word_of(x, ENC[0].nan_word), False

    def specialise(k):
        fa, fb, fc, nan_word, K, P = k.fp.a, k.fp.b, k.fp2, k.enc.nan_word, k.K, k.R.P

        def body(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block):
            x = ftz_mul_add_row(d, wa, wb, wc, ia, ib, ic, isa, isb, ncols, K, P, fa, fb, fc, TAB)
            return _f32_word_of(x, nan_word), False

        return body

    return _Maker("ftz_mul_add_body", _named(generic, "ftz_mul_add_body"), specialise)


_WINDOW = _fixed(_window_row_step, "window_row")
_WINDOW_GROUPS = _fixed(_window_groups_row_step, "window_groups_row")
_GROUP_SCALED = _fixed(_group_scaled_row_step, "group_scaled_row")
_TWO_STAGE = _fixed(_two_stage_row_step, "two_stage_row")
_EXACT_SUM = _fixed(_exact_sum_row_step, "exact_sum_row")
_INTEGER = {xor: _fixed(INTEGER_STEPS[xor], "integer_xor_row" if xor else "integer_row") for xor in (False, True)}
_IEEE = {key: _ieee(*key) for key in IEEE_ROWS}
_FTZ = _ftz()

#: One body of a family: the decision of the plans it takes (a :class:`~mmasim.backends.fastpaths.shared.Decision`),
#: the builder of the family's CPU kernel (whose arrays it reads) and ``pick(plan)``: the body (a ``_Maker``)
Body = namedtuple("Body", "decision build pick")

#: accumulator family -> its bodies; the first whose decision takes a plan computes it.  The last
#: body of a family takes the plans its CPU kernel takes (:data:`mmasim.backends.fastpaths.KERNELS`)
BODIES = {
    "window": (Body(fastpaths.window.one_product_window, kernels._window, lambda plan: _WINDOW),
               Body(fastpaths.KERNELS["window"], kernels._window, lambda plan: _WINDOW_GROUPS)),
    "group_scaled_window": (Body(fastpaths.KERNELS["group_scaled_window"], kernels._group_scaled,
                                 lambda plan: _GROUP_SCALED),),
    "two_stage_window": (Body(fastpaths.KERNELS["two_stage_window"], kernels._two_stage, lambda plan: _TWO_STAGE),),
    "exact_sum": (Body(fastpaths.KERNELS["exact_sum"], kernels._exact_sum, lambda plan: _EXACT_SUM),),
    "integer": (Body(fastpaths.KERNELS["integer"], kernels._integer,
                     lambda plan: _INTEGER[plan.parameters.get("bitop") == "xor"]),),
    "fma": (Body(fastpaths.KERNELS["fma"], kernels._fma_family,
                 lambda plan: _IEEE[True, plan.encoding.format == "f64"]),),
    "mul_add_chain": (Body(fastpaths.KERNELS["mul_add_chain"], kernels._mul_add,
                           lambda plan: _IEEE[False, plan.encoding.format == "f64"]),),
    "ftz_mul_add": (Body(fastpaths.KERNELS["ftz_mul_add"], kernels._ftz, lambda plan: _FTZ),),
}

#: every generic body, by name (each compiled for CUDA by ``mmasim warmup --backend cuda``)
ALL_BODIES = {m.name: m.generic for m in (_WINDOW, _WINDOW_GROUPS, _GROUP_SCALED, _TWO_STAGE, _EXACT_SUM,
                                          *_INTEGER.values(), *_IEEE.values(), _FTZ)}
window_row, window_groups_row = _WINDOW.generic, _WINDOW_GROUPS.generic


def choose(plan, specialise: bool = False):
    """``(body, arrays, reason)``: the body of ``plan`` (``specialise``: compiled with the plan's
    :class:`Constants`) and the arrays it reads besides the operands, ``(TAB, FM, RA, ENC, step,
    block)`` as the plan's CPU kernel reads them; or ``(None, None, reason)``, the reason no
    body takes the plan."""
    entries = BODIES.get(plan.datapath.accumulator)
    if entries is None:
        return None, None, f"accumulator family {plan.datapath.accumulator!r} has no per-row body"
    reasons = []
    for entry in entries:
        decision = entry.decision(plan)
        if not decision:
            reasons.append(f"{decision.path}: {decision.reason}")
            continue
        kern = entry.build(plan)       # the CPU kernel: its decode specs, parameter record and encoding
        if kern is None:
            reasons.append(f"{decision.path}: the formats cannot be decoded by a compiled kernel")
            continue
        maker = entry.pick(plan)
        body = maker.specialise(_constants(plan, kern)) if specialise else maker.generic
        return body, (kern.TAB, kern.FM, kern.R, kern.ENC, np.int64(kern.step), np.int64(kern.block)), ""
    return None, None, "; ".join(reasons)


def body_for(plan, specialise: bool = False):
    """``(body, arrays)`` of ``plan`` (:func:`choose`), or ``None`` where no body takes it."""
    body, arrays, _ = choose(plan, specialise)
    return None if body is None else (body, arrays)


# ------------------------------------------------------------------ sparse forms
@_inline_rows
def select_row(d, wa, wb, md, SEL, chunk, da, db):
    """The stored elements of row ``d`` of a sparse datapath: from ``wa`` / ``wb`` (the logical
    K) into ``da`` / ``db`` (the stored K), chunk ``i`` by selector nibble ``i`` of the
    metadata words ``md`` (low nibble of word 0 first, as :func:`mmasim.arith.sparse.nibbles`)
    through ``SEL``, the rule's picks per nibble (:func:`selection`, -1 for an illegal one).
    Returns whether every selector is legal."""
    per = SEL.shape[1]
    ok = True
    for i in range(wa.shape[1] // chunk):
        nib = (np.int64(md[d, i >> 3]) >> ((i & 7) * 4)) & 15
        for j in range(per):
            p = SEL[nib, j]
            if p < 0:
                ok = False
                p = 0
            da[d, i * per + j] = wa[d, i * chunk + p]
            db[d, i * per + j] = wb[d, i * chunk + p]
    return ok


def selection(rule) -> np.ndarray:
    """``SEL`` of :func:`select_row`: the positions in its chunk that each selector nibble of
    ``rule`` (a :class:`mmasim.arith.sparse.SparseRule`) picks, by the rule's own
    :meth:`~mmasim.arith.sparse.SparseRule.positions` (-1 for an illegal nibble)."""
    return np.ascontiguousarray(rule.positions(np.arange(16, dtype=np.int64)[:, None]))


# ------------------------------------------------------------------ CPU drivers
def cpu_driver(body):
    """The CPU driver of ``body``: a compiled loop over the rows, ``out[d], flags[d] = body(d, ...)``."""

    def rows_cpu(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block, out, flags):
        for d in range(out.shape[0]):
            out[d], flags[d] = body(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step,
                                    block)

    rows_cpu.__qualname__ = rows_cpu.__name__ = "rows_cpu_" + body.py_func.__name__
    return _jit(rows_cpu)


@_jit
def select_cpu(wa, wb, md, SEL, chunk, da, db, ok):
    """The CPU driver of :func:`select_row`."""
    for d in range(da.shape[0]):
        ok[d] = select_row(d, wa, wb, md, SEL, chunk, da, db)


_NO_INDEX = np.zeros(0, np.int64)


def dense_args(plan, a, b, c, scale_a=None, scale_b=None, dtypes=None) -> tuple:
    """The operand arguments of a driver for dense rows (row ``d`` of each operand is row ``d``
    of the batch): ``(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols)``, the words in
    ``dtypes`` (default the plan's containers, :attr:`~mmasim.backends.plan.Plan.word_dtypes`;
    unscaled: one-element scales)."""
    dt = dtypes or plan.word_dtypes
    asc = np.ascontiguousarray
    ops = [asc(a, dt[0]), asc(b, dt[1]), asc(c, dt[2])]
    if plan.scaled:
        ops += [asc(scale_a, dt[3]), asc(scale_b, dt[4])]
    else:
        ops += [unscaled(dt[0])] * 2
    return (*ops, *[_NO_INDEX] * 5, 0)


def select_args(plan, a, b, metadata, dtypes=None) -> tuple:
    """The arguments of a driver of :func:`select_row` (``wa, wb, md, SEL, chunk, da, db``):
    the logical rows, the metadata words, the rule's :func:`selection`, and the stored rows to fill."""
    dt = dtypes or plan.word_dtypes
    rule = plan.sparse_rule
    wa, wb = np.ascontiguousarray(a, dt[0]), np.ascontiguousarray(b, dt[1])
    n, k = len(wa), plan.datapath.stored_k
    return (wa, wb, np.ascontiguousarray(metadata, np.uint32), selection(rule), np.int64(rule.chunk),
            np.zeros((n, k), dt[0]), np.zeros((n, k), dt[1]))


_DRIVERS: dict = {}


def cpu_run(body, args, arrays, dtype):
    """``(out, flags)`` of ``body`` on the driver arguments ``args`` (:func:`dense_args`) and
    ``arrays`` (:func:`choose`), D in ``dtype``."""
    if body not in _DRIVERS:
        _DRIVERS[body] = cpu_driver(body)
    n = len(args[2])
    out, flags = np.zeros(n, dtype), np.zeros(n, np.bool_)
    _DRIVERS[body](*args, *arrays, out, flags)
    return out, flags


class CpuRows:
    """The per-row bodies run by their CPU drivers, as a backend computes rows
    (``compute(plan, rows)``, :func:`mmasim.backends.plan.compute`): the sparse selection
    (:func:`select_row`), the plan's body, and the numpy reference for the rows a body flags.
    ``dtype``: the words' dtype for every operand (``None``: the plan's containers);
    ``specialise``: the bodies compiled with each plan's constants (:func:`choose`)."""

    name = "cuda rows on the cpu"

    def __init__(self, dtype=None, specialise: bool = False):
        self.dtype, self.specialise = dtype, specialise

    def takes_matrices(self, plan) -> bool:
        """No: :meth:`compute` reads materialized rows (a broadcast batch is as good)."""
        return False

    def compute(self, plan, rows):
        from mmasim.backends.numpy import reference_rows

        body, arrays, reason = choose(plan, self.specialise)
        if body is None:
            raise UnsupportedDatapath(f"no per-row body takes this {plan.datapath.accumulator!r} datapath ({reason}); "
                                      f"the families with bodies: {', '.join(sorted(BODIES))}")
        dtypes = None if self.dtype is None else (np.dtype(self.dtype),) * len(plan.word_dtypes)
        ops = [rows.words(i) for i in range(len(rows.operands))]
        legal = np.ones(len(rows), np.bool_)
        if plan.sparse_rule is not None:
            sel = select_args(plan, ops[0], ops[1], ops.pop(), dtypes)
            select_cpu(*sel, legal)
            ops[0], ops[1] = sel[-2:]
        out, flags = cpu_run(body, dense_args(plan, *ops, dtypes=dtypes), arrays, plan.encoding.dtype)
        redo = np.flatnonzero(flags | ~legal)
        if redo.size:
            out[redo] = reference_rows(plan, rows.take(redo))
        return out
