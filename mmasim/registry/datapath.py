"""Value classes for what an architecture table declares: datapaths and their evidence."""

from __future__ import annotations

import attrs

from mmasim.arith.sparse import RULES as SPARSE_RULES

STATUS_KINDS = ("hardware", "peer", "assumed")


def _shapes(value):
    """``None`` (the claim holds for every shape of the datapath) or a tuple of ``(M, N)``."""
    if value is None:
        return None
    return tuple((int(m), int(n)) for m, n in value)


def _fmt_shapes(shapes) -> str:
    return "; ".join(f"M={m}, N={n}" for m, n in shapes)


@attrs.frozen
class Status:
    """Where a datapath's claim comes from (docs/datapaths.md §9).

    ``shapes``: the ``(M, N)`` shapes the claim was measured at.  ``None``: the
    claim is not tied to a shape (the datapath has one shape, or the source
    covers all of them); ``()``: measured at shapes the source does not name, so
    no named shape carries the claim.  See :meth:`Datapath.status_for`.
    """

    kind: str = attrs.field(validator=attrs.validators.in_(STATUS_KINDS))
    evidence: str = ""
    device: str = ""
    cases: int | None = None
    source: str = ""
    shapes: tuple | None = attrs.field(default=None, converter=_shapes)
    #: A claim about special values that is weaker than ``kind`` (which covers the
    #: finite results), stated with its own label, e.g. "NaN result: canonical
    #: 0x7FF8000000000000 (assumed: not measured; ...)".  ``explain`` prints it on
    #: the special-values line.
    special_values: str = ""

    def describe(self, special_values: bool = True) -> str:
        """One line: kind, device, cases, source, evidence (and the special-value caveat)."""
        parts = [self.kind]
        if self.device:
            parts.append(self.device)
        if self.shapes is not None:
            parts.append(f"for {_fmt_shapes(self.shapes)} only; other shapes assumed" if self.shapes
                         else "at M/N shapes the source does not name; every named shape assumed")
        if self.cases:
            parts.append(f"{self.cases:,} cases")
        if self.source:
            parts.append(f"source {self.source}")
        text = ", ".join(parts)
        text = f"{text}: {self.evidence}" if self.evidence else text
        if special_values and self.special_values:
            text += f"; special values: {self.special_values}"
        return text

    def at_shape(self, m: int | None, n: int | None) -> "Status":
        """The status of a lookup that asked for shape ``M = m, N = n`` (``None``: not named)."""
        if self.shapes is None or m is None or n is None:
            return self
        if (m, n) in self.shapes:
            return attrs.evolve(self, shapes=None,
                                evidence=f"measured at M={m}, N={n}; {self.evidence}".rstrip("; "))
        where = _fmt_shapes(self.shapes) if self.shapes else "M/N shapes the source does not name"
        return Status(
            "assumed",
            evidence=(f"not measured at M={m}, N={n}: the {self.kind} claim ({self.device or 'see source'}) "
                      f"holds for {where} only; the same per-element arithmetic is assumed at this shape. "
                      f"{self.evidence}").strip(),
            source=self.source,
            special_values=self.special_values,
        )


def _freeze(value):
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw_params(params):
    out = {}
    for k, v in params:
        out[k] = dict(_thaw_params(v)) if isinstance(v, tuple) and v and isinstance(v[0], tuple) else v
    return out


@attrs.frozen
class Datapath:
    """One arithmetic datapath of one architecture: formats, K, accumulator, rounding."""

    arch: str
    op: str                                  # "tcgen05.mma", "mma.sync", "wgmma.mma_async", "v_mfma"
    kind: str | None
    a: str                                   # format keys (registry)
    b: str
    c: str
    d: str
    k: int                                   # logical K of one instruction
    accumulator: str
    rounding: str                            # encoding key
    params: tuple = attrs.field(converter=_freeze, factory=tuple)
    chunk: int | None = None                 # elements per hardware step (L); None: all of K
    # K dealt to the steps in runs of this many elements (0: contiguous steps); see step_order
    interleave: int = 0
    # encoding key: the steps start from +0 and C is added to the last step's D by one
    # IEEE addition rounded by this encoding (None: C enters the first step)
    c_add: str | None = None
    scale: str | None = None                 # scale format key
    block: int | None = None                 # elements per scale block
    scale_vec: str | None = None             # "1X", "2X", "4X"
    sparse: str | None = None                # sparse selector rule name
    saturate: bool = False
    m: tuple = attrs.field(converter=tuple, factory=tuple)   # legal M (empty: any)
    n: tuple = attrs.field(converter=tuple, factory=tuple)   # legal N (empty: any)
    names: tuple = attrs.field(converter=tuple, factory=tuple)  # extra accepted spellings
    # PTX qualifier tokens that name this instruction beyond its types, shape and kind, in
    # PTX order: ("and", "popc") / ("xor", "popc") for b1 mma, ("cta_group::2",) or ("ws",)
    # for tcgen05.mma (see mmasim.registry.lookup); a lookup must name exactly these
    qualifiers: tuple = attrs.field(converter=tuple, factory=tuple)
    # qualifiers this datapath fills when a lookup leaves them open, with the reason
    # (the short form a document defines), as ((field, reason), ...); see mmasim.registry.lookup
    default_for: tuple = attrs.field(converter=_freeze, factory=tuple)
    refuse: str = ""                         # non-empty: lookup fails with this reason
    status: Status = attrs.field(factory=lambda: Status("assumed"))
    notes: str = ""

    @property
    def defaults(self) -> dict:
        """``{field: reason}``: the qualifiers this datapath fills when a lookup leaves them open."""
        return dict(self.default_for)

    def status_for(self, m: int | None = None, n: int | None = None) -> Status:
        """The validation status of this datapath at shape ``M = m, N = n`` (``None``: not named)."""
        return self.status.at_shape(m, n)

    @property
    def parameters(self) -> dict:
        return _thaw_params(self.params)

    @property
    def stored_k(self) -> int:
        """Elements per row after sparse compaction (= ``k`` for dense)."""
        return self.k // 2 if self.sparse else self.k

    @property
    def step(self) -> int:
        """Elements per hardware step: ``chunk``, at most the stored K (C of each
        step is D of the previous one; docs/datapaths.md §1)."""
        return min(self.chunk or self.stored_k, self.stored_k)

    @property
    def step_order(self):
        """The stored K positions in the order the steps take them, or ``None`` when
        step ``s`` takes the contiguous elements ``s * step ..``.  With ``interleave``
        ``r``, the elements are dealt to the steps in runs of ``r``: position ``k``
        belongs to step ``(k // r) % steps`` (docs/datapaths.md §1)."""
        if not self.interleave:
            return None
        steps, r = self.stored_k // self.step, self.interleave
        return tuple(k for s in range(steps) for k in range(self.stored_k) if (k // r) % steps == s)

    @property
    def blocks(self) -> int:
        return self.stored_k // self.block if self.block else 0

    def canonical(self, formats) -> str:
        """The PTX-style name mmasim prints for this datapath."""
        fa, fb, fc, fd = (formats[x].name for x in (self.a, self.b, self.c, self.d))
        # as PTX orders them: tcgen05.mma.ws.sp.cta_group::2.kind::...; b1's .and.popc last
        ws = [q for q in self.qualifiers if q == "ws"]
        cta = [q for q in self.qualifiers if q.startswith("cta_group::")]
        lead = ws + cta
        parts = [self.op, *ws]
        if self.sparse:
            parts.append("sp::ordered_metadata" if SPARSE_RULES[self.sparse].ordered else "sp")
        parts += cta
        if self.kind:
            parts.append(f"kind::{self.kind}")
        if self.scale:
            parts.append("block_scale")
            if self.scale_vec:
                parts.append(f"scale_vec::{self.scale_vec}")
            if self.block:
                parts.append(f"block{self.block}")
        if len(self.m) == 1 and len(self.n) == 1:
            parts.append(f"m{self.m[0]}n{self.n[0]}k{self.k}")
        elif not self.kind:
            parts.append(f"k{self.k}")
        parts += [fd, fa, fb]
        if fc != fd:
            parts.append(fc)
        if self.scale:
            parts.append(formats[self.scale].name)
        if self.saturate:
            parts.append("satfinite")
        parts += [q for q in self.qualifiers if q not in lead]
        return ".".join(parts)


@attrs.frozen
class Architecture:
    """An architecture: its names and its datapaths."""

    name: str
    vendor: str
    description: str
    aliases: tuple = attrs.field(converter=tuple)
    datapaths: tuple = attrs.field(converter=tuple)
    source: str = ""
    inherits: str = ""                       # another architecture whose datapaths this one has
    evidence: tuple = attrs.field(converter=tuple, factory=tuple)  # (match, Status) for inherited ones
