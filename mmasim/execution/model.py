"""A resolved datapath, ready to compute: ``Model.dot`` and ``Model(A, B, C)``."""

from __future__ import annotations

import functools
import inspect

import numpy as np

from mmasim import backends
from mmasim.execution.registers import registers
from mmasim.execution import threads as _threads
from mmasim.registry.datapath import Datapath
from mmasim.errors import DtypeError, OperandError, ScaleError, ShapeError, SparseMetadataError
from mmasim.registry.lookup import Resolution, lookup_instruction
from mmasim.registry.build import Registry, get_registry
from mmasim.backends import plan as plans
from mmasim.backends.plan import Plan, Rows, compute
from mmasim.backends.cuda.device import on_device
from mmasim.arith.sparse import check as check_selectors, check_words
from mmasim.arith.special import rules_for as special_rules
from mmasim.operands.tensors import accepts_tensors
from mmasim.placement import bind
from mmasim.placement.bind import Placement
from mmasim.placement.expr import SELECTORS
from mmasim.operands.words import VALUES, as_array, checked_words, from_words, one_mode


class Model:
    """The simulator of one datapath of one architecture.

    Use :func:`mmasim.MMA` to make one.  ``dot`` works on batches of dot
    products; calling the model works on matrices.
    """

    @classmethod
    def lookup(cls, arch: str, instruction: str, backend: str | None = None, **qualifiers) -> "Model":
        """The model of ``instruction`` on ``arch`` (what :func:`mmasim.MMA` returns)."""
        return cls.lookup_qualifiers(arch, instruction, qualifiers, backend)

    @classmethod
    def lookup_qualifiers(cls, arch: str, instruction: str, qualifiers: dict, backend: str | None = None) -> "Model":
        """:meth:`lookup` with the keyword qualifiers as a mapping (as a vector file or a
        command line holds them): every key is a qualifier, none an argument of this call."""
        reg = get_registry()
        if backend is not None:
            backends.resolve(backend)   # an unknown or missing backend fails here, not at the first dot
        found = lookup_instruction(reg, arch, instruction, qualifiers)
        return cls(found.datapath, reg, backend=backend, resolution=found)

    def format_of(self, operand: str):
        """The :class:`~mmasim.arith.formats.Format` of ``operand`` ("a", "b", "c", "d" or "scale")."""
        formats = {"a": self.a_format, "b": self.b_format, "c": self.c_format, "d": self.d_format}
        if self.scale_format is not None:
            formats["scale"] = self.scale_format
        try:
            return formats[operand]
        except (KeyError, TypeError):
            raise OperandError(f"{self.instruction}: operand must be one of {', '.join(map(repr, formats))}; "
                               f"got {operand!r}") from None

    @accepts_tensors
    def operand_words(self, operand: str, X, what: str | None = None):
        """Container words of ``X`` for ``operand`` ("a", "b", "c", "d", "scale"): integer
        words checked as they are, values converted exactly (the rules of :meth:`dot`).
        ``what``: the operand's name in messages (default ``operand``)."""
        fmt = self.format_of(operand)
        what = operand if what is None else what
        arr, mode = as_array(X, what)
        return checked_words(arr, mode, fmt, what)

    def __init__(self, datapath: Datapath, registry: Registry, backend: str | None = None, resolution=None):
        self.datapath = datapath
        self.backend = backend      # None: MMASIM_BACKEND, else auto
        # what the lookup asked for: the shape it named and the qualifiers a default filled
        self.resolution = resolution if resolution is not None else Resolution(datapath)
        named = self.resolution
        self._shape = (named.m, named.n) if named.m is not None and named.n is not None else None
        self._legal = ((self._shape[0],) if self._shape else tuple(datapath.m),
                       (self._shape[1],) if self._shape else tuple(datapath.n))
        self._reg = registry
        #: what a backend computes from (mmasim.backends.plan.Plan), resolved once
        self.plan = plan = Plan.build(datapath, registry)
        self.a_format, self.b_format = plan.a_format, plan.b_format
        self.c_format, self.d_format = plan.c_format, plan.d_format
        self.scale_format = plan.scale_format
        self.encoding = plan.encoding
        self.accumulator = plan.accumulator
        self.sparse_rule = plan.sparse_rule

    # ------------------------------------------------------------------ names
    @property
    def arch(self) -> str:
        return self.datapath.arch

    @property
    def registry(self) -> Registry:
        """The registry the model was resolved in: its formats, layouts and instruction families."""
        return self._reg

    @property
    def family(self):
        """The instruction family of the datapath (:class:`mmasim.registry.family.Family`)."""
        return self._reg.family(self.datapath.op)

    @functools.cached_property
    def instruction(self) -> str:
        """The datapath's canonical instruction string (spelt once: every message names it)."""
        return self.datapath.canonical(self._reg.formats)

    @property
    def k(self) -> int:
        return self.datapath.k

    @property
    def status(self):
        """The validation status of the datapath at the shape the instruction named."""
        return self.resolution.status

    @property
    def shape(self):
        """``(M, N)`` named by the instruction string (``m128n8k16...``), or ``None``."""
        return self._shape

    @property
    def legal_m(self) -> tuple:
        """The M of one instruction: the string's, else the datapath's (empty: any)."""
        return self._legal[0]

    @property
    def legal_n(self) -> tuple:
        """The N of one instruction: the string's, else the datapath's (empty: any)."""
        return self._legal[1]

    def __repr__(self) -> str:
        return f"<mmasim.Model {self.arch}: {self.instruction} ({self.status.kind})>"

    # ------------------------------------------------------------ computation
    @on_device("dot")      # CUDA arrays under backend cuda: computed on the device
    @accepts_tensors
    def dot(self, a, b, c, scale_a=None, scale_b=None, sparse_metadata=None, backend=None, threads=None):
        """D words of ``c + sum(a*b)`` as the hardware computes them.

        ``a``, ``b``: shape ``(..., K)`` (the logical K, also for sparse
        instructions); ``c``: shape ``(...)``; scales ``(..., blocks)``;
        ``sparse_metadata``: ``(..., words)`` of 32-bit selector words.  Batch
        shapes broadcast.  Operands are all container words (integer arrays) or
        all values (float / ``ml_dtypes`` arrays, each exact in its format; C in
        C's format); a call mixing the two raises :class:`~mmasim.DtypeError`.
        Returns D words in the datapath's unsigned dtype (``uint32`` for f32 and
        s32, ``uint16`` for f16, ``uint64`` for f64), or, for values in, floats
        of D's format (integer D stays words).  ``backend``: ``"numpy"``,
        ``"numba"``, ``"cuda"`` or ``"auto"`` (default: the model's, else ``MMASIM_BACKEND``,
        else auto); every backend gives the same words.  Large batches are
        computed in chunks, in bounded memory, on ``threads`` threads (default:
        ``MMASIM_THREADS``, else every core; see :mod:`mmasim.execution.threads`): the
        words do not depend on the thread count.  torch tensors are taken by the same rule
        (integer tensors words, float tensors values) and give a tensor on the
        first tensor's device (:mod:`mmasim.operands.tensors`).  Under ``backend="cuda"``,
        operands already on a CUDA device (``__cuda_array_interface__``: CUDA torch tensors,
        numba device arrays) are container words read where they lie, and D stays there
        (:mod:`mmasim.backends.cuda.device`).
        """
        threads = _threads.check(threads)
        dp = self.datapath
        arrays, values, (wa, wb, wc) = self._checked(a, b, c, scale_a, scale_b)
        for name, w in (("a", wa), ("b", wb)):
            if w.ndim == 0 or w.shape[-1] != dp.k:
                raise ShapeError(
                    f"operand {name} must have shape (..., {dp.k}) for {self.instruction}"
                    + (" (the logical K of the sparse instruction)" if dp.sparse else "")
                    + f"; got {w.shape}"
                )
        extra = self._scale_words(arrays, scale_a, scale_b)
        for name, ws in zip(("scale_a", "scale_b"), extra):
            if ws.ndim == 0 or ws.shape[-1] != dp.blocks:
                raise ScaleError(
                    f"{name} must have shape (..., {dp.blocks}): one {self.scale_format.name} scale per block "
                    f"of {dp.block} elements; got {ws.shape}"
                )
        if self.takes_metadata(sparse_metadata):
            extra.append(self.check_metadata(np.asarray(sparse_metadata)))
        try:
            batch = np.broadcast_shapes(wa.shape[:-1], wb.shape[:-1], wc.shape, *(e.shape[:-1] for e in extra))
        except ValueError as exc:
            shapes = ", ".join(str(x.shape) for x in (wa, wb, wc, *extra))
            raise ShapeError(f"operand batch shapes do not broadcast: {shapes}") from exc
        n = int(np.prod(batch, dtype=np.int64))
        be = self._backend(backend, n * max(dp.k, 1))
        d = self._compute([wa, wb, wc, *extra], batch, n, be, threads).reshape(batch)
        return self._as_given(d, values)

    def _checked(self, a, b, c, scale_a, scale_b) -> tuple:
        """``(arrays, values?, [A, B, C words])``: the words or values of a call (never both,
        :func:`one_mode`; the scales count when the datapath is block-scaled and both are
        given), A, B and C checked against their formats."""
        formats = (self.a_format, self.b_format, self.c_format)
        if scale_a is None and scale_b is None and all(
                type(x) is np.ndarray and x.dtype.kind == "u" and x.dtype.itemsize * 8 <= f.container_bits
                for x, f in zip((a, b, c), formats)):
            return {}, False, [a, b, c]     # words by their dtype alone: none can be out of its container
        given = {"a": a, "b": b, "c": c}
        if self.datapath.scale and scale_a is not None and scale_b is not None:
            given.update(scale_a=scale_a, scale_b=scale_b)
        arrays = {name: as_array(x, name) for name, x in given.items()}
        values = one_mode(arrays, self.instruction)
        return arrays, values, [checked_words(*arrays[name], fmt, name) for name, fmt in zip("abc", formats)]

    def _scale_words(self, arrays, scale_a, scale_b) -> list:
        """``[scale_a, scale_b words]`` of a block-scaled datapath (both required), ``[]`` for
        another (which takes none)."""
        dp = self.datapath
        if dp.scale:
            if scale_a is None or scale_b is None:
                raise ScaleError(f"{self.instruction} needs scale_a and scale_b of shape (..., {dp.blocks})")
            return [checked_words(*arrays[name], self.scale_format, name) for name in ("scale_a", "scale_b")]
        if scale_a is not None or scale_b is not None:
            raise ScaleError(f"{self.instruction} is not block-scaled: scale_a/scale_b must be None")
        return []

    def takes_metadata(self, sparse_metadata) -> bool:
        """Whether the call's ``sparse_metadata`` is to be read (a sparse datapath's, required)
        or refused (given to a dense one)."""
        if self.sparse_rule:
            if sparse_metadata is None:
                raise SparseMetadataError(f"{self.instruction} is sparse: pass sparse_metadata")
            return True
        if sparse_metadata is not None:
            raise SparseMetadataError(f"{self.instruction} is dense: sparse_metadata must be None")
        return False

    def _as_given(self, d, values: bool):
        """D words as the call returns them: the D format's values for values in (integer D
        stays words), else the words."""
        return from_words(d, self.d_format) if values and not self.d_format.integer else d

    def check_metadata(self, md, where=None):
        """``md`` checked as the sparse metadata words ``(..., words)`` of :meth:`dot`: integer
        32-bit words whose every selector is legal (an error names the case in the whole batch,
        or ``where(index)``)."""
        check_words(md, self.sparse_rule.words(self.datapath.k))
        check_selectors(self.sparse_rule, self.datapath.k, md, where)
        return md

    #: elements per chunk of rows: bounded temporaries (numpy) and bounded gathers (both backends)
    CHUNK_ELEMENTS = plans.CHUNK_ELEMENTS
    #: the most dot products one call computes (a broadcast batch can name any number of rows
    #: without holding them; its D words must be held)
    MAX_ROWS = 1 << 32

    def _result_rows(self, batch, n: int) -> np.ndarray:
        """The D words of ``n`` rows, allocated, or a ShapeError saying why they cannot be."""
        dtype = np.dtype(self.encoding.dtype)
        need = f"{n * dtype.itemsize / 2 ** 30:,.1f} GiB for its {dtype.itemsize * 8}-bit D words"
        if n > self.MAX_ROWS:
            raise ShapeError(f"{self.instruction}: a batch of {n:,} dot products (shape {tuple(batch)}) needs {need}, "
                             f"more than one call computes (Model.MAX_ROWS = {self.MAX_ROWS:,}); split the batch")
        try:
            return np.empty(n, dtype=dtype)
        except MemoryError:
            raise ShapeError(f"{self.instruction}: a batch of {n:,} dot products (shape {tuple(batch)}) needs {need}, "
                             "more than this machine can allocate; split the batch") from None

    def backend_name(self, backend=None, products=None) -> str:
        """The backend a call of ``products`` products computes with: ``backend``, else this
        model's, else ``MMASIM_BACKEND`` / auto (:func:`mmasim.backends.choose`)."""
        if backend is None:
            backend = self.backend
        return backends.choose(backend, self.plan, products)

    def _backend(self, backend, products=None):
        """The backend object :meth:`backend_name` names (chosen once: :func:`mmasim.backends.get`)."""
        return backends.get(self.backend if backend is None else backend, self.plan, products)

    def _compute(self, arrays, batch, n, be, threads=1):
        """D words of the ``n`` rows of the broadcast batch ``arrays`` on the backend ``be``, in
        row chunks of bounded memory on ``threads`` threads."""
        k = max(self.datapath.k, 1)
        out = self._result_rows(batch, n)
        # a device backend takes large chunks, one at a time (a launch per chunk, copies overlapping nothing)
        chunk = max(1, getattr(be, "CHUNK_ELEMENTS", self.CHUNK_ELEMENTS) // k)
        rows = Rows.batch(arrays, batch, 0, n)
        plan = self.plan

        def work(s, e):
            out[s:e] = compute(be, plan, rows.chunk(s, e))

        _threads.run_chunks(n, chunk, work, 1 if getattr(be, "serial", False) else _threads.workers(threads, n, k), k)
        return out

    @on_device("matrix")
    @accepts_tensors
    def __call__(self, A, B, C, scale_a=None, scale_b=None, sparse_metadata=None, backend=None, threads=None):
        """Matrix form: ``(M, K) x (K, N) + (M, N) -> (M, N)``.

        One instruction: M and N are those the instruction string names
        (``m128n8k16...``), else a legal M and N of the datapath, and K is its K
        (:func:`mmasim.gemm` takes larger matrices).  ``scale_a`` is
        ``(M, blocks)``, ``scale_b`` ``(blocks, N)``; ``sparse_metadata`` is
        ``(M, words)`` (A is the sparse operand).  ``threads``: as for :meth:`dot`.
        """
        threads = _threads.check(threads)
        A, B, C, (M, K, N) = matrices(A, B, C, "matrix form")
        ms, ns = self._legal
        if (ms and M not in ms) or (ns and N not in ns):
            self.check_tiles(A.shape, B.shape, "matrix form")    # raises, naming the shapes
        dp = self.datapath
        if K != dp.k:
            raise ShapeError(
                f"{self.instruction} has K = {dp.k}" + (" (logical K of the sparse instruction)" if dp.sparse else "")
                + f", but A is {A.shape} and B is {B.shape} (K = {K}); chain instructions over K with mmasim.gemm"
            )
        if dp.scale and scale_a is not None and scale_b is not None:
            sa, sb = as_array(scale_a, "scale_a")[0], as_array(scale_b, "scale_b")[0]
            if sa.shape != (M, dp.blocks) or sb.shape != (dp.blocks, N):
                raise ScaleError(
                    f"matrix form of {self.instruction}: scale_a must be (M, blocks) = ({M}, {dp.blocks}) and "
                    f"scale_b (blocks, N) = ({dp.blocks}, {N}), one {self.scale_format.name} scale per block of "
                    f"{dp.block} elements; got {sa.shape} and {sb.shape}"
                )
            scale_a, scale_b = sa, sb
        if self.sparse_rule and sparse_metadata is not None:
            md = as_array(sparse_metadata, "sparse_metadata")[0]
            nwords = self.sparse_rule.words(dp.k)
            if md.shape != (M, nwords):
                raise SparseMetadataError(
                    f"matrix form of {self.instruction}: sparse_metadata must be (M, words) = ({M}, {nwords}) "
                    f"(A is the sparse operand); got {md.shape}"
                )
            sparse_metadata = self.check_metadata(md, lambda at: f"row {at[0]} of sparse_metadata")
        arrays, values, words = self._checked(A, B, C, scale_a, scale_b)
        scales = self._scale_words(arrays, scale_a, scale_b) or (None, None)
        self.takes_metadata(sparse_metadata)
        d = self.tile(*words, *scales, sparse_metadata, backend=backend, threads=threads)
        return self._as_given(d, values)

    def check_tiles(self, a_shape, b_shape, what: str, grid: bool = False):
        """Check M and N of ``A`` ``(M, K)`` and ``B`` ``(K, N)``: one instruction's
        (``grid=False``: M and N as the instruction string names them, else legal
        for the datapath) or a grid of instruction tiles (``grid=True``: multiples of
        them, as :func:`mmasim.gemm` takes).  Returns the ``(M, N)`` tile."""
        M, N = a_shape[0], b_shape[1]
        ms, ns = self._legal
        if not grid and (not ms or M in ms) and (not ns or N in ns):
            return M, N
        return (_extent(self.legal_m, M, "M", a_shape, "A", what, self, grid),
                _extent(self.legal_n, N, "N", b_shape, "B", what, self, grid))

    def tile(self, A, B, C, scale_a=None, scale_b=None, sparse_metadata=None, backend=None, threads=1):
        """D words ``(M, N)`` of the matrix form on operands already checked, as the matrix form
        and each K tile of :func:`mmasim.gemm` compute them after their one check: A ``(M, K)``,
        B ``(K, N)`` and C ``(M, N)`` container words of the datapath's formats (K its K, M and N
        any), ``scale_a`` ``(M, blocks)`` / ``scale_b`` ``(blocks, N)`` exactly when it is
        block-scaled, the metadata words ``(M, words)`` (:meth:`check_metadata`) exactly when it
        is sparse.  Nothing is checked here: a caller hands only what it has checked.
        ``backend``: a name as for :meth:`dot` (a GEMM passes the one it chose for the whole job)."""
        dp = self.datapath
        M, N = C.shape
        k = max(dp.k, 1)
        be = self._backend(backend, M * N * k)
        if M * N == 0:
            return np.empty((M, N), dtype=self.encoding.dtype)
        if self.sparse_rule is not None or not be.takes_matrices(self.plan):
            # a broadcast batch: row (i, j) is A's row i against B's column j
            arrays = [A[:, None, :], B.T[None, :, :], C]
            if dp.scale:
                arrays += [np.asarray(scale_a)[:, None, :], np.asarray(scale_b).T[None, :, :]]
            if sparse_metadata is not None:
                arrays.append(np.asarray(sparse_metadata)[:, None, :])
            return self._compute(arrays, (M, N), M * N, be, threads).reshape(M, N)
        # a backend that reads the matrices themselves (no broadcast copies)
        plan = self.plan
        nworkers = 1 if getattr(be, "serial", False) else _threads.workers(threads, M, k * N)
        if nworkers <= 1:
            rows = Rows.outer(A, B.T, C.reshape(-1), *((scale_a, scale_b.T) if dp.scale else ()))
            return compute(be, plan, rows).reshape(M, N)
        # on several threads: blocks of A's rows (and C's), each against the whole of B,
        # whose words are made contiguous once, not once per block
        dts = plan.word_dtypes
        bt = np.ascontiguousarray(B.T, dtype=dts[1])
        sbt = np.ascontiguousarray(scale_b.T, dtype=dts[4]) if dp.scale else None
        out = np.empty((M, N), dtype=self.encoding.dtype)

        def work(s, e):
            extra = (scale_a[s:e], sbt) if dp.scale else ()
            out[s:e] = compute(be, plan, Rows.outer(A[s:e], bt, C[s:e].reshape(-1), *extra)).reshape(e - s, N)

        _threads.run_chunks(M, M, work, nworkers, k * N)
        return out

    @accepts_tensors
    def decode(self, operand: str, words):
        """Decode words of ``operand`` ("a", "b", "c", "d" or "scale") with this datapath's formats.
        ``words`` are container words, checked as :meth:`dot` checks them (values, bools and
        words outside the container raise)."""
        fmt = self.format_of(operand)
        arr, mode = as_array(words, operand)
        if mode == VALUES:
            raise DtypeError(f"operand {operand}: decode takes container words (integers), not {arr.dtype} values; "
                             "Model.operand_words converts values to words")
        return self.plan.decode(fmt, checked_words(arr, mode, fmt, operand))

    # ----------------------------------------------------------- explanation
    def describe(self) -> str:
        """The datapath's composition, parameters and validation status."""
        dp = self.datapath
        f = self._reg.formats
        lines = [f"{self.arch}: {self.instruction}"]
        for name, fmt in (("A", self.a_format), ("B", self.b_format), ("C", self.c_format), ("D", self.d_format)):
            lines.append(f"  {name}: {fmt.describe()}; decoder {fmt.decoder!r}, {fmt.container_bits}-bit container")
        if dp.scale:
            lines.append(f"  scales: {f[dp.scale].describe()}; one per {dp.block} elements"
                         + (f" (scale_vec::{dp.scale_vec})" if dp.scale_vec else ""))
        lines.append(f"  K: {dp.k}" + (f" logical ({dp.stored_k} stored)" if dp.sparse else ""))
        if self.shape:
            lines.append(f"  shape: m{self.shape[0]}n{self.shape[1]} (named by the instruction string; "
                         "the matrix form takes exactly this M and N)")
        if dp.sparse:
            lines.append(f"  sparsity: {self.sparse_rule.description}")
        lines.append(f"  accumulator: {dp.accumulator} {_fmt_params(dp.parameters)}")
        chunk = self.plan.step
        lines.append(
            f"  steps: {dp.stored_k // chunk} x {chunk} elements"
            + (" (C of each step is D of the previous one, rounded)" if chunk < dp.stored_k else " (one window over the whole K)")
            + (f"; K dealt to the steps in runs of {dp.interleave} (step s takes the elements k with "
               f"(k // {dp.interleave}) % {dp.stored_k // chunk} == s)" if dp.interleave else "")
        )
        if dp.c_add:
            lines.append(f"  C: added after the steps (which start from +0) by one IEEE addition, "
                         f"{self.plan.c_add.key}: {self.plan.c_add.description}")
        lines.append(f"  rounding: {self.encoding.key}: {self.encoding.description}")
        specials = special_rules(dp.accumulator, self.accumulator)
        if dp.status.special_values:
            specials += f". {dp.status.special_values}"
        lines.append(f"  special values: {specials}")
        if dp.m or dp.n:
            lines.append(f"  shapes: M in {_fmt_range(dp.m)}, N in {_fmt_range(dp.n)}")
        lines.append(f"  validation: {self.status.describe(special_values=False)}")
        for name, value, reason in self.resolution.defaulted:
            lines.append(f"  defaulted: {name}={value} ({reason})")
        if dp.notes:
            lines.append(f"  notes: {dp.notes}")
        if dp.names:
            lines.append(f"  also accepted as: {', '.join(dp.names)}")
        return "\n".join(lines)

    # ------------------------------------------------------------ operand layouts (mmasim.placement)
    @functools.cached_property
    def placement(self) -> Placement:
        """What the operand layouts know of this instruction (:class:`mmasim.placement.Placement`:
        its datapath, family, formats, the registered layouts, the shape and ``.row`` / ``.col``
        pair its string names), the first argument of the functions of :mod:`mmasim.placement`
        (``compress``, ``expand``, ``a_tmem_layout``, ...)."""
        operand_formats = {"a": self.a_format, "b": self.b_format, "c": self.c_format, "d": self.d_format}
        if self.scale_format is not None:
            operand_formats["scale"] = self.scale_format
        reg = self._reg
        return Placement(arch=self.arch, instruction=self.instruction, datapath=self.datapath, family=self.family,
                         formats=reg.formats, rules=reg.layouts, families=reg.families,
                         operand_formats=operand_formats, shape=self.shape, legal_m=self.legal_m,
                         legal_n=self.legal_n, named=self.resolution.layout, sparse_rule=self.sparse_rule)

    def layout(self, operand: str, **options):
        """Where ``operand`` ("a", "b", "c", "d"; "scale_a", "scale_b" of a block-scaled
        instruction, "sparse_metadata" of a sparse one) lives: ``.lanes``, ``.registers``,
        ``.elements``, ``.coords(lane, i)``, ``.owner(row, col)`` (see :mod:`mmasim.placement`).
        ``options``: ``alayout`` / ``blayout`` ("row" / "col", for m8n8k4 .f16; default the pair the
        instruction string names, else row / col; any other pair is refused), ``byte_id`` /
        ``thread_id`` (the scales' selectors), ``selector`` (the sparsity selector)."""
        return bind.layout(self.placement, operand, **options)

    @accepts_tensors
    def fragments(self, operand: str, X, **options):
        """``uint32 (lanes, registers)``: matrix ``X`` (words or values) packed as the lanes hold it."""
        return bind.fragments(self.placement, operand, X, **options)

    @accepts_tensors
    def unfragment(self, operand: str, regs, **options):
        """The ``operand`` matrix (container words) held in ``regs`` ``(lanes, registers)``."""
        return bind.unfragment(self.placement, operand, regs, **options)

    @accepts_tensors
    def warp(self, a_regs, b_regs, c_regs, scale_a=None, scale_b=None, sparse_metadata=None, backend=None,
             byte_id_a=0, thread_id_a=0, byte_id_b=0, thread_id_b=0, sparsity_selector=0,
             a_descriptor=None, b_descriptor=None, a_major="K", b_major="K", lane_alignment=0, **options):
        """D registers ``uint32 (lanes, registers)`` of the instruction on register operands.

        Runs the function the instruction's family names (``Family.warp``: for ``wgmma.mma_async``
        and ``tcgen05.mma``, :mod:`mmasim.warp`), else :func:`mmasim.execution.registers.registers`:
        A, B and C are unpacked, computed with the matrix form (``model(A, B, C)``, per block where
        the lanes hold several independent matrices) and D is packed.  ``scale_a`` / ``scale_b``
        are the ``scale-a-data`` / ``scale-b-data`` registers ``(lanes, 1)`` of a block-scaled
        instruction, read with the ``{byte_id_a, thread_id_a}`` / ``{byte_id_b, thread_id_b}``
        selectors; ``sparse_metadata`` the metadata registers ``(lanes, 1)`` of a sparse one, read
        with ``sparsity_selector``; A of a sparse instruction holds the compressed A.

        ``wgmma.mma_async``: ``b_regs`` is B's shared-memory image (flat uint8 bytes or uint32
        words) and ``b_descriptor`` its 64-bit matrix descriptor (start address relative to the
        image, LBO, SBO, swizzle: :func:`mmasim.placement.decode_descriptor`); ``a_regs`` is A's
        registers over the 128-thread warpgroup, or, with ``a_descriptor``, A's shared-memory
        image.  ``a_major`` / ``b_major``: ``"K"`` (default) or ``"MN"`` (the instruction's
        transpose, .f16 / .bf16 only).  C and D are the accumulator registers.
        ``tcgen05.mma``, every form (shared-memory and Tensor Memory images, the CTA pair's,
        block scales, sparse metadata): :func:`mmasim.warp.tensor_memory.tcgen05_mma`, whose
        docstring gives the operands.  ``lane_alignment`` (0 or 16):
        where the half-data-path layouts C and F (tcgen05 M = 64, M = 128 ``cta_group::2`` sparse)
        start within each 32-lane sub-partition, the same for C / D, A in Tensor Memory and the
        metadata (PTX §9.7.16.10.5); an instruction without such a layout refuses 16 (``OperandError``).
        ``options``: the layout options of :meth:`layout` (``alayout``, ``blayout``).
        """
        bind.check_options(options, also=_WARP_KEYWORDS)
        if any(k in SELECTORS for k in options):
            raise OperandError("warp takes the selectors as byte_id_a, thread_id_a, byte_id_b, thread_id_b and "
                               "sparsity_selector")
        run = self.family.warp or registers
        return run(self, a_regs, b_regs, c_regs, scale_a=scale_a, scale_b=scale_b, sparse_metadata=sparse_metadata,
                   backend=backend, byte_id_a=byte_id_a, thread_id_a=thread_id_a, byte_id_b=byte_id_b,
                   thread_id_b=thread_id_b, sparsity_selector=sparsity_selector, a_descriptor=a_descriptor,
                   b_descriptor=b_descriptor, a_major=a_major, b_major=b_major, lane_alignment=lane_alignment,
                   **options)


#: the keywords of :meth:`Model.warp` beyond the layout options (named when one is misspelt)
_WARP_KEYWORDS = tuple(name for name, p in list(inspect.signature(Model.warp).parameters.items())[4:]
                       if p.kind is p.POSITIONAL_OR_KEYWORD and name not in SELECTORS)


def _fmt_params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _fmt_range(values) -> str:
    values = list(values)
    if not values:
        return "any"
    if len(values) > 3 and all(b - a == values[1] - values[0] for a, b in zip(values, values[1:])):
        return f"{values[0]}..{values[-1]} step {values[1] - values[0]}"
    return ", ".join(map(str, values))


def _extent(legal, size: int, axis: str, shape, operand: str, what: str, model, grid: bool) -> int:
    """The tile extent along ``axis`` for ``size`` (see :meth:`Model.check_tiles`)."""
    if not legal or (not grid and size in legal):
        return size
    fits = [t for t in legal if size and size % t == 0] if grid else []
    if fits:
        return max(fits)
    named = model.shape is not None
    listing = ", ".join(map(str, legal[:8])) + (", ..." if len(legal) > 8 else "")
    source = (f"the instruction string names {axis} = {legal[0]}" if named
              else f"{model.instruction} takes {axis} in {{{listing}}}")
    if grid:
        raise ShapeError(
            f"{what}: {operand} is {tuple(shape)}, so {axis} = {size}, which is not a multiple of "
            f"{'the' if named else 'a legal'} {axis.lower()} of {model.instruction} ({source})"
        )
    raise ShapeError(
        f"{what}: {operand} is {tuple(shape)}, so {axis} = {size}; {source}. The matrix form is one "
        "instruction: use mmasim.gemm for larger matrices, or Model.dot for single dot products"
    )


def matrices(A, B, C, what: str):
    """``A, B, C`` as arrays checked to be ``(M, K)``, ``(K, N)``, ``(M, N)``; also ``(M, K, N)``."""
    if not (type(A) is np.ndarray and type(B) is np.ndarray and type(C) is np.ndarray):
        A, B, C = as_array(A, "A")[0], as_array(B, "B")[0], as_array(C, "C")[0]
    return A, B, C, matrix_shapes(A.shape, B.shape, C.shape, what)


def matrix_shapes(a_shape, b_shape, c_shape, what: str):
    """``(M, K, N)`` of shapes checked to be ``(M, K)``, ``(K, N)``, ``(M, N)``."""
    a_shape, b_shape, c_shape = tuple(a_shape), tuple(b_shape), tuple(c_shape)
    if len(a_shape) != 2 or len(b_shape) != 2 or len(c_shape) != 2:
        raise ShapeError(f"{what} needs 2-D A, B, C; got {a_shape}, {b_shape}, {c_shape}")
    (M, K), (K2, N) = a_shape, b_shape
    if K != K2 or c_shape != (M, N):
        raise ShapeError(f"{what}: shapes do not fit (M,K) x (K,N) + (M,N): {a_shape}, {b_shape}, {c_shape}")
    return M, K, N
