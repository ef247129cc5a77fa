"""Test inputs shared by the backend and fast-path equivalence tests: container
words of any format (uniform, near one, edge cases, mixed), sparse metadata, and
deterministic per-name seeds."""

import zlib

import numpy as np


def seed(name: str) -> int:
    """A deterministic seed for a test parameter (``hash()`` varies between runs)."""
    return zlib.crc32(name.encode())


ROWS = 96   # rows per input family (uniform, near one, edges, mixed)


def edge_fields(fmt):
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


def words(fmt, shape, rng, kind):
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
        edges = edge_fields(fmt)
        field = edges[rng.integers(0, len(edges), size=shape)]
        if kind == "mixed":
            rnd = rng.integers(0, 1 << min(fmt.field_bits, 63), size=shape, dtype=np.uint64)
            field = np.where(rng.random(shape) < 0.8, rnd, field)
    return (field << np.uint64(fmt.field_shift)) | pad


def sparse_metadata(model, rng, rows):
    rule = model.sparse_rule
    sel = np.array(sorted(rule.selectors), dtype=np.uint64)
    nib = sel[rng.integers(0, len(sel), size=(rows, rule.words(model.k) * 8))]
    nib[:, rule.chunks(model.k):] = 0
    shifts = np.arange(8, dtype=np.uint64) * np.uint64(4)
    return (nib.reshape(rows, -1, 8) << shifts).sum(axis=-1).astype(np.uint64)


def inputs(model, rng):
    dp = model.datapath
    out = []
    for kind in ("uniform", "near_one", "edge", "mixed"):
        a = words(model.a_format, (ROWS, dp.k), rng, kind)
        b = words(model.b_format, (ROWS, dp.k), rng, kind)
        c = words(model.c_format, (ROWS,), rng, kind)
        kw = {}
        if dp.scale:
            kw["scale_a"] = words(model.scale_format, (ROWS, dp.blocks), rng, kind)
            kw["scale_b"] = words(model.scale_format, (ROWS, dp.blocks), rng, kind)
        if dp.sparse:
            kw["sparse_metadata"] = sparse_metadata(model, rng, ROWS)
        out.append((kind, a, b, c, kw))
    return out
