"""Shared jitted primitives of the compiled kernels: decode, truncate, pack, classify.

Every kernel (:mod:`.window`, :mod:`.tiles`, :mod:`.families`) is written with
these; each is the scalar transcription of one rule of the numpy reference
(:mod:`mmasim.arith.decode`, :mod:`mmasim.arith.intmath`, :mod:`mmasim.arith.encode`,
:mod:`mmasim.arith.special`), inlined where it is used.  Formats reach a kernel as
decode specs (``FM`` rows, :func:`_fmt`) over one packed table ``TAB``;
encodings as ``ENC`` (see :class:`mmasim.backends.numba.kernels.Kernel`).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba.core import types
from numba.core.extending import intrinsic
from numba.cpython.unsafe.numbers import leading_zeros

from mmasim.backends.numba.cache import jit as _jit

ZERO, FINITE, INF, NAN = 0, 1, 2, 3


NEG = -(1 << 40)          # intmath.NEG_INF_EXP


_NAN_CODES = {"ieee": 0, "max": 1, "negzero": 2, "allones": 3, "none": 4}


_MODES = {"rz": 0, "rne": 1, "wrap": 2, "sat": 3}


_inline = numba.njit(inline="always")   # inlined where used: nothing to cache


@intrinsic
def _fma(typingctx, a, b, c):
    """Correctly rounded fused multiply-add (``llvm.fma``) in the operands' precision."""
    if isinstance(a, types.Float) and a == b == c:
        def codegen(context, builder, sig, args):
            return builder.fma(*args)
        return a(a, b, c), codegen
    return None


@intrinsic
def _bitcast(typingctx, x):
    """A bit cast between int64 and binary64 (no memory, vectorizes): the binary64 whose
    bits are the int64 ``x``, or the bits of the binary64 ``x``."""
    to = {types.int64: types.float64, types.float64: types.int64}.get(x)
    if to is not None:
        def codegen(context, builder, sig, args):
            return builder.bitcast(args[0], context.get_value_type(to))
        return to(x), codegen
    return None


_f64_bits = _i64_bits = _bitcast


@_inline
def _pow2(e):
    """2**e as a binary64, for -1022 <= e <= 1023 (its bits built directly)."""
    return _bitcast((np.int64(1023) + e) << 52)


@intrinsic
def _f32_word(typingctx, x):
    """The binary32 word (zero-extended to int64) of a binary64 ``x`` that binary32
    represents exactly (the conversion is then exact: no rounding)."""
    if isinstance(x, types.Float) and x.bitwidth == 64:
        def codegen(context, builder, sig, args):
            f = builder.fptrunc(args[0], context.get_value_type(types.float32))
            w = builder.bitcast(f, context.get_value_type(types.int32))
            return builder.zext(w, context.get_value_type(types.int64))
        return types.int64(x), codegen
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
def _int_value(w, fp):
    """The value of word ``w`` of integer decode spec ``fp`` (decode.decode_int, arithmetic:
    ``fp[1] == 0``): the field, two's complement where signed."""
    fs = fp[3]
    fb = fp[4]
    if fb >= 64:
        return w
    x = (w >> fs) & ((np.int64(1) << fb) - 1)
    if fp[8] == 1:
        x = x - (np.int64(1) << fb) if x >= (np.int64(1) << (fb - 1)) else x
    return x


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
        x = _int_value(w, fp)
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


# the general decode as a called function: the lean kernels use it once per dot
# product (C) or per block (scales); compiled once, it keeps their compile time low
_decode_call = _jit(_decode.py_func)


#: The decode spec (an ``FM`` row) of binary32 decoded arithmetically: no table, a float,
#: field at bit 0 of 32 bits, E 8, M 23, bias 127, signed, NaN rule "ieee", subnormals.
#: ``_decode(w, F32_SPEC, TAB)`` is the binary32 decode: the spec is a constant, which
#: LLVM folds into the steps (no table read, no rule branches).
F32_SPEC = (0, 0, 0, 0, 32, 8, 23, 127, 1, 0, 1, 0)


@_inline
def _is_f32(fp):
    """Whether decode spec ``fp`` is binary32 decoded arithmetically (no table)."""
    for i in range(11):
        if fp[i] != F32_SPEC[i]:
            return False
    return True


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
def _enc(ENC):
    """Encoding ``ENC`` as a tuple (the type of :func:`_rz_enc`'s)."""
    return (ENC[0], ENC[1], ENC[2], ENC[3], ENC[4], ENC[5], ENC[6], ENC[7])


@_inline
def _rz_enc(ENC):
    """Encoding ``ENC`` as a tuple whose rounding mode (RZ) and word fraction width (the
    fraction width itself) are constants: ``_pack(..., _rz_enc(ENC))`` of a finite value
    without negative zero (``nan``, ``inf``, ``zero_neg`` literal False) folds away the
    RNE and relayout steps of :func:`_pack` (the RZ encoder of the lean kernels)."""
    frac = ENC[2]
    return (np.int64(0), ENC[1], frac, frac, ENC[4], ENC[5], ENC[6], ENC[7])


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


# ------------------------------------------------------------ special values
@_inline
def _product_class(nanf, inff, zf):
    """special.product's class of a product whose factors hold a NaN (``nanf``),
    an inf (``inff``), a zero (``zf``): NaN for inf x 0."""
    if nanf or (inff and zf):
        return NAN
    if inff:
        return INF
    return ZERO if zf else FINITE


@_inline
def _note_special(cls, neg, s):
    """special.classify, one term at a time: ``s`` = (NaN seen, +inf seen, -inf seen)."""
    nan, pinf, ninf = s
    if cls == NAN:
        nan = True
    elif cls == INF:
        if neg:
            ninf = True
        else:
            pinf = True
    return nan, pinf, ninf


@_inline
def _special_result(s):
    """``(nan, inf, inf_neg)`` of the terms noted in ``s``: +inf and -inf give NaN."""
    nan = s[0] or (s[1] and s[2])
    return nan, (s[1] or s[2]) and not nan, s[2] and not s[1]


NO_SPECIAL = (False, False, False)


# ---------------------------------------------------------------- row kernels
#: rows of the int64 work array of a step function (products, groups), each step + 1 long
WORK_ROWS = 9


def row_kernel(step_fn, name):
    """The kernel of a fixed-point family from its step function, one row at a time:
    decode C, then per hardware step ``word, bad = step_fn(...)`` (D of the step;
    ``bad``: a sum the reference refuses, the row is flagged), D decoded again as
    the C of the next step (docs/datapaths.md §1).  ``step_fn(wa, wb, sa, sb, ra,
    rb, rsa, rsb, s0, step, block, c, fp, TAB, R, ENC, W)``: ``c`` the decoded C,
    ``fp`` the A, B and scale decode specs, ``W`` an int64 work array
    (``WORK_ROWS`` x ``step + 1``)."""

    def kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block, out, flags):
        n = out.shape[0]
        K = wa.shape[1]
        R = RA[0]
        fp = (_fmt(FM, 0), _fmt(FM, 1), _fmt(FM, 4))
        fp2, fp3 = _fmt(FM, 2), _fmt(FM, 3)
        W = np.zeros((WORK_ROWS, step + 1), np.int64)
        nflag = 0
        for d in range(n):
            flags[d] = False
            ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
            c = _decode(np.int64(wc[rc]), fp2, TAB)
            word = np.int64(0)
            bad = False
            for s0 in range(0, K, step):
                word, bad = step_fn(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R, ENC, W)
                if bad:
                    break
                if s0 + step < K:
                    c = _decode(word & ENC[7], fp3, TAB)
            if bad:
                flags[d] = True
                nflag += 1
                continue
            out[d] = word
        return nflag

    kernel.__qualname__ = kernel.__name__ = name
    return _jit(kernel)
