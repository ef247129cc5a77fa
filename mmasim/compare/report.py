"""The report of ``mmasim compare``: text for people and the ``mmasim.compare/1``
JSON document (docs/user-guide.md, "JSON output")."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from mmasim.operands.display import fraction_text, hex_word, number_text, safe, value_text
from mmasim.arith.exact import exact_results, exact_values, ulp_distance, ulp_of
from mmasim.compare.search import Comparison, bin_counts, ordered, size_bins

def _params_diff(ma, mb) -> list:
    da, db = ma.datapath, mb.datapath
    out = []
    if da.accumulator != db.accumulator:
        out.append(f"accumulator: {da.accumulator} vs {db.accumulator}")
    pa, pb = da.parameters, db.parameters
    for key in sorted(set(pa) | set(pb)):
        if pa.get(key) != pb.get(key):
            out.append(f"{key}: {pa.get(key, '-')} vs {pb.get(key, '-')}")
    ca, cb = da.step, db.step
    if ca != cb:
        out.append(f"elements per step (L): {ca} vs {cb}")
    if da.rounding != db.rounding:
        out.append(f"rounding: {da.rounding} vs {db.rounding}")
    for op in ("a", "b", "c"):
        fa, fb = getattr(ma, f"{op}_format"), getattr(mb, f"{op}_format")
        if fa != fb:
            out.append(f"{op.upper()} container/decoder: {fa.describe()} vs {fb.describe()}")
    return out


def _steps_text(model) -> str:
    dp = model.datapath
    chunk = dp.step
    return f"{dp.stored_k // chunk} x {chunk}"


def example_table(cmp: Comparison, ex=None) -> list:
    """An example (default the smallest, ``cmp.example``) as text lines: every operand decoded,
    products, exact sum, both results."""
    ex = cmp.example if ex is None else ex
    ma, mb = cmp.model_a, cmp.model_b
    x = ex.inputs
    lines = []
    fa, fb, fc = ma.a_format, ma.b_format, ma.c_format
    a_vals = exact_values(ma.decode("a", x.a[0]))
    b_vals = exact_values(ma.decode("b", x.b[0]))
    rows = []
    blk = ma.datapath.block
    for k in range(x.a.shape[1]):
        if int(x.a[0, k]) == 0 and int(x.b[0, k]) == 0:
            continue
        p = a_vals[k] * b_vals[k] if all(isinstance(v, Fraction) for v in (a_vals[k], b_vals[k])) else "special"
        rows.append((str(k), hex_word(x.a[0, k], fa.container_bits), value_text(ma, "a", x.a[0, k]),
                     hex_word(x.b[0, k], fb.container_bits), value_text(ma, "b", x.b[0, k]),
                     fraction_text(p) if isinstance(p, Fraction) else p))
    zero_terms = x.a.shape[1] - len(rows)
    head = ("k", "a word", "a value", "b word", "b value", "a*b")
    widths = [max(len(r[i]) for r in rows + [head]) for i in range(len(head))]
    for r in [head] + rows:
        lines.append("    " + "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    if zero_terms:
        lines.append(f"    (the other {zero_terms} elements of a and b are +0)")
    if x.scale_a is not None:
        for name in ("scale_a", "scale_b"):
            arr = getattr(x, name)[0]
            lines.append(f"    {name} (one per {blk}) = " + ", ".join(
                f"{hex_word(w, ma.scale_format.container_bits)} ({value_text(ma, 'scale', w)})" for w in arr))
    if x.sparse_metadata is not None:
        lines.append("    sparse_metadata = " + ", ".join(hex_word(w, 32) for w in x.sparse_metadata[0]))
    lines.append(f"    c = {hex_word(x.c[0], fc.container_bits)} ({value_text(ma, 'c', x.c[0])})")
    exact = exact_results(ma, x.a, x.b, x.c, **x.kwargs())[0]
    if exact is not None:
        lines.append(f"    exact c + sum(a*b) = {fraction_text(exact)}")
    bits = ma.encoding.word_bits
    for name, model, d in ((f"A: {safe(ma.arch)}", ma, ex.da), (f"B: {safe(mb.arch)}", mb, ex.db)):
        err = ""
        if exact is not None and cmp.grid is not None:
            vd = exact_values(model.decode("d", np.array([d], dtype=np.uint64)))[0]
            if isinstance(vd, Fraction):
                e = (vd - exact) / ulp_of(cmp.grid, exact)
                err = f"   error vs exact: {number_text(e, signed=True)} ulp"
        lines.append(f"    {name:20s} D = {hex_word(d, bits)} ({value_text(model, 'd', d)}){err}")
    if ma.d_format.integer:
        oa = ordered(np.array([ex.da]), ma)[0]
        ob = ordered(np.array([ex.db]), mb)[0]
        lines.append(f"    difference: {abs(int(oa) - int(ob))} units")
    else:
        x = exact_values(ma.decode("d", np.array([ex.da], dtype=np.uint64)))[0]
        y = exact_values(mb.decode("d", np.array([ex.db], dtype=np.uint64)))[0]
        lines.append(f"    difference: {number_text(ulp_distance(cmp.grid, x, y))} ulp of {cmp.grid.name}"
                     " (at the smaller nonzero result)")
    return lines


def _same_case(cmp: Comparison) -> bool:
    """Whether the example is the (unshrunk) case of the largest difference itself."""
    ex, big = cmp.example, cmp.largest
    return big is not None and ex is not None and not ex.shrunk and ex.origin == big.origin


def example_heading(cmp: Comparison, ex=None) -> list:
    """Where an example (default the smallest, ``cmp.example``; ``cmp.largest``: the largest
    difference) comes from, as text lines: the generated case it started from and, when it was
    shrunk, that it is not one of the counted cases."""
    ex = cmp.example if ex is None else ex
    terms = f"{ex.support} nonzero terms incl. C, of K={cmp.model_a.k} products + C"
    origin = f"generated case {ex.origin} ({cmp.inputs.kind[ex.origin]})"
    if ex is cmp.largest:
        return [f"largest difference, {origin}: {terms}"]
    if not ex.shrunk:
        return [f"example{' (also the largest difference)' if _same_case(cmp) else ''}, {origin}: {terms}"]
    return [f"example, shrunk from {origin} to {terms}:",
            f"  (terms zeroed, B elements and scales set to 1 while the two results still differ; the shrunk "
            f"case is not one of the {cmp.cases:,} counted cases)"]


def report(cmp: Comparison) -> str:
    ma, mb = cmp.model_a, cmp.model_b
    lines = [
        f"compare  A: {safe(ma.arch)}  {safe(ma.instruction)}  ({safe(ma.status.kind)})",
        f"         B: {safe(mb.arch)}  {safe(mb.instruction)}  ({safe(mb.status.kind)})",
        safe(f"  A: {ma.datapath.accumulator} {ma.datapath.parameters}, steps {_steps_text(ma)}, "
             f"rounding {ma.datapath.rounding}"),
        safe(f"  B: {mb.datapath.accumulator} {mb.datapath.parameters}, steps {_steps_text(mb)}, "
             f"rounding {mb.datapath.rounding}"),
    ]
    diffs = _params_diff(ma, mb)
    lines.append("  the datapaths differ in: " + (safe("; ".join(diffs)) if diffs else "nothing in their tables"))
    n, c = cmp.cases, cmp.count
    lines.append(f"cases: {n:,}; results differ in {c:,} ({100.0 * c / n:.2f} %)")
    for kind, (bad, tot) in cmp.by_kind().items():
        if tot:
            lines.append(f"  {kind:13s} {bad:6,} of {tot:6,} ({100.0 * bad / tot:.2f} %)")
    if cmp.nan_payload_only:
        lines.append(f"  ({cmp.nan_payload_only} cases where both are NaN with different payloads are not counted)")
    if c:
        unit = cmp.unit
        mx = cmp.max_ulps
        lines.append(f"largest difference: {number_text(mx) if mx is not None else '-'} {unit}"
                     + ("" if ma.d_format.integer else " (at the smaller nonzero result)")
                     + (f"; {cmp.special_differences} cases differ in a special value (inf/NaN)" if cmp.special_differences else ""))
        counts = bin_counts(cmp.ulps[cmp.differ], cmp.grid)
        if any(counts):
            parts = [f"{name}: {n}" for name, n in zip(size_bins(cmp.grid)[1], counts) if n]
            lines.append(f"  differences by size ({unit}): " + ", ".join(parts))
        if cmp.largest is not None and not _same_case(cmp):
            lines += example_heading(cmp, cmp.largest)
            lines += example_table(cmp, cmp.largest)
        lines += example_heading(cmp)
        lines += example_table(cmp)
    else:
        lines.append("no difference found")
    return "\n".join(lines)


def _side(model) -> dict:
    return {"arch": model.arch, "instruction": model.instruction, "status": model.status.kind}


def _example_json(r: Comparison, example) -> dict | None:
    """An example of ``r`` as the JSON document holds it: its words as hex strings."""
    if example is None:
        return None
    x = example.inputs
    bits_a, bits_b = r.model_a.a_format.container_bits, r.model_a.b_format.container_bits
    scale_bits = None if r.model_a.scale_format is None else r.model_a.scale_format.container_bits
    return {
        "a": [hex_word(w, bits_a) for w in x.a[0]],
        "b": [hex_word(w, bits_b) for w in x.b[0]],
        "c": hex_word(x.c[0], r.model_a.c_format.container_bits),
        "scale_a": None if x.scale_a is None else [hex_word(w, scale_bits) for w in x.scale_a[0]],
        "scale_b": None if x.scale_b is None else [hex_word(w, scale_bits) for w in x.scale_b[0]],
        "sparse_metadata": None if x.sparse_metadata is None else [hex_word(w, 32) for w in x.sparse_metadata[0]],
        "d_reference": hex_word(example.da, r.model_a.encoding.word_bits),
        "d_other": hex_word(example.db, r.model_b.encoding.word_bits),
        "nonzero_terms": example.support,
        "from_case": example.origin,
        "shrunk": example.shrunk,
    }


def to_json(results, cases: int, seed: int) -> dict:
    """The ``mmasim.compare/1`` document for comparisons against one reference
    (docs/user-guide.md, "JSON output")."""
    results = list(results)
    pairs = []
    for r in results:
        pairs.append({
            "other": _side(r.model_b),
            "cases": r.cases,
            "differ": r.count,
            "nan_payload_only": r.nan_payload_only,
            "unit": r.unit,
            "max_difference": r.max_ulps,
            "special_differences": r.special_differences,
            "by_kind": {k: {"differ": bad, "cases": tot} for k, (bad, tot) in r.by_kind().items()},
            "example": _example_json(r, r.example),
            "largest_example": _example_json(r, r.largest),
        })
    return {"schema": "mmasim.compare/1", "reference": _side(results[0].model_a) if results else None,
            "cases": cases, "seed": seed, "pairs": pairs}
