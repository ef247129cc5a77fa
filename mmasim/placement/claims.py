"""Which operands a register layout rule would take from another plugin's rule.

A :class:`~mmasim.placement.FragmentRule` applies to every instruction operand it
matches (:func:`~mmasim.placement.fragment.rule_key`), and the most specific matching
rule wins.  So a rule copied under a new name with one more filter (an
architecture, a shape) would silently replace the layout of an instruction
another plugin placed.  :func:`taken` finds such an operand: the registry refuses
the rule's plugin (a :class:`~mmasim.errors.PluginConflict`), as it refuses a
datapath another plugin already registers.  A rule may still place operands no
other plugin's rule places, and every operand of its own plugin's datapaths.
"""

from __future__ import annotations

import attrs

from mmasim.placement.fragment import OPERANDS, FragmentRule, rule_key

_MAJOR = ("row", "col")


@attrs.frozen
class Claim:
    """``rule`` would place ``operand`` of ``datapath`` at ``m x n``, which ``held`` places already."""

    rule: FragmentRule
    held: FragmentRule
    datapath: object
    operand: str
    m: object
    n: object


def _values(legal: tuple, mine, theirs) -> list:
    """The M (or N) values worth trying: ``legal`` (empty: any) cut to the rule's own value,
    or else the rivals' values and one value none of them names (a stand-in for the rest)."""
    if mine is not None:
        return [mine] if not legal or mine in legal else []
    named = sorted({v for v in theirs if v is not None})
    if legal:
        rest = [v for v in legal if v not in named]
        return [v for v in legal if v in named] + rest[:1]
    return named + [-1]      # -1: a shape no rule names (an unset m / n matches any)


def _has(dp, operand: str) -> bool:
    if operand in ("scale_a", "scale_b"):
        return bool(dp.scale)
    if operand == "sparse_metadata":
        return bool(dp.sparse)
    return operand in OPERANDS


def taken(rule: FragmentRule, others, datapaths, formats, family_of) -> Claim | None:
    """The first operand of ``datapaths`` that ``rule`` matches and a rule of ``others`` matches
    too (so that one of them would stop placing it, or both would tie), or ``None``
    (``family_of(op)``: the instruction family of an op)."""
    for dp in datapaths:
        if dp.op != rule.op:
            continue
        for operand in rule.operands:
            if not _has(dp, operand):
                continue
            rivals = [q for q in others if q.op == dp.op and operand in q.operands]
            if not rivals:
                continue
            for m in _values(tuple(dp.m), rule.m, [q.m for q in rivals]):
                for n in _values(tuple(dp.n), rule.n, [q.n for q in rivals]):
                    for alayout in _MAJOR:
                        for blayout in _MAJOR:
                            key = rule_key(dp, formats, operand, m, n, alayout, blayout, family=family_of(dp.op))
                            if not rule.matches(**key):
                                continue
                            for q in rivals:
                                if q.matches(**key):
                                    return Claim(rule, q, dp, operand, m, n)
    return None
