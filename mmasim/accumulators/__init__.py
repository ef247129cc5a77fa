"""Accumulator families: parameterized functions of decoded integer arrays.

Every accumulator has the signature ``acc(a, b, c, scale_a, scale_b, encoding, **params)``
where ``a``/``b`` are :class:`~mmasim.decode.Decoded` of shape ``(N, L)`` (one
hardware step), ``c`` of shape ``(N,)``, the scales are ``Decoded`` expanded per
element (or ``None``), and it returns the D words of that step.
"""

from .exact_sum import exact_sum
from .fma import fma
from .ftz_mul_add import ftz_mul_add
from .integer import integer_sum
from .mul_add_chain import mul_add_chain
from .scaled_groups import group_scaled_window
from .two_stage import two_stage_window
from .window import window

BUILTIN_ACCUMULATORS = {
    "window": window,
    "integer": integer_sum,
    "mul_add_chain": mul_add_chain,
    "group_scaled_window": group_scaled_window,
    "fma": fma,
    "exact_sum": exact_sum,
    "ftz_mul_add": ftz_mul_add,
    "two_stage_window": two_stage_window,
}
