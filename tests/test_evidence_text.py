"""Evidence text that users read (``mmasim explain``, ``mmasim layout``, docs/reference.md) states
what the evidence is, never how or when this project worked on it."""

import re

import pytest

import mmasim
from mmasim.placement import tmem

#: phrases of a work log, not of evidence
DEVELOPMENT_NOTES = re.compile(
    r"\bsession\b|re-?checked|\bnot yet\b|\bread here\b|\bissue \d|\bTODO\b|\bFIXME\b|\bfor now\b", re.I)


def _texts():
    reg = mmasim.get_registry()
    for name, arch in reg.architectures.items():
        for dp in arch.datapaths:
            where = f"{name}: {dp.canonical(reg.formats)}"
            yield f"{where} status", dp.status.evidence or ""
            yield f"{where} notes", dp.notes or ""
    for name, rule in reg.layouts.items():
        yield f"layout {name}", getattr(rule, "evidence", "") or ""
    for letter, text in tmem.DATAPATH_EVIDENCE.items():
        yield f"tmem layout {letter}", text


def test_the_texts_are_collected():
    texts = list(_texts())
    assert sum(1 for where, _ in texts if where.startswith("layout ")) > 100
    assert sum(1 for where, _ in texts if where.endswith(" status")) > 1000


@pytest.mark.parametrize("phrase", ["read in an earlier session and not re-checked", "not yet compared",
                                    "Figure 121 (not read here)", "(issue 12)"])
def test_the_check_sees_a_work_log_phrase(phrase):
    assert DEVELOPMENT_NOTES.search(phrase)


def test_no_evidence_text_carries_a_development_note():
    bad = [(where, m.group(0)) for where, text in _texts() for m in [DEVELOPMENT_NOTES.search(text)] if m]
    assert not bad, bad[:20]
