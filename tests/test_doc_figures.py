"""Every count or figure in README.md and docs/*.md is generated, checked or measured.

A *figure* is a number in a doc's prose (fenced code blocks and inline code excluded: the tests
that run the blocks check them) with a thousands separator (2,276), or followed by a unit
(s, ms, x as a ratio, %, MiB, instructions per product, ...), or by a counting noun (datapaths,
cases, files, words, ...), or in a table column whose header names one. Shapes (128 x 128),
hex words, format names (e4m3), exponents (2^-30), section and version numbers are not figures.

Each figure must be accounted for by exactly one rule of ``RULES``:

- **generated**: docs/reference.md is what tools/gen_reference.py writes; the figures of
  docs/khattak-octave-report.md (written by tools/peer/khattak_octave.py, its provenance line
  first) are checked against the vector files it froze and against its own tables;
- **checked**: a checker computes the value from the project (the registry, the bundled
  vectors, a constant, the arithmetic of a stated rule) and the doc must say that value;
- **measured**: a time, rate or ratio from a benchmark run must appear in a fenced ``text`` block
  that quotes that run's output in the same doc section (or in the section the paragraph names
  in quotes, "Figures"), to the rounding the doc shows; a ratio of two numbers there is a checked
  rule that names both.

A figure no rule accounts for fails, naming the doc, the figure and its sentence; so does a rule
that accounts for nothing (the doc changed under it).
"""

from __future__ import annotations

import collections
import functools
import pathlib
import re
import sys
from dataclasses import dataclass, field
from typing import Callable

import pytest

from mmasim.registry.build import get_registry
from mmasim.vectors import files as vectors

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _doc_paths():
    return [ROOT / "README.md"] + sorted(DOCS.glob("*.md"))


# ================================================================== extraction
NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
UNITS = (r"GFLOP/s|TFLOP/s|products/s|instructions per product|GiB|MiB|KiB|GB|MB|kB|KB|ULPs?|ulps?|"
         r"minutes?|min|seconds?|ms|ns|µs|us|s|%|x|×")
NOUNS = (r"datapaths?|cases?|files?|tests?|words?|instructions?|kernels?|architectures?|vectors?|"
         r"disagreements?|mismatch(?:es)?|probes?|lines|results|passed|skipped|failed|forms|signatures|"
         r"combinations|images|epochs|sets")
_SKIP_WORDS = r"(?:and|or|of|the|to|are|is|in|on|for|with|by|a|an|at|per|than|as|from)\b"
# a figure: NUM, or a range NUM-NUM, then a unit, or a counting noun after at most one other word
_INDEX = r"(?<!block )(?<!step )(?<!chunk )(?<!lane )(?<!row )(?<!column )(?<!element )(?<!= )(?<!bits )(?<!bit )"
_FIG = re.compile(
    r"(?<![\w.^/\-§+*:,#])" + _INDEX + r"(?P<a>" + NUM + r")(?:\s?[-–]\s?(?P<b>" + NUM + r"))?"
    r"(?:\s?(?P<unit>" + UNITS + r")(?![\w/])"
    r"|\s+(?:(?!" + _SKIP_WORDS + r")[A-Za-z][\w-]*\s+)?(?P<noun>" + NOUNS + r")\b)?")
# "N of the M ...", "; N are ...": counts that a noun follows later in the clause
_COUNT_OF = re.compile(
    r"(?<![\w.^/\-§+*:,#])(?P<a>\d[\d,]*)(?= of (?:them\b|(?:the|its|these|those|all) (?:\S+ ){0,3}(?:" + NOUNS + r"|ones)\b))"
    r"|(?:(?<=; )|(?<=\()|(?<=\. )|(?<=\n))(?P<b>\d[\d,]*)(?= are\b)")
_TABLE_HEADER_UNIT = re.compile(r"\b(?:" + UNITS + r"|" + NOUNS + r")\b|instructions / product|%")
_SENTENCE_END = re.compile(r"[.;]\s+(?=[A-Z(`])|\n(?=[-*|] )")
_FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)


@dataclass
class Block:
    lang: str
    body: str
    start: int                       # offset in the normalized text


@dataclass
class Doc:
    name: str
    raw: str
    text: str = ""                   # prose: fences blanked, ** removed
    blocks: list = field(default_factory=list)
    code: list = field(default_factory=list)       # inline code spans of ``text``
    headings: list = field(default_factory=list)   # (offset, level, title)

    @classmethod
    def parse(cls, name: str, raw: str) -> "Doc":
        doc = cls(name, raw)
        fences = []

        def blank(m):
            fences.append((m.start(), m.group(1), m.group(2)))
            return "\n" * m.group(0).count("\n")

        text = _FENCE.sub(blank, raw)
        # offsets move where fences shrink: find each fence's place again by counting lines
        lines_before = [raw.count("\n", 0, s) for s, _, _ in fences]
        text = text.replace("**", "")
        line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]
        doc.blocks = [Block(lang, body, line_starts[n]) for n, (_, lang, body) in zip(lines_before, fences)]
        doc.text = text
        doc.code = [m.span() for m in re.finditer(r"`(?:[^`\n]|\n(?!\n))*`", text)]
        doc.headings = [(m.start(), len(m.group(1)), m.group(2).strip())
                        for m in re.finditer(r"^(#{1,6}) (.+)$", text, re.M)]
        return doc

    def in_code(self, pos: int) -> bool:
        return any(s <= pos < e for s, e in self.code)

    def line(self, pos: int) -> int:
        return self.text.count("\n", 0, pos) + 1

    def paragraph(self, pos: int) -> tuple[int, int]:
        s = self.text.rfind("\n\n", 0, pos)
        e = self.text.find("\n\n", pos)
        return (0 if s < 0 else s + 2), (len(self.text) if e < 0 else e)

    def sentence(self, pos: int) -> str:
        s, e = self.paragraph(pos)
        if self.text[s:e].lstrip().startswith("|"):           # a table: the row
            s = self.text.rfind("\n", 0, pos) + 1
            e = self.text.find("\n", pos)
        s = max([s] + [m.end() for m in _SENTENCE_END.finditer(self.text, s, pos)])
        end = _SENTENCE_END.search(self.text, pos, e)
        return " ".join(self.text[s:end.start() + 1 if end else e].split())

    def section(self, pos: int, level: int = 2) -> tuple[int, int]:
        """The span of the section of heading level <= ``level`` holding ``pos``."""
        start, end = 0, len(self.text)
        for off, lev, _ in self.headings:
            if lev <= level:
                if off <= pos:
                    start = off
                elif off > pos:
                    end = off
                    break
        return start, end

    def heading_span(self, title: str) -> tuple[int, int] | None:
        for i, (off, lev, t) in enumerate(self.headings):
            if t == title:
                end = next((o for o, l, _ in self.headings[i + 1:] if l <= lev), len(self.text))
                return off, end
        return None


@dataclass(frozen=True)
class Figure:
    doc: str
    start: int
    end: int
    text: str                        # the number as written
    unit: str                        # unit or counting noun ("" for a bare big number)
    line: int
    sentence: str

    @property
    def value(self) -> float:
        return float(self.text.replace(",", ""))

    @property
    def decimals(self) -> int:
        return len(self.text.split(".")[1]) if "." in self.text else 0

    def __str__(self):
        return f"{self.doc}:{self.line}: {self.text} {self.unit}".rstrip() + f"  in: {self.sentence[:300]}"


def _is_shape(text: str, end: int) -> bool:
    """'128 x 128', '16 x 8': an x between numbers is a shape, not a ratio."""
    return bool(re.match(r"\s*\d", text[end:]))


def figures(doc: Doc) -> list[Figure]:
    t = doc.text
    out = {}

    def add(start, end, unit):
        if doc.in_code(start):
            return
        out[start] = Figure(doc.name, start, end, t[start:end], unit, doc.line(start), doc.sentence(start))

    for m in _FIG.finditer(t):
        unit = m.group("unit") or m.group("noun") or ""
        if unit in ("x", "×"):
            before = t[max(0, m.start() - 3):m.start()]
            after = t[m.end("unit"):m.end("unit") + 12]
            spaced = m.start("unit") > m.end("b" if m.group("b") else "a")
            if _is_shape(t, m.end("unit")) or re.search(r"[x×]\s*$", before) or (spaced and re.match(r"\s+[a-z]", after)):
                continue               # a shape, or a product ('0 x inf', '8 x the swizzle bytes')
        big = "," in m.group("a") or (m.group("b") or "").count(",") > 0
        if not (unit or big):
            continue
        add(m.start("a"), m.end("a"), unit)
        if m.group("b"):
            add(m.start("b"), m.end("b"), unit)
    for m in _COUNT_OF.finditer(t):
        g = "a" if m.group("a") else "b"
        if m.start(g) not in out:
            add(m.start(g), m.end(g), "(count)")
    # tables: a bare number in a column whose header names a unit or a counting noun
    for tm in re.finditer(r"(?:^\|.*\|[ \t]*\n)+", t, re.M):
        rows = tm.group(0).splitlines()
        header = [c.strip() for c in rows[0].strip().strip("|").split("|")]
        pos = tm.start() + len(rows[0]) + 1 + len(rows[1]) + 1
        for row in rows[2:]:
            cells = row.split("|")[1:-1]
            p = pos + 1
            for col, cell in enumerate(cells):
                cm = re.fullmatch(r"\s*(" + NUM + r")\s*", cell)
                if cm and col < len(header) and _TABLE_HEADER_UNIT.search(header[col]) and p + cm.start(1) not in out:
                    add(p + cm.start(1), p + cm.end(1), header[col])
                p += len(cell) + 1
            pos += len(row) + 1
    return [out[k] for k in sorted(out)]


@functools.lru_cache(maxsize=None)
def load(name: str) -> Doc:
    path = ROOT / name if name == "README.md" else DOCS / name
    return Doc.parse(name, path.read_text(encoding="utf-8"))


# ================================================================== rules
MEASURED = object()                   # expected value of a measured figure: found in a verbatim block


@dataclass
class Rule:
    """``pattern`` (a literal space matches any run of white space) is searched in the doc's prose;
    ``expect(match)`` returns ``{group: expected value}``: each group whose span is a figure's is that
    figure, accounted for by this rule, and must be the expected value (an int exactly, a float to the
    decimals the doc shows, ``MEASURED``: in a verbatim block)."""
    doc: str
    pattern: str
    expect: Callable
    kind: str = "checked"             # checked / generated / measured
    flags: int = re.S

    def regex(self):
        return re.compile(self.pattern.replace(" ", r"\s+"), self.flags)


def checked(doc, pattern, *values, flags=re.S):
    """Groups 1.. of ``pattern`` are the figures; ``values`` their expected values, each a value or a
    function of the match (called at check time)."""
    def expect(m):
        return {i + 1: (v(m) if callable(v) else v) for i, v in enumerate(values)}
    return Rule(doc, pattern, expect, "checked", flags)


def measured(doc, pattern, flags=re.S):
    """Every group of ``pattern`` is a measured figure."""
    return Rule(doc, pattern, lambda m: {i + 1: MEASURED for i in range(len(m.groups()))}, "measured", flags)


def measured_section(doc, heading):
    """Every figure with a time / rate / ratio unit in the section under ``heading`` that no other
    rule accounts for is measured."""
    return Rule(doc, f"@section:{heading}", None, "measured-section")


def generated(doc, verify):
    """Every figure of ``doc`` is accounted for by ``verify(doc)``, which raises where the doc is not
    what its generator writes or its figures are not the data's."""
    return Rule(doc, "@generated", verify, "generated")


# ------------------------------------------------------------------ helpers for checkers
@functools.lru_cache(maxsize=None)
def _tests_module(name):
    sys.path.insert(0, str(ROOT / "tests"))
    try:
        return __import__(name)
    finally:
        sys.path.pop(0)


@functools.lru_cache(maxsize=None)
def datapath_counts():
    """(with an evidence label, hardware, peer, assumed) over the built-in tables, refused ones left out."""
    return _tests_module("test_claims")._datapath_counts()


@functools.lru_cache(maxsize=None)
def vector_counts():
    """(cases, files, hardware, hand-derived, peer, of them MMA-Sim, of them Octave)."""
    return _tests_module("test_claims")._vector_counts()


def builtin_datapaths():
    for arch in _tests_module("test_claims")._builtin_architectures():
        for dp in arch.datapaths:
            yield arch.name, dp


@functools.lru_cache(maxsize=None)
def refused():
    """Built-in datapaths the tables list but ``MMA()`` refuses: (arch, datapath)."""
    return tuple((a, dp) for a, dp in builtin_datapaths() if dp.refuse)


@functools.lru_cache(maxsize=None)
def assumed_groups() -> dict:
    """The README's account of the assumed datapaths, each in the first group it fits."""
    out = collections.Counter()
    for arch, dp in builtin_datapaths():
        if dp.refuse or dp.status.kind != "assumed":
            continue
        if arch == "Blackwell Ultra":
            out["b300"] += 1
        elif dp.op == "tcgen05.mma" and any(q == "ws" or q == "cta_group::2" for q in dp.qualifiers):
            out["cta2_ws"] += 1
        elif dp.accumulator == "integer" and not dp.sparse:
            out["integer"] += 1
        elif dp.sparse:
            out["sparse"] += 1
        else:
            out["other"] += 1
    return dict(out)


@functools.lru_cache(maxsize=None)
def _mismatches(path: pathlib.Path) -> int:
    return int(vectors.run_vector_file(vectors.load(path)).mismatches.size)


def mismatches_in(pattern: str) -> int:
    """Mismatches of mmasim over the bundled vector files matching ``pattern`` (under vectors/)."""
    return sum(_mismatches(p) for p in _vector_files(pattern))


@functools.lru_cache(maxsize=None)
def _vector_files(pattern: str) -> tuple:
    return tuple(sorted((ROOT / "vectors").glob(pattern)))


@functools.lru_cache(maxsize=None)
def _vinfo(path: pathlib.Path) -> tuple:
    vf = vectors.load(path)
    return len(vf), vf.meta


def nvec(path) -> int:
    """Cases in one bundled vector file."""
    return _vinfo(pathlib.Path(path))[0]


def vmeta(path) -> dict:
    return _vinfo(pathlib.Path(path))[1]


@functools.lru_cache(maxsize=None)
def cases_in(pattern: str) -> int:
    """Cases in the bundled vector files matching ``pattern`` (under vectors/)."""
    return sum(nvec(p) for p in _vector_files(pattern))


def files_in(pattern: str) -> int:
    return len(_vector_files(pattern))


def refused_b300_i8() -> int:
    return sum(1 for a, dp in refused() if a == "Blackwell Ultra" and dp.kind == "i8")


def _lazy(f, *args, **kwargs):
    return lambda m: f(*args, **kwargs)


# ================================================================== accounting
_TIMING = {"s", "ms", "ns", "µs", "us", "min", "minute", "minutes", "second", "seconds", "x", "×", "%",
           "GFLOP/s", "TFLOP/s", "products/s", "instructions per product"}
_VERBATIM_NUM = re.compile(r"(?<![\w.])\d+(?:\.\d+)?")


def _agrees(text: str, want) -> bool:
    value = float(text.replace(",", ""))
    if isinstance(want, str):
        return text == want
    if isinstance(want, int):
        return "." not in text and value == want
    decimals = len(text.split(".")[1]) if "." in text else 0
    return abs(value - want) <= 0.5 * 10 ** -decimals + 1e-9


def verbatim_lines(doc: Doc, pos: int) -> list[list[float]]:
    """The numbers of each line of the ``text`` blocks in the section holding ``pos`` and in the
    sections its paragraph names in quotes ("Figures")."""
    spans = [doc.section(pos)]
    s, e = doc.paragraph(pos)
    for title in re.findall(r'"([^"\n]+)"', doc.text[s:e]):
        span = doc.heading_span(title)
        if span:
            spans.append(span)
    return [[float(x) for x in _VERBATIM_NUM.findall(line)]
            for b in doc.blocks if b.lang == "text" and any(a <= b.start < z for a, z in spans)
            for line in b.body.splitlines()]


def in_verbatim(text: str, unit: str, lines: list[list[float]]) -> bool:
    """The figure is a number of the run's output to the rounding it shows (a percentage: or a
    hundredth of it).  A ratio of two of its numbers is a checked rule naming both (``of_f16``)."""
    for numbers in lines:
        if any(_agrees(text, n) or (unit == "%" and _agrees(text, 100 * n)) for n in numbers):
            return True
    return False


def account(doc: Doc, rules) -> list[str]:
    """What is wrong with ``doc``'s figures under ``rules``: one line each, empty when all are
    accounted for and true."""
    figs = figures(doc)
    by_start = {f.start: f for f in figs}
    covered = collections.defaultdict(list)
    errors = []
    fallback = []
    for rule in (r for r in rules if r.doc == doc.name):
        if rule.pattern == "@generated":
            try:
                rule.expect(doc)
            except AssertionError as exc:
                errors.append(f"{doc.name}: not what its generator writes, or not the data's: {exc}")
            for f in figs:
                covered[f.start].append(rule.pattern)
            continue
        if rule.pattern.startswith("@section:"):
            span = doc.heading_span(rule.pattern.split(":", 1)[1])
            if span is None:
                errors.append(f"{doc.name}: no section {rule.pattern!r}")
            else:
                fallback.append((span, rule.pattern))
            continue
        hits = 0
        for m in rule.regex().finditer(doc.text):
            hits += 1
            for group, want in rule.expect(m).items():
                s, e = m.span(group)
                f = by_start.get(s) if by_start.get(s) and by_start[s].end == e else None
                where = f"{doc.name}:{doc.line(s)}: {m.group(group)}"
                if f is not None:
                    covered[s].append(rule.pattern)
                if want is MEASURED:
                    if not in_verbatim(m.group(group), f.unit if f else "", verbatim_lines(doc, s)):
                        errors.append(f"{where} is not in the verbatim output its section quotes "
                                      f"(nor a ratio of two of its numbers)  in: {doc.sentence(s)[:300]}")
                elif not _agrees(m.group(group), want):
                    errors.append(f"{where}: the project gives {want!r}  in: {doc.sentence(s)[:300]}")
        if not hits:
            errors.append(f"{doc.name}: the rule {rule.pattern!r} finds nothing: the doc changed under it")
    for f in figs:
        rules_here = covered.get(f.start, [])
        if not rules_here:
            span = next((p for (a, z), p in fallback if a <= f.start < z and f.unit in _TIMING), None)
            if span is not None:
                if not in_verbatim(f.text, f.unit, verbatim_lines(doc, f.start)):
                    errors.append(f"{f}: measured, but not in the verbatim output its section quotes "
                                  "(nor a ratio of two of its numbers)")
                continue
            errors.append(f"{f}: no rule accounts for this figure (generated, checked or measured)")
        elif len(rules_here) > 1:
            errors.append(f"{f}: accounted for by {len(rules_here)} rules: {rules_here}")
    return errors


# ================================================================== the rules
@functools.lru_cache(maxsize=None)
def _reference_text() -> str:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_reference
    finally:
        sys.path.pop(0)
    return gen_reference.generate()


def _gen_reference(doc: Doc):
    assert doc.raw == _reference_text(), "docs/reference.md is stale: run python tools/gen_reference.py"


@functools.lru_cache(maxsize=None)
def script(relpath: str):
    """A project script (under tools/ or benchmarks/) loaded as a module."""
    import importlib.util

    path = ROOT / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _khattak_tool():
    return script("tools/peer/khattak_octave.py")


def bench():
    return script("benchmarks/bench.py")


KM_HARDWARE = "hardware/*/khattak-mikaitis.*.npz"
OCTAVE = "peer/*/khattak-octave.*.npz"


# ------------------------------------------------------------------ docs/khattak-octave-report.md
_KM_ROW = r"^\| ([^|\n]+?) \| `([^`]+)` \| `[^`]+` \| (\d+) \| (\d+) \| (\d+) \| ([^|\n]+?) \| (\d+) \|$"


@functools.lru_cache(maxsize=None)
def _khattak_report() -> dict:
    """The report's own tables: {(arch, instruction): row}, and the rows listed per disagreement section."""
    doc = load("khattak-octave-report.md")
    rows = {}
    for m in re.finditer(_KM_ROW.replace(" ", r"\s+"), doc.text, re.M):
        errors = sum(int(n) for n in re.findall(r"(\d+): ", m.group(6)))
        rows[(m.group(1).strip(), m.group(2))] = dict(cases=int(m.group(3)), agree=int(m.group(4)),
                                                     disagree=int(m.group(5)), errors=errors)
    listed = {}
    for sec in re.finditer(r"^## (.+?) `([^`]+)`: \d+ disagreements.*?\n\n(.*?)(?=\n## |\Z)", doc.text, re.M | re.S):
        listed[(sec.group(1), sec.group(2))] = [line for line in sec.group(3).splitlines()[2:] if line.startswith("|")]
    failed = doc.text.split("## Cases the models failed on (left out)", 1)[1].split("\n## ", 1)[0]
    return dict(rows=rows, listed=listed, failed=len(re.findall(r"^\| (?!arch |---)", failed, re.M)))


def _khattak_jobs():
    tool = _khattak_tool()
    return {(j.arch, j.instruction): j for j in tool.JOBS}


def _khattak_frozen(arch, instruction) -> int:
    """Cases of the vector file the tool froze for this job (0: none)."""
    path = _khattak_tool().job_path(ROOT / "vectors" / "peer", _khattak_jobs()[(arch, instruction)])
    return nvec(path) if path.exists() else 0


def _khattak_classes() -> tuple:
    """(model value out of the D format, a different D word, compared only, model errors): as the tool
    classifies its disagreements, from the report's tables."""
    rep, jobs = _khattak_report(), _khattak_jobs()
    frozen = [k for k in rep["rows"] if not jobs[k].compare_only]
    for k in frozen:                      # every disagreement of a frozen datapath is listed
        assert len(rep["listed"].get(k, [])) == rep["rows"][k]["disagree"], k
    out_of_range = sum(1 for k in frozen for line in rep["listed"].get(k, [])
                       if "`the model returned" in line.split("|")[5])
    word = sum(rep["rows"][k]["disagree"] for k in frozen) - out_of_range
    compared = sum(r["disagree"] for k, r in rep["rows"].items() if jobs[k].compare_only)
    return out_of_range, word, compared, rep["failed"]


def _khattak_section(m):
    """A disagreement section's count: the table's, and the sum of its groups."""
    row = _khattak_report()["rows"][(m.group(1), m.group(2))]["disagree"]
    groups = sum(int(n) for n in re.findall(r"\d+", m.group(4)))
    return row if groups == row else f"{row} (its groups sum to {groups})"


def _khattak_set_cases(m):
    """A measured set run through the model: the set is a bundled hardware file holding at least that many."""
    (path,) = _vector_files(f"hardware/*/{m.group(1)}") or [None]
    return int(m.group(2)) if path and nvec(path) >= int(m.group(2)) else f"{m.group(1)} bundled"


KM_REPORT = "khattak-octave-report.md"
KHATTAK_REPORT = [
    Rule(KM_REPORT, r"^Generated by `tools/peer/khattak_octave.py` \(seed \d+, (\d+) cases per datapath",
         lambda m: {1: max(nvec(p) for p in _vector_files(OCTAVE))}, "generated", re.M),
    Rule(KM_REPORT, r"^- ([\d,]+) cases on (\d+) datapaths; ([\d,]+) frozen in (\d+) files\.\n"
         r"- the model's value is not a D-format value \(an overflowing sum returned as a finite double\): ([\d,]+)\n"
         r"- a different D word, on a frozen datapath: ([\d,]+)\n- on the datapaths compared but not frozen: ([\d,]+)\n"
         r"- the model raised an error: ([\d,]+)",
         lambda m: dict(zip(range(1, 9), (
             sum(r["cases"] for r in _khattak_report()["rows"].values()), len(_khattak_tool().JOBS),
             cases_in(OCTAVE), files_in(OCTAVE), *_khattak_classes()))), "generated", re.M),
    Rule(KM_REPORT, _KM_ROW,
         lambda m: {3: max(nvec(p) for p in _vector_files(OCTAVE)),
                    4: int(m.group(3)) - int(m.group(5)) - _khattak_report()["rows"][(m.group(1).strip(), m.group(2))]["errors"],
                    7: _khattak_frozen(m.group(1).strip(), m.group(2))}, "generated", re.M),
    Rule(KM_REPORT, r"^## (.+?) `([^`]+)`: (\d+) disagreements \(([^)]*)\)$",
         lambda m: {3: _khattak_section(m)}, "generated", re.M),
    Rule(KM_REPORT, r"^\| (khattak-mikaitis\.[^|\n]+\.npz) \| `[^`]+` \| (\d+) \|",
         lambda m: {2: _khattak_set_cases(m)}, "generated", re.M),
]


# ------------------------------------------------------------------ checkers: the registry's records
@functools.lru_cache(maxsize=None)
def evidence(arch: str, pattern: str, where=lambda dp: True) -> str:
    """The first group of ``pattern`` in the evidence the tables record for ``arch``'s datapaths
    (what ``mmasim explain`` prints): a source's figure, quoted where the doc quotes it."""
    for a, dp in builtin_datapaths():
        if a == arch and where(dp):
            m = re.search(pattern, dp.status.evidence)
            if m:
                return m.group(1)
    return f"(no evidence of {arch} matches {pattern!r})"


def _t1(dp):
    return dp.status.kind == "hardware" and dp.status.source == "T1"


@functools.lru_cache(maxsize=None)
def t1_datapaths():
    return [dp for a, dp in builtin_datapaths() if a == "Blackwell" and _t1(dp)]


def t1_mismatches() -> int | str:
    """0 where every T1 datapath's evidence says 0 mismatches."""
    return 0 if all("0 mismatches" in dp.status.evidence for dp in t1_datapaths()) else "not 0 for every T1 datapath"


@functools.lru_cache(maxsize=None)
def count(pred) -> int:
    return sum(1 for a, dp in builtin_datapaths() if not dp.refuse and pred(a, dp))


def one_size(pattern: str) -> int | str:
    """The number of cases of every file matching ``pattern``, where they all hold the same."""
    sizes = {nvec(p) for p in _vector_files(pattern)}
    return sizes.pop() if len(sizes) == 1 else f"files of {sorted(sizes)} cases"


def _e2m1_rtx(dp):
    return dp.kind == "mxf8f6f4" and "e2m1.sm120" in (dp.a, dp.b) and not dp.sparse


@functools.lru_cache(maxsize=None)
def window_paths() -> tuple:
    """(window datapaths, of them one product per group) over the built-in tables."""
    from mmasim.backends.fastpaths.window import one_product_window
    from mmasim.execution.model import Model

    reg = get_registry()
    dps = [dp for a, dp in builtin_datapaths() if dp.accumulator == "window" and not dp.refuse]
    return len(dps), sum(1 for dp in dps if one_product_window(Model(dp, reg).plan))


def numba_signatures() -> int:
    """Compiled kernel signatures of the registered datapaths (``mmasim warmup`` compiles each)."""
    pytest.importorskip("numba", reason="the kernel signatures are numba's")
    return len(constant("mmasim.cli.warmup", "signatures")())


def quick_rows() -> int:
    """Rows of a batched dot in ``bench.py --quick --scale`` (its scale run)."""
    src = (ROOT / "benchmarks" / "bench.py").read_text(encoding="utf-8")
    body = src[src.index("def scale_run"):]
    return int(re.search(r"n = ([\d_]+) if args.quick", body).group(1).replace("_", ""))


@functools.lru_cache(maxsize=None)
def bench_ks() -> tuple:
    """K of the batched-dot datapaths ``bench.py --scale`` times against MMA-Sim."""
    import mmasim

    return tuple(mmasim.MMA(arch, ins, **q).k for _, arch, ins, q, peer, _ in bench().CASES if peer)


def mma_sim_files():
    return [p for p in _vector_files("peer/*/*.npz") if not p.name.startswith("khattak-octave.")]


@functools.lru_cache(maxsize=None)
def mma_sim_mix() -> tuple:
    """The percentages of the case mix MMA-Sim's vector files state in their notes, in order."""
    mixes = {re.search(r"mix: (.*?\d+% zero-heavy)", vmeta(p)["notes"]).group(1)
             for p in mma_sim_files()}
    assert len(mixes) == 1, mixes
    return tuple(int(x) for x in re.findall(r"(\d+)%", mixes.pop()))


def mma_sim_file_size() -> int | str:
    """Cases per MMA-Sim file: every file but the filtered tcgen05 ones has the same number."""
    sizes = {nvec(p) for p in mma_sim_files() if vmeta(p).get("api") != "tcgen05"}
    fewer = all(nvec(p) <= max(sizes) for p in mma_sim_files())
    return sizes.pop() if len(sizes) == 1 and fewer else f"sizes {sorted(sizes)}"


def khattak_group(name) -> int:
    return round(dict(script("tools/peer/khattak_cases.py").GROUPS)[name] * 100)


def khattak_cancel_ulps() -> int:
    src = (ROOT / "tools" / "peer" / "khattak_cases.py").read_text(encoding="utf-8")
    lo, hi = re.search(r"step = int\(self.rng.integers\((-?\d+), (\d+)\)\)", src).groups()
    return max(-int(lo), int(hi) - 1)


def negative_zeros() -> int:
    """NVIDIA model zeros of sign - frozen as +0, as the Octave files' notes count them."""
    return sum(int(x) for p in _vector_files(OCTAVE)
               for x in re.findall(r"rounded to zero: (\d+) of the generated cases", vmeta(p).get("notes", "")))


@functools.lru_cache(maxsize=None)
def km_sets() -> dict:
    """The report's measured sets through their models: file -> (cases, model = hardware)."""
    doc = load(KM_REPORT)
    return {m.group(1): (int(m.group(2)), int(m.group(3))) for m in
            re.finditer(r"^\| (khattak-mikaitis\.\S+\.npz) \| `[^`]+` \| (\d+) \| (\d+) \|", doc.text, re.M)}


def km_set(gpu, ins) -> tuple:
    return km_sets()[f"khattak-mikaitis.{gpu}.{ins}.hardware.npz"]


def km_fp8_f16_sets() -> list:
    return [v[1] for k, v in km_sets().items() if re.search(r"\.f16\.e[45]m[23]\.e[45]m[23]\.f16\.", k)]


def km_set_size() -> int | str:
    sizes = {v[0] for v in km_sets().values()}
    return sizes.pop() if len(sizes) == 1 else f"sets of {sorted(sizes)}"


def km_disagree(arch, ins) -> int:
    return _khattak_report()["rows"][(arch, ins)]["disagree"]


def _harness_nvidia(arch) -> tuple:
    from mmasim.harness import generate as gen

    pairs, _ = gen.specs_for(arch)
    specs = [s for _, s in pairs if s.target.startswith("sm_")]
    keep, _ = _tests_module("test_harness_nvcc")._distinct(specs)
    return len(specs), len(keep)


harness_nvidia = functools.lru_cache(maxsize=None)(_harness_nvidia)


def instructions_of(arch) -> int:
    import mmasim

    return len(mmasim.instructions(arch))


def probe_count(arch, ins, **q) -> int:
    import mmasim
    from mmasim.characterize import probe_cases

    return len(probe_cases(mmasim.MMA(arch, ins, **q))["labels"])


def dropin_cases():
    src = (ROOT / "tools" / "peer" / "compare_dropin.py").read_text(encoding="utf-8")
    scope = {}
    exec(src[src.index("CASES = ["):src.index("SEED =")], scope)
    return scope["CASES"]


def accuracy_median_percent(title: str, k: int) -> float:
    """100 x the median relative error of row K of the table under ``title`` in the accuracy page's output."""
    doc = load("accuracy.md")
    for b in doc.blocks:
        if b.lang == "text" and title in b.body:
            table = b.body.split(title, 1)[1]
            row = re.search(rf"^\s+{k}\s+(\S+)\s+(\S+)", table, re.M)
            return 100 * float(row.group(2))
    return float("nan")


def accuracy_machine_gib() -> float:
    """The memory of the machine of accuracy.md's refusal example: its limit over the fraction the limit is."""
    doc = load("accuracy.md")
    limit = next(float(m.group(1)) for b in doc.blocks if b.lang == "text"
                 for m in [re.search(r"more than the limit of ([\d.]+) GiB", b.body)] if m)
    return limit / constant("mmasim.accuracy", "MEMORY_FRACTION")


def digits_split() -> tuple:
    """(training images, test images, epochs, learning rate, momentum, batch) of examples/digits_mlp.py."""
    src = (ROOT / "examples" / "digits_mlp.py").read_text(encoding="utf-8")
    train = int(re.search(r"return \(x\[:(\d+)\]", src).group(1))
    try:
        from sklearn.datasets import load_digits

        total = len(load_digits().target)
    except ImportError:
        total = int(re.search(r"Digits \(([\d,]+) ", src).group(1).replace(",", ""))

    def const(name):
        return float(re.search(rf"^{name} = ([\d.]+)$", src, re.M).group(1))

    return train, total - train, int(const("EPOCHS")), const("LR"), const("MOMENTUM"), int(const("BATCH"))


V = _lazy          # a value computed when the rule runs


def constant(module: str, name: str):
    """A module-level constant of the project (its value: what the doc must say)."""
    import importlib

    return getattr(importlib.import_module(module), name)


def one_core_ns(label: str) -> float:
    """numba ns per product of ``label`` in the one-core table of performance.md's "Figures" output."""
    doc = load("performance.md")
    (body,) = [b.body for b in doc.blocks if b.lang == "text" and "numba ns" in b.body]
    table = body[body.index("numba ns"):]
    line = next(l for l in table.splitlines() if l.startswith(label + " "))
    return float(line[len(label):].split()[1])


def of_f16(label: str) -> float:
    return one_core_ns(label) / one_core_ns("B200 tcgen05 kind::f16 f32.f16.f16")


PERFORMANCE = [
    checked("performance.md", r"One product per group \(([\d,]+) of the ([\d,]+) window datapaths\)",
            lambda m: window_paths()[1], lambda m: window_paths()[0]),
    checked("performance.md", r"the words it reads: (\d+) signatures for the built-in datapaths",
            V(numba_signatures)),
    measured("performance.md", r"`import mmasim` (0.34); import plus a first 64-row `dot` ([\d.]+) with numpy, ([\d.]+) under "
             r"`auto`, ([\d.]+) with numba forced; `mmasim validate` \(every vector file\) ([\d.]+) with numpy, ([\d.]+) "
             r"under `auto`, ([\d.]+) with numba forced\. `mmasim warmup` into an empty cache folder \(every signature, "
             r"one process per CPU\): ([\d.]+) s wall"),
    checked("performance.md", r"`MIN_ELEMENTS_PER_THREAD` \(([\d,]+)\) products",
            V(constant, "mmasim.execution.threads", "MIN_ELEMENTS_PER_THREAD")),
    checked("performance.md", r"still running after (\d+) s",
            V(constant, "mmasim.composition.gemm", "PROGRESS_DELAY")),
    # the targets: benchmarks/bench.py's GOALS
    *(checked("performance.md", pattern, (lambda m, k=key: bench().GOALS[k])) for pattern, key in (
        (r"first 64-row `dot` within (\d+) s, warm cache", "startup_s"),
        (r"\| >= (\d+)x MMA-Sim, one core, window datapaths", "window_vs_peer"),
        (r"\| <= (\d+) instructions per product \(callgrind\)", "instructions_per_product"),
        (r"\| >= (\d+)x MMA-Sim, block-scaled", "block_scaled_vs_peer"),
        (r"per product within ([\d.]+)x of f16", "block_scaled_vs_f16"),
        (r"\| >= ([\d.]+)x on 2 cores", "two_core_speedup"),
        (r"\| >= (\d+)x MMA-Sim end to end", "end_to_end_vs_peer"),
        (r"\| suite cold within (\d+) minutes", "suite_cold_minutes"))),
    checked("performance.md", r"mxf8f6f4 ([\d.]+)x, NVFP4 ([\d.]+)x, MXF4 ([\d.]+)x, s8 ([\d.]+)x of B200 `kind::f16`",
            *(V(of_f16, label) for label in ("B200 kind::mxf8f6f4 e4m3 ue8m0", "B200 kind::mxf4nvf4 NVFP4 (ue4m3, 4X)",
                                             "B200 kind::mxf4 (ue8m0, 2X)", "Ampere mma.sync m16n8k32 s32.s8.s8.s32"))),
    checked("performance.md", r"the (\d+) RTX Blackwell FP4 block-scaled `mma.sync` datapaths \(GST-FDPA, (\d+) dense and "
            r"(\d+) sparse",
            V(count, lambda a, dp: a == "RTX Blackwell" and dp.accumulator == "group_scaled_window"),
            V(count, lambda a, dp: a == "RTX Blackwell" and dp.accumulator == "group_scaled_window" and not dp.sparse),
            V(count, lambda a, dp: a == "RTX Blackwell" and dp.accumulator == "group_scaled_window" and dp.sparse)),
    checked("performance.md", r"the ([\d,]+)-row batched `dot` rows .*? a ([\d,]+)-row `dot` is ([\d,]+)-([\d,]+) products",
            V(quick_rows), V(quick_rows), lambda m: quick_rows() * min(bench_ks()), lambda m: quick_rows() * max(bench_ks())),
    measured_section("performance.md", "Benchmark"),
    measured_section("performance.md", "torch interception"),
]

DATAPATHS = [
    checked("datapaths.md", r"up to ([\d,]+) raw random cases each, finite-only cases and edge vectors, (\d+) mismatches: "
            r"(\d+) of mmasim's datapaths rest on it",
            lambda m: max(dp.status.cases or 0 for dp in t1_datapaths()), V(t1_mismatches), lambda m: len(t1_datapaths())),
    checked("datapaths.md", r"([\d,]+) words measured on V100, A100, A2, an Ada GPU, L40S, H100, H200 and B200: (\d+) sets of "
            r"([\d,]+) random dot products", V(cases_in, KM_HARDWARE), V(files_in, KM_HARDWARE), V(one_size, KM_HARDWARE)),
    checked("datapaths.md", r"are a second peer: ([\d,]+) words on (\d+) datapaths", V(cases_in, OCTAVE), V(files_in, OCTAVE)),
    checked("datapaths.md", r"1 \+ (0\.75) ulp", lambda m: 3 * 2.0 ** -25 / 2.0 ** -23),   # 3 quanta of 2^-25, ulp(1) = 2^-23
    checked("datapaths.md", r"H100 and H200 with f16 D, ([\d,]+) each, (\d+) mismatches",
            V(one_size, "hardware/*/khattak-mikaitis.[bh][21]00.mma.sync.m16n8k32.*e[45]m[23].*.npz"),
            V(mismatches_in, "hardware/*/khattak-mikaitis.[bh][21]00.mma.sync.m16n8k32.*e[45]m[23].*.npz")),
    checked("datapaths.md", r"\((\d+) mismatches on all three `m8n8k4` variants; Turing's own F = 24 mismatched ([\d,]+) of "
            r"([\d,]+) results\)",
            V(evidence, "Turing", r"gives (\d+) mismatches on all three m8n8k4 variants"),
            V(evidence, "Turing", r"F = 24 mismatches ([\d,]+)"), V(evidence, "Turing", r"\(([\d,]+) results for")),
    checked("datapaths.md", r"\((\d+) mismatches on ([\d,]+) finite f32-output results\)",
            V(evidence, "Ampere", r"gives (\d+) mismatches on [\d,]+ finite"),
            V(evidence, "Ampere", r"mismatches on ([\d,]+) finite f32-output results")),
    checked("datapaths.md", r"wrapped or saturated: (\d+) datapaths, no window",
            V(count, lambda a, dp: a == "Blackwell" and dp.kind == "i8" and not dp.sparse and not dp.qualifiers)),
    checked("datapaths.md", r"\(([\d.]+) M results over all (\d+) e2m1 instructions, (\d+) mismatches, random padding included; "
            r"MMA-Sim's decode, which drops bits 1:0, mismatched (\d+)-(\d+) % of the results with random padding\)\. e3m2 and "
            r"e2m3 \(bits 5:0, bits 7:6 ignored\) use the same datapath: (\d+) mismatches on all (\d+) combinations",
            V(evidence, "RTX Blackwell", r"([\d.]+) M results with random padding"),
            V(evidence, "RTX Blackwell", r"0 mismatches on all (\d+) kind::f8f6f4 instructions with e2m1"),
            V(evidence, "RTX Blackwell", r"(\d+) mismatches on all \d+ kind::f8f6f4 instructions with e2m1"),
            V(evidence, "RTX Blackwell", r"mismatches (\d+)-\d+ % with random padding"),
            V(evidence, "RTX Blackwell", r"mismatches \d+-(\d+) % with random padding"),
            V(evidence, "RTX Blackwell", r"gives (\d+) mismatches on all \d+ instructions"),
            V(evidence, "RTX Blackwell", r"0 mismatches on all (\d+) instructions")),
    checked("datapaths.md", r"These (\d+) datapaths are labelled \*assumed\*",
            V(count, lambda a, dp: a == "RTX Blackwell" and _e2m1_rtx(dp))),
]

PEER_VECTORS = [
    checked("peer-vectors.md", r"Each file has N = (\d+) cases \(tcgen05 files have fewer after filtering\)",
            V(mma_sim_file_size)),
    checked("peer-vectors.md", r"1\. (\d+)%: uniform random container words\. (\d+)% of the elements are biased.*?In (\d+)% of "
            r"these rows.*?2\. (\d+)%: values near 1\..*?3\. (\d+)%: cancellation-heavy.*?4\. (\d+)%: zero-heavy",
            *(lambda m, i=i: mma_sim_mix()[i] for i in range(6))),
    checked("peer-vectors.md", r"`vectors/peer/<arch>/khattak-octave.<instruction>.npz`, (\d+) files, ([\d,]+) cases",
            V(files_in, OCTAVE), V(cases_in, OCTAVE)),
    checked("peer-vectors.md", r"`random` \((\d+) %\), `wide` \((\d+) %:.*?`cancel` \((\d+) %: C = -\(the products' sum\) "
            r"moved by up to (\d+) ulps.*?`underflow` \((\d+) %:.*?`special` \((\d+) %:",
            V(khattak_group, "random"), V(khattak_group, "wide"), V(khattak_group, "cancel"), V(khattak_cancel_ulps),
            V(khattak_group, "underflow"), V(khattak_group, "special")),
    checked("peer-vectors.md", r"it reproduces only (\d+) and (\d+) of the first (\d+) of their own B200 e4m3 and e5m2 f32 "
            r"words.*?On fresh cases it differs from mmasim on (\d+) and (\d+) of (\d+)\.",
            lambda m: km_set("b200", "mma.sync.m16n8k32.f32.e4m3.e4m3.f32")[1],
            lambda m: km_set("b200", "mma.sync.m16n8k32.f32.e5m2.e5m2.f32")[1], V(km_set_size),
            V(km_disagree, "B200", "mma.sync.m16n8k32.f32.e4m3.e4m3"),
            V(km_disagree, "B200", "mma.sync.m16n8k32.f32.e5m2.e5m2"),
            lambda m: max(nvec(p) for p in _vector_files(OCTAVE))),
    checked("peer-vectors.md", r"non-zero C \((\d+) cases\)", lambda m: _khattak_classes()[3]),
    checked("peer-vectors.md", r"negative value rounded to zero \((\d+) cases\)", V(negative_zeros)),
    checked("peer-vectors.md", r"where mmasim gives ±inf \(docs/datapaths.md §2\): (\d+) cases", lambda m: _khattak_classes()[0]),
    checked("peer-vectors.md", r"where mmasim gives -inf \((\d+) cases, bf16 and xf32\)", lambda m: _khattak_classes()[1]),
    checked("peer-vectors.md", r"all ([\d,]+) remaining cases, frozen\. Run on the first (\d+) words of each of their (\d+) "
            r"measured sets \(`--hardware-check (\d+)`\)",
            V(cases_in, OCTAVE), V(km_set_size),
            lambda m: files_in(KM_HARDWARE) if len(km_sets()) == files_in(KM_HARDWARE) else "every set in the report",
            V(km_set_size)),
    checked("peer-vectors.md", r"they miss the fp8 sets with an f16 D \((\d+) to (\d+) of (\d+)\)",
            lambda m: min(km_fp8_f16_sets()), lambda m: max(km_fp8_f16_sets()), V(km_set_size)),
]

MMA_SIM = [
    checked("mma-sim.md", r"T1, B200, ([\d,]+) random cases per datapath, (\d+) mismatches",
            lambda m: max(dp.status.cases or 0 for dp in t1_datapaths()), V(t1_mismatches)),
    checked("mma-sim.md", r"T2, RTX 5070 Ti, ([\d.]+) M results, (\d+) mismatches",
            V(evidence, "RTX Blackwell", r"([\d.]+) M results with random padding"),
            V(evidence, "RTX Blackwell", r"(\d+) mismatches on all \d+ kind::f8f6f4 instructions with e2m1")),
    checked("mma-sim.md", r"\((\d+) instructions across all six classes, ([\d,]+) D words;",
            lambda m: len(dropin_cases()) if len({c[0] for c in dropin_cases()}) == 6 else "six classes",
            lambda m: sum(c[3] * c[4] for c in dropin_cases())),
]

AMD = [
    checked("amd.md", r"(\d+) on CDNA1; (\d+) on CDNA2, which are the (\d+) CDNA2 instructions plus the (\d+) CDNA1 ones, run "
            r"with CDNA2's arithmetic; and (\d+) on CDNA3",
            lambda m: len(mma_sim_files_of("cdna1")), lambda m: len(mma_sim_files_of("cdna2")),
            lambda m: len(mma_sim_files_of("cdna2")) - len(mma_sim_files_of("cdna1")),
            lambda m: len(mma_sim_files_of("cdna1")), lambda m: len(mma_sim_files_of("cdna3"))),
    checked("amd.md", r"\((\d+) MMA-Sim files, (\d+) cases each\)",
            lambda m: sum(len(mma_sim_files_of(a)) for a in ("cdna1", "cdna2", "cdna3")),
            lambda m: one_size_of([p for a in ("cdna1", "cdna2", "cdna3") for p in mma_sim_files_of(a)])),
    checked("amd.md", r"fresh random cases across all (\d+) instructions",
            lambda m: sum(len(mma_sim_files_of(a)) for a in ("cdna1", "cdna2", "cdna3"))),
]

HARNESS = [
    checked("harness.md", r"every `v_smfmac` of CDNA3, (\d+) instructions in all",
            lambda m: sum(instructions_of(a) for a in ("CDNA1", "CDNA2", "CDNA3"))),
    checked("harness.md", r"All (\d+) CDNA1, (\d+) CDNA2 and (\d+) CDNA3 instructions",
            V(instructions_of, "CDNA1"), V(instructions_of, "CDNA2"), V(instructions_of, "CDNA3")),
    checked("harness.md", r"\(Blackwell: (\d+) kernels, (\d+) distinct; Blackwell Ultra: (\d+) kernels, (\d+) distinct\)",
            lambda m: harness_nvidia("Blackwell")[0], lambda m: harness_nvidia("Blackwell")[1],
            lambda m: harness_nvidia("Blackwell Ultra")[0], lambda m: harness_nvidia("Blackwell Ultra")[1]),
]

CHARACTERIZE = [
    checked("characterize.md", r"e2m1 has (\d+) cases, the A100's f16 `m16n8k16` (\d+) cases",
            V(probe_count, "B200", "tcgen05.mma.kind::f8f6f4", a_type="e2m1", b_type="e2m1", d_type="f32"),
            V(probe_count, "A100", "m16n8k16.f32.f16.f16.f32")),
    checked("characterize.md", r"step, formats and rounding, (\d+) parameter sets",
            lambda m: len(_tests_module("test_characterize")._distinct()[1])),
]

SMALL = [
    checked("plugins.md", r"`mmasim validate` gives (\d+) mismatches", V(mismatches_in, "*/*/*.npz")),
    checked("user-guide.md", r"more than (\d+) MiB of array data in all \(`mmasim.vectors.files.MAX_BYTES`\)",
            lambda m: vectors.MAX_BYTES / 2 ** 20),
    checked("user-guide.md", r"`mmasim.compare.max_cases\(model\)`, ([\d,]+) for K = 16\)",
            lambda m: constant("mmasim.compare", "max_cases")(constant("mmasim", "MMA")("A100", "m16n8k16.f32.f16.f16.f32"))),
    checked("user-guide.md", r"Batches of fewer than ([\d,]+) products per thread "
            r"\(`mmasim.execution.threads.MIN_ELEMENTS_PER_THREAD`\)",
            V(constant, "mmasim.execution.threads", "MIN_ELEMENTS_PER_THREAD")),
    checked("vectors.md", r"a `.npy` header longer than (\d+) KiB.*?more than (\d+) MiB in all \(`mmasim.vectors.files.MAX_BYTES`",
            lambda m: vectors.MAX_HEADER / 2 ** 10, lambda m: vectors.MAX_BYTES / 2 ** 20),
    checked("torch.md", r"bundled digits \(([\d,]+) training and (\d+) test images\) for (\d+) epochs with SGD \(learning "
            r"rate ([\d.]+), momentum ([\d.]+), batches of (\d+)\)", *(lambda m, i=i: digits_split()[i] for i in range(6))),
    checked("torch.md", r"tests/test_torch_example.py runs the FP32 baseline in full \(.*? above (\d+) % at the end\)",
            lambda m: 100 * float(re.search(r"assert accs\[-1\] > ([\d.]+)",
                                            (ROOT / "tests" / "test_torch_example.py").read_text(encoding="utf-8")).group(1))),
    checked("accuracy.md", r"\(`mmasim.accuracy.MEMORY_FRACTION`, read with `os.sysconf`; (\d+) GiB where it cannot be read\)",
            lambda m: constant("mmasim.accuracy", "FALLBACK_MEMORY_LIMIT") / 2 ** 30),
    checked("accuracy.md", r"naming both numbers \(here on a machine with ([\d.]+) GiB\)", V(accuracy_machine_gib)),
    checked("accuracy.md", r"from ([\d.]+) % at K = 256 to ([\d.]+) % at K = 4096 and (\d+) % at K = 16384",
            *(lambda m, k=k: accuracy_median_percent("Hopper wgmma.mma_async.k32.f32.e4m3.e4m3, no promotion", k)
              for k in (256, 4096, 16384))),
    checked("accuracy.md", r"The error no longer grows with K: ([\d.]+) % \(11 bits\) at every K",
            lambda m: max(accuracy_median_percent("Hopper wgmma.mma_async.k32.f32.e4m3.e4m3, promote every 128", k)
                          for k in (256, 1024, 4096, 16384))),
]


def mma_sim_files_of(folder):
    return [p for p in _vector_files(f"peer/{folder}/*.npz") if not p.name.startswith("khattak-octave.")]


def one_size_of(paths) -> int | str:
    sizes = {nvec(p) for p in paths}
    return sizes.pop() if len(sizes) == 1 else f"files of {sorted(sizes)} cases"


# ------------------------------------------------------------------ docs/harness.md: the H200 run
def h200():
    return script("tools/hardware/h200_run.py")


def h200_sh(pattern: str) -> int:
    """A number of tools/hardware/h200_run.sh: the first group of ``pattern`` in its text."""
    return int(re.search(pattern, (ROOT / "tools" / "hardware" / "h200_run.sh").read_text(encoding="utf-8")).group(1))


def session_sh(pattern: str) -> int:
    """A number of tools/hardware/device_session.sh: the first group of ``pattern`` in its text."""
    return int(re.search(pattern, (ROOT / "tools" / "hardware" / "device_session.sh").read_text(encoding="utf-8")).group(1))


def h200_comment(pattern: str) -> int:
    """A limit of the lent machine as tools/hardware/h200_run.py records it (its comments)."""
    return int(re.search(pattern, (ROOT / "tools" / "hardware" / "h200_run.py").read_text(encoding="utf-8")).group(1))


@functools.lru_cache(maxsize=None)
def h200_plan() -> tuple:
    return tuple(h200().plan())


def h200_group(api: str, entries: int) -> list:
    """The plan's instructions of one row of the cases table: by API and the entries of their first tile."""
    return [e for e in h200_plan() if e["instruction"].split(".")[0] == api
            and min(M * N for _, M, N in e["kernels"]) == entries]


def h200_row(api: str, entries: int, wide: bool = False) -> tuple:
    """(instructions, kernels each, entries per tile (the smallest and, ``wide``, the largest),
    random tiles, random cases kept) of one row, each the same over it."""
    rows = h200_group(api, entries)
    values = {(len(e["kernels"]), *sorted({M * N for _, M, N in e["kernels"]}),
               e["tiles"], e["random_cases_kept"]) for e in rows}
    if len(values) != 1:
        return (len(rows),) + ("several",) * 5
    kernels, *sizes, tiles, kept = values.pop()
    return (len(rows), kernels, *(sizes if wide else sizes[:1]), tiles, kept)


@functools.lru_cache(maxsize=None)
def hopper_probes() -> tuple:
    """(floating-point instructions, the most probes one runs, integer instructions) of Hopper."""
    import mmasim

    fp = [m for m in (mmasim.MMA("Hopper", ins) for ins in mmasim.instructions("Hopper"))
          if m.datapath.accumulator != "integer"]
    n_int = len(mmasim.instructions("Hopper")) - len(fp)
    return len(fp), max(probe_count("Hopper", m.instruction) for m in fp), n_int


H200 = [
    checked("harness.md", r"`--budget` \(default (\d+) s from the start\) is when packing must be done; no kernel build "
            r"starts later than (\d+) s before it, no instruction later than (\d+) s before it, and (\d+) s before it "
            r"whatever still runs is stopped",
            V(h200_sh, r"\nBUDGET=(\d+)"), lambda m: h200().PACK_RESERVE + 30, lambda m: h200().PACK_RESERVE,
            V(h200_sh, r"LEFT=\$\(\(DEADLINE - (\d+) -")),
    checked("harness.md", r"`mmasim harness generate Hopper`: (\d+) kernels of (\d+) instructions",
            lambda m: sum(len(e["kernels"]) for e in h200_plan()), lambda m: len(h200_plan())),
    checked("harness.md", r"a program still running after (\d+) s \(`MMASIM_HARNESS_TIMEOUT`\)", V(h200_sh, r"\bLIMIT=(\d+)")),
    checked("harness.md", r"at least ([\d,]+) random cases per instruction \(`--min-cases`\)", lambda m: h200().MIN_CASES),
    checked("harness.md", r"\| (\d+) `mma.sync` m16n8 \| (\d+) \| (\d+) \| (\d+) \| ([\d,]+) \|",
            *(lambda m, i=i: h200_row("mma", 128)[i] for i in range(5))),
    checked("harness.md", r"\| (\d+) `mma.sync` m8n8 \| (\d+) \| (\d+) \| (\d+) \| ([\d,]+) \|",
            *(lambda m, i=i: h200_row("mma", 64)[i] for i in range(5))),
    checked("harness.md", r"\| (\d+) `wgmma` \(dense and `.sp`\) \| (\d+): N = 8 and 256, [^|]* \| (\d+) and ([\d,]+) \| (\d+) \| "
            r"([\d,]+) \|", *(lambda m, i=i: h200_row("wgmma", 512, wide=True)[i] for i in range(6))),
    checked("harness.md", r"A tile of more than ([\d,]+) entries \(`--tile-cap`; wgmma's N = 256 tiles\) keeps a seeded "
            r"sample of ([\d,]+) of them", lambda m: h200().TILE_CAP, lambda m: h200().TILE_CAP),
    checked("harness.md", r"The (\d+) floating-point instructions also run their probe ladders \(up to ([\d,]+) probes\).*?"
            r"the (\d+) integer ones run without probes", *(lambda m, i=i: hopper_probes()[i] for i in range(3))),
    checked("harness.md", r"the lent machine returns at most (\d+) files of at most (\d+) MiB\): .*?\(at most six parts of "
            r"at most (\d+) MiB",
            V(h200_comment, r"the device returns at most (\d+) files"),
            V(h200_comment, r"the device returns files of at most (\d+) MiB"),
            lambda m: h200().PART_BYTES / 2 ** 20),
    checked("harness.md", r"runs this command with (\d+)%\s+of its `--budget` \(default (\d+) s\), then `benchmarks/gpu.py` "
            r"against the same install with what is\s+left less (\d+) s, and packs what comes back into at most (\d+) files",
            V(session_sh, r"H200_BUDGET=\$\(\(BUDGET \* (\d+) / 100\)\)"), V(session_sh, r"\nBUDGET=(\d+)"),
            V(session_sh, r"START\) - (\d+)\)\)"), V(h200_comment, r"the device returns at most (\d+) files")),
]


README = [
    checked("README.md", r"with (0) mismatches over the source's cases", _lazy(mismatches_in, "hardware/*/*.npz")),
    checked("README.md", r"Khattak and Mikaitis's ([\d,]+) words from V100", _lazy(cases_in, KM_HARDWARE)),
    checked("README.md", r"Its tables list ([\d,]+) datapaths\. (\d+) of them are refused: .{0,120}They are the (\d+) "
            r"Blackwell Ultra \(B300\) `tcgen05.mma` `kind::i8` forms",
            lambda m: datapath_counts()[0] + len(refused()), lambda m: len(refused()), _lazy(refused_b300_i8)),
    checked("README.md", r"Of the other ([\d,]+) datapaths, (\d+) are `hardware`, (\d+) `peer` and ([\d,]+) `assumed`",
            *(lambda m, i=i: datapath_counts()[i] for i in range(4))),
    checked("README.md", r"\((\d+) of the assumed ones are Blackwell Ultra \(B300\).*?; (\d+) are the B200's "
            r"`tcgen05.mma` cta_group::2 and `.ws` forms.*?; (\d+) are dense integer MMAs.*?; (\d+) are sparse "
            r"`mma.sp`.*?; (\d+) are other dense forms",
            *(lambda m, g=g: assumed_groups()[g] for g in ("b300", "cta2_ws", "integer", "sparse", "other"))),
    checked("README.md", r"hold ([\d,]+) cases in (\d+) files: ([\d,]+) measured on hardware, ([\d,]+) derived by "
            r"hand from measured rules and ([\d,]+) computed by the two peers \(([\d,]+) by MMA-Sim 2.1.1, ([\d,]+) by "
            r"Khattak and Mikaitis's models", *(lambda m, i=i: vector_counts()[i] for i in range(7))),
]

RULES: list[Rule] = [
    generated("reference.md", _gen_reference),
    *README,
    *KHATTAK_REPORT,
    *PERFORMANCE, *DATAPATHS, *PEER_VECTORS, *MMA_SIM, *AMD, *HARNESS, *H200, *CHARACTERIZE, *SMALL,
]


# ================================================================== the tests
@pytest.mark.parametrize("name", [p.name for p in _doc_paths()])
def test_every_figure_is_generated_checked_or_measured(name):
    errors = account(load(name), RULES)
    assert not errors, f"{len(errors)} figure(s) of {name} not accounted for or not true:\n" + "\n".join(errors)


def test_every_rule_names_a_doc_that_exists():
    names = {p.name for p in _doc_paths()}
    assert {r.doc for r in RULES} <= names



def test_the_refused_datapaths_are_the_ones_the_readme_names_and_mmq_refuses_each():
    """README: 48 B300 tcgen05.mma kind::i8 forms (PTX defines none for sm_103a) and Ampere's m8n8k4
    with an f16 D; MMA() raises UnsupportedDatapath for each, naming the datapath and why."""
    import mmasim
    from mmasim.errors import UnsupportedDatapath

    reg = get_registry()
    rest = [(a, dp) for a, dp in refused() if not (a == "Blackwell Ultra" and dp.kind == "i8")]
    assert [(a, dp.canonical(reg.formats)) for a, dp in rest] == [("Ampere", "mma.sync.m8n8k4.f16.f16.f16")]
    assert refused_b300_i8() == 48
    for arch, dp in refused():
        name = dp.canonical(reg.formats)
        with pytest.raises(UnsupportedDatapath, match=re.escape(dp.refuse)):
            mmasim.MMA(arch, name)


# ------------------------------------------------------------------ the extractor
def _figs(text: str) -> list[tuple[str, str]]:
    return [(f.text, f.unit) for f in figures(Doc.parse("x.md", text))]


def test_counts_units_and_big_numbers_are_figures():
    assert _figs("It holds 2,276 of them, 482 files and 7.5 ms; 1.92x faster, 25 %, 256 MiB.") == [
        ("2,276", ""), ("482", "files"), ("7.5", "ms"), ("1.92", "x"), ("25", "%"), ("256", "MiB")]
    assert _figs("0.98-1.92x and 50.8-52.2 ns") == [("0.98", "x"), ("1.92", "x"), ("50.8", "ns"), ("52.2", "ns")]
    assert _figs("12 instructions per product; 46 CDNA3 instructions; 14.2 M results") == [
        ("12", "instructions per product"), ("46", "instructions"), ("14.2", "results")]
    assert _figs("Of the other **2,227** datapaths, **127** are `hardware`; 306 are forms") == [
        ("2,227", "datapaths"), ("306", "(count)")]


def test_shapes_hex_formats_exponents_sections_versions_and_code_are_not_figures():
    assert _figs("a 128 x 128 block, 16 x 8 tiles, 1 x 1 + 1 = 2.0, 0 x inf, 8 x the swizzle bytes") == []
    assert _figs("0x3F800000, e4m3, ue8m0, 2^-30, 2^22, §3, section 9.7.16, PTX ISA 9.0, MMA-Sim 2.1.1") == []
    assert _figs("sm_103a, m16n8k16, K = 96 forms, block 0 sets the floor, lanes 0..63") == []
    assert _figs("`--cases 1000 files` and\n\n```text\n12 files 3 s\n```\n") == []


def test_a_table_column_named_for_a_unit_makes_its_cells_figures():
    table = "| arch | cases | agree |\n|---|---|---|\n| V100 | 512 | 504 |\n"
    assert _figs(table) == [("512", "cases")]


# ------------------------------------------------------------------ the test can fail
def _mutated(doc: Doc, fig: Figure) -> str:
    """``doc``'s raw text with ``fig`` changed: a 7 appended to the number as written."""
    lines = doc.raw.split("\n")
    norm = doc.text.split("\n")[fig.line - 1]
    col = fig.start - (doc.text.rfind("\n", 0, fig.start) + 1)
    k = len(re.findall(re.escape(fig.text), norm[:col]))
    raw = lines[fig.line - 1]
    at = [m.start() for m in re.finditer(re.escape(fig.text), raw)][k]
    lines[fig.line - 1] = raw[:at + len(fig.text)] + "7" + raw[at + len(fig.text):]
    return "\n".join(lines)


@pytest.mark.parametrize("name", [p.name for p in _doc_paths()])
def test_changing_any_figure_of_a_doc_fails(name):
    """Every figure is checked: a doc copy with any one of its figures changed is refused."""
    doc = load(name)
    figs = figures(doc)
    if name == "reference.md":
        figs = figs[::max(1, len(figs) // 8)]        # regenerated each time: a sample
    survivors = []
    for fig in figs:
        if not account(Doc.parse(name, _mutated(doc, fig)), RULES):
            survivors.append(str(fig))
    assert not survivors, "changed, and still accepted:\n" + "\n".join(survivors)


def test_a_stale_readme_count_is_named_with_the_value_the_project_gives():
    doc = load("README.md")
    doctored = Doc.parse("README.md", doc.raw.replace("**2,276** datapaths", "**2,277** datapaths"))
    errors = account(doctored, RULES)
    assert len(errors) == 1 and re.search(r"README.md:\d+: 2,277: the project gives 2276 ", errors[0]), errors


def test_a_figure_no_rule_accounts_for_is_named_with_its_sentence():
    doc = load("vectors.md")
    doctored = Doc.parse("vectors.md", doc.raw + "\nThe folder holds 17 files.\n")
    (error,) = account(doctored, RULES)
    assert "vectors.md" in error and "17 files" in error and "The folder holds 17 files." in error
    assert "no rule accounts for this figure" in error


def test_a_measured_figure_must_be_in_the_quoted_output():
    doc = load("performance.md")
    assert "5.75 s `auto`" in doc.raw
    doctored = Doc.parse("performance.md", doc.raw.replace("5.75 s `auto`", "5.25 s `auto`"))
    (error,) = account(doctored, RULES)
    assert "5.25 s" in error and "not in the verbatim output its section quotes" in error
    # the same figure with no quoted output in its section is not measured
    no_block = doc.raw.replace("```text\nstart-up", "```\nstart-up")
    assert any("5.75 s" in e for e in account(Doc.parse("performance.md", no_block), RULES))


def test_a_rule_whose_sentence_is_gone_fails():
    doc = load("harness.md")
    doctored = Doc.parse("harness.md", doc.raw.replace("instructions in all", "instructions altogether"))
    errors = account(doctored, RULES)
    assert any("finds nothing" in e for e in errors) and any("no rule accounts" in e for e in errors)


def test_a_figure_two_rules_account_for_fails():
    doc = Doc.parse("x.md", "It holds 12 files.\n")
    rules = [checked("x.md", r"holds (\d+) files", 12), checked("x.md", r"(\d+) files\.", 12)]
    assert account(doc, rules[:1]) == []
    (error,) = account(doc, rules)
    assert "accounted for by 2 rules" in error
