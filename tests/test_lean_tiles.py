"""The compiled lean window works on tiles of rows, compiled once per variant.

The tiles must not change a word: batches that end inside a tile, span several,
or hold one row only, with rows that go to the general kernel (inf / NaN
somewhere) at the tile edges, give the numpy reference's words.  Every variant
that built-in datapaths select is exercised here and by ``test_backends.py``.
"""

import numpy as np
import pytest

import mmasim

numba = pytest.importorskip("numba")

from mmasim.backends import kernel_for  # noqa: E402
from mmasim.backends.numba.tiles import TILE  # noqa: E402
from wordgen import seed, words  # noqa: E402

# one datapath per variant (scaled, C kind, D kind, A / B decode, rz encoder)
VARIANTS = [
    ("Ampere", "m16n8k16.f32.f16.f16.f32", (False, 2, 2, 0, True)),       # f16 by its table, two steps
    ("B200", "tcgen05.mma.kind::tf32", (False, 2, 2, 1, True)),           # 32-bit containers: arithmetic
    ("B200", "tcgen05.mma.kind::f8f6f4.f32.e4m3.e2m1", (False, 2, 2, 0, True)),   # tables
    ("B200", "tcgen05.mma.kind::mxf8f6f4.f32.e4m3.e4m3", (True, 2, 2, 0, True)),  # block scales
    ("Ampere", "m16n8k16.f16.f16.f16.f16", (False, 1, 1, 0, False)),      # f16 C / D, RNE
    ("Hopper", "wgmma.m64n8k32.f32.e4m3.e4m3", (False, 2, 2, 0, False)),  # rz into 13 fraction bits
]


@pytest.mark.parametrize("arch,ins,key", VARIANTS)
def test_each_variant_is_the_one_selected(arch, ins, key):
    # the tile kernel of a variant is named by its closure constants
    want = "window_lean_kernel_%d_%d_%d_%d_%d" % key
    assert kernel_for(mmasim.MMA(arch, ins)).fn.__name__ == want


@pytest.mark.parametrize("arch,ins,key", VARIANTS)
@pytest.mark.parametrize("n", [1, 63, 64, 65, 129, 200])
def test_tile_edges_give_the_reference_words(arch, ins, key, n):
    model = mmasim.MMA(arch, ins)
    dp = model.datapath
    rng = np.random.default_rng(seed(f"{ins}{n}"))
    a = words(model.a_format, (n, dp.k), rng, "near_one")
    b = words(model.b_format, (n, dp.k), rng, "near_one")
    c = words(model.c_format, (n,), rng, "near_one")
    kw = {}
    if dp.scale:
        kw = {s: words(model.scale_format, (n, dp.blocks), rng, "near_one") for s in ("scale_a", "scale_b")}
    # inf / NaN / zeros at the first and last row of each tile and of the batch
    edges = sorted({r for t in range(0, n, TILE) for r in (t, t + TILE - 1) if r < n} | {n - 1})
    mixed = words(model.a_format, (len(edges), dp.k), rng, "edge")
    a[edges] = mixed
    c[edges[::2]] = words(model.c_format, (len(edges[::2]),), rng, "edge")
    ref = model.dot(a, b, c, backend="numpy", **kw)
    got = model.dot(a, b, c, backend="numba", **kw)
    bad = np.flatnonzero(got != ref)
    assert bad.size == 0, f"{ins} n={n}: rows {bad[:8]} differ"


def test_matrix_form_tiles_match_the_reference():
    # the matrix form indexes rows i // N, j % N inside the kernel (no copies)
    model = mmasim.MMA("Ampere", "m16n8k16.f32.f16.f16.f32")
    rng = np.random.default_rng(7)
    M, N = 48, 40           # 1920 dot products: 30 tiles, rows of A and B shared across tiles
    A = words(model.a_format, (M, 16), rng, "mixed").astype(np.uint16)
    B = words(model.b_format, (16, N), rng, "mixed").astype(np.uint16)
    C = words(model.c_format, (M, N), rng, "mixed").astype(np.uint32)
    # the matrix form is one m16n8 instruction; gemm runs the same matrix kernel on the whole
    # 48 x 40 grid of tiles (one K tile)
    assert np.array_equal(mmasim.gemm(A, B, C, model=model, backend="numba"),
                          mmasim.gemm(A, B, C, model=model, backend="numpy"))
