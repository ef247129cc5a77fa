"""The window families' readers (docs/characterize.md): T-FDPA ``window`` and GST-FDPA
``group_scaled_window`` (docs/datapaths.md §3, §4, §6): F, rounding, zero handling, scale floors,
C-dominant and C-relative rules, the group and the hardware step, each as a :class:`Finding`."""

from __future__ import annotations

from fractions import Fraction

import attrs

from mmasim.characterize.findings import Finding
from mmasim.characterize.ladders import (
    bounds,
    by_ladder,
    c_value,
    int_finding,
    small_pos,
    sum_terms,
    threshold,
)
from mmasim.characterize.outcomes import pack, step_value, truncate, word_value
from mmasim.characterize.probes import P2
from mmasim.characterize.values import lead


def read_window(model, probes, measured, encodings):
    return _window_like(model, probes, measured, encodings, "window")


def read_group_scaled(model, probes, measured, encodings):
    return _window_like(model, probes, measured, encodings, "group_scaled_window")


def _window_like(model, probes, measured, encodings, family):
    """T-FDPA (docs/datapaths.md §3, §4, §6) and GST-FDPA (§4): the same ladders; GST-FDPA's window
    exponent comes from the scales and C, not from the products, so only C-anchored ladders and
    scale-carried zero rungs are read for it."""
    gst = family == "group_scaled_window"
    fps = [pr for pr in by_ladder(probes, "Fp-s") if pr.label in measured]
    rejected = []
    readings = []
    for enc in encodings:
        names = ("F-neg", "F-tie") if gst or fps else ("F-neg", "F-tie", "Fp-neg", "Fp-tie")
        rungs = [pr for pr in by_ladder(probes, *names) if pr.p is None or pr.p == enc.frac_bits]
        kept, dropped, bad, used = threshold(
            rungs, measured, lambda pr: (pack(enc, sum_terms(pr) + c_value(pr)),
                                         pack(enc, sum_terms(pr, small_pos(pr)) + c_value(pr))), True)
        lo, hi, ok = bounds(kept, dropped, True)
        if bad or not ok:
            rejected.append((enc.key, f"visibility ladder not monotone or unexpected words ({', '.join(bad[:3])})"))
            continue
        # the rounding probe, where the window surely keeps its terms
        rnd_used, rnd_ok = [], True
        for pr in by_ladder(probes, "round", "round-c"):
            preds = {pack(enc, truncate(c_value(pr), P2(pr.s - F)) + sum((truncate(v, P2(pr.s - F)) for _, v, _ in pr.terms),
                                                                  Fraction(0)))
                     for F in {lo or 0, hi if hi is not None else (lo or 0) + 64}}
            if len(preds) != 1 or pr.label not in measured:
                continue
            rnd_used.append(pr.label)
            if measured[pr.label] not in preds:
                rnd_ok = False
        if not rnd_ok:
            rejected.append((enc.key, "rounding probe disagrees"))
            continue
        readings.append((enc, lo, hi, used, rnd_used))
    if not readings:
        return None, rejected
    out = []
    for reading in readings:
        f, rej = _window_rest(model, probes, measured, reading, gst, fps)
        rejected += rej
        if f is not None:
            out.append(f)
    return out or None, rejected


def _window_rest(model, probes, measured, reading, gst, fps):
    """Everything after the visibility ladder, under one candidate rounding."""
    findings = {}
    rejected = []
    enc, lo, hi, used, rnd_used = reading
    findings["rounding"] = Finding("rounding", enc.key, True,
                                   probes=tuple(rnd_used) + tuple(l for l in used if "tie" in l)[:2])
    findings["F"] = int_finding("F", lo, hi, used, "window fraction bits: the deepest product that survives")
    F = lo if lo is not None else 0
    f_eff = findings["F"]          # the threshold where a product's raw equals its scale raw
    extras = {}
    if fps and not gst:
        f_eff, extras = _floors(probes, measured, enc, findings)
        fc = extras.pop("Fc", None)
        findings.update(extras)
    else:
        fc = None

    # zeros: E = u* + F at the anchor t
    zf = []
    if not gst:
        zrungs = by_ladder(probes, "zeros-neg" if enc.mode == "rz" else "zeros-tie", p=enc.frac_bits)
        # a large e_zero truncates the anchor too: +0 also means the small product was dropped
        zf.append(_zeros_reading(zrungs, measured, enc, findings["F"], F,
                                 lambda pr: (pack(enc, sum_terms(pr)), pack(enc, sum_terms(pr, 1)), 0)))
        if not model.datapath.scale:
            zf.append(_zeros_lone(probes, measured, enc, findings["F"]))
    if enc.mode == "rz":
        zrungs = by_ladder(probes, "zeros-s")
        if zrungs:
            zf.append(_zeros_reading(zrungs, measured, enc, f_eff, f_eff.lo if f_eff.lo is not None else F,
                                     lambda pr: (pack(enc, sum_terms(pr)), pack(enc, pr.terms[0][1]), 0)))
    findings["zeros"] = _merge_zeros(zf, gst)
    zs = findings["zeros"]
    if (fps and not gst and zs.determined and isinstance(zs.value, int) and "scale_floor" in findings
            and findings["scale_floor"].determined and f_eff.determined):
        # the zero ladder ends in an f32 subnormal: an e_zero counted in the raw maximum (then
        # E - F, F the product window) and the subnormal redo of docs/datapaths.md §6 (zeros
        # excluded, groups below 2^T left out) give the same words
        u_star = zs.value - f_eff.value
        fF = findings["F"]
        findings["zeros"] = Finding(
            "zeros", also=("excluded",), lo=u_star + (fF.lo if fF.lo is not None else 0),
            hi=None if fF.hi is None else u_star + fF.hi, probes=zs.probes,
            note=f"the zero ladder's threshold 2^{u_star} lies in the f32 subnormals: an e_zero of F above it, "
                 f"or zeros excluded with a subnormal redo at {u_star}")
        findings["subnormal_redo"] = Finding(
            "subnormal_redo", lo=u_star, hi=u_star, also=(None,), probes=zs.probes,
            note=f"{u_star} when zeros are excluded (a nonzero subnormal result is redone without the groups "
                 f"below 2^{u_star} of a smaller scale), none with an e_zero")
    z = findings["zeros"].value if findings["zeros"].determined else None

    # step
    findings["step"] = read_step(model, probes, measured, enc, F, z)
    if model.datapath.scale:
        findings["group"] = _group(model, probes, measured, enc, fc or findings["F"], f_eff)
        if "c_dominant" in findings:
            _dominant_group(findings, model, probes, measured, enc, fc, f_eff)
    if gst and not findings["group"].determined and findings["group"].lo is None and findings["group"].hi is None:
        rejected.append(("group_scaled_window", "no group rung was informative"))
    return findings, rejected


def _zeros_reading(zrungs, measured, enc, fF, F, outcomes):
    kept, dropped, bad, zused = threshold(zrungs, measured, outcomes, False)
    ulo, uhi, ok = bounds(kept, dropped, False)
    t = zrungs[0].s if zrungs else None
    if bad or not ok:
        return Finding("zeros", note="zero-handling ladder gave unexpected words: " + ", ".join(bad[:3]),
                       probes=tuple(zused), also=("?",))
    if t is None or not zused:
        return None
    e_lo = None if ulo is None else ulo + (fF.lo if fF.lo is not None else F)
    e_hi = None if uhi is None else uhi + (fF.hi if fF.hi is not None else F)
    if e_lo is not None and e_lo > t:
        det = e_hi is not None and e_lo == e_hi
        return Finding("zeros", e_lo if det else None, det, None if det else e_lo, None if det else e_hi,
                       probes=tuple(zused), note=f"a zero product sets the window exponent above the lone term 2^{t}")
    bound = "any e_zero" if e_hi is None else f"an e_zero at most {e_hi}"
    return Finding("zeros", also=("excluded",), lo=None, hi=e_hi, probes=tuple(zused), anything=e_hi is None,
                   note=f"the window exponent stays at the lone term 2^{t}: zero products are excluded, or count with "
                        f"{bound} (a zero at or below that changes no probe word)")


def _zeros_lone(probes, measured, enc, fF):
    """``zeros-1``: a lone product 2^t survives iff t >= max(t, e_zero) - F: the lowest surviving t
    is e_zero - F when zeros count with an e_zero above it."""
    # a lone subnormal D carried into a later step as C counts with the raw exponent emin there, so
    # it is truncated at 2^(emin - F): read only the rungs above that
    emin = 2 - (1 << (enc.exp_bits - 1))
    f_lo = fF.value if fF.determined else fF.lo
    rungs = [pr for pr in by_ladder(probes, "zeros-1") if f_lo is not None and pr.arg >= emin - f_lo]
    kept, dropped, bad, used = threshold(rungs, measured, lambda pr: (pack(enc, pr.terms[0][1]), 0), False)
    lo, hi, ok = bounds(kept, dropped, False)
    if bad or not ok:
        return Finding("zeros", probes=tuple(used), also=("?",), note="the lone-product ladder gave unexpected words")
    f_lo, f_hi = (fF.value, fF.value) if fF.determined else (fF.lo, fF.hi)
    if not used or f_lo is None:
        return None
    if lo is None:             # every lone product survived: e_zero - F is at most the lowest t
        bound = None if hi is None or f_hi is None else hi + f_hi
        return Finding("zeros", also=("excluded",), hi=bound, probes=tuple(used), anything=bound is None,
                       note="every lone product survives: zeros are excluded, or count with "
                            + ("any e_zero (F is not bounded above)" if bound is None else f"an e_zero at most {bound}"))
    det = fF.determined and hi is not None and lo == hi
    return Finding("zeros", lo + f_lo if det else None, det, None if det else lo + f_lo,
                   None if det or hi is None or f_hi is None else hi + f_hi, probes=tuple(used),
                   note="a lone product below e_zero - F is truncated away: zeros count with that e_zero")


def _merge_zeros(readings, gst):
    readings = [r for r in readings if r is not None]
    if any("?" in r.also for r in readings):
        return next(r for r in readings if "?" in r.also)
    det = [r for r in readings if r.determined]
    if det:
        return attrs.evolve(det[0], probes=det[0].probes + tuple(p for r in readings if r is not det[0]
                                                                  for p in r.probes[:2]))
    if not readings:
        return Finding("zeros", also=() if gst else ("excluded",), anything=True,
                       note="no zero-handling rung is realizable in these formats")
    his = [r.hi for r in readings if r.hi is not None]
    los = [r.lo for r in readings if r.lo is not None]
    also = tuple(x for x in readings[0].also if all(x in r.also for r in readings))
    if gst:
        also = ()
    base = next((r for r in readings if not r.anything), readings[0])
    return attrs.evolve(base, lo=max(los) if los else None, hi=min(his) if his else None, also=also,
                        anything=all(r.anything for r in readings),
                        probes=tuple(p for r in readings for p in r.probes))


def _floors(probes, measured, enc, findings):
    """Block-scaled windows (docs/datapaths.md §4, §6): the product-anchored ladders ``Fp-s`` at two
    anchor raws S read min(F, S + scale_floor); the C-anchored ladders read F, or the C-dominant F
    where C takes over the window; ``crel`` reads the C-relative truncation."""
    by_s = {}
    for pr in by_ladder(probes, "Fp-s"):
        by_s.setdefault(pr.extra[0], []).append(pr)
    reads = {}
    for S, rungs in by_s.items():
        kept, dropped, bad, used = threshold(
            rungs, measured, lambda pr: (pack(enc, sum_terms(pr)), pack(enc, sum_terms(pr, small_pos(pr)))), True)
        lo, hi, ok = bounds(kept, dropped, True)
        if not bad and ok:
            reads[S] = (lo, hi, used)
    out = {}
    fc = findings["F"]
    if not reads:
        return fc, out
    s_hi, s_lo = max(reads), min(reads)
    (hl, hh, hu), (ll, lh, lu) = reads[s_hi], reads[s_lo]
    k_hi = hl if hl is not None and hl == hh else None
    k_lo = ll if ll is not None and ll == lh else None
    f_eff = int_finding("F", ll, lh, lu, f"the product window where a product's raw equals its scale raw (anchor raw {s_lo})")
    note_f = "window fraction bits below the largest product raw (product-anchored, C = 0)"
    if k_hi is not None and k_lo is not None and k_lo < k_hi:
        out["scale_floor"] = Finding("scale_floor", k_lo, True, probes=tuple(lu[:1] + hu[:1]) + tuple(lu[1:]),
                                     note=f"the quantum is at least 2^(scale raw - {k_lo}): the threshold is {k_lo} below "
                                          f"an anchor at its scale raw but {k_hi} below one {s_hi} above it")
        if k_hi == s_hi + k_lo:
            out["F"] = Finding("F", lo=k_hi, hi=None, probes=tuple(hu), note=note_f + f"; any F >= {k_hi} gives the "
                               f"same words (no product raw of these formats exceeds its scale raw by more than {s_hi})")
        else:
            out["F"] = Finding("F", k_hi, True, probes=tuple(hu), note=note_f)
    else:
        out["F"] = int_finding("F", hl, hh, hu, note_f)
        out["scale_floor"] = Finding("scale_floor", also=(None,), lo=k_hi, probes=tuple(hu + lu),
                                     note="no scale floor shows: absent, or at least F")
    fp = out["F"]
    if fc.determined and fp.determined and fc.value != fp.value or (fc.determined and not fp.determined
                                                                     and not fp.admits(fc.value)):
        out["c_dominant"] = Finding("c_dominant", {"F": fc.value}, True, probes=fc.probes,
                                    note=f"a C at or above every product raw sets the window: {fc.value} fraction "
                                         "bits below C (C-anchored ladders) instead of F")
        out["Fc"] = fc
    # the C-relative rule
    rungs = by_ladder(probes, "crel")
    if rungs and k_hi is not None:
        kept, dropped, bad, used = threshold(
            rungs, measured, lambda pr: (pack(enc, sum_terms(pr) + c_value(pr)),
                                         pack(enc, sum_terms(pr, small_pos(pr)) + c_value(pr))), False)
        ulo, uhi, ok = bounds(kept, dropped, False)
        s = rungs[0].s
        q = s - k_hi
        r_c = s - 1
        if bad or not ok or ulo is None or uhi is None or ulo != uhi:
            out["c_relative"] = Finding("c_relative", anything=True, probes=tuple(used),
                                        note="the C-relative ladder did not reach its threshold")
        elif ulo == q:
            out["c_relative"] = Finding("c_relative", also=(None,), lo=r_c - q, probes=tuple(used),
                                        note="a group below a non-dominant C is truncated like the others "
                                             "(absent, or a C-relative width too large to matter)")
        else:
            out["c_relative"] = Finding("c_relative", r_c - ulo, True, probes=tuple(used),
                                        note=f"a group whose raw is at most C's is truncated at 2^(r_c - {r_c - ulo})")
    out["subnormal_redo"] = Finding("subnormal_redo", anything=True,
                                    note="not probed (docs/characterize.md, what is not characterized)")
    return f_eff, out


def _dominant_group(findings, model, probes, measured, enc, fc, f_eff):
    """With a C-dominant rule, the C-anchored group ladder gives its group."""
    gc = _group_one(model, probes, measured, enc, fc, "group")
    gp = _group_one(model, probes, measured, enc, f_eff, "group-p")
    cd = findings["c_dominant"]
    if gc.determined:
        findings["c_dominant"] = attrs.evolve(cd, value={**cd.value, "group": gc.value}, probes=cd.probes + gc.probes,
                                              note=cd.note + f"; its products summed in groups of {gc.value}")
    else:
        findings["c_dominant"] = Finding("c_dominant", also=("?",), note="the C-dominant group is not determined")
    findings["group"] = gp


def _group(model, probes, measured, enc, fF, fP=None):
    """The group ladders: C-dominant (``group``) and product-anchored (``group-p``); where both
    read, they must agree."""
    a = _group_one(model, probes, measured, enc, fF, "group")
    b = _group_one(model, probes, measured, enc, fP or fF, "group-p")
    if not b.probes:
        return a
    if not a.probes:
        return b
    if a.determined and b.determined and a.value != b.value:
        return Finding("group", probes=a.probes + b.probes, also=("?",),
                       note=f"products are grouped by {a.value} when C dominates the window and by {b.value} "
                            "otherwise: not one group_scaled_window or window group")
    return b if b.determined else a


def _group_one(model, probes, measured, enc, fF, ladder):
    """Products summed exactly before truncation: two half-quanta at positions 0 and j make one
    quantum together (D just below C) only when they share a group."""
    note = "products summed exactly before truncation: two half-quantum products at 0 and j make one quantum iff j < group"
    if not fF.determined:
        return Finding("group", anything=True, note="needs F determined")

    def outcomes(pr):            # (the two shared a group, they did not)
        c = Fraction(pr.c)
        return pack(enc, c + sum_terms(pr)), pack(enc, c + pr.terms[0][1] * (ladder == "group-p"))

    rungs = [pr for pr in by_ladder(probes, ladder) if pr.extra[0] == fF.value]
    same, split, bad, used = threshold(rungs, measured, outcomes, True)
    if bad:
        return Finding("group", probes=(bad[0],), also=("?",), note="group ladder gave an unexpected word")
    if not used:
        return Finding("group", anything=True, note="no group rung is realizable")
    lo = max(same) + 1 if same else 1
    hi = min(split) if split else (model.datapath.block if ladder == "group-p" else model.datapath.stored_k)
    if lo > hi:
        return Finding("group", probes=tuple(used), note="group ladder is not monotone", also=("?",))
    ks = model.datapath.stored_k
    cands = [g for g in range(lo, hi + 1) if ks % g == 0]
    if len(cands) == 1:
        return Finding("group", cands[0], True, probes=tuple(used), note=note)
    return Finding("group", lo=lo, hi=hi, probes=tuple(used), note=note)


def read_step(model, probes, measured, enc, F, z):
    ks = model.datapath.stored_k

    def outcomes(pr):            # (one window over both, the last product in a step of its own)
        head = [(v, r) for _, v, r in pr.terms[:-1]]
        _, y, ry = pr.terms[-1]
        c = Fraction(pr.c)
        one = pack(enc, step_value(head + [(y, ry)], c, lead(c), F, z, dead=True))
        fv = word_value(enc, pack(enc, step_value(head, c, lead(c), F, z, dead=True)))
        if fv is None:
            return None
        return one, pack(enc, step_value([(y, ry)], fv[0], fv[1], F, z, dead=True))

    # every variant, read under enc
    same, split, bad, used = threshold(by_ladder(probes, "step-c", "step-carry", "step-carry2"), measured,
                                       outcomes, True)
    note = "elements of K per hardware step: products at positions 0 and j share a window iff j < L"
    if bad:
        return Finding("step", probes=tuple(used), note="step ladder gave unexpected words: " + ", ".join(bad[:3]), also=("?",))
    lo = max(same) + 1 if same else 2
    hi = min(split) if split else ks
    if same and split and max(same) >= min(split):
        return Finding("step", probes=tuple(used), note="step ladder is not monotone", also=("?",))
    divisors = [L for L in range(lo, hi + 1) if ks % L == 0]
    if len(divisors) == 1:
        return Finding("step", divisors[0], True, probes=tuple(used),
                       note=note + ("" if divisors[0] < ks else "; one window over the whole K"))
    return Finding("step", lo=lo, hi=hi, probes=tuple(used), note=note + "; more than one divisor of K fits")
