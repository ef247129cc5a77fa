"""Beyond one machine: :func:`mmasim.gemm` on dask arrays (``pip install 'mmasim-exact[dask]'``).

Gives :func:`dask_gemm`: a dask array of D, a blockwise graph with one task per ``(M, N)`` block,
each task the in-process :func:`mmasim.gemm` on its block's operands, so the words are those
of the in-process call whatever the blocks and the scheduler.  Never imports dask until a
dask operand comes in (:func:`is_dask`).  Refuses a row chunk that is not a multiple of the
instruction's M or a column chunk not of its N (:class:`~mmasim.ShapeError`, naming the
chunks) and ``progress=`` (dask shows its own).  Chunks, schedulers and workers:
docs/user-guide.md, "Every core, and beyond one machine".
"""

from __future__ import annotations

import math
import pickle
import threading

import numpy as np

from mmasim.composition import mainloop, operands
from mmasim.errors import OperandError, ShapeError
from mmasim.execution.model import Model
from mmasim.registry.build import get_registry
from mmasim.operands.words import as_array, one_mode, typed_dtype

__all__ = ["any_dask", "is_dask", "dask_gemm"]


def is_dask(x) -> bool:
    """Whether ``x`` is a dask collection (checked without importing dask)."""
    return type(x).__module__.startswith("dask.") and hasattr(x, "__dask_graph__")


def any_dask(*xs) -> bool:
    """Whether any of ``xs`` is a dask collection."""
    return any(x is not None and is_dask(x) for x in xs)


_MODELS: dict = {}
_MODELS_LOCK = threading.Lock()


class _ModelRef:
    """A model as a graph carries it: its datapath, named shape and backend, pickled.
    In the process that made the graph it is the model itself; a worker rebuilds it
    once from its own registry."""

    __slots__ = ("key",)

    def __init__(self, key: bytes):
        self.key = key

    @classmethod
    def of(cls, model: Model) -> "_ModelRef":
        key = pickle.dumps((model.datapath, model.resolution, model.backend))
        with _MODELS_LOCK:
            _MODELS.setdefault(key, model)
        return cls(key)

    @property
    def model(self) -> Model:
        m = _MODELS.get(self.key)
        if m is None:
            with _MODELS_LOCK:
                m = _MODELS.get(self.key)
                if m is None:
                    datapath, resolution, backend = pickle.loads(self.key)
                    m = _MODELS[self.key] = Model(datapath, get_registry(), backend=backend, resolution=resolution)
        return m

    def __reduce__(self):
        return (_ModelRef, (self.key,))

    def __dask_tokenize__(self):
        return ("mmasim.Model", self.key)


def _block(a, b, c, *rest, ref, order, scaled, sparse, backend, threads, words):
    """One ``(M, N)`` block of D: the in-process plain chain on the block's operands, checked
    once (:func:`mmasim.composition.operands.check`) as the in-process gemm checks them."""
    sa, sb = (rest[0], rest[1]) if scaled else (None, None)
    md = rest[-1] if sparse else None
    model = ref.model
    ops = operands.check(model, a, b, c, sa, sb, md, order)
    d = mainloop.plain_chain(model, ops, operands.words(c, model.c_format, "C", ops.c_read), backend, threads)
    return operands.result(d, model.d_format, ops.returns_words(words))


def _as_dask(x, what: str):
    import dask.array as da

    if is_dask(x):
        if not hasattr(x, "chunks") or not hasattr(x, "rechunk"):
            raise OperandError(f"gemm: {what} is a dask collection but not a dask array ({type(x).__name__})")
        if any(isinstance(s, float) and math.isnan(s) for s in x.shape):
            raise ShapeError(f"gemm: {what} has unknown chunk sizes {x.shape}; call {what}.compute_chunk_sizes() first")
        return x, True
    return da.from_array(as_array(x, what)[0], chunks=-1), False


def _aligned(model: Model, chunks, axis: str, operand: str, legal) -> None:
    bad = sorted({s for s in chunks if legal and not any(s and s % t == 0 for t in legal)})
    if bad:
        named = model.shape is not None
        listing = ", ".join(map(str, legal[:8])) + (", ..." if len(legal) > 8 else "")
        tile = legal[0] if named else f"one of {{{listing}}}"
        raise ShapeError(
            f"gemm on dask arrays: the {axis} chunks of {operand} {tuple(chunks)} must each be a multiple of "
            f"{model.instruction}'s {axis} = {tile} (chunks {bad} are not); rechunk {operand}, e.g. "
            f"{operand}.rechunk({{{0 if axis == 'M' else 1}: {_suggest(legal, chunks)}}})"
        )


def _suggest(legal, chunks) -> int:
    """A chunk size near the largest given that is a multiple of the smallest legal tile."""
    step = min(legal)
    return max(step, (max(chunks) // step) * step)


def dask_gemm(model: Model, A, B, C, *, k_order="forward", scale_a=None, scale_b=None, sparse_metadata=None,
         backend=None, progress=None, threads=None, words=None):
    """:func:`mmasim.gemm` of ``model`` with dask operands: a dask array of D.

    D's blocks are A's row chunks by B's column chunks (C's where A or B is not a dask array);
    the K axis (and the scales' and metadata's) is gathered into one chunk per task, because a
    block chains every K tile in the instruction's order.  A task rebuilds its model from the
    datapath in the worker's own registry (:class:`_ModelRef`), so workers need mmasim and the
    same plugins; inside a task ``threads`` defaults to 1: dask runs the tasks side by side.
    Each task checks its block's operands once and chains them (:func:`_block`)."""
    import dask.array as da

    from mmasim import backends
    from mmasim.execution.threads import check as check_threads

    if progress is not None and not (isinstance(progress, (bool, np.bool_)) and not progress):
        raise OperandError(
            f"gemm on dask arrays shows no tqdm bar (progress={progress!r}); use dask's own "
            "(dask.diagnostics.ProgressBar, or the dask.distributed dashboard)"
        )
    threads = 1 if threads is None else check_threads(threads)
    if backend is not None:
        backends.resolve(backend)      # an unknown backend fails here, not in a worker
    dp = model.datapath
    ops = {"A": A, "B": B, "C": C, "scale_a": scale_a, "scale_b": scale_b, "sparse_metadata": sparse_metadata}
    arrays, given = {}, {}
    for name, x in ops.items():
        if x is not None:
            arrays[name], given[name] = _as_dask(x, name)
    # words or values, as Model.dot tells them (from the dtypes alone: nothing is computed)
    modes = {name: as_array(np.empty(0, dtype=arrays[name].dtype), name)
             for name in ("A", "B", "C") + (("scale_a", "scale_b") if dp.scale else ()) if name in arrays}
    values = one_mode(modes, model.instruction)
    as_words = not values if words is None else bool(words)
    M, K, N, order = operands.check_shapes(model, *(arrays[n].shape for n in "ABC"), k_order,
                                           *(arrays[n].shape if n in arrays else None
                                             for n in ("scale_a", "scale_b", "sparse_metadata")))
    a, b, c = arrays["A"], arrays["B"], arrays["C"]
    mchunks = a.chunks[0] if given["A"] else c.chunks[0]
    nchunks = b.chunks[1] if given["B"] else c.chunks[1]
    _aligned(model, mchunks, "M", "A" if given["A"] else "C", model.legal_m)
    _aligned(model, nchunks, "N", "B" if given["B"] else "C", model.legal_n)
    args = [a.rechunk((mchunks, -1)), "ik", b.rechunk((-1, nchunks)), "kj", c.rechunk((mchunks, nchunks)), "ij"]
    if dp.scale:
        args += [arrays["scale_a"].rechunk((mchunks, -1)), "il", arrays["scale_b"].rechunk((-1, nchunks)), "lj"]
    if dp.sparse:
        args += [arrays["sparse_metadata"].rechunk((mchunks, -1)), "is"]
    dtype = np.dtype(model.encoding.dtype if as_words or model.d_format.integer else typed_dtype(model.d_format))
    return da.blockwise(
        _block, "ij", *args, token="mmasim-gemm", dtype=dtype, meta=np.empty((0, 0), dtype=dtype),
        concatenate=True, ref=_ModelRef.of(model), order=order, scaled=bool(dp.scale),
        sparse=bool(dp.sparse), backend=backend, threads=threads, words=as_words,
    )
