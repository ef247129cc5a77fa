"""Accumulator families: parameterized functions of decoded integer arrays.

Every accumulator has the signature ``acc(a, b, c, scale_a, scale_b, encoding, **params)``
where ``a``/``b`` are :class:`~mmasim.decode.Decoded` of shape ``(N, L)`` (one
hardware step), ``c`` of shape ``(N,)``, the scales are ``Decoded`` expanded per
element (or ``None``), and it returns the D words of that step.
"""

from .integer import integer_sum
from .window import window

BUILTIN_ACCUMULATORS = {
    "window": window,
    "integer": integer_sum,
}
