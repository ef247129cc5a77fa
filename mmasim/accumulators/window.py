"""The truncating fixed-point window (T-FDPA) and its scaled / grouped variants
(docs/datapaths.md sections 3 and 6).

One group of products plus C is aligned to a shared quantum ``2**quantum`` and every term
(or every exact group sum) is truncated toward zero to a multiple of it; the truncated
integers are summed exactly and the sum goes to the output encoder.  The parameters are
:class:`WindowParams`; the B200 FP4 rules are the functions ``window_quantum``,
``c_relative_terms``, ``window_total``, ``subnormal_redo`` and ``d_or_c``.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.arith.decode import FINITE, Decoded
from mmasim.arith.codes import NEG_INF_EXP
from mmasim.arith.intmath import bit_length, exact_group_sums, truncate_signed
from mmasim.arith.special import NVIDIA_RULES, classify, product
from mmasim.accumulators.accumulator import Accumulator
from mmasim.accumulators.params import either, integer, one_of, optional, table_of


def _group_max(x: np.ndarray, group: int) -> np.ndarray:
    return x.reshape(x.shape[:-1] + (x.shape[-1] // group, group)).max(axis=-1)


# ------------------------------------------------------------------- the rules
# One function per rule, on arrays of rows (the last axis: products or groups).
# The reference below composes them; the lean numpy path (mmasim.backends.numpy.lean)
# calls the same functions on its own decode.

def window_exponent(live_max_r, c_live, c_r, zeros, dead=None):
    """E: the largest raw exponent of the live (finite, nonzero) products
    (``live_max_r``, NEG_INF_EXP for none) and of a live C.  With ``zeros`` an
    integer (e_zero), a row with a product that is not live (``dead``) and a zero C
    count with that exponent."""
    if zeros == "excluded":
        return np.maximum(live_max_r, np.where(c_live, c_r, NEG_INF_EXP))
    z = np.int64(zeros)
    E = np.where(dead, np.maximum(live_max_r, z), live_max_r)
    return np.maximum(E, np.where(c_live, c_r, z))


def window_quantum(E, F, live_sr=None, scale_floor=None, c_dominant=None, c_live=None, c_r=None,
                   any_live=None, live_max_r=None):
    """``(quantum, cdom)``: ``E - F``, at least ``live_sr - scale_floor`` (the largest
    scale raw of the blocks holding a nonzero product); where C dominates (C live,
    a live product, ``r_c`` at or above every product raw: ``cdom``, else ``None``),
    ``r_c - c_dominant["F"]``."""
    quantum = E - F
    if scale_floor is not None:
        quantum = np.maximum(quantum, live_sr - scale_floor)
    cdom = None
    if c_dominant is not None:
        cdom = c_live & any_live & (c_r >= live_max_r)
        quantum = np.where(cdom, c_r - c_dominant["F"], quantum)
    return quantum, cdom


def c_relative_terms(contrib, neg, mag, q, gr, c_live, c_r, qk, Fc):
    """The C-relative rule: a group (or product) whose largest raw ``gr`` is live and
    at most ``r_c`` is truncated at ``max(quantum, r_c - Fc)`` instead (then expressed
    in quanta of ``qk``); ``neg, mag, q``: its exact sum."""
    rel = c_live[..., None] & (gr > NEG_INF_EXP) & (gr <= c_r[..., None])
    q_rel = np.maximum(qk, (c_r - Fc)[..., None])
    t_rel = truncate_signed(neg, mag, q, q_rel)
    return np.where(rel, truncate_signed(t_rel < 0, np.abs(t_rel), q_rel, qk), contrib)


def window_total(contrib, c_term, cdom=None, c_sums=None, qk=None):
    """The exact sum in quanta: the truncated groups ``contrib`` plus the truncated C
    ``c_term``; where C dominates (``cdom``) with groups of its own size, the products
    are the C-dominant groups' exact sums ``c_sums = (signed sum, q)`` truncated to
    the quantum ``qk`` instead."""
    products = contrib.sum(axis=-1)
    if c_sums is not None:
        csum, cq = c_sums
        products = np.where(cdom, truncate_signed(csum < 0, np.abs(csum), cq, qk).sum(axis=-1), products)
    return products + c_term


def subnormal_redo(total, quantum, contrib, group_scale_r, live_sr, c_term, T, cdom=None):
    """The subnormal redo: where ``total`` (quanta of ``2**quantum``) is a nonzero
    RZ-F32 subnormal (and C does not dominate), the sum without the groups whose
    scale raw is below ``live_sr`` and whose contribution is below ``2**(T - quantum)``
    quanta (``c_term``: the truncated C)."""
    lead = quantum + bit_length(np.abs(total)) - 1
    # RZ-F32 gives a nonzero subnormal: 2**-149 <= |sum| < 2**-126
    subnormal = (total != 0) & (lead < -126) & (lead >= -149)
    if cdom is not None:
        subnormal &= ~cdom
    if not subnormal.any():
        return total
    limit = np.clip(np.int64(T) - quantum, 0, 62)[..., None]
    small = bit_length(np.abs(contrib)) <= limit
    drop = small & (group_scale_r < live_sr[..., None])
    redone = np.where(drop, 0, contrib).sum(axis=-1) + c_term
    return np.where(subnormal, redone, total)


def d_or_c(any_live, neg, mag, e0, c_neg, c_mag, c_q):
    """zeros excluded: a row without a live product gives C itself (T1), -0 becoming +0."""
    return (np.where(any_live, neg, c_neg), np.where(any_live, mag, c_mag), np.where(any_live, e0, c_q))


def window(a: Decoded, b: Decoded, c: Decoded, scale_a, scale_b, encoding, *, F: int,
           zeros="excluded", group: int = 1, scale_floor=None, c_dominant=None,
           c_relative=None, subnormal_redo=None):
    scaled = scale_a is not None
    p = product(a, b, scale_a, scale_b) if scaled else product(a, b)
    specials = classify(p, c)
    live = p.cls == FINITE
    neg = p.sign == 1
    mag = np.where(live, p.m, 0)
    c_live = c.cls == FINITE
    c_mag = np.where(c_live, c.m, 0)
    c_neg = c.sign == 1

    live_r = np.where(live, p.r, NEG_INF_EXP)
    max_r = live_r.max(axis=-1)
    any_live = live.any(axis=-1)
    E = window_exponent(max_r, c_live, c.r, zeros, dead=None if zeros == "excluded" else ~live.all(axis=-1))
    scale_r = live_sr = None
    if scaled:
        scale_r = scale_a.r + scale_b.r
        # the largest scale raw of the blocks holding a nonzero product (a scale is
        # per element, so over the live products)
        live_sr = np.where(live, scale_r, NEG_INF_EXP).max(axis=-1)
    quantum, cdom = window_quantum(E, F, live_sr, scale_floor, c_dominant, c_live, c.r, any_live, max_r)

    qk = quantum[..., None]
    if group == 1:
        src = (neg, mag, p.q)
        gr = live_r
    else:
        gsum, gq = exact_group_sums(neg, mag, p.q, group)
        src = (gsum < 0, np.abs(gsum), gq)
        gr = _group_max(live_r, group)
    contrib = truncate_signed(*src, qk)
    if c_relative is not None:
        contrib = c_relative_terms(contrib, *src, gr, c_live, c.r, qk, c_relative)
    c_sums = None
    if cdom is not None and c_dominant["group"] != group:
        c_sums = exact_group_sums(neg, mag, p.q, c_dominant["group"])
    c_term = truncate_signed(c_neg, c_mag, c.q, quantum)
    total = window_total(contrib, c_term, cdom, c_sums, qk)

    if subnormal_redo is not None:
        total = _redo(total, quantum, contrib, _group_max(scale_r, group), live_sr, c_term, subnormal_redo, cdom)

    out_neg, out_mag, e0 = total < 0, np.abs(total), quantum
    if zeros == "excluded":
        out_neg, out_mag, e0 = d_or_c(any_live, out_neg, out_mag, e0, c_neg, c_mag, c.q)
    return encoding.pack(out_neg, out_mag, e0, nan=specials.nan, inf=specials.inf, inf_neg=specials.inf_neg)


_redo = subnormal_redo   # the parameter of window() shadows the rule's name


@attrs.frozen(kw_only=True)
class WindowParams:
    """The parameters of :func:`window`:

    ``F``
        fraction bits kept below the window exponent ``E``: quantum = E - F.
    ``zeros``
        ``"excluded"``: zero terms do not take part in ``E`` (B200 tcgen05); an
        integer: zero products and a zero C count with that exponent (``e_zero``).
    ``group``
        consecutive products summed exactly before truncation (1: each alone).
    ``scale_floor``
        the quantum is at least ``max(scale raw) - scale_floor`` (block-scaled B200),
        the max taken over the scale blocks that hold a nonzero product: a block whose
        products are all zero (or whose scale is zero) does not raise the floor.
    ``c_dominant``
        ``{"F": Fc, "group": G}``: when C is nonzero and ``r_c`` reaches the
        largest product raw, quantum = ``r_c - Fc`` and products are summed in
        groups of ``G`` (B200 NVFP4 / MXF4).
    ``c_relative``
        ``Fc``: a product group whose own largest raw is <= ``r_c`` is truncated at
        ``max(quantum, r_c - Fc)`` (B200 ue8m0 MXF4).
    ``subnormal_redo``
        ``T``: if the RZ-F32 result is a nonzero f32 subnormal (not when the sum
        truncates to zero), groups whose scale raw is below the largest (of the
        blocks holding a nonzero product, as for ``scale_floor``) and whose
        contribution is below ``2**(T - quantum)`` quanta are left out and the sum
        is redone (B200 ue8m0 MXF4; docs/datapaths.md §6).
    """

    F: int = attrs.field(validator=integer(0, 1024))
    zeros: object = attrs.field(default="excluded", validator=either(one_of("excluded"), integer(),
                                                                       expected='"excluded" or an integer'))
    group: int = attrs.field(default=1, validator=integer(1, 1024))
    scale_floor: int | None = attrs.field(default=None, validator=optional(integer()))
    c_dominant: dict | None = attrs.field(
        default=None, validator=optional(table_of(F=integer(0, 1024), group=integer(1, 1024))))
    c_relative: int | None = attrs.field(default=None, validator=optional(integer()))
    subnormal_redo: int | None = attrs.field(default=None, validator=optional(integer()))


window = Accumulator(window, WindowParams, scales="optional", special_values=NVIDIA_RULES)
