"""Reading the probe ladders back: datapath parameters from D words (docs/characterize.md).

:func:`infer` takes an instruction's shape (a :class:`~mmasim.Model`; only its formats, K, block
size and sparse rule are read), the probe cases and the measured (or simulated) D words, and
returns a :class:`Proposal`: the accumulator family, each parameter with the probes that decided
it (or the set of values the words leave open and why), and a proposed ``[[datapath]]`` entry.

Each ladder is read as a threshold: for every rung the two outcomes (the small term survived /
was dropped; the two terms shared a step / did not) are worked out by exact arithmetic written
here (fractions and the output roundings of docs/datapaths.md §2), never by running the table's
datapath.  A rung whose two outcomes give the same word under a rounding is not informative and is
skipped; a word that is neither outcome rejects that reading.  Finally the proposal is checked
by simulating every probe through a datapath built from the proposal alone (the instruction's
formats plus the inferred accumulator, parameters, step and rounding): a proposal is only
reported as reproducing the device when every probe word agrees.
"""

from __future__ import annotations

from fractions import Fraction

import attrs
import numpy as np

from ..datapath import Datapath
from .probes import P2, build
from .values import lead, to_parts

#: accumulator families this module can characterize, in the order they are tried
FAMILIES = ("window", "two_stage_window", "group_scaled_window")


@attrs.frozen
class Finding:
    """One parameter: its value when the words decide it, else the values they leave open.

    ``lo``/``hi``: integer bounds (``None``: unbounded) of the open values; ``also``: non-integer
    values also consistent (``"excluded"``, ``None`` for a parameter left out, a rounding key).
    """

    name: str
    value: object = None
    determined: bool = False
    lo: int | None = None
    hi: int | None = None
    also: tuple = ()
    probes: tuple = ()
    note: str = ""
    anything: bool = False          # no probe could tell: every value is consistent

    def admits(self, v) -> bool:
        """Whether ``v`` is consistent with what the probes showed."""
        if self.anything:
            return True
        if self.determined:
            return v == self.value
        if v in self.also:
            return True
        if isinstance(v, bool) or not isinstance(v, int):
            return False
        if self.lo is None and self.hi is None and not self.also:
            return True
        if self.lo is None and self.hi is None:
            return False
        return (self.lo is None or v >= self.lo) and (self.hi is None or v <= self.hi)

    def describe(self) -> str:
        if self.determined:
            text = f"{self.name} = {_fmt(self.value)}"
        else:
            opts = []
            if self.lo is not None or self.hi is not None:
                opts.append(_range(self.lo, self.hi))
            opts += [_fmt(x) for x in self.also]
            text = f"{self.name}: undetermined ({' or '.join(opts) if opts and not self.anything else 'any value'})"
        if self.probes:
            shown = list(self.probes[:2]) + ([f"{len(self.probes) - 2} more"] if len(self.probes) > 2 else [])
            text += f"; decided by {', '.join(shown)}"
        if self.note:
            text += f" ({self.note})"
        return text


def _fmt(v):
    return "left out" if v is None else (f'"{v}"' if isinstance(v, str) else str(v))


def _range(lo, hi):
    if lo is not None and hi is not None:
        return f"{lo}..{hi}"
    if lo is not None:
        return f">= {lo}"
    return f"<= {hi}"


@attrs.frozen
class Proposal:
    """What the probes say about one datapath."""

    arch: str
    instruction: str
    family: str | None
    findings: dict                  # name -> Finding
    entry: dict                     # the proposed [[datapath]] keys
    reproduced: int                 # probe words the proposal reproduces
    total: int
    mismatches: tuple = ()          # labels of probes the proposal does not reproduce
    rejected: tuple = ()            # (family, why) of the families tried first
    alternatives: tuple = ()        # proposals of other families that reproduce every probe word too

    @property
    def consistent(self) -> bool:
        return self.family is not None and not self.mismatches

    def toml(self) -> str:
        from .toml import entry_toml
        return entry_toml(self)

    def to_json(self) -> dict:
        return {
            "arch": self.arch, "instruction": self.instruction, "family": self.family,
            "reproduced": self.reproduced, "total": self.total, "mismatches": list(self.mismatches),
            "rejected": [list(r) for r in self.rejected],
            "alternatives": [{"family": a.family, "entry": a.entry} for a in self.alternatives],
            "parameters": {k: {"value": f.value if f.determined else None, "determined": f.determined,
                               "lo": f.lo, "hi": f.hi, "also": list(f.also), "probes": list(f.probes),
                               "note": f.note, "text": f.describe()} for k, f in self.findings.items()},
            "entry": self.entry, "toml": self.toml(),
        }


# ------------------------------------------------------------------ exact outputs
def pack(enc, v: Fraction) -> int:
    """The D word of the exact value ``v`` under rounding ``enc`` (docs/datapaths.md §2: RZ
    truncates the magnitude, RNE rounds to nearest with ties to even, subnormals kept, a result
    past the largest exponent is inf), in exact integer arithmetic."""
    neg, mag, e0 = to_parts(Fraction(v))
    if mag == 0:
        return 0
    E, frac, wfb = enc.exp_bits, enc.frac_bits, enc.word_frac_bits
    bias = (1 << (E - 1)) - 1
    emin = 1 - bias
    top = e0 + mag.bit_length() - 1
    qe = max(top, emin) - frac
    drop = qe - e0
    if drop <= 0:
        keep = mag << -drop
    else:
        keep = mag >> drop
        if enc.mode == "rne":
            rem, half = mag & ((1 << drop) - 1), 1 << (drop - 1)
            if rem > half or (rem == half and keep & 1):
                keep += 1
    wmag = ((max(top, emin) - emin) << frac) + keep
    if frac != wfb:
        wmag = ((wmag >> frac) << wfb) | ((wmag & ((1 << frac) - 1)) << (wfb - frac))
    inf_word = ((1 << E) - 1) << wfb
    if wmag >= inf_word or top > bias:
        wmag = inf_word
    return wmag | ((1 << (enc.word_bits - 1)) if neg and wmag else 0)


def word_value(enc, w: int):
    """``(value, raw exponent)`` of a finite D word, ``None`` for inf / NaN."""
    E, M = enc.exp_bits, enc.word_frac_bits
    sign = (w >> (E + M)) & 1
    e = (w >> M) & ((1 << E) - 1)
    f = w & ((1 << M) - 1)
    bias = (1 << (E - 1)) - 1
    if e == (1 << E) - 1:
        return None
    if e == 0:
        v, r = Fraction(f) * P2(1 - bias - M), 1 - bias
    else:
        v, r = Fraction(f | (1 << M)) * P2(e - bias - M), e - bias
    return (-v if sign else v), r


def is_nan(enc, w: int) -> bool:
    E, M = enc.exp_bits, enc.word_frac_bits
    return ((w >> M) & ((1 << E) - 1)) == (1 << E) - 1 and (w & ((1 << M) - 1)) != 0


def _trunc(v: Fraction, q: Fraction) -> Fraction:
    n = abs(v) // q
    return (n * q) if v >= 0 else -(n * q)


def step_value(terms, c, c_raw, F, zeros=None, dead=False):
    """One T-FDPA step (docs/datapaths.md §3) on exact terms ``[(value, raw)]`` and C."""
    raws = [r for v, r in terms if v != 0]
    if c != 0:
        raws.append(c_raw)
    if isinstance(zeros, int):
        if dead or len(raws) == 0:
            raws.append(zeros)
        if c == 0:
            raws.append(zeros)
    if not raws:
        return c
    q = P2(max(raws) - F)
    return sum((_trunc(v, q) for v, r in terms), Fraction(0)) + _trunc(Fraction(c), q)


# ------------------------------------------------------------------ ladder reading
def _threshold(rungs, measured, outcomes, below_kept: bool):
    """Read a ladder: ``outcomes(probe) -> (kept_word, dropped_word)``.  Returns
    ``(kept_args, dropped_args, anomalies, labels)``; ``below_kept``: small args are the kept side
    (visibility ladders) rather than large args (zeros, where u >= E - F is kept)."""
    kept, dropped, bad, used = [], [], [], []
    for pr in rungs:
        k_w, d_w, *other = outcomes(pr)      # other: more words that also mean "dropped"
        w = measured.get(pr.label)
        if w is None or k_w == d_w:
            continue
        if w == k_w:
            kept.append(pr.arg)
        elif w == d_w or w in other:
            dropped.append(pr.arg)
        else:
            bad.append(pr.label)
            continue
        used.append((pr.label, pr.arg))
    return kept, dropped, bad, _decisive_first(used, kept, dropped, below_kept)


def _decisive_first(used, kept, dropped, below_kept):
    """Labels of the informative rungs, the two that straddle the threshold first."""
    if below_kept:
        edge = {max(kept, default=None), min(dropped, default=None)}
    else:
        edge = {max(dropped, default=None), min(kept, default=None)}
    first = [lab for lab, arg in used if arg in edge]
    return first + [lab for lab, arg in used if arg not in edge]


def _bounds(kept, dropped, below_kept: bool):
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


def _by_ladder(probes, *names, p=None):
    return [pr for pr in probes if pr.ladder in names and (p is None or pr.p is None or pr.p == p)]


def _sum_terms(pr, skip_pos=None):
    return sum((v for pos, v, r in pr.terms if pos != skip_pos), Fraction(0))


def _small_pos(pr):
    """The rung's small (probing) term: the last one written."""
    return pr.terms[-1][0]


# ------------------------------------------------------------------ the window family
def _window(model, probes, measured, encodings):
    return _window_like(model, probes, measured, encodings, "window")


def _group_scaled(model, probes, measured, encodings):
    return _window_like(model, probes, measured, encodings, "group_scaled_window")


def _window_like(model, probes, measured, encodings, family):
    """T-FDPA (docs/datapaths.md §3, §4, §6) and GST-FDPA (§4): the same ladders; GST-FDPA's window
    exponent comes from the scales and C, not from the products, so only C-anchored ladders and
    scale-carried zero rungs are read for it."""
    gst = family == "group_scaled_window"
    fps = [pr for pr in _by_ladder(probes, "Fp-s") if pr.label in measured]
    rejected = []
    readings = []
    for enc in encodings:
        names = ("F-neg", "F-tie") if gst or fps else ("F-neg", "F-tie", "Fp-neg", "Fp-tie")
        rungs = [pr for pr in _by_ladder(probes, *names) if pr.p is None or pr.p == enc.frac_bits]
        kept, dropped, bad, used = _threshold(
            rungs, measured, lambda pr: (pack(enc, _sum_terms(pr) + _c(pr)),
                                         pack(enc, _sum_terms(pr, _small_pos(pr)) + _c(pr))), True)
        lo, hi, ok = _bounds(kept, dropped, True)
        if bad or not ok:
            rejected.append((enc.key, f"visibility ladder not monotone or unexpected words ({', '.join(bad[:3])})"))
            continue
        # the rounding probe, where the window surely keeps its terms
        rnd_used, rnd_ok = [], True
        for pr in _by_ladder(probes, "round", "round-c"):
            preds = {pack(enc, _trunc(_c(pr), P2(pr.s - F)) + sum((_trunc(v, P2(pr.s - F)) for _, v, _ in pr.terms),
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
    findings["F"] = _int_finding("F", lo, hi, used, "window fraction bits: the deepest product that survives")
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
        zrungs = _by_ladder(probes, "zeros-neg" if enc.mode == "rz" else "zeros-tie", p=enc.frac_bits)
        # a large e_zero truncates the anchor too: +0 also means the small product was dropped
        zf.append(_zeros_reading(zrungs, measured, enc, findings["F"], F,
                                 lambda pr: (pack(enc, _sum_terms(pr)), pack(enc, _sum_terms(pr, 1)), 0)))
        if not model.datapath.scale:
            zf.append(_zeros_lone(probes, measured, enc, findings["F"]))
    if enc.mode == "rz":
        zrungs = _by_ladder(probes, "zeros-s")
        if zrungs:
            zf.append(_zeros_reading(zrungs, measured, enc, f_eff, f_eff.lo if f_eff.lo is not None else F,
                                     lambda pr: (pack(enc, _sum_terms(pr)), pack(enc, pr.terms[0][1]), 0)))
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
    findings["step"] = _step(model, probes, measured, enc, F, z)
    if model.datapath.scale:
        findings["group"] = _group(model, probes, measured, enc, fc or findings["F"], f_eff)
        if "c_dominant" in findings:
            _dominant_group(findings, model, probes, measured, enc, fc, f_eff)
    if gst and not findings["group"].determined and findings["group"].lo is None and findings["group"].hi is None:
        rejected.append(("group_scaled_window", "no group rung was informative"))
    return findings, rejected


def _zeros_reading(zrungs, measured, enc, fF, F, outcomes):
    kept, dropped, bad, zused = _threshold(zrungs, measured, outcomes, False)
    ulo, uhi, ok = _bounds(kept, dropped, False)
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
    rungs = [pr for pr in _by_ladder(probes, "zeros-1") if f_lo is not None and pr.arg >= emin - f_lo]
    kept, dropped, bad, used = _threshold(rungs, measured, lambda pr: (pack(enc, pr.terms[0][1]), 0), False)
    lo, hi, ok = _bounds(kept, dropped, False)
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
    for pr in _by_ladder(probes, "Fp-s"):
        by_s.setdefault(pr.extra[0], []).append(pr)
    reads = {}
    for S, rungs in by_s.items():
        kept, dropped, bad, used = _threshold(
            rungs, measured, lambda pr: (pack(enc, _sum_terms(pr)), pack(enc, _sum_terms(pr, _small_pos(pr)))), True)
        lo, hi, ok = _bounds(kept, dropped, True)
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
    f_eff = _int_finding("F", ll, lh, lu, f"the product window where a product's raw equals its scale raw (anchor raw {s_lo})")
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
        out["F"] = _int_finding("F", hl, hh, hu, note_f)
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
    rungs = _by_ladder(probes, "crel")
    if rungs and k_hi is not None:
        kept, dropped, bad, used = _threshold(
            rungs, measured, lambda pr: (pack(enc, _sum_terms(pr) + _c(pr)),
                                         pack(enc, _sum_terms(pr, _small_pos(pr)) + _c(pr))), False)
        ulo, uhi, ok = _bounds(kept, dropped, False)
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
    same, split, used = [], [], []
    for pr in _by_ladder(probes, ladder):
        if pr.extra[0] != fF.value or pr.label not in measured:
            continue
        c = Fraction(pr.c)
        kept, dropped = pack(enc, c + _sum_terms(pr)), pack(enc, c + pr.terms[0][1] * (ladder == "group-p"))
        if kept == dropped:
            continue
        w = measured[pr.label]
        if w == kept:
            same.append(pr.arg)
        elif w == dropped:
            split.append(pr.arg)
        else:
            return Finding("group", probes=(pr.label,), also=("?",), note="group ladder gave an unexpected word")
        used.append((pr.label, pr.arg))
    used = _decisive_first(used, same, split, True)
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


def _c(pr):
    return Fraction(0) if pr.c == "inf" else Fraction(pr.c)


def _int_finding(name, lo, hi, used, note):
    if lo is not None and lo == hi:
        return Finding(name, lo, True, probes=tuple(used), note=note)
    return Finding(name, lo=lo, hi=hi, probes=tuple(used), note=note + "; the ladder does not reach the threshold"
                   if lo is None or hi is None else note)


def _step(model, probes, measured, enc, F, z):
    ks = model.datapath.stored_k
    same, split, used, bad = [], [], [], []
    for pr in _by_ladder(probes, "step-c", "step-carry", "step-carry2"):     # every variant, read under enc
        if pr.label not in measured:
            continue
        head = [(v, r) for _, v, r in pr.terms[:-1]]
        _, y, ry = pr.terms[-1]
        c = Fraction(pr.c)
        one = pack(enc, step_value(head + [(y, ry)], c, lead(c), F, z, dead=True))
        first = step_value(head, c, lead(c), F, z, dead=True)
        first_w = pack(enc, first)
        fv = word_value(enc, first_w)
        if fv is None:
            continue
        two = pack(enc, step_value([(y, ry)], fv[0], fv[1], F, z, dead=True))
        if one == two:
            continue
        w = measured[pr.label]
        if w == one:
            same.append(pr.arg)
        elif w == two:
            split.append(pr.arg)
        else:
            bad.append(pr.label)
            continue
        used.append((pr.label, pr.arg))
    used = _decisive_first(used, same, split, True)
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


# ------------------------------------------------------------------ the two-stage window (CDNA3)
def _two_stage(model, probes, measured, encodings):
    enc = next((e for e in encodings if e.mode == "rne" and e.frac_bits == model.d_format.man_bits), None)
    if enc is None:
        return None, [("two_stage_window", "no round-to-nearest output of D's format")]
    p = enc.frac_bits
    f = {}
    # F2: the C-anchored tie ladder
    rungs = _by_ladder(probes, "F-tie", p=p)
    kept, dropped, bad, used = _threshold(
        rungs, measured, lambda pr: (pack(enc, _sum_terms(pr) + _c(pr)),
                                     pack(enc, _sum_terms(pr, _small_pos(pr)) + _c(pr))), True)
    lo, hi, ok = _bounds(kept, dropped, True)
    if bad or not ok:
        return None, [("two_stage_window", "final-floor ladder not monotone")]
    f["F2"] = _int_finding("F2", lo, hi, used, "fraction bits of the final floor: the deepest term below C that survives")
    # F: the product-anchored ladders
    rungs = _by_ladder(probes, "Fp-neg", "Fp-tie")
    rungs = [pr for pr in rungs if pr.p is None or pr.p == p]
    kept, dropped, bad, used = _threshold(
        rungs, measured, lambda pr: (pack(enc, _sum_terms(pr)), pack(enc, _sum_terms(pr, _small_pos(pr)))), True)
    lo, hi, ok = _bounds(kept, dropped, True)
    if bad or not ok:
        return None, [("two_stage_window", "product-window ladder not monotone")]
    f["F"] = _int_finding("F", lo, hi, used, "product window fraction bits")
    F = f["F"].value if f["F"].determined else (lo or 24)
    # even / odd
    yes, no, used = 0, 0, []
    for pr in _by_ladder(probes, "eo"):
        if pr.label not in measured or pr.arg <= F:
            continue
        s = pr.s
        w_eo = pack(enc, P2(s) - P2(s - F))
        w_one = pack(enc, P2(s))
        if w_eo == w_one:
            continue
        used.append(pr.label)
        yes += measured[pr.label] == w_eo
        no += measured[pr.label] == w_one
    f["even_odd"] = (Finding("even_odd", bool(yes), True, probes=tuple(used),
                             note="a lone odd-k product below the window is floored (separate even/odd windows)"
                             if yes else "a lone product below the window is truncated to zero (one window)")
                     if used and (yes == 0 or no == 0) and yes + no == len(used)
                     else Finding("even_odd", also=(True, False) if not used else ("?",), probes=tuple(used),
                                  note="not observed" if not used else "the even/odd rungs disagree"))
    # drop_c
    yes, no, used = 0, 0, []
    for pr in _by_ladder(probes, "dropc"):
        if pr.label not in measured or pr.arg <= F + 1:
            continue
        s = pr.s
        w_keep = pack(enc, P2(s) + (Fraction(pr.c) // P2(s - F)) * P2(s - F))
        w_drop = pack(enc, P2(s))
        if w_keep == w_drop:
            continue
        used.append(pr.label)
        yes += measured[pr.label] == w_drop
        no += measured[pr.label] == w_keep
    f["drop_c"] = (Finding("drop_c", bool(yes), True, probes=tuple(used),
                           note="a C more than F + 1 bits below the products is dropped" if yes
                           else "a small C is floored, not dropped")
                   if used and (yes == 0 or no == 0) and yes + no == len(used)
                   else Finding("drop_c", also=(True, False) if not used else ("?",), probes=tuple(used),
                                note="not observed" if not used else "the drop-C rungs disagree"))
    # overflow
    nan, fin, used = [], [], []
    for pr in _by_ladder(probes, "overflow"):
        if pr.label in measured:
            used.append(pr.label)
            (nan if is_nan(enc, measured[pr.label]) else fin).append(pr.arg)
    top = max((pr.arg for pr in _by_ladder(probes, "overflow")), default=None)
    if nan:
        x0 = min(nan)
        det = (x0 - 1) in fin
        f["overflow"] = Finding("overflow", x0 if det else None, det, lo=None if det else None,
                                hi=None if det else x0, probes=tuple(used),
                                note="a product of magnitude >= 2^overflow becomes an infinity (+inf - inf = NaN)")
    else:
        lo_hi = _product_top(model)
        f["overflow"] = Finding("overflow", also=(None,), lo=(top if top is not None else lo_hi) + 1,
                                probes=tuple(used),
                                note="no product the formats can express overflows" if top is None
                                else "no probed product overflowed")
    # nonfinite_c_r
    if f["drop_c"].determined and f["drop_c"].value:
        inf, fin2, used = [], [], []
        for pr in _by_ladder(probes, "infc"):
            if pr.label in measured:
                w = measured[pr.label]
                used.append(pr.label)
                (fin2 if word_value(enc, w) is not None else inf).append(pr.arg)
        if fin2 and inf and max(inf) < min(fin2):
            x0 = min(fin2)
            det = (x0 - 1) in inf
            f["nonfinite_c_r"] = Finding("nonfinite_c_r", x0 - F - 2 if det else None, det,
                                         lo=None if det else max(inf) - F - 1, hi=None if det else x0 - F - 2,
                                         probes=tuple(used),
                                         note="an inf C counts with this exponent in the drop-C rule")
        else:
            top = max(inf, default=None)
            f["nonfinite_c_r"] = Finding("nonfinite_c_r", also=(None,),
                                         lo=None if top is None else top - F - 1, probes=tuple(used),
                                         note="an inf C was never dropped by the probed products")
    else:
        f["nonfinite_c_r"] = Finding("nonfinite_c_r", None, True, note="only meaningful with drop_c")
    f["rounding"] = Finding("rounding", enc.key, True, note="round to nearest even after the final floor")
    f["step"] = _step_two_stage(model, probes, measured, enc, f)
    return [f], []


def _product_top(model):
    from .values import Realizer
    return Realizer(model).normal_range[1]


def _step_two_stage(model, probes, measured, enc, f):
    """The step ladder read by elimination: the proposal is checked by simulation (step-c rungs
    under the two-stage floor behave like T-FDPA's where C is far above the products)."""
    F = f["F"].value if f["F"].determined else 24
    return _step(model, probes, measured, enc, min(F, 60), None)


# ------------------------------------------------------------------ driver
def _entry_for(family, f, model):
    """The proposed [[datapath]] keys (shape keys from the instruction, the rest inferred)."""
    dp = model.datapath
    reg = model._reg
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
    from ..model import Model
    dp = model.datapath
    new = Datapath(arch=dp.arch, op=dp.op, kind=dp.kind, a=dp.a, b=dp.b, c=dp.c, d=dp.d, k=dp.k,
                   accumulator=entry["accumulator"], rounding=entry["rounding"], params=entry["params"],
                   chunk=entry.get("chunk"), scale=dp.scale, block=dp.block, scale_vec=dp.scale_vec,
                   sparse=dp.sparse, saturate=dp.saturate)
    return Model(new, model._reg, backend=model.backend)


def infer(model, cases: dict, d_words, probes=None) -> Proposal:
    """Infer the datapath parameters of ``model``'s instruction from the D words ``d_words``
    measured (or simulated) on ``cases`` (the arrays of :func:`~mmasim.characterize.probe_cases`,
    matched by label).  Only the instruction's formats, K, block size and sparse rule are read from
    ``model``."""
    from .probes import _arrays, run
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
    reg = model._reg
    encodings = [e for e in reg.encodings.values() if e.format == model.d_format.key and e.mode in ("rz", "rne")]
    tried = []
    good, fails = [], []
    kept_probes = [pr for pr in probes if pr.label in measured]
    sub = _arrays(model, kept_probes) if kept_probes else None
    want = np.array([measured[pr.label] for pr in kept_probes], dtype=np.uint64)
    for family in _families(model):
        reader = {"window": _window, "two_stage_window": _two_stage, "group_scaled_window": _group_scaled}[family]
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
    from .probes import run
    entry = _entry_for(family, findings, model)
    try:
        got = run(candidate_model(model, entry), sub) if sub is not None else want
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
