"""Reading one probe ladder as a threshold (docs/characterize.md): which rungs kept the small
term and which dropped it, the bounds that leaves, and the helpers both families' readers share."""

from __future__ import annotations

from fractions import Fraction

from mmasim.characterize.findings import Finding


def threshold(rungs, measured, outcomes, below_kept: bool):
    """Read a ladder: ``outcomes(probe) -> (kept_word, dropped_word)`` (``None``: the rung cannot
    be read).  Returns ``(kept_args, dropped_args, anomalies, labels)``; ``below_kept``: small args
    are the kept side (visibility, step and group ladders) rather than large args (zeros, where
    u >= E - F is kept).  A rung not measured, or whose two outcomes are one word, is skipped."""
    kept, dropped, bad, used = [], [], [], []
    for pr in rungs:
        w = measured.get(pr.label)
        words = None if w is None else outcomes(pr)
        if words is None:
            continue
        k_w, d_w, *other = words             # other: more words that also mean "dropped"
        if k_w == d_w:
            continue
        if w == k_w:
            kept.append(pr.arg)
        elif w == d_w or w in other:
            dropped.append(pr.arg)
        else:
            bad.append(pr.label)
            continue
        used.append((pr.label, pr.arg))
    return kept, dropped, bad, decisive_first(used, kept, dropped, below_kept)


def decisive_first(used, kept, dropped, below_kept):
    """Labels of the informative rungs, the two that straddle the threshold first."""
    if below_kept:
        edge = {max(kept, default=None), min(dropped, default=None)}
    else:
        edge = {max(dropped, default=None), min(kept, default=None)}
    first = [lab for lab, arg in used if arg in edge]
    return first + [lab for lab, arg in used if arg not in edge]


def bounds(kept, dropped, below_kept: bool):
    """Threshold bounds: visibility (kept iff arg <= T): T in [max kept, min dropped - 1];
    zeros-type (kept iff arg >= T): T in [max dropped + 1, min kept]."""
    if below_kept:
        lo = max(kept) if kept else None
        hi = min(dropped) - 1 if dropped else None
    else:
        lo = max(dropped) + 1 if dropped else None
        hi = min(kept) if kept else None
    ok = lo is None or hi is None or lo <= hi
    return lo, hi, ok


def by_ladder(probes, *names, p=None):
    return [pr for pr in probes if pr.ladder in names and (p is None or pr.p is None or pr.p == p)]


def sum_terms(pr, skip_pos=None):
    return sum((v for pos, v, r in pr.terms if pos != skip_pos), Fraction(0))


def small_pos(pr):
    """The rung's small (probing) term: the last one written."""
    return pr.terms[-1][0]


def c_value(pr):
    return Fraction(0) if pr.c == "inf" else Fraction(pr.c)


def int_finding(name, lo, hi, used, note):
    if lo is not None and lo == hi:
        return Finding(name, lo, True, probes=tuple(used), note=note)
    return Finding(name, lo=lo, hi=hi, probes=tuple(used), note=note + "; the ladder does not reach the threshold"
                   if lo is None or hi is None else note)
