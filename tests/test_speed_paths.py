"""The fast paths give the reference's words.

The numpy backend computes the common window datapaths (one product per
group, scaled or not) through a lean path (``mmasim/backends/numpy_lean.py``);
the compiled backend through lean kernels.  ``tests/test_backends.py`` compares
the two backends; here the lean numpy path is compared with the reference
accumulator itself (``Model._steps_reference``) on every datapath it covers,
on random, near-one and edge-case words.
"""

import numpy as np
import pytest

import mmasim
from mmasim.model import Model
from mmasim.registry import get_registry

ROWS = 96   # rows per input family (uniform, near one, edges, mixed)


def _edge_fields(fmt):
    """Field values that hit the corners of a format."""
    bits = fmt.field_bits
    if fmt.integer:
        top = 1 << (bits - 1)
        vals = [0, 1, 2, top - 1, top, top + 1, (1 << bits) - 1, (1 << bits) - 2]
    else:
        E, M = fmt.exp_bits, fmt.man_bits
        emax = (1 << E) - 1
        mags = [0, 1, (1 << M) - 1 if M else 0, 1 << M, (min(fmt.bias, emax)) << M,
                (emax << M), (emax << M) | 1, (emax << M) | ((1 << M) - 1),
                ((emax - 1) << M) | ((1 << M) - 1), (1 << (E + M)) - 1]
        vals = list(mags)
        if fmt.signed:
            vals += [v | (1 << (E + M)) for v in mags]
    return np.array(sorted({v & ((1 << bits) - 1) for v in vals}), dtype=np.uint64)


def _words(fmt, shape, rng, kind):
    """Container words of ``fmt``: kind "uniform", "near_one", "edge" or "mixed"."""
    cbits = fmt.container_bits
    if kind == "uniform":
        return rng.integers(0, 1 << cbits, size=shape, dtype=np.uint64) if cbits < 64 else \
            rng.integers(0, 1 << 63, size=shape, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, size=shape, dtype=np.uint64)
    pad = rng.integers(0, 1 << cbits, size=shape, dtype=np.uint64) if cbits < 64 else np.zeros(shape, np.uint64)
    field_mask = np.uint64(((1 << fmt.field_bits) - 1) << fmt.field_shift)
    pad = pad & ~field_mask & np.uint64((1 << cbits) - 1 if cbits < 64 else (1 << 64) - 1)
    if kind == "near_one":
        if fmt.integer:
            field = rng.integers(0, 8, size=shape, dtype=np.uint64)
        else:
            E, M = fmt.exp_bits, fmt.man_bits
            e = np.clip(fmt.bias + rng.integers(-3, 3, size=shape), 0, (1 << E) - 2).astype(np.uint64)
            f = rng.integers(0, 1 << M, size=shape, dtype=np.uint64) if M else np.zeros(shape, np.uint64)
            field = (e << np.uint64(M)) | f
            if fmt.signed:
                field |= rng.integers(0, 2, size=shape, dtype=np.uint64) << np.uint64(E + M)
    else:
        edges = _edge_fields(fmt)
        field = edges[rng.integers(0, len(edges), size=shape)]
        if kind == "mixed":
            rnd = rng.integers(0, 1 << min(fmt.field_bits, 63), size=shape, dtype=np.uint64)
            field = np.where(rng.random(shape) < 0.8, rnd, field)
    return (field << np.uint64(fmt.field_shift)) | pad


def _sparse_metadata(model, rng, rows):
    rule = model.sparse_rule
    sel = np.array(sorted(rule.selectors), dtype=np.uint64)
    nib = sel[rng.integers(0, len(sel), size=(rows, rule.words(model.k) * 8))]
    nib[:, rule.chunks(model.k):] = 0
    shifts = np.arange(8, dtype=np.uint64) * np.uint64(4)
    return (nib.reshape(rows, -1, 8) << shifts).sum(axis=-1).astype(np.uint64)


def _inputs(model, rng):
    dp = model.datapath
    out = []
    for kind in ("uniform", "near_one", "edge", "mixed"):
        a = _words(model.a_format, (ROWS, dp.k), rng, kind)
        b = _words(model.b_format, (ROWS, dp.k), rng, kind)
        c = _words(model.c_format, (ROWS,), rng, kind)
        kw = {}
        if dp.scale:
            fmt = model.scale_format
            if kind == "near_one":
                kw["scale_a"] = _words(fmt, (ROWS, dp.blocks), rng, "near_one")
                kw["scale_b"] = _words(fmt, (ROWS, dp.blocks), rng, "near_one")
            else:
                kw["scale_a"] = _words(fmt, (ROWS, dp.blocks), rng, kind)
                kw["scale_b"] = _words(fmt, (ROWS, dp.blocks), rng, kind)
        if dp.sparse:
            kw["sparse_metadata"] = _sparse_metadata(model, rng, ROWS)
        out.append((kind, a, b, c, kw))
    return out


def _lean_models(arch):
    reg = get_registry()
    name = mmasim.lookup.resolve_arch(reg, arch)
    out = []
    for dp in reg.architectures[name].datapaths:
        m = Model(dp, reg)
        if m._lean() is not None:
            out.append(m)
    return out


@pytest.mark.parametrize("arch", mmasim.architectures())
def test_lean_numpy_window_matches_reference(arch):
    rng = np.random.default_rng(abs(hash(arch + "lean")) % (1 << 32))
    for model in _lean_models(arch):
        dp = model.datapath
        for kind, a, b, c, kw in _inputs(model, rng):
            wa, wb, wc = (np.asarray(x, dtype=np.uint64) for x in (a, b, c))
            sa = sb = None
            if dp.scale:
                sa, sb = (np.asarray(kw[s], dtype=np.uint64) for s in ("scale_a", "scale_b"))
            ref = model._steps_reference(wa, wb, wc, sa, sb)
            got = model._lean()(wa, wb, wc, sa, sb)
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
        assert m._lean() is not None
    assert mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")._lean() is None   # groups: the reference


def test_lean_bit_length_and_rz_pack_are_the_reference():
    """The lean numpy encoder's bit length (float exponent, corrected) and its
    round-toward-zero pack against intmath.bit_length and Encoding.pack, around
    every power of two (where the 53-bit float rounds up) and on random values."""
    from mmasim.backends.numpy_lean import _bit_length, _PackRZ
    from mmasim.intmath import bit_length

    p = np.array([1 << s for s in range(63)], dtype=np.int64)
    rng = np.random.default_rng(7)
    x = np.concatenate([[0, 1, 2, 3, (1 << 63) - 1], p, p - 1, p + 1, p[1:] - 2,
                        rng.integers(0, 1 << 62, 4000), rng.integers(0, 1 << 20, 4000)]).astype(np.int64)
    assert (_bit_length(x) == bit_length(x)).all()
    reg = get_registry()
    for enc in reg.encodings.values():
        pk = _PackRZ(enc)
        if not pk.ok:
            continue
        mag = x[x < (1 << 62)]
        e0 = rng.integers(-200, 100, mag.shape[0])
        neg = rng.integers(0, 2, mag.shape[0]).astype(bool)
        assert (pk(neg, mag, e0) == enc.pack(neg, mag, e0)).all(), enc.key
