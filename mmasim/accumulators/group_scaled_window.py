"""GST-FDPA: a window over block-scaled exact group sums (docs/datapaths.md section 4).

Gives the accumulator :func:`group_scaled_window` (the rule on the function, the parameters on
:class:`GroupScaledWindowParams`); it needs block scales and refuses a step that is not a
multiple of ``group``.  Special values are NVIDIA's (:data:`mmasim.arith.special.NVIDIA_RULES`).
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.arith.decode import FINITE, ZERO, Decoded
from mmasim.arith.intmath import exact_group_sums, truncate_signed
from mmasim.arith.special import NVIDIA_RULES, classify, product
from mmasim.accumulators.accumulator import Accumulator
from mmasim.accumulators.params import integer
from mmasim.accumulators.window import window_total


def group_scaled_window(a: Decoded, b: Decoded, c: Decoded, scale_a, scale_b, encoding, *,
                        F: int, group: int, zeros: int):
    """The products ``a*b`` of each group of ``group`` consecutive elements are summed
    exactly; each group sum is multiplied by its block's scale product ``scale_a * scale_b``.
    The window exponent ``E`` is the largest of the groups' *scale* exponents (the raw exponent
    of the scale product, not of the group sum) and C's raw exponent; a group whose products
    are all zero, or whose scale product is zero, counts with ``zeros`` (e_zero), as does a
    zero C.  Every scaled group sum and C are truncated toward zero to a multiple of
    ``2**(E - F)``, summed exactly, and rounded by the encoder."""
    if scale_a is None or scale_b is None:
        raise TypeError("group_scaled_window is a block-scaled accumulator: it needs scale_a and scale_b")
    if a.shape[-1] % group:
        raise ValueError(f"group_scaled_window: step of {a.shape[-1]} elements is not a multiple of group {group}")
    specials = classify(product(a, b, scale_a, scale_b), c)
    p = product(a, b)
    live = p.cls == FINITE
    gsum, gq = exact_group_sums(p.sign == 1, np.where(live, p.m, 0), p.q, group)
    all_zero = ~live.reshape(live.shape[:-1] + (-1, group)).any(axis=-1)
    # every element of a group lies in one scale block: take the group's first
    s = product(scale_a[..., ::group], scale_b[..., ::group])
    e_zero = np.int64(zeros)
    group_e = np.where(all_zero | (s.cls == ZERO), e_zero, s.r)
    c_live = c.cls == FINITE
    E = np.maximum(group_e.max(axis=-1), np.where(c_live, c.r, e_zero))
    quantum = E - F
    contrib = truncate_signed(gsum < 0, np.abs(gsum) * s.m, gq + s.q, quantum[..., None])   # s.m: 0 unless finite
    total = window_total(contrib, truncate_signed(c.sign == 1, np.where(c_live, c.m, 0), c.q, quantum))
    return encoding.pack(total < 0, np.abs(total), quantum, nan=specials.nan, inf=specials.inf,
                         inf_neg=specials.inf_neg)


@attrs.frozen(kw_only=True)
class GroupScaledWindowParams:
    """The parameters of :func:`group_scaled_window`:

    ``F``
        fraction bits kept below the window exponent ``E``.
    ``group``
        products summed exactly before scaling (a divisor of the scale block).
    ``zeros``
        e_zero, the exponent an all-zero group, a zero scale product or a zero C counts with.
    """

    F: int = attrs.field(validator=integer(0, 1024))
    group: int = attrs.field(validator=integer(1, 1024))
    zeros: int = attrs.field(validator=integer())


group_scaled_window = Accumulator(group_scaled_window, GroupScaledWindowParams, scales="required",
                                  special_values=NVIDIA_RULES)
