"""What a backend computes: a :class:`Plan` (one datapath, resolved) and :class:`Rows`.

A :class:`~mmasim.execution.model.Model` checks operands and shapes and cuts a batch into
chunks of rows; a backend (:mod:`mmasim.backends`) computes the D words of rows
with ``backend.compute(plan, rows)``.  The plan is everything a backend needs to
know of the datapath, resolved once: the five formats, the output encoding, the
accumulator and its parameters, the elements per hardware step, the sparse
selection rule and the registered decoders.

:func:`compute` is how every caller runs a backend: it applies what the table
says happens around the steps (the order in which the steps take K, and C
added after them) the same way for every backend.
"""

from __future__ import annotations

import weakref

import attrs
import numpy as np

from mmasim.arith import ieee
from mmasim.accumulators import BUILTIN_ACCUMULATORS
from mmasim.registry.datapath import Datapath
from mmasim.arith.sparse import RULES as SPARSE_RULES
from mmasim.arith.sparse import select

#: the elements (rows x K) of a chunk of rows a CPU backend computes at a time: bounded
#: temporaries (numpy) and bounded gathers (:attr:`mmasim.execution.model.Model.CHUNK_ELEMENTS`)
CHUNK_ELEMENTS = 1 << 17


def word_dtype(fmt):
    """The unsigned dtype that holds ``fmt``'s container words (what kernels read)."""
    bits = fmt.container_bits
    return np.uint8 if bits <= 8 else np.uint16 if bits <= 16 else np.uint32 if bits <= 32 else np.uint64


class PlanMap:
    """What a backend prepares per plan, gone with the plan: a dict keyed by the plan's identity
    (plans compare by identity), each entry dropped when its plan is collected
    (``weakref.finalize``).  A lookup is one dict lookup, where a ``WeakKeyDictionary`` makes a
    weak reference on every call (the per-call path of a small matrix call reads it twice)."""

    __slots__ = ("_data",)

    def __init__(self):
        self._data: dict = {}

    def get(self, plan, default=None):
        return self._data.get(id(plan), default)

    def __setitem__(self, plan, value) -> None:
        key = id(plan)
        if key not in self._data:
            weakref.finalize(plan, self._data.pop, key, None)
        self._data[key] = value

    def __getitem__(self, plan):
        return self._data[id(plan)]

    def __delitem__(self, plan) -> None:
        del self._data[id(plan)]

    def setdefault(self, plan, value):
        if id(plan) not in self._data:
            self[plan] = value
        return self._data[id(plan)]

    def pop(self, plan, default=None):
        return self._data.pop(id(plan), default)

    def __contains__(self, plan) -> bool:
        return id(plan) in self._data

    def __len__(self) -> int:
        return len(self._data)


@attrs.frozen(eq=False)
class Plan:
    """One datapath resolved against the registry: what every backend computes from.

    ``step``: elements per hardware step (the datapath's ``chunk``, at most the
    stored K); C of each step is D of the previous one.  ``order``: the stored K
    positions in the order the steps take them (``None``: as stored).  ``c_add``:
    the encoding of the IEEE addition that adds C after the steps (``None``: C
    enters the first step).  ``builtin``: the
    accumulator is mmasim's own function of that name (compiled kernels
    transcribe only those).  ``word_dtypes``: the container dtypes of A, B, C (and
    the two scales, when scaled), set when the plan is made.

    Frozen: what a backend prepares for a plan (a compiled kernel, a lean numpy
    path) the backend keeps, keyed by the plan, never on it.
    """

    datapath: Datapath
    a_format: object
    b_format: object
    c_format: object
    d_format: object
    scale_format: object
    encoding: object
    accumulator: object
    step: int
    sparse_rule: object
    decoders: dict               # format key -> decode(fmt, words)
    builtin: bool
    order: object = None
    c_add: object = None
    word_dtypes: tuple = attrs.field(init=False, repr=False)

    @word_dtypes.default
    def _word_dtypes(self) -> tuple:
        fmts = (self.a_format, self.b_format, self.c_format) + ((self.scale_format,) * 2 if self.scaled else ())
        return tuple(word_dtype(x) for x in fmts)

    @classmethod
    def build(cls, datapath: Datapath, registry) -> "Plan":
        f = registry.formats
        fmts = [f[datapath.a], f[datapath.b], f[datapath.c], f[datapath.d]]
        scale = f[datapath.scale] if datapath.scale else None
        acc = registry.accumulators[datapath.accumulator]
        own = BUILTIN_ACCUMULATORS.get(datapath.accumulator)
        return cls(
            datapath, *fmts, scale, registry.encodings[datapath.rounding], acc,
            datapath.step,
            SPARSE_RULES[datapath.sparse] if datapath.sparse else None,
            {x.key: registry.decoders[x.decoder] for x in fmts + ([scale] if scale else [])},
            own is not None and getattr(acc, "function", acc) is getattr(own, "function", own),
            None if datapath.step_order is None else np.asarray(datapath.step_order, dtype=np.int64),
            registry.encodings[datapath.c_add] if datapath.c_add else None,
        )

    @property
    def parameters(self) -> dict:
        """The accumulator's parameters (keyword arguments)."""
        return self.datapath.parameters

    @property
    def declared(self) -> bool:
        """Whether the parameters are valid for the accumulator's parameter class
        (``Params``; the registry checks tables, not datapaths made in code)."""
        cls = getattr(self.accumulator, "Params", None)
        try:
            return cls is not None and cls(**self.parameters) is not None
        except (TypeError, ValueError):
            return False

    @property
    def scaled(self) -> bool:
        return self.scale_format is not None

    def decoder(self, fmt):
        """The registered decode function of ``fmt`` (one of the plan's formats)."""
        return self.decoders[fmt.key]

    def decode(self, fmt, words):
        """``Decoded`` of ``words`` in ``fmt`` (one of the plan's formats)."""
        return self.decoders[fmt.key](fmt, words)


class BatchOperand:
    """One operand of a batch: its rows (last axis kept, unless ``vector=False``)
    addressed by flat batch index, without materializing broadcasts."""

    def __init__(self, w: np.ndarray, batch: tuple, vector: bool = True):
        self.vector = vector
        own = w.shape[:-1] if vector else w.shape
        pad = (1,) * (len(batch) - len(own)) + tuple(own)
        self.identity = pad == tuple(batch)
        self.pad = pad
        self.batch = tuple(batch)
        tail = w.shape[-1:] if vector else ()
        self.flat = w.reshape((-1,) + tail) if own else w.reshape((1,) + tail)
        self._converted = {}

    def index(self, s, e):
        """Row of ``flat`` of each batch row ``s .. e`` (``None``: row i is flat row i)."""
        if self.identity:
            return None
        if all(p == 1 for p in self.pad):
            return np.zeros(e - s, dtype=np.int64)
        coords = np.unravel_index(np.arange(s, e, dtype=np.int64), self.batch)
        idx = np.zeros(e - s, dtype=np.int64)
        for size, c in zip(self.pad, coords):
            idx = idx * size + (c if size > 1 else 0)
        return idx

    def rows(self, s, e, sel=None):
        """Materialized rows ``s..e`` (or the rows ``s + sel``)."""
        idx = self.index(s, e)
        if idx is None:
            part = self.flat[s:e]
            return part if sel is None else part[sel]
        return self.flat[idx if sel is None else idx[sel]]

    def indexed(self, s, e, dtype):
        """``(array, index)``: contiguous words of ``dtype`` and the row of each of
        ``s .. e`` in it (``None``: row i is array row i)."""
        idx = self.index(s, e)
        if idx is None:
            return np.ascontiguousarray(self.flat[s:e], dtype=dtype), None
        if dtype not in self._converted:
            self._converted[dtype] = np.ascontiguousarray(self.flat, dtype=dtype)
        return self._converted[dtype], idx


class _Outer:
    """An operand of the matrix form: row ``d`` of the ``M x N`` grid reads row
    ``d // N`` (``axis`` 0: A, scale A), ``d % N`` (``axis`` 1: B, scale B) or
    ``d`` (``axis`` None: C)."""

    __slots__ = ("flat", "axis", "ncols")

    def __init__(self, w: np.ndarray, axis, ncols: int):
        self.flat, self.axis, self.ncols = w, axis, ncols

    def index(self, s, e):
        if self.axis is None:
            return None
        d = np.arange(s, e, dtype=np.int64)
        return d // self.ncols if self.axis == 0 else d % self.ncols

    rows = BatchOperand.rows

    def indexed(self, s, e, dtype):
        return np.ascontiguousarray(self.flat, dtype=dtype), self.index(s, e)


class Rows:
    """Rows ``start .. stop`` of a batch of dot products: the operands A, B, C
    (and scale A, scale B when scaled; the sparse metadata last, when sparse).

    Backends read them with :meth:`words` (materialized rows), :meth:`indexed`
    (contiguous words and a row index, without materializing broadcasts) or, for
    the matrix form (``ncols`` > 0: row ``d`` is A row ``d // ncols`` against B
    column ``d % ncols``), the matrices themselves (:attr:`operands`: A, B
    transposed, C flat, the scales of A's rows and of B's columns).
    """

    __slots__ = ("operands", "start", "stop", "ncols")

    def __init__(self, operands: tuple, start: int, stop: int, ncols: int = 0):
        self.operands, self.start, self.stop, self.ncols = operands, start, stop, ncols

    @classmethod
    def batch(cls, arrays, batch: tuple, start: int, stop: int) -> "Rows":
        """Rows of a broadcast batch: ``arrays`` are A, B, C, then any scales / metadata."""
        ops = tuple(a if isinstance(a, BatchOperand) else BatchOperand(a, batch, vector=i != 2) for i, a in enumerate(arrays))
        return cls(ops, start, stop)

    @classmethod
    def outer(cls, a, bt, c, sa=None, sb=None) -> "Rows":
        """The matrix form: ``a`` (M, K), ``bt`` (N, K) (B transposed), ``c`` (M * N,),
        scales (M, blocks) and (N, blocks)."""
        n = bt.shape[0]
        return cls((a, bt, c) if sa is None else (a, bt, c, sa, sb), 0, a.shape[0] * n, n)

    def chunk(self, start: int, stop: int) -> "Rows":
        return Rows(self.operands, start, stop, self.ncols)

    def __len__(self) -> int:
        return self.stop - self.start

    def _operand(self, i: int):
        if self.ncols:      # the matrix form keeps the arrays themselves (operands)
            return _Outer(self.operands[i], (0, 1, None, 0, 1)[i], self.ncols)
        return self.operands[i]

    def words(self, i: int, sel=None) -> np.ndarray:
        """Materialized rows of operand ``i`` (all, or those at positions ``sel``)."""
        return self._operand(i).rows(self.start, self.stop, sel)

    def indexed(self, i: int, dtype):
        """Operand ``i`` as ``(contiguous words of dtype, row index or None)``."""
        return self._operand(i).indexed(self.start, self.stop, dtype)

    def dense(self, plan: Plan) -> "Rows":
        """These rows with the sparse selection applied (A and B compacted to the
        stored K, the metadata dropped); themselves for a dense datapath."""
        if plan.sparse_rule is None:
            return self
        rows = [self.words(i) for i in range(len(self.operands))]
        wa, wb = select(plan.sparse_rule, plan.datapath.k, rows[-1].astype(np.uint64), rows[0], rows[1])
        return Rows.batch([wa, wb] + rows[2:-1], (len(self),), 0, len(self))

    def take(self, sel) -> "Rows":
        """The rows at positions ``sel``, materialized."""
        arrays = [self.words(i, sel) for i in range(len(self.operands))]
        return Rows.batch(arrays, (len(arrays[0]),), 0, len(arrays[0]))


def compute(backend, plan: Plan, rows: Rows) -> np.ndarray:
    """D words of ``rows`` on ``backend``: the steps in the plan's order and, where the
    plan adds C after the steps, the steps from +0 and C added by one IEEE addition
    (docs/datapaths.md §1).  No rows are no D words, whatever the backend."""
    if not len(rows):
        return np.zeros(0, dtype=plan.encoding.dtype)
    if plan.order is None and plan.c_add is None:
        return backend.compute(plan, rows)
    n = len(rows)
    c = rows.words(2)
    order = slice(None) if plan.order is None else plan.order
    if rows.ncols:      # the matrix form: reorder the matrices' K once, not per row
        a, bt, cm = rows.operands[:3]
        cm = np.zeros_like(cm) if plan.c_add is not None else cm
        staged = Rows((a[:, order], bt[:, order], cm) + tuple(rows.operands[3:]), rows.start, rows.stop, rows.ncols)
    else:
        cw = np.zeros_like(c) if plan.c_add is not None else c
        arrays = [rows.words(0)[:, order], rows.words(1)[:, order], cw] + [rows.words(i) for i in range(3, len(rows.operands))]
        staged = Rows.batch(arrays, (n,), 0, n)
    d = backend.compute(plan, staged)
    if plan.c_add is None:
        return d
    return add_c(plan, d, c)


def add_c(plan: Plan, d: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``d + c`` as one IEEE addition rounded by ``plan.c_add`` (both in D's format):
    exact binary64 sums (or rounded to odd) packed by the integer encoder; NaN in,
    or inf - inf, gives the encoding's NaN word."""
    x = ieee.values(plan.decode(plan.d_format, d))
    y = ieee.values(plan.decode(plan.c_format, c))
    finite = np.isfinite(x) & np.isfinite(y)
    with np.errstate(invalid="ignore"):
        total = np.where(finite, ieee.odd_sum(np.where(finite, x, 0.0), np.where(finite, y, 0.0)), x + y)
    return ieee.pack(total, plan.c_add)
