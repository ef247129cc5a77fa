"""GEMM emulation: a full ``(M x K) @ (K x N) + C`` computed as the hardware would,
by chaining one matrix instruction over the K tiles.

The D of one K tile is the C of the next, already rounded into D's format by
the instruction's own output rounding; the tiles of M and N are independent
(each D element depends only on its row of A, its column of B and its C), so
only K is chunked.  ``k_order`` chooses the order of the K tiles: a real
kernel's loop order, or an explicit permutation to study its effect.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from .errors import OperandError, ScaleError, ShapeError, UnsupportedDatapath
from .model import Model, matrices

#: problems with at least this many products report progress on stderr (progress=None)
PROGRESS_PRODUCTS = 1 << 27


def _tile(legal, size: int, what: str, name: str):
    """The largest legal tile extent dividing ``size`` (any size if the datapath has no list)."""
    legal = tuple(legal)
    if not legal:
        return size
    fits = [t for t in legal if size % t == 0]
    if not fits or size == 0:
        raise ShapeError(
            f"gemm: {what} = {size} is not a multiple of a legal {what.lower()} of {name} "
            f"({', '.join(map(str, legal[:8]))}{', ...' if len(legal) > 8 else ''})"
        )
    return max(fits)


def _order(k_order, tiles: int):
    if isinstance(k_order, str):
        if k_order == "forward":
            return list(range(tiles))
        if k_order == "reverse":
            return list(range(tiles))[::-1]
        raise OperandError(f"gemm: k_order must be 'forward', 'reverse' or a permutation of the K tiles, not {k_order!r}")
    order = [int(t) for t in k_order]
    if sorted(order) != list(range(tiles)):
        raise OperandError(f"gemm: k_order {order} is not a permutation of the {tiles} K tiles 0..{tiles - 1}")
    return order


def gemm(A, B, C, arch=None, instruction=None, *, k_order="forward", scale_a=None, scale_b=None,
         backend=None, progress=None, model: Model | None = None, **qualifiers):
    """``A @ B + C`` as ``instruction`` on ``arch`` computes it, K tile after K tile.

    ``A``: ``(M, K)``, ``B``: ``(K, N)``, ``C``: ``(M, N)`` container words (or
    typed arrays); ``M``, ``N`` must be multiples of a legal tile extent of the
    instruction and ``K`` a multiple of its K.  Block-scaled instructions take
    ``scale_a`` ``(M, K / block)`` and ``scale_b`` ``(K / block, N)``.
    ``k_order``: ``"forward"``, ``"reverse"`` or a permutation of the K-tile
    indices.  ``model``: an :class:`~mmasim.model.Model` instead of ``arch`` and
    ``instruction``.  ``progress``: report progress on stderr (default: for
    problems of at least :data:`PROGRESS_PRODUCTS` products).  Returns D words
    ``(M, N)`` (typed when ``A`` is typed).  Sparse instructions are refused.
    """
    if model is None:
        from . import MMA

        if arch is None or instruction is None:
            raise OperandError("gemm needs arch= and instruction= (or model=)")
        model = MMA(arch, instruction, **qualifiers)
    elif qualifiers or arch is not None or instruction is not None:
        raise OperandError("gemm: pass either model= or arch=/instruction= (with qualifiers), not both")
    dp = model.datapath
    name = model.instruction
    if dp.sparse:
        raise UnsupportedDatapath(
            f"gemm does not emulate sparse instructions ({name}): the selector metadata belongs to one "
            "instruction's K; use the dense instruction, or Model.dot with sparse_metadata per tile"
        )
    if model.c_format.key != model.d_format.key:
        raise UnsupportedDatapath(
            f"gemm chains D into C, but {name} reads C as {model.c_format.name} and writes D as "
            f"{model.d_format.name}; use the variant whose C and D formats agree"
        )
    A, B, C, (M, K, N) = matrices(A, B, C, "gemm")
    _tile(dp.m, M, "M", name)
    _tile(dp.n, N, "N", name)
    k = dp.k
    if K == 0 or K % k:
        raise ShapeError(f"gemm: K = {K} is not a positive multiple of the instruction's K = {k} ({name})")
    tiles = K // k
    order = _order(k_order, tiles)
    if dp.scale:
        if scale_a is None or scale_b is None:
            raise ScaleError(f"gemm with {name} needs scale_a (M, K/{dp.block}) and scale_b (K/{dp.block}, N)")
        scale_a, scale_b = np.asarray(scale_a), np.asarray(scale_b)
        nb = K // dp.block
        if scale_a.shape != (M, nb) or scale_b.shape != (nb, N):
            raise ScaleError(f"gemm: scale_a must be ({M}, {nb}) and scale_b ({nb}, {N}); "
                             f"got {scale_a.shape} and {scale_b.shape}")
    elif scale_a is not None or scale_b is not None:
        raise ScaleError(f"{name} is not block-scaled: scale_a/scale_b must be None")
    products = M * N * K
    report = progress if progress is not None else products >= PROGRESS_PRODUCTS
    per_tile = k // dp.block if dp.scale else 0
    D = C
    start = time.perf_counter()
    for i, t in enumerate(order):
        cut = slice(t * k, (t + 1) * k)
        kw = {}
        if dp.scale:
            blocks = slice(t * per_tile, (t + 1) * per_tile)
            kw = dict(scale_a=scale_a[:, blocks], scale_b=scale_b[blocks, :])
        D = model(A[:, cut], B[cut, :], D, backend=backend, **kw)
        if report and (i + 1 == tiles or (i + 1) % max(1, tiles // 20) == 0):
            el = time.perf_counter() - start
            done = (i + 1) / tiles
            print(f"mmasim.gemm {M}x{N}x{K} {name}: K tile {i + 1}/{tiles} ({100 * done:.0f}%), "
                  f"{el:.1f} s elapsed, ~{el / done - el:.1f} s left", file=sys.stderr, flush=True)
    return D
