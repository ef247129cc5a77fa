"""Users do not have the project's internal arithmetic spec: nothing shipped or documented
may cite it. The public account of the arithmetic is docs/datapaths.md (same section
numbers), with the hardware write-ups, MMA-Sim's paper and the ISA documents as sources."""

import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHIPPED = ("mmasim", "plugins", "archs", "docs", "README.md")
TEXT_SUFFIXES = {".py", ".toml", ".md", ".txt", ".json", ".cfg", ".ini", ".rst", ""}


def _files():
    for name in SHIPPED:
        path = ROOT / name
        if path.is_file():
            yield path
        elif path.is_dir():
            for p in sorted(path.rglob("*")):
                if p.is_file() and p.suffix in TEXT_SUFFIXES and "__pycache__" not in p.parts:
                    yield p


def test_no_shipped_file_cites_the_internal_reference():
    offenders = {}
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        n = text.count("REFERENCE.md")
        if n:
            offenders[str(path.relative_to(ROOT))] = n
    assert not offenders, (
        f"{sum(offenders.values())} citations of REFERENCE.md (cite docs/datapaths.md §N or the public "
        f"source instead): {offenders}")
