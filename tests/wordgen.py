"""Test inputs shared by the backend and fast-path equivalence tests.

The words come from the package's one word generator (:mod:`mmasim.operands.wordgen`:
it produces inputs, never expected outputs, so sharing it keeps the tests'
oracles independent); here are only the per-name seeds and the families of
rows the equivalence tests run."""

import zlib

from mmasim.operands.wordgen import operands, words  # noqa: F401  (``words`` is used by the tests)


def seed(name: str) -> int:
    """A deterministic seed for a test parameter (``hash()`` varies between runs)."""
    return zlib.crc32(name.encode())


ROWS = 96   # rows per input family
FAMILIES = ("uniform", "near_one", "edge", "mixed")


def inputs(model, rng):
    """``[(kind, a, b, c, kwargs)]``: :data:`ROWS` rows of ``model``'s operands per family."""
    return [(kind, *operands(model, ROWS, rng, kind)) for kind in FAMILIES]


def gemm_operands(model, M, N, tiles, rng, kind="mixed"):
    """A (M, K), B (K, N), C (M, N) words of ``kind`` for ``tiles`` K tiles of ``model``, and the
    scales (near one) and sparse metadata its datapath takes, as ``gemm`` keywords."""
    from mmasim.operands.wordgen import sparse_metadata

    dp, K = model.datapath, model.k * tiles
    A = words(model.a_format, (M, K), rng, kind)
    B = words(model.b_format, (K, N), rng, kind)
    C = words(model.c_format, (M, N), rng, kind)
    kw = {}
    if dp.scale:
        kw["scale_a"] = words(model.scale_format, (M, K // dp.block), rng, "near_one")
        kw["scale_b"] = words(model.scale_format, (K // dp.block, N), rng, "near_one")
    if dp.sparse:
        kw["sparse_metadata"] = sparse_metadata(model.sparse_rule, model.k, M * tiles, rng).reshape(M, -1)
    return A, B, C, kw
