"""The lean window on tiles of rows (one product per group, scaled or not), in binary64 lanes.

Every A / B element becomes its exact value as a binary64 and the code r + ``ro`` of
its raw exponent (:data:`LaneFormat`): read from a per-format table (containers of up
to 16 bits, built by the registered decoder; one int64 per word, the value's bits with
the code in the low TCODE bits, NaN for an inf / NaN) or decoded arithmetically (wider
IEEE formats).  Products, their truncation at the window's quantum and their sum are
binary64 operations, exact by the bound proof of the builder
(:func:`mmasim.backends.numba.kernels._window`).  A row with an inf / NaN anywhere (A, B,
scales, C, or a step that overflowed) is computed by :func:`.window.window_kernel`, so
special values are exactly the general kernel's.  The window's rules are those of
:mod:`.window` (:func:`~.window._window_quantum`, :func:`~.window._d_or_c`).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from mmasim.arith.codes import NEG_INF_EXP as DEAD   # the exponent channel of a product with a zero factor
from mmasim.backends.numba.primitives import (
    A_FMT,
    B_FMT,
    C_FMT,
    D_FMT,
    F32_SPEC,
    FINITE,
    INF,
    MODE_RZ,
    NAN_IEEE,
    NEG,
    SCALE_FMT,
    ZERO,
    FormatSpec,
    _clip,
    _decode,
    _decode_call,
    _enc,
    _f32_value,
    _f32_word,
    _f64_bits,
    _fmt,
    _i64_bits,
    _is_f32,
    _jit,
    _inline,
    _pack,
    _pow2,
    _round_code,
    _rows,
    _rz_enc,
    _trunc,
)
from mmasim.backends.numba.window import _d_or_c, _window_params, _window_quantum

#: The lane decode of one A / B format (a record per format; fields by name):
#: ``mode`` 0 a table (``LV``, from ``off``; containers of up to 16 bits, built by the
#: registered decoder), 1 an IEEE format with subnormals decoded arithmetically: the field
#: (``fs``, ``fmask``), its magnitude bits (``magmask``), fraction bits ``M``, the shift of
#: the magnitude into a binary64 (``dshift`` = 52 - M), the sign bit ``sbit``, the exponent
#: mask ``emask`` (inf / NaN), and ``P`` = 2**(1023 - bias): the magnitude bits placed in a
#: binary64 are the value times 2**(bias - 1023), subnormals included.  The exponent code of
#: an element is r + ``ro``.
LaneFormat = namedtuple("LaneFormat", "mode off fs fmask magmask M dshift sbit emask ro P")
#: The decoded C (or D, as the next step's C) of a tile's rows, an array each: the signed
#: significand ``m``, ``q``, ``r``, and ``live`` (finite and non-zero).
TileC = namedtuple("TileC", "m q r live")
#: The window of a tile's rows, an array each: the largest exponent code sum of the
#: products ``hi`` (then their largest raw exponent, DEAD where no product is live), the
#: largest scale raw sum of the blocks holding a nonzero product ``msr``, the quantum ``qu``.
TileWindow = namedtuple("TileWindow", "hi msr qu")

TCODE = 12                  # a tabled element: its exact binary64 value, r + RBIAS in the low TCODE bits
TMASK = (1 << TCODE) - 1
RBIAS = 1 << (TCODE - 1)
NEG_F = 1000                # the scale 2**-quantum is built for |quantum| <= NEG_F (the bound proofs keep it there)


@_inline
def _lane_fmt(LA, i):
    """Record ``i`` of ``LA`` as a :data:`LaneFormat` of values (kept in registers)."""
    f = LA[i]
    return LaneFormat(f.mode, f.off, f.fs, f.fmask, f.magmask, f.M, f.dshift, f.sbit, f.emask, f.ro, f.P)


@_inline
def _lane_get(x, mode, f):
    """(value, exponent code) of tile element ``x``: the element's exact value as a binary64
    (NaN for an inf / NaN, 0 for a zero) and r + ``f.ro`` (any value for a zero)."""
    if mode == 0:
        c = x & TMASK
        return _f64_bits(x ^ c), c
    y = (np.int64(x) >> f.fs) & f.fmask
    mag = y & f.magmask
    e = mag >> f.M
    v = _f64_bits((mag << f.dshift) | ((y >> f.sbit) << 63)) * f.P
    return (np.nan if e == f.emask else v), (e if e > 1 else np.int64(1))


@_inline
def _lane_scales(sa, sb, rsa, rsb, nb, fp4, TAB, bsv, bsr, r):
    """Per block, into column ``r``: the exact value of the product of the two scales
    (binary64; 0 for a zero) and their raw sum; returns whether a scale is inf / NaN."""
    special = False
    for blk in range(nb):
        xc, xsg, xm, xq, xr = _decode_call(np.int64(sa[rsa, blk]), fp4, TAB)
        yc, ysg, ym, yq, yr = _decode_call(np.int64(sb[rsb, blk]), fp4, TAB)
        if xc >= INF or yc >= INF:
            special = True
        bsr[blk, r] = xr + yr
        v = np.float64(xm * ym) * _pow2(_clip(xq + yq, -NEG_F, NEG_F))
        bsv[blk, r] = 0.0 if (xc == ZERO or yc == ZERO) else (-v if (xsg ^ ysg) == 1 else v)
    return special


# The lean window on tiles of rows.  Rows are computed TILE at a time, step by
# step; every inner loop runs over the rows of the tile (k-major tile arrays),
# has no branches, and vectorizes, and the rows' serial chains (window, sum,
# pack, decode of D as the next C) overlap.  Products, their truncation and
# their sum are binary64 lanes (exact: see the bound proofs of the builder);
# exponents and the C / D words int64.  Each phase is an inlined helper, called
# by the driver (window_lean_kernel) once per variant with the variant as a
# literal (A / B decoded by table or arithmetically, the C / D decode, the
# encoder), so that the loops have no variant branches.  The driver is not
# itself inlined anywhere: numba's inlining copies the inlined function's
# variable scope once per block, and a large inlined body costs tens of seconds
# of compile time.
TILE = 64    # rows per tile (the tile arrays stay in the L1 / L2 caches)


@_inline
def _tile_in(ops, idx, ncols, t0, nr, mode, fa, fb, LV, tiles, cw, sp, fp4, TAB, scl, rows):
    """Rows ``t0 ..`` of the operands into a tile: A and B k-major (a tabled element is
    its ``LV`` entry, otherwise the word itself), the C words into ``cw``, the scales of
    the blocks (``_lane_scales``; ``sp``: an inf / NaN scale).  ``ops``: the A, B, C,
    scale A, scale B words; ``idx``: their row indices; ``scl``: the per-block scale
    arrays (none when unscaled); ``rows``: a (5, TILE) uint64 work array, the operand
    rows of each tile row (unsigned: numba indexes with them without wrap-around code)."""
    wa, wb, wc, sa, sb = ops
    ia, ib, ic, isa, isb = idx
    at, bt = tiles
    bsv, bsr = scl
    K = wa.shape[1]
    nb = bsv.shape[0]
    for r in range(nr):
        ra, rb, rc, rsa, rsb = _rows(t0 + r, ncols, ia, ib, ic, isa, isb)
        rows[0, r], rows[1, r], rows[2, r] = np.uint64(ra), np.uint64(rb), np.uint64(rc)
        rows[3, r], rows[4, r] = np.uint64(rsa), np.uint64(rsb)
    for r in range(nr):
        ra, rb = rows[0, r], rows[1, r]
        for k in range(K):
            if mode == 0:
                at[k, r] = LV[np.uint64(fa.off) + np.uint64(wa[ra, k])]
                bt[k, r] = LV[np.uint64(fb.off) + np.uint64(wb[rb, k])]
            else:
                at[k, r] = wa[ra, k]
                bt[k, r] = wb[rb, k]
    for r in range(nr):
        cw[r] = wc[rows[2, r]]
        sp[r] = False
    if nb > 0:
        for r in range(nr):
            sp[r] = _lane_scales(sa, sb, rows[3, r], rows[4, r], nb, fp4, TAB, bsv, bsr, r)


@_inline
def _c_put(r, dec, cdec, sp):
    """Store the decoded C (or D, as the next step's C) of tile row ``r`` into ``cdec`` (a :data:`TileC`)."""
    ccls, csg, cm, cq, cr = dec
    ccm, ccq, ccr, clive = cdec
    sp[r] |= ccls >= INF
    ccm[r] = -cm if csg == 1 else cm
    ccq[r] = cq
    ccr[r] = cr
    clive[r] = ccls == FINITE


@_inline
def _c_tile(kind, cw, nr, fp, TAB, cdec, sp):
    """Decode the C words of a tile with :func:`_decode`, its spec constant where the
    ``kind`` fixes it (LLVM folds it into the steps): 2 binary32 (``F32_SPEC``), 1
    another IEEE format with subnormals (the fields of ``fp`` at run time, the rest
    constant).  One inlined decode either way (each costs compile time)."""
    z, o = np.int64(0), np.int64(1)
    spec = F32_SPEC if kind == 2 else FormatSpec(
        tab_off=z, tab_len=z, integer=z, field_shift=fp.field_shift, field_bits=fp.field_bits, exp_bits=fp.exp_bits,
        man_bits=fp.man_bits, bias=fp.bias, signed=o, nan_rule=np.int64(NAN_IEEE), subnormals=o)
    for r in range(nr):
        _c_put(r, _decode(cw[r], spec, TAB), cdec, sp)


def _c_kind(fp):
    """The :func:`_c_tile` kind of decode spec ``fp`` (a :data:`FormatSpec`): 2 binary32,
    1 another IEEE format with subnormals, 0 other (no lean variant)."""
    if _is_f32(fp):
        return 2
    if (fp.tab_len == 0 and fp.integer == 0 and fp.field_bits < 64 and fp.signed == 1 and fp.nan_rule == NAN_IEEE
            and fp.subnormals == 1):
        return 1
    return 0


@_inline
def _tile_products(tiles, s0, step, nr, mode, fa, fb, zc, px, hi, hh):
    """Unscaled products of one step for a tile: ``px`` their exact values (binary64),
    ``hi`` the largest exponent code sum of the products, a product with a zero factor
    counting as ``zc`` (the zero rule: e_zero's code, or DEAD where zeros are excluded).
    The running maximum goes down the rows of ``hh`` (a loop that writes back where it
    read becomes masked stores, slow on AMD CPUs)."""
    at, bt = tiles
    for r in range(nr):
        hh[0, r] = DEAD
    for k in range(0, step, 2):     # two elements per pass (the builder takes even steps only)
        for r in range(nr):
            va, ca = _lane_get(at[s0 + k, r], mode, fa)
            vb, cb = _lane_get(bt[s0 + k, r], mode, fb)
            ua, da = _lane_get(at[s0 + k + 1, r], mode, fa)
            ub, db = _lane_get(bt[s0 + k + 1, r], mode, fb)
            p, u = va * vb, ua * ub
            px[k, r] = p
            px[k + 1, r] = u
            c = ca + cb if p != 0.0 else zc
            d = da + db if u != 0.0 else zc
            c = c if c > d else d
            h = hh[k, r]
            hh[k + 2, r] = c if c > h else h
    for r in range(nr):
        hi[r] = hh[step, r]


@_inline
def _tile_products_scaled(tiles, s0, step, block, nr, fa, fb, zc, px, win, hh, scl):
    """Block-scaled products of one step (A and B tabled): block by block, the
    block's scale product per row; ``hi`` (of ``win``): the largest code sum of a
    product plus its block's scale raw sum (``zc`` for a product with a zero factor),
    ``msr``: the largest scale raw sum of the blocks holding a nonzero product (the
    scale floor; the builder takes no scale floor where zeros count)."""
    at, bt = tiles
    bsv, bsr = scl
    hi, msr, zb = win
    for r in range(nr):
        hi[r] = DEAD
        msr[r] = np.int64(NEG)
    for blk in range(s0 // block, (s0 + step - 1) // block + 1):
        k0, k1 = max(s0, blk * block) - s0, min(s0 + step, blk * block + block) - s0
        for r in range(nr):
            hh[k0, r] = DEAD       # the block's largest code sum, from row k0 of hh down
            zb[r] = zc - bsr[blk, r] if zc > DEAD else np.int64(DEAD)    # (zb: qu, free until _tile_sum)
        for k in range(k0, k1):
            for r in range(nr):
                va, ca = _lane_get(at[s0 + k, r], 0, fa)
                vb, cb = _lane_get(bt[s0 + k, r], 0, fb)
                p = va * vb * bsv[blk, r]
                px[k, r] = p
                c = ca + cb if p != 0.0 else zb[r]
                h = hh[k, r]
                hh[k + 1, r] = c if c > h else h
        for r in range(nr):
            live = hh[k1, r] > DEAD
            hb = hh[k1, r] + bsr[blk, r] if live else np.int64(DEAD)
            h = hi[r]
            hi[r] = hb if hb > h else h
            # only a block holding a nonzero product raises the scale floor
            m0, m1 = msr[r], bsr[blk, r] if live else np.int64(NEG)
            msr[r] = m1 if m1 > m0 else m0


@_inline
def _tile_sum(nr, step, R, hoff, px, win, cdec, sp, tot, sc, acc):
    """The window of each row (:func:`_window_quantum`, from the largest product raw
    exponent ``hi - hoff``, which holds e_zero where a product has a zero factor and
    zeros count), the truncated C and the sum of the truncated products, in quanta of
    ``2**quantum`` (into ``tot``; ``qu``: quantum; ``hi``: DEAD where no product is
    live).  A product's truncation is ``trunc(p * 2**-quantum)`` in binary64, exact
    (the builder's bound proofs); a sum that is not finite marks its row in ``sp``."""
    hi, msr, qu = win
    ccm, ccq, ccr, clive = cdec
    for r in range(nr):
        live = hi[r] > DEAD
        h = hi[r] - hoff
        hi[r] = h if live else np.int64(DEAD)
        c_live = clive[r]
        cr = ccr[r]
        quantum, _ = _window_quantum(h if live else np.int64(NEG), live, False, c_live, cr, msr[r], R)
        qu[r] = quantum
        sc[r] = _pow2(-_clip(quantum, -NEG_F, NEG_F))
        cm = ccm[r] if c_live else np.int64(0)
        tot[r] = _trunc(cm < 0, abs(cm), ccq[r], quantum)
        acc[r] = 0.0
    _lane_sum(nr, step, px, sc, acc, sp)
    for r in range(nr):
        tot[r] += np.int64(acc[r])


@_inline
def _lane_sum(nr, step, px, sc, acc, sp):
    """Add the step's truncated products ``trunc(p * sc)`` of each row into ``acc``
    (binary64, exact: the builder's bound proofs); a sum that is not finite (an inf / NaN
    element) marks its row in ``sp`` and is set to 0."""
    for k in range(step):
        for r in range(nr):
            acc[r] += np.trunc(px[k, r] * sc[r])
    for r in range(nr):
        a = acc[r]
        fin = a - a == 0.0
        sp[r] |= not fin
        acc[r] = a if fin else 0.0


#: the binary32 grid of :func:`_rz_f32`: smallest normal 2**-126, 23 fraction bits, the
#: largest finite magnitude field (the code of :func:`_round_code` is the word's magnitude)
_F32_EMIN, _F32_FRAC, _F32_MAX_CODE = -126, 23, (255 << 23) - 1


@_inline
def _rz_f32(v):
    """The binary64 value of the binary32 word that the round-toward-zero encoding into
    binary32 gives for the exact, finite binary64 ``v``: :func:`_round_code` (``MODE_RZ``) of
    its significand and exponent, as :func:`_pack` with ``_rz_enc`` of binary32 rounds it (the
    fraction cut to 23 bits where ``|v|`` is normal in binary32, to multiples of 2**-149
    below, inf from 2**128), +0 for a zero."""
    b = _i64_bits(v)
    e = (b >> 52) & 0x7FF
    mag = (b & ((np.int64(1) << 52) - 1)) | ((np.int64(1) << 52) if e != 0 else np.int64(0))
    code, over = _round_code(mag, (e if e != 0 else np.int64(1)) - 1075, _F32_EMIN, _F32_FRAC, MODE_RZ,
                             _F32_MAX_CODE)
    w = (_F32_MAX_CODE + 1 if over else code) | ((b >> 32) & np.int64(0x80000000))
    return _f32_value(w) + 0.0


@_inline
def _tile_chain_rz32(nr, R, hoff, last, px, step, win, cv, cr, cl, sp, sc, acc):
    """One step of the window for rows whose C and D are binary32 and D is encoded toward
    zero: the window (``hi - hoff``, see :func:`_tile_sum`), the truncated C and
    products summed exactly in binary64, and D (its value, the next step's C: ``cv``, its
    r ``cr``, live ``cl``) by :func:`_rz_f32`, all in binary64 / int64 lanes (no decode
    and pack between steps).  ``last``: the last step (an overflow to inf is then D;
    before, it marks the row in ``sp``, as its C would)."""
    hi, msr, qu = win
    excl = R.excl == 1
    for r in range(nr):
        live = hi[r] > DEAD
        h = hi[r] - hoff
        quantum, _ = _window_quantum(h if live else np.int64(NEG), live, False, cl[r], cr[r], msr[r], R)
        qc = _clip(quantum, -NEG_F, NEG_F)
        qu[r] = qc
        s = _pow2(-qc)
        sc[r] = s
        acc[r] = np.trunc((cv[r] if cl[r] else 0.0) * s)
    _lane_sum(nr, step, px, sc, acc, sp)
    for r in range(nr):
        v = acc[r] * _pow2(qu[r])
        if excl:
            v = v if hi[r] > DEAD else cv[r]      # no live product: D is C
        d = _rz_f32(v)
        e = (_i64_bits(d) >> 52) & 0x7FF
        cv[r] = d
        cr[r] = e - 1023 if e > 1 else np.int64(-126)
        cl[r] = d != 0.0
        if not last:
            sp[r] |= d - d != 0.0


@_inline
def _tile_pack(nr, rz, excl, tot, win, cdec, sp, e, cw):
    """Encode the D words of a tile into ``cw`` (0 for rows marked in ``sp``) by the ``ENC``
    record ``e``; ``rz``: round toward zero into the word's own fraction width (``_pack``
    of ``_rz_enc(e)``)."""
    dmask = e.word_mask
    enc = _rz_enc(e) if rz else _enc(e)    # one inlined _pack; rz is a constant
    hi, msr, qu = win
    ccm, ccq, ccr, clive = cdec
    for r in range(nr):
        cm = ccm[r] if clive[r] else np.int64(0)
        oneg, omag, e0 = _d_or_c(tot[r], qu[r], excl, hi[r] > DEAD, cm < 0, abs(cm), ccq[r])
        word = _pack(oneg, omag, e0, False, False, False, False, enc)
        cw[r] = np.int64(0) if sp[r] else word & dmask


def _window_lean_variant(SCALED, CKIND, DKIND, AMODE, RZ):
    """The lean window kernel for one variant: ``SCALED`` (block scales), ``CKIND``
    / ``DKIND`` (C / D decode, see :func:`_c_kind`), ``AMODE`` (A and B decode: 0
    tables, 1 arithmetic), ``RZ`` (the round-toward-zero encoder).  The variant is
    a constant of the closure: numba prunes the branches it decides before it
    inlines the helpers, and LLVM folds the rest, so that the loops have no variant
    branches."""

    CHAIN = CKIND == 2 and DKIND == 2 and RZ == 1     # binary32 C and D toward zero: chained in lanes

    def window_lean_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block, out,
                           flags, LV, LA, spec):
        """The window with one product per group (``group`` 1, no ``c_dominant``,
        ``c_relative``, ``subnormal_redo``), scaled or not, on tiles of rows (above).

        Pass one decodes, multiplies and finds the window; pass two truncates every
        product at the window's quantum and sums, in binary64 lanes (exact).  A row
        with an inf / NaN (input, scale, C, or a step that overflowed) is marked in
        ``spec`` and its word is not used (the general kernel computes it)."""
        n = out.shape[0]
        K = wa.shape[1]
        fp2, fp3, fp4 = _fmt(FM, C_FMT), _fmt(FM, D_FMT), _fmt(FM, SCALE_FMT)
        R = _window_params(RA[0])
        enc = ENC[0]
        excl = R.excl == 1
        fa, fb = _lane_fmt(LA, A_FMT), _lane_fmt(LA, B_FMT)
        T = TILE
        if AMODE == 0:
            tiles = (np.empty((K, T), np.int64), np.empty((K, T), np.int64))
        else:       # the words themselves, unsigned: LLVM then shifts them logically (AVX2 has no 64-bit sra)
            tiles = (np.empty((K, T), np.uint32), np.empty((K, T), np.uint32))
        px = np.empty((step, T), np.float64)
        hh = np.empty((step + 1, T), np.int64)
        # a product with a zero factor: e_zero's exponent code where zeros count, else below any window
        zc = np.int64(DEAD) if excl else R.ezero + R.roff
        cw = np.empty(T, np.int64)
        cdec = TileC(np.empty(T, np.int64), np.empty(T, np.int64), np.empty(T, np.int64), np.empty(T, np.bool_))
        win = TileWindow(np.empty(T, np.int64), np.empty(T, np.int64), np.empty(T, np.int64))
        sp = np.empty(T, np.bool_)
        tot = np.empty(T, np.int64)
        sc = np.empty(T, np.float64)
        acc = np.empty(T, np.float64)
        cv = np.empty(T, np.float64)
        rows = np.empty((5, T), np.uint64)
        nb = sa.shape[1] if SCALED else 0
        scl = (np.zeros((nb, T), np.float64), np.zeros((nb, T), np.int64))
        ops, idx = (wa, wb, wc, sa, sb), (ia, ib, ic, isa, isb)
        nspec = 0
        for t0 in range(0, n, T):
            nr = min(T, n - t0)
            if AMODE == 0:
                _tile_in(ops, idx, ncols, t0, nr, 0, fa, fb, LV, tiles, cw, sp, fp4, TAB, scl, rows)
            else:
                _tile_in(ops, idx, ncols, t0, nr, 1, fa, fb, LV, tiles, cw, sp, fp4, TAB, scl, rows)
            if CHAIN:
                # binary32 C and D encoded toward zero: C decoded once, the steps chained in lanes
                _c_tile(2, cw, nr, fp2, TAB, cdec, sp)
                ccm, ccq, ccr, clive = cdec
                for r in range(nr):
                    cv[r] = np.float64(ccm[r]) * _pow2(ccq[r])
            for s0 in range(0, K, step):
                if CHAIN:
                    pass
                elif CKIND == DKIND:      # one inlined decode for C and D
                    _c_tile(CKIND, cw, nr, fp2 if s0 == 0 else fp3, TAB, cdec, sp)
                elif s0 == 0:
                    _c_tile(CKIND, cw, nr, fp2, TAB, cdec, sp)
                else:
                    _c_tile(DKIND, cw, nr, fp3, TAB, cdec, sp)
                if SCALED:
                    _tile_products_scaled(tiles, s0, step, block, nr, fa, fb, zc, px, win, hh, scl)
                elif AMODE == 0:
                    _tile_products(tiles, s0, step, nr, 0, fa, fb, zc, px, win.hi, hh)
                else:
                    _tile_products(tiles, s0, step, nr, 1, fa, fb, zc, px, win.hi, hh)
                if CHAIN:
                    _tile_chain_rz32(nr, R, R.roff, s0 + step >= K, px, step, win, cv, cdec.r, cdec.live, sp, sc, acc)
                else:
                    _tile_sum(nr, step, R, R.roff, px, win, cdec, sp, tot, sc, acc)
                    if RZ:
                        _tile_pack(nr, True, excl, tot, win, cdec, sp, enc, cw)
                    else:
                        _tile_pack(nr, False, excl, tot, win, cdec, sp, enc, cw)
            if CHAIN:
                for r in range(nr):
                    cw[r] = _f32_word(cv[r])
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
