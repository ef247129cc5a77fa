"""Validating the simulator against frozen vector files (``mmasim validate``).

:func:`validate` runs vector files (default: every bundled one) and returns
one :class:`FileResult` per file.  Nothing a file contains can make it raise:
an unreadable or corrupt file, an instruction no registered architecture
provides, or a failure inside a datapath becomes an ``error`` row.
"""

from __future__ import annotations

import pathlib
import time

import attrs

from mmasim.execution import threads
from mmasim.vectors import files as vectors
from mmasim.operands.display import hex_word, one_line, safe, value_text
from mmasim.errors import MMAError


@attrs.frozen
class Mismatch:
    """One case whose simulated word differs from the expected word."""

    index: int
    label: str
    inputs: dict            # name -> list of {"word": "0x..", "value": "..."}
    expected: dict          # {"word", "value"}
    actual: dict


@attrs.frozen
class FileResult:
    path: str
    display: str            # path as shown (relative to the bundled root when inside it)
    arch: str               # architecture as resolved, or as the file names it
    datapath: str           # canonical datapath name, or the file's instruction string
    source: str             # provenance source ("hardware", "peer", "hand-derived", "simulated") or ""
    cases: int = 0
    mismatches: int = 0
    error: str = ""
    first: tuple = ()       # the first Mismatch objects
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.error and not self.mismatches

    def to_dict(self) -> dict:
        d = attrs.asdict(self, recurse=True)
        d["first"] = [attrs.asdict(m) for m in self.first]
        d["ok"] = self.ok
        return d


def _display_path(path: pathlib.Path) -> str:
    try:
        root = vectors.bundled_root().resolve()
        return str(path.resolve().relative_to(root))
    except (ValueError, MMAError, OSError):
        return str(path)


def _word_entry(model, operand, word, bits) -> dict:
    try:
        value = value_text(model, operand, int(word))
    except Exception as exc:  # a word outside the format: show it, do not fail
        value = f"<cannot decode: {exc}>"
    return {"word": hex_word(int(word), bits), "value": value}


def describe_mismatch(vf, model, index: int, got) -> Mismatch:
    """Inputs, expected and actual words of one case, each decoded by ``model``."""
    fa, fb, fc = model.a_format, model.b_format, model.c_format
    inputs = {
        "a": [_word_entry(model, "a", w, fa.container_bits) for w in vf.a[index]],
        "b": [_word_entry(model, "b", w, fb.container_bits) for w in vf.b[index]],
        "c": [_word_entry(model, "c", vf.c[index], fc.container_bits)],
    }
    if vf.scale_a is not None and model.scale_format is not None:
        bits = model.scale_format.container_bits
        inputs["scale_a"] = [_word_entry(model, "scale", w, bits) for w in vf.scale_a[index]]
        inputs["scale_b"] = [_word_entry(model, "scale", w, bits) for w in vf.scale_b[index]]
    if vf.sparse_metadata is not None:
        inputs["sparse_metadata"] = [{"word": hex_word(int(w), 32), "value": ""} for w in vf.sparse_metadata[index]]
    bits = model.encoding.word_bits
    label = str(vf.labels[index]) if vf.labels is not None else ""
    return Mismatch(
        index=int(index),
        label=label,
        inputs=inputs,
        expected=_word_entry(model, "d", vf.d[index], bits),
        actual=_word_entry(model, "d", got[index], bits),
    )


def validate_file(path, show: int = 3) -> FileResult:
    """Validate one file; never raises for anything the file contains."""
    path = pathlib.Path(path)
    shown = _display_path(path)
    t0 = time.perf_counter()
    try:
        vf = vectors.load(path)
    except vectors.VectorFileError as exc:
        return FileResult(str(path), shown, "?", "?", "", error=f"corrupt vector file: {exc}")
    except Exception as exc:  # pragma: no cover - load maps every known failure
        return FileResult(str(path), shown, "?", "?", "", error=f"unreadable vector file {path}: {exc!r}")
    arch, instr, source = vf.arch, vf.instruction, vf.source
    try:
        model = vectors.model_for(vf)
    except MMAError as exc:
        return FileResult(str(path), shown, arch, instr, source, cases=len(vf),
                          error=f"cannot resolve {arch!r} / {instr!r}: {type(exc).__name__}: {exc}")
    except Exception as exc:
        return FileResult(str(path), shown, arch, instr, source, cases=len(vf),
                          error=f"cannot resolve {arch!r} / {instr!r}: {type(exc).__name__}: {exc}")
    arch, instr = model.arch, model.instruction
    if len(vf) == 0:
        return FileResult(str(path), shown, arch, instr, source, error="no vectors found: the file holds 0 cases",
                          seconds=time.perf_counter() - t0)
    try:
        out = vectors.run_vector_file(vf, model)
    except Exception as exc:
        return FileResult(str(path), shown, arch, instr, source, cases=len(vf),
                          error=f"the simulator failed on this file: {type(exc).__name__}: {exc}",
                          seconds=time.perf_counter() - t0)
    first = tuple(describe_mismatch(vf, model, int(i), out.got) for i in out.mismatches[:show])
    return FileResult(str(path), shown, arch, instr, source, cases=len(vf), mismatches=len(out.mismatches),
                      first=first, seconds=time.perf_counter() - t0)


def validate(paths=None, show: int = 3, progress=None) -> list:
    """Validate every vector file under ``paths`` (default: the bundled vectors).

    ``progress(i, n, path)`` is called before each file.  A path that does not
    exist gives an error row.  A bad ``MMASIM_THREADS`` is a
    :class:`~mmasim.ThreadCountError`, raised before any file is read.
    """
    threads.check()
    files = vectors.find(paths)
    results = []
    for i, path in enumerate(files, 1):
        if progress is not None:
            progress(i, len(files), path)
        if not pathlib.Path(path).exists():
            results.append(FileResult(str(path), str(path), "?", "?", "", error=f"{path}: no such file or directory"))
            continue
        results.append(validate_file(path, show=show))
    return results


#: evidence sources in the order they are shown (strongest first)
SOURCE_ORDER = ("hardware", "hand-derived", "peer")


def by_source(results) -> dict:
    """Files, cases and mismatches per evidence source (``provenance.source`` of each
    file); ``"simulated"`` files (no evidence: a dry run of the harness) and files that
    could not be read count under their own rows, shown only when present."""
    out = {s: {"files": 0, "cases": 0, "mismatches": 0} for s in SOURCE_ORDER}
    for r in results:
        row = out.setdefault(r.source if r.source in SOURCE_ORDER + ("simulated",) else "unknown",
                             {"files": 0, "cases": 0, "mismatches": 0})
        row["files"] += 1
        if not r.error:
            row["cases"] += r.cases
        row["mismatches"] += r.mismatches
    return out


def summary(results) -> dict:
    cases = sum(r.cases for r in results if not r.error)
    return {
        "files": len(results),
        "cases": cases,
        "mismatches": sum(r.mismatches for r in results),
        "files_with_mismatches": sum(1 for r in results if r.mismatches),
        "errors": sum(1 for r in results if r.error),
        "by_source": by_source(results),
        "no_vectors": cases == 0,
        "ok": cases > 0 and all(r.ok for r in results),
    }


# ---------------------------------------------------------------- text report
def _table(rows, headers, aligns):
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    def line(cells):
        return "  ".join(str(c).rjust(w) if a == ">" else str(c).ljust(w)
                         for c, w, a in zip(cells, widths, aligns)).rstrip()
    return [line(headers), line(["-" * w for w in widths])] + [line(r) for r in rows]


def report(results, show_ok: bool = True) -> str:
    """The human-readable report: one table per architecture, then the first mismatches and errors."""
    out = []
    by_arch: dict = {}
    for r in results:
        by_arch.setdefault(safe(r.arch), []).append(r)
    for arch in sorted(by_arch):
        rs = sorted(by_arch[arch], key=lambda r: (safe(r.datapath), safe(r.display)))
        cases = sum(r.cases for r in rs if not r.error)
        bad = sum(r.mismatches for r in rs)
        errs = sum(1 for r in rs if r.error)
        head = f"{arch}: {len(rs)} files, {cases:,} cases, {bad:,} mismatches"
        if errs:
            head += f", {errs} errors"
        out.append(head)
        rows = []
        for r in rs:
            if not show_ok and r.ok:
                continue
            status = "ERROR" if r.error else ("ok" if r.ok else "MISMATCH")
            rows.append([safe(r.datapath), safe(r.display), f"{r.cases:,}", "-" if r.error else f"{r.mismatches:,}",
                         safe(r.source) or "-", status])
        if rows:
            out += ["  " + x for x in _table(rows, ["datapath", "file", "cases", "mismatches", "source", "status"],
                                             ["<", "<", ">", ">", "<", "<"])]
        out.append("")
    for r in results:
        if r.error:
            out.append(f"ERROR {safe(r.display)}: {one_line(r.error)}")
    if any(r.error for r in results):
        out.append("")
    for r in results:
        if not r.mismatches:
            continue
        out.append(f"MISMATCH {safe(r.display)}: {safe(r.arch)} {safe(r.datapath)}: "
                   f"{r.mismatches} of {r.cases} cases differ")
        for m in r.first:
            out.append(f"  case {m.index}" + (f" [{safe(m.label)}]" if m.label else ""))
            for name, entries in m.inputs.items():
                text = ", ".join(f"{e['word']} ({safe(e['value'])})" if e["value"] else e["word"] for e in entries)
                out.append(f"    {name:8s} = {text}")
            out.append(f"    expected = {m.expected['word']} ({safe(m.expected['value'])})")
            out.append(f"    actual   = {m.actual['word']} ({safe(m.actual['value'])})")
        out.append("")
    s = summary(results)
    rows = [[src, f"{n['files']:,}", f"{n['cases']:,}", f"{n['mismatches']:,}"] for src, n in s["by_source"].items()]
    rows.append(["total", f"{s['files']:,}", f"{s['cases']:,}", f"{s['mismatches']:,}"])
    out.append("cases by evidence source:")
    out += ["  " + x for x in _table(rows, ["source", "files", "cases", "mismatches"], ["<", ">", ">", ">"])]
    out.append("")
    if s["no_vectors"]:
        out.append("FAILED: no vectors found" + (f" ({s['files']} files, {s['errors']} errors)" if s["files"] else ""))
        return "\n".join(out)
    verdict = "OK" if s["ok"] else "FAILED"
    out.append(
        f"{verdict}: {s['files']} files, {s['cases']:,} cases, {s['mismatches']:,} mismatches"
        f" in {s['files_with_mismatches']} files, {s['errors']} errors"
    )
    return "\n".join(out)


def to_json(results) -> dict:
    """The ``mmasim.validate/1`` document (docs/user-guide.md, "JSON output")."""
    return {"schema": "mmasim.validate/1", "summary": summary(results), "files": [r.to_dict() for r in results]}
