"""The reference: decode, then the registered accumulator, step by step."""

from __future__ import annotations

import numpy as np


def reference(plan, wa, wb, wc, sa=None, sb=None):
    """D words of materialized rows: A / B words ``(N, stored K)``, C words ``(N,)``,
    scale words ``(N, blocks)`` (or ``None``), decoded step by step by the registered
    decoders and accumulated by the registered accumulator; C of each step is D of
    the previous one (docs/datapaths.md §1)."""
    dp = plan.datapath
    k = wa.shape[-1]
    step = min(plan.step, k)
    if sa is not None:
        sa = np.repeat(sa, dp.block, axis=-1)
        sb = np.repeat(sb, dp.block, axis=-1)
    params = plan.parameters
    c_fmt = plan.c_format
    words = wc
    for s in range(0, k, step):
        cut = slice(s, s + step)
        A = plan.decode(plan.a_format, wa[:, cut])
        B = plan.decode(plan.b_format, wb[:, cut])
        C = plan.decode(c_fmt, words)
        SA = SB = None
        if sa is not None:
            SA = plan.decode(plan.scale_format, sa[:, cut])
            SB = plan.decode(plan.scale_format, sb[:, cut])
        words = plan.accumulator(A, B, C, SA, SB, plan.encoding, **params)
        c_fmt = plan.d_format
    return words
