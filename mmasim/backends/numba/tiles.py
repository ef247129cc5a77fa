"""The lean window on tiles of rows (one product per group, scaled or not).

Every A / B element becomes a signed significand ``sm`` and an exponent ``q``
(of its last bit), read from a per-format table (containers of up to 16 bits:
``LT[0]`` signed m, ``LT[1]`` q) or decoded arithmetically (wider IEEE
formats), with the classes folded into ``q``: a zero has q = LZQ (its products
fall far below any window), an inf / NaN has q = LSQ (its products rise far
above).  The raw exponent is q plus a per-format constant (checked when the
table is built).  A row with an inf / NaN anywhere (A, B, scales, C, or a step
that overflowed) is computed by :func:`.window.window_kernel`, so special
values are exactly the general kernel's.  The window's rules are those of
:mod:`.window` (:func:`~.window._window_quantum`, :func:`~.window._d_or_c`).
"""

from __future__ import annotations

import numpy as np

from mmasim.backends.numba.primitives import (
    F32_SPEC,
    FINITE,
    INF,
    NEG,
    ZERO,
    _decode,
    _decode_call,
    _enc,
    _fmt,
    _is_f32,
    _jit,
    _inline,
    _pack,
    _rows,
    _rz_enc,
    _trunc,
)
from mmasim.backends.numba.window import _d_or_c, _window_params, _window_quantum

LZQ = -(1 << 30)     # q of a zero element
LSQ = 1 << 36        # q of an inf / NaN element
LZT = -(1 << 29)     # a product q below this has a zero factor
LST = 1 << 35        # a product q at or above this has an inf / NaN factor


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
def _c_tile(kind, cw, nr, fp, TAB, cdec, sp):
    """Decode the C words of a tile with :func:`_decode`, its spec constant where the
    ``kind`` fixes it (LLVM folds it into the steps): 2 binary32 (``F32_SPEC``), 1
    another IEEE format with subnormals (the fields of ``fp`` at run time, the rest
    constant).  One inlined decode either way (each costs compile time)."""
    z, o = np.int64(0), np.int64(1)
    spec = F32_SPEC if kind == 2 else (z, z, z, fp[3], fp[4], fp[5], fp[6], fp[7], o, z, o, z)
    for r in range(nr):
        _c_put(r, _decode(cw[r], spec, TAB), cdec, sp)


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
def _tile_sum(nr, step, R, hoff, px, pu, win, cdec, sp, tot):
    """The window of each row (:func:`_window_quantum`, from the largest product
    exponent ``hi + hoff``), the truncated C and the sum of the truncated products,
    in quanta of ``2**quantum`` (into ``tot``; ``qu``: quantum)."""
    hi, lo, msr, qu = win
    ccm, ccq, ccr, clive = cdec
    for r in range(nr):
        h = hi[r] + hoff
        hi[r] = h
        sp[r] |= h >= LST
        c_live = clive[r]
        cr = ccr[r]
        live = h > LZT
        quantum, _ = _window_quantum(h if live else np.int64(NEG), live, lo[r] < LZT, c_live, cr, msr[r], R)
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
    round toward zero into the word's own fraction width (``_pack`` of ``_rz_enc(ENC)``)."""
    dmask = ENC[7]
    enc = _rz_enc(ENC) if rz else _enc(ENC)    # one inlined _pack; rz is a constant
    hi, lo, msr, qu = win
    ccm, ccq, ccr, clive = cdec
    for r in range(nr):
        cm = ccm[r] if clive[r] else np.int64(0)
        oneg, omag, e0 = _d_or_c(tot[r], qu[r], excl, hi[r] > LZT, cm < 0, abs(cm), ccq[r])
        word = _pack(oneg, omag, e0, False, False, False, False, enc)
        cw[r] = np.int64(0) if sp[r] else word & dmask


def _window_lean_variant(SCALED, CKIND, DKIND, AMODE, RZ):
    """The lean window kernel for one variant: ``SCALED`` (block scales), ``CKIND``
    / ``DKIND`` (C / D decode, see :func:`_c_kind`), ``AMODE`` (A and B decode: 0
    tables, 1 arithmetic), ``RZ`` (the round-toward-zero encoder).  The variant is
    a constant of the closure: numba prunes the branches it decides before it
    inlines the helpers, and LLVM folds the rest, so that the loops have no variant
    branches."""

    def window_lean_kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block, out,
                           flags, LT, LS, spec):
        """The window with one product per group (``group`` 1, no ``c_dominant``,
        ``c_relative``, ``subnormal_redo``), scaled or not, on tiles of rows (above).

        Pass one decodes, multiplies and finds the window; products are kept
        pre-shifted left by ``S`` (the largest left shift a live product can need,
        ``R.S``), so that pass two truncates each with one right shift:
        ``t = (|p| << S) >> (S - q + quantum)``, the same value as the reference's
        ``(|p| << d) >> -d`` clips.  A row with an inf / NaN (input, scale, C, or a
        step that overflowed) is marked in ``spec`` and its word is not used (the
        general kernel computes it)."""
        n = out.shape[0]
        K = wa.shape[1]
        fp2, fp3, fp4 = _fmt(FM, 2), _fmt(FM, 3), _fmt(FM, 4)
        R = _window_params(RA[0])
        excl = R.excl == 1
        roff = R.roff
        S = R.S
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
                if CKIND == DKIND:      # one inlined decode for C and D
                    _c_tile(CKIND, cw, nr, fp2 if s0 == 0 else fp3, TAB, cdec, sp)
                elif s0 == 0:
                    _c_tile(CKIND, cw, nr, fp2, TAB, cdec, sp)
                else:
                    _c_tile(DKIND, cw, nr, fp3, TAB, cdec, sp)
                if SCALED:
                    _tile_products_scaled(tiles, s0, step, block, nr, la, lb, LT, S, px, pu, win, scl)
                elif AMODE == 0:
                    _tile_products(tiles, s0, step, nr, 0, la, lb, LT, S, px, pu, win)
                else:
                    _tile_products(tiles, s0, step, nr, 1, la, lb, LT, S, px, pu, win)
                _tile_sum(nr, step, R, hoff, px, pu, win, cdec, sp, tot)
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
