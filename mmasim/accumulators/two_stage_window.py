"""TR-FDPA and GTR-FDPA: a truncating product window, then a floored two-stage sum with C
(docs/datapaths.md section 8, AMD CDNA3).  All exact int64 arithmetic; the steps of the
rule and what each parameter does are on :class:`TwoStageWindowParams`.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.arith.decode import FINITE, INF, ZERO, Decoded
from mmasim.arith.codes import NEG_INF_EXP
from mmasim.arith.intmath import bit_length, truncate_signed
from mmasim.arith.special import classify, product
from mmasim.accumulators.accumulator import Accumulator
from mmasim.accumulators.params import boolean, integer, optional


def _floor_shift(x: np.ndarray, by: np.ndarray) -> np.ndarray:
    """``floor(x * 2**by)`` for signed int64 ``x`` (left shifts must not overflow)."""
    by = np.asarray(by, dtype=np.int64)
    return np.where(by >= 0, x << np.clip(by, 0, 62), x >> np.clip(-by, 0, 63))


def two_stage_window(a: Decoded, b: Decoded, c: Decoded, scale_a, scale_b, encoding, *,
                     F: int, F2: int, even_odd: bool = False, drop_c: bool = False,
                     overflow=None, nonfinite_c_r=None):
    if scale_a is not None or scale_b is not None:
        raise TypeError("the two_stage_window accumulator takes no block scales")
    p = product(a, b)
    live = p.cls == FINITE
    if overflow is not None:
        big = live & (bit_length(p.m) - 1 + p.q >= overflow)
        p = Decoded(np.where(big, INF, p.cls).astype(np.int8), p.sign, np.where(big, 0, p.m), p.q, p.r)
        live = live & ~big
    neg = p.sign == 1
    mag = np.where(live, p.m, 0)
    live_r = np.where(live, p.r, NEG_INF_EXP)

    # stage 1: truncating window(s) over the products, in units of 2**(E_dot - F)
    groups = (slice(0, None, 2), slice(1, None, 2)) if even_odd else (slice(None),)
    E_g = [live_r[..., g].max(axis=-1) for g in groups]
    S_g = [truncate_signed(neg[..., g], mag[..., g], p.q[..., g], (E - F)[..., None]).sum(axis=-1)
           for g, E in zip(groups, E_g)]
    E_dot = np.maximum.reduce(E_g)
    dot = sum(_floor_shift(S, E - E_dot) for S, E in zip(S_g, E_g))

    # stage 2: dot and C floored against e = max(E_dot, r_c), in units of 2**(e - F2 - 1)
    c_live = c.cls == FINITE
    r_c = c.r
    if nonfinite_c_r is not None:
        r_c = np.where((c.cls == FINITE) | (c.cls == ZERO), c.r, np.int64(nonfinite_c_r))
    e = np.maximum(E_dot, r_c)
    dot = _floor_shift(dot, (E_dot - F) - (e - F2 - 1))
    c_signed = c.signed_m() * c_live
    c_fl = _floor_shift(c_signed, c.q - (e - F))
    keep_c = np.ones(c.shape, dtype=bool)
    if drop_c:
        keep_c = r_c >= e - F - 1
        c_fl = np.where(keep_c, c_fl, 0)
    total = dot + (c_fl << (F2 + 1 - F))

    # normalize, floor to F2 fraction bits, round
    emin = 1 - encoding.bias
    E2 = np.maximum(bit_length(np.abs(total)) - 1 + (e - F2 - 1), emin)
    total = _floor_shift(total, (e - F2 - 1) - (E2 - F2))
    c_special = Decoded(np.where(keep_c, c.cls, ZERO).astype(np.int8), c.sign, c.m, c.q, c.r)
    specials = classify(p, c_special)
    return encoding.pack(total < 0, np.abs(total), E2 - F2, nan=specials.nan, inf=specials.inf,
                         inf_neg=specials.inf_neg, zero_neg=total < 0)


_SPECIAL_VALUES = (
    "NaN/inf classified as in docs/datapaths.md section 3 step 1 after products of magnitude >= 2**overflow "
    "become inf; with drop_c a dropped C takes no part (an inf or NaN C counts with exponent "
    "nonfinite_c_r, so MMA-Sim 2.1.1 drops it when the products reach 2**(F+1)); an exact zero is +0, "
    "a negative sum that rounds to zero is -0"
)


@attrs.frozen(kw_only=True)
class TwoStageWindowParams:
    """The parameters of :func:`two_stage_window`, in the rule they steer.

    All exact int64 arithmetic.  For one step of products and C:

    1. Products: ``p_k = a_k*b_k`` exactly; a product of magnitude ``>= 2**overflow``
       becomes inf of its sign (when ``overflow`` is given).  Special values as in
       section 3 step 1.  Zero products take no part in what follows.
    2. Product window(s): the products (or, with ``even_odd``, the products of even
       k and of odd k separately) are truncated toward zero to multiples of
       ``2**(E_g - F)``, ``E_g`` the largest raw exponent of the group, and summed.
       With ``even_odd`` both group sums are then floored (toward -inf) to
       multiples of ``2**(E_dot - F)``, ``E_dot = max(E_g)``, and added.
    3. With ``e = max(E_dot, r_c)`` (a zero or subnormal C counts with its format's
       minimum exponent) the dot sum is floored to a multiple of ``2**(e - F2 - 1)``
       and C to a multiple of ``2**(e - F)``.  With ``drop_c``, C is left out
       (as +0) when ``r_c < e - F - 1``.
    4. The sum is normalized: with ``E2 = max(its leading exponent, emin of D)`` it
       is floored to a multiple of ``2**(E2 - F2)``, then rounded by the encoder
       (RNE into f32).  An exact zero is +0; a negative sum that rounds to zero
       gives -0.

    ``nonfinite_c_r``: the exponent an inf or NaN C counts with in the ``drop_c``
    rule.  MMA-Sim 2.1.1 reads it as -1 (its ``frexp`` of inf/NaN), so an inf or
    NaN C is dropped when the products reach 2**(F + 1) and the result is finite.
    This is the peer's behaviour, not a hardware measurement.
    """

    F: int = attrs.field(validator=integer(0, 1024))
    F2: int = attrs.field(validator=integer(0, 1024))
    even_odd: bool = attrs.field(default=False, validator=boolean)
    drop_c: bool = attrs.field(default=False, validator=boolean)
    overflow: int | None = attrs.field(default=None, validator=optional(integer()))
    nonfinite_c_r: int | None = attrs.field(default=None, validator=optional(integer()))


two_stage_window = Accumulator(two_stage_window, TwoStageWindowParams, special_values=_SPECIAL_VALUES)
