"""A resolved datapath, ready to compute: ``Model.dot`` and ``Model(A, B, C)``."""

from __future__ import annotations

import numpy as np

from .datapath import Datapath
from .errors import ScaleError, ShapeError, SparseMetadataError
from .registry import Registry
from .sparse import RULES as SPARSE_RULES
from .sparse import select
from .special import rules_for as special_rules
from .words import from_words, to_words


class Model:
    """The simulator of one datapath of one architecture.

    Use :func:`mmasim.MMA` to make one.  ``dot`` works on batches of dot
    products; calling the model works on matrices.
    """

    def __init__(self, datapath: Datapath, registry: Registry):
        self.datapath = datapath
        self._reg = registry
        f = registry.formats
        self.a_format, self.b_format = f[datapath.a], f[datapath.b]
        self.c_format, self.d_format = f[datapath.c], f[datapath.d]
        self.scale_format = f[datapath.scale] if datapath.scale else None
        self.encoding = registry.encodings[datapath.rounding]
        self.accumulator = registry.accumulators[datapath.accumulator]
        self.sparse_rule = SPARSE_RULES[datapath.sparse] if datapath.sparse else None
        self._decode = {k: registry.decoders[v.decoder] for k, v in f.items()}

    # ------------------------------------------------------------------ names
    @property
    def arch(self) -> str:
        return self.datapath.arch

    @property
    def instruction(self) -> str:
        return self.datapath.canonical(self._reg.formats)

    @property
    def k(self) -> int:
        return self.datapath.k

    @property
    def status(self):
        return self.datapath.status

    def __repr__(self) -> str:
        return f"<mmasim.Model {self.arch}: {self.instruction} ({self.status.kind})>"

    # ------------------------------------------------------------ computation
    def dot(self, a, b, c, scale_a=None, scale_b=None, sparse_metadata=None):
        """D words of ``c + sum(a*b)`` as the hardware computes them.

        ``a``, ``b``: shape ``(..., K)`` (the logical K, also for sparse
        instructions); ``c``: shape ``(...)``; scales ``(..., blocks)``;
        ``sparse_metadata``: ``(..., words)`` of 32-bit selector words.  Batch
        shapes broadcast.  Returns D words (``uint32``/``uint16``/``uint64``),
        or a typed array when ``a`` is typed.
        """
        dp = self.datapath
        wa, typed = to_words(a, self.a_format, "a")
        wb, _ = to_words(b, self.b_format, "b")
        wc, _ = to_words(c, self.c_format, "c")
        for name, w in (("a", wa), ("b", wb)):
            if w.ndim == 0 or w.shape[-1] != dp.k:
                raise ShapeError(
                    f"operand {name} must have shape (..., {dp.k}) for {self.instruction}"
                    + (" (the logical K of the sparse instruction)" if dp.sparse else "")
                    + f"; got {w.shape}"
                )
        extra = []
        if dp.scale:
            if scale_a is None or scale_b is None:
                raise ScaleError(f"{self.instruction} needs scale_a and scale_b of shape (..., {dp.blocks})")
            for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
                ws, _ = to_words(s, self.scale_format, name)
                if ws.ndim == 0 or ws.shape[-1] != dp.blocks:
                    raise ScaleError(
                        f"{name} must have shape (..., {dp.blocks}): one {self.scale_format.name} scale per block "
                        f"of {dp.block} elements; got {ws.shape}"
                    )
                extra.append(ws)
        elif scale_a is not None or scale_b is not None:
            raise ScaleError(f"{self.instruction} is not block-scaled: scale_a/scale_b must be None")
        if self.sparse_rule:
            if sparse_metadata is None:
                raise SparseMetadataError(f"{self.instruction} is sparse: pass sparse_metadata")
            md = np.asarray(sparse_metadata)
            nwords = self.sparse_rule.words(dp.k)
            if md.dtype.kind not in "iu" or md.ndim == 0 or md.shape[-1] != nwords:
                raise SparseMetadataError(
                    f"sparse_metadata must be integer words of shape (..., {nwords}); got {md.dtype} {md.shape}"
                )
            if md.size and (md.min() < 0 or int(md.max()) > 0xFFFFFFFF):
                raise SparseMetadataError("sparse_metadata words must be 32-bit (0 <= word <= 0xFFFFFFFF)")
            extra.append(md.astype(np.uint64))
        elif sparse_metadata is not None:
            raise SparseMetadataError(f"{self.instruction} is dense: sparse_metadata must be None")
        try:
            batch = np.broadcast_shapes(wa.shape[:-1], wb.shape[:-1], wc.shape, *(e.shape[:-1] for e in extra))
        except ValueError as exc:
            shapes = ", ".join(str(x.shape) for x in (wa, wb, wc, *extra))
            raise ShapeError(f"operand batch shapes do not broadcast: {shapes}") from exc
        n = int(np.prod(batch, dtype=np.int64))
        flat = lambda w: np.broadcast_to(w, batch + w.shape[len(w.shape) - 1:]).reshape(n, w.shape[-1])
        wa, wb = flat(wa), flat(wb)
        wc = np.broadcast_to(wc, batch).reshape(n)
        extra = [flat(e) for e in extra]
        sa = sb = None
        if dp.scale:
            sa, sb = extra[0], extra[1]
        if self.sparse_rule:
            wa, wb = select(self.sparse_rule, dp.k, extra[-1], wa, wb)
        d = self._steps(wa, wb, wc, sa, sb).reshape(batch)
        return from_words(d, self.d_format) if typed else d

    def _steps(self, wa, wb, wc, sa, sb):
        dp = self.datapath
        k = wa.shape[-1]
        step = min(dp.chunk or k, k)
        if sa is not None:
            sa = np.repeat(sa, dp.block, axis=-1)
            sb = np.repeat(sb, dp.block, axis=-1)
        params = dp.parameters
        c_fmt = self.c_format
        words = wc
        for s in range(0, k, step):
            cut = slice(s, s + step)
            A = self._decode[dp.a](self.a_format, wa[:, cut])
            B = self._decode[dp.b](self.b_format, wb[:, cut])
            C = self._decode[c_fmt.key](c_fmt, words)
            SA = SB = None
            if sa is not None:
                SA = self._decode[dp.scale](self.scale_format, sa[:, cut])
                SB = self._decode[dp.scale](self.scale_format, sb[:, cut])
            words = self.accumulator(A, B, C, SA, SB, self.encoding, **params)
            c_fmt = self.d_format
        return words

    def __call__(self, A, B, C, scale_a=None, scale_b=None, sparse_metadata=None):
        """Matrix form: ``(M, K) x (K, N) + (M, N) -> (M, N)``.

        ``scale_a`` is ``(M, blocks)``, ``scale_b`` ``(blocks, N)``;
        ``sparse_metadata`` is ``(M, words)`` (A is the sparse operand).
        """
        A, B, C = np.asarray(A), np.asarray(B), np.asarray(C)
        if A.ndim != 2 or B.ndim != 2 or C.ndim != 2:
            raise ShapeError(f"matrix form needs 2-D A, B, C; got {A.shape}, {B.shape}, {C.shape}")
        (M, K), (K2, N) = A.shape, B.shape
        if K != K2 or C.shape != (M, N):
            raise ShapeError(f"matrix shapes do not fit (M,K) x (K,N) + (M,N): {A.shape}, {B.shape}, {C.shape}")
        a = A[:, None, :]
        b = B.T[None, :, :]
        sa = None if scale_a is None else np.asarray(scale_a)[:, None, :]
        sb = None if scale_b is None else np.asarray(scale_b).T[None, :, :]
        md = None if sparse_metadata is None else np.asarray(sparse_metadata)[:, None, :]
        return self.dot(a, b, C, scale_a=sa, scale_b=sb, sparse_metadata=md)

    def decode(self, operand: str, words):
        """Decode words of ``operand`` ("a", "b", "c", "d" or "scale") with this datapath's formats."""
        fmt = {"a": self.a_format, "b": self.b_format, "c": self.c_format, "d": self.d_format,
               "scale": self.scale_format}[operand]
        return self._decode[fmt.key](fmt, np.asarray(words))

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
        if dp.sparse:
            lines.append(f"  sparsity: {self.sparse_rule.description}")
        lines.append(f"  accumulator: {dp.accumulator} {_fmt_params(dp.parameters)}")
        chunk = min(dp.chunk or dp.stored_k, dp.stored_k)
        lines.append(
            f"  steps: {dp.stored_k // chunk} x {chunk} elements"
            + (" (C of each step is D of the previous one, rounded)" if chunk < dp.stored_k else " (one window over the whole K)")
        )
        lines.append(f"  rounding: {self.encoding.key}: {self.encoding.description}")
        lines.append(f"  special values: {special_rules(dp.accumulator, self.accumulator)}")
        if dp.m or dp.n:
            lines.append(f"  shapes: M in {_fmt_range(dp.m)}, N in {_fmt_range(dp.n)}")
        lines.append(f"  validation: {dp.status.describe()}")
        if dp.notes:
            lines.append(f"  notes: {dp.notes}")
        if dp.names:
            lines.append(f"  also accepted as: {', '.join(dp.names)}")
        return "\n".join(lines)


def _fmt_params(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items())


def _fmt_range(values) -> str:
    values = list(values)
    if not values:
        return "any"
    if len(values) > 3 and all(b - a == values[1] - values[0] for a, b in zip(values, values[1:])):
        return f"{values[0]}..{values[-1]} step {values[1] - values[0]}"
    return ", ".join(map(str, values))
