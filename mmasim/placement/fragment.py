"""Register (and TMEM) fragment layouts: which lane holds which matrix element, where.

A :class:`FragmentRule` is data: the instructions it applies to and two formulas
(:mod:`mmasim.placement.expr`) giving the ``(row, col)`` of element ``i`` of lane
``lane``.  Binding a rule to one instruction's shape and element size gives a
:class:`Fragment`, the object ``Model.layout(operand)`` returns.

Packing (PTX "Matrix fragments" and the ``.f16x2`` / ``.e4m3x4`` vector types;
AMD's VGPR packing): sub-word elements fill each 32-bit register lowest element
first (element ``i`` at bits ``[(i % p) * bits, (i % p + 1) * bits)`` of register
``i // p``, ``p = 32 // bits``); a 64-bit element takes two consecutive 32-bit
registers, low half first (the ``{lo, hi}`` pair of a ``.b64`` / 64-bit VGPR pair).
"""

from __future__ import annotations

import functools
import itertools
from math import prod

import attrs
import numpy as np

from mmasim.errors import CopyMismatch, ShapeError, TableError
from mmasim.operands.tensors import plain_array
from mmasim.placement.base import Layout
from mmasim.placement.expr import SELECTORS, compile_expr, environment, evaluate

#: the matrix operands of every instruction
MATRICES = ("a", "b", "c", "d")
#: every operand a layout can place: the matrices, the block-scale factors of a block-scaled
#: ``mma.sync`` (``scale_a`` M x V, ``scale_b`` V x N) and the sparse metadata of ``mma.sp``
#: (``sparse_metadata``: M x chunks, one 4-bit selector per chunk of A's logical K)
OPERANDS = MATRICES + ("scale_a", "scale_b", "sparse_metadata")


def _tuple(x):
    if x is None:
        return ()
    if isinstance(x, (str, int)):
        return (x,)
    return tuple(x)


@attrs.frozen
class FragmentRule(Layout):
    """Where one operand of a family of instructions lives, as formulas.

    ``op``, ``m``, ``n``, ``k``, ``operands``, ``bits`` (container bits of the
    element), ``arch`` (architecture names; empty: any), ``kind`` (the
    datapath's ``kind``; ``None``: any, ``""``: none) and ``alayout`` /
    ``blayout`` (``"row"`` / ``"col"``; ``""``: any) ``types`` / ``abits`` (the
    datapath's A format name / A container bits; empty: any) and ``sparse`` (``True``: sparse
    instructions only, ``False``: dense only, ``None``: either, except that A and the
    metadata of a sparse instruction need a ``sparse=True`` rule, A being the compressed
    operand) select the instructions; an unset ``m`` / ``n`` / ``k`` matches any.
    ``qualifiers``: the datapath's qualifiers exactly (e.g. ``("cta_group::2",)``, ``("ws",)``,
    ``()`` for none; ``None``: any).
    ``selectors``: the selector operands the formulas use (``byte_id``, ``thread_id``,
    ``selector``); ``legal``: a formula of them (and ``V``) that must hold (the ISA's valid
    values).  ``elements``: per lane (a formula of
    ``M``, ``N``, ``K``).  ``row`` / ``col``: formulas of ``lane`` and ``i``.
    ``blocks`` > 1: the lanes hold that many independent matrices (AMD
    multi-block ``v_mfma``, Volta's quad pairs); ``block`` says which, and the
    layout's matrix is their stack along its rows.  ``valid``: which slots hold an
    element (default all).  ``storage``: ``"registers"`` or ``"tmem"`` (lanes are
    TMEM lanes, registers TMEM columns).  ``copies``: lane offsets at which the image repeats
    every lane that holds elements (a Tensor Memory operand each lane group of a data path reads
    in full: lane ``l + offset`` holds what lane ``l`` holds); ``pack`` writes the copies and
    ``unpack`` refuses an image whose copies disagree (:class:`~mmasim.CopyMismatch`).
    """

    name: str
    op: str
    operands: tuple = attrs.field(converter=_tuple)
    row: str
    col: str
    elements: object
    lanes: int = 32
    m: int | None = None
    n: int | None = None
    k: int | None = None
    bits: tuple = attrs.field(default=(), converter=_tuple)
    arch: tuple = attrs.field(default=(), converter=_tuple)
    kind: str | None = None
    types: tuple = attrs.field(default=(), converter=_tuple)
    abits: tuple = attrs.field(default=(), converter=_tuple)
    alayout: str = ""
    blayout: str = ""
    blocks: int = 1
    block: str = "0"
    valid: str = ""
    sparse: bool | None = None
    qualifiers: tuple | None = attrs.field(default=None, converter=lambda x: None if x is None else _tuple(x))
    selectors: tuple = attrs.field(default=(), converter=_tuple)
    legal: str = ""
    storage: str = "registers"
    copies: tuple = attrs.field(default=(), converter=_tuple)
    description: str = ""
    source: str = ""
    #: what the formulas were checked against (required, no default: a rule must say it);
    #: the built-ins write ``"checked: <document, section>"`` only where the formula was
    #: compared with the document's text, ``"partly checked: ..."`` / ``"unverified: ..."``
    #: otherwise (docs/layouts.md)
    evidence: str = attrs.field(kw_only=True)

    def __attrs_post_init__(self):
        where = f"layout {self.name!r}"
        if not isinstance(self.evidence, str) or not self.evidence.strip():
            raise TableError(f"{where}: evidence must say what the formulas rest on (a non-empty string, "
                             f"e.g. 'checked: PTX ISA 9.0 §9.7.14.5.8' or 'unverified: ...'); got {self.evidence!r}")
        bad = [o for o in self.operands if o not in OPERANDS]
        if bad or not self.operands:
            raise TableError(f"{where}: operands must be among {OPERANDS}; got {self.operands}")
        for field in ("row", "col", "block", "elements") + (("valid",) if self.valid else ()) \
                + (("legal",) if self.legal else ()):
            compile_expr(getattr(self, field), f"{where}: field {field!r}")
        bad = [s for s in self.selectors if s not in SELECTORS]
        if bad:
            raise TableError(f"{where}: selectors must be among {SELECTORS}; got {bad}")
        if self.sparse not in (None, True, False):
            raise TableError(f"{where}: sparse must be True, False or None; got {self.sparse!r}")
        if self.storage not in ("registers", "tmem"):
            raise TableError(f"{where}: storage must be 'registers' or 'tmem', got {self.storage!r}")
        if any(isinstance(o, bool) or not isinstance(o, int) or not 0 < o < self.lanes for o in self.copies) \
                or len(set(self.copies)) != len(self.copies):
            raise TableError(f"{where}: copies must be distinct lane offsets 0 < offset < lanes ({self.lanes}); "
                             f"got {self.copies}")

    # the registry's key and arch filter
    @property
    def kind_name(self) -> str:
        return "fragment"

    def matches(self, op, m, n, k, operand, bits, arch, kind, a_type="", a_bits=0,
                alayout="row", blayout="col", sparse=False, qualifiers=()) -> bool:
        if self.sparse is not None and bool(self.sparse) != bool(sparse):
            return False
        if sparse and operand in ("a", "sparse_metadata") and self.sparse is not True:
            return False        # a dense A layout would place the compressed A wrongly
        if self.qualifiers is not None and set(self.qualifiers) != set(qualifiers or ()):
            return False
        return (op == self.op and operand in self.operands
                and (not self.types or a_type in self.types)
                and (not self.abits or a_bits in self.abits)
                and (self.m is None or self.m == m) and (self.n is None or self.n == n)
                and (self.k is None or self.k == k)
                and (not self.bits or bits in self.bits)
                and (not self.arch or arch in self.arch)
                and (self.kind is None or (self.kind or None) == (kind or None))
                and (not self.alayout or self.alayout == alayout)
                and (not self.blayout or self.blayout == blayout))

    def bind(self, operand: str, M: int, N: int, K: int, bits: int, shape: tuple | None = None, V: int = 0,
             **selectors) -> "Fragment":
        """The layout of ``operand`` for one shape: ``shape`` is the operand matrix (default
        A ``M x K``, B ``K x N``, C / D ``M x N``), ``V`` the scale vector size, ``selectors``
        the values of the selector operands (default 0)."""
        sel = tuple(int(selectors.get(name, 0)) for name in SELECTORS)
        return _bind(self, operand, M, N, K, bits, None if shape is None else tuple(shape), V, sel)

    def check_selectors(self, V: int = 0, **selectors) -> str:
        """``""`` when the selector values are legal for this rule, else why not."""
        unused = {k: v for k, v in selectors.items() if v and k not in self.selectors}
        if unused:
            return (f"{', '.join(f'{k}={v}' for k, v in unused.items())}: operand(s) {', '.join(self.operands)} "
                    f"of this instruction take no such selector")
        if self.legal and not self._legal(V, selectors):
            return (", ".join(f"{k}={selectors.get(k, 0)}" for k in self.selectors)
                    + f" is not a valid selector value: {self.legal_values(V)}")
        return ""

    def _legal(self, V: int, selectors: dict) -> bool:
        return bool(evaluate(compile_expr(self.legal), environment(1, 1, 0, 0, 0, V, **selectors)))

    #: selector values tried when the legal ones are listed (the ISA's are small: 0..3, 0 / 16)
    LISTED = 64

    def legal_values(self, V: int = 0) -> str:
        """The selector values :attr:`legal` allows, in words: ``selector is 0 or 1``;
        ``byte_id is 0 or 2, thread_id is 0 or 1`` where each selector's values do not depend on
        the others', else the legal combinations."""
        names = self.selectors
        grid = np.array(list(itertools.product(range(self.LISTED), repeat=len(names))), dtype=np.int64)
        env = {**environment(1, 1, 0, 0, 0, V), **{n: grid[:, j] for j, n in enumerate(names)}}
        legal = np.broadcast_to(np.asarray(evaluate(compile_expr(self.legal), env), dtype=bool), grid.shape[:1])
        ok = [tuple(int(x) for x in row) for row in grid[legal]]
        if not ok:
            return "no value is valid for this instruction"
        each = [sorted({c[j] for c in ok}) for j in range(len(names))]
        more = any(self.LISTED - 1 in vals for vals in each)

        def one_of(vals):
            text = " or ".join(map(str, vals)) if len(vals) <= 2 else ", ".join(map(str, vals[:-1])) + f" or {vals[-1]}"
            return text + (" or more" if more else "")

        if len(ok) == prod(len(v) for v in each):         # each selector's values on their own
            return ", ".join(f"{n} is {one_of(v)}" for n, v in zip(names, each))
        combos = "; ".join(", ".join(f"{n}={v}" for n, v in zip(names, c)) for c in ok[:16])
        return f"the valid ({', '.join(names)}) are {combos}" + ("; ..." if len(ok) > 16 or more else "")


@functools.lru_cache(maxsize=512)
def _bind(rule, operand, M, N, K, bits, shape=None, V=0, sel=()):
    selectors = dict(zip(SELECTORS, tuple(sel) + (0,) * (len(SELECTORS) - len(sel))))
    where = f"layout {rule.name!r} ({operand}, m{M}n{N}k{K}, {bits}-bit elements)"
    scal = {"M": M, "N": N, "K": K, "lane": 0, "i": 0, "g": 0, "t": 0, "w": 0, "E": 0, "V": V, **selectors}
    elements = int(evaluate(compile_expr(rule.elements), scal))
    if elements <= 0:
        raise TableError(f"{where}: {elements} elements per lane")
    env = environment(rule.lanes, elements, M, N, K, V, **selectors)
    full = np.ones((rule.lanes, elements), dtype=bool)

    def ev(field):
        return np.broadcast_to(np.asarray(evaluate(compile_expr(getattr(rule, field)), env), dtype=np.int64),
                               full.shape).copy()

    row, col, blk = ev("row"), ev("col"), ev("block")
    valid = full if not rule.valid else np.broadcast_to(
        np.asarray(evaluate(compile_expr(rule.valid), env), dtype=bool), full.shape).copy()
    base = shape if shape is not None else {"a": (M, K), "b": (K, N), "c": (M, N), "d": (M, N)}[operand]
    rows, cols = base[0] * rule.blocks, base[1]
    v = valid
    if (row[v] < 0).any() or (row[v] >= base[0]).any() or (col[v] < 0).any() or (col[v] >= cols).any() \
            or (blk[v] < 0).any() or (blk[v] >= rule.blocks).any():
        raise TableError(f"{where}: a formula leaves the {base[0]}x{base[1]} matrix (x{rule.blocks} blocks)")
    srow = np.where(v, row + blk * base[0], -1)
    scol = np.where(v, col, -1)
    flat = srow[v] * cols + scol[v]
    counts = np.bincount(flat, minlength=rows * cols)
    if flat.size != rows * cols or counts.max(initial=0) != 1:
        raise TableError(f"{where}: the formulas are not a bijection onto the {rows}x{cols} matrix "
                         f"({int((counts == 0).sum())} elements unheld, {int((counts > 1).sum())} held twice)")
    held = np.flatnonzero(v.any(axis=1))
    taken = np.zeros(rule.lanes, dtype=bool)
    taken[held] = True
    for off in rule.copies:
        to = held + off
        if (to >= rule.lanes).any() or taken[to[to < rule.lanes]].any():
            raise TableError(f"{where}: the copy at lane offset {off} leaves the {rule.lanes} lanes or lands on "
                             "lanes that hold elements or another copy")
        taken[to] = True
    frag = Fragment(rule, operand, M, N, K, bits, rows, cols, elements, srow, scol, v)
    frag.selectors = {k: selectors[k] for k in rule.selectors}
    return frag


class Fragment:
    """One operand of one instruction in registers (or TMEM): the bound layout.

    ``lanes``, ``registers`` (32-bit registers per lane), ``elements`` (per lane),
    ``rows`` x ``cols`` (the operand matrix; for ``blocks`` > 1 the stack of the
    blocks' matrices along rows), ``coords(lane, i)``, ``owner(row, col)``,
    ``pack(words)`` and ``unpack(registers)``.
    """

    def __init__(self, rule, operand, M, N, K, bits, rows, cols, elements, row, col, valid):
        self.rule, self.operand = rule, operand
        self.M, self.N, self.K, self.bits = M, N, K, bits
        self.rows, self.cols, self.elements = rows, cols, elements
        self.lanes = rule.lanes
        self.blocks = rule.blocks
        #: lane offsets of the image's copies (``FragmentRule.copies``) and the lanes they copy
        self.copies = tuple(getattr(rule, "copies", ()))
        self._held = np.flatnonzero(valid.any(axis=1))
        self._source = np.arange(rule.lanes)
        for off in self.copies:
            self._source[self._held + off] = self._held
        #: the selector operand values this layout was bound with (e.g. ``{"thread_id": 0}``)
        self.selectors = {}
        self._row, self._col, self._valid = row, col, valid
        for a in (row, col, valid):
            a.setflags(write=False)
        if bits > 32:
            self.per_register = 0
            self.registers = elements * (bits // 32)
        else:
            self.per_register = 32 // bits
            self.registers = -(-elements // self.per_register)
        own = np.full((rows, cols, 2), -1, dtype=np.int64)
        lane, i = np.nonzero(valid)
        own[row[lane, i], col[lane, i]] = np.stack([lane, i], axis=-1)
        own.setflags(write=False)
        self._owner = own

    @classmethod
    def from_pairs(cls, name: str, pairs, lanes: int, registers: int, description: str = "", source: str = "",
                   evidence: str = "unverified: a table of (lane, register) pairs with no stated source"):
        """The irregular case, as a table: word ``j`` of a ``(1, len(pairs))`` result vector is
        register ``pairs[j][1]`` of lane ``pairs[j][0]`` (32-bit elements, one per register)."""
        pairs = [(int(t), int(r)) for t, r in pairs]
        if len(set(pairs)) != len(pairs) or any(not (0 <= t < lanes and 0 <= r < registers) for t, r in pairs):
            raise TableError(f"layout {name!r}: (lane, register) pairs must be distinct and within "
                             f"{lanes} lanes x {registers} registers")
        row = np.full((lanes, registers), -1, dtype=np.int64)
        col = np.full((lanes, registers), -1, dtype=np.int64)
        valid = np.zeros((lanes, registers), dtype=bool)
        for j, (t, r) in enumerate(pairs):
            row[t, r], col[t, r], valid[t, r] = 0, j, True
        rule = FragmentRule(name, "table", "d", row="0", col="0", elements=registers, lanes=lanes,
                            description=description, source=source, evidence=evidence)
        return cls(rule, "d", 1, len(pairs), 0, 32, 1, len(pairs), registers, row, col, valid)

    @property
    def name(self) -> str:
        return self.rule.name

    @property
    def storage(self) -> str:
        return self.rule.storage

    @property
    def evidence(self) -> str:
        """What the layout's formulas were checked against (the rule's ``evidence``)."""
        return self.rule.evidence

    @property
    def source(self) -> str:
        """The document section the formulas come from (the rule's ``source``)."""
        return self.rule.source

    @property
    def shape(self) -> tuple:
        return (self.rows, self.cols)

    def __repr__(self) -> str:
        where = "TMEM lanes x columns" if self.storage == "tmem" else "lanes x 32-bit registers"
        sel = "".join(f", {k}={v}" for k, v in self.selectors.items())
        return (f"<mmasim.placement.Fragment {self.name}{sel}: {self.operand} {self.rows}x{self.cols}, "
                f"{self.lanes} {where} {self.registers}, {self.elements} {self.bits}-bit elements per lane>")

    # ---------------------------------------------------------------- lookups
    def coords(self, lane: int, i: int) -> tuple:
        """``(row, col)`` of element ``i`` of ``lane``'s fragment (PTX's a0, a1, ... order); a lane
        of a copy (``copies``) gives the element it repeats."""
        lane, i = _index(lane, "lane", self.lanes), _index(i, "element", self.elements)
        lane = int(self._source[lane])
        if not self._valid[lane, i]:
            raise ShapeError(f"{self.name}: lane {lane} holds no element {i} of {self.operand.upper()}")
        return int(self._row[lane, i]), int(self._col[lane, i])

    def owner(self, row: int, col: int) -> tuple:
        """``(lane, i)`` holding element ``(row, col)``: the inverse of :meth:`coords` (with
        ``copies``, the first lane holding it)."""
        row, col = _index(row, "row", self.rows), _index(col, "col", self.cols)
        lane, i = self._owner[row, col]
        return int(lane), int(i)

    def register(self, i: int) -> tuple:
        """``(register, first bit)`` of element ``i`` within a lane's registers (64-bit
        elements: the first of their two registers, bit 0)."""
        i = _index(i, "element", self.elements)
        if self.per_register:
            return i // self.per_register, (i % self.per_register) * self.bits
        return i * (self.bits // 32), 0

    def table(self):
        """``(row, col, valid)`` arrays of shape ``(lanes, elements)``."""
        return self._row, self._col, self._valid

    # ---------------------------------------------------------------- packing
    def pack(self, words) -> np.ndarray:
        """``uint32 (lanes, registers)``: container words of the ``(rows, cols)`` matrix
        placed as the hardware holds them (slots holding no element are 0)."""
        w = plain_array(words, "words")
        if w.shape != (self.rows, self.cols):
            raise ShapeError(f"{self.name}: operand {self.operand.upper()} must be {self.rows}x{self.cols}"
                             + (f" ({self.blocks} blocks stacked along rows)" if self.blocks > 1 else "")
                             + f"; got {w.shape}")
        w = w.astype(np.uint64)
        el = np.where(self._valid, w[np.maximum(self._row, 0), np.maximum(self._col, 0)], 0).astype(np.uint64)
        regs = np.zeros((self.lanes, self.registers), dtype=np.uint64)
        if self.per_register:
            shift = (np.arange(self.elements) % self.per_register * self.bits).astype(np.uint64)
            mask = np.uint64((1 << self.bits) - 1)
            for j in range(self.per_register):
                part = el[:, j::self.per_register]
                regs[:, : part.shape[1]] |= (part & mask) << shift[j]
        else:
            per = self.bits // 32
            for h in range(per):
                regs[:, h::per] = (el >> np.uint64(32 * h)) & np.uint64(0xFFFFFFFF)
        for off in self.copies:
            regs[self._held + off] = regs[self._held]
        return regs.astype(np.uint32)

    def unpack(self, registers) -> np.ndarray:
        """The ``(rows, cols)`` matrix of container words held in ``registers``
        ``(lanes, registers)`` (unsigned words of the element's container size)."""
        r = plain_array(registers, "registers")
        if r.shape != (self.lanes, self.registers):
            raise ShapeError(f"{self.name}: {self.operand.upper()} registers must be (lanes, registers) = "
                             f"({self.lanes}, {self.registers}); got {r.shape}")
        if r.dtype.kind not in "iu" or (r.size and (r.min() < 0 or int(r.max()) > 0xFFFFFFFF)):
            raise ShapeError(f"{self.name}: registers must be 32-bit words (integers 0..0xFFFFFFFF)")
        r = r.astype(np.uint64)
        if self.per_register:
            idx = np.arange(self.elements)
            el = (r[:, idx // self.per_register] >> (idx % self.per_register * self.bits).astype(np.uint64)) \
                & np.uint64((1 << self.bits) - 1)
        else:
            per = self.bits // 32
            el = np.zeros((self.lanes, self.elements), dtype=np.uint64)
            for h in range(per):
                el |= r[:, h::per] << np.uint64(32 * h)
        v = self._valid
        for off in self.copies:
            src, dup = el[self._held], el[self._held + off]
            bad = (src != dup) & v[self._held]
            if bad.any():
                j, i = (int(x[0]) for x in np.nonzero(bad))
                lane = int(self._held[j])
                raise CopyMismatch(
                    f"{self.name}: {self.operand.upper()} is duplicated in the lanes {off} above the ones that hold it "
                    f"(each lane group of the data path reads its own copy); element {i} is {int(src[j, i]):#x} in "
                    f"lane {lane} but {int(dup[j, i]):#x} in lane {lane + off} (fragments() writes every copy)")
        dt = np.uint8 if self.bits <= 8 else np.uint16 if self.bits <= 16 else np.uint32 if self.bits <= 32 else np.uint64
        out = np.zeros((self.rows, self.cols), dtype=dt)
        out[self._row[v], self._col[v]] = el[v].astype(dt)
        return out


def operand_bits(dp, family, formats, operand: str) -> tuple:
    """(format name, container bits) of ``operand``'s elements in datapath ``dp`` of ``family``
    (``formats``: the registry's formats); C / D held in Tensor Memory take one 32-bit word
    per element, not packed (PTX §9.7.16.10.4.1)."""
    if operand == "sparse_metadata":
        return "4-bit selector", 4
    fmt = formats[dp.scale if operand in ("scale_a", "scale_b") else getattr(dp, operand)]
    if operand in ("c", "d") and family.storage_of(operand)[0] == "tmem":
        return fmt.name, 32
    return fmt.name, fmt.container_bits


def rule_key(dp, formats, operand: str, M, N, alayout: str = "row", blayout: str = "col", *, family) -> dict:
    """What :meth:`FragmentRule.matches` reads of ``operand`` of datapath ``dp`` (of ``family``) at
    shape ``M x N`` (``formats``: the registry's formats): the one description of an instruction's
    operand that every layout look-up and the registry's layout claims use."""
    return dict(op=dp.op, m=M, n=N, k=dp.k, operand=operand, bits=operand_bits(dp, family, formats, operand)[1],
                arch=dp.arch, kind=dp.kind, a_type=dp.a, a_bits=formats[dp.a].container_bits, alayout=alayout,
                blayout=blayout, sparse=bool(dp.sparse), qualifiers=tuple(dp.qualifiers))


def _index(x, what, size):
    if isinstance(x, (bool, np.bool_)) or not isinstance(x, (int, np.integer)):
        raise ShapeError(f"{what} must be an integer, got {x!r}")
    if not 0 <= int(x) < size:
        raise ShapeError(f"{what} {int(x)} is out of range 0..{size - 1}")
    return int(x)
