"""Special values shared by the NVIDIA fixed-point datapaths (docs/datapaths.md section 3, step 1).

Products are classified before any arithmetic: NaN if a factor is NaN or inf
meets zero, inf if a factor is inf, zero if a factor is zero.  The group is NaN
if any term is NaN or +inf meets -inf, else inf if any term is inf.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.arith.decode import FINITE, INF, NAN, ZERO, Decoded


def product(*factors: Decoded) -> Decoded:
    """Exact product of decoded factors (significands multiply, exponents add)."""
    first = factors[0]
    cls, sign, m, q, r = first.cls, first.sign, first.m, first.q, first.r
    any_nan = cls == NAN
    any_inf = cls == INF
    any_zero = cls == ZERO
    for f in factors[1:]:
        any_nan = any_nan | (f.cls == NAN)
        any_inf = any_inf | (f.cls == INF)
        any_zero = any_zero | (f.cls == ZERO)
        sign = sign ^ f.sign
        m = m * f.m
        q = q + f.q
        r = r + f.r
    out = np.where(any_nan | (any_inf & any_zero), NAN,
                   np.where(any_inf, INF, np.where(any_zero, ZERO, FINITE))).astype(np.int8)
    m = np.where(out == FINITE, m, 0)
    return Decoded(out, sign, m, q, r)


@attrs.frozen(eq=False)
class Specials:
    nan: np.ndarray
    inf: np.ndarray
    inf_neg: np.ndarray

    @property
    def any(self) -> np.ndarray:
        return self.nan | self.inf


def classify(terms: Decoded, c: Decoded | None = None) -> Specials:
    """Special-value outcome of products ``terms`` (last axis summed) plus ``c``."""
    nan = (terms.cls == NAN).any(axis=-1)
    pos_inf = ((terms.cls == INF) & (terms.sign == 0)).any(axis=-1)
    neg_inf = ((terms.cls == INF) & (terms.sign == 1)).any(axis=-1)
    if c is not None:
        nan = nan | (c.cls == NAN)
        pos_inf = pos_inf | ((c.cls == INF) & (c.sign == 0))
        neg_inf = neg_inf | ((c.cls == INF) & (c.sign == 1))
    nan = nan | (pos_inf & neg_inf)
    return Specials(nan, (pos_inf | neg_inf) & ~nan, neg_inf & ~pos_inf)


#: The NVIDIA special-value rules of docs/datapaths.md section 3 step 1, as text.
NVIDIA_RULES = (
    "NVIDIA rules (docs/datapaths.md section 3 step 1): classified after the container is read "
    "(tf32/bf16 truncation first); any NaN input, inf x 0, or +inf with -inf gives the canonical NaN "
    "(f32 0x7FFFFFFF, f16 0x7FFF); else any inf gives that inf; a zero or underflowed result is +0"
)

#: The special-value text of an accumulator that documents none.
UNDOCUMENTED = "not documented by the accumulator (set its special_values attribute)"


def rules_for(name: str, accumulator) -> str:
    """The special-value text of the accumulator registered as ``name``: its
    ``special_values`` (the :class:`~mmasim.accumulators.Accumulator` record's text)."""
    return str(getattr(accumulator, "special_values", "") or UNDOCUMENTED)
