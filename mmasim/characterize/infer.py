"""Reading the probe ladders back: datapath parameters from D words (docs/characterize.md).

Gives :func:`infer`: from an instruction's shape (a :class:`~mmasim.Model`; only its formats,
K, block size and sparse rule are read), the probe cases and the measured (or simulated) D
words, a :class:`Proposal`: the accumulator family, each parameter with the probes that
decided it (or the values the words leave open and why), and a proposed ``[[datapath]]``.
The outcomes of each rung are :mod:`~mmasim.characterize.outcomes`' exact arithmetic, never
the table's datapath; :mod:`~mmasim.characterize.ladders` reads one ladder,
:mod:`~mmasim.characterize.window_readers` and :mod:`~mmasim.characterize.two_stage` each
family.  A proposal is reported as reproducing the device only when a datapath built from it
alone (:func:`candidate_model`) gives every probe word.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.registry.datapath import Datapath
from mmasim.characterize.findings import Finding, Proposal
from mmasim.characterize.outcomes import pack, word_value
from mmasim.characterize.probes import build
from mmasim.characterize.two_stage import read_two_stage
from mmasim.characterize.window_readers import read_group_scaled, read_window

#: accumulator families this module can characterize, in the order they are tried
FAMILIES = ("window", "two_stage_window", "group_scaled_window")


def _entry_for(family, f, model):
    """The proposed [[datapath]] keys (shape keys from the instruction, the rest inferred)."""
    dp = model.datapath
    reg = model.registry
    entry = {"op": dp.op}
    if dp.kind:
        entry["kind"] = dp.kind
    entry.update(a=dp.a, b=dp.b)
    if dp.c != dp.d:
        entry["c"] = dp.c
    entry.update(d=dp.d, k=dp.k)
    if dp.scale:
        entry.update(scale=dp.scale, block=dp.block)
        if dp.scale_vec:
            entry["scale_vec"] = dp.scale_vec
    if dp.sparse:
        entry["sparse"] = dp.sparse
    step = _choose(f["step"], dp.stored_k)
    if step < dp.stored_k:
        entry["chunk"] = step
    entry["accumulator"] = family
    params = {}
    if family == "window":
        params["F"] = _choose(f["F"], 25)
        params["zeros"] = _choose(f["zeros"], "excluded")
    elif family == "two_stage_window":
        params["F"] = _choose(f["F"], 24)
        params["F2"] = _choose(f["F2"], 31)
        for k in ("even_odd", "drop_c"):
            if _choose(f[k], False):
                params[k] = True
        for k in ("overflow", "nonfinite_c_r"):
            v = _choose(f[k], None)
            if v is not None:
                params[k] = v
    elif family == "group_scaled_window":
        params["F"] = _choose(f["F"], 35)
        params["group"] = _choose(f["group"], 16)
        params["zeros"] = _choose(f["zeros"], -139)
    for k in ("group", "scale_floor", "c_dominant", "c_relative", "subnormal_redo"):
        if family == "window" and k in f:
            v = _choose(f[k], None)
            if v is not None and not (k == "group" and v == 1) and v != "?":
                params[k] = v
    sr = f.get("subnormal_redo")
    if (family == "window" and sr is not None and params.get("zeros") == "excluded" and not sr.determined
            and sr.lo is not None and sr.lo == sr.hi):
        params["subnormal_redo"] = sr.lo
    entry["params"] = params
    entry["rounding"] = _choose(f["rounding"], None) or reg_first(reg, dp.d)
    return entry


def reg_first(reg, d):
    return next(e.key for e in reg.encodings.values() if e.format == d)


def _choose(finding, default):
    """A representative value: the determined one, else a consistent one."""
    if finding.determined:
        return finding.value
    if "?" in finding.also:          # the ladders contradict each other: no value fits
        return default
    if default in finding.also or (isinstance(default, int) and not isinstance(default, bool)
                                   and finding.admits(default)):
        return default
    if finding.also:
        return finding.also[0]
    if finding.lo is not None:
        return finding.lo
    if finding.hi is not None:
        return finding.hi
    return default


def candidate_model(model, entry):
    """A :class:`~mmasim.Model` of the proposal: the instruction's formats, K, scales and sparse
    rule, with the proposed accumulator, parameters, step and rounding (nothing else of the table)."""
    from mmasim.execution.model import Model
    dp = model.datapath
    new = Datapath(arch=dp.arch, op=dp.op, kind=dp.kind, a=dp.a, b=dp.b, c=dp.c, d=dp.d, k=dp.k,
                   accumulator=entry["accumulator"], rounding=entry["rounding"], params=entry["params"],
                   chunk=entry.get("chunk"), scale=dp.scale, block=dp.block, scale_vec=dp.scale_vec,
                   sparse=dp.sparse, saturate=dp.saturate)
    return Model(new, model.registry, backend=model.backend)


def infer(model, cases: dict, d_words, probes=None) -> Proposal:
    """Infer the datapath parameters of ``model``'s instruction from the D words ``d_words``
    measured (or simulated) on ``cases`` (the arrays of :func:`~mmasim.characterize.probe_cases`,
    matched by label).  Only the instruction's formats, K, block size and sparse rule are read from
    ``model``."""
    from mmasim.characterize.probes import _arrays
    probes = build(model) if probes is None else probes
    labels = [str(x) for x in np.asarray(cases["labels"]).tolist()]
    d_words = np.asarray(d_words).astype(np.uint64)
    ours = _arrays(model, probes)
    index = {lab: i for i, lab in enumerate(labels)}
    measured = {}
    for j, pr in enumerate(probes):
        i = index.get(pr.label)
        if i is None:
            continue
        same = (np.array_equal(np.asarray(cases["a"])[i].astype(np.uint64), ours["a"][j])
                and np.array_equal(np.asarray(cases["b"])[i].astype(np.uint64), ours["b"][j])
                and int(np.asarray(cases["c"])[i]) == int(ours["c"][j]))
        for key in ("scale_a", "scale_b", "sparse_metadata"):
            if same and key in ours:
                same = key in cases and np.array_equal(np.asarray(cases[key])[i].astype(np.uint64), ours[key][j])
        if same:
            measured[pr.label] = int(d_words[i])
    reg = model.registry
    encodings = [e for e in reg.encodings.values() if e.format == model.d_format.key and e.mode in ("rz", "rne")]
    tried = []
    good, fails = [], []
    kept_probes = [pr for pr in probes if pr.label in measured]
    sub = _arrays(model, kept_probes) if kept_probes else None
    want = np.array([measured[pr.label] for pr in kept_probes], dtype=np.uint64)
    for family in _families(model):
        reader = {"window": read_window, "two_stage_window": read_two_stage, "group_scaled_window": read_group_scaled}[family]
        results, rej = reader(model, probes, measured, encodings)
        if results is None:
            tried.append((family, "; ".join(f"{a}: {b}" for a, b in rej)))
            continue
        for findings in results:
            _propose(model, family, findings, sub, want, kept_probes, tried, good, fails)
    good = _merge_open(good, model.datapath.stored_k)
    best = min(fails, key=lambda p: len(p.mismatches), default=None)
    if good:
        # several families reproduce every word: the one with the fewest parameters first
        good.sort(key=lambda p: len(p.entry["params"]))
        return attrs.evolve(good[0], rejected=tuple(tried), alternatives=tuple(good[1:]))
    if best is not None:
        return attrs.evolve(best, rejected=tuple(tried))
    return Proposal(model.arch, model.instruction, None, {}, {}, 0, len(want), (), tuple(tried))


def _merge_open(good, stored_k):
    """Where several proposals of one family reproduce every probe word, a parameter on which
    they differ is open in the first one (its values listed); the others stay as alternatives."""
    def values(p):
        return {**p.entry["params"], "rounding": p.entry["rounding"], "step": p.entry.get("chunk", stored_k)}
    out = []
    for i, p in enumerate(good):
        same = [q for q in good if q.family == p.family]
        if same[0] is not p or len(same) == 1:
            out.append(p)
            continue
        findings = dict(p.findings)
        mine = values(p)
        for name in mine:
            seen = []
            for q in same:
                v = values(q).get(name)
                if v not in seen:
                    seen.append(v)
            if len(seen) > 1:
                old = findings.get(name) or Finding(name)
                findings[name] = Finding(name, also=tuple(seen), probes=old.probes,
                                         note="the probes leave these open: each reproduces every probe word with "
                                              "the other parameters of its proposal (see the alternatives)")
        out.append(attrs.evolve(p, findings=findings))
    return out


def _propose(model, family, findings, sub, want, kept_probes, tried, good, fails):
    """Build the proposal of ``findings`` and check it by simulating every probe."""
    from mmasim.characterize.probes import probe_words
    entry = _entry_for(family, findings, model)
    try:
        got = probe_words(candidate_model(model, entry), sub) if sub is not None else want
    except Exception as exc:       # a proposal the accumulator refuses
        tried.append((family, f"proposal not computable: {exc}"))
        return
    bad = tuple(pr.label for pr, g, w in zip(kept_probes, got, want) if int(g) != int(w))
    prop = Proposal(model.arch, model.instruction, family, findings, entry, len(want) - len(bad), len(want),
                    bad, tuple(tried))
    if not bad:
        good.append(prop)
        return
    tried.append((family, f"proposal ({entry['rounding']}) reproduces {len(want) - len(bad)} of "
                          f"{len(want)} probe words"))
    fails.append(prop)


def _families(model):
    if model.datapath.scale:
        return ("window", "group_scaled_window")
    return ("window", "two_stage_window")


__all__ = ["Finding", "Proposal", "infer", "candidate_model", "FAMILIES", "pack", "word_value"]
