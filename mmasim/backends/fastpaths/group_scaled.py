"""The group-scaled window's fast paths (``group_scaled_window``: GST-FDPA, the RTX Blackwell
FP4 ``mma.sync`` datapaths): the numba kernels' decisions and the joint kernel's bound proof.
"""

from __future__ import annotations

import numpy as np

from mmasim.arith.codes import GROUP_DEAD
from mmasim.backends.fastpaths.shared import Bound, Decision, TileLayout, builtin_decision, joint_table, scale_facts

def numba_group_scaled(plan) -> Decision:
    """The numba group-scaled window kernel: scaled, steps of whole groups."""
    d = builtin_decision(plan, "group_scaled_window", "numba group_scaled", scaled=True)
    if d and plan.step % int(plan.parameters["group"]):
        return Decision(d.path, f"step {plan.step} not whole groups")
    return d


def group_scaled_joint(plan, layout: TileLayout) -> Decision:
    """The numba group-scaled joint kernel (``families.group_scaled_joint_kernel``): a plan of
    :func:`numba_group_scaled` with every group inside one scale block, A and B read through
    their :func:`joint_table`, scales in containers of up to 16 bits with a finite word and every
    value below 2**(r + 1), the kernel's dead code that of the joint table, and
    :func:`group_scaled_bound`.  Facts: ``joint``, ``bound``."""
    path = "numba group_scaled joint"
    d = numba_group_scaled(plan)
    if not d:
        return Decision(path, d.reason)
    group, block = int(plan.parameters["group"]), int(plan.datapath.block or 0)
    if not block or block % group:
        return Decision(path, f"groups of {group} not inside scale blocks of {block}")
    jt = joint_table(plan)
    if not jt:
        return Decision(path, jt.reason)
    s, why = scale_facts(plan.scale_format, plan.decoder(plan.scale_format))
    if s is None:
        return Decision(path, why)
    if layout.dead != GROUP_DEAD:
        return Decision(path, f"the kernel's dead code {layout.dead} is not the joint table's {GROUP_DEAD}")
    j = jt.joint
    bound = group_scaled_bound(int(plan.parameters["F"]), group, plan.step, int(np.abs(j.P).max()), j.q0, s.m_max,
                               s.below_r1)
    if not bound:
        return Decision(path, bound.why_not())
    return Decision(path, joint=j, bound=bound)


def group_scaled_bound(F, group, step, p_max, q0, scale_m, below_r1) -> Bound:
    """Every int64 of the numba group-scaled joint kernel is exact.

    A group's sum of joint entries (each at most ``p_max``, the value of an A x B pair being
    its entry times ``2**q0``) is at most ``group * p_max``, and times its block's scale product
    (two significands of at most ``scale_m``) below ``2**62`` (``scaled_bits``).  Every scale
    below 2**(r + 1) (``below_r1``), a scaled group sum is below ``group * p_max * 2**(q0 + sr
    + 2)``, ``sr`` the sum of its scales' raws; a group with a live product and a nonzero scale
    product counts with ``sr`` in the window exponent, so the quantum is at least ``sr - F``
    and the group's truncation (exact where it shifts left: the result fits) has at most
    ``F + 2 + q0 + ceil(log2(group * p_max))`` bits (``contrib_bits``); any other group adds 0.
    C's truncation is below 2**(F + 1) (the decoder's meaning of r, docs/datapaths.md §1): the
    step's total of ``step / group`` groups and C has at most ``max(contrib_bits, F + 1) +
    bits(step / group)`` bits, at most 62."""
    scaled = int(group * p_max * scale_m * scale_m).bit_length()
    contrib = max(0, F + 2 + q0 + int(group * p_max - 1).bit_length())
    total = max(contrib, F + 1) + int(step // group).bit_length()
    return Bound("group-scaled int64 budget", scaled <= 62 and below_r1 and total <= 62,
                 dict(scaled_bits=scaled, below_r1=below_r1, contrib_bits=contrib, total_bits=total, limit=62))
