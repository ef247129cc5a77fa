"""The window family's fast paths (``window``: T-FDPA, ST-FDPA, the B200 block-scaled
window): which one takes a plan, and why each is exact.

The numpy lean paths (:class:`~mmasim.backends.numpy.lean.LeanWindow`:
:func:`lean_window`; :class:`~mmasim.backends.numpy.lean.LeanGrouped`: :func:`lean_grouped`)
and the numba window kernels (:func:`mmasim.backends.numba.kernels._window`: the tile kernel,
:func:`lane_tiles`; the grouped kernel, :func:`grouped_tiles`; the general kernel,
:func:`numba_window`), which the CUDA bodies take as well (:data:`mmasim.backends.cuda.rows.BODIES`:
:func:`one_product_window`, :func:`numba_window`); the bound proofs of each
(:func:`lean_window_bound`, :func:`grouped_bound`, :func:`lane_bound`).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from mmasim.arith.codes import GROUP_DEAD
from mmasim.arith.decode import decode_float
from mmasim.backends.fastpaths.shared import (
    Bound,
    Decision,
    TileLayout,
    code_facts,
    code_tables,
    joint_table,
    scale_facts,
    word_facts,
    word_tables,
)

#: the parameters of the window accumulator that make more than one product per group
#: or that read C beyond its window (the grouped paths and the general kernels')
GROUP_RULES = ("c_dominant", "c_relative", "subnormal_redo")


# ------------------------------------------------------------- eligibility
def _window_base(plan):
    """The reason the built-in window accumulator's fast paths cannot take ``plan``, or ''."""
    if not plan.builtin or plan.datapath.accumulator != "window":
        return "not the built-in 'window' accumulator"
    if plan.encoding.mode not in ("rz", "rne"):
        return f"rounding mode {plan.encoding.mode!r} (rz or rne only)"
    if not plan.declared:
        return "parameters not declared by the accumulator's Params"
    return ""


def one_product_window(plan) -> Decision:
    """Whether ``plan`` is the truncating window with one product per group (``group`` 1,
    none of :data:`GROUP_RULES`), scaled or not, of the built-in accumulator: the datapaths
    of the one-product fast paths of both backends (:func:`lean_window`, :func:`lane_tiles`;
    sparse datapaths reach the compiled kernel as dense rows)."""
    path = "one product per group"
    why = _window_base(plan)
    if why:
        return Decision(path, why)
    p = plan.datapath.parameters
    if int(p.get("group", 1)) != 1:
        return Decision(path, f"group {p['group']}")
    rules = [rule for rule in GROUP_RULES if p.get(rule) is not None]
    if rules:
        return Decision(path, "group rules " + ", ".join(rules))
    if p.get("scale_floor") is not None and plan.datapath.scale is None:
        return Decision(path, "scale_floor without scales")
    return Decision(path)


class LeanFormat(NamedTuple):
    """The lean numpy decode of one format: ``tables`` over every word (``shift`` None) or over
    the codes above the fraction field (``shift`` = the fraction field's end, ``low`` its
    mask); every live entry's r - q is ``off``; significands have at most ``bits`` bits."""

    tables: tuple
    shift: object
    low: int
    off: int
    bits: int


@functools.lru_cache(maxsize=None)
def lean_format(fmt, decoder, whole=True) -> Decision:
    """The lean numpy decode of one format (:class:`LeanFormat` as ``lean``): through
    :func:`word_tables` (``whole``, containers of up to 16 bits), else :func:`code_tables`.
    Its folding of the classes into q needs |m| < 2**30 and |q| < 2**20 (zero at
    ``LZQ`` = -2**30, inf / NaN at ``LSQ`` = 2**36, a product's q alone telling them apart),
    and a product's raw exponent read as q plus one offset per format pair needs r - q
    constant over the live entries."""
    path = "lean numpy decode"
    if whole and fmt.container_bits <= 16:
        tables, facts, shift, low = word_tables(fmt, decoder), word_facts(fmt, decoder), None, 0
    else:
        tables, facts = code_tables(fmt, decoder), code_facts(fmt, decoder)
        if tables is None:
            return Decision(path, f"{fmt.key}: no word or code tables")
        shift, low = fmt.field_shift + fmt.man_bits, (1 << fmt.man_bits) - 1
    if not facts.sane or facts.m_max_all >= 1 << 30:
        return Decision(path, f"{fmt.key}: a class, sign or significand out of range")
    if shift is None and not facts.exact_zero:
        return Decision(path, f"{fmt.key}: a finite word with m 0 or a zero with m != 0")
    if facts.q_abs >= 1 << 20:
        return Decision(path, f"{fmt.key}: |q| {facts.q_abs} >= 2**20")
    if len(facts.offsets) > 1:
        return Decision(path, f"{fmt.key}: r - q not constant ({facts.offsets})")
    off = facts.offsets[0] if facts.offsets else 0
    return Decision(path, lean=LeanFormat(tables, shift, low, off, int(facts.m_max + low).bit_length()))


def lean_window(plan) -> Decision:
    """The numpy :class:`~mmasim.backends.numpy.lean.LeanWindow`: the dense one-product window
    (:func:`one_product_window`) with A and B of a :func:`lean_format`, scales (if any) in
    containers of up to 16 bits with a finite word, and :func:`lean_window_bound`.  Facts:
    ``a``, ``b`` (:class:`LeanFormat`), ``roff`` (r - q of an A x B product), ``bound``."""
    path = "numpy LeanWindow"
    if plan.datapath.sparse:
        return Decision(path, "sparse (the reference selects)")
    shape = one_product_window(plan)
    if not shape:
        return Decision(path, shape.reason)
    ab = [lean_format(fmt, plan.decoder(fmt)) for fmt in (plan.a_format, plan.b_format)]
    for d in ab:
        if not d:
            return Decision(path, d.reason)
    a, b = ab[0].lean, ab[1].lean
    roff = a.off + b.off
    F = int(plan.parameters["F"])
    bits, below, nf, soff = a.bits + b.bits, a.bits <= a.off + 1 and b.bits <= b.off + 1, 2, 0
    if plan.datapath.scale is not None:
        s, why = scale_facts(plan.scale_format, plan.decoder(plan.scale_format))
        if s is None:
            return Decision(path, why)
        soff, nf = s.offsets[0], 4
        bits += 2 * s.m_max.bit_length()
        below = below and s.below_r1
    bound = lean_window_bound(F, roff, soff, bits, nf, plan.step, below)
    if not bound:
        return Decision(path, bound.why_not())
    return Decision(path, a=a, b=b, roff=roff, bound=bound)


def lean_grouped(plan) -> Decision:
    """The numpy :class:`~mmasim.backends.numpy.lean.LeanGrouped` (and, through
    :func:`grouped_tiles`, the numba grouped kernel): the dense grouped block-scaled window,
    zeros excluded, more than one product per group or group rules, every group (and
    C-dominant group) inside one scale block and every block inside one step, A and B
    :func:`narrow_format` s of 16 bits together, scales in containers of up to 16 bits with
    finite words at or above their q, and :func:`grouped_bound`.  Facts: ``joint``
    (:class:`JointTable`), ``group``, ``cd`` (``(F, group)`` of ``c_dominant`` or None),
    ``bound``."""
    path = "numpy LeanGrouped"
    dp = plan.datapath
    why = _window_base(plan)
    if why:
        return Decision(path, why)
    if dp.sparse:
        return Decision(path, "sparse (the reference selects)")
    if dp.scale is None:
        return Decision(path, "no block scales")
    p = plan.parameters
    if p.get("zeros", "excluded") != "excluded":
        return Decision(path, "zeros counted (e_zero)")
    if one_product_window(plan):
        return Decision(path, "one product per group (numpy LeanWindow's)")
    g = int(p.get("group", 1))
    cd = None if p.get("c_dominant") is None else (int(p["c_dominant"]["F"]), int(p["c_dominant"]["group"]))
    block, k, step = dp.block, dp.k, plan.step
    cg = cd[1] if cd else g
    if not block or block % g or block % cg or cg % g or step % block or k % step:
        return Decision(path, f"groups {g} / {cg} not inside blocks of {block}, or blocks not inside steps of {step}")
    jt = joint_table(plan)
    if not jt:
        return Decision(path, jt.reason)
    joint = jt.joint
    s, why = scale_facts(plan.scale_format, plan.decoder(plan.scale_format))
    if s is None:
        return Decision(path, why)
    bound = grouped_bound(int(p["F"]), cd[0] if cd else 0, cg, step, int(np.abs(joint.P).max()), joint.roff,
                          s.offsets[0], s.below_r1)
    if not bound:
        return Decision(path, bound.why_not())
    return Decision(path, joint=joint, group=g, cd=cd, bound=bound)


class LaneFacts(NamedTuple):
    """An A / B (or scale) format of the numba tile kernels: ``mode`` 0 tabled (every word),
    1 decoded arithmetically (wide IEEE formats with subnormals); significands of at most
    ``bits`` bits, every |r| at most ``rmax``."""

    mode: int
    bits: int
    rmax: int


@functools.lru_cache(maxsize=None)
def lane_format(fmt, decoder, layout: TileLayout) -> Decision:
    """The binary64 lane decode of an A / B format (:class:`LaneFacts` as ``lane``).

    Containers of up to 16 bits are tabled: every live word's exact value is a binary64 of at
    most 52 - ``tcode`` significant bits (its low ``tcode`` bits then hold r + ``rbias``, with
    every |r| below ``rbias / 2``), |q| < 2**9, and every value below 2**(r + 1) (the sum bound
    of :func:`lane_bound`).  Wider formats: decoded arithmetically where they are
    :func:`~mmasim.arith.decode.decode_float` IEEE formats with subnormals, signed, of at most
    32 bits, E <= 11, M <= 26 and bias <= 1022 (their values are exact binary64s scaled by
    2**(1023 - bias))."""
    path = "lane decode"
    if fmt.container_bits > 16:
        E, M = fmt.exp_bits, fmt.man_bits
        if (decoder is decode_float and fmt.nan == "ieee" and fmt.subnormals and fmt.signed
                and not fmt.integer and fmt.container_bits <= 32 and E <= 11 and M <= 26 and fmt.bias <= 1022):
            return Decision(path, lane=LaneFacts(1, M + 1, max(fmt.bias, (1 << E) - 1 - fmt.bias)))
        return Decision(path, f"{fmt.key}: over 16 bits and not an IEEE format decoded arithmetically")
    f = word_facts(fmt, decoder)
    if not f.sane or not f.exact_zero or f.m_max_all >= 1 << (52 - layout.tcode):
        return Decision(path, f"{fmt.key}: a class, sign or significand out of range")
    if f.q_abs >= 1 << 9 or f.r_abs >= layout.rbias // 2:
        return Decision(path, f"{fmt.key}: |q| {f.q_abs} or |r| {f.r_abs} out of range")
    if not f.below_r1:
        return Decision(path, f"{fmt.key}: a value not below 2**(r + 1)")
    return Decision(path, lane=LaneFacts(0, f.m_max.bit_length(), f.r_abs))


@functools.lru_cache(maxsize=None)
def lane_scale(fmt, decoder, layout: TileLayout) -> Decision:
    """The scale format of the tile kernels (:class:`LaneFacts` as ``lane``): containers of up
    to 16 bits with a finite word, every value below 2**(r + 1) and |q| < ``neg_f / 2`` (the
    product of two scales is scaled exactly by ``tiles._lane_scales``)."""
    path = "lane scale decode"
    f, why = scale_facts(fmt, decoder)
    if f is None:
        return Decision(path, why)
    if not f.below_r1:
        return Decision(path, f"scale format {fmt.key}: a value not below 2**(r + 1)")
    if f.q_abs >= layout.neg_f // 2:
        return Decision(path, f"scale format {fmt.key}: |q| {f.q_abs} >= {layout.neg_f // 2}")
    return Decision(path, lane=LaneFacts(0, f.m_max.bit_length(), f.r_abs))


def _lane_ab(plan, layout, path):
    ab = [lane_format(fmt, plan.decoder(fmt), layout) for fmt in (plan.a_format, plan.b_format)]
    for d in ab:
        if not d:
            return None, Decision(path, d.reason)
    return (ab[0].lane, ab[1].lane), None


def lane_tiles(plan, layout: TileLayout, c_kind: int, d_kind: int) -> Decision:
    """The numba tile kernel (``tiles.lean_variant``) in binary64 lanes: the one-product
    window (:func:`one_product_window`), A and B of a :func:`lane_format`, decoded alike;
    scales (if any) of a :func:`lane_scale`, A and B tabled, and not e_zero with a
    scale floor; C and D of a tile decode (``c_kind`` / ``d_kind`` > 0:
    ``tiles._c_kind`` of their decode specs), an even step (two elements per pass), and
    :func:`lane_bound`.  Facts: ``mode`` (A / B decode), ``bound``."""
    path = "numba lane tiles"
    lanes, no = _lane_ab(plan, layout, path)
    if no is not None:
        return no
    shape = one_product_window(plan)
    if not shape:
        return Decision(path, shape.reason)
    a, b = lanes
    bits, rmax, nf = a.bits + b.bits, a.rmax + b.rmax, 2
    p = plan.parameters
    if plan.datapath.scale is not None:
        s = lane_scale(plan.scale_format, plan.decoder(plan.scale_format), layout)
        if not s:
            return Decision(path, s.reason)
        if a.mode or b.mode:
            return Decision(path, "block scales with an A / B format decoded arithmetically")
        if p.get("zeros", "excluded") != "excluded" and p.get("scale_floor") is not None:
            return Decision(path, "e_zero with a scale floor")
        bits, rmax, nf = bits + 2 * s.lane.bits, rmax + 2 * s.lane.rmax, 4
    cd_r = max(max(f.bias, (1 << f.exp_bits) - f.bias) for f in (plan.c_format, plan.d_format))
    bound = lane_bound(int(p["F"]), plan.step, bits, nf, rmax, cd_r, layout.neg_f)
    if not bound:
        return Decision(path, bound.why_not())
    if plan.step % 2:
        return Decision(path, f"odd step {plan.step} (two elements per pass)")
    if a.mode != b.mode:
        return Decision(path, "A and B decoded differently (one tabled, one arithmetically)")
    if c_kind <= 0 or d_kind <= 0:
        return Decision(path, "C or D not an IEEE format with subnormals decoded arithmetically")
    return Decision(path, mode=a.mode, bound=bound)


def grouped_tiles(plan, layout: TileLayout) -> Decision:
    """The numba grouped kernel (``window.grouped_variant``): A and B of a
    :func:`lane_format` (the kernel shares the tile kernels' build), more than one product
    per group or a C-dominant group, the numpy :func:`lean_grouped` (its joint table and its
    bound), and the kernel's dead code that of the joint table.  Facts: ``joint``."""
    path = "numba grouped tiles"
    _, no = _lane_ab(plan, layout, path)
    if no is not None:
        return no
    p = plan.parameters
    if int(p.get("group", 1)) <= 1 and p.get("c_dominant") is None:
        return Decision(path, "one product per group, no C-dominant group")
    g = lean_grouped(plan)
    if not g:
        return Decision(path, g.reason)
    if layout.dead != GROUP_DEAD:
        return Decision(path, f"the kernel's dead code {layout.dead} is not the joint table's {GROUP_DEAD}")
    return Decision(path, joint=g.joint, bound=g.bound)


def numba_window(plan) -> Decision:
    """The numba general window kernel (``window.window_kernel``, every word, every
    parameter; also what the tile kernels fall back to): the built-in window, a scale floor
    or subnormal redo only with scales, and steps of whole groups and C-dominant groups."""
    path = "numba window_kernel"
    why = _window_base(plan)
    if why:
        return Decision(path, why)
    p = plan.parameters
    if (p.get("scale_floor") is not None or p.get("subnormal_redo") is not None) and plan.datapath.scale is None:
        return Decision(path, "scale_floor / subnormal_redo without scales")
    cd = p.get("c_dominant")
    if plan.step % int(p.get("group", 1)) or (cd is not None and plan.step % int(cd["group"])):
        return Decision(path, f"step {plan.step} not whole groups")
    return Decision(path)


# ------------------------------------------------------------------ proofs
def lean_window_bound(F, roff, scale_off, bits, factors, step, below_r1) -> Bound:
    """Every int64 of the numpy LeanWindow is exact.

    A live product ``p * 2**q`` (``p`` the signed product of the A, B (and two scale)
    significands, at most ``bits`` bits) has the raw exponent ``r_p = q + roff`` (+ the two
    scales' r - q, each at least ``scale_off``), and the window's quantum is at least
    ``E - F >= r_p - F``.  Its truncation ``shift(|p|, q - quantum)`` shifts left by at most
    ``S = max(0, F - roff - 2 * scale_off)`` (``scale_off`` 0 unscaled), so every shifted
    product is below ``2**(bits + S) <= 2**62``.  Every factor below 2**(r + 1) (``below_r1``:
    A / B significands of at most r - q + 1 bits, every scale word), a product is below
    ``2**(r_p + factors)`` and its truncation below ``2**(F + factors)``; C's, by the
    decoder's meaning of r (docs/datapaths.md §1), below ``2**(F + 1)``: a step's total is
    below ``(step + 1) * 2**(F + factors) <= 2**(F + factors + bits(step)) <= 2**62``."""
    S = max(0, F - roff - 2 * scale_off)
    total = F + factors + int(step).bit_length()
    return Bound("lean window int64 bound", bits + S <= 62 and below_r1 and total <= 62,
                 dict(bits=bits, S=S, shifted_bits=bits + S, below_r1=below_r1, total_bits=total, limit=62))


def grouped_bound(F, Fc, cg, step, p_max, roff, scale_off, below_r1) -> Bound:
    """Every int32 and int64 of the grouped paths (numpy LeanGrouped, the numba grouped
    kernel) is exact.

    A joint table entry is at most ``p_max`` in magnitude and a group (or C-dominant group)
    sums ``cg`` of them: below ``2**31`` when ``p_max * cg < 2**31`` (the int32 group sums).
    The joint exponents sit at or below the raws (``roff`` >= 0, every scale's r - q >=
    ``scale_off`` >= 0).  Every finite factor is below 2**(r + 1) (A / B by
    :func:`narrow_format`; the scales: ``below_r1``), so a group sum is below
    ``cg * 2**(gr + 4)`` (four factors) and every quantum is at least ``gr - max(F, Fc)``: a
    truncated group sum has at most ``max(F, Fc) + 4 + bits(cg)`` bits, the step's total of at
    most ``step`` groups and C ``bits(step) + 1`` more, at most 62."""
    total = max(F, Fc) + 4 + int(cg).bit_length() + int(step).bit_length() + 1
    holds = p_max * cg < 1 << 31 and roff >= 0 and scale_off >= 0 and below_r1 and total <= 62
    return Bound("grouped int32 / int64 budget", holds,
                 dict(group_sum=p_max * cg, int32_limit=1 << 31, roff=roff, scale_off=scale_off, below_r1=below_r1,
                      total_bits=total, limit=62))


def lane_bound(F, step, bits, factors, rmax, cd_r, neg_f) -> Bound:
    """The numba tile kernel's binary64 lanes are exact.

    Every factor is below 2**(r + 1) (checked per format by :func:`lane_format` /
    :func:`lane_scale`), so a live product is below ``2**(r_p + factors)`` with ``r_p <= E``,
    and its truncation ``trunc(p * 2**-quantum)`` (quantum >= E - F) below
    ``2**(F + factors)``.  The product is exact in binary64 when its significand has at most
    53 bits (``bits``, the factors' together); scaling it by a power of two is exact (or the
    result is below 1 and truncates to 0 either way); truncation is exact; every partial sum
    of the step's truncated products is an integer below ``step * 2**(F + factors) <=
    2**(F + factors + bits(step)) <= 2**53``, so exact.  Every |r| (products: ``rmax``, C and
    D: ``cd_r``) stays inside the range where ``2**-quantum`` is built:
    ``max(rmax, cd_r) + F + 64 < neg_f``."""
    total = F + factors + int(step).bit_length()
    reach = max(rmax, cd_r) + F + 64
    return Bound("binary64 lane bound", bits <= 53 and total <= 53 and reach < neg_f,
                 dict(product_bits=bits, total_bits=total, limit=53, exponent_reach=reach, neg_f=neg_f))
