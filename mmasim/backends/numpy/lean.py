"""The numpy backend's lean path: the common window datapaths computed in fewer passes.

Gives :class:`LeanWindow` (the truncating window, one product per group, scaled or not) and
:class:`LeanGrouped` (the grouped block-scaled window of the B200 FP4 rules); each says
``ok = False`` where it does not apply, and the reference computes.  Which plans each takes,
the word tables and the int64 bound proofs are the window family's fast-path module's
(:func:`~mmasim.backends.fastpaths.window.lean_window`, :func:`~mmasim.backends.fastpaths.window.lean_grouped`).
Owns only the layout of the work: words decoded through those tables, zero and inf / NaN
folded into ``q``, column-wise reductions, exact int64 throughout.  The rules of arithmetic
are the reference's, called, not restated; rows with an inf or NaN go to the reference
accumulator.  docs/architecture.md, "Which module owns which rule", lists what is called.
"""

from __future__ import annotations

import weakref

import numpy as np

from mmasim.accumulators.window import (
    c_relative_terms,
    d_or_c,
    subnormal_redo,
    window_exponent,
    window_quantum,
    window_total,
)
from mmasim.arith.codes import GROUP_DEAD, NEG_INF_EXP
from mmasim.arith.decode import FINITE, INF, ZERO
from mmasim.arith.intmath import truncate_signed
from mmasim.arith.special import product
from mmasim.backends.fastpaths.window import lean_format, lean_grouped, lean_window
from mmasim.backends.numpy.reference import reference

LZQ = -(1 << 30)     # q of a zero element
LSQ = 1 << 36        # q of an inf / NaN element
LZT = -(1 << 29)     # a product q below this has a zero factor
LST = 1 << 35        # a product q at or above this has an inf / NaN factor


class _Decode:
    """The lean decode of one format, through tables of the registered decoder's
    outputs: over every container word (containers of up to 16 bits; A / B only),
    or over the container bits above the fraction field (wide formats of
    :func:`~mmasim.arith.decode.decode_float`: tf32, f32; the fraction field is added to
    the code's significand).  ``ok`` is False where neither applies."""

    def __init__(self, fmt, decoder, whole=True):
        self.fmt = fmt
        decision = lean_format(fmt, decoder, whole)
        self.ok = decision.ok
        if not decision:
            return
        lean = decision.lean
        cls, sign, m, q, r = lean.tables
        self.shift, self.low = lean.shift, lean.low
        fin = cls == FINITE if self.shift is None else cls < INF    # a zero code holds subnormals
        special = cls >= INF
        if self.shift is None:
            # (signed m, q) per word: q LZQ for a zero, LSQ for an inf / NaN
            self.tab = (np.where(fin, np.where(sign == 1, -m, m), 0), np.where(fin, q, np.where(cls == ZERO, LZQ, LSQ)))
        else:
            # per code: the significand without the fraction (1 for an inf / NaN: not
            # zero, so its q stays LSQ), the sign as +-1 and as 0 / 1, q, r, inf / NaN
            self.m = np.where(special, 1, m)
            self.pm = 1 - 2 * sign
            self.sign, self.q, self.r, self.special = sign, q, r, special
            self.q_ab = np.where(special, LSQ, q)

    def __call__(self, words):
        """(signed m, q) of A / B container words: q LZQ for a zero, LSQ for an inf / NaN."""
        if self.shift is None:
            idx = words.view(np.int64) if words.dtype == np.uint64 else words.astype(np.intp)
            return self.tab[0].take(idx), self.tab[1].take(idx)
        x, code = self._split(words)
        x *= self.pm.take(code)
        q = self.q_ab.take(code)
        q[x == 0] = LZQ
        return x, q

    def c_terms(self, words):
        """``(special, live, sign, m, q, r)`` of C / D container words."""
        x, code = self._split(words)
        special = self.special.take(code)
        return special, (x != 0) & ~special, self.sign.take(code), x, self.q.take(code), self.r.take(code)

    def _split(self, words):
        """(significand, code) of container words: the fraction field plus the code's significand."""
        x = words.astype(np.int64)
        code = x >> self.shift
        x >>= self.fmt.field_shift
        x &= self.low
        x += self.m.take(code)
        return x, code


class LeanWindow:
    """The lean numpy window of one plan, or ``ok = False`` where it does not apply.

    The truncating window (:func:`mmasim.accumulators.window.window`) with one product per
    group (``group`` 1, no ``c_dominant``, ``c_relative`` or ``subnormal_redo``), scaled or not,
    on container words, where :func:`mmasim.backends.fastpaths.window.lean_window` takes the plan:
    every A / B word is decoded through tables built by the registered decoder (:class:`_Decode`) into a signed significand and the exponent ``q`` of its last bit,
    the classes folded into ``q`` (a zero far below any window, an inf / NaN far above), one
    signed product array per step, reduced column by column.  Rows with an inf or NaN anywhere
    (or a step that overflowed into inf) are computed by the reference accumulator itself.
    Scale products are :func:`mmasim.arith.special.product`, the window's rules the functions
    of :mod:`mmasim.accumulators.window`, D words :meth:`mmasim.arith.encode.Encoding.pack`'s;
    ``tests/test_speed_paths.py`` compares this path with the reference accumulator on every
    datapath it covers."""

    def __init__(self, plan):
        decision = lean_window(plan)
        self.ok = decision.ok
        if not decision:
            return
        p = plan.parameters
        self.ta = _Decode(plan.a_format, plan.decoder(plan.a_format))
        self.tb = _Decode(plan.b_format, plan.decoder(plan.b_format))
        self.F = int(p["F"])
        self.zeros = p.get("zeros", "excluded")
        self.excl = self.zeros == "excluded"
        self.sf = p.get("scale_floor")
        self.roff = decision.roff
        _bind_output(self, plan)

    def __call__(self, wa, wb, wc, sa, sb):
        """D words of the rows (uint64 word arrays)."""
        plan = self.plan
        dp = plan.datapath
        n, k = wa.shape
        step = plan.step
        dec = plan.decoders
        F = self.F
        special = np.zeros(n, dtype=bool)
        if sa is not None:
            fmt = plan.scale_format
            s = product(dec[fmt.key](fmt, sa), dec[fmt.key](fmt, sb))
            special |= (s.cls >= INF).any(axis=-1)
            s_m = s.signed_m()    # 0 unless finite
            s_q = np.where(s.cls == ZERO, LZQ, s.q)
            s_ro = self.roff + (s.r - s.q)
            s_r = s.r
            s_m, s_q, s_ro, s_r = (np.repeat(x, dp.block, axis=-1) for x in (s_m, s_q, s_ro, s_r))
        words = wc
        for s0 in range(0, k, step):
            cut = slice(s0, s0 + step)
            ma, qa = self.ta(wa[:, cut])
            mb, qb = self.tb(wb[:, cut])
            p = ma * mb
            q = qa + qb
            if sa is not None:
                p *= s_m[:, cut]
                q += s_q[:, cut]
                hi = _row_reduce(q + s_ro[:, cut], np.maximum)
            else:
                hi = _row_reduce(q, np.maximum) + self.roff
            c_special, c_live, c_sign, c_m, c_q, c_r = _c_terms(self, s0 == 0, words)
            special |= (hi >= LST) | c_special
            any_live = hi > LZT
            E = window_exponent(np.where(any_live, hi, NEG_INF_EXP), c_live, c_r, self.zeros,
                                dead=None if self.excl else _row_reduce(q, np.minimum) < LZT)
            # the floor counts only the blocks holding a nonzero product
            live_sr = None if self.sf is None else np.where(p != 0, s_r[:, cut], NEG_INF_EXP).max(axis=-1)
            quantum, _ = window_quantum(E, F, live_sr, self.sf)
            total = _row_reduce(truncate_signed(p < 0, np.abs(p), q, quantum[:, None]), np.add)
            c_mag = np.where(c_live, c_m, 0)
            c_neg = c_sign == 1
            total += truncate_signed(c_neg, c_mag, c_q, quantum)
            words = _pack_sum(plan.encoding, total, quantum, (any_live, c_neg, c_mag, c_q) if self.excl else None)
        if special.any():
            idx = np.flatnonzero(special)
            words[idx] = reference(plan, wa[idx], wb[idx], wc[idx],
                                                None if sa is None else sa[idx], None if sb is None else sb[idx])
        return words


def _row_reduce(x, op):
    """op-reduction of each row of a 2-D array (see :func:`_group_reduce`)."""
    return _group_reduce(x, x.shape[-1], op)


def _group_reduce(x, g, op):
    """op-reduction of consecutive groups of ``g`` elements (flattened): column by
    column for small groups (a reduction along a short last axis costs numpy a loop
    per row), numpy's reduction otherwise."""
    x2 = x.reshape(-1, g)
    if g > 8:
        return op.reduce(x2, axis=-1)
    y = x2[:, 0].copy()
    for i in range(1, g):
        op(y, x2[:, i], out=y)
    return y


class LeanGrouped:
    """The lean numpy path of the grouped block-scaled window (B200 NVFP4 / MXF4:
    ``group``, ``scale_floor``, ``c_dominant``, ``c_relative``, ``subnormal_redo``),
    or ``ok = False`` where it does not apply: one joint A x B table lookup per product, exact
    group sums of tiny integers, the group rules on group-level arrays.

    Narrow A / B formats (containers of up to 8 bits, 16 together) are decoded
    pairwise through one joint table indexed by ``(a << bits_b) | b``: the signed
    product of the two significands aligned to the formats' smallest ``q`` (a tiny
    integer) and the sum of their ``q`` (the group's largest product raw).  A group
    lies inside one scale block, so its exact sum is the sum of those integers times
    the block's scale product, at the exponent ``qmin_a + qmin_b + q_sa + q_sb``:
    the same value as the reference's ``exact_group_sums`` (whose refusal cannot
    happen here: :func:`mmasim.backends.fastpaths.window.grouped_bound`), so the truncations,
    the C-dominant sums (groups of groups, again inside one block), the C-relative
    truncation and the subnormal redo are the reference's, on group-level arrays.
    """

    DEAD = GROUP_DEAD   # joint q of a pair with a zero factor
    native_words = True   # A / B words may come in any unsigned dtype (Model._numpy_rows)

    def __init__(self, plan):
        decision = lean_grouped(plan)
        self.ok = decision.ok
        if not decision:
            return
        p = plan.parameters
        self.group = decision.group
        self.c_dominant = p.get("c_dominant")
        self.cd = decision.cd
        self.crel = p.get("c_relative")
        self.redo = p.get("subnormal_redo")
        self.sf = p.get("scale_floor")
        self.F = int(p["F"])
        joint = decision.joint
        self.P, self.Q, self.roff, self.q0, self.bshift = joint.P, joint.Q, joint.roff, joint.q0, joint.bshift
        self.step = plan.step
        _bind_output(self, plan)

    def __call__(self, wa, wb, wc, sa, sb):
        """D words of the rows (uint64 word arrays)."""
        plan = self.plan
        dp = plan.datapath
        if wa.dtype.kind != "u":
            wa = wa.astype(np.uint64)
        if wb.dtype.kind != "u":
            wb = wb.astype(np.uint64)
        n, k = wa.shape
        step, g, block, F = self.step, self.group, dp.block, self.F
        dec = plan.decoders
        fmt = plan.scale_format
        s = product(dec[fmt.key](fmt, sa), dec[fmt.key](fmt, sb))
        special = (s.cls >= INF).any(axis=-1)
        sm_all, sq_all, sr_all = s.signed_m(), s.q + self.q0, s.r    # signed m: 0 unless finite
        per = block // g
        words = wc
        for s0 in range(0, k, step):
            ng = step // g
            bcut = slice(s0 // block, (s0 + step) // block)
            ca, cb = wa[:, s0:s0 + step], wb[:, s0:s0 + step]
            if ca.dtype == np.uint64:
                idx = ca.view(np.int64) << self.bshift
            else:
                idx = ca.astype(np.intp)
                idx <<= self.bshift
            np.bitwise_or(idx, cb.view(np.int64) if cb.dtype == np.uint64 else cb, out=idx)
            pg = _group_reduce(self.P.take(idx), g, np.add).reshape(n, ng).astype(np.int64)
            qg = _group_reduce(self.Q.take(idx), g, np.maximum).reshape(n, ng)
            s_m, s_q, s_r = (np.repeat(x[:, bcut], per, axis=-1) for x in (sm_all, sq_all, sr_all))
            gs = pg * s_m
            glive = (qg > self.DEAD // 2) & (s_m != 0)
            gr = np.where(glive, qg + self.roff + s_r, NEG_INF_EXP)
            max_r = gr.max(axis=-1)
            any_live = glive.any(axis=-1)
            c_special, c_live, c_sign, c_m, c_q, c_r = _c_terms(self, s0 == 0, words)
            special |= c_special
            E = window_exponent(max_r, c_live, c_r, "excluded")
            # the largest scale raw of the blocks holding a nonzero product (the floor, the redo)
            live_sr = np.where(glive, s_r, NEG_INF_EXP).max(axis=-1)
            quantum, cdom = window_quantum(E, F, live_sr, self.sf, self.c_dominant, c_live, c_r, any_live, max_r)
            qk = quantum[:, None]
            g_neg, g_mag = gs < 0, np.abs(gs)
            contrib = truncate_signed(g_neg, g_mag, s_q, qk)
            if self.crel is not None:
                contrib = c_relative_terms(contrib, g_neg, g_mag, s_q, gr, c_live, c_r, qk, self.crel)
            c_sums = None
            if cdom is not None and self.cd[1] != g:
                # a C-dominant group: consecutive groups, inside one block (one scale)
                r = self.cd[1] // g
                c_sums = gs.reshape(n, ng // r, r).sum(axis=-1), s_q[:, ::r]
            c_mag = np.where(c_live, c_m, 0)
            c_neg = c_sign == 1
            ct = truncate_signed(c_neg, c_mag, c_q, quantum)
            total = window_total(contrib, ct, cdom, c_sums, qk)
            if self.redo is not None:
                total = subnormal_redo(total, quantum, contrib, s_r, live_sr, ct, self.redo, cdom)
            words = _pack_sum(plan.encoding, total, quantum, (any_live, c_neg, c_mag, c_q))
        if special.any():
            idx = np.flatnonzero(special)
            words[idx] = reference(plan, wa[idx].astype(np.uint64), wb[idx].astype(np.uint64),
                                                wc[idx], sa[idx], sb[idx])
        return words


def _pack_sum(encoding, total, quantum, c_when_no_product=None):
    """D words of the exact sum ``total * 2**quantum``.  With ``c_when_no_product =
    (any_live, c_neg, c_mag, c_q)`` a row without a nonzero product returns C itself
    (the zeros-excluded rule of the window accumulator)."""
    out_neg, out_mag, e0 = total < 0, np.abs(total), quantum
    if c_when_no_product is not None:
        out_neg, out_mag, e0 = d_or_c(c_when_no_product[0], out_neg, out_mag, e0, *c_when_no_product[1:])
    return encoding.pack(out_neg, out_mag, e0)


def _c_terms(path, first, words):
    """(special, live, sign, m, q, r) of the C words of a step: the C format's at the
    first step, the D format's after (the code tables of :class:`_Decode` where they apply)."""
    cdec = path.c_dec if first else path.d_dec
    if cdec.ok:
        return cdec.c_terms(words)
    fmt = path.plan.c_format if first else path.plan.d_format
    C = path.plan.decoders[fmt.key](fmt, words)
    return C.cls >= INF, C.cls == FINITE, C.sign, C.m, C.q, C.r


def _bind_output(path, plan):
    """Attach the plan (weakly: the numpy backend keeps a path by its plan, and the path must
    not keep the plan alive) and its C / D decode to a lean path."""
    path.c_dec = _Decode(plan.c_format, plan.decoder(plan.c_format), whole=False)
    path.d_dec = _Decode(plan.d_format, plan.decoder(plan.d_format), whole=False)
    path.plan = weakref.proxy(plan)
