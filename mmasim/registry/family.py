"""Instruction families as records: what the core asks of an op (``Datapath.op``).

A :class:`Family` says how an instruction family is spelt (:class:`Syntax`), where its
operands live, which function runs it at warp level and which compile target an architecture's
kernels take.  Which module emits its kernels and which device runs them the harness keeps in
its own table, keyed by the family's name (docs/plugins.md, "Harness emitters and devices").  Plugins register families through
the ``mmasim_families`` hook (one owner per name); the built-in ones are
``mmasim_plugins.families``.  An op no plugin registers a family for is read with
:func:`plain`: its dot-separated name as its lead tokens, operands in registers.
This module imports nothing of mmasim.
"""

from __future__ import annotations

import functools
import re
from typing import Callable

import attrs

#: the spaces an operand can live in (``Family.storage``)
SPACES = ("registers", "smem", "tmem")


@attrs.frozen
class Syntax:
    """The tokens of one instruction family beyond its operands' qualifiers."""

    lead: tuple = attrs.field(converter=tuple)   # tokens that name the family, in order ("tcgen05", "mma")
    fixed: tuple = attrs.field(default=(), converter=tuple)    # tokens PTX writes for it, optional here
    #: ``(dp, formats) -> ((alayout, blayout), ...)``: the .row/.col pairs allowed ``dp``; None: no .row/.col
    layouts: Callable | None = None
    layout_note: str = ""           # said where only .row.col is allowed (what allows the others)
    kind_optional: bool = False     # a missing kind:: means the form without one
    c_type: bool = False            # the family spells a C type (three types D.A.B mean C = D)
    naming: tuple = attrs.field(default=(), converter=tuple)   # tokens that name an instruction of their own
    hints: dict = attrs.field(factory=dict, hash=False)    # token -> field: accepted, no arithmetic change
    cta_group: bool = False         # takes cta_group::1 / cta_group::2
    refused: dict = attrs.field(factory=dict, hash=False)  # token -> why it is not modelled
    #: ``(qualifiers, types) -> message | None``: the family's rules on naming tokens and types
    check: Callable | None = None
    prefixes: tuple = attrs.field(default=(), converter=tuple)  # spellings dropped for close-match hints

    def layouts_of(self, dp, formats) -> tuple:
        """The ``(.alayout, .blayout)`` pairs the family allows ``dp``; ``()`` without .row/.col."""
        return tuple(self.layouts(dp, formats)) if self.layouts is not None else ()

    def layout_rule(self, dp, formats) -> str:
        """:meth:`layouts_of` in words, for error messages."""
        pairs = self.layouts_of(dp, formats)
        if not pairs:
            return f"{dp.op} takes no .row / .col qualifiers"
        if len(pairs) == 1:
            (a, b), = pairs
            note = f" ({self.layout_note})" if self.layout_note else ""
            return f"PTX allows only .{a}.{b} for {dp.canonical(formats)}{note}"
        return f"{dp.canonical(formats)} takes any of " + ", ".join(f".{a}.{b}" for a, b in pairs)


def _storage(value) -> dict:
    return {operand: tuple(spaces) for operand, spaces in dict(value).items()}


@attrs.frozen
class Family:
    """One instruction family (the ``op`` of its datapaths) and the rules the core asks it for."""

    name: str                       # the datapath op: "mma.sync", "wgmma.mma_async", ...
    syntax: Syntax
    #: operand -> the spaces it may live in, the first where ``Model.layout`` places it ("smem" first:
    #: read through a descriptor only); an operand not listed lives in registers
    storage: dict = attrs.field(factory=dict, converter=_storage, hash=False)
    descriptor: str | None = None   # the shared-memory descriptor format (mmasim.placement.smem targets)
    #: ``(kind, fmt) -> ("bytes" | "pair" | "padded", bits)``: sub-byte codes in shared memory; None: whole containers
    smem_packing: Callable | None = None
    #: ``warp(model, a, b, c, **keywords) -> D``: warp-level execution; None: register operands
    warp: Callable | None = None
    #: ``(architecture names) -> compile target | None``: the target its kernels are compiled for
    target: Callable | None = None

    def __attrs_post_init__(self):
        for operand, spaces in self.storage.items():
            bad = [s for s in spaces if s not in SPACES]
            if not spaces or bad:
                raise ValueError(f"family {self.name}: operand {operand!r}: storage must name spaces of {SPACES}; "
                                 f"got {spaces!r}")

    def storage_of(self, operand: str) -> tuple:
        """The spaces ``operand`` may live in (the first: where ``Model.layout`` places it)."""
        return self.storage.get(operand, ("registers",))

    def compile_target(self, names) -> str | None:
        """The compile target of the architecture called ``names`` (its name and aliases), or None."""
        return self.target(tuple(names)) if self.target is not None else None


@functools.lru_cache(maxsize=None)
def plain(op: str) -> Family:
    """The family of an op no plugin registers: its dot-separated name as its lead tokens."""
    return Family(op, Syntax(lead=tuple(op.split("."))))


@attrs.frozen
class AliasTarget:
    """A compile-target rule: the first alias that matches ``preferred`` (a regular expression),
    else the first that matches ``pattern``."""

    pattern: str
    preferred: str | None = None

    def __call__(self, names: tuple) -> str | None:
        for rx in ([self.preferred] if self.preferred else []) + [self.pattern]:
            for name in names:
                if re.fullmatch(rx, name, re.ASCII):
                    return name
        return None


__all__ = ["SPACES", "Syntax", "Family", "plain", "AliasTarget"]
