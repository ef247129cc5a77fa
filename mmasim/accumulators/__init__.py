"""Accumulator families: parameterized functions of decoded integer arrays.

Each family is an :class:`Accumulator` record (function, ``Params``, use of scales,
special-value text) called as ``acc(a, b, c, scale_a, scale_b, encoding, **params)``
on one hardware step's :class:`~mmasim.arith.decode.Decoded` arrays; it returns that
step's D words.  One family per module, file = function = registry key.

Imports ``mmasim.errors`` and ``mmasim.arith``.
"""

from mmasim.accumulators.accumulator import Accumulator
from mmasim.accumulators.exact_sum import exact_sum
from mmasim.accumulators.fma import fma
from mmasim.accumulators.ftz_mul_add import ftz_mul_add
from mmasim.accumulators.group_scaled_window import group_scaled_window
from mmasim.accumulators.integer import integer
from mmasim.accumulators.mul_add_chain import mul_add_chain
from mmasim.accumulators.two_stage_window import two_stage_window
from mmasim.accumulators.window import window

#: The core's accumulators by registry key: the name of each function (and of its module).
BUILTIN_ACCUMULATORS = {
    acc.__name__: acc
    for acc in (window, integer, mul_add_chain, group_scaled_window, fma, exact_sum, ftz_mul_add, two_stage_window)
}

__all__ = ["Accumulator", "BUILTIN_ACCUMULATORS", *BUILTIN_ACCUMULATORS]
