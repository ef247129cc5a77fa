"""Integer accumulator: exact ``C + sum(a*b)`` with s32 wrap or saturation."""

from __future__ import annotations

from .accumulator import Accumulator


def integer(a, b, c, scale_a, scale_b, encoding):
    """Exact integer dot product plus C (no window, no rounding) — docs/datapaths.md section 6, ``kind::i8``."""
    total = (a.signed_m() * b.signed_m()).sum(axis=-1) + c.signed_m()
    return encoding.pack_int(total)


integer = Accumulator(integer, special_values="none: integers have no special values (s32 wrap or saturate)")
