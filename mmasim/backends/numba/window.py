"""The compiled window (docs/datapaths.md §3, §6): its rules as jitted primitives,
and the two row-at-a-time kernels built from them.

Each rule of :mod:`mmasim.accumulators.window` is one inlined function here:
:func:`_window_quantum` (E, the zero rule, the scale floor, the C-dominant
quantum), :func:`_c_relative`, :func:`_subnormal_redo`, :func:`_d_or_c` (no live
product: D is C), the exact group sums (:func:`_group_sum`).  The kernels
(:func:`window_kernel`: every parameter, every word; :func:`grouped_variant`:
the B200 FP4 groups on a joint A x B table) and the tile kernels of :mod:`.tiles`
compose them.  ``R`` is the window's parameter record
(:class:`mmasim.backends.numba.kernels.WindowRecord`).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from mmasim.arith.codes import GROUP_DEAD as GDEAD   # joint q of a pair with a zero factor (LeanGrouped.DEAD)
from mmasim.backends.numba.primitives import (
    C_FMT,
    D_FMT,
    F32_SPEC,
    FINITE,
    INF,
    NAN,
    NEG,
    NO_SPECIAL,
    ZERO,
    _bitlen,
    _clip,
    _decode,
    _enc,
    _fmt,
    _jit,
    _inline,
    _note_special,
    _pack,
    _product_class,
    _rows,
    _rz_enc,
    _shift,
    _special_result,
    _trunc,
    row_kernel,
)

#: The window's parameters (mmasim.accumulators.window): F, the zero rule (``excl``, or
#: e_zero ``ezero``), ``group``, the scale floor (``has_sf``, ``sf``), C-dominant
#: (``has_cd``, ``cdF``, ``cdG``), C-relative (``has_cr``, ``crF``), the subnormal redo
#: (``has_sr``, ``srT``), ``scaled``, ceil(log2) of the group sizes, for the lean
#: kernels the r - q offset of the products (``roff``), and for the grouped kernel the
#: shift of an A word in the joint table's index (``bshift``) and the sum of the A and B
#: formats' smallest q (``q0``; LeanGrouped of the numpy backend).
WindowRecord = namedtuple("WindowRecord", "F excl ezero group has_sf sf has_cd cdF cdG has_cr crF has_sr srT "
                                          "scaled clog_g clog_cd roff bshift q0")

LQBIG = 1 << 40      # above every live product q (the group minimum's start)
#: The rows of the grouped kernel's table ``LT`` (:func:`mmasim.backends.numba.kernels._grouped_table`):
#: the joint A x B table (the signed significand product, the sum of the two q), then per
#: scale word its signed significand, q, r, and 1 for an inf / NaN.
LT_P, LT_Q, LT_SM, LT_SQ, LT_SR, LT_SPECIAL = range(6)


# ------------------------------------------------------------------- the rules
@_inline
def _window_params(r):
    """The window's parameters as a local record (values, not loads from the
    record array: the loops keep them in registers)."""
    return WindowRecord(r.F, r.excl, r.ezero, r.group, r.has_sf, r.sf, r.has_cd, r.cdF, r.cdG, r.has_cr, r.crF,
                        r.has_sr, r.srT, r.scaled, r.clog_g, r.clog_cd, r.roff, r.bshift, r.q0)


@_inline
def _window_quantum(max_r, any_live, dead, c_live, cr, max_sr, R):
    """window_exponent and window_quantum: ``(quantum, cdom)`` from the largest live
    product raw ``max_r`` (NEG for none), whether a product is not live (``dead``),
    C, and the largest scale raw of the blocks holding a nonzero product (``max_sr``)."""
    E = max_r
    if R.excl == 1:
        if c_live and cr > E:
            E = cr
    else:
        if dead and R.ezero > E:       # a zero product counts with e_zero
            E = R.ezero
        ce = cr if c_live else R.ezero
        if ce > E:
            E = ce
    quantum = E - R.F
    if R.has_sf == 1:
        fl = max_sr - R.sf
        if fl > quantum:
            quantum = fl
    cdom = False
    if R.has_cd == 1:
        cdom = c_live and any_live and cr >= max_r
        if cdom:
            quantum = cr - R.cdF
    return quantum, cdom


@_inline
def _c_relative_quantum(cr, quantum, R):
    """The quantum of the C-relative truncation (:func:`_c_relative`): r_c - ``crF``, at least
    the window's."""
    return max(cr - R.crF, quantum)


@_inline
def _c_relative(t, neg, mag, q, gr, c_live, cr, qrel, quantum):
    """c_relative_terms of one group (or product): ``t`` unless its largest raw
    ``gr`` is live and at most ``r_c``; then its exact sum truncated at ``qrel``."""
    if c_live and gr > NEG and gr <= cr:
        u = _trunc(neg, mag, q, qrel)
        return -_shift(-u, qrel - quantum) if u < 0 else _shift(u, qrel - quantum)
    return t


@_inline
def _redo_applies(total, quantum):
    """Whether the subnormal redo applies to ``total`` (in quanta of 2**quantum): a nonzero
    RZ-F32 subnormal, 2**-149 <= |sum| < 2**-126."""
    lead = quantum + _bitlen(abs(total)) - 1
    return not (total == 0 or lead >= -126 or lead < -149)


@_inline
def _redo_limit(srT, quantum):
    """The bit length up to which a group's contribution is small for the redo (2**(srT - quantum) quanta)."""
    return _clip(srT - quantum, 0, 62)


@_inline
def _redo_keeps(t, limit, gsr, gmax):
    """Whether the redo keeps a group: contribution ``t`` (quanta) above ``limit`` bits, or its
    scale raw ``gsr`` not below ``gmax``."""
    return not (_bitlen(abs(t)) <= limit and gsr < gmax)


@_inline
def _subnormal_redo(total, quantum, ctr, contrib, sr, group, G, gr, srT, gmax):
    """The subnormal redo: if ``total`` (in quanta of 2**quantum) is a nonzero RZ-F32
    subnormal (:func:`_redo_applies`), redo the sum without the groups whose
    scale raw (the max of ``sr`` over the group, stored in ``gr``) is below ``gmax``
    (the largest scale raw of the blocks holding a nonzero product) and whose
    contribution is below 2**(srT - quantum) quanta (:func:`_redo_keeps`)."""
    if not _redo_applies(total, quantum):
        return total
    limit = _redo_limit(srT, quantum)
    for g in range(G):
        v = np.int64(NEG)
        for k in range(g * group, g * group + group):
            if sr[k] > v:
                v = sr[k]
        gr[g] = v
    red = ctr
    for g in range(G):
        if _redo_keeps(contrib[g], limit, gr[g], gmax):
            red += contrib[g]
    return red


@_inline
def _d_or_c(total, quantum, excl, any_live, c_neg, c_mag, cq):
    """``(neg, mag, e0)`` of D: the sum, or (zeros excluded, no live product) C itself."""
    if excl and not any_live:
        return c_neg, c_mag, cq
    return total < 0, abs(total), quantum


@_inline
def _group_min_q(qmin, m, q):
    """The smallest exponent of a group's live products, with product ``m * 2**q`` noted
    (``m`` 0: not live); ``LQBIG`` before the first."""
    return min(qmin, q if m != 0 else LQBIG)


@_inline
def _group_unit(qmin):
    """The unit ``2**qmin`` of a group's exact sum from :func:`_group_min_q` (0 with no live product)."""
    return np.int64(0) if qmin == LQBIG else qmin


@_inline
def _group_add(tot, bad, m, q, ng, qmin, clog):
    """``(tot, bad)`` with the product ``m * 2**q`` (negative where ``ng`` is 1) added in units
    of ``2**qmin``; ``bad`` where the shifted product leaves no room in int64 for the sum of
    ``2**clog`` of them (the reference refuses such a sum)."""
    # branch-free: a zero product adds 0 whatever its shift
    sh = q - qmin
    bad = bad or (m != 0 and sh + _bitlen(m) + clog > 62)
    v = m << _clip(sh, 0, 62)
    return tot + ((v ^ -ng) + ng), bad


@_inline
def _group_sum(pm, pq, pn, lo, hi, clog):
    """Exact sum of the products ``lo .. hi`` (sign ``pn``, magnitude ``pm``, exponent
    ``pq``) at the smallest live exponent ``qmin`` (0 if none is live): ``(sum, qmin,
    bad)`` (:func:`_group_min_q`, :func:`_group_add`)."""
    qmin = np.int64(LQBIG)
    for k in range(lo, hi):
        qmin = _group_min_q(qmin, pm[k], pq[k])
    qmin = _group_unit(qmin)
    tot = np.int64(0)
    bad = False
    for k in range(lo, hi):
        tot, bad = _group_add(tot, bad, pm[k], pq[k], np.int64(pn[k]), qmin, clog)
    return tot, qmin, bad


@_inline
def _group_term(v, q, gr, c_live, cr, qrel, quantum, R):
    """The term of one group (or product) in the window's sum: its exact sum ``v * 2**q``
    truncated at ``quantum``, or C-relative (:func:`_c_relative`; ``gr`` its largest raw
    exponent, NEG for none; ``qrel``: :func:`_c_relative_quantum`)."""
    t = _trunc(v < 0, abs(v), q, quantum)
    if R.has_cr == 1:
        t = _c_relative(t, v < 0, abs(v), q, gr, c_live, cr, qrel, quantum)
    return t


@_inline
def _c_dominant_total(ptot, ctot, cdom, R):
    """The groups' total ``ptot``, or where C dominates with C-dominant groups of another size
    than the window's, ``ctot``: the sum of those groups truncated."""
    if R.has_cd == 1 and R.cdG != R.group and cdom:
        return ctot
    return ptot


@_inline
def _window_sum(G, gs, gq, gr, contrib, quantum, cterm, ctot, psr, sgroup, max_sr, R):
    """The window's sum of one step from its group values, at ``quantum``, in both
    kernels' layouts: each group's exact sum ``gs`` (at q ``gq``, largest raw
    exponent ``gr``: NEG for none) truncated, the C-relative truncation, the sum
    ``ctot`` of the truncated C-dominant groups in place of the groups' when C
    dominates, the truncated C, the subnormal redo (``psr``: the scale raw of each
    of ``sgroup`` products per group; ``gr`` is then overwritten).  ``contrib``: a
    work array (the contributions); ``cterm``: C live, C r, C sign, C magnitude, C
    q, and whether C dominates."""
    c_live, cr, c_neg, c_mag, cq, cdom = cterm
    qrel = _c_relative_quantum(cr, quantum, R)
    ptot = np.int64(0)
    for g in range(G):
        t = _group_term(gs[g], gq[g], gr[g], c_live, cr, qrel, quantum, R)
        contrib[g] = t
        ptot += t
    ptot = _c_dominant_total(ptot, ctot, cdom, R)
    ctr = _trunc(c_neg, c_mag, cq, quantum)
    total = ptot + ctr
    if R.has_sr == 1 and not cdom:
        total = _subnormal_redo(total, quantum, ctr, contrib, psr, sgroup, G, gr, R.srT, max_sr)
    return total


@_inline
def _group_total(G, step, pm, pq, pn, plr, psr, max_sr, bufs, quantum, cterm, R):
    """The window's sum of one step from its products (:func:`_window_sum`): the group
    sums (``group`` > 1, :func:`_group_sum`) and the C-dominant sums (groups of ``cdG``)
    formed from the products.  ``plr``: each product's raw exponent (NEG for a zero);
    ``bufs``: work arrays (contributions, group sums, their q, their largest raw
    exponent).  Returns ``(total, bad)`` (``bad``: a sum the reference refuses)."""
    contrib, gs, gq, gr = bufs
    group = R.group
    bad = False
    for g in range(G):
        if group == 1:
            gs[g] = -pm[g] if pn[g] else pm[g]
            gq[g] = pq[g]
            gr[g] = plr[g]
        else:
            tot, qmin, b = _group_sum(pm, pq, pn, g * group, g * group + group, R.clog_g)
            bad = bad or b
            grm = np.int64(NEG)
            for k in range(g * group, g * group + group):
                grm = max(grm, plr[k])
            gs[g] = tot
            gq[g] = qmin
            gr[g] = grm
    ctot = np.int64(0)
    if R.has_cd == 1 and R.cdG != group:
        for h in range(step // R.cdG):
            tot, qmin, b = _group_sum(pm, pq, pn, h * R.cdG, h * R.cdG + R.cdG, R.clog_cd)
            bad = bad or b
            ctot += _trunc(tot < 0, abs(tot), qmin, quantum)
    return _window_sum(G, gs, gq, gr, contrib, quantum, cterm, ctot, psr, group, max_sr, R), bad


@_inline
def _block_scales(LT, sa, sb, rsa, rsb, q0, bsm, bqs, bsr):
    """The scale products of a row's blocks through the per-word rows of ``LT``: per block
    ``bsm`` the signed significand product (0 with a zero scale), ``bqs`` its q plus ``q0``
    (the joint table's), ``bsr`` its raw exponent; returns whether a scale is an inf / NaN."""
    special = False
    for blk in range(sa.shape[1]):
        x = np.int64(sa[rsa, blk])
        y = np.int64(sb[rsb, blk])
        if LT[LT_SPECIAL, x] + LT[LT_SPECIAL, y] != 0:
            special = True
        bsm[blk] = LT[LT_SM, x] * LT[LT_SM, y]
        bqs[blk] = LT[LT_SQ, x] + LT[LT_SQ, y] + q0
        bsr[blk] = LT[LT_SR, x] + LT[LT_SR, y]
    return special


@_inline
def _joint_row(d, ncols, ia, ib, ic, isa, isb, wc, fp, TAB, LT, sa, sb, q0, bsm, bqs, bsr, flags, spec):
    """The start of row ``d`` in a kernel on the joint table: its flags cleared, its A / B rows,
    its C decoded (``fp``), its blocks' scale products (:func:`_block_scales`) and whether C or
    a scale is an inf / NaN."""
    flags[d] = False
    spec[d] = False
    ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
    c = _decode(np.int64(wc[rc]), fp, TAB)
    special = _block_scales(LT, sa, sb, rsa, rsb, q0, bsm, bqs, bsr) or c[0] >= INF
    return ra, rb, c, special


@_inline
def _joint_group(LT, wa, wb, ra, rb, lo, group, bsh):
    """The exact sum of the ``group`` products from element ``lo`` through the joint table:
    ``(sum of LT_P, largest LT_Q)`` (``GDEAD`` where every product has a zero factor)."""
    tot = np.int64(0)
    qm = np.int64(GDEAD)
    for kk in range(lo, lo + group):
        j = (np.int64(wa[ra, kk]) << bsh) | np.int64(wb[rb, kk])
        tot += LT[LT_P, j]
        qm = max(qm, LT[LT_Q, j])
    return tot, qm


# ------------------------------------------------------------------ kernels
@_jit
def _window_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, rec, enc, W):
    """One step of the window with every parameter, on every word (inf / NaN included)."""
    R = _window_params(rec)
    ccls, csg, cm, cq, cr = c
    scaled = R.scaled == 1
    pm, pq, pn, plr, psr = W[0], W[1], W[2], W[3], W[4]
    G = step // R.group
    sp = NO_SPECIAL
    max_r = np.int64(NEG)
    max_sr = np.int64(NEG)
    any_live = False
    dead = False
    for k in range(step):
        kk = s0 + k
        ac, asg, am, aq, ar = _decode(np.int64(wa[ra, kk]), fp.a, TAB)
        bc, bsg, bm, bq, br = _decode(np.int64(wb[rb, kk]), fp.b, TAB)
        nanf = ac == NAN or bc == NAN
        inff = ac == INF or bc == INF
        zf = ac == ZERO or bc == ZERO
        sg = asg ^ bsg
        m = am * bm
        q = aq + bq
        r = ar + br
        if scaled:
            xc, xsg, xm, xq, xr = _decode(np.int64(sa[rsa, kk // block]), fp.scale, TAB)
            yc, ysg, ym, yq, yr = _decode(np.int64(sb[rsb, kk // block]), fp.scale, TAB)
            nanf = nanf or xc == NAN or yc == NAN
            inff = inff or xc == INF or yc == INF
            zf = zf or xc == ZERO or yc == ZERO
            sg = sg ^ xsg ^ ysg
            m = m * xm * ym
            q = q + xq + yq
            r = r + xr + yr
            psr[k] = xr + yr
        cls = _product_class(nanf, inff, zf)
        sp = _note_special(cls, sg == 1, sp)
        pn[k] = sg
        pq[k] = q
        if cls == FINITE:
            pm[k] = m
            plr[k] = r
            any_live = True
            max_r = max(max_r, r)
            if scaled:
                max_sr = max(max_sr, psr[k])     # the blocks holding a nonzero product
        else:
            pm[k] = 0
            plr[k] = NEG
            dead = True
    nan, inf, inf_neg = _special_result(_note_special(ccls, csg == 1, sp))
    c_live = ccls == FINITE
    c_mag = cm if c_live else np.int64(0)
    c_neg = csg == 1
    quantum, cdom = _window_quantum(max_r, any_live, dead, c_live, cr, max_sr, R)
    total, bad = _group_total(G, step, pm, pq, pn, plr, psr, max_sr, (W[5], W[6], W[7], W[8]), quantum,
                              (c_live, cr, c_neg, c_mag, cq, cdom), R)
    oneg, omag, e0 = _d_or_c(total, quantum, R.excl == 1, any_live, c_neg, c_mag, cq)
    return _pack(oneg, omag, e0, nan, inf, inf_neg, False, enc), bad


#: The window with every parameter, on every word (inf / NaN included), one row at a time.
window_kernel = row_kernel(_window_step, "window_kernel")


def _grouped_variant(F32, RZ):
    """The grouped window kernel for C and D in binary32 or not (``F32``) and for the
    round-toward-zero encoder into the word's own fraction width or not (``RZ``):
    constants of the closure, so that the C / D decode and the pack fold them."""

    def window_grouped_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block, out,
                              flags, LT, spec):
        """The grouped block-scaled window (B200 NVFP4 / MXF4) where every group lies in one
        scale block and the A / B formats are narrow (``LeanGrouped`` of the numpy backend
        decides, and proves the int64 bounds): A and B are decoded pairwise through one joint
        table (row ``LT_P`` the signed significand product aligned to the formats' smallest q,
        ``LT_Q`` the sum of the two q, ``GDEAD`` with a zero factor), a group's exact sum is
        the sum of those integers times the block's scale product, and the group rules
        (the same primitives as :func:`window_kernel`) follow on group values.  No row is
        refused (the bounds hold for every word); rows with an inf / NaN are marked in
        ``spec`` (:func:`window_kernel` computes them)."""
        n = out.shape[0]
        K = wa.shape[1]
        fp2, fp3 = _fmt(FM, C_FMT), _fmt(FM, D_FMT)
        if F32:        # C and D in binary32: the constant spec (folded into the steps)
            fp2, fp3 = F32_SPEC, F32_SPEC
        enc = _rz_enc(ENC[0]) if RZ else _enc(ENC[0])
        R = _window_params(RA[0])
        group = R.group
        bsh = R.bshift
        q0 = R.q0
        G = step // group
        per = block // group
        contrib = np.zeros(G, np.int64)
        gs = np.zeros(G, np.int64)
        gq = np.zeros(G, np.int64)
        gr = np.zeros(G, np.int64)
        gsr = np.zeros(G, np.int64)
        nb = sa.shape[1]
        bsm, bqs, bsr = np.zeros(nb, np.int64), np.zeros(nb, np.int64), np.zeros(nb, np.int64)
        nspec = 0
        for d in range(n):
            ra, rb, c, special = _joint_row(d, ncols, ia, ib, ic, isa, isb, wc, fp2, TAB, LT, sa, sb, q0,
                                            bsm, bqs, bsr, flags, spec)
            ccls, csg, cm, cq, cr = c
            word = np.int64(0)
            for s0 in range(0, K, step):
                if special:
                    break
                max_r = np.int64(NEG)
                max_sr = np.int64(NEG)
                any_live = False
                for blk in range(s0 // block, (s0 + step) // block):
                    bm = bsm[blk]
                    bs = bsr[blk]
                    brr = R.roff + bs
                    g0 = (blk * block - s0) // group
                    for g in range(g0, g0 + per):
                        tot, qm = _joint_group(LT, wa, wb, ra, rb, s0 + g * group, group, bsh)
                        gs[g] = tot * bm
                        gq[g] = bqs[blk]
                        gsr[g] = bs
                        gr[g] = NEG
                        if qm > GDEAD // 2 and bm != 0:
                            gr[g] = qm + brr
                            any_live = True
                            max_r = max(max_r, gr[g])
                            max_sr = max(max_sr, bs)     # the blocks holding a nonzero product
                c_live = ccls == FINITE
                c_mag = cm if c_live else np.int64(0)
                c_neg = csg == 1
                quantum, cdom = _window_quantum(max_r, any_live, False, c_live, cr, max_sr, R)
                ctot = np.int64(0)
                if R.has_cd == 1 and R.cdG != group and cdom:
                    # the C-dominant groups of cdG elements: sums of groups inside one block (one q)
                    r = R.cdG // group
                    for h in range(0, G, r):
                        cs = np.int64(0)
                        for g in range(h, h + r):
                            cs += gs[g]
                        ctot += _trunc(cs < 0, abs(cs), gq[h], quantum)
                cterm = (c_live, cr, c_neg, c_mag, cq, cdom)
                total = _window_sum(G, gs, gq, gr, contrib, quantum, cterm, ctot, gsr, 1, max_sr, R)
                oneg, omag, e0 = _d_or_c(total, quantum, True, any_live, c_neg, c_mag, cq)
                word = _pack(oneg, omag, e0, False, False, False, False, enc)
                if s0 + step < K:
                    ccls, csg, cm, cq, cr = _decode(word & enc.word_mask, fp3, TAB)
                    if ccls >= INF:
                        special = True
            if special:
                spec[d] = True
                nspec += 1
                continue
            out[d] = word
        return 0, nspec

    window_grouped_kernel.__qualname__ = window_grouped_kernel.__name__ = "window_grouped_kernel_%d_%d" % (F32, RZ)
    return _jit(window_grouped_kernel)


_GROUPED_VARIANTS = {}


def grouped_variant(f32, rz):
    """:func:`_grouped_variant`, made on first use (numba compiles it on its first call)."""
    key = (bool(f32), bool(rz))
    if key not in _GROUPED_VARIANTS:
        _GROUPED_VARIANTS[key] = _grouped_variant(*key)
    return _GROUPED_VARIANTS[key]
