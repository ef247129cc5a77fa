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
  in quotes, "Figures"), to the rounding the doc shows, or be the ratio of two numbers there.

A figure no rule accounts for fails, naming the doc, the figure and its sentence; so does a rule
that accounts for nothing (the doc changed under it).
"""

from __future__ import annotations

import collections
import functools
import itertools
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
         r"combinations|images|epochs|rows|sets")
_SKIP_WORDS = r"(?:and|or|of|the|to|are|is|in|on|for|with|by|a|an|at|per|than|as|from)\b"
# a figure: NUM, or a range NUM-NUM, then a unit, or a counting noun after at most one other word
_FIG = re.compile(
    r"(?<![\w.^/\-§+*:,#])(?P<a>" + NUM + r")(?:\s?[-–]\s?(?P<b>" + NUM + r"))?"
    r"(?:\s?(?P<unit>" + UNITS + r")(?![\w/])"
    r"|\s+(?:(?!" + _SKIP_WORDS + r")[A-Za-z][\w-]*\s+)?(?P<noun>" + NOUNS + r")\b)?")
# "N of the M ...", "; N are ...": counts that a noun follows later in the clause
_COUNT_OF = re.compile(r"(?<![\w.^/\-§+*:,#])(?P<a>\d[\d,]*)(?= of (?:the|its|these|them|those|all)\b| are\b)")
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
        doc.code = [m.span() for m in re.finditer(r"`[^`\n]*`", text)]
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
            if _is_shape(t, m.end("unit")) or re.search(r"[x×]\s*$", before) or re.match(r"\s+[a-z]", after):
                continue               # a shape, or a product ('0 x inf', '8 x the swizzle bytes')
        big = "," in m.group("a") or (m.group("b") or "").count(",") > 0
        if not (unit or big):
            continue
        add(m.start("a"), m.end("a"), unit)
        if m.group("b"):
            add(m.start("b"), m.end("b"), unit)
    for m in _COUNT_OF.finditer(t):
        if m.start() not in out and not doc.in_code(m.start()):
            add(m.start("a"), m.end("a"), "(count)")
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
def bundled_mismatches(source: str | None = None) -> int:
    """Mismatches of mmasim over the bundled vector files of ``source`` (every file: None)."""
    n = 0
    for path in vectors.find():
        vf = vectors.load(path)
        if source is None or vf.source == source:
            n += vectors.run(vf).mismatches.size
    return n


def _vector_files(pattern: str):
    return sorted((ROOT / "vectors").glob(pattern))


@functools.lru_cache(maxsize=None)
def cases_in(pattern: str) -> int:
    """Cases in the bundled vector files matching ``pattern`` (under vectors/)."""
    return sum(len(vectors.load(p)) for p in _vector_files(pattern))


def files_in(pattern: str) -> int:
    return len(_vector_files(pattern))


def refused_b300_i8() -> int:
    return sum(1 for a, dp in refused() if a == "Blackwell Ultra" and dp.kind == "i8")


def _lazy(f, *args):
    return lambda m: f(*args)


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


def verbatim_numbers(doc: Doc, pos: int) -> list[float]:
    """The numbers of the ``text`` blocks in the section holding ``pos`` and in the sections its
    paragraph names in quotes ("Figures")."""
    spans = [doc.section(pos)]
    s, e = doc.paragraph(pos)
    for title in re.findall(r'"([^"\n]+)"', doc.text[s:e]):
        span = doc.heading_span(title)
        if span:
            spans.append(span)
    return [float(x) for b in doc.blocks if b.lang == "text" and any(a <= b.start < z for a, z in spans)
            for x in _VERBATIM_NUM.findall(b.body)]


def in_verbatim(fig: Figure, numbers: list[float]) -> bool:
    """The figure is a number of the run's output to the rounding it shows, or (a ratio: x) the
    ratio of two of them."""
    if any(_agrees(fig.text, n) for n in numbers):
        return True
    if fig.unit in ("x", "×"):
        return any(q and _agrees(fig.text, p / q) for p, q in itertools.permutations(set(numbers), 2))
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
                    fig = f or Figure(doc.name, s, e, m.group(group), "", doc.line(s), doc.sentence(s))
                    if not in_verbatim(fig, verbatim_numbers(doc, s)):
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
                if not in_verbatim(f, verbatim_numbers(doc, f.start)):
                    errors.append(f"{f}: measured, but not in the verbatim output its section quotes "
                                  "(nor a ratio of two of its numbers)")
                continue
            errors.append(f"{f}: no rule accounts for this figure (generated, checked or measured)")
        elif len(rules_here) > 1:
            errors.append(f"{f}: accounted for by {len(rules_here)} rules: {rules_here}")
    return errors


# ================================================================== the rules
def _gen_reference(doc: Doc):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import gen_reference
    finally:
        sys.path.pop(0)
    assert doc.raw == gen_reference.generate(), "docs/reference.md is stale: run python tools/gen_reference.py"


KM_HARDWARE = "hardware/*/khattak-mikaitis.*.npz"
OCTAVE = "peer/*/khattak-octave.*.npz"


# ------------------------------------------------------------------ docs/khattak-octave-report.md
@functools.lru_cache(maxsize=None)
def _khattak_tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("khattak_octave", ROOT / "tools" / "peer" / "khattak_octave.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


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
    return len(vectors.load(path)) if path.exists() else 0


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
    return int(m.group(2)) if path and len(vectors.load(path)) >= int(m.group(2)) else f"{m.group(1)} bundled"


KM_REPORT = "khattak-octave-report.md"
KHATTAK_REPORT = [
    Rule(KM_REPORT, r"^Generated by `tools/peer/khattak_octave.py` \(seed \d+, (\d+) cases per datapath",
         lambda m: {1: max(len(vectors.load(p)) for p in _vector_files(OCTAVE))}, "generated", re.M),
    Rule(KM_REPORT, r"^- ([\d,]+) cases on (\d+) datapaths; ([\d,]+) frozen in (\d+) files\.\n"
         r"- the model's value is not a D-format value \(an overflowing sum returned as a finite double\): ([\d,]+)\n"
         r"- a different D word, on a frozen datapath: ([\d,]+)\n- on the datapaths compared but not frozen: ([\d,]+)\n"
         r"- the model raised an error: ([\d,]+)",
         lambda m: dict(zip(range(1, 9), (
             sum(r["cases"] for r in _khattak_report()["rows"].values()), len(_khattak_tool().JOBS),
             cases_in(OCTAVE), files_in(OCTAVE), *_khattak_classes()))), "generated", re.M),
    Rule(KM_REPORT, _KM_ROW,
         lambda m: {3: max(len(vectors.load(p)) for p in _vector_files(OCTAVE)),
                    4: int(m.group(3)) - int(m.group(5)) - _khattak_report()["rows"][(m.group(1).strip(), m.group(2))]["errors"],
                    7: _khattak_frozen(m.group(1).strip(), m.group(2))}, "generated", re.M),
    Rule(KM_REPORT, r"^## (.+?) `([^`]+)`: (\d+) disagreements \(([^)]*)\)$",
         lambda m: {3: _khattak_section(m)}, "generated", re.M),
    Rule(KM_REPORT, r"^\| (khattak-mikaitis\.[^|\n]+\.npz) \| `[^`]+` \| (\d+) \|",
         lambda m: {2: _khattak_set_cases(m)}, "generated", re.M),
]


README = [
    checked("README.md", r"with (0) mismatches over the source's cases", _lazy(bundled_mismatches, "hardware")),
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
]


# ================================================================== the tests
@pytest.mark.parametrize("name", [p.name for p in _doc_paths()])
def test_every_figure_is_generated_checked_or_measured(name):
    errors = account(load(name), RULES)
    assert not errors, f"{len(errors)} figure(s) of {name} not accounted for or not true:\n" + "\n".join(errors)


def test_every_rule_names_a_doc_that_exists():
    names = {p.name for p in _doc_paths()}
    assert {r.doc for r in RULES} <= names

