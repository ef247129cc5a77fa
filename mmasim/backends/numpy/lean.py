"""A lean numpy path for the common window datapaths (the numpy backend's fast path).

The truncating window (:func:`mmasim.accumulators.window.window`) with one
product per group (``group`` 1, no ``c_dominant``, ``c_relative`` or
``subnormal_redo``), scaled or not, computed on container words with fewer
passes: every A / B word is decoded through a per-format table (containers of
up to 16 bits; built by the registered decoder) into a signed significand and
the exponent ``q`` of its last bit, the classes folded into ``q`` (a zero far
below any window, an inf / NaN far above), and the truncation of each product
to the window's quantum is one right shift of the product pre-shifted left by
``S`` (the largest left shift a live product can need).  Rows with an inf or
NaN anywhere (or a step that overflowed into inf) are computed by the
reference accumulator itself, so special values are the reference's.  Exact
int64 arithmetic throughout; ``tests/test_speed_paths.py`` compares this path
with the reference accumulator on every datapath it covers.

:class:`LeanGrouped` is the same idea for the grouped block-scaled window (the
B200 FP4 rules): one joint A x B table lookup per product, exact group sums of
tiny integers, the group rules on group-level arrays.
"""

from __future__ import annotations

import numpy as np

from ...decode import FINITE, INF, ZERO, decode_float
from ...accumulators.window import c_relative_terms, d_or_c, subnormal_redo, window_exponent, window_quantum
from ...intmath import truncate_signed
from .reference import reference

LZQ = -(1 << 30)     # q of a zero element
LSQ = 1 << 36        # q of an inf / NaN element
LZT = -(1 << 29)     # a product q below this has a zero factor
LST = 1 << 35        # a product q at or above this has an inf / NaN factor
NEG = -(1 << 40)     # intmath.NEG_INF_EXP


class _Table:
    """Lean decode of one A / B format: table lookups or arithmetic (wide IEEE formats)."""

    def __init__(self, fmt, decoder):
        self.fmt = fmt
        self.ok = False
        if fmt.container_bits > 16:
            if (decoder is decode_float and fmt.nan == "ieee" and fmt.subnormals and fmt.signed
                    and not fmt.integer and fmt.exp_bits + fmt.man_bits < 40):
                self.tab = None
                self.off = fmt.man_bits
                self.bits = fmt.man_bits + 1
                self.ok = True
                E, M = fmt.exp_bits, fmt.man_bits
                self.se = None
                if E + 1 <= 12 and fmt.field_bits == E + M + 1:
                    # per sign-and-exponent code (small tables): the hidden bit, the sign
                    # as +-1, and q (LSQ for inf / NaN); zeros get LZQ after the lookup
                    se = np.arange(1 << (E + 1), dtype=np.int64)
                    e = se & ((1 << E) - 1)
                    self.se = ((e != 0).astype(np.int64) << M, np.where(se >> E == 1, -1, 1).astype(np.int64),
                               np.where(e == (1 << E) - 1, LSQ, np.maximum(e, 1) - (fmt.bias + M)))
                self.full = fmt.field_shift + fmt.field_bits >= fmt.container_bits
            return
        words = np.arange(1 << fmt.container_bits, dtype=np.uint64)
        dec = decoder(fmt, words)
        cls, sign, m, q, r = (np.asarray(x, dtype=np.int64).reshape(-1)
                              for x in (dec.cls, dec.sign, dec.m, dec.q, dec.r))
        fin = cls == FINITE
        if cls.min() < 0 or cls.max() > 3 or sign.min() < 0 or sign.max() > 1 or m.min() < 0 or m.max() >= 1 << 30:
            return
        if (m[fin] == 0).any() or (m[cls == ZERO] != 0).any() or np.abs(q[fin]).max(initial=0) >= 1 << 20:
            return
        off = np.unique(r[fin] - q[fin])
        if len(off) > 1:
            return
        self.tab = (np.where(fin, np.where(sign == 1, -m, m), 0),
                    np.where(fin, q, np.where(cls == ZERO, LZQ, LSQ)))
        self.off = int(off[0]) if len(off) else 0
        self.bits = int(m[fin].max(initial=0)).bit_length()
        self.ok = True

    def __call__(self, words):
        """(signed m, q) of container words (int64 arrays)."""
        if self.tab is not None:
            idx = words.view(np.int64) if words.dtype == np.uint64 else words.astype(np.intp)
            return self.tab[0].take(idx), self.tab[1].take(idx)
        fmt = self.fmt
        E, M = fmt.exp_bits, fmt.man_bits
        if self.se is not None:
            x = words.astype(np.int64)
            x >>= fmt.field_shift
            if not self.full:
                x &= (1 << fmt.field_bits) - 1
            se = x >> M
            x &= (1 << M) - 1
            x |= self.se[0].take(se)
            x *= self.se[1].take(se)
            q = self.se[2].take(se)
            q[x == 0] = LZQ
            return x, q
        x = (words.astype(np.int64) >> fmt.field_shift) & ((1 << fmt.field_bits) - 1)
        e = (x >> M) & ((1 << E) - 1)
        m = x & ((1 << M) - 1)
        nrm = e != 0
        m |= nrm.astype(np.int64) << M
        q = np.maximum(e, 1) - (fmt.bias + M)
        q[m == 0] = LZQ
        q[e == (1 << E) - 1] = LSQ
        neg = (x >> (E + M)) & 1
        m = np.where(neg == 1, -m, m)
        return m, q


def float_bit_length(x):
    """intmath.bit_length of int64 values in [0, 2**62]: the binary exponent of the
    float, corrected where rounding to 53 bits carried into the next power of two
    (exact: a check with an integer shift)."""
    bl = np.frexp(x.astype(np.float64))[1].astype(np.int64)
    bl -= ((x >> np.maximum(bl - 1, 0)) == 0) & (bl > 0)
    return bl


class PackRZ:
    """Encoding.pack for round-toward-zero into the word's own fraction width,
    without inf / NaN / negative-zero overrides: the same integer steps, fewer passes."""

    def __init__(self, enc):
        self.ok = enc.mode == "rz" and enc.frac_bits == enc.word_frac_bits
        self.frac, self.bias, self.inf = enc.frac_bits, enc.bias, enc.inf_word
        self.sbit, self.dtype = np.uint64(enc.sign_bit), enc.dtype

    def __call__(self, neg, mag, e0):
        emin = 1 - self.bias
        lead = e0 + float_bit_length(mag) - 1
        ml = np.maximum(lead, emin)
        drop = ml - self.frac - e0
        keep = (mag << np.clip(-drop, 0, 62)) >> np.clip(drop, 0, 63)
        wmag = ((ml - emin) << self.frac) + keep
        zero = mag == 0
        wmag[zero] = 0
        wmag[(wmag >= self.inf) | ((lead > self.bias) & ~zero)] = self.inf
        words = wmag.astype(np.uint64)
        words[neg & (wmag != 0)] |= self.sbit
        return words.astype(self.dtype)


class _IeeeC:
    """decode_float of a signed IEEE format with subnormals (C / D words), reduced to
    what the window needs: (special, live, sign, m, q, r)."""

    def __init__(self, fmt, decoder):
        self.ok = (decoder is decode_float and fmt.nan == "ieee" and fmt.subnormals and fmt.signed
                   and not fmt.integer and fmt.exp_bits + fmt.man_bits < 40)
        self.fmt = fmt

    def __call__(self, words):
        fmt = self.fmt
        E, M = fmt.exp_bits, fmt.man_bits
        x = (words.astype(np.int64) >> fmt.field_shift) & ((1 << fmt.field_bits) - 1)
        e = (x >> M) & ((1 << E) - 1)
        m = x & ((1 << M) - 1)
        m |= (e != 0).astype(np.int64) << M
        r = np.maximum(e, 1) - fmt.bias
        special = e == (1 << E) - 1
        live = (m != 0) & ~special
        return special, live, (x >> (E + M)) & 1, m, r - M, r


class LeanWindow:
    """The lean numpy window of one plan, or ``ok = False`` where it does not apply."""

    def __init__(self, plan):
        self.ok = False
        dp = plan.datapath
        if not plan.builtin or dp.accumulator != "window" or dp.sparse or plan.encoding.mode not in ("rz", "rne"):
            return
        p = dict(dp.parameters)
        # one product per group, none of the C rules or the redo (LeanGrouped's)
        if not plan.declared or int(p.get("group", 1)) != 1 \
                or any(p.get(rule) is not None for rule in ("c_dominant", "c_relative", "subnormal_redo")):
            return
        if p.get("scale_floor") is not None and dp.scale is None:
            return
        self.ta = _Table(plan.a_format, plan.decoder(plan.a_format))
        self.tb = _Table(plan.b_format, plan.decoder(plan.b_format))
        if not (self.ta.ok and self.tb.ok):
            return
        self.F = int(p["F"])
        zeros = p.get("zeros", "excluded")
        self.excl = zeros == "excluded"
        self.zeros = zeros
        self.sf = p.get("scale_floor")
        self.roff = self.ta.off + self.tb.off
        bits = self.ta.bits + self.tb.bits
        self.S = max(0, self.F - self.roff)
        if dp.scale is not None:
            fmt = plan.scale_format
            if fmt.container_bits > 16:
                return
            dec = plan.decoder(fmt)(fmt, np.arange(1 << fmt.container_bits, dtype=np.uint64))
            fin = np.asarray(dec.cls) == FINITE
            if not fin.any():
                return
            soff = int((np.asarray(dec.r) - np.asarray(dec.q))[fin].min())
            self.S = max(0, self.F - self.roff - 2 * soff)
            bits += 2 * int(np.asarray(dec.m)[fin].max()).bit_length()
        if bits + self.S > 62:
            return
        _bind_output(self, plan)
        self.ok = True

    def __call__(self, wa, wb, wc, sa, sb):
        """D words of the rows (uint64 word arrays)."""
        plan = self.plan
        dp = plan.datapath
        n, k = wa.shape
        step = plan.step
        dec = plan.decoders
        S, F = self.S, self.F
        special = np.zeros(n, dtype=bool)
        if sa is not None:
            fmt = plan.scale_format
            xa, xb = dec[fmt.key](fmt, sa), dec[fmt.key](fmt, sb)
            special |= ((xa.cls >= INF) | (xb.cls >= INF)).any(axis=-1)
            szero = (xa.cls == ZERO) | (xb.cls == ZERO)
            s_m = np.where(szero, 0, np.where((xa.sign ^ xb.sign) == 1, -(xa.m * xb.m), xa.m * xb.m))
            s_q = np.where(szero, LZQ, xa.q + xb.q)
            s_ro = self.roff + (xa.r - xa.q) + (xb.r - xb.q)
            s_r = xa.r + xb.r
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
            E = window_exponent(np.where(any_live, hi, NEG), c_live, c_r, self.zeros,
                                dead=None if self.excl else _row_reduce(q, np.minimum) < LZT)
            # the floor counts only the blocks holding a nonzero product
            live_sr = None if self.sf is None else np.where(p != 0, s_r[:, cut], NEG).max(axis=-1)
            quantum, _ = window_quantum(E, F, live_sr, self.sf)
            # t = trunc(|p| * 2**(q - quantum)) = (|p| << S) >> (S - q + quantum)
            np.subtract((quantum + S)[:, None], q, out=q)
            np.minimum(q, 63, out=q)
            neg = p < 0
            np.abs(p, out=p)
            p <<= S
            p >>= q
            np.negative(p, out=p, where=neg)
            total = _row_reduce(p, np.add)
            c_mag = np.where(c_live, c_m, 0)
            c_neg = c_sign == 1
            total += truncate_signed(c_neg, c_mag, c_q, quantum)
            words = _pack_sum(self.pack_rz, plan.encoding, total, quantum,
                              (any_live, c_neg, c_mag, c_q) if self.excl else None)
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
    or ``ok = False`` where it does not apply.

    Narrow A / B formats (containers of up to 8 bits, 16 together) are decoded
    pairwise through one joint table indexed by ``(a << bits_b) | b``: the signed
    product of the two significands aligned to the formats' smallest ``q`` (a tiny
    integer) and the sum of their ``q`` (the group's largest product raw).  A group
    lies inside one scale block, so its exact sum is the sum of those integers times
    the block's scale product, at the exponent ``qmin_a + qmin_b + q_sa + q_sb``:
    the same value as the reference's ``exact_group_sums`` (whose refusal cannot
    happen here: the build checks the bit budget), so the truncations, the
    C-dominant sums (groups of groups, again inside one block), the C-relative
    truncation and the subnormal redo are the reference's, on group-level arrays.
    """

    DEAD = -1000   # joint q of a pair with a zero factor
    native_words = True   # A / B words may come in any unsigned dtype (Model._numpy_rows)

    def __init__(self, plan):
        self.ok = False
        dp = plan.datapath
        if not plan.builtin or dp.accumulator != "window" or dp.sparse or dp.scale is None \
                or plan.encoding.mode not in ("rz", "rne"):
            return
        p = dict(dp.parameters)
        if not plan.declared:
            return
        if p.get("zeros", "excluded") != "excluded":
            return
        self.group = g = int(p.get("group", 1))
        self.c_dominant = cd = p.get("c_dominant")
        self.cd = None if cd is None else (int(cd["F"]), int(cd["group"]))
        self.crel = p.get("c_relative")
        self.redo = p.get("subnormal_redo")
        self.sf = p.get("scale_floor")
        self.F = int(p["F"])
        if g == 1 and cd is None and self.crel is None and self.redo is None:
            return    # LeanWindow's
        block, k = dp.block, dp.k
        step = plan.step
        cg = self.cd[1] if self.cd else g
        if not block or block % g or block % cg or cg % g or step % block or k % step:
            return
        fa, fb = plan.a_format, plan.b_format
        if fa.container_bits + fb.container_bits > 16:
            return
        da = self._narrow(fa, plan.decoder(fa))
        db = self._narrow(fb, plan.decoder(fb))
        if da is None or db is None:
            return
        (va, qa, offa, qmina), (vb, qb, offb, qminb) = da, db
        self.bshift = fb.container_bits
        self.P = (va[:, None] * vb[None, :]).reshape(-1)
        self.Q = np.where((qa[:, None] == self.DEAD) | (qb[None, :] == self.DEAD), self.DEAD,
                          qa[:, None] + qb[None, :]).reshape(-1)
        if int(np.abs(self.P).max()) * cg >= 1 << 31:
            return
        self.P = self.P.astype(np.int32)
        self.Q = self.Q.astype(np.int32)
        self.roff = offa + offb
        self.q0 = qmina + qminb
        fmt = plan.scale_format
        if fmt.container_bits > 16:
            return
        dec = plan.decoder(fmt)(fmt, np.arange(1 << fmt.container_bits, dtype=np.uint64))
        fin = np.asarray(dec.cls) == FINITE
        if not fin.any() or ((np.asarray(dec.r) - np.asarray(dec.q))[fin] < 0).any():
            return
        # Every finite factor is below 2**(r + 1) (checked for A / B in _narrow), so a
        # group (or C-dominant group) sum is below cg * 2**(gr + 4), and every quantum
        # is at least gr - max(F, Fc): a truncated sum has at most max(F, Fc) + 4 +
        # bits(cg) bits, the step's total one more per doubling of the group count.
        sm, sr, sq = (np.asarray(x, dtype=np.int64)[fin] for x in (dec.m, dec.r, dec.q))
        if (sm >= np.int64(1) << np.clip(sr - sq + 1, 0, 62)).any():
            return
        if max(self.F, self.cd[0] if self.cd else 0) + 4 + int(cg).bit_length() + int(step).bit_length() + 1 > 62:
            return
        if self.roff < 0:
            return
        _bind_output(self, plan)
        self.step = step
        self.ok = True

    def _narrow(self, fmt, decoder):
        """(v, q, r - q, qmin) per container word: value = v * 2**qmin, q the exponent
        of the last bit (DEAD for a zero); None unless every word is finite or zero
        with a constant r - q and a small q range."""
        if fmt.container_bits > 8:
            return None
        words = np.arange(1 << fmt.container_bits, dtype=np.uint64)
        dec = decoder(fmt, words)
        cls, sign, m, q, r = (np.asarray(x, dtype=np.int64).reshape(-1)
                              for x in (dec.cls, dec.sign, dec.m, dec.q, dec.r))
        fin = cls == FINITE
        if not fin.any() or ((cls != FINITE) & (cls != ZERO)).any():
            return None
        if (m[fin] <= 0).any() or (m[~fin] != 0).any() or m.max() >= 1 << 16:
            return None
        off = np.unique(r[fin] - q[fin])
        if len(off) != 1 or (m[fin] >= 1 << (int(off[0]) + 1)).any():
            return None
        qmin, qmax = int(q[fin].min()), int(q[fin].max())
        if qmax - qmin > 16 or abs(qmin) > 1 << 20:
            return None
        v = np.where(fin, m << np.where(fin, q - qmin, 0), 0)
        if int(v.max()).bit_length() > 16:
            return None
        v = np.where(sign == 1, -v, v)
        return v, np.where(fin, q, self.DEAD), int(off[0]), qmin

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
        xa, xb = dec[fmt.key](fmt, sa), dec[fmt.key](fmt, sb)
        special = ((xa.cls >= INF) | (xb.cls >= INF)).any(axis=-1)
        szero = (xa.cls == ZERO) | (xb.cls == ZERO)
        sm_all = np.where(szero, 0, np.where((xa.sign ^ xb.sign) == 1, -(xa.m * xb.m), xa.m * xb.m))
        sq_all = xa.q + xb.q + self.q0
        sr_all = xa.r + xb.r
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
            gr = np.where(glive, qg + self.roff + s_r, NEG)
            max_r = gr.max(axis=-1)
            any_live = glive.any(axis=-1)
            c_special, c_live, c_sign, c_m, c_q, c_r = _c_terms(self, s0 == 0, words)
            special |= c_special
            E = window_exponent(max_r, c_live, c_r, "excluded")
            # the largest scale raw of the blocks holding a nonzero product (the floor, the redo)
            live_sr = np.where(glive, s_r, NEG).max(axis=-1)
            quantum, cdom = window_quantum(E, F, live_sr, self.sf, self.c_dominant, c_live, c_r, any_live, max_r)
            qk = quantum[:, None]
            g_neg, g_mag = gs < 0, np.abs(gs)
            contrib = truncate_signed(g_neg, g_mag, s_q, qk)
            if self.crel is not None:
                contrib = c_relative_terms(contrib, g_neg, g_mag, s_q, gr, c_live, c_r, qk, self.crel)
            if cdom is not None and self.cd[1] != g:
                r = self.cd[1] // g
                cs = gs.reshape(n, ng // r, r).sum(axis=-1)
                c_contrib = truncate_signed(cs < 0, np.abs(cs), s_q[:, ::r], qk).sum(axis=-1)
                products_total = np.where(cdom, c_contrib, contrib.sum(axis=-1))
            else:
                products_total = contrib.sum(axis=-1)
            c_mag = np.where(c_live, c_m, 0)
            c_neg = c_sign == 1
            ct = truncate_signed(c_neg, c_mag, c_q, quantum)
            total = products_total + ct
            if self.redo is not None:
                total = subnormal_redo(total, quantum, contrib, s_r, live_sr, ct, self.redo, cdom,
                                       bit_length=float_bit_length)
            words = _pack_sum(self.pack_rz, plan.encoding, total, quantum, (any_live, c_neg, c_mag, c_q))
        if special.any():
            idx = np.flatnonzero(special)
            words[idx] = reference(plan, wa[idx].astype(np.uint64), wb[idx].astype(np.uint64),
                                                wc[idx], sa[idx], sb[idx])
        return words


def _pack_sum(pack_rz, encoding, total, quantum, c_when_no_product=None):
    """D words of the exact sum ``total * 2**quantum``.  With ``c_when_no_product =
    (any_live, c_neg, c_mag, c_q)`` a row without a nonzero product returns C itself
    (the zeros-excluded rule of the window accumulator)."""
    out_neg, out_mag, e0 = total < 0, np.abs(total), quantum
    if c_when_no_product is not None:
        out_neg, out_mag, e0 = d_or_c(c_when_no_product[0], out_neg, out_mag, e0, *c_when_no_product[1:])
    if pack_rz.ok:
        return pack_rz(out_neg, out_mag, e0)
    return encoding.pack(out_neg, out_mag, e0)


def _c_terms(path, first, words):
    """(special, live, sign, m, q, r) of the C words of a step: the C format's at the
    first step, the D format's after (the reduced IEEE decode where it applies)."""
    cdec = path.c_dec if first else path.d_dec
    if cdec.ok:
        return cdec(words)
    fmt = path.plan.c_format if first else path.plan.d_format
    C = path.plan.decoders[fmt.key](fmt, words)
    return C.cls >= INF, C.cls == FINITE, C.sign, C.m, C.q, C.r


def _bind_output(path, plan):
    """Attach the plan and its C decode / D encode helpers to a lean path."""
    path.pack_rz = PackRZ(plan.encoding)
    path.c_dec = _IeeeC(plan.c_format, plan.decoder(plan.c_format))
    path.d_dec = _IeeeC(plan.d_format, plan.decoder(plan.d_format))
    path.plan = plan
