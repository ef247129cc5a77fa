"""Characterize a datapath: run fixed probe ladders and infer its table parameters
(docs/characterize.md).

``probe_cases(model)`` builds the probes, ``infer(model, cases, d_words)`` reads the
parameters back from the D words and proposes a ``[[datapath]]`` entry;
``characterize(model)`` runs the probes through the simulator, ``from_vectors`` reads a
device's words from an mmasim-vectors file.

A tool: may import the core packages and ``mmasim.vectors``.
"""

from __future__ import annotations

from mmasim.errors import CharacterizeError
from mmasim.characterize.infer import FAMILIES, Finding, Proposal, candidate_model, infer
from mmasim.characterize.probes import _arrays, build, probe_cases, probe_words


def characterize(model) -> Proposal:
    """Probe ``model`` through the simulator and infer its parameters from the words alone."""
    probes = build(model)
    cases = _arrays(model, probes)
    return infer(model, cases, probe_words(model, cases), probes=probes)


def from_vectors(model, vf) -> Proposal:
    """Infer ``model``'s parameters from a vector file ``vf`` (:func:`mmasim.vectors.files.load`) whose
    cases include the probes of :func:`probe_cases` (matched by label and words)."""
    from mmasim.vectors.files import expected_words, extra_operands

    if vf.labels is None:
        raise CharacterizeError(f"{vf.path}: no labels: the probe cases are matched by their labels")
    d = expected_words(vf, model)
    cases = {"a": vf.a, "b": vf.b, "c": vf.c, "labels": vf.labels, **extra_operands(vf, model)}
    prop = infer(model, cases, d)
    if prop.total == 0:
        raise CharacterizeError(f"{vf.path}: none of its cases is a probe of {model.instruction} "
                       "(write them with mmasim harness run --probes)")
    return prop


__all__ = ["CharacterizeError", "probe_cases", "infer", "characterize", "from_vectors", "build", "probe_words", "Proposal", "Finding",
           "candidate_model", "FAMILIES"]
