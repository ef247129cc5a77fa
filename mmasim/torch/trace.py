"""What an ``emulate`` block did: :class:`Call` (one GEMM, or one op that multiplies matrices
and was not emulated) and :class:`Trace` (every call, a table, JSON).

A call is recorded per GEMM an op runs: the forward, and, when the backward runs, its input
gradient (``dgrad``) and weight gradient (``wgrad``) GEMMs; attention's two GEMMs are parts
``"QK^T"`` and ``"PV"`` of one op.  An op that multiplies matrices but is not emulated is one
call with ``emulated=False`` and the reason.
"""

from __future__ import annotations

import threading

import attrs

#: the version of :meth:`Trace.to_json`'s document
SCHEMA = "mmasim.trace/1"


@attrs.frozen
class Call:
    """One recorded GEMM (or op not emulated).

    - ``op``: the torch function, as ``torch.overrides.resolve_name`` names it
      (``"torch.nn.functional.linear"``, ``"torch.Tensor.matmul"``);
    - ``module``: the name of the innermost module of the ``emulate`` model that ran it
      (``""`` for the model itself), ``None`` without a model;
    - ``part``: ``""``, or which GEMM of the op (``"QK^T"``, ``"PV"`` for attention);
    - ``step``: ``"forward"``, ``"dgrad"`` (the gradient of the GEMM's A operand) or ``"wgrad"``
      (of its B operand);
    - ``shapes``: the shapes of the op's tensor arguments (forward) or of ``(gradient, operand)``;
    - ``batch``, ``m``, ``n``, ``k``: the GEMMs run (``batch`` of ``m x k`` by ``k x n``);
      ``products``: ``batch * m * n * k`` (``None`` where an op not emulated gives no GEMM shape);
    - ``k_order``: the order of K's elements for a convolution (``"(r, s, c)"``), else ``None``;
    - ``emulation``: the preset name or ``"arch instruction"`` of the setting chosen, ``None``
      where none applies; ``instruction``: the instruction of this step;
    - ``emulated``: whether the GEMM went through :func:`mmasim.gemm`; ``reason``: why not, ``""``
      when it did.
    """

    op: str
    module: str | None
    part: str
    step: str
    shapes: tuple
    batch: int | None
    m: int | None
    n: int | None
    k: int | None
    products: int | None
    k_order: str | None
    emulation: str | None
    instruction: str | None
    emulated: bool
    reason: str

    @property
    def gemm(self) -> str:
        """``part`` and ``step`` in a few words (``"QK^T dgrad"``, ``"forward"``)."""
        return f"{self.part} {self.step}".strip()

    def to_json(self) -> dict:
        return {"op": self.op, "module": self.module, "part": self.part, "step": self.step,
                "shapes": [list(s) for s in self.shapes], "batch": self.batch, "m": self.m, "n": self.n,
                "k": self.k, "products": self.products, "k_order": self.k_order, "emulation": self.emulation,
                "instruction": self.instruction, "emulated": self.emulated, "reason": self.reason}


class Trace:
    """The calls of one ``emulate`` block, in the order they ran (backward GEMMs when the backward
    ran, also after the block ended).  ``calls``: the :class:`Call` list; :meth:`table`: a summary
    (one row per op, module, GEMM and outcome); :meth:`to_json`: the ``mmasim.trace/1`` document."""

    def __init__(self):
        self._calls: list = []
        self._lock = threading.Lock()

    def add(self, call: Call) -> None:
        with self._lock:
            self._calls.append(call)

    @property
    def calls(self) -> list:
        with self._lock:
            return list(self._calls)

    @property
    def not_emulated(self) -> list:
        """The calls that did not go through :func:`mmasim.gemm`."""
        return [c for c in self.calls if not c.emulated]

    def __len__(self) -> int:
        return len(self._calls)

    def _groups(self) -> list:
        groups: dict = {}
        for c in self.calls:
            key = (c.op, c.module, c.gemm, c.emulation, c.emulated, c.reason)
            g = groups.setdefault(key, {"calls": 0, "products": 0, "shapes": set(), "k_order": set()})
            g["calls"] += 1
            g["products"] = None if g["products"] is None or c.products is None else g["products"] + c.products
            g["shapes"].add(None if c.m is None else (c.batch, c.m, c.n, c.k))
            g["k_order"].add(c.k_order)
        return list(groups.items())

    def table(self) -> str:
        """One row per (op, module, GEMM, emulation, outcome): the calls, the GEMM shape
        (``batch x M x N x K``, ``varies`` where calls differ), the products, the emulation and
        ``yes`` or ``no: why``; then the totals."""
        head = ("op", "module", "gemm", "calls", "batch x M x N x K", "products", "emulation", "emulated")
        rows = []
        for (op, module, gemm, emulation, emulated, reason), g in self._groups():
            shapes = g["shapes"]
            only = next(iter(shapes))
            shape = "varies" if len(shapes) > 1 else "-" if only is None else " x ".join(map(str, only))
            orders = g["k_order"] - {None}
            if orders:
                shape += " K " + (next(iter(orders)) if len(orders) == 1 else "varies")
            rows.append((op.removeprefix("torch."), "-" if module is None else (module or "(model)"), gemm,
                         str(g["calls"]), shape, "-" if g["products"] is None else f"{g['products']:,}",
                         emulation or "-", "yes" if emulated else f"no: {reason}"))
        w = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

        def line(r):
            return "  ".join(f"{c:{n}s}" for c, n in zip(r, w)).rstrip()

        calls = self.calls
        done = [c for c in calls if c.emulated]
        out = [line(head), line(tuple("-" * n for n in w)), *map(line, rows), ""]
        out.append(f"{len(calls)} GEMM calls, {len(done)} emulated, {len(calls) - len(done)} not emulated; "
                   f"{sum(c.products for c in done):,} products emulated")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()

    def to_json(self) -> dict:
        """``{"schema": "mmasim.trace/1", "calls": [...], "summary": {...}}``: every call
        (:meth:`Call.to_json`) and the counts (docs/torch.md)."""
        calls = self.calls
        done = [c for c in calls if c.emulated]
        return {"schema": SCHEMA, "calls": [c.to_json() for c in calls],
                "summary": {"calls": len(calls), "emulated": len(done), "not_emulated": len(calls) - len(done),
                            "products_emulated": sum(c.products for c in done)}}
