"""The codes every path shares, defined once: a decoded word's class and the sentinel exponents.

The spec (:mod:`mmasim.arith.decode`, :mod:`mmasim.arith.intmath`, the accumulators), the numpy
fast paths and the compiled kernels all import them from here; the kernels freeze them when
they compile, so the digest of their cache covers this file (:mod:`mmasim.backends.numba.cache`).
"""

import numpy as np

#: the class of a decoded word (``Decoded.cls``)
ZERO, FINITE, INF, NAN = 0, 1, 2, 3

#: the exponent of "no term": below every window and every live exponent (a zero, a dead product)
NEG_INF_EXP = np.int64(-(1 << 40))

#: the joint q of an A x B pair with a zero factor, in the grouped fast paths' tables
GROUP_DEAD = -1000

__all__ = ["ZERO", "FINITE", "INF", "NAN", "NEG_INF_EXP", "GROUP_DEAD"]
