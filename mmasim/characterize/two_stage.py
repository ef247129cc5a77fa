"""The two-stage window's reader (CDNA3, docs/datapaths.md §5; docs/characterize.md): the final
floor F2, the product window F, even / odd windows, the dropped C, overflow and an inf C's exponent."""

from __future__ import annotations

from fractions import Fraction

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
from mmasim.characterize.outcomes import is_nan, pack, word_value
from mmasim.characterize.probes import P2
from mmasim.characterize.window_readers import read_step


def read_two_stage(model, probes, measured, encodings):
    enc = next((e for e in encodings if e.mode == "rne" and e.frac_bits == model.d_format.man_bits), None)
    if enc is None:
        return None, [("two_stage_window", "no round-to-nearest output of D's format")]
    p = enc.frac_bits
    f = {}
    # F2: the C-anchored tie ladder
    rungs = by_ladder(probes, "F-tie", p=p)
    kept, dropped, bad, used = threshold(
        rungs, measured, lambda pr: (pack(enc, sum_terms(pr) + c_value(pr)),
                                     pack(enc, sum_terms(pr, small_pos(pr)) + c_value(pr))), True)
    lo, hi, ok = bounds(kept, dropped, True)
    if bad or not ok:
        return None, [("two_stage_window", "final-floor ladder not monotone")]
    f["F2"] = int_finding("F2", lo, hi, used, "fraction bits of the final floor: the deepest term below C that survives")
    # F: the product-anchored ladders
    rungs = by_ladder(probes, "Fp-neg", "Fp-tie")
    rungs = [pr for pr in rungs if pr.p is None or pr.p == p]
    kept, dropped, bad, used = threshold(
        rungs, measured, lambda pr: (pack(enc, sum_terms(pr)), pack(enc, sum_terms(pr, small_pos(pr)))), True)
    lo, hi, ok = bounds(kept, dropped, True)
    if bad or not ok:
        return None, [("two_stage_window", "product-window ladder not monotone")]
    f["F"] = int_finding("F", lo, hi, used, "product window fraction bits")
    F = f["F"].value if f["F"].determined else (lo or 24)
    # even / odd: a lone odd-k product below the window floored (yes) or truncated to zero
    f["even_odd"] = _flag(
        "even_odd", [pr for pr in by_ladder(probes, "eo") if pr.arg > F], measured,
        lambda pr: (pack(enc, P2(pr.s) - P2(pr.s - F)), pack(enc, P2(pr.s))),
        "a lone odd-k product below the window is floored (separate even/odd windows)",
        "a lone product below the window is truncated to zero (one window)", "the even/odd rungs disagree")
    # drop_c: a small C dropped (yes) or floored to the products' quantum
    f["drop_c"] = _flag(
        "drop_c", [pr for pr in by_ladder(probes, "dropc") if pr.arg > F + 1], measured,
        lambda pr: (pack(enc, P2(pr.s)), pack(enc, P2(pr.s) + (Fraction(pr.c) // P2(pr.s - F)) * P2(pr.s - F))),
        "a C more than F + 1 bits below the products is dropped", "a small C is floored, not dropped",
        "the drop-C rungs disagree")
    # overflow
    nan, fin, used = [], [], []
    for pr in by_ladder(probes, "overflow"):
        if pr.label in measured:
            used.append(pr.label)
            (nan if is_nan(enc, measured[pr.label]) else fin).append(pr.arg)
    top = max((pr.arg for pr in by_ladder(probes, "overflow")), default=None)
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
        for pr in by_ladder(probes, "infc"):
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


def _flag(name, rungs, measured, words, says_yes, says_no, disagree):
    """A yes / no parameter from rungs whose ``words(probe) -> (yes_word, no_word)``: decided when
    every informative rung (its two words differ) gives the same side's word."""
    yes, no, used = 0, 0, []
    for pr in rungs:
        if pr.label not in measured:
            continue
        w_yes, w_no = words(pr)
        if w_yes == w_no:
            continue
        used.append(pr.label)
        yes += measured[pr.label] == w_yes
        no += measured[pr.label] == w_no
    if used and (yes == 0 or no == 0) and yes + no == len(used):
        return Finding(name, bool(yes), True, probes=tuple(used), note=says_yes if yes else says_no)
    return Finding(name, also=(True, False) if not used else ("?",), probes=tuple(used),
                   note="not observed" if not used else disagree)


def _product_top(model):
    from mmasim.characterize.values import Realizer
    return Realizer(model).normal_range[1]


def _step_two_stage(model, probes, measured, enc, f):
    """The step ladder read by elimination: the proposal is checked by simulation (step-c rungs
    under the two-stage floor behave like T-FDPA's where C is far above the products)."""
    F = f["F"].value if f["F"].determined else 24
    return read_step(model, probes, measured, enc, min(F, 60), None)
