"""Shared by the built-in layout catalogue (:mod:`mmasim.placement.catalog`): the rule maker and
the PTX ISA version the evidence strings cite.

Evidence: what each formula was checked against.  "checked: ..." only where the formula
was compared with the document's own text (quoted in tests/test_layout_formulas.py);
anything less says so (docs/layouts.md, "Not yet checked against the documents").
"""

from __future__ import annotations

from .fragment import FragmentRule

_ISA = "PTX ISA 9.0"


def rule_maker(evidence_table: dict):
    """``R(name, ...)``: a built-in :class:`FragmentRule` whose evidence is ``evidence`` or
    ``evidence_table[name]`` (a KeyError at import for a rule that has neither, so no entry can
    leave it out).  The table is read when a rule is made, so a module may add to it as it goes."""

    def R(name, *args, evidence=None, **kw):
        return FragmentRule(name, *args, evidence=evidence or evidence_table[name], **kw)

    return R
