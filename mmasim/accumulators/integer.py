"""Integer accumulator: exact ``C + sum(a*b)`` with s32 wrap or saturation."""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.accumulators.accumulator import Accumulator
from mmasim.accumulators.params import one_of, optional


@attrs.frozen(kw_only=True)
class IntegerParams:
    """``bitop``: leave out for ``sum(a*b)``; ``"xor"`` for the single-bit ``.xor.popc``
    (``sum(a XOR b)``: the population count of the XOR of a bit row of A and a bit column of
    B).  ``.and.popc`` needs no parameter: on bits, ``a AND b`` is ``a*b``."""

    bitop: str | None = attrs.field(default=None, validator=optional(one_of("xor")))


def integer(a, b, c, scale_a, scale_b, encoding, *, bitop=None):
    """Exact integer dot product plus C (no window, no rounding), wrapped or saturated to s32 by
    ``encoding`` — docs/datapaths.md §6 (``kind::i8``) and §10 (integer MMAs)."""
    if bitop == "xor":
        x, y = a.signed_m(), b.signed_m()
        terms = np.bitwise_xor(x, y)
    else:
        terms = a.signed_m() * b.signed_m()
    total = terms.sum(axis=-1) + c.signed_m()
    return encoding.pack_int(total)


integer = Accumulator(integer, IntegerParams,
                      special_values="none: integers have no special values (s32 wrap or saturate)")
