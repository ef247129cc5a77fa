"""The compiled backend's kernels, bound to one plan: decode specs, parameter records, builders.

Each kernel is the scalar transcription of its numpy reference in :mod:`mmasim.accumulators`,
fused per dot product: decode, products, accumulate, encode the D word and decode it again as
the next step's C.  Fixed-point families use exact int64 arithmetic only; the IEEE families
use binary32 / binary64 operations without fast-math and ``llvm.fma``.  The rules are written
with :mod:`.primitives`, :mod:`.window`, :mod:`.tiles` and :mod:`.families`; nothing here
knows an architecture (the arrays a kernel reads are on :class:`Kernel`).  Which kernel a
plan takes and the bound proofs are its family's module of :mod:`mmasim.backends.fastpaths`
(the word tables :mod:`mmasim.backends.fastpaths.shared`); the builders lay the tables out as
the kernels read them.  Rows a kernel cannot compute exactly
in int64 are flagged, and the backend recomputes them with the numpy reference, so the result
(or the error) is the reference's.
"""

from __future__ import annotations

import functools
from collections import namedtuple

import numpy as np

from mmasim.arith.decode import decode_float, decode_int
from mmasim.backends import fastpaths
from mmasim.backends.fastpaths.shared import TileLayout, packed_bound, word_tables
from mmasim.backends.numba.families import (
    exact_sum_kernel,
    fma_f32_kernel,
    fma_f64_kernel,
    ftz_mul_add_kernel,
    group_scaled_joint_variant,
    group_scaled_kernel,
    integer_kernel,
    integer_xor_kernel,
    mul_add_f32_kernel,
    mul_add_f64_kernel,
    two_stage_kernel,
)
from mmasim.backends.numba.primitives import (
    _MODES,
    _NAN_CODES,
    A_FMT,
    B_FMT,
    C_FMT,
    D_FMT,
    FINITE,
    INF,
    EncodingSpec,
    FormatSpec,
    _is_f32,
)
from mmasim.backends.numba.tiles import NEG_F, RBIAS, TCODE, LaneFormat, _c_kind, lean_variant
from mmasim.backends.numba.window import (
    GDEAD,
    LT_P,
    LT_Q,
    LT_SM,
    LT_SPECIAL,
    LT_SQ,
    LT_SR,
    WindowRecord,
    grouped_variant,
    window_kernel,
)

# --------------------------------------------------------- parameter records
#: group_scaled_window: F, group, e_zero, ceil(log2(group)); for the joint kernel the shift of
#: an A word in the joint table's index (``bshift``) and the sum of the A and B formats'
#: smallest q (``q0``).
GroupScaledRecord = namedtuple("GroupScaledRecord", "F group ezero clog_g bshift q0")
#: two_stage_window: F, F2, even_odd, drop_c, the product overflow, the raw of a non-finite C.
TwoStageRecord = namedtuple("TwoStageRecord", "F F2 even_odd drop_c has_ovf ovf has_nf nfcr")
#: ftz_mul_add: products per partial sum.
FtzRecord = namedtuple("FtzRecord", "P")
#: the families without parameters
NoRecord = namedtuple("NoRecord", "none")
NO_RECORD = NoRecord(0)


def _records(recs):
    """The int64 records ``recs`` (namedtuples of one type) as a structured array, a field per name."""
    return np.array([tuple(int(x) for x in r) for r in recs], dtype=[(f, np.int64) for f in recs[0]._fields])


def encoding_record(enc):
    """Encoding ``enc`` (:class:`mmasim.arith.encode.Encoding`) as a kernel's ``ENC``: an
    :data:`EncodingSpec` as a one-element structured array."""
    return _records([EncodingSpec(
        mode=_MODES[enc.mode], bias=enc.bias, frac_bits=enc.frac_bits, word_frac_bits=enc.word_frac_bits,
        inf_word=enc.inf_word, sign_bit=enc.sign_bit if enc.sign_bit < (1 << 63) else enc.sign_bit - (1 << 64),
        nan_word=enc.nan_word, word_mask=(1 << enc.word_bits) - 1 if enc.word_bits < 64 else -1)])


def _spec_of(FM, f):
    """Record ``f`` of ``FM`` as a :data:`FormatSpec` of Python ints."""
    return FormatSpec(*FM[f].item())


# ------------------------------------------------------------ python side
class Kernel:
    """A compiled kernel bound to one datapath's formats, parameters and encoding.

    Nothing here knows an architecture: every kernel is driven by arrays built
    from the plan's formats and encoding, and by a named record of the family's
    parameters:

    ``FM``  five :data:`FormatSpec` records (``A_FMT`` .. ``SCALE_FMT``)
        decode spec of the A, B, C, D and scale formats: a slice of ``TAB`` (a
        decode table built by the registered decoder over every container word,
        for containers of at most 16 bits, so plugin decoders are honoured), or
        the parameters of the generic float / int decoders for wider containers.
    ``TAB`` (n, 5) int64
        decoded ``cls, sign, m, q, r`` of every word of the tabled formats.
    ``RA``  the family's parameter record (:class:`WindowRecord`, :class:`TwoStageRecord`, ...)
        as a one-element structured array; a kernel reads ``R = RA[0]`` and its fields by name.
    ``ENC`` the output encoding, an :data:`EncodingSpec` as a one-element structured array
        (``enc = ENC[0]``).
    """

    def __init__(self, plan, fn, R, out_kind="word", words=None):
        self.fn = fn
        # the dtype of every word array the kernel reads (None: the plan's containers); a
        # kernel whose speed the copy does not matter to reads int64 words whatever the
        # formats, so that it is compiled once (one signature), not once per container width
        self.word_dtypes = None if words is None else (np.dtype(words),) * len(plan.word_dtypes)
        self.family = plan.datapath.accumulator
        self.record = R                     # the family's parameter record
        # kernels read it as a one-element structured array (fields by name; an array
        # argument costs numba's dispatcher far less than a tuple of many fields)
        self.R = _records([R])
        self.out_kind = out_kind            # "word", or "f32"/"f64": float values to be packed
        self.encoding = plan.encoding
        self.step = plan.step
        self.FM, self.TAB = _format_specs(plan)
        self.ENC = encoding_record(plan.encoding)
        self.block = int(plan.datapath.block or 1)
        self.scaled = plan.scaled
        self.extra = ()                     # further arrays of the kernel (the lean window's tables)

    def __call__(self, args, n):
        """``(D words, flags or None)`` of ``n`` rows; ``args``: see :func:`mmasim.backends.numba.kernel_args`."""
        if self.out_kind == "f64":
            vals = np.empty(n, dtype=np.float64)
        elif self.out_kind == "f32":
            vals = np.empty(n, dtype=np.float32)
        else:   # the words of D (int64 for a kernel of int64 words: one signature)
            vals = np.empty(n, dtype=self.encoding.dtype if self.word_dtypes is None else np.int64)
        flags = np.empty(n, dtype=np.bool_)
        nflag = self.fn(*args, self.TAB, self.FM, self.R, self.ENC, self.step, self.block, vals, flags, *self.extra)
        if self.out_kind != "word":
            word = np.uint64 if self.out_kind == "f64" else np.uint32
            words = vals.view(word if self.out_kind == "f64" else np.uint32)
            words = np.where(np.isnan(vals), word(self.encoding.nan_word), words).astype(self.encoding.dtype)
            vals = words
        elif vals.dtype != self.encoding.dtype:
            vals = vals.astype(self.encoding.dtype)
        return vals, (flags if nflag else None)


class LeanWindowKernel(Kernel):
    """The lean kernels (window, group-scaled window): rows with an inf / NaN (``spec``) are
    then computed by the family's general kernel (``general``: :func:`window_kernel` unless
    told), rows it flags by the numpy reference."""

    def __init__(self, plan, fn, R, general=window_kernel):
        super().__init__(plan, fn, R)
        self.general = general

    def __call__(self, args, n):
        wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols = args
        step = self.step
        vals = np.empty(n, dtype=self.encoding.dtype)
        flags = np.empty(n, dtype=np.bool_)
        spec = np.empty(n, dtype=np.bool_)
        nflag, nspec = self.fn(*args, self.TAB, self.FM, self.R, self.ENC, step, self.block, vals, flags,
                               *self.extra, spec)
        if nspec:
            # the rows with a special value, gathered as int64 words and computed into
            # int64 words: the general kernel then compiles one signature for every lean
            # kernel, whatever their formats (A and B of the other rows stay in their own dtype)
            d = np.flatnonzero(spec)
            if ncols > 0:
                i = d // ncols
                j = d - i * ncols
                rows = (i, j, d, i, j)
            else:
                rows = tuple(x[d] if x.shape[0] else d for x in (ia, ib, ic, isa, isb))
            ops = (wa, wb, wc) + ((sa, sb) if self.scaled else ())
            sub_ops = [np.ascontiguousarray(w[r], dtype=np.int64) for w, r in zip(ops, rows)]
            if not self.scaled:
                sub_ops += [_NO_SCALE, _NO_SCALE]
            sub, subf = np.empty(len(d), dtype=np.int64), np.empty(len(d), dtype=np.bool_)
            ni = _NO_INDEX
            nflag += self.general(*sub_ops, ni, ni, ni, ni, ni, 0, self.TAB, self.FM, self.R, self.ENC, step,
                                  self.block, sub, subf)
            vals[d] = sub
            flags[d] = subf
        return vals, (flags if nflag else None)


_EMPTY_TAB = np.zeros(1, dtype=np.int64)
_NO_INDEX = np.zeros(0, dtype=np.int64)
_NO_SCALE = np.zeros((1, 1), dtype=np.int64)


#: the tile kernels' layout constants, as the proofs of :mod:`mmasim.backends.fastpaths` read them
LAYOUT = TileLayout(tcode=TCODE, rbias=RBIAS, neg_f=NEG_F, dead=GDEAD)


@functools.lru_cache(maxsize=None)
def _packed_table(fmt, decoder):
    """Every word of ``fmt`` decoded and packed into one int64:
    cls | sign << 2 | m << 3 | (q + 2**15) << 23 | (r + 2**15) << 39; ``None`` unless
    :func:`~mmasim.backends.fastpaths.shared.packed_bound` holds.  Built once per format and decoder."""
    if not packed_bound(fmt, decoder):
        return None
    cls, sign, m, q, r = word_tables(fmt, decoder)
    return cls | (sign << 2) | (m << 3) | ((q + (1 << 15)) << 23) | ((r + (1 << 15)) << 39)


@functools.lru_cache(maxsize=None)
def _lane_spec(fmt, decoder):
    """Lane decode of an A / B format: ``(LaneFormat, table or None)``, or ``None``
    where :func:`~mmasim.backends.fastpaths.window.lane_format` refuses it.

    Tabled (``mode`` 0): a table built by the registered decoder over every word, each entry
    the bits of the word's exact binary64 value (NaN for an inf / NaN) with r + RBIAS in its
    low TCODE bits.  Arithmetic (``mode`` 1): the fields of the IEEE format."""
    lane = fastpaths.window.lane_format(fmt, decoder, LAYOUT)
    if not lane:
        return None
    if lane.lane.mode == 1:
        E, M = fmt.exp_bits, fmt.man_bits
        return (LaneFormat(mode=1, off=0, fs=fmt.field_shift, fmask=(1 << fmt.field_bits) - 1,
                           magmask=(1 << (E + M)) - 1, M=M, dshift=52 - M, sbit=E + M, emask=(1 << E) - 1,
                           ro=fmt.bias, P=2.0 ** (1023 - fmt.bias)), None)
    cls, sign, m, q, r = word_tables(fmt, decoder)
    fin = cls == FINITE
    val = np.where(fin, np.where(sign == 1, -m, m) * np.exp2(np.where(fin, q, 0).astype(np.float64)), 0.0)
    val = np.where(cls >= INF, np.nan, val)
    tab = val.view(np.int64) | np.where(fin, r + RBIAS, 0)
    return LaneFormat(mode=0, off=0, fs=0, fmask=0, magmask=0, M=0, dshift=0, sbit=0, emask=0, ro=RBIAS, P=1.0), tab


_LANE_DTYPE = [(f, np.float64 if f == "P" else np.int64) for f in LaneFormat._fields]


def _lane_specs(plan):
    """``(LV, LA, exponent code offset of a product)`` of the lane decode of A and B
    (``LA``: their :data:`LaneFormat` records), or ``None``."""
    rows, tabs, hoff, off = [], [], 0, 0
    for i, fmt in enumerate((plan.a_format, plan.b_format)):
        spec = _lane_spec(fmt, plan.decoder(fmt))
        if spec is None:
            return None
        row, tab = spec
        if tab is not None and i == 1 and plan.b_format == plan.a_format and rows[0].mode == 0:
            row = row._replace(off=rows[0].off)     # B shares A's table
        elif tab is not None:
            row = row._replace(off=off)     # this plan's table offset
            tabs.append(tab)
            off += len(tab)
        rows.append(row)
        hoff += row.ro
    LV = np.ascontiguousarray(np.concatenate(tabs)) if tabs else np.zeros(1, np.int64)
    return LV, np.array(rows, dtype=_LANE_DTYPE), hoff


_NO_FORMAT = FormatSpec(*[0] * len(FormatSpec._fields))    # a format the datapath does not have


def format_spec(fmt, decoder):
    """``(FormatSpec, table or None)`` of ``fmt`` read by ``decoder`` (the table's offset 0), or
    ``None`` if it cannot be compiled: small containers (and plugin decoders of up to 16 bits)
    a packed table built by the registered decoder; wider built-in formats decoded
    arithmetically (a 64K-entry table misses the cache on random words)."""
    builtin = decoder is decode_float or decoder is decode_int
    small = fmt.container_bits <= 8 or (fmt.container_bits <= 16 and not builtin)
    tab = _packed_table(fmt, decoder) if small else None
    if tab is not None:
        return _NO_FORMAT._replace(tab_len=len(tab)), tab
    if not builtin or (decoder is decode_float and fmt.exp_bits + fmt.man_bits >= 63 and fmt.nan != "ieee") \
            or (decoder is decode_int and fmt.field_bits >= 64):
        return None
    return FormatSpec(tab_off=0, tab_len=0, integer=int(decoder is decode_int), field_shift=fmt.field_shift,
                      field_bits=fmt.field_bits, exp_bits=fmt.exp_bits, man_bits=fmt.man_bits, bias=fmt.bias,
                      signed=int(fmt.signed), nan_rule=_NAN_CODES[fmt.nan], subnormals=int(fmt.subnormals)), None


def _format_specs(plan):
    """(FM, TAB) for the A, B, C, D and scale formats of ``plan`` (``FM``: a :data:`FormatSpec`
    record each, rows ``A_FMT`` .. ``SCALE_FMT``); None if one cannot be compiled."""
    return format_records([plan.a_format, plan.b_format, plan.c_format, plan.d_format, plan.scale_format],
                          plan.decoder)


def placed_specs(fmts, decoder_of):
    """``(specs, tables)``: the :data:`FormatSpec` of each of ``fmts`` (``None``: no format) by
    :func:`format_spec`, ``decoder_of(fmt)`` its registered decode function, each table's offset
    (``tab_off``) its place in the concatenation of ``tables``; ``None`` if one cannot be compiled."""
    rows, tabs, off = [], [], 0
    for fmt in fmts:
        row = _NO_FORMAT
        if fmt is not None:
            spec = format_spec(fmt, decoder_of(fmt))
            if spec is None:
                return None
            row, tab = spec
            if tab is not None:
                row = row._replace(tab_off=off)
                tabs.append(tab)
                off += len(tab)
        rows.append(row)
    return rows, tabs


def format_records(fmts, decoder_of):
    """(FM, TAB) of the formats ``fmts`` (a :data:`FormatSpec` record each, in order; ``None``:
    no format), ``decoder_of(fmt)`` the registered decode function; None if one cannot be compiled."""
    placed = placed_specs(fmts, decoder_of)
    if placed is None:
        return None, None
    rows, tabs = placed
    TAB = np.ascontiguousarray(np.concatenate(tabs)) if tabs else _EMPTY_TAB
    return _records(rows), TAB


def _clog2(g: int) -> int:
    return int(np.ceil(np.log2(g))) if g > 1 else 0


def _make(plan, fn, R, out_kind="word", words=None):
    k = Kernel(plan, fn, R, out_kind, words)
    return None if k.FM is None else k


def _grouped_table(plan, joint):
    """The tables of the grouped window kernel (``grouped_variant``), rows ``LT_P`` .. ``LT_SPECIAL``:
    the joint A x B table (a :class:`~mmasim.backends.fastpaths.shared.JointTable`), then per scale word
    (built by the registered decoder) the signed significand (0 for a zero or inf / NaN), q, r,
    and 1 for inf / NaN."""
    fmt = plan.scale_format
    cls, sign, m, q, r = word_tables(fmt, plan.decoder(fmt))
    fin = cls == FINITE
    N = max(len(joint.P), len(cls))
    T = np.zeros((6, N), dtype=np.int64)
    T[LT_P, :len(joint.P)] = joint.P
    T[LT_Q, :len(joint.Q)] = joint.Q
    T[LT_SM, :len(cls)] = np.where(fin, np.where(sign == 1, -m, m), 0)
    T[LT_SQ, :len(cls)] = q
    T[LT_SR, :len(cls)] = r
    T[LT_SPECIAL, :len(cls)] = cls >= INF
    return np.ascontiguousarray(T)


def _rz(plan) -> bool:
    """Whether D is encoded toward zero into the word's own fraction width (the RZ variants)."""
    return plan.encoding.mode == "rz" and plan.encoding.frac_bits == plan.encoding.word_frac_bits


def _joint_kernel(plan, base, variant, R, joint, **kw):
    """A lean kernel on the joint A x B table ``joint``: ``variant(f32, rz)`` (C and D in
    binary32 or not, the RZ encoder or not), its record ``R`` with the table's ``bshift`` and
    ``q0``, the tables of :func:`_grouped_table`; ``base`` (the family's general kernel) gives
    the formats, ``kw`` go to :class:`LeanWindowKernel` (``general``: its rows with an inf / NaN)."""
    f32 = all(_is_f32(_spec_of(base.FM, f)) for f in (C_FMT, D_FMT))
    k = LeanWindowKernel(plan, variant(f32, _rz(plan)), R._replace(bshift=joint.bshift, q0=joint.q0), **kw)
    k.extra = (_grouped_table(plan, joint),)
    return k


def _window(plan):
    """The window's kernel: the grouped kernel, the tile kernel or the general kernel, as
    :mod:`mmasim.backends.fastpaths` decides (:func:`~mmasim.backends.fastpaths.window.grouped_tiles`,
    :func:`~mmasim.backends.fastpaths.window.lane_tiles`, :func:`~mmasim.backends.fastpaths.window.numba_window`)."""
    if not fastpaths.window.numba_window(plan):
        return None
    p = dict(plan.parameters)
    zeros = p.get("zeros", "excluded")
    group = int(p.get("group", 1))
    scaled = plan.datapath.scale is not None
    cd = p.get("c_dominant")
    R = WindowRecord(
        F=int(p["F"]), excl=1 if zeros == "excluded" else 0, ezero=0 if zeros == "excluded" else int(zeros),
        group=group, has_sf=0 if p.get("scale_floor") is None else 1, sf=int(p.get("scale_floor") or 0),
        has_cd=0 if cd is None else 1, cdF=int(cd["F"]) if cd else 0, cdG=int(cd["group"]) if cd else 1,
        has_cr=0 if p.get("c_relative") is None else 1, crF=int(p.get("c_relative") or 0),
        has_sr=0 if p.get("subnormal_redo") is None else 1, srT=int(p.get("subnormal_redo") or 0),
        scaled=1 if scaled else 0, clog_g=_clog2(group), clog_cd=_clog2(int(cd["group"])) if cd else 0,
        roff=0, bshift=0, q0=0)
    general = _make(plan, window_kernel, R, words=np.int64)   # the lean kernels' special rows: int64 too
    if general is None:
        return None
    grouped = fastpaths.window.grouped_tiles(plan, LAYOUT)
    if grouped:
        return _joint_kernel(plan, general, grouped_variant, R._replace(roff=grouped.joint.roff), grouped.joint)
    ckind, dkind = (_c_kind(_spec_of(general.FM, f)) for f in (C_FMT, D_FMT))
    if not fastpaths.window.lane_tiles(plan, LAYOUT, ckind, dkind):
        return general    # other decodes, or bounds the lanes cannot prove: the general kernel
    # the tile kernel compiled for the variant (A and B decoded alike, IEEE C and D:
    # every built-in window datapath with one product per group)
    LV, LA, hoff = _lane_specs(plan)
    k = LeanWindowKernel(plan, lean_variant(scaled, ckind, dkind, int(LA["mode"][A_FMT]), _rz(plan)),
                         R._replace(roff=hoff))
    k.extra = (LV, LA)
    return k


def _integer(plan):
    if not fastpaths.integer.numba_integer(plan):
        return None
    bitop = plan.parameters.get("bitop")
    k = _make(plan, integer_xor_kernel if bitop == "xor" else integer_kernel, NO_RECORD)
    if k is not None:
        # A and B of the built-in integer decoder decoded arithmetically (integer_step's
        # vectorized loop), not through their tables
        for i, fmt in zip((A_FMT, B_FMT), (plan.a_format, plan.b_format)):
            if plan.decoder(fmt) is decode_int and fmt.field_bits < 64:
                k.FM[i] = _NO_FORMAT._replace(integer=1, field_shift=fmt.field_shift, field_bits=fmt.field_bits,
                                              signed=int(fmt.signed))
    return k


def _group_scaled(plan):
    """The group-scaled window's kernel: the joint kernel where
    :func:`~mmasim.backends.fastpaths.group_scaled.group_scaled_joint` takes the plan (its rows with an
    inf / NaN: the general kernel), else the general :data:`group_scaled_kernel`."""
    if not fastpaths.group_scaled.numba_group_scaled(plan):
        return None
    p = plan.parameters
    R = GroupScaledRecord(F=int(p["F"]), group=int(p["group"]), ezero=int(p["zeros"]), clog_g=_clog2(int(p["group"])),
                          bshift=0, q0=0)
    general = _make(plan, group_scaled_kernel, R, words=np.int64)   # the joint kernel's special rows: int64 too
    joint = fastpaths.group_scaled.group_scaled_joint(plan, LAYOUT)
    if general is None or not joint:
        return general
    return _joint_kernel(plan, general, group_scaled_joint_variant, R, joint.joint, general=group_scaled_kernel)


def _two_stage(plan):
    if not fastpaths.two_stage.numba_two_stage(plan):
        return None
    p = plan.parameters
    R = TwoStageRecord(int(p["F"]), int(p["F2"]), 1 if p.get("even_odd") else 0, 1 if p.get("drop_c") else 0,
                       0 if p.get("overflow") is None else 1, int(p.get("overflow") or 0),
                       0 if p.get("nonfinite_c_r") is None else 1, int(p.get("nonfinite_c_r") or 0))
    return _make(plan, two_stage_kernel, R, words=np.int64)


def _exact_sum(plan):
    if not fastpaths.exact_sum.numba_exact_sum(plan):
        return None
    return _make(plan, exact_sum_kernel, NO_RECORD)


def _fma_family(plan):
    if not fastpaths.ieee_chains.numba_fma(plan):
        return None
    if plan.encoding.format == "f64":
        return _make(plan, fma_f64_kernel, NO_RECORD, "f64")
    return _make(plan, fma_f32_kernel, NO_RECORD, "f32")


def _mul_add(plan):
    if not fastpaths.ieee_chains.numba_mul_add(plan):
        return None
    f64 = plan.encoding.format == "f64"
    return _make(plan, mul_add_f64_kernel if f64 else mul_add_f32_kernel, NO_RECORD, plan.encoding.format,
                 words=np.int64)


def _ftz(plan):
    if not fastpaths.ieee_chains.numba_ftz(plan):
        return None
    return _make(plan, ftz_mul_add_kernel, FtzRecord(int(plan.parameters["P"])), "f32")
