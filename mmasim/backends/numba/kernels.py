"""Compiled (numba) kernels, one per accumulator family.

Each kernel is the scalar transcription of its numpy reference in
:mod:`mmasim.accumulators`, fused per dot product: decode every element, form
the products, accumulate, encode the D word, and decode it again as the C of
the next hardware step.  Fixed-point families use exact int64 arithmetic only
(the same shifts, clips and wrap-arounds as the reference); the IEEE families
(FMA chain, mul-add chain, FTZ mul-add) use IEEE binary32/binary64 operations,
which numba emits without fast-math (no contraction, no reassociation), and a
correctly rounded fused multiply-add (``llvm.fma``).

Nothing here knows an architecture: every kernel is driven by arrays built
from the datapath's formats, parameters and encoding:

``FM``  (5, 12) int64
    decode spec of the A, B, C, D and scale formats: a slice of ``TAB`` (a
    decode table built by the registered decoder over every container word,
    for containers of at most 16 bits, so plugin decoders are honoured), or
    the parameters of the generic float / int decoders for wider containers.
``TAB`` (n, 5) int64
    decoded ``cls, sign, m, q, r`` of every word of the tabled formats.
``P``   int64
    the family's parameters.
``ENC`` int64
    the output encoding.

Rows a kernel cannot compute exactly in int64 (an exact-sum exponent spread
wider than 62 bits, a group sum that the reference refuses) are flagged in
``flags``; the caller recomputes those rows with the numpy reference, so the
result (or the error) is the reference's.
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.core import types
from numba.core.extending import intrinsic
from numba.cpython.unsafe.numbers import leading_zeros

from ...decode import decode_float, decode_int

ZERO, FINITE, INF, NAN = 0, 1, 2, 3
NEG = -(1 << 40)          # intmath.NEG_INF_EXP
_NAN_CODES = {"ieee": 0, "max": 1, "negzero": 2, "allones": 3, "none": 4}
_MODES = {"rz": 0, "rne": 1, "wrap": 2, "sat": 3}

_jit = numba.njit(cache=True, nogil=True)
_inline = numba.njit(cache=True, inline="always")


@intrinsic
def _fma(typingctx, a, b, c):
    """Correctly rounded fused multiply-add (``llvm.fma``) in the operands' precision."""
    if isinstance(a, types.Float) and a == b == c:
        def codegen(context, builder, sig, args):
            return builder.fma(*args)
        return a(a, b, c), codegen
    return None


# --------------------------------------------------------------- scalar parts
@_inline
def _bitlen(x):
    """Bit length of x >= 0 (0 for x <= 0, like intmath.bit_length)."""
    if x <= 0:
        return np.int64(0)
    return np.int64(64) - np.int64(leading_zeros(x))


@_inline
def _clip(x, lo, hi):
    """min(max(x, lo), hi) as selects (the builtins can stay calls, which stop the
    loop vectorizer; nested inline helpers cost compile time)."""
    y = x if x > lo else lo
    return y if y < hi else hi


@_inline
def _shift(mag, by):
    """intmath.shift: trunc(mag * 2**by) for mag >= 0."""
    return (mag << _clip(by, 0, 62)) >> _clip(-by, 0, 63)


@_inline
def _subnormal_redo(total, quantum, ctr, contrib, sr, group, G, gr, srT, gmax):
    """The ue8m0 MXF4 subnormal rule of the window accumulator: if ``total`` (in
    quanta of 2**quantum) is a nonzero RZ-F32 subnormal (2**-149 <= |sum| < 2**-126),
    redo the sum without the groups whose scale raw (the max of ``sr`` over the
    group, stored in ``gr``) is below ``gmax`` (the largest scale raw of the blocks
    holding a nonzero product) and whose contribution is below 2**(srT - quantum) quanta."""
    lead = quantum + _bitlen(abs(total)) - 1
    if total == 0 or lead >= -126 or lead < -149:
        return total
    limit = _clip(srT - quantum, 0, 62)
    for g in range(G):
        v = np.int64(NEG)
        for k in range(g * group, g * group + group):
            if sr[k] > v:
                v = sr[k]
        gr[g] = v
    red = ctr
    for g in range(G):
        if not (_bitlen(abs(contrib[g])) <= limit and gr[g] < gmax):
            red += contrib[g]
    return red


@_inline
def _trunc(neg, mag, q, quantum):
    """intmath.truncate_signed."""
    t = _shift(mag, q - quantum)
    return -t if neg else t


@_inline
def _floor_shift(x, by):
    if by >= 0:
        return x << _clip(by, 0, 62)
    return x >> _clip(-by, 0, 63)


@_inline
def _fmt(FM, f):
    """Format row ``f`` as a tuple of scalars (kept in registers by the kernels)."""
    return (FM[f, 0], FM[f, 1], FM[f, 2], FM[f, 3], FM[f, 4], FM[f, 5], FM[f, 6], FM[f, 7], FM[f, 8],
            FM[f, 9], FM[f, 10], FM[f, 11])


@_inline
def _decode(w, fp, TAB):
    """(cls, sign, m, q, r) of word ``w`` in format ``fp`` (decode.decode_float / decode_int)."""
    if fp[1] > 0:
        v = TAB[fp[0] + w]
        return (v & 3, (v >> 2) & 1, (v >> 3) & 0xFFFFF, ((v >> 23) & 0xFFFF) - 32768,
                ((v >> 39) & 0xFFFF) - 32768)
    fs = fp[3]
    fb = fp[4]
    if fp[2] == 1:  # integer
        if fb >= 64:
            x = w
        else:
            x = (w >> fs) & ((np.int64(1) << fb) - 1)
        if fp[8] == 1 and fb < 64:
            top = np.int64(1) << (fb - 1)
            if x >= top:
                x -= np.int64(1) << fb
        s = np.int64(1) if x < 0 else np.int64(0)
        m = -x if x < 0 else x
        return (ZERO if m == 0 else FINITE), s, m, np.int64(0), np.int64(0)
    E = fp[5]
    M = fp[6]
    bias = fp[7]
    if fb >= 64:
        x = w
    else:
        x = (w >> fs) & ((np.int64(1) << fb) - 1)
    mag_bits = E + M
    s = ((x >> mag_bits) & 1) if fp[8] == 1 else np.int64(0)
    e = (x >> M) & ((np.int64(1) << E) - 1)
    fr = x & ((np.int64(1) << M) - 1)
    if fp[10] == 1:
        if e != 0:
            m = fr | (np.int64(1) << M)
            r = e - bias
        else:
            m = fr
            r = 1 - bias
    else:
        m = fr | (np.int64(1) << M)
        r = e - bias
    q = r - M
    cls = ZERO if m == 0 else FINITE
    rule = fp[9]
    special = False
    if rule == 0:
        if e == (np.int64(1) << E) - 1:
            special = True
            cls = INF if fr == 0 else NAN
    elif rule == 1:
        mm = (np.int64(1) << mag_bits) - 1
        if (x & mm) == mm:
            special = True
            cls = NAN
    elif rule == 2:
        if x == (np.int64(1) << mag_bits):
            special = True
            cls = NAN
        if cls == ZERO:
            s = np.int64(0)
    elif rule == 3:
        if x == (np.int64(1) << fb) - 1:
            special = True
            cls = NAN
    if special:
        m = np.int64(0)
    return cls, s, m, q, r


@_inline
def _pack(neg, mag, e0, nan, inf, inf_neg, zero_neg, ENC):
    """encode.Encoding.pack for one value."""
    if nan:
        return ENC[6]
    if inf:
        return ENC[4] | (ENC[5] if inf_neg else np.int64(0))
    bias = ENC[1]
    frac = ENC[2]
    wfrac = ENC[3]
    emin = 1 - bias
    lead = e0 + _bitlen(mag) - 1
    ml = lead if lead > emin else emin
    drop = (ml - frac) - e0
    keep = (mag << _clip(-drop, 0, 62)) >> _clip(drop, 0, 63)
    if ENC[0] == 1 and drop > 0:
        d = drop if drop < 63 else 63
        if d > 62:
            rem = mag
            half = np.int64(1) << 62
        else:
            rem = mag & ((np.int64(1) << d) - 1)
            half = np.int64(1) << (d - 1)
        if rem > half or (rem == half and (keep & 1) == 1):
            keep += 1
    wmag = ((ml - emin) << frac) + keep
    if mag == 0:
        wmag = np.int64(0)
    if frac != wfrac:
        wmag = ((wmag >> frac) << wfrac) | ((wmag & ((np.int64(1) << frac) - 1)) << (wfrac - frac))
    if wmag >= ENC[4] or (lead > bias and mag != 0):
        wmag = ENC[4]
    neg_out = neg and wmag != 0
    if zero_neg and wmag == 0:
        neg_out = True
    return wmag | (ENC[5] if neg_out else np.int64(0))


@_inline
def _pack_rz(neg, mag, e0, frac, bias, infw, sbit):
    """_pack for round-toward-zero with the word's fraction width (no inf / NaN
    inputs, no negative zero): the same words, without the RNE and relayout steps."""
    lead = e0 + np.int64(63) - np.int64(leading_zeros(mag))    # e0 - 1 for mag == 0, as _pack
    emin = 1 - bias
    ml = lead if lead > emin else emin
    drop = ml - frac - e0
    keep = (mag << _clip(-drop, 0, 62)) >> _clip(drop, 0, 63)
    wmag = ((ml - emin) << frac) + keep
    if mag == 0:
        wmag = np.int64(0)
    if wmag >= infw or (lead > bias and mag != 0):
        wmag = infw
    return wmag | (sbit if (neg and wmag != 0) else np.int64(0))


@_inline
def _pack_int(total, ENC):
    if ENC[0] == 3:
        lo = -(np.int64(1) << 31)
        hi = (np.int64(1) << 31) - 1
        total = lo if total < lo else (hi if total > hi else total)
    return total & np.int64(0xFFFFFFFF)


@_inline
def _rows(d, ncols, ia, ib, ic, isa, isb):
    if ncols > 0:
        i = d // ncols
        j = d - i * ncols
        return i, j, d, i, j
    ra = ia[d] if ia.shape[0] > 0 else d
    rb = ib[d] if ib.shape[0] > 0 else d
    rc = ic[d] if ic.shape[0] > 0 else d
    rsa = isa[d] if isa.shape[0] > 0 else d
    rsb = isb[d] if isb.shape[0] > 0 else d
    return ra, rb, rc, rsa, rsb


@_inline
def _value(cls, s, m, q):
    """ieee.values of one decoded element, as binary64."""
    if cls == NAN:
        return np.nan
    if cls == INF:
        v = np.inf
    else:
        v = math.ldexp(float(m), q)
    return -v if s == 1 else v


# ------------------------------------------------------------------- window
@_inline
def _group_sum(pm, pq, pn, lo, hi, clog):
    """Exact sum of the products ``lo .. hi`` (sign ``pn``, magnitude ``pm``, exponent
    ``pq``) at the smallest live exponent ``qmin`` (0 if none is live): ``(sum, qmin,
    bad)``, ``bad`` where a product shifted to ``qmin`` would leave no room in int64
    for the sum of ``2**clog`` of them (the reference refuses such a sum)."""
    qmin = np.int64(LQBIG)
    for k in range(lo, hi):
        qmin = min(qmin, pq[k] if pm[k] != 0 else LQBIG)
    if qmin == LQBIG:
        qmin = 0
    tot = np.int64(0)
    bad = False
    for k in range(lo, hi):
        # branch-free: a zero product adds 0 whatever its shift
        m_ = pm[k]
        sh = pq[k] - qmin
        bad = bad or (m_ != 0 and sh + _bitlen(m_) + clog > 62)
        v = m_ << _clip(sh, 0, 62)
        ng = np.int64(pn[k])
        tot += (v ^ -ng) + ng
    return tot, qmin, bad


@_inline
def _group_total(G, step, pm, pq, pn, plr, psr, max_sr, bufs, quantum, cterm, P):
    """The window's sum of one step after the products, at ``quantum``: the group sums
    (``group`` > 1) truncated, the C-relative truncation, the C-dominant sums (groups of
    ``cdG``), the truncated C, the subnormal redo.  ``plr``: each product's raw exponent
    (NEG for a zero); ``max_sr``: the largest scale raw of the blocks holding a nonzero
    product (the redo's); ``bufs``: work arrays (contributions, group sums, their q, their
    largest raw exponent); ``cterm``: C live, C r, C sign, C magnitude, C q, and whether
    C dominates.  Returns ``(total, bad)`` (``bad``: a sum the reference refuses)."""
    contrib, gs, gq, gr = bufs
    c_live, cr, c_neg, c_mag, cq, cdom = cterm
    group, has_cd, cdG, has_cr, crF = P[3], P[6] == 1, P[8], P[9] == 1, P[10]
    has_sr, srT, clog_g, clog_cd = P[11] == 1, P[12], P[14], P[15]
    bad = False
    if group == 1:
        for k in range(step):
            contrib[k] = _trunc(pn[k], pm[k], pq[k], quantum)
            gr[k] = plr[k]
    else:
        for g in range(G):
            tot, qmin, b = _group_sum(pm, pq, pn, g * group, g * group + group, clog_g)
            bad = bad or b
            grm = np.int64(NEG)
            for k in range(g * group, g * group + group):
                grm = max(grm, plr[k])
            gs[g] = tot
            gq[g] = qmin
            gr[g] = grm
            contrib[g] = _trunc(tot < 0, abs(tot), qmin, quantum)
    if has_cr:
        qrel = max(cr - crF, quantum)
        for g in range(G):
            if c_live and gr[g] > NEG and gr[g] <= cr:
                if group == 1:
                    t = _trunc(pn[g], pm[g], pq[g], qrel)
                else:
                    t = _trunc(gs[g] < 0, abs(gs[g]), gq[g], qrel)
                contrib[g] = -_shift(-t, qrel - quantum) if t < 0 else _shift(t, qrel - quantum)
    ptot = np.int64(0)
    for g in range(G):
        ptot += contrib[g]
    if has_cd and cdG != group:
        ctot = np.int64(0)
        for h in range(step // cdG):
            tot, qmin, b = _group_sum(pm, pq, pn, h * cdG, h * cdG + cdG, clog_cd)
            bad = bad or b
            ctot += _trunc(tot < 0, abs(tot), qmin, quantum)
        if cdom:
            ptot = ctot
    ctr = _trunc(c_neg, c_mag, cq, quantum)
    total = ptot + ctr
    if has_sr and not (has_cd and cdom):
        total = _subnormal_redo(total, quantum, ctr, contrib, psr, group, G, gr, srT, max_sr)
    return total, bad


@_jit
def window_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags):
    n = out.shape[0]
    K = wa.shape[1]
    fp0, fp1, fp2, fp3, fp4 = _fmt(FM, 0), _fmt(FM, 1), _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    F = P[0]
    excl = P[1] == 1
    ezero = P[2]
    group = P[3]
    has_sf = P[4] == 1
    sf = P[5]
    has_cd = P[6] == 1
    cdF = P[7]
    scaled = P[13] == 1
    pm = np.zeros(step, np.int64)
    pq = np.zeros(step, np.int64)
    pn = np.zeros(step, np.bool_)
    plr = np.zeros(step, np.int64)
    psr = np.zeros(step, np.int64)
    G = step // group
    contrib = np.zeros(G, np.int64)
    gs = np.zeros(G, np.int64)
    gq = np.zeros(G, np.int64)
    gr = np.zeros(G, np.int64)
    nflag = 0
    for d in range(n):
        flags[d] = False
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        ccls, csg, cm, cq, cr = _decode(np.int64(wc[rc]), fp2, TAB)
        word = np.int64(0)
        bad = False
        for s0 in range(0, K, step):
            s_nan = False
            s_pinf = False
            s_ninf = False
            max_r = np.int64(NEG)
            zmax = np.int64(NEG)
            max_sr = np.int64(NEG)
            any_live = False
            for k in range(step):
                kk = s0 + k
                ac, asg, am, aq, ar = _decode(np.int64(wa[ra, kk]), fp0, TAB)
                bc, bsg, bm, bq, br = _decode(np.int64(wb[rb, kk]), fp1, TAB)
                nanf = ac == NAN or bc == NAN
                inff = ac == INF or bc == INF
                zf = ac == ZERO or bc == ZERO
                sg = asg ^ bsg
                m = am * bm
                q = aq + bq
                r = ar + br
                if scaled:
                    blk = kk // block
                    xc, xsg, xm, xq, xr = _decode(np.int64(sa[rsa, blk]), fp4, TAB)
                    yc, ysg, ym, yq, yr = _decode(np.int64(sb[rsb, blk]), fp4, TAB)
                    nanf = nanf or xc == NAN or yc == NAN
                    inff = inff or xc == INF or yc == INF
                    zf = zf or xc == ZERO or yc == ZERO
                    sg = sg ^ xsg ^ ysg
                    m = m * xm * ym
                    q = q + xq + yq
                    r = r + xr + yr
                    psr[k] = xr + yr
                live = False
                if nanf or (inff and zf):
                    s_nan = True
                elif inff:
                    if sg == 1:
                        s_ninf = True
                    else:
                        s_pinf = True
                elif not zf:
                    live = True
                pn[k] = sg == 1
                pq[k] = q
                if live:
                    pm[k] = m
                    plr[k] = r
                    any_live = True
                    if r > max_r:
                        max_r = r
                    if scaled and psr[k] > max_sr:
                        max_sr = psr[k]     # the blocks holding a nonzero product
                    if r > zmax:
                        zmax = r
                else:
                    pm[k] = 0
                    plr[k] = NEG
                    if ezero > zmax:
                        zmax = ezero
            # specials (special.classify with C)
            if ccls == NAN:
                s_nan = True
            elif ccls == INF:
                if csg == 1:
                    s_ninf = True
                else:
                    s_pinf = True
            nan = s_nan or (s_pinf and s_ninf)
            inf = (s_pinf or s_ninf) and not nan
            inf_neg = s_ninf and not s_pinf
            c_live = ccls == FINITE
            c_mag = cm if c_live else np.int64(0)
            c_neg = csg == 1
            if excl:
                E = max_r
                if c_live and cr > E:
                    E = cr
            else:
                E = zmax
                ce = cr if c_live else ezero
                if ce > E:
                    E = ce
            quantum = E - F
            if has_sf:
                fl = max_sr - sf
                if fl > quantum:
                    quantum = fl
            cdom = False
            if has_cd:
                cdom = c_live and any_live and cr >= max_r
                if cdom:
                    quantum = cr - cdF
            total, bad = _group_total(G, step, pm, pq, pn, plr, psr, max_sr, (contrib, gs, gq, gr), quantum,
                                      (c_live, cr, c_neg, c_mag, cq, cdom), P)
            if bad:
                break
            oneg = total < 0
            omag = abs(total)
            e0 = quantum
            if excl and not any_live:
                oneg = c_neg
                omag = c_mag
                e0 = cq
            word = _pack(oneg, omag, e0, nan, inf, inf_neg, False, ENC)
            if s0 + step < K:
                ccls, csg, cm, cq, cr = _decode(word & ENC[7], fp3, TAB)
        if bad:
            flags[d] = True
            nflag += 1
            continue
        out[d] = word
    return nflag


# ------------------------------------------------------------------ integer
@_jit
def integer_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags):
    n = out.shape[0]
    K = wa.shape[1]
    fp0, fp1, fp2, fp3, fp4 = _fmt(FM, 0), _fmt(FM, 1), _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    for d in range(n):
        flags[d] = False
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        ccls, csg, cm, cq, cr = _decode(np.int64(wc[rc]), fp2, TAB)
        word = np.int64(0)
        for s0 in range(0, K, step):
            total = np.int64(0)
            for k in range(s0, s0 + step):
                ac, asg, am, aq, ar = _decode(np.int64(wa[ra, k]), fp0, TAB)
                bc, bsg, bm, bq, br = _decode(np.int64(wb[rb, k]), fp1, TAB)
                total += (-am if asg == 1 else am) * (-bm if bsg == 1 else bm)
            total += -cm if csg == 1 else cm
            word = _pack_int(total, ENC)
            if s0 + step < K:
                ccls, csg, cm, cq, cr = _decode(word & ENC[7], fp3, TAB)
        out[d] = word
    return 0


# ------------------------------------------------------- group-scaled window
@_jit
def group_scaled_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags):
    n = out.shape[0]
    K = wa.shape[1]
    fp0, fp1, fp2, fp3, fp4 = _fmt(FM, 0), _fmt(FM, 1), _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    F = P[0]
    group = P[1]
    ezero = P[2]
    clog_g = P[3]
    pm = np.zeros(step, np.int64)
    pq = np.zeros(step, np.int64)
    pn = np.zeros(step, np.bool_)
    nflag = 0
    for d in range(n):
        flags[d] = False
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        ccls, csg, cm, cq, cr = _decode(np.int64(wc[rc]), fp2, TAB)
        word = np.int64(0)
        bad = False
        for s0 in range(0, K, step):
            s_nan = False
            s_pinf = False
            s_ninf = False
            for k in range(step):
                kk = s0 + k
                ac, asg, am, aq, ar = _decode(np.int64(wa[ra, kk]), fp0, TAB)
                bc, bsg, bm, bq, br = _decode(np.int64(wb[rb, kk]), fp1, TAB)
                blk = kk // block
                xc, xsg, xm, xq, xr = _decode(np.int64(sa[rsa, blk]), fp4, TAB)
                yc, ysg, ym, yq, yr = _decode(np.int64(sb[rsb, blk]), fp4, TAB)
                # specials of the scaled product
                nan4 = ac == NAN or bc == NAN or xc == NAN or yc == NAN
                inf4 = ac == INF or bc == INF or xc == INF or yc == INF
                z4 = ac == ZERO or bc == ZERO or xc == ZERO or yc == ZERO
                sg4 = asg ^ bsg ^ xsg ^ ysg
                if nan4 or (inf4 and z4):
                    s_nan = True
                elif inf4:
                    if sg4 == 1:
                        s_ninf = True
                    else:
                        s_pinf = True
                # the unscaled product
                nan2 = ac == NAN or bc == NAN
                inf2 = ac == INF or bc == INF
                z2 = ac == ZERO or bc == ZERO
                live = not (nan2 or inf2 or z2)
                pm[k] = am * bm if live else np.int64(0)
                pq[k] = aq + bq
                pn[k] = (asg ^ bsg) == 1
            if ccls == NAN:
                s_nan = True
            elif ccls == INF:
                if csg == 1:
                    s_ninf = True
                else:
                    s_pinf = True
            nan = s_nan or (s_pinf and s_ninf)
            inf = (s_pinf or s_ninf) and not nan
            inf_neg = s_ninf and not s_pinf
            c_live = ccls == FINITE
            E = cr if c_live else ezero
            G = step // group
            for g in range(G):
                lo = g * group
                anyl = False
                for k in range(lo, lo + group):
                    if pm[k] != 0:
                        anyl = True
                blk = (s0 + lo) // block
                xc, xsg, xm, xq, xr = _decode(np.int64(sa[rsa, blk]), fp4, TAB)
                yc, ysg, ym, yq, yr = _decode(np.int64(sb[rsb, blk]), fp4, TAB)
                scls = NAN if (xc == NAN or yc == NAN or ((xc == INF or yc == INF) and (xc == ZERO or yc == ZERO))) \
                    else (INF if (xc == INF or yc == INF) else (ZERO if (xc == ZERO or yc == ZERO) else FINITE))
                ge = ezero if ((not anyl) or scls == ZERO) else xr + yr
                if ge > E:
                    E = ge
            quantum = E - F
            total = np.int64(0)
            for g in range(G):
                lo = g * group
                qmin = np.int64(1) << 40
                anyl = False
                for k in range(lo, lo + group):
                    if pm[k] != 0:
                        anyl = True
                        if pq[k] < qmin:
                            qmin = pq[k]
                if not anyl:
                    qmin = 0
                tot = np.int64(0)
                for k in range(lo, lo + group):
                    if pm[k] != 0:
                        sp = pq[k] - qmin
                        if sp + _bitlen(pm[k]) + clog_g > 62:
                            bad = True
                            sp = 0
                        v = pm[k] << sp
                        tot += -v if pn[k] else v
                blk = (s0 + lo) // block
                xc, xsg, xm, xq, xr = _decode(np.int64(sa[rsa, blk]), fp4, TAB)
                yc, ysg, ym, yq, yr = _decode(np.int64(sb[rsb, blk]), fp4, TAB)
                sfin = not (xc == NAN or yc == NAN or xc == INF or yc == INF or xc == ZERO or yc == ZERO)
                smag = xm * ym if sfin else np.int64(0)
                total += _trunc(tot < 0, abs(tot) * smag, qmin + xq + yq, quantum)
            total += _trunc(csg == 1, cm if c_live else np.int64(0), cq, quantum)
            word = _pack(total < 0, abs(total), quantum, nan, inf, inf_neg, False, ENC)
            if bad:
                break
            if s0 + step < K:
                ccls, csg, cm, cq, cr = _decode(word & ENC[7], fp3, TAB)
        if bad:
            flags[d] = True
            nflag += 1
            continue
        out[d] = word
    return nflag


# ---------------------------------------------------------- two-stage window
@_jit
def two_stage_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags):
    n = out.shape[0]
    K = wa.shape[1]
    fp0, fp1, fp2, fp3, fp4 = _fmt(FM, 0), _fmt(FM, 1), _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    F = P[0]
    F2 = P[1]
    even_odd = P[2] == 1
    drop_c = P[3] == 1
    has_ovf = P[4] == 1
    ovf = P[5]
    has_nf = P[6] == 1
    nfcr = P[7]
    ngroups = 2 if even_odd else 1
    emin = 1 - ENC[1]
    pm = np.zeros(step, np.int64)
    pq = np.zeros(step, np.int64)
    pn = np.zeros(step, np.bool_)
    plr = np.zeros(step, np.int64)
    for d in range(n):
        flags[d] = False
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        ccls, csg, cm, cq, cr = _decode(np.int64(wc[rc]), fp2, TAB)
        word = np.int64(0)
        for s0 in range(0, K, step):
            s_nan = False
            s_pinf = False
            s_ninf = False
            for k in range(step):
                kk = s0 + k
                ac, asg, am, aq, ar = _decode(np.int64(wa[ra, kk]), fp0, TAB)
                bc, bsg, bm, bq, br = _decode(np.int64(wb[rb, kk]), fp1, TAB)
                sg = asg ^ bsg
                nanf = ac == NAN or bc == NAN
                inff = ac == INF or bc == INF
                zf = ac == ZERO or bc == ZERO
                cls = NAN if (nanf or (inff and zf)) else (INF if inff else (ZERO if zf else FINITE))
                m = am * bm if cls == FINITE else np.int64(0)
                q = aq + bq
                if has_ovf and cls == FINITE and _bitlen(m) - 1 + q >= ovf:
                    cls = INF
                    m = np.int64(0)
                if cls == NAN:
                    s_nan = True
                elif cls == INF:
                    if sg == 1:
                        s_ninf = True
                    else:
                        s_pinf = True
                live = cls == FINITE
                pm[k] = m if live else np.int64(0)
                pq[k] = q
                pn[k] = sg == 1
                plr[k] = ar + br if live else np.int64(NEG)
            E0 = np.int64(NEG)
            E1 = np.int64(NEG)
            for k in range(step):
                if even_odd and (k & 1) == 1:
                    if plr[k] > E1:
                        E1 = plr[k]
                else:
                    if plr[k] > E0:
                        E0 = plr[k]
            S0 = np.int64(0)
            S1 = np.int64(0)
            for k in range(step):
                if even_odd and (k & 1) == 1:
                    S1 += _trunc(pn[k], pm[k], pq[k], E1 - F)
                else:
                    S0 += _trunc(pn[k], pm[k], pq[k], E0 - F)
            E_dot = E0
            if ngroups == 2 and E1 > E_dot:
                E_dot = E1
            dot = _floor_shift(S0, E0 - E_dot)
            if ngroups == 2:
                dot += _floor_shift(S1, E1 - E_dot)
            r_c = cr
            if has_nf and not (ccls == FINITE or ccls == ZERO):
                r_c = nfcr
            e = E_dot if E_dot > r_c else r_c
            dot = _floor_shift(dot, (E_dot - F) - (e - F2 - 1))
            c_signed = (-cm if csg == 1 else cm) if ccls == FINITE else np.int64(0)
            c_fl = _floor_shift(c_signed, cq - (e - F))
            keep_c = True
            if drop_c:
                keep_c = r_c >= e - F - 1
                if not keep_c:
                    c_fl = np.int64(0)
            total = dot + (c_fl << (F2 + 1 - F))
            E2 = _bitlen(abs(total)) - 1 + (e - F2 - 1)
            if E2 < emin:
                E2 = emin
            total = _floor_shift(total, (e - F2 - 1) - (E2 - F2))
            ccls_s = ccls if keep_c else ZERO
            if ccls_s == NAN:
                s_nan = True
            elif ccls_s == INF:
                if csg == 1:
                    s_ninf = True
                else:
                    s_pinf = True
            nan = s_nan or (s_pinf and s_ninf)
            inf = (s_pinf or s_ninf) and not nan
            inf_neg = s_ninf and not s_pinf
            word = _pack(total < 0, abs(total), E2 - F2, nan, inf, inf_neg, total < 0, ENC)
            if s0 + step < K:
                ccls, csg, cm, cq, cr = _decode(word & ENC[7], fp3, TAB)
        out[d] = word
    return 0


# ---------------------------------------------------------------- exact sum
@_jit
def exact_sum_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags):
    n = out.shape[0]
    K = wa.shape[1]
    fp0, fp1, fp2, fp3, fp4 = _fmt(FM, 0), _fmt(FM, 1), _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    guard = _bitlen(np.int64(step + 1))
    pm = np.zeros(step + 1, np.int64)
    pq = np.zeros(step + 1, np.int64)
    pn = np.zeros(step + 1, np.bool_)
    nflag = 0
    for d in range(n):
        flags[d] = False
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        ccls, csg, cm, cq, cr = _decode(np.int64(wc[rc]), fp2, TAB)
        word = np.int64(0)
        bad = False
        for s0 in range(0, K, step):
            s_nan = False
            s_pinf = False
            s_ninf = False
            for k in range(step):
                kk = s0 + k
                ac, asg, am, aq, ar = _decode(np.int64(wa[ra, kk]), fp0, TAB)
                bc, bsg, bm, bq, br = _decode(np.int64(wb[rb, kk]), fp1, TAB)
                sg = asg ^ bsg
                nanf = ac == NAN or bc == NAN
                inff = ac == INF or bc == INF
                zf = ac == ZERO or bc == ZERO
                if nanf or (inff and zf):
                    s_nan = True
                elif inff:
                    if sg == 1:
                        s_ninf = True
                    else:
                        s_pinf = True
                live = not (nanf or inff or zf)
                pm[k] = am * bm if live else np.int64(0)
                pq[k] = aq + bq
                pn[k] = sg == 1
            if ccls == NAN:
                s_nan = True
            elif ccls == INF:
                if csg == 1:
                    s_ninf = True
                else:
                    s_pinf = True
            pm[step] = cm if ccls == FINITE else np.int64(0)
            pq[step] = cq
            pn[step] = csg == 1
            nan = s_nan or (s_pinf and s_ninf)
            inf = (s_pinf or s_ninf) and not nan
            inf_neg = s_ninf and not s_pinf
            qmin = np.int64(1) << 40
            top = np.int64(NEG)
            anyl = False
            for k in range(step + 1):
                if pm[k] != 0:
                    anyl = True
                    if pq[k] < qmin:
                        qmin = pq[k]
                    t = pq[k] + _bitlen(pm[k])
                    if t > top:
                        top = t
            if not anyl:
                qmin = 0
            elif top - qmin + guard > 62:
                bad = True
                break
            total = np.int64(0)
            for k in range(step + 1):
                if pm[k] != 0:
                    v = pm[k] << (pq[k] - qmin)
                    total += -v if pn[k] else v
            oneg = total < 0
            word = _pack(oneg, abs(total), qmin, nan, inf, inf_neg, oneg, ENC)
            if s0 + step < K:
                ccls, csg, cm, cq, cr = _decode(word & ENC[7], fp3, TAB)
        if bad:
            flags[d] = True
            nflag += 1
            continue
        out[d] = word
    return nflag


# ------------------------------------------------------------ fast window
# The same window, with a lean decode: every A / B element becomes a signed
# significand ``sm`` and an exponent ``q`` (of its last bit), read from a
# per-format table (containers of up to 16 bits: ``LT[0]`` signed m, ``LT[1]``
# q) or decoded arithmetically (wider IEEE formats), with the classes folded
# into ``q``: a zero has q = LZQ (its products fall far below any window), an
# inf / NaN has q = LSQ (its products rise far above).  The raw exponent is q
# plus a per-format constant (checked when the table is built).  A row with an
# inf / NaN anywhere (A, B, scales, C, or a step that overflowed) is computed
# by the general :func:`window_kernel`, so special values and the reference's
# refusals are exactly the general kernel's.
LZQ = -(1 << 30)
LSQ = 1 << 36
LZT = -(1 << 29)     # a product q below this has a zero factor
LST = 1 << 35        # a product q at or above this has an inf / NaN factor
LQBIG = 1 << 40      # above every live product q (the group minimum's start)
GDEAD = -1000        # numpy_lean.LeanGrouped.DEAD: joint q of a pair with a zero factor


@_inline
def _lean_one(x0, mode, ls, LT):
    """Lean decode of one word: (signed m, q), the class folded into q (LZQ, LSQ).
    ``ls``: the format's row of LS as a tuple; ``mode`` is passed apart so that a
    literal mode folds the branch away."""
    if mode == 0:
        i = np.uint64(ls[1]) + np.uint64(x0)    # unsigned: no wrap-around code
        return LT[0, i], LT[1, i]
    fs, fmask, sp, M, emask, bias = ls[2], ls[3], ls[4], ls[5], ls[6], ls[7]
    x = (x0 >> fs) & fmask
    e = (x >> M) & emask
    f = x & ((np.int64(1) << M) - 1)
    nrm = e != 0
    m = (f | (np.int64(1) << M)) if nrm else f
    q = ((e if nrm else np.int64(1)) - bias) - M
    q = LZQ if m == 0 else q
    q = LSQ if e == emask else q
    return (-m if ((x >> sp) & 1) == 1 else m), q


# the general decode as a called function: the lean kernels use it once per dot
# product (C) or per block (scales); compiled once, it keeps their compile time low
_decode_call = numba.njit(cache=True, nogil=True)(_decode.py_func)


@_inline
def _ieee_decode(w, fp):
    """decode.decode_float for a signed IEEE format with subnormals (NaN rule "ieee",
    field under 64 bits): the C / D decode of the lean kernels."""
    E = fp[5]
    M = fp[6]
    x = (w >> fp[3]) & ((np.int64(1) << fp[4]) - 1)
    s = (x >> (E + M)) & 1
    emask = (np.int64(1) << E) - 1
    e = (x >> M) & emask
    f = x & ((np.int64(1) << M) - 1)
    nrm = e != 0
    m = (f | (np.int64(1) << M)) if nrm else f
    r = (e if nrm else np.int64(1)) - fp[7]
    cls = FINITE if m != 0 else ZERO
    if e == emask:
        cls = INF if f == 0 else NAN
        m = np.int64(0)
    return cls, s, m, r - M, r


@_inline
def _f32_decode(w):
    """_ieee_decode of binary32 (field at bit 0, 32 bits), with the format's constants."""
    x = w & np.int64(0xFFFFFFFF)
    e = (x >> 23) & 0xFF
    f = x & np.int64(0x7FFFFF)
    m = f | (np.int64(e != 0) << 23)
    r = (e if e > 1 else np.int64(1)) - 127
    cls = np.int64(FINITE) if m != 0 else np.int64(ZERO)
    if e == 0xFF:
        cls = np.int64(INF) if f == 0 else np.int64(NAN)
        m = np.int64(0)
    return cls, x >> 31, m, r - 23, r


@_inline
def _is_f32(fp):
    """Whether decode spec ``fp`` is binary32 decoded arithmetically (no table)."""
    return (fp[1] == 0 and fp[2] == 0 and fp[3] == 0 and fp[4] == 32 and fp[5] == 8 and fp[6] == 23
            and fp[7] == 127 and fp[8] == 1 and fp[9] == 0 and fp[10] == 1)


@_inline
def _lean_scales(sa, sb, rsa, rsb, nb, fp4, TAB, roff, bsm, bqs, bro, bsr, r):
    """Per block, into column ``r``: signed product of the two scales, its q, r - q
    offset of the scaled products, scale raw sum; returns whether a scale is inf / NaN."""
    special = False
    for blk in range(nb):
        xc, xsg, xm, xq, xr = _decode_call(np.int64(sa[rsa, blk]), fp4, TAB)
        yc, ysg, ym, yq, yr = _decode_call(np.int64(sb[rsb, blk]), fp4, TAB)
        if xc >= INF or yc >= INF:
            special = True
        bsr[blk, r] = xr + yr
        bro[blk, r] = roff + (xr - xq) + (yr - yq)
        if xc == ZERO or yc == ZERO:
            bsm[blk, r] = 0
            bqs[blk, r] = LZQ
        else:
            v = xm * ym
            bsm[blk, r] = -v if (xsg ^ ysg) == 1 else v
            bqs[blk, r] = xq + yq
    return special


# The lean window on tiles of rows.  Rows are computed TILE at a time, step by
# step; every inner loop runs over the rows of the tile (k-major tile arrays),
# has no branches, and vectorizes, and the rows' serial chains (window, sum,
# pack, decode of D as the next C) overlap.  Each phase is an inlined helper,
# called by the driver (window_lean_kernel) once per variant with the variant
# as a literal (A / B decoded by table or arithmetically, the C / D decode, the
# encoder), so that the loops have no variant branches.  The driver is not
# itself inlined anywhere: numba's inlining copies the inlined function's
# variable scope once per block, and a large inlined body costs tens of seconds
# of compile time.
TILE = 64    # rows per tile (the tile arrays stay in the L1 / L2 caches)
PACK_M = 24  # a tabled element in a tile: q * 2**PACK_M + m, |m| < 2**(PACK_M - 1)


@_inline
def _tile_put(x, k, r, mode, ls, LT, tm):
    """Word ``x`` into element ``k, r`` of a tile: its packed table entry (mode 0:
    ``q * 2**PACK_M + m``, one scalar load, no gathers later), or the word itself
    (decoded arithmetically with the products)."""
    if mode == 0:
        tm[k, r] = LT[2, np.uint64(ls[1]) + np.uint64(x)]
    else:
        tm[k, r] = x


@_inline
def _tile_get(tm, k, r, mode, ls, LT):
    """(signed m, q) of tile element ``k, r`` (see :func:`_tile_put`)."""
    if mode == 0:
        v = tm[k, r]
        m = (v << (64 - PACK_M)) >> (64 - PACK_M)
        return m, (v - m) >> PACK_M
    return _lean_one(tm[k, r], mode, ls, LT)


@_inline
def _tile_in(ops, idx, ncols, t0, nr, mode, la, lb, LT, tiles, cw, sp, fp4, TAB, roff, scl):
    """Rows ``t0 ..`` of the operands into a tile: A and B k-major (one loop over K
    for both), the C words into ``cw``, the scales of the blocks (``_lean_scales``;
    ``sp``: an inf / NaN scale).  ``ops``: the A, B, C, scale A, scale B words;
    ``idx``: their row indices; ``tiles``: the A and B tiles (see :func:`_tile_put`);
    ``scl``: the per-block scale arrays (none when unscaled)."""
    wa, wb, wc, sa, sb = ops
    ia, ib, ic, isa, isb = idx
    at, bt = tiles
    bsm, bqs, bro, bsr = scl
    K = wa.shape[1]
    nb = bsm.shape[0]
    for r in range(nr):
        ra, rb, rc, rsa, rsb = _rows(t0 + r, ncols, ia, ib, ic, isa, isb)
        for k in range(K):
            _tile_put(wa[ra, k], k, r, mode, la, LT, at)
            _tile_put(wb[rb, k], k, r, mode, lb, LT, bt)
        cw[r] = wc[rc]
        sp[r] = False
        if nb > 0:
            sp[r] = _lean_scales(sa, sb, rsa, rsb, nb, fp4, TAB, roff, bsm, bqs, bro, bsr, r)


@_inline
def _c_put(r, dec, cdec, sp):
    """Store the decoded C (or D, as the next step's C) of tile row ``r``:
    ``cdec`` = signed significand, q, r, live (finite and non-zero)."""
    ccls, csg, cm, cq, cr = dec
    ccm, ccq, ccr, clive = cdec
    sp[r] |= ccls >= INF
    ccm[r] = -cm if csg == 1 else cm
    ccq[r] = cq
    ccr[r] = cr
    clive[r] = ccls == FINITE


@_inline
def _c_tile(kind, cw, nr, fp, cdec, sp):
    """Decode the C words of a tile: ``kind`` 2 binary32 (the format's constants),
    1 another IEEE format with subnormals (its fields at run time)."""
    if kind == 2:
        for r in range(nr):
            _c_put(r, _f32_decode(cw[r]), cdec, sp)
    else:
        for r in range(nr):
            _c_put(r, _ieee_decode(cw[r], fp), cdec, sp)


def _c_kind(fp):
    """The :func:`_c_tile` kind of decode spec ``fp``: 2 binary32, 1 another IEEE
    format with subnormals, 0 other (no lean variant)."""
    if _is_f32.py_func(fp):
        return 2
    if fp[1] == 0 and fp[2] == 0 and fp[4] < 64 and fp[8] == 1 and fp[9] == 0 and fp[10] == 1:
        return 1
    return 0


@_inline
def _tile_products(tiles, s0, step, nr, mode, la, lb, LT, S, px, pu, win):
    """Unscaled products of one step for a tile: ``px = (ma * mb) << S``,
    ``pu = S - q``; ``hi`` / ``lo`` (of ``win``): the largest / smallest ``q``."""
    at, bt = tiles
    hi, lo, msr, qu = win
    for r in range(nr):
        hi[r] = np.int64(LZQ) * 8
        lo[r] = np.int64(LSQ) * 8
    for k in range(step):
        for r in range(nr):
            ma, qa = _tile_get(at, s0 + k, r, mode, la, LT)
            mb, qb = _tile_get(bt, s0 + k, r, mode, lb, LT)
            q = qa + qb
            px[k, r] = (ma * mb) << S
            pu[k, r] = S - q
            h = hi[r]
            hi[r] = q if q > h else h
            lw = lo[r]
            lo[r] = q if q < lw else lw


@_inline
def _tile_products_scaled(tiles, s0, step, block, nr, la, lb, LT, S, px, pu, win, scl):
    """Block-scaled products of one step (A and B tabled): block by block, the
    block's scale product per row; ``hi``: the largest raw exponent (q plus the
    block's r - q offset), ``lo``: the smallest q, ``msr``: the largest scale raw
    sum of the blocks holding a nonzero product."""
    at, bt = tiles
    bsm, bqs, bro, bsr = scl
    hi, lo, msr, qu = win
    for r in range(nr):
        hi[r] = np.int64(LZQ) * 8
        lo[r] = np.int64(LSQ) * 8
        msr[r] = np.int64(NEG)
    for blk in range(s0 // block, (s0 + step - 1) // block + 1):
        for r in range(nr):
            qu[r] = np.int64(LZQ) * 8       # the block's largest raw (qu is free until _tile_sum)
        for k in range(max(s0, blk * block), min(s0 + step, blk * block + block)):
            for r in range(nr):
                ma, qa = _tile_get(at, k, r, 0, la, LT)
                mb, qb = _tile_get(bt, k, r, 0, lb, LT)
                q = qa + qb + bqs[blk, r]
                px[k - s0, r] = (ma * mb * bsm[blk, r]) << S
                pu[k - s0, r] = S - q
                qr = q + bro[blk, r]
                h = qu[r]
                qu[r] = qr if qr > h else h
                lw = lo[r]
                lo[r] = q if q < lw else lw
        for r in range(nr):
            hb = qu[r]
            h = hi[r]
            hi[r] = hb if hb > h else h
            # only a block holding a nonzero product raises the scale floor
            m0, m1 = msr[r], bsr[blk, r] if hb > LZT else np.int64(NEG)
            msr[r] = m1 if m1 > m0 else m0


@_inline
def _tile_sum(nr, step, P, hoff, px, pu, win, cdec, sp, tot):
    """The window of each row (from the largest product exponent ``hi + hoff``, C
    and the zero rule; the scale floor), the truncated C and the sum of the
    truncated products, in quanta of ``2**quantum`` (into ``tot``; ``qu``: quantum)."""
    F, excl, ezero, has_sf, sf = P[0], P[1] == 1, P[2], P[4] == 1, P[5]
    hi, lo, msr, qu = win
    ccm, ccq, ccr, clive = cdec
    for r in range(nr):
        h = hi[r] + hoff
        hi[r] = h
        sp[r] |= h >= LST
        c_live = clive[r]
        cr = ccr[r]
        E = h if h > LZT else np.int64(NEG)
        if excl:
            E = cr if (c_live and cr > E) else E
        else:
            E = ezero if (lo[r] < LZT and ezero > E) else E      # a zero product counts with e_zero
            ce = cr if c_live else ezero
            E = ce if ce > E else E
        quantum = E - F
        if has_sf:
            fl = msr[r] - sf
            quantum = fl if fl > quantum else quantum
        qu[r] = quantum
        cm = ccm[r] if c_live else np.int64(0)
        tot[r] = _trunc(cm < 0, abs(cm), ccq[r], quantum)
    for k in range(step):
        for r in range(nr):
            x = px[k, r]
            sg = x >> 63
            sh = pu[k, r] + qu[r]
            t = ((x ^ sg) - sg) >> (sh if sh < 63 else np.int64(63))
            tot[r] += (t ^ sg) - sg


@_inline
def _tile_pack(nr, rz, excl, tot, win, cdec, sp, ENC, cw):
    """Encode the D words of a tile into ``cw`` (0 for rows marked in ``sp``); ``rz``:
    round toward zero into the word's own fraction width (``_pack_rz``)."""
    efrac, ebias, einf, esb, dmask = ENC[2], ENC[1], ENC[4], ENC[5], ENC[7]
    hi, lo, msr, qu = win
    ccm, ccq, ccr, clive = cdec
    for r in range(nr):
        total = tot[r]
        oneg = total < 0
        omag = abs(total)
        e0 = qu[r]
        if excl and not hi[r] > LZT:
            cm = ccm[r] if clive[r] else np.int64(0)     # no live product: D is C
            oneg = cm < 0
            omag = abs(cm)
            e0 = ccq[r]
        if rz:
            word = _pack_rz(oneg, omag, e0, efrac, ebias, einf, esb)
        else:
            word = _pack(oneg, omag, e0, False, False, False, False, ENC)
        cw[r] = np.int64(0) if sp[r] else word & dmask


def _window_lean_variant(SCALED, CKIND, DKIND, AMODE, RZ):
    """The lean window kernel for one variant: ``SCALED`` (block scales), ``CKIND``
    / ``DKIND`` (C / D decode, see :func:`_c_kind`), ``AMODE`` (A and B decode: 0
    tables, 1 arithmetic), ``RZ`` (the round-toward-zero encoder).  The variant is
    a constant of the closure: numba prunes the branches it decides before it
    inlines the helpers, and LLVM folds the rest, so that the loops have no variant
    branches."""

    def window_lean_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out,
                           flags, LT, LS, spec):
        """The window with one product per group (``group`` 1, no ``c_dominant``,
        ``c_relative``, ``subnormal_redo``), scaled or not, on tiles of rows (above).

        Pass one decodes, multiplies and finds the window; products are kept
        pre-shifted left by ``S`` (the largest left shift a live product can need,
        P[18]), so that pass two truncates each with one right shift:
        ``t = (|p| << S) >> (S - q + quantum)``, the same value as the reference's
        ``(|p| << d) >> -d`` clips.  A row with an inf / NaN (input, scale, C, or a
        step that overflowed) is marked in ``spec`` and its word is not used (the
        general kernel computes it)."""
        n = out.shape[0]
        K = wa.shape[1]
        fp2, fp3, fp4 = _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
        excl = P[1] == 1
        roff = P[16]
        S = P[18]
        la = (LS[0, 0], LS[0, 1], LS[0, 2], LS[0, 3], LS[0, 4], LS[0, 5], LS[0, 6], LS[0, 7])
        lb = (LS[1, 0], LS[1, 1], LS[1, 2], LS[1, 3], LS[1, 4], LS[1, 5], LS[1, 6], LS[1, 7])
        T = TILE
        tiles = (np.empty((K, T), np.int64), np.empty((K, T), np.int64))
        px = np.empty((step, T), np.int64)
        pu = np.empty((step, T), np.int64)
        cw = np.empty(T, np.int64)
        cdec = (np.empty(T, np.int64), np.empty(T, np.int64), np.empty(T, np.int64), np.empty(T, np.bool_))
        win = (np.empty(T, np.int64), np.empty(T, np.int64), np.empty(T, np.int64), np.empty(T, np.int64))
        sp = np.empty(T, np.bool_)
        tot = np.empty(T, np.int64)
        nb = sa.shape[1] if SCALED else 0
        scl = (np.zeros((nb, T), np.int64), np.zeros((nb, T), np.int64), np.zeros((nb, T), np.int64),
               np.zeros((nb, T), np.int64))
        ops, idx = (wa, wb, wc, sa, sb), (ia, ib, ic, isa, isb)
        hoff = 0 if SCALED else roff      # hi + hoff: the largest raw exponent of a product
        nspec = 0
        for t0 in range(0, n, T):
            nr = min(T, n - t0)
            if AMODE == 0:
                _tile_in(ops, idx, ncols, t0, nr, 0, la, lb, LT, tiles, cw, sp, fp4, TAB, roff, scl)
            else:
                _tile_in(ops, idx, ncols, t0, nr, 1, la, lb, LT, tiles, cw, sp, fp4, TAB, roff, scl)
            for s0 in range(0, K, step):
                if s0 == 0:
                    _c_tile(CKIND, cw, nr, fp2, cdec, sp)
                else:
                    _c_tile(DKIND, cw, nr, fp3, cdec, sp)
                if SCALED:
                    _tile_products_scaled(tiles, s0, step, block, nr, la, lb, LT, S, px, pu, win, scl)
                elif AMODE == 0:
                    _tile_products(tiles, s0, step, nr, 0, la, lb, LT, S, px, pu, win)
                else:
                    _tile_products(tiles, s0, step, nr, 1, la, lb, LT, S, px, pu, win)
                _tile_sum(nr, step, P, hoff, px, pu, win, cdec, sp, tot)
                if RZ:
                    _tile_pack(nr, True, excl, tot, win, cdec, sp, ENC, cw)
                else:
                    _tile_pack(nr, False, excl, tot, win, cdec, sp, ENC, cw)
            for r in range(nr):
                d = t0 + r
                spec[d] = sp[r]
                flags[d] = False
                if sp[r]:
                    # inf / NaN somewhere: the general kernel computes the whole row (LeanWindowKernel)
                    nspec += 1
                else:
                    out[d] = cw[r]
        return 0, nspec

    window_lean_kernel.__qualname__ = window_lean_kernel.__name__ = "window_lean_kernel_%d_%d_%d_%d_%d" % (
        SCALED, CKIND, DKIND, AMODE, RZ)
    return _jit(window_lean_kernel)


_LEAN_VARIANTS = {}


def lean_variant(scaled, ckind, dkind, amode, rz):
    """The lean window kernel compiled for one variant (made on first use; numba
    compiles it on its first call and caches it per machine)."""
    key = (bool(scaled), int(ckind), int(dkind), int(amode), bool(rz))
    if key not in _LEAN_VARIANTS:
        _LEAN_VARIANTS[key] = _window_lean_variant(*key)
    return _LEAN_VARIANTS[key]


@_jit
def window_fast_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags,
                       LT, LS, spec):
    """The window with every parameter (groups, ``c_dominant``, ``c_relative``,
    ``subnormal_redo``) on the lean decode; the steps after the products are
    those of :func:`window_kernel`."""
    n = out.shape[0]
    K = wa.shape[1]
    fp2, fp3, fp4 = _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    F = P[0]
    excl = P[1] == 1
    ezero = P[2]
    group = P[3]
    has_sf = P[4] == 1
    sf = P[5]
    has_cd = P[6] == 1
    cdF = P[7]
    scaled = P[13] == 1
    roff = P[16]
    simple = P[17] == 1
    la = (LS[0, 0], LS[0, 1], LS[0, 2], LS[0, 3], LS[0, 4], LS[0, 5], LS[0, 6], LS[0, 7])
    lb = (LS[1, 0], LS[1, 1], LS[1, 2], LS[1, 3], LS[1, 4], LS[1, 5], LS[1, 6], LS[1, 7])
    pp = np.zeros(step, np.int64)
    pq = np.zeros(step, np.int64)
    pm = np.zeros(step, np.int64)
    pn = np.zeros(step, np.bool_)
    plr = np.zeros(step, np.int64)
    psr = np.zeros(step, np.int64)
    G = step // group
    contrib = np.zeros(G, np.int64)
    gs = np.zeros(G, np.int64)
    gq = np.zeros(G, np.int64)
    gr = np.zeros(G, np.int64)
    nb = sa.shape[1] if scaled else 1
    bsm = np.zeros((nb, 1), np.int64)
    bqs = np.zeros((nb, 1), np.int64)
    bro = np.zeros((nb, 1), np.int64)
    bsr = np.zeros((nb, 1), np.int64)
    nflag = 0
    nspec = 0
    for d in range(n):
        flags[d] = False
        spec[d] = False
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        ccls, csg, cm, cq, cr = _decode(np.int64(wc[rc]), fp2, TAB)
        special = ccls >= INF
        if scaled and not special:
            special = _lean_scales(sa, sb, rsa, rsb, nb, fp4, TAB, roff, bsm, bqs, bro, bsr, 0)
        word = np.int64(0)
        bad = False
        for s0 in range(0, K, step):
            if special:
                break
            hi = np.int64(LZQ) * 8
            lo = np.int64(LSQ) * 8
            max_sr = np.int64(NEG)
            if scaled:
                for blk in range(s0 // block, (s0 + step - 1) // block + 1):
                    k0 = max(s0, blk * block)
                    k1 = min(s0 + step, blk * block + block)
                    bm = bsm[blk, 0]
                    bq = bqs[blk, 0]
                    br = bro[blk, 0]
                    bs = bsr[blk, 0]
                    hib = np.int64(LZQ) * 8
                    for kk in range(k0, k1):
                        ma, qa = _lean_one(np.int64(wa[ra, kk]), la[0], la, LT)
                        mb, qb = _lean_one(np.int64(wb[rb, kk]), lb[0], lb, LT)
                        q = qa + qb + bq
                        pp[kk - s0] = ma * mb * bm
                        pq[kk - s0] = q
                        plr[kk - s0] = q + br
                        psr[kk - s0] = bs
                        hib = max(hib, q)
                        lo = min(lo, q)
                    hi = max(hi, hib + br)
                    if hib + br > LZT:       # the block holds a nonzero product
                        max_sr = max(max_sr, bs)
            else:
                for k in range(step):
                    kk = s0 + k
                    ma, qa = _lean_one(np.int64(wa[ra, kk]), la[0], la, LT)
                    mb, qb = _lean_one(np.int64(wb[rb, kk]), lb[0], lb, LT)
                    p = ma * mb
                    q = qa + qb
                    pp[k] = p
                    pq[k] = q
                    hi = max(hi, q)
                    lo = min(lo, q)
                hi += roff
            if hi >= LST:
                special = True
                break
            any_live = hi > LZT
            max_r = hi if any_live else np.int64(NEG)
            c_live = ccls == FINITE
            c_mag = cm if c_live else np.int64(0)
            c_neg = csg == 1
            if excl:
                E = max_r
                if c_live and cr > E:
                    E = cr
            else:
                E = max_r
                if lo < LZT and ezero > E:      # a zero product counts with e_zero
                    E = ezero
                ce = cr if c_live else ezero
                if ce > E:
                    E = ce
            quantum = E - F
            if has_sf:
                fl = max_sr - sf
                if fl > quantum:
                    quantum = fl
            cdom = False
            if has_cd:
                cdom = c_live and any_live and cr >= max_r
                if cdom:
                    quantum = cr - cdF
            if simple:
                ptot = np.int64(0)
                for k in range(step):
                    p = pp[k]
                    dd = pq[k] - quantum
                    t = (abs(p) << _clip(dd, 0, 62)) >> _clip(-dd, 0, 63)
                    ptot += -t if p < 0 else t
                total = ptot + _trunc(c_neg, c_mag, cq, quantum)
            else:
                for k in range(step):
                    p = pp[k]
                    pn[k] = p < 0
                    pm[k] = abs(p)
                    if scaled:
                        plr[k] = plr[k] if p != 0 else NEG
                    else:
                        plr[k] = (pq[k] + roff) if p != 0 else NEG
                total, b = _group_total(G, step, pm, pq, pn, plr, psr, max_sr, (contrib, gs, gq, gr), quantum,
                                        (c_live, cr, c_neg, c_mag, cq, cdom), P)
                bad = bad or b
                if bad:
                    break
            oneg = total < 0
            omag = abs(total)
            e0 = quantum
            if excl and not any_live:
                oneg = c_neg
                omag = c_mag
                e0 = cq
            word = _pack(oneg, omag, e0, False, False, False, False, ENC)
            if s0 + step < K:
                ccls, csg, cm, cq, cr = _decode(word & ENC[7], fp3, TAB)
                if ccls >= INF:
                    special = True
        if special:
            # inf / NaN somewhere: the general kernel computes the whole row (LeanWindowKernel)
            spec[d] = True
            nspec += 1
            continue
        if bad:
            flags[d] = True
            nflag += 1
            continue
        out[d] = word
    return nflag, nspec


@_jit
def window_grouped_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags,
                          LT, LS, spec):
    """The grouped block-scaled window (B200 NVFP4 / MXF4) where every group lies in one
    scale block and the A / B formats are narrow (``LeanGrouped`` of the numpy backend
    decides, and proves the int64 bounds): A and B are decoded pairwise through one joint
    table (``LT[0]`` the signed significand product aligned to the formats' smallest q,
    ``LT[1]`` the sum of the two q, ``GDEAD`` with a zero factor), a group's exact sum is
    the sum of those integers times the block's scale product, and the group rules
    (``scale_floor``, ``c_dominant``, ``c_relative``, ``subnormal_redo``) follow the
    reference on group values.  No row is refused (the bounds hold for every word)."""
    n = out.shape[0]
    K = wa.shape[1]
    fp2, fp3, fp4 = _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    F = P[0]
    group = P[3]
    has_sf = P[4] == 1
    sf = P[5]
    has_cd = P[6] == 1
    cdF = P[7]
    cdG = P[8]
    has_cr = P[9] == 1
    crF = P[10]
    has_sr = P[11] == 1
    srT = P[12]
    roff = P[16]
    bsh = LS[0]
    q0 = LS[1]
    c_f32 = _is_f32(fp2)
    d_f32 = _is_f32(fp3)
    rz = ENC[0] == 0 and ENC[2] == ENC[3]
    efrac, ebias, einf, esb = ENC[2], ENC[1], ENC[4], ENC[5]
    G = step // group
    per = block // group
    contrib = np.zeros(G, np.int64)
    gs = np.zeros(G, np.int64)
    gq = np.zeros(G, np.int64)
    gr = np.zeros(G, np.int64)
    gsr = np.zeros(G, np.int64)
    glive = np.zeros(G, np.bool_)
    nb = sa.shape[1]
    bsm = np.zeros(nb, np.int64)
    bqs = np.zeros(nb, np.int64)
    bsr = np.zeros(nb, np.int64)
    nspec = 0
    for d in range(n):
        flags[d] = False
        spec[d] = False
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        if c_f32:
            ccls, csg, cm, cq, cr = _f32_decode(np.int64(wc[rc]))
        else:
            ccls, csg, cm, cq, cr = _decode(np.int64(wc[rc]), fp2, TAB)
        special = ccls >= INF
        # the scales through the per-word table (rows 2-5 of LT): signed m, q, r, inf / NaN
        for blk in range(nb):
            x = np.int64(sa[rsa, blk])
            y = np.int64(sb[rsb, blk])
            if LT[5, x] + LT[5, y] != 0:
                special = True
            bsm[blk] = LT[2, x] * LT[2, y]
            bqs[blk] = LT[3, x] + LT[3, y] + q0
            bsr[blk] = LT[4, x] + LT[4, y]
        word = np.int64(0)
        for s0 in range(0, K, step):
            if special:
                break
            max_r = np.int64(NEG)
            max_sr = np.int64(NEG)
            any_live = False
            for blk in range(s0 // block, (s0 + step) // block):
                bm = bsm[blk]
                bq = bqs[blk]
                bs = bsr[blk]
                brr = roff + bs
                g0 = (blk * block - s0) // group
                for g in range(g0, g0 + per):
                    tot = np.int64(0)
                    qm = np.int64(GDEAD)
                    for kk in range(s0 + g * group, s0 + g * group + group):
                        j = (np.int64(wa[ra, kk]) << bsh) | np.int64(wb[rb, kk])
                        tot += LT[0, j]
                        qm = max(qm, LT[1, j])
                    gs[g] = tot * bm
                    gq[g] = bq
                    gsr[g] = bs
                    live = qm > GDEAD // 2 and bm != 0
                    glive[g] = live
                    if live:
                        v = qm + brr
                        gr[g] = v
                        any_live = True
                        if v > max_r:
                            max_r = v
                        if bs > max_sr:
                            max_sr = bs     # the blocks holding a nonzero product
                    else:
                        gr[g] = NEG
            c_live = ccls == FINITE
            c_mag = cm if c_live else np.int64(0)
            c_neg = csg == 1
            E = max_r
            if c_live and cr > E:
                E = cr
            quantum = E - F
            if has_sf:
                fl = max_sr - sf
                if fl > quantum:
                    quantum = fl
            cdom = False
            if has_cd:
                cdom = c_live and any_live and cr >= max_r
                if cdom:
                    quantum = cr - cdF
            qrel = cr - crF
            if quantum > qrel:
                qrel = quantum
            ptot = np.int64(0)
            for g in range(G):
                v = gs[g]
                if has_cr and c_live and glive[g] and gr[g] <= cr:
                    t = _trunc(v < 0, abs(v), gq[g], qrel)
                    t = _trunc(t < 0, abs(t), qrel, quantum)
                else:
                    t = _trunc(v < 0, abs(v), gq[g], quantum)
                contrib[g] = t
                ptot += t
            if has_cd and cdG != group and cdom:
                r = cdG // group
                ctot = np.int64(0)
                for h in range(0, G, r):
                    cs = np.int64(0)
                    for g in range(h, h + r):
                        cs += gs[g]
                    ctot += _trunc(cs < 0, abs(cs), gq[h], quantum)
                ptot = ctot
            ctr = _trunc(c_neg, c_mag, cq, quantum)
            total = ptot + ctr
            if has_sr and not (has_cd and cdom):
                total = _subnormal_redo(total, quantum, ctr, contrib, gsr, 1, G, gsr, srT, max_sr)
            oneg = total < 0
            omag = abs(total)
            e0 = quantum
            if not any_live:
                oneg = c_neg
                omag = c_mag
                e0 = cq
            if rz:
                word = _pack_rz(oneg, omag, e0, efrac, ebias, einf, esb)
            else:
                word = _pack(oneg, omag, e0, False, False, False, False, ENC)
            if s0 + step < K:
                if d_f32:
                    ccls, csg, cm, cq, cr = _f32_decode(word & ENC[7])
                else:
                    ccls, csg, cm, cq, cr = _decode(word & ENC[7], fp3, TAB)
                if ccls >= INF:
                    special = True
        if special:
            spec[d] = True
            nspec += 1
            continue
        out[d] = word
    return 0, nspec


# ------------------------------------------------------- IEEE float families
@_jit
def fma_f64_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags):
    n = out.shape[0]
    K = wa.shape[1]
    fp0, fp1, fp2, fp3, fp4 = _fmt(FM, 0), _fmt(FM, 1), _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    for d in range(n):
        flags[d] = False
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        c0, c1, c2, c3, c4 = _decode(np.int64(wc[rc]), fp2, TAB)
        acc = _value(c0, c1, c2, c3)
        for k in range(K):
            a0, a1, a2, a3, a4 = _decode(np.int64(wa[ra, k]), fp0, TAB)
            b0, b1, b2, b3, b4 = _decode(np.int64(wb[rb, k]), fp1, TAB)
            acc = _fma(_value(a0, a1, a2, a3), _value(b0, b1, b2, b3), acc)
        out[d] = acc
    return 0


@_jit
def fma_f32_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags):
    n = out.shape[0]
    K = wa.shape[1]
    fp0, fp1, fp2, fp3, fp4 = _fmt(FM, 0), _fmt(FM, 1), _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    for d in range(n):
        flags[d] = False
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        c0, c1, c2, c3, c4 = _decode(np.int64(wc[rc]), fp2, TAB)
        acc = np.float32(_value(c0, c1, c2, c3))
        for k in range(K):
            a0, a1, a2, a3, a4 = _decode(np.int64(wa[ra, k]), fp0, TAB)
            b0, b1, b2, b3, b4 = _decode(np.int64(wb[rb, k]), fp1, TAB)
            acc = _fma(np.float32(_value(a0, a1, a2, a3)), np.float32(_value(b0, b1, b2, b3)), acc)
        out[d] = acc
    return 0


@_jit
def mul_add_f32_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags):
    n = out.shape[0]
    K = wa.shape[1]
    fp0, fp1, fp2, fp3, fp4 = _fmt(FM, 0), _fmt(FM, 1), _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    for d in range(n):
        flags[d] = False
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        acc = np.float32(0.0)
        for k in range(K):
            a0, a1, a2, a3, a4 = _decode(np.int64(wa[ra, k]), fp0, TAB)
            b0, b1, b2, b3, b4 = _decode(np.int64(wb[rb, k]), fp1, TAB)
            p = np.float32(_value(a0, a1, a2, a3)) * np.float32(_value(b0, b1, b2, b3))
            acc = p if k == 0 else acc + p
        c0, c1, c2, c3, c4 = _decode(np.int64(wc[rc]), fp2, TAB)
        out[d] = acc + np.float32(_value(c0, c1, c2, c3))
    return 0


@_jit
def mul_add_f64_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags):
    n = out.shape[0]
    K = wa.shape[1]
    fp0, fp1, fp2, fp3, fp4 = _fmt(FM, 0), _fmt(FM, 1), _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    for d in range(n):
        flags[d] = False
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        acc = 0.0
        for k in range(K):
            a0, a1, a2, a3, a4 = _decode(np.int64(wa[ra, k]), fp0, TAB)
            b0, b1, b2, b3, b4 = _decode(np.int64(wb[rb, k]), fp1, TAB)
            p = _value(a0, a1, a2, a3) * _value(b0, b1, b2, b3)
            acc = p if k == 0 else acc + p
        c0, c1, c2, c3, c4 = _decode(np.int64(wc[rc]), fp2, TAB)
        out[d] = acc + _value(c0, c1, c2, c3)
    return 0


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


@_jit
def ftz_mul_add_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, P, ENC, step, block, out, flags):
    n = out.shape[0]
    K = wa.shape[1]
    fp0, fp1, fp2, fp3, fp4 = _fmt(FM, 0), _fmt(FM, 1), _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
    PP = P[0]
    for d in range(n):
        flags[d] = False
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
        out[d] = acc
    return 0


# ------------------------------------------------------------ python side
class Kernel:
    """A compiled kernel bound to one datapath's formats, parameters and encoding."""

    def __init__(self, plan, fn, P, out_kind="word"):
        self.fn = fn
        self.family = plan.datapath.accumulator
        self.P = np.asarray(P, dtype=np.int64)
        self.out_kind = out_kind            # "word", or "f32"/"f64": float values to be packed
        self.encoding = plan.encoding
        self.step = plan.step
        self.FM, self.TAB = _format_specs(plan)
        enc = plan.encoding
        sign_bit = enc.sign_bit if enc.sign_bit < (1 << 63) else enc.sign_bit - (1 << 64)
        self.ENC = np.array([_MODES[enc.mode], enc.bias, enc.frac_bits, enc.word_frac_bits, enc.inf_word,
                             sign_bit, enc.nan_word, (1 << enc.word_bits) - 1 if enc.word_bits < 64 else -1],
                            dtype=np.int64)
        self.block = int(plan.datapath.block or 1)
        self.extra = ()                     # further arrays of the kernel (the lean window's tables)

    def __call__(self, args, n):
        """``(D words, flags or None)`` of ``n`` rows; ``args``: see :func:`mmasim.backends.numba.kernel_args`."""
        if self.out_kind == "f64":
            vals = np.empty(n, dtype=np.float64)
        elif self.out_kind == "f32":
            vals = np.empty(n, dtype=np.float32)
        else:
            vals = np.empty(n, dtype=self.encoding.dtype)
        flags = np.empty(n, dtype=np.bool_)
        nflag = self.fn(*args, self.TAB, self.FM, self.P, self.ENC, self.step, self.block, vals, flags, *self.extra)
        if self.out_kind != "word":
            word = np.uint64 if self.out_kind == "f64" else np.uint32
            words = vals.view(word if self.out_kind == "f64" else np.uint32)
            words = np.where(np.isnan(vals), word(self.encoding.nan_word), words).astype(self.encoding.dtype)
            vals = words
        return vals, (flags if nflag else None)


class LeanWindowKernel(Kernel):
    """The lean window kernels: rows with an inf / NaN (``spec``) are then computed
    by the general :func:`window_kernel`, rows it flags by the numpy reference."""

    def __call__(self, args, n):
        wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols = args
        step = self.step
        vals = np.empty(n, dtype=self.encoding.dtype)
        flags = np.empty(n, dtype=np.bool_)
        spec = np.empty(n, dtype=np.bool_)
        nflag, nspec = self.fn(*args, self.TAB, self.FM, self.P, self.ENC, step, self.block, vals, flags,
                               *self.extra, spec)
        if nspec:
            d = np.flatnonzero(spec)
            if ncols > 0:
                i = d // ncols
                j = d - i * ncols
                rows = (i, j, d, i, j)
            else:
                rows = tuple(np.ascontiguousarray(x[d]) if x.shape[0] else d for x in (ia, ib, ic, isa, isb))
            sub, subf = np.empty(len(d), dtype=vals.dtype), np.empty(len(d), dtype=np.bool_)
            nflag += window_kernel(wa, wb, wc, sa, sb, *rows, 0, self.TAB, self.FM, self.P, self.ENC, step,
                                   self.block, sub, subf)
            vals[d] = sub
            flags[d] = subf
        return vals, (flags if nflag else None)


_EMPTY_TAB = np.zeros(1, dtype=np.int64)


def _packed_table(fmt, decoder):
    """Every word of ``fmt`` decoded and packed into one int64:
    cls | sign << 2 | m << 3 | (q + 2**15) << 23 | (r + 2**15) << 39; ``None`` if a field does not fit."""
    words = np.arange(1 << fmt.container_bits, dtype=np.uint64)
    dec = decoder(fmt, words)
    cls, sign, m, q, r = (np.asarray(x, dtype=np.int64).reshape(-1) for x in (dec.cls, dec.sign, dec.m, dec.q, dec.r))
    if (m.min() < 0 or m.max() >= 1 << 20 or np.abs(q).max() >= 1 << 15 or np.abs(r).max() >= 1 << 15
            or cls.min() < 0 or cls.max() > 3 or sign.min() < 0 or sign.max() > 1):
        return None
    return cls | (sign << 2) | (m << 3) | ((q + (1 << 15)) << 23) | ((r + (1 << 15)) << 39)


def _lean_spec(fmt, decoder):
    """Lean decode of an A / B format: ``(row, table or None, r - q offset, significand bits)``, or ``None``.

    Row: ``mode, table offset, field shift, field mask, sign bit, M, exponent mask, bias``.
    Mode 0 reads the table (containers of up to 16 bits, built by the registered
    decoder): row 0 the signed significand, row 1 q (LZQ for a zero, LSQ for inf /
    NaN).  Mode 1 decodes a wider IEEE format arithmetically."""
    if fmt.container_bits > 8:
        if (decoder is decode_float and fmt.nan == "ieee" and fmt.subnormals and fmt.signed
                and not fmt.integer and fmt.exp_bits + fmt.man_bits < 40):
            E, M = fmt.exp_bits, fmt.man_bits
            return ([1, 0, fmt.field_shift, (1 << fmt.field_bits) - 1, E + M, M, (1 << E) - 1, fmt.bias],
                    None, M, M + 1)
        return None
    words = np.arange(1 << fmt.container_bits, dtype=np.uint64)
    dec = decoder(fmt, words)
    cls, sign, m, q, r = (np.asarray(x, dtype=np.int64).reshape(-1) for x in (dec.cls, dec.sign, dec.m, dec.q, dec.r))
    fin = cls == FINITE
    if cls.min() < 0 or cls.max() > 3 or sign.min() < 0 or sign.max() > 1 or m.min() < 0 or m.max() >= 1 << 30:
        return None
    if (m[fin] == 0).any() or (m[cls == ZERO] != 0).any() or np.abs(q[fin]).max(initial=0) >= 1 << 20:
        return None
    off = np.unique(r[fin] - q[fin])
    if len(off) > 1:
        return None
    sm = np.where(fin, np.where(sign == 1, -m, m), 0)
    qq = np.where(fin, q, np.where(cls == ZERO, LZQ, LSQ))
    return [0, 0, 0, 0, 0, 0, 0, 0], np.stack([sm, qq]), int(off[0]) if len(off) else 0, \
        int(m[fin].max(initial=0)).bit_length()


def _lean_specs(plan):
    """``(LT, LS, r - q offset of the products, significand bits of the products)`` of
    the lean window decode of A and B, or ``None``."""
    rows, tabs, roff, bits, off = [], [], 0, 0, 0
    for fmt in (plan.a_format, plan.b_format):
        spec = _lean_spec(fmt, plan.decoder(fmt))
        if spec is None:
            return None
        row, tab, o, b = spec
        if tab is not None:
            row[1] = off
            tabs.append(tab)
            off += tab.shape[1]
        rows.append(row)
        roff += o
        bits += b
    LT = np.concatenate(tabs, axis=1) if tabs else np.zeros((2, 1), np.int64)
    # row 2: m and q packed into one word (the tiles of the lean kernel read one table
    # entry per element); 0 where m does not fit (the variant is then not used)
    packs = (np.abs(LT[0]) < 1 << (PACK_M - 1)).all()
    LT = np.ascontiguousarray(np.vstack([LT, LT[1] * (1 << PACK_M) + LT[0] if packs else np.zeros_like(LT[0])]))
    return LT, np.array(rows, dtype=np.int64), roff, bits


def _scale_bounds(plan):
    """(min r - q offset, significand bits) over every word of the scale format, or ``None``."""
    fmt = plan.scale_format
    if fmt.container_bits > 16:
        return None
    dec = plan.decoder(fmt)(fmt, np.arange(1 << fmt.container_bits, dtype=np.uint64))
    cls, m, q, r = (np.asarray(x, dtype=np.int64).reshape(-1) for x in (dec.cls, dec.m, dec.q, dec.r))
    fin = cls == FINITE
    if not fin.any():
        return None
    return int((r - q)[fin].min()), int(m[fin].max()).bit_length()


def _format_specs(plan):
    """(FM, TAB) for the A, B, C, D and scale formats of ``plan``; None if one cannot be compiled."""
    fmts = [plan.a_format, plan.b_format, plan.c_format, plan.d_format, plan.scale_format]
    rows, tabs, off = [], [], 0
    for fmt in fmts:
        row = [0] * 12
        if fmt is not None:
            decoder = plan.decoder(fmt)
            builtin = decoder is decode_float or decoder is decode_int
            # small containers (and plugin decoders of up to 16 bits): a packed table built by
            # the registered decoder; wider built-in formats are decoded arithmetically (a
            # 64K-entry table misses the cache on random words)
            small = fmt.container_bits <= 8 or (fmt.container_bits <= 16 and not builtin)
            tab = _packed_table(fmt, decoder) if small else None
            if tab is not None:
                row[0], row[1] = off, len(tab)
                tabs.append(tab)
                off += len(tab)
            elif builtin:
                row[2] = 1 if decoder is decode_int else 0
                row[3] = fmt.field_shift
                row[4] = fmt.field_bits
                row[5], row[6], row[7] = fmt.exp_bits, fmt.man_bits, fmt.bias
                row[8] = 1 if fmt.signed else 0
                row[9] = _NAN_CODES[fmt.nan]
                row[10] = 1 if fmt.subnormals else 0
                if decoder is decode_float and fmt.exp_bits + fmt.man_bits >= 63 and fmt.nan != "ieee":
                    return None, None
                if decoder is decode_int and fmt.field_bits >= 64:
                    return None, None
            else:
                return None, None
        rows.append(row)
    TAB = np.ascontiguousarray(np.concatenate(tabs)) if tabs else _EMPTY_TAB
    return np.array(rows, dtype=np.int64), TAB


def _clog2(g: int) -> int:
    return int(np.ceil(np.log2(g))) if g > 1 else 0


def _is_builtin(plan, name):
    return plan.builtin and plan.datapath.accumulator == name


def _make(plan, fn, P, out_kind="word"):
    k = Kernel(plan, fn, P, out_kind)
    return None if k.FM is None else k


def _grouped_table(plan, lg):
    """The tables of :func:`window_grouped_kernel`: rows 0-1 the joint A x B table of
    ``lg`` (a LeanGrouped), rows 2-5 per scale word (built by the registered decoder):
    the signed significand (0 for a zero or inf / NaN), q, r, and 1 for inf / NaN."""
    fmt = plan.scale_format
    dec = plan.decoder(fmt)(fmt, np.arange(1 << fmt.container_bits, dtype=np.uint64))
    cls, sign, m, q, r = (np.asarray(x, dtype=np.int64).reshape(-1) for x in (dec.cls, dec.sign, dec.m, dec.q, dec.r))
    fin = cls == FINITE
    N = max(len(lg.P), len(cls))
    T = np.zeros((6, N), dtype=np.int64)
    T[0, :len(lg.P)] = lg.P
    T[1, :len(lg.Q)] = lg.Q
    T[2, :len(cls)] = np.where(fin, np.where(sign == 1, -m, m), 0)
    T[3, :len(cls)] = q
    T[4, :len(cls)] = r
    T[5, :len(cls)] = cls >= INF
    return np.ascontiguousarray(T)


def _window(plan):
    if not _is_builtin(plan, "window"):
        return None
    p = dict(plan.datapath.parameters)
    known = {"F", "zeros", "group", "scale_floor", "c_dominant", "c_relative", "subnormal_redo"}
    if set(p) - known or plan.encoding.mode not in ("rz", "rne"):
        return None
    zeros = p.get("zeros", "excluded")
    group = int(p.get("group", 1))
    scaled = plan.datapath.scale is not None
    cd = p.get("c_dominant")
    if (p.get("scale_floor") is not None or p.get("subnormal_redo") is not None) and not scaled:
        return None
    step = plan.step
    if step % group or (cd is not None and step % int(cd["group"])):
        return None
    P = [
        int(p["F"]), 1 if zeros == "excluded" else 0, 0 if zeros == "excluded" else int(zeros), group,
        0 if p.get("scale_floor") is None else 1, int(p.get("scale_floor") or 0),
        0 if cd is None else 1, int(cd["F"]) if cd else 0, int(cd["group"]) if cd else 1,
        0 if p.get("c_relative") is None else 1, int(p.get("c_relative") or 0),
        0 if p.get("subnormal_redo") is None else 1, int(p.get("subnormal_redo") or 0),
        1 if scaled else 0, _clog2(group), _clog2(int(cd["group"])) if cd else 0,
    ]
    lean = _lean_specs(plan)
    if lean is None:
        return _make(plan, window_kernel, P)
    if group > 1 or cd is not None:
        from ..numpy.lean import LeanGrouped

        lg = LeanGrouped(plan)
        if lg.ok and lg.DEAD == GDEAD:
            k = LeanWindowKernel(plan, window_grouped_kernel, P + [lg.roff, 0, 0])
            if k.FM is not None:
                k.extra = (_grouped_table(plan, lg), np.array([lg.bshift, lg.q0], dtype=np.int64))
                return k
    LT, LS, roff, bits = lean
    simple = group == 1 and cd is None and p.get("c_relative") is None and p.get("subnormal_redo") is None
    # the lean kernel keeps products shifted left by S, the largest left shift a live
    # product can need (its raw exponent is at most the window's): they must fit int64
    S, lean_ok = max(0, int(p["F"]) - roff), simple
    if scaled:
        sb = _scale_bounds(plan)
        if sb is None:
            lean_ok = False
        else:
            S = max(0, int(p["F"]) - roff - 2 * sb[0])
            bits += 2 * sb[1]
    lean_ok = lean_ok and bits + S <= 62 and (not scaled or (LS[0, 0] == 0 and LS[1, 0] == 0))
    k = LeanWindowKernel(plan, window_fast_kernel, P + [roff, 1 if simple else 0, S])
    if k.FM is None:
        return None
    ckind, dkind = (_c_kind([int(x) for x in row]) for row in k.FM[2:4])
    if lean_ok and LS[0, 0] == LS[1, 0] and ckind > 0 and dkind > 0 and (LS[0, 0] == 1 or LT[2].any()):
        # the lean kernel compiled for the variant (A and B decoded alike, IEEE C and
        # D: every built-in window datapath); others take the general lean steps
        rz = plan.encoding.mode == "rz" and plan.encoding.frac_bits == plan.encoding.word_frac_bits
        k.fn = lean_variant(scaled, ckind, dkind, LS[0, 0], rz)
    k.extra = (LT, LS)
    return k


def _integer(plan):
    if not _is_builtin(plan, "integer") or plan.encoding.mode not in ("wrap", "sat") or plan.datapath.parameters:
        return None
    return _make(plan, integer_kernel, [0])


def _group_scaled(plan):
    if not _is_builtin(plan, "group_scaled_window") or plan.datapath.scale is None:
        return None
    p = plan.datapath.parameters
    if set(p) - {"F", "group", "zeros"} or plan.encoding.mode not in ("rz", "rne"):
        return None
    step = plan.step
    if step % int(p["group"]):
        return None
    return _make(plan, group_scaled_kernel, [int(p["F"]), int(p["group"]), int(p["zeros"]), _clog2(int(p["group"]))])


def _two_stage(plan):
    if not _is_builtin(plan, "two_stage_window") or plan.datapath.scale is not None:
        return None
    p = plan.datapath.parameters
    if set(p) - {"F", "F2", "even_odd", "drop_c", "overflow", "nonfinite_c_r"} or plan.encoding.mode not in ("rz", "rne"):
        return None
    P = [int(p["F"]), int(p["F2"]), 1 if p.get("even_odd") else 0, 1 if p.get("drop_c") else 0,
         0 if p.get("overflow") is None else 1, int(p.get("overflow") or 0),
         0 if p.get("nonfinite_c_r") is None else 1, int(p.get("nonfinite_c_r") or 0)]
    return _make(plan, two_stage_kernel, P)


def _exact_sum(plan):
    if not _is_builtin(plan, "exact_sum") or plan.datapath.scale is not None or plan.datapath.parameters:
        return None
    if plan.encoding.mode not in ("rz", "rne"):
        return None
    return _make(plan, exact_sum_kernel, [0])


def _ieee_ok(plan, formats=("f32", "f64")):
    enc = plan.encoding
    return plan.datapath.scale is None and enc.mode == "rne" and enc.format in formats and not plan.datapath.parameters


def _fma_family(plan):
    if not _is_builtin(plan, "fma") or not _ieee_ok(plan):
        return None
    if plan.datapath.chunk and plan.datapath.chunk < plan.datapath.stored_k:
        return None
    if plan.encoding.format == "f64":
        return _make(plan, fma_f64_kernel, [0], "f64")
    # the reference needs products exact in binary64 (it refuses otherwise)
    if plan.a_format.integer or plan.b_format.integer or plan.a_format.man_bits + plan.b_format.man_bits + 2 > 53:
        return None
    return _make(plan, fma_f32_kernel, [0], "f32")


def _mul_add(plan):
    if not _is_builtin(plan, "mul_add_chain") or not _ieee_ok(plan):
        return None
    if plan.datapath.chunk and plan.datapath.chunk < plan.datapath.stored_k:
        return None
    if plan.encoding.format == "f64":
        return _make(plan, mul_add_f64_kernel, [0], "f64")
    return _make(plan, mul_add_f32_kernel, [0], "f32")


def _ftz(plan):
    if not _is_builtin(plan, "ftz_mul_add") or plan.datapath.scale is not None:
        return None
    enc = plan.encoding
    p = plan.datapath.parameters
    if enc.format != "f32" or enc.mode != "rne" or set(p) != {"P"} or p["P"] not in (2, 4):
        return None
    if plan.datapath.chunk and plan.datapath.chunk < plan.datapath.stored_k:
        return None
    if plan.datapath.stored_k % p["P"]:
        return None
    return _make(plan, ftz_mul_add_kernel, [int(p["P"])], "f32")


#: accumulator name -> kernel builder (registered through the mmasim_kernels hook)
BUILDERS = {
    "window": _window,
    "integer": _integer,
    "group_scaled_window": _group_scaled,
    "two_stage_window": _two_stage,
    "exact_sum": _exact_sum,
    "fma": _fma_family,
    "mul_add_chain": _mul_add,
    "ftz_mul_add": _ftz,
}
