"""Numbers written as text (the command line, environment variables): one reader each.

* a container word is hex digits with an optional ``0x`` / ``0X`` prefix (``3c00``,
  ``0x3C00``), nothing else: no sign, no ``0b`` / ``0o``, no underscores, no spaces,
  no digits outside ASCII (:func:`parse_word`);
* a count is ASCII decimal digits (:func:`parse_count`).

Python's own ``int(text, 0)`` and ``int(text)`` read more than that (``0b11`` as 3,
``1_0`` as 10, full-width and Arabic-Indic digits); these never do.
"""

from __future__ import annotations

import re

from mmasim.errors import WordSyntaxError

_HEX_WORD = re.compile(r"(?:0[xX])?[0-9A-Fa-f]+", re.ASCII)
_DECIMAL = re.compile(r"[0-9]+", re.ASCII)
_WORD_SEPARATORS = re.compile(r"[ \t\n\r,]+", re.ASCII)


def parse_word(text: str, what: str = "word") -> int:
    """A container word written as text; :class:`~mmasim.WordSyntaxError` for anything else."""
    if not isinstance(text, str) or not _HEX_WORD.fullmatch(text):
        raise WordSyntaxError(f"{what}: {text!r} is not a hex word (hex digits 0-9 a-f, optionally after 0x; "
                              "e.g. 3c00 or 0x3C00)")
    return int(text, 16)


def parse_words(text: str, what: str = "words") -> list:
    """Hex words (:func:`parse_word`) separated by spaces, tabs, line breaks or commas."""
    if not isinstance(text, str):
        raise WordSyntaxError(f"{what}: {text!r} is not text")
    return [parse_word(t, what) for t in _WORD_SEPARATORS.split(text) if t]


def parse_count(text: str) -> int | None:
    """A non-negative count written as ASCII decimal digits; ``None`` for anything else."""
    return int(text) if isinstance(text, str) and _DECIMAL.fullmatch(text) else None
