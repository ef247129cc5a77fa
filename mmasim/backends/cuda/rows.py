"""Per-row scalar bodies of the window (docs/datapaths.md §3), target-neutral, and their CPU driver.

A body computes the D word of one dot product from the operand arrays and holds nothing
but scalars: no work array (a CUDA thread keeps them in registers).  Where the CPU kernels
(:func:`mmasim.backends.numba.window.window_kernel`) keep each step's products in a work
array, the body makes two passes over them and forms each product again (decode and
multiply) in the second: pass one finds the window, pass two truncates at its quantum and
sums.  Every rule is the CPU kernels' own (:mod:`mmasim.backends.numba.window`,
:mod:`mmasim.backends.numba.primitives`), compiled by numba for the CPU and by numba-cuda
for CUDA (:mod:`.target`) from this one source.

The window body takes the datapaths of :func:`mmasim.backends.fastpaths.one_product_window`
(one product per group, none of the group rules: every window datapath from Volta to Hopper,
the block-scaled ones with one product per group), every word, inf and NaN included; no row
is refused (without group sums there is no sum the reference refuses).
"""

from __future__ import annotations

import numba
import numpy as np

from mmasim.backends import fastpaths
from mmasim.backends.numba import kernels
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
    StepFormats,
    _decode,
    _element_product,
    _fmt,
    _inline,
    _note_special,
    _pack,
    _product_class,
    _rows,
    _special_result,
    _trunc,
)
from mmasim.backends.numba.window import _d_or_c, _window_params, _window_quantum


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
def _window_row_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R, enc):
    """The D word of one hardware step of one row: the window with one product per group
    (``window_step`` of the CPU kernels with ``group`` 1), in two passes over the products."""
    ccls, csg, cm, cq, cr = c
    scaled = R.scaled == 1
    sp = NO_SPECIAL
    max_r = np.int64(NEG)
    max_sr = np.int64(NEG)
    any_live = False
    dead = False
    for kk in range(s0, s0 + step):      # pass one: the specials and the window
        cls, sg, m, q, r, sr = _product(wa, wb, sa, sb, ra, rb, rsa, rsb, kk, block, scaled, fp, TAB)
        sp = _note_special(cls, sg == 1, sp)
        if cls == FINITE:
            any_live = True
            max_r = max(max_r, r)
            if scaled:
                max_sr = max(max_sr, sr)     # the blocks holding a nonzero product
        else:
            dead = True
    nan, inf, inf_neg = _special_result(_note_special(ccls, csg == 1, sp))
    c_live = ccls == FINITE
    c_mag = cm if c_live else np.int64(0)
    c_neg = csg == 1
    quantum, _ = _window_quantum(max_r, any_live, dead, c_live, cr, max_sr, R)
    total = _trunc(c_neg, c_mag, cq, quantum)
    for kk in range(s0, s0 + step):      # pass two: every product truncated at the quantum
        cls, sg, m, q, r, sr = _product(wa, wb, sa, sb, ra, rb, rsa, rsb, kk, block, scaled, fp, TAB)
        total += _trunc(sg == 1, m, q, quantum)     # m is 0 unless the product is finite
    oneg, omag, e0 = _d_or_c(total, quantum, R.excl == 1, any_live, c_neg, c_mag, cq)
    return _pack(oneg, omag, e0, nan, inf, inf_neg, False, enc)


@_inline
def window_row(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block):
    """The D word of row ``d`` (the arrays of :class:`mmasim.backends.numba.kernels.Kernel`):
    C decoded, then per hardware step its D, decoded again as the next step's C (the
    chaining of :func:`~mmasim.backends.numba.primitives.row_kernel`)."""
    ra, rb, rc, rsa, rsb = _rows(d, ncols, ia, ib, ic, isa, isb)
    R = _window_params(RA[0])
    enc = ENC[0]
    fp = StepFormats(_fmt(FM, A_FMT), _fmt(FM, B_FMT), _fmt(FM, SCALE_FMT))
    fp3 = _fmt(FM, D_FMT)
    c = _decode(np.int64(wc[rc]), _fmt(FM, C_FMT), TAB)
    K = wa.shape[1]
    word = np.int64(0)
    for s0 in range(0, K, step):
        word = _window_row_step(wa, wb, sa, sb, ra, rb, rsa, rsb, s0, step, block, c, fp, TAB, R, enc)
        if s0 + step < K:
            c = _decode(word & enc.word_mask, fp3, TAB)
    return word


#: per family this module covers: its per-row body, the decision of the plans the body takes,
#: and the builder of the family's CPU kernel (whose arrays the body reads)
BODIES = {"window": (window_row, fastpaths.one_product_window, kernels._window)}


def cpu_driver(body):
    """The CPU driver of ``body``: a compiled loop over the rows, ``out[d] = body(d, ...)``."""

    def rows_cpu(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block, out):
        for d in range(out.shape[0]):
            out[d] = body(d, wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols, TAB, FM, RA, ENC, step, block)

    return numba.njit(rows_cpu)


_NO_INDEX = np.zeros(0, np.int64)


def dense_args(plan, a, b, c, scale_a=None, scale_b=None) -> tuple:
    """The operand arguments of a driver for dense rows (row ``d`` of each operand is row ``d``
    of the batch): ``(wa, wb, wc, sa, sb, ia, ib, ic, isa, isb, ncols)``, the words in the plan's
    containers (:attr:`~mmasim.backends.plan.Plan.word_dtypes`; unscaled: one-element scales)."""
    dt = plan.word_dtypes
    asc = np.ascontiguousarray
    ops = [asc(a, dt[0]), asc(b, dt[1]), asc(c, dt[2])]
    if plan.scaled:
        ops += [asc(scale_a, dt[3]), asc(scale_b, dt[4])]
    else:
        ops += [np.zeros((1, 1), dt[0])] * 2
    return (*ops, *[_NO_INDEX] * 5, 0)


def body_for(plan):
    """``(body, arrays)`` of ``plan``: its family's per-row body and the arrays it reads besides
    the operands, ``(TAB, FM, RA, ENC, step, block)`` as the CPU kernel of the plan reads them;
    ``None`` where no body takes the plan."""
    entry = BODIES.get(plan.datapath.accumulator)
    if entry is None or not entry[1](plan):
        return None
    body, _, build = entry
    kern = build(plan)       # the CPU kernel: its decode specs, parameter record and encoding
    if kern is None:
        return None
    return body, (kern.TAB, kern.FM, kern.R, kern.ENC, np.int64(kern.step), np.int64(kern.block))
