"""The fast paths give the reference's words.

The numpy backend computes the common window datapaths (one product per
group, scaled or not) through a lean path (``mmasim/backends/numpy/lean.py``);
the compiled backend through lean kernels.  ``tests/test_backends.py`` compares
the two backends; here the lean numpy path is compared with the reference
accumulator itself (``mmasim.backends.numpy.reference`` of the model's plan) on every datapath it covers,
on random, near-one and edge-case words.
"""

import zlib

import numpy as np
import pytest

import mmasim
from mmasim.backends import kernel_for
from mmasim.backends.numpy import lean_path, reference
from mmasim.execution.model import Model
from mmasim.registry.build import get_registry

from wordgen import inputs as _inputs, seed  # noqa: E402

def _lean_models(arch):
    reg = get_registry()
    name = mmasim.registry.lookup.resolve_arch(reg, arch)
    out = []
    for dp in reg.architectures[name].datapaths:
        m = Model(dp, reg)
        if lean_path(m.plan) is not None:
            out.append(m)
    return out


# an architecture that inherits another one (Blackwell Ultra) has the same datapaths
# (tests/test_lookup_strict.py checks it); running them twice would test nothing new
@pytest.mark.parametrize("arch", [a for a in mmasim.architectures() if not get_registry().architectures[a].inherits])
def test_lean_numpy_window_matches_reference(arch):
    rng = np.random.default_rng(seed(arch + "lean"))
    for model in _lean_models(arch):
        dp = model.datapath
        for kind, a, b, c, kw in _inputs(model, rng):
            wa, wb, wc = (np.asarray(x, dtype=np.uint64) for x in (a, b, c))
            sa = sb = None
            if dp.scale:
                sa, sb = (np.asarray(kw[s], dtype=np.uint64) for s in ("scale_a", "scale_b"))
            ref = reference(model.plan, wa, wb, wc, sa, sb)
            got = lean_path(model.plan)(wa, wb, wc, sa, sb)
            bad = np.flatnonzero(got != ref)
            assert got.dtype == ref.dtype
            assert bad.size == 0, (
                f"{arch} {model.instruction} ({kind}): {bad.size} of {ref.size} words differ; first row {bad[0]}: "
                f"reference 0x{int(ref[bad[0]]):X} lean 0x{int(got[bad[0]]):X}"
            )


def test_lean_paths_cover_the_benchmarked_datapaths():
    for arch, ins, q in (("Ampere", "m16n8k16.f32.f16.f16.f32", {}), ("B200", "tcgen05.mma.kind::tf32", {}),
                         ("B200", "tcgen05.kind::mxf8f6f4.block_scale", dict(a_type="e4m3", b_type="e4m3"))):
        m = mmasim.MMA(arch, ins, **q)
        assert lean_path(m.plan) is not None
    from mmasim.backends.numpy.lean import LeanGrouped

    for ins in ("tcgen05.kind::mxf4nvf4.4X", "tcgen05.kind::mxf4.block_scale"):
        assert isinstance(lean_path(mmasim.MMA("B200", ins).plan), LeanGrouped)   # groups: the grouped lean path


def _grouped_cases(model, rng, rows=256):
    """Words aimed at the B200 group rules: C dominant (C at or above every product),
    C-relative groups (C between the groups' raws), results in the f32 subnormal range
    with blocks of different scales (the subnormal redo), cancelling groups, zero scales."""
    dp = model.datapath
    sfmt = model.scale_format
    k, nb = dp.k, dp.blocks
    out = []
    one = (sfmt.bias << sfmt.man_bits) if not sfmt.integer else 1
    a = rng.integers(0, 16, size=(rows, k), dtype=np.uint64)
    b = rng.integers(0, 16, size=(rows, k), dtype=np.uint64)
    sa = np.clip(one + rng.integers(-3, 4, size=(rows, nb)) * (1 << sfmt.man_bits)
                 + rng.integers(0, 1 << sfmt.man_bits, size=(rows, nb)), 1, None).astype(np.uint64)
    sb = sa[::-1].copy()
    for kind, e in (("c_dominant", 127 + 12), ("c_near", 127 + 3), ("c_equal", 127), ("c_small", 127 - 20)):
        c = ((np.uint64(e) + rng.integers(-2, 3, size=rows).astype(np.uint64)) << np.uint64(23)) \
            | rng.integers(0, 1 << 23, size=rows, dtype=np.uint64) | (rng.integers(0, 2, size=rows, dtype=np.uint64) << np.uint64(31))
        out.append((kind, a, b, c, sa, sb))
    # subnormal results: tiny scales, block scales differing, C zero or subnormal
    lo = 1 if sfmt.man_bits == 0 else 0
    tiny_a = rng.integers(lo, 4 * (1 << sfmt.man_bits), size=(rows, nb)).astype(np.uint64)
    tiny_b = rng.integers(lo, 4 * (1 << sfmt.man_bits), size=(rows, nb)).astype(np.uint64)
    if sfmt.man_bits == 0:   # ue8m0: 2**-127 .. 2**-124 each, products near 2**-250: below f32; lift one side
        tiny_b = (tiny_b + np.uint64(127 - 40) + rng.integers(0, 8, size=(rows, nb)).astype(np.uint64))
    c = np.where(rng.random(rows) < 0.5, 0, rng.integers(0, 1 << 23, size=rows)).astype(np.uint64) \
        | (rng.integers(0, 2, size=rows, dtype=np.uint64) << np.uint64(31))
    out.append(("subnormal", a, b, c, tiny_a, tiny_b))
    # block scales spread over many binades, C placed around the largest block product:
    # C dominant with products far below its window, C-relative groups, the scale floor
    ebias, M = sfmt.bias, sfmt.man_bits
    elo, ehi = (1 if sfmt.subnormals or M else 0) - ebias, (1 << sfmt.exp_bits) - 2 - ebias

    def scale_words(e):
        e = np.clip(e, elo, ehi)
        mant = rng.integers(0, 1 << M, size=e.shape) if M else np.zeros(e.shape, np.int64)
        mant = np.where((e == ehi) & (mant == (1 << M) - 1) & (M > 0), 0, mant)   # not the NaN code
        return (((e + ebias) << M) | mant).astype(np.uint64)

    def c_words(ec):
        ec = np.clip(ec, -126, 127)
        return (((ec + 127) << 23).astype(np.uint64) | rng.integers(0, 1 << 23, size=rows, dtype=np.uint64)
                | (rng.integers(0, 2, size=rows, dtype=np.uint64) << np.uint64(31)))

    span = min(40, (ehi - elo) // 2)
    ea = rng.integers(-span, span + 1, size=(rows, nb))
    eb = rng.integers(-span, span + 1, size=(rows, nb))
    # one block at the top, the others 28-42 binades below (or anywhere)
    top = rng.integers(-span // 2, span // 2 + 1, size=(rows, 1))
    es = np.where(rng.random((rows, nb)) < 0.7, top - rng.integers(28, 43, size=(rows, nb)),
                  top - rng.integers(0, 2 * span, size=(rows, nb)))
    es[np.arange(rows), rng.integers(0, nb, size=rows)] = top[:, 0]
    ha = np.clip(es // 2, elo, ehi)
    sa2, sb2 = scale_words(ha), scale_words(es - ha)
    top = top[:, 0]
    for kind, lo_, hi_, s1, s2 in (("spread_c_dominant", 20, 46, ea, eb), ("spread_c_relative", -8, 12, ea, eb),
                                   ("block_c_dominant", 20, 46, None, None), ("block_c_relative", -2, 6, None, None)):
        if s1 is None:
            out.append((kind, a, b, c_words(top + rng.integers(lo_, hi_, size=rows)), sa2, sb2))
        else:
            t = (np.clip(s1, elo, ehi) + np.clip(s2, elo, ehi)).max(axis=-1)
            out.append((kind, a, b, c_words(t + 4 + rng.integers(lo_, hi_, size=rows)),
                        scale_words(s1), scale_words(s2)))
    # the top block's products cancel against C exactly (C between the block's scale and its
    # largest product raw), the other blocks 26-40 binades below: the C-relative truncation and
    # the scale floor decide the low bits that reach D
    at = a.copy()
    bt = b.copy()
    big = rng.random(rows) < 0.5
    blk = dp.block
    at[:, :blk] = 0
    bt[:, :blk] = 0
    at[:, 0] = np.where(big, 7, 5)          # 6 or 3
    bt[:, 0] = np.where(big, 7, 5)          # 36 or 9
    at[:, 1] = np.where(big, 7, 5)
    bt[:, 1] = np.where(big, 14, 12)        # -24 or -6
    t = rng.integers(-span // 2, span // 2 + 1, size=rows)
    es = t[:, None] - rng.integers(26, 41, size=(rows, nb))
    es[:, 0] = t
    ha = np.clip(es // 2, elo, ehi)
    hb = np.clip(es - ha, elo, ehi)
    sa3, sb3 = (((h + ebias) << M).astype(np.uint64) for h in (ha, hb))   # scale significands 1
    tt = ha[:, 0] + hb[:, 0]
    cval_e = tt + np.where(big, 3, 1)       # -12 = -1.5 * 2**3, -3 = -1.5 * 2**1
    c = (np.uint64(1) << np.uint64(31)) | ((cval_e + 127).astype(np.uint64) << np.uint64(23)) | np.uint64(1 << 22)
    out.append(("cancel_top", at, bt, c, sa3, sb3))
    if M and sfmt.subnormals:
        # the same with the top block at the largest scale and the others at the smallest
        # (subnormal) one: their last bits fall between the scale floor and E - F
        sa4 = np.full((rows, nb), 1, dtype=np.uint64)
        etop = ehi + (1 if sfmt.nan == "max" else 0)   # e4m3-like: the top exponent code is finite
        sa4[:, 0] = np.uint64((etop + ebias) << M)
        cval_e = 2 * etop + np.where(big, 3, 1)
        c = (np.uint64(1) << np.uint64(31)) | ((cval_e + 127).astype(np.uint64) << np.uint64(23)) | np.uint64(1 << 22)
        out.append(("cancel_top_floor", at, bt, c, sa4, sa4.copy()))
    if ehi - elo > 200:   # scales reach the f32 subnormal range: results there, blocks of other scales
        t = -140 + rng.integers(-6, 7, size=(rows, 1))
        es = t - rng.integers(0, 46, size=(rows, nb))
        es[np.arange(rows), rng.integers(0, nb, size=rows)] = t[:, 0]
        half = es // 2
        c = np.where(rng.random(rows) < 0.5, 0, rng.integers(0, 1 << 20, size=rows)).astype(np.uint64) \
            | (rng.integers(0, 2, size=rows, dtype=np.uint64) << np.uint64(31))
        out.append(("subnormal_redo", a, b, c, scale_words(half), scale_words(es - half)))
    # cancelling groups: b the negation of a pairwise
    a2 = a.copy()
    b2 = a.copy()
    b2[:, 1::2] = a[:, 0::2] ^ np.uint64(8)
    a2[:, 1::2] = a[:, 0::2]
    b2[:, 0::2] = a[:, 0::2]
    out.append(("cancel", a2, b2, c, sa, sb))
    # zero scales in some blocks (ue4m3 has a zero)
    sz = sa.copy()
    sz[rng.random(sz.shape) < 0.3] = 0
    out.append(("zero_scale", a, b, c, sz, sb))
    # one block per row holding only zero products (b zero there) under scales above every
    # other block's: it must not raise the scale floor (the subnormal, C-relative and
    # floor-decided families again)
    dead = rng.integers(0, nb, size=rows)
    cols = dead[:, None] * dp.block + np.arange(dp.block)
    top = np.uint64((ehi + ebias) << M)
    for kind, a_, b_, c_, sa_, sb_ in [x for x in out if x[0] in ("subnormal", "subnormal_redo", "cancel_top",
                                                                  "spread_c_relative", "block_c_relative")]:
        bd = b_.copy()
        np.put_along_axis(bd, cols, np.uint64(0), axis=1)
        sad, sbd = sa_.copy(), sb_.copy()
        for s in (sad, sbd):
            lift = s.max(axis=1) + (rng.integers(1, 40, size=rows) << M).astype(np.uint64)
            s[np.arange(rows), dead] = np.minimum(lift, top)
        out.append((kind + "_dead_top_block", a_, bd, c_, sad, sbd))
    return out


@pytest.mark.parametrize("ins", ["tcgen05.kind::mxf4nvf4.4X", "tcgen05.kind::mxf4.block_scale",
                                 "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::2X.block32.f32.e2m1.e2m1.ue8m0",
                                 "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue8m0"])
def test_lean_grouped_window_matches_reference(ins):
    """The grouped lean numpy path (B200 NVFP4 / MXF4 rules) against the reference on
    words aimed at each rule, plus the generic random / near-one / edge families."""
    from mmasim.backends.numpy.lean import LeanGrouped

    model = mmasim.MMA("B200", ins)
    lean = lean_path(model.plan)
    assert isinstance(lean, LeanGrouped)
    rng = np.random.default_rng(zlib.crc32(ins.encode()))
    cases = _grouped_cases(model, rng)
    for kind, a, b, c, kw in _inputs(model, rng):
        cases.append((kind, a, b, c, kw["scale_a"], kw["scale_b"]))
    hit = {"subnormal": 0}
    for kind, a, b, c, sa, sb in cases:
        wa, wb, wc, sa, sb = (np.asarray(x, dtype=np.uint64) for x in (a, b, c, sa, sb))
        ref = reference(model.plan, wa, wb, wc, sa, sb)
        got = lean(wa, wb, wc, sa, sb)
        bad = np.flatnonzero(got != ref)
        assert got.dtype == ref.dtype
        assert bad.size == 0, (f"{ins} ({kind}): {bad.size} of {ref.size} words differ; first row {bad[0]}: "
                               f"reference 0x{int(ref[bad[0]]):X} lean 0x{int(got[bad[0]]):X}")
        hit["subnormal"] += int((((ref >> np.uint64(23)) & np.uint64(0xFF)) == 0).sum())
    if "subnormal_redo" in model.datapath.parameters:
        assert hit["subnormal"] > 0


def _numba_fp4_matches_reference(model, ins, cases, rng, M, N):
    """Every case ``(kind, a, b, c, scale_a, scale_b)`` through ``Model.dot`` on the numba backend
    word for word against the numpy reference, then the matrix form (row i of A against column
    j of B, scales per row / column, M x N) against the numpy backend."""
    for kind, a, b, c, sa, sb in cases:
        wa, wb, wc, sa, sb = (np.asarray(x, dtype=np.uint64) for x in (a, b, c, sa, sb))
        ref = reference(model.plan, wa, wb, wc, sa, sb)
        got = np.asarray(model.dot(wa.astype(np.uint8), wb.astype(np.uint8), wc.astype(np.uint32),
                                   scale_a=sa.astype(np.uint8), scale_b=sb.astype(np.uint8), backend="numba"))
        got = got.view(np.uint32) if got.dtype != np.uint32 else got
        bad = np.flatnonzero(got != ref)
        assert bad.size == 0, (f"{ins} ({kind}): {bad.size} of {ref.size} words differ; first row {bad[0]}: "
                               f"reference 0x{int(ref[bad[0]]):X} numba 0x{int(got[bad[0]]):X}")
    dp = model.datapath
    A = rng.integers(0, 16, size=(M, dp.k), dtype=np.uint64).astype(np.uint8)
    B = rng.integers(0, 16, size=(dp.k, N), dtype=np.uint64).astype(np.uint8)
    C = np.resize(cases[0][3], M * N).reshape(M, N).astype(np.uint32)
    SA = np.resize(cases[0][4], (M, dp.blocks)).astype(np.uint8)
    SB = np.resize(cases[0][5], (N, dp.blocks)).T.astype(np.uint8).copy()
    got = np.asarray(model(A, B, C, scale_a=SA, scale_b=SB, backend="numba"))
    want = np.asarray(model(A, B, C, scale_a=SA, scale_b=SB, backend="numpy"))
    assert (got.view(np.uint32) == want.view(np.uint32)).all()


@pytest.mark.parametrize("ins", ["tcgen05.kind::mxf4nvf4.4X", "tcgen05.kind::mxf4.block_scale",
                                 "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue8m0"])
def test_compiled_grouped_window_matches_reference(ins):
    """The compiled grouped kernel (window_grouped_kernel) against the reference on the
    same rule-aimed words, through Model.dot (vector form) and the matrix form."""
    pytest.importorskip("numba")
    model = mmasim.MMA("B200", ins)
    kern = kernel_for(model)
    assert kern is not None and kern.fn.__name__.startswith("window_grouped_kernel")
    rng = np.random.default_rng(zlib.crc32(ins.encode()) + 1)
    cases = _grouped_cases(model, rng)
    for kind, a, b, c, kw in _inputs(model, rng):
        cases.append((kind, a, b, c, kw["scale_a"], kw["scale_b"]))
    # matrix form: 128 x 8, the one M of the block-scaled fp4 kinds, the smallest N
    _numba_fp4_matches_reference(model, ins, cases, rng, 128, 8)


_GST = ("mma.sync.kind::mxf4.block_scale.scale_vec::2X.block32.m16n8k64.f32.e2m1.e2m1.ue8m0",
        "mma.sync.kind::mxf4nvf4.block_scale.scale_vec::2X.block32.m16n8k64.f32.e2m1.e2m1.ue8m0",
        "mma.sync.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.m16n8k64.f32.e2m1.e2m1.ue8m0",
        "mma.sync.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.m16n8k64.f32.e2m1.e2m1.ue4m3")


@pytest.mark.parametrize("ins", _GST)
def test_compiled_group_scaled_joint_matches_reference(ins):
    """The compiled group-scaled joint kernel (RTX Blackwell GST-FDPA) against the reference
    on the rule-aimed words of the grouped window (C dominant or near, cancelling groups, zero
    scales, blocks without a live product under the largest scales, subnormal results), on
    zero C under scales whose products lie around e_zero, and on the generic random /
    near-one / edge families, through Model.dot and the matrix form."""
    pytest.importorskip("numba")
    model = mmasim.MMA("RTX Blackwell", ins)
    kern = kernel_for(model)
    assert kern is not None and kern.fn.__name__.startswith("group_scaled_joint_kernel")
    rng = np.random.default_rng(zlib.crc32(ins.encode()) + 2)
    cases = _grouped_cases(model, rng)
    sfmt, dp = model.scale_format, model.datapath
    rows = 256
    # scale products from 2**-170 to 2**-110 (around e_zero -139), C zero or tiny
    e = rng.integers(-85, -54, size=(rows, dp.blocks))
    sw = (np.clip(e + sfmt.bias, 1, (1 << sfmt.exp_bits) - 2) << sfmt.man_bits).astype(np.uint64)
    c = np.where(rng.random(rows) < 0.7, 0, rng.integers(0, 1 << 23, size=rows)).astype(np.uint64)
    cases.append(("e_zero", cases[0][1], cases[0][2], c, sw, sw[::-1].copy()))
    # a zero scale word (ue4m3 0x00; ue8m0 has none: 0x00 is 2**-127) on the first block of
    # every other row, under live products (e2m1 6.0) and beside a large B scale, no live
    # product in the other blocks (scale words 0x01), C with 24 significant bits from 2**-40 down: the zero-scale block counts
    # at e_zero, not at the raw exponent of its zero scale (which would move the window's
    # quantum above C's last bits)
    six = np.zeros((rows, dp.k), np.uint64)
    six[:, :dp.block] = 0x7                                  # live products in the first block only
    lo_a = np.full((rows, dp.blocks), 0x01, np.uint64)
    lo_a[::2, 0] = 0
    c = ((127 - 40) << 23 | rng.integers(0, 1 << 23, size=rows)).astype(np.uint64)
    lo_b = np.full((rows, dp.blocks), 0x01, np.uint64)
    lo_b[:, 0] = (5 + sfmt.bias) << sfmt.man_bits           # 2**5 beside the zero
    cases.append(("zero scale", six, six, c, lo_a, lo_b))
    for kind, a, b, c, kw in _inputs(model, rng):
        cases.append((kind, a, b, c, kw["scale_a"], kw["scale_b"]))
    _numba_fp4_matches_reference(model, ins, cases, rng, 16, 8)


def test_lean_code_table_decode_is_decode_float():
    """The lean decode of wide formats (a table over the bits above the fraction,
    built by decode_float, plus the fraction field) against decode_float itself on
    every sign-and-exponent code with edge and random fractions and low container
    bits: A / B as (signed m, q), C / D as (special, live, sign, m, q, r)."""
    from mmasim.backends.numpy.lean import LSQ, LZQ, _Decode
    from mmasim.arith.decode import FINITE, INF, ZERO, decode_float

    reg = get_registry()
    rng = np.random.default_rng(11)
    for key in ("f32", "tf32", "f16"):
        fmt = reg.formats[key]
        M, top = fmt.man_bits, fmt.field_shift + fmt.man_bits
        codes = np.arange(1 << (fmt.container_bits - top), dtype=np.uint64)
        fracs = np.array([0, 1, 2, (1 << M) - 1, 1 << (M - 1)] + list(rng.integers(0, 1 << M, 20)), dtype=np.uint64)
        words = (codes[:, None] << np.uint64(top)) | (fracs[None, :] << np.uint64(fmt.field_shift))
        if fmt.field_shift:
            words |= rng.integers(0, 1 << fmt.field_shift, words.shape).astype(np.uint64)
        words = words.reshape(-1)
        ref = decode_float(fmt, words)
        c = _Decode(fmt, decode_float, whole=False)
        assert c.ok, key
        special, live, sign, m, q, r = c.c_terms(words)
        fin = ref.cls == FINITE
        assert (special == (ref.cls >= INF)).all() and (live == fin).all()
        ok = ref.cls < INF
        for got, want in ((sign, ref.sign), (m, ref.m), (q, ref.q), (r, ref.r)):
            assert (got[ok] == want[ok]).all(), key
        if fmt.container_bits > 16:    # A / B: the same tables, signed, classes folded into q
            ab = _Decode(fmt, decode_float)
            sm, sq = ab(words)
            assert (sm[fin] == ref.signed_m()[fin]).all() and (sq[fin] == ref.q[fin]).all()
            assert (sq[ref.cls == ZERO] == LZQ).all() and (sq[ref.cls >= INF] == LSQ).all()