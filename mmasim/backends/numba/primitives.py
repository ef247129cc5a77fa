"""Shared jitted primitives of the compiled kernels: decode, truncate, pack, classify.

Every kernel (:mod:`.window`, :mod:`.tiles`, :mod:`.families`) is written with
these; each is the scalar transcription of one rule of the numpy reference
(:mod:`mmasim.arith.decode`, :mod:`mmasim.arith.intmath`, :mod:`mmasim.arith.encode`,
:mod:`mmasim.arith.special`), inlined where it is used.  They are target-neutral: numba
compiles them for the CPU, and numba-cuda (:mod:`mmasim.backends.cuda`) as CUDA device
functions from the same source; the few LLVM intrinsics they need are :func:`_intrinsic`
(one codegen for both targets, :data:`NEUTRAL_INTRINSICS`).  Formats reach a kernel as
decode specs (``FM`` records, :data:`FormatSpec`, :func:`_fmt`) over one packed table
``TAB``; encodings as ``ENC`` (:data:`EncodingSpec`; see
:class:`mmasim.backends.numba.kernels.Kernel`).
"""

from __future__ import annotations

import math
from collections import namedtuple

import numba
import numpy as np
from numba.core import types
from llvmlite import ir
from numba.core.extending import intrinsic

from mmasim.arith.codes import FINITE, INF, NAN, ZERO
from mmasim.arith.codes import NEG_INF_EXP as NEG
from mmasim.backends.numba.cache import jit as _jit


#: NaN rules of a format (``Format.nan``) as :data:`FormatSpec` codes
NAN_IEEE, NAN_MAX, NAN_NEGZERO, NAN_ALLONES, NAN_NONE = range(5)
_NAN_CODES = {"ieee": NAN_IEEE, "max": NAN_MAX, "negzero": NAN_NEGZERO, "allones": NAN_ALLONES, "none": NAN_NONE}

#: rounding / overflow modes of an encoding (``Encoding.mode``) as :data:`EncodingSpec` codes,
#: and the casts' other roundings (:func:`_round_any`: ``round_code``'s ``"away"`` and ``"rs"``)
MODE_RZ, MODE_RNE, MODE_WRAP, MODE_SAT, MODE_AWAY, MODE_RS = range(6)
_MODES = {"rz": MODE_RZ, "rne": MODE_RNE, "wrap": MODE_WRAP, "sat": MODE_SAT, "away": MODE_AWAY, "rs": MODE_RS}

#: The decode spec of one format (a record of ``FM``, built by
#: :func:`mmasim.backends.numba.kernels._format_specs`; :func:`_fmt` reads it as values):
#: ``tab_off``, ``tab_len`` its slice of the packed table ``TAB`` (``tab_len`` > 0: decoded
#: through the table, the other fields 0); else the arithmetic decoder's parameters:
#: ``integer`` (1 decode_int, 0 decode_float), the field (``field_shift``, ``field_bits``),
#: ``exp_bits``, ``man_bits``, ``bias``, ``signed`` (0 / 1), ``nan_rule`` (``NAN_*``),
#: ``subnormals`` (0 / 1): the attributes of :class:`mmasim.arith.formats.Format`.
FormatSpec = namedtuple("FormatSpec", "tab_off tab_len integer field_shift field_bits exp_bits man_bits bias "
                                      "signed nan_rule subnormals")
#: The rows of ``FM``: the A, B, C, D and scale formats.
A_FMT, B_FMT, C_FMT, D_FMT, SCALE_FMT = range(5)
#: The decode specs a step function reads (:func:`row_kernel`): A, B and the scales.
StepFormats = namedtuple("StepFormats", "a b scale")

#: The output encoding (``ENC``, a one-element record array built by
#: :class:`mmasim.backends.numba.kernels.Kernel`; kernels read ``enc = ENC[0]``): the
#: attributes of :class:`mmasim.arith.encode.Encoding` (``mode`` as a ``MODE_*`` code,
#: ``sign_bit`` as a signed int64) and ``word_mask``, the mask of the word's bits (-1 for 64).
EncodingSpec = namedtuple("EncodingSpec", "mode bias frac_bits word_frac_bits inf_word sign_bit nan_word word_mask")


_inline = numba.njit(forceinline=True)   # compiled once per signature, inlined by LLVM where used
#: :data:`_inline` without reference counting, for a function of a whole row that takes the
#: operand arrays (a kernel's rows, a per-row body of :mod:`mmasim.backends.cuda.rows`): it
#: borrows them from its caller and allocates nothing
_inline_rows = numba.njit(forceinline=True, _nrt=False)

#: The target-neutral intrinsics (:func:`_intrinsic`): ``id`` of each CPU intrinsic -> its
#: definition, from which :mod:`mmasim.backends.cuda` makes the CUDA one (numba-cuda types
#: numba's CPU intrinsics not at all: it has its own registry).
NEUTRAL_INTRINSICS: dict = {}


def _intrinsic(defn):
    """A numba intrinsic (``numba.core.extending.intrinsic``) that is also compiled for CUDA:
    ``defn`` is recorded in :data:`NEUTRAL_INTRINSICS`.  Its codegen must be valid LLVM for
    both targets (NVVM accepts fewer intrinsics: see :func:`_ftrunc`)."""
    fn = intrinsic(defn)
    NEUTRAL_INTRINSICS[id(fn)] = defn
    return fn


@_intrinsic
def _ctlz(typingctx, x):
    """The count of leading zero bits of an integer (``llvm.ctlz``, defined at 0: the bit
    width), as numba's ``leading_zeros``; PTX ``clz``."""
    if isinstance(x, types.Integer):
        def codegen(context, builder, sig, args):
            return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))
        return x(x), codegen
    return None


@_intrinsic
def _ftrunc(typingctx, x):
    """``trunc`` of a binary64 (toward zero, exact), as ``np.trunc``: ``llvm.trunc.f64`` on the
    CPU, ``llvm.nvvm.trunc.d`` on CUDA (NVVM rejects ``llvm.trunc.f64``; numba-cuda has no
    ``np.trunc``); both are PTX ``cvt.rzi.f64.f64``."""
    if isinstance(x, types.Float) and x.bitwidth == 64:
        def codegen(context, builder, sig, args):
            module = builder.module
            name = "llvm.nvvm.trunc.d" if module.triple.startswith("nvptx") else "llvm.trunc.f64"
            fn = module.globals.get(name)
            if fn is None:
                fn = ir.Function(module, ir.FunctionType(ir.DoubleType(), [ir.DoubleType()]), name)
            return builder.call(fn, args)
        return x(x), codegen
    return None


@_intrinsic
def _fma(typingctx, a, b, c):
    """Correctly rounded fused multiply-add (``llvm.fma``) in the operands' precision."""
    if isinstance(a, types.Float) and a == b == c:
        def codegen(context, builder, sig, args):
            return builder.fma(*args)
        return a(a, b, c), codegen
    return None


@_intrinsic
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


@_intrinsic
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


@_intrinsic
def _f32_value(typingctx, w):
    """The binary64 value of the binary32 word in the low 32 bits of the int64 ``w`` (the
    inverse of :func:`_f32_word`; exact: binary64 holds every binary32 value)."""
    if isinstance(w, types.Integer) and w.bitwidth == 64:
        def codegen(context, builder, sig, args):
            x = builder.trunc(args[0], ir.IntType(32))
            f = builder.bitcast(x, context.get_value_type(types.float32))
            return builder.fpext(f, context.get_value_type(types.float64))
        return types.float64(w), codegen
    return None


# --------------------------------------------------------------- scalar parts
@_inline
def _bitlen(x):
    """Bit length of x >= 0 (0 for x <= 0, like intmath.bit_length)."""
    if x <= 0:
        return np.int64(0)
    return np.int64(64) - np.int64(_ctlz(x))


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
    """Record ``f`` of ``FM`` as a :data:`FormatSpec` of values (kept in registers by the kernels)."""
    r = FM[f]
    return FormatSpec(r.tab_off, r.tab_len, r.integer, r.field_shift, r.field_bits, r.exp_bits, r.man_bits, r.bias,
                      r.signed, r.nan_rule, r.subnormals)


@_inline
def _int_value(w, fp):
    """The value of word ``w`` of integer decode spec ``fp`` (decode.decode_int, arithmetic:
    ``fp.tab_len == 0``): the field, two's complement where signed."""
    fs = fp.field_shift
    fb = fp.field_bits
    if fb >= 64:
        return w
    x = (w >> fs) & ((np.int64(1) << fb) - 1)
    if fp.signed == 1:
        x = x - (np.int64(1) << fb) if x >= (np.int64(1) << (fb - 1)) else x
    return x


@_inline
def _decode(w, fp, TAB):
    """(cls, sign, m, q, r) of word ``w`` in format ``fp`` (decode.decode_float / decode_int)."""
    if fp.tab_len > 0:
        v = TAB[fp.tab_off + w]
        return (v & 3, (v >> 2) & 1, (v >> 3) & 0xFFFFF, ((v >> 23) & 0xFFFF) - 32768,
                ((v >> 39) & 0xFFFF) - 32768)
    fs = fp.field_shift
    fb = fp.field_bits
    if fp.integer == 1:
        x = _int_value(w, fp)
        s = np.int64(1) if x < 0 else np.int64(0)
        m = -x if x < 0 else x
        return (ZERO if m == 0 else FINITE), s, m, np.int64(0), np.int64(0)
    E = fp.exp_bits
    M = fp.man_bits
    bias = fp.bias
    if fb >= 64:
        x = w
    else:
        x = (w >> fs) & ((np.int64(1) << fb) - 1)
    mag_bits = E + M
    s = ((x >> mag_bits) & 1) if fp.signed == 1 else np.int64(0)
    e = (x >> M) & ((np.int64(1) << E) - 1)
    fr = x & ((np.int64(1) << M) - 1)
    if fp.subnormals == 1:
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
    rule = fp.nan_rule
    special = False
    if rule == NAN_IEEE:
        if e == (np.int64(1) << E) - 1:
            special = True
            cls = INF if fr == 0 else NAN
    elif rule == NAN_MAX:
        mm = (np.int64(1) << mag_bits) - 1
        if (x & mm) == mm:
            special = True
            cls = NAN
    elif rule == NAN_NEGZERO:
        if x == (np.int64(1) << mag_bits):
            special = True
            cls = NAN
        if cls == ZERO:
            s = np.int64(0)
    elif rule == NAN_ALLONES:
        if x == (np.int64(1) << fb) - 1:
            special = True
            cls = NAN
    if special:
        m = np.int64(0)
    return cls, s, m, q, r


# the general decode as a called function: the lean kernels use it once per dot
# product (C) or per block (scales); compiled once, it keeps their compile time low
_decode_call = _jit(_decode.py_func)


#: The decode spec of binary32 decoded arithmetically (no table).  ``_decode(w, F32_SPEC,
#: TAB)`` is the binary32 decode: the spec is a constant, which LLVM folds into the steps
#: (no table read, no rule branches).
F32_SPEC = FormatSpec(tab_off=0, tab_len=0, integer=0, field_shift=0, field_bits=32, exp_bits=8, man_bits=23,
                      bias=127, signed=1, nan_rule=NAN_IEEE, subnormals=1)


def _is_f32(fp):
    """Whether decode spec ``fp`` (a :data:`FormatSpec`) is binary32 decoded arithmetically (no table)."""
    return tuple(fp) == tuple(F32_SPEC)


@_inline
def _round_code(mag, e0, emin, frac, mode, max_code):
    """:func:`mmasim.arith.encode.round_code` for one value, the one rounding rule of the
    compiled kernels: ``mag * 2**e0`` (``mag`` >= 0, below 2**62) rounded onto the grid of a
    float format with ``frac`` fraction bits, smallest normal ``2**emin`` and subnormals, by
    ``mode`` (``MODE_RZ`` or ``MODE_RNE``): ``(code, over)``, ``code`` the magnitude field
    (exponent and fraction: ``((t - emin) << frac) + s``, 0 for a zero ``mag``), ``over`` a
    nonzero value whose code passes ``max_code`` or whose leading bit lies past the largest
    binade.  :func:`_round_any` with subnormals and no random bits."""
    return _round_any(mag, e0, emin, frac, mode, max_code, True, np.int64(0), np.int64(0))


@_inline
def _round_any(mag, e0, emin, frac, mode, max_code, subnormals, rbits, rbits_width):
    """:func:`mmasim.arith.encode.round_code` for one value, every mode (``MODE_RZ``,
    ``MODE_RNE``, ``MODE_AWAY``, ``MODE_RS`` with ``rbits`` of ``rbits_width`` bits) and
    ``subnormals=False`` (ue8m0: codes count from ``2**emin``): the same steps, one value at a
    time (the casts of :mod:`mmasim.backends.cuda.quantize` run its other modes)."""
    lead = e0 + _bitlen(mag) - 1
    top = lead if lead > emin else emin         # the binade of the kept last bit's leading bit
    drop = (top - frac) - e0                    # bits below the kept last bit
    keep = (mag << _clip(-drop, 0, 62)) >> _clip(drop, 0, 63)
    if mode != MODE_RZ and drop > 0:
        d = drop if drop < 63 else 63
        if d > 62:
            rem = mag
            half = np.int64(1) << 62            # above any mag
        else:
            rem = mag & ((np.int64(1) << d) - 1)
            half = np.int64(1) << (d - 1)
        if mode == MODE_RNE:
            up = rem > half or (rem == half and (keep & 1) == 1)
        elif mode == MODE_AWAY:
            up = rem != 0
        else:                                   # MODE_RS: the carry of the random bits' addition
            up = _shift(rem, rbits_width - drop) + rbits >= (np.int64(1) << rbits_width)
        if up:
            keep += 1
    code = ((top - emin) << frac) + keep
    if subnormals:
        if mag == 0:
            return np.int64(0), False
        lead_max = emin + (max_code >> frac) - 1
    else:
        one = np.int64(1) << frac
        code = (code if code > one else one) - one
        if mag == 0:
            return code, False
        lead_max = emin + (max_code >> frac)
    return code, code > max_code or lead > lead_max


@_inline
def _pack(neg, mag, e0, nan, inf, inf_neg, zero_neg, enc):
    """encode.Encoding.pack for one value; ``enc``: an ``ENC`` record or an :data:`EncodingSpec`.
    The rounding is :func:`_round_code`; this adds the word layout, infinity, NaN and signs."""
    if nan:
        return enc.nan_word
    if inf:
        return enc.inf_word | (enc.sign_bit if inf_neg else np.int64(0))
    frac = enc.frac_bits
    wfrac = enc.word_frac_bits
    wmag, over = _round_code(mag, e0, 1 - enc.bias, frac, enc.mode, (enc.inf_word >> (wfrac - frac)) - 1)
    if frac != wfrac:
        wmag = ((wmag >> frac) << wfrac) | ((wmag & ((np.int64(1) << frac) - 1)) << (wfrac - frac))
    if over:
        wmag = enc.inf_word
    neg_out = neg and wmag != 0
    if zero_neg and wmag == 0:
        neg_out = True
    return wmag | (enc.sign_bit if neg_out else np.int64(0))


@_inline
def _enc(e):
    """The ``ENC`` record ``e`` as an :data:`EncodingSpec` of values (the type of :func:`_rz_enc`'s)."""
    return EncodingSpec(e.mode, e.bias, e.frac_bits, e.word_frac_bits, e.inf_word, e.sign_bit, e.nan_word, e.word_mask)


@_inline
def _rz_enc(e):
    """The ``ENC`` record ``e`` as an :data:`EncodingSpec` whose rounding mode (RZ) and word
    fraction width (the fraction width itself) are constants: ``_pack(..., _rz_enc(e))`` of
    a finite value without negative zero (``nan``, ``inf``, ``zero_neg`` literal False) folds
    away the RNE and relayout steps of :func:`_pack` (the RZ encoder of the lean kernels)."""
    frac = e.frac_bits
    return EncodingSpec(np.int64(MODE_RZ), e.bias, frac, frac, e.inf_word, e.sign_bit, e.nan_word, e.word_mask)


@_inline
def _pack_int(total, enc):
    if enc.mode == MODE_SAT:
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
def _element_product(wa, wb, ra, rb, k, fp, TAB):
    """The product of ``wa[ra, k]`` and ``wb[rb, k]`` (decode specs ``fp.a`` / ``fp.b``):
    ``(cls, sign, m, q, r)``, special.product's class, the exact significand product ``m``
    (0 unless finite) at the exponent ``q`` of its last bit, and the sum ``r`` of the raws."""
    ac, asg, am, aq, ar = _decode(np.int64(wa[ra, k]), fp.a, TAB)
    bc, bsg, bm, bq, br = _decode(np.int64(wb[rb, k]), fp.b, TAB)
    cls = _product_class(ac == NAN or bc == NAN, ac == INF or bc == INF, ac == ZERO or bc == ZERO)
    return cls, asg ^ bsg, am * bm if cls == FINITE else np.int64(0), aq + bq, ar + br


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
    nan, pinf, ninf = s
    nan = nan or (pinf and ninf)
    return nan, (pinf or ninf) and not nan, ninf and not pinf


NO_SPECIAL = (False, False, False)


# ---------------------------------------------------------------- row kernels
#: rows of the int64 work array of a step function (products, groups), each step + 1 long
WORK_ROWS = 9


def row_steps(step_fn):
    """The steps of one row with ``step_fn`` (see :func:`row_kernel`), inlined where it is used:
    ``steps(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, K, step, block, fp, fp2, fp3, TAB,
    R, enc, W) -> (word, bad)``: the operand rows of row ``d``, C decoded (``fp2``), then per
    hardware step D of the step, decoded again (``fp3``) as the next step's C, until a step is
    ``bad``.  The CPU kernels (:func:`row_kernel`) and the per-row bodies of
    :mod:`mmasim.backends.cuda.rows` (step functions that read no work array, given ``W`` None)
    both run it."""

    def steps(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, K, step, block, fp, fp2, fp3, TAB, R, enc, W):
        ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
        c = _decode(np.int64(wc[rc]), fp2, TAB)
        word = np.int64(0)
        bad = False
        for s0 in range(0, K, step):
            word, bad = step_fn(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R, enc, W)
            if bad:
                break
            if s0 + step < K:
                c = _decode(word & enc.word_mask, fp3, TAB)
        return word, bad

    steps.__qualname__ = steps.__name__ = step_fn.py_func.__name__ + "_steps"
    return _inline_rows(steps)


def row_kernel(step_fn, name):
    """The kernel of a fixed-point family from its step function, one row at a time
    (:func:`row_steps`): decode C, then per hardware step ``word, bad = step_fn(...)`` (D of
    the step; ``bad``: a sum the reference refuses, the row is flagged), D decoded again as
    the C of the next step (docs/datapaths.md §1).  ``step_fn(wa, wb, sa, sb, ra, rb, rsa,
    rsb, s0, step, block, c, fp, TAB, R, enc, W)``: ``c`` the decoded C, ``fp`` the A, B and
    scale decode specs (:data:`StepFormats`), ``enc`` the ``ENC`` record, ``W`` an int64 work
    array (``WORK_ROWS`` x ``step + 1``)."""
    steps = row_steps(step_fn)

    def kernel(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block, out, flags):
        n = out.shape[0]
        K = wa.shape[1]
        R = RA[0]
        enc = ENC[0]
        fp = StepFormats(_fmt(FM, A_FMT), _fmt(FM, B_FMT), _fmt(FM, SCALE_FMT))
        fp2, fp3 = _fmt(FM, C_FMT), _fmt(FM, D_FMT)
        W = np.zeros((WORK_ROWS, step + 1), np.int64)
        nflag = 0
        for d in range(n):
            flags[d] = False
            word, bad = steps(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, K, step, block, fp, fp2, fp3, TAB,
                              R, enc, W)
            if bad:
                flags[d] = True
                nflag += 1
                continue
            out[d] = word
        return nflag

    kernel.__qualname__ = kernel.__name__ = name
    return _jit(kernel)
