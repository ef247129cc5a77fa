"""Compiled kernels of the other accumulator families (integer, group-scaled window,
two-stage window, exact sum, the IEEE chains), each the scalar transcription of
its numpy reference in :mod:`mmasim.accumulators`, written with the shared
primitives of :mod:`.primitives` (and the exact group sums of :mod:`.window`).
``R`` is the family's parameter record (:mod:`mmasim.backends.numba.kernels`).
"""

from __future__ import annotations

import functools

import numpy as np

from mmasim.backends.numba.primitives import (
    A_FMT,
    B_FMT,
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
    _decode,
    _element_product,
    _enc,
    _floor_shift,
    _fma,
    _fmt,
    _int_value,
    _jit,
    _inline,
    _inline_rows,
    _note_special,
    _pack,
    _pack_int,
    _product_class,
    _rows,
    _rz_enc,
    _special_result,
    _trunc,
    _value,
    row_kernel,
)
from mmasim.backends.numba.window import GDEAD, _group_sum, _joint_group, _joint_row


# ------------------------------------------------------------------ integer
def _integer_steps(XOR):
    """The integer family's step (``accumulators/integer.py``): the exact sum of the terms
    plus C, wrapped or saturated to s32 by ``_pack_int``.  A term is ``a * b``, or with
    ``XOR`` (``bitop = "xor"``, b1 ``.xor.popc``) ``a ^ b`` of the decoded 0/1 values:
    one source, specialised by the closure constant."""

    def integer_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R, enc, W):
        ccls, csg, cm, cq, cr = c
        total = np.int64(0)
        if fp.a.tab_len == 0 and fp.b.tab_len == 0:
            # the built-in integer decoder, arithmetic: a loop without table reads, which vectorizes
            for k in range(s0, s0 + step):
                x = _int_value(np.int64(wa[ra, k]), fp.a)
                y = _int_value(np.int64(wb[rb, k]), fp.b)
                if XOR:
                    total += x ^ y
                else:
                    total += x * y
        else:
            for k in range(s0, s0 + step):
                ac, asg, am, aq, ar = _decode(np.int64(wa[ra, k]), fp.a, TAB)
                bc, bsg, bm, bq, br = _decode(np.int64(wb[rb, k]), fp.b, TAB)
                x = -am if asg == 1 else am
                y = -bm if bsg == 1 else bm
                if XOR:
                    total += x ^ y
                else:
                    total += x * y
        total += -cm if csg == 1 else cm
        return _pack_int(total, enc), False

    integer_step.__qualname__ = integer_step.__name__ = "integer_xor_step" if XOR else "integer_step"
    return _inline(integer_step)


#: XOR -> the integer step (:func:`_integer_steps`)
INTEGER_STEPS = {xor: _integer_steps(xor) for xor in (False, True)}
integer_kernel = row_kernel(INTEGER_STEPS[False], "integer_kernel")
integer_xor_kernel = row_kernel(INTEGER_STEPS[True], "integer_xor_kernel")


# ------------------------------------------------------- group-scaled window
@_inline
def _gs_block(sa, sb, rsa, rsb, blk, fp, TAB):
    """The scale product of block ``blk`` of the row: ``(cls, m, q, r)``, special.product's
    class of the two scales, the product of their significands (0 unless both are finite),
    the sums of their q and of their raw exponents."""
    xc, xsg, xm, xq, xr = _decode(np.int64(sa[rsa, blk]), fp.scale, TAB)
    yc, ysg, ym, yq, yr = _decode(np.int64(sb[rsb, blk]), fp.scale, TAB)
    scls = _product_class(xc == NAN or yc == NAN, xc == INF or yc == INF, xc == ZERO or yc == ZERO)
    smag = xm * ym if (xc == FINITE and yc == FINITE) else np.int64(0)
    return scls, smag, xq + yq, xr + yr


@_inline
def _gs_group_r(anyl, scls, sr, ezero):
    """A group's exponent in the window: its scale product's raw ``sr``, or e_zero where the
    group has no live product (``anyl``) or the scale product is zero."""
    return ezero if ((not anyl) or scls == ZERO) else sr


@_inline
def _gs_term(tot, qmin, smag, sq, quantum):
    """A group's term: its exact sum ``tot * 2**qmin`` times its scale product (``smag * 2**sq``)
    truncated at ``quantum``."""
    return _trunc(tot < 0, abs(tot) * smag, qmin + sq, quantum)


@_jit
def _group_scaled_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R, enc, W):
    ccls, csg, cm, cq, cr = c
    pm, pq, pn = W[0], W[1], W[2]
    group = R.group
    sp = NO_SPECIAL
    blk = np.int64(-1)          # the scale block whose classes and sign are held below
    snan, sinf, szero, ssg = False, False, False, np.int64(0)
    for k in range(step):
        kk = s0 + k
        if kk // block != blk:  # the two scales decoded once per block, not per product
            blk = kk // block
            xc, xsg, xm, xq, xr = _decode(np.int64(sa[rsa, blk]), fp.scale, TAB)
            yc, ysg, ym, yq, yr = _decode(np.int64(sb[rsb, blk]), fp.scale, TAB)
            snan, sinf, szero, ssg = xc == NAN or yc == NAN, xc == INF or yc == INF, xc == ZERO or yc == ZERO, xsg ^ ysg
        ac, asg, am, aq, ar = _decode(np.int64(wa[ra, kk]), fp.a, TAB)
        bc, bsg, bm, bq, br = _decode(np.int64(wb[rb, kk]), fp.b, TAB)
        nan2 = ac == NAN or bc == NAN
        inf2 = ac == INF or bc == INF
        z2 = ac == ZERO or bc == ZERO
        # specials of the scaled product
        cls4 = _product_class(nan2 or snan, inf2 or sinf, z2 or szero)
        sp = _note_special(cls4, (asg ^ bsg ^ ssg) == 1, sp)
        # the unscaled product
        pm[k] = am * bm if _product_class(nan2, inf2, z2) == FINITE else np.int64(0)
        pq[k] = aq + bq
        pn[k] = asg ^ bsg
    nan, inf, inf_neg = _special_result(_note_special(ccls, csg == 1, sp))
    c_live = ccls == FINITE
    E = cr if c_live else R.ezero
    G = step // group
    for g in range(G):
        lo = g * group
        anyl = False
        for k in range(lo, lo + group):
            if pm[k] != 0:
                anyl = True
        scls, smag, sq, sr = _gs_block(sa, sb, rsa, rsb, (s0 + lo) // block, fp, TAB)
        ge = _gs_group_r(anyl, scls, sr, R.ezero)
        if ge > E:
            E = ge
    quantum = E - R.F
    total = np.int64(0)
    bad = False
    for g in range(G):
        lo = g * group
        tot, qmin, b = _group_sum(pm, pq, pn, lo, lo + group, R.clog_g)
        bad = bad or b
        scls, smag, sq, sr = _gs_block(sa, sb, rsa, rsb, (s0 + lo) // block, fp, TAB)
        total += _gs_term(tot, qmin, smag, sq, quantum)
    total += _trunc(csg == 1, cm if c_live else np.int64(0), cq, quantum)
    return _pack(total < 0, abs(total), quantum, nan, inf, inf_neg, False, enc), bad


group_scaled_kernel = row_kernel(_group_scaled_step, "group_scaled_kernel")


@functools.lru_cache(maxsize=None)
def group_scaled_joint_variant(F32, RZ):
    """The group-scaled window on a joint A x B table for C and D in binary32 or not (``F32``)
    and for the round-toward-zero encoder into the word's own fraction width or not (``RZ``):
    constants of the closure, so that the C / D decode and the pack fold them; made on first
    use (numba compiles it on its first call)."""

    def group_scaled_joint_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block,
                                  out, flags, LT, spec):
        """The group-scaled window (:func:`_group_scaled_step`'s rule) where A and B are narrow and
        every group lies in one scale block (:func:`mmasim.backends.fastpaths.group_scaled.group_scaled_joint`
        decides, and proves the int64 bounds): the scale products once per row and block
        (``_block_scales``), each group's exact sum as the sum of its pairs' joint entries
        (``_joint_group``; a group with a live product: largest joint q above ``GDEAD``), times
        its block's scale product.  No row is refused; rows with an inf / NaN (scales, C, or a
        step that overflowed) are marked in ``spec`` (:data:`group_scaled_kernel` computes them)."""
        n = out.shape[0]
        K = wa.shape[1]
        fp2, fp3 = _fmt(FM, C_FMT), _fmt(FM, D_FMT)
        if F32:        # C and D in binary32: the constant spec (folded into the steps)
            fp2, fp3 = F32_SPEC, F32_SPEC
        enc = _rz_enc(ENC[0]) if RZ else _enc(ENC[0])
        R = RA[0]
        F, group, ezero, bsh, q0 = R.F, R.group, R.ezero, R.bshift, R.q0
        G = step // group
        gs = np.zeros(G, np.int64)
        gq = np.zeros(G, np.int64)
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
                c_live = ccls == FINITE
                E = cr if c_live else ezero
                for g in range(G):
                    lo = s0 + g * group
                    blk = lo // block
                    tot, qm = _joint_group(LT, wa, wb, ra, rb, lo, group, bsh)
                    bm = bsm[blk]
                    gs[g] = tot * bm
                    gq[g] = bqs[blk]
                    # e_zero for a group without a live product or with a zero scale product
                    E = max(E, bsr[blk] if (qm > GDEAD // 2 and bm != 0) else ezero)
                quantum = E - F
                total = _trunc(csg == 1, cm if c_live else np.int64(0), cq, quantum)
                for g in range(G):
                    v = gs[g]
                    total += _trunc(v < 0, abs(v), gq[g], quantum)
                word = _pack(total < 0, abs(total), quantum, False, False, False, False, enc)
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

    group_scaled_joint_kernel.__qualname__ = group_scaled_joint_kernel.__name__ = (
        "group_scaled_joint_kernel_%d_%d" % (F32, RZ))
    return _jit(group_scaled_joint_kernel)


# ---------------------------------------------------------- two-stage window
@_inline
def _two_stage_product(wa, wb, ra, rb, k, fp, TAB, R):
    """Product ``k`` of the row (:func:`~.primitives._element_product`), an inf where it reaches
    the product overflow ``R.ovf`` (``has_ovf``): ``(cls, sign, m, q, r)``, ``m`` 0 unless finite."""
    cls, sg, m, q, r = _element_product(wa, wb, ra, rb, k, fp, TAB)
    if R.has_ovf == 1 and cls == FINITE and _bitlen(m) - 1 + q >= R.ovf:
        cls = INF
        m = np.int64(0)
    return cls, sg, m, q, r


@_inline
def _two_stage_odd(k, R):
    """Whether product ``k`` of a step is summed in the second group (``even_odd``: the odd ones)."""
    return R.even_odd == 1 and (k & 1) == 1


@_inline
def _two_stage_sum(E0, E1, S0, S1, c, sp, R, enc):
    """The D word of a step from its group sums: ``S0`` / ``S1`` the products of each group
    truncated at its largest raw ``E0`` / ``E1`` (NEG for none) minus F, C (decoded) and ``sp``
    the specials of the products; the second stage aligns the groups and C at F2 + 1 bits."""
    ccls, csg, cm, cq, cr = c
    F, F2 = R.F, R.F2
    ngroups = 2 if R.even_odd == 1 else 1
    emin = 1 - enc.bias
    E_dot = E0
    if ngroups == 2 and E1 > E_dot:
        E_dot = E1
    dot = _floor_shift(S0, E0 - E_dot)
    if ngroups == 2:
        dot += _floor_shift(S1, E1 - E_dot)
    r_c = cr
    if R.has_nf == 1 and not (ccls == FINITE or ccls == ZERO):
        r_c = R.nfcr
    e = E_dot if E_dot > r_c else r_c
    dot = _floor_shift(dot, (E_dot - F) - (e - F2 - 1))
    c_signed = (-cm if csg == 1 else cm) if ccls == FINITE else np.int64(0)
    c_fl = _floor_shift(c_signed, cq - (e - F))
    keep_c = True
    if R.drop_c == 1:
        keep_c = r_c >= e - F - 1
        if not keep_c:
            c_fl = np.int64(0)
    total = dot + (c_fl << (F2 + 1 - F))
    E2 = _bitlen(abs(total)) - 1 + (e - F2 - 1)
    if E2 < emin:
        E2 = emin
    total = _floor_shift(total, (e - F2 - 1) - (E2 - F2))
    nan, inf, inf_neg = _special_result(_note_special(ccls if keep_c else ZERO, csg == 1, sp))
    return _pack(total < 0, abs(total), E2 - F2, nan, inf, inf_neg, total < 0, enc)


@_jit
def _two_stage_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R, enc, W):
    pm, pq, pn, plr = W[0], W[1], W[2], W[3]
    F = R.F
    sp = NO_SPECIAL
    for k in range(step):
        cls, sg, m, q, r = _two_stage_product(wa, wb, ra, rb, s0 + k, fp, TAB, R)
        sp = _note_special(cls, sg == 1, sp)
        live = cls == FINITE
        pm[k] = m if live else np.int64(0)
        pq[k] = q
        pn[k] = sg
        plr[k] = r if live else np.int64(NEG)
    E0 = np.int64(NEG)
    E1 = np.int64(NEG)
    for k in range(step):
        if _two_stage_odd(k, R):
            if plr[k] > E1:
                E1 = plr[k]
        else:
            if plr[k] > E0:
                E0 = plr[k]
    S0 = np.int64(0)
    S1 = np.int64(0)
    for k in range(step):
        if _two_stage_odd(k, R):
            S1 += _trunc(pn[k], pm[k], pq[k], E1 - F)
        else:
            S0 += _trunc(pn[k], pm[k], pq[k], E0 - F)
    return _two_stage_sum(E0, E1, S0, S1, c, sp, R, enc), False


two_stage_kernel = row_kernel(_two_stage_step, "two_stage_kernel")


# ---------------------------------------------------------------- exact sum
@_inline
def _exact_note(qmin, top, anyl, m, q):
    """``(qmin, top, anyl)`` with term ``m * 2**q`` noted: the smallest q and the largest
    q + bit length of the nonzero terms, and whether there is one."""
    if m != 0:
        anyl = True
        if q < qmin:
            qmin = q
        t = q + _bitlen(m)
        if t > top:
            top = t
    return qmin, top, anyl


@_inline
def _exact_start():
    """``(qmin, top, anyl)`` before any term (:func:`_exact_note`)."""
    return np.int64(1) << 40, np.int64(NEG), False


@_inline
def _exact_unit(qmin, top, anyl, step):
    """``(qmin, bad)`` of noted terms (:func:`_exact_note`): the unit of their exact sum (0 with
    no nonzero term) and whether the sum of ``step + 1`` of them leaves int64 (the reference
    then sums exact integers: the row is flagged)."""
    if not anyl:
        return np.int64(0), False
    return qmin, top - qmin + _bitlen(np.int64(step + 1)) > 62


@_inline
def _exact_add(total, m, q, neg, qmin):
    """``total`` plus the term ``m * 2**q`` (negative where ``neg``) in units of ``2**qmin``."""
    if m != 0:
        v = m << (q - qmin)
        total += -v if neg else v
    return total


@_inline
def _exact_pack(total, qmin, special, enc):
    """The D word of the exact sum ``total * 2**qmin`` (``special``: ``(nan, inf, inf_neg)``)."""
    nan, inf, inf_neg = special
    oneg = total < 0
    return _pack(oneg, abs(total), qmin, nan, inf, inf_neg, oneg, enc)


@_jit
def _exact_sum_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R, enc, W):
    ccls, csg, cm, cq, cr = c
    pm, pq, pn = W[0], W[1], W[2]
    sp = NO_SPECIAL
    for k in range(step):
        cls, sg, m, q, _r = _element_product(wa, wb, ra, rb, s0 + k, fp, TAB)
        sp = _note_special(cls, sg == 1, sp)
        pm[k] = m
        pq[k] = q
        pn[k] = sg
    special = _special_result(_note_special(ccls, csg == 1, sp))
    pm[step] = cm if ccls == FINITE else np.int64(0)
    pq[step] = cq
    pn[step] = csg
    qmin, top, anyl = _exact_start()
    for k in range(step + 1):
        qmin, top, anyl = _exact_note(qmin, top, anyl, pm[k], pq[k])
    qmin, bad = _exact_unit(qmin, top, anyl, step)
    if bad:
        return np.int64(0), True       # beyond int64: the reference's exact integers
    total = np.int64(0)
    for k in range(step + 1):
        total = _exact_add(total, pm[k], pq[k], pn[k], qmin)
    return _exact_pack(total, qmin, special, enc), False


exact_sum_kernel = row_kernel(_exact_sum_step, "exact_sum_kernel")


# ------------------------------------------------------- IEEE float families
def _ieee_chain_row(FUSED, F64):
    """One row of the FMA chain (``FUSED``: ``acc = fma(a, b, acc)`` from C) or of the mul-add
    chain (products summed in order, then C added) in binary64 (``F64``) or binary32: one
    source, specialised by the closure constants, inlined where it is used (the kernel of
    :func:`_ieee_chain` and the per-row bodies of :mod:`mmasim.backends.cuda.rows`).  Returns
    the value of D (binary32 / binary64)."""
    ftype = np.float64 if F64 else np.float32

    def ieee_chain_row(d, wa, wb, wc, ia, ib, ic, isa, isb, ncols, K, fp0, fp1, fp2, TAB):
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        c0, c1, c2, c3, c4 = _decode(np.int64(wc[rc]), fp2, TAB)
        c = ftype(_value(c0, c1, c2, c3))
        acc = c if FUSED else ftype(0.0)
        for k in range(K):
            a0, a1, a2, a3, a4 = _decode(np.int64(wa[ra, k]), fp0, TAB)
            b0, b1, b2, b3, b4 = _decode(np.int64(wb[rb, k]), fp1, TAB)
            x, y = ftype(_value(a0, a1, a2, a3)), ftype(_value(b0, b1, b2, b3))
            if FUSED:
                acc = _fma(x, y, acc)
            else:
                p = x * y
                acc = p if k == 0 else acc + p
        return acc if FUSED else acc + c

    ieee_chain_row.__qualname__ = ieee_chain_row.__name__ = (
        ("fma" if FUSED else "mul_add") + ("_f64" if F64 else "_f32") + "_row")
    return _inline_rows(ieee_chain_row)


#: (FUSED, F64) -> the row of :func:`_ieee_chain_row`
IEEE_ROWS = {(fused, f64): _ieee_chain_row(fused, f64) for fused in (True, False) for f64 in (True, False)}


def _ieee_chain(FUSED, F64):
    """The kernel of the rows :data:`IEEE_ROWS` ``[FUSED, F64]``: the value of D per row."""
    row = IEEE_ROWS[FUSED, F64]

    def ieee_chain_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block, out,
                          flags):
        n = out.shape[0]
        K = wa.shape[1]
        fp0, fp1, fp2 = _fmt(FM, A_FMT), _fmt(FM, B_FMT), _fmt(FM, C_FMT)
        for d in range(n):
            flags[d] = False
            out[d] = row(d, wa, wb, wc, ia, ib, ic, isa, isb, ncols, K, fp0, fp1, fp2, TAB)
        return 0

    ieee_chain_kernel.__qualname__ = ieee_chain_kernel.__name__ = (
        ("fma" if FUSED else "mul_add") + ("_f64" if F64 else "_f32") + "_kernel")
    return _jit(ieee_chain_kernel)


fma_f64_kernel = _ieee_chain(True, True)
fma_f32_kernel = _ieee_chain(True, False)
mul_add_f64_kernel = _ieee_chain(False, True)
mul_add_f32_kernel = _ieee_chain(False, False)


@_inline
def _ftz_in(cls, s, m, q, r):
    """ftz_mul_add._flush_inputs: subnormals and zeros read as +0."""
    if cls == ZERO or (cls == FINITE and _bitlen(m) - 1 + q < r):
        return np.float32(0.0)
    return np.float32(_value(cls, s, m, q))


@_inline
def _flush(x):
    if abs(x) < np.float32(2.0 ** -126):
        return x * np.float32(0.0)
    return x


@_inline_rows
def ftz_mul_add_row(d, wa, wb, wc, ia, ib, ic, isa, isb, ncols, K, PP, fp0, fp1, fp2, TAB):
    """One row of the FTZ mul-add chain: partial sums of ``PP`` (2 or 4) flushed products,
    each added to the flushed accumulator from C; the value of D (binary32)."""
    ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
    c0, c1, c2, c3, c4 = _decode(np.int64(wc[rc]), fp2, TAB)
    acc = _ftz_in(c0, c1, c2, c3, c4)
    for i in range(0, K, PP):
        p0 = np.float32(0.0)
        p1 = np.float32(0.0)
        p2 = np.float32(0.0)
        p3 = np.float32(0.0)
        for j in range(PP):
            a0, a1, a2, a3, a4 = _decode(np.int64(wa[ra, i + j]), fp0, TAB)
            b0, b1, b2, b3, b4 = _decode(np.int64(wb[rb, i + j]), fp1, TAB)
            p = _flush(_ftz_in(a0, a1, a2, a3, a4) * _ftz_in(b0, b1, b2, b3, b4))
            if j == 0:
                p0 = p
            elif j == 1:
                p1 = p
            elif j == 2:
                p2 = p
            else:
                p3 = p
        s = _flush(p0 + p1)
        if PP == 4:
            s = _flush(s + _flush(p2 + p3))
        acc = _flush(acc + s)
    return acc


@_jit
def ftz_mul_add_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block, out, flags):
    n = out.shape[0]
    K = wa.shape[1]
    fp0, fp1, fp2 = _fmt(FM, A_FMT), _fmt(FM, B_FMT), _fmt(FM, C_FMT)
    PP = RA[0].P
    for d in range(n):
        flags[d] = False
        out[d] = ftz_mul_add_row(d, wa, wb, wc, ia, ib, ic, isa, isb, ncols, K, PP, fp0, fp1, fp2, TAB)
    return 0
