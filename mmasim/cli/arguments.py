"""The ``mmasim`` command's argument types and the exceptions its handlers raise: a usage error
(exit status 2, :class:`UsageError`), a failure (exit status 1, :class:`Failure`), the parser that
routes argparse's errors to :func:`mmasim.cli.main.main` (:class:`Parser`), hex words, counts,
paths and plot files read from the command line, the keyword qualifiers of an instruction.
"""

from __future__ import annotations

import argparse
import os
import pathlib

from mmasim import DISTRIBUTION
from mmasim.errors import WordSyntaxError
from mmasim.operands.display import one_line
from mmasim.operands.text import parse_count, parse_words

ARCH_HELP = "an architecture: a family, a product or sm_XX, as mmasim list prints them"


class UsageError(Exception):
    """A usage error of the command ``prog`` (exit status 2)."""

    def __init__(self, prog: str, message):
        super().__init__(one_line(message))
        self.prog = prog


class Failure(Exception):
    """A failure a command reports (exit status 1), such as an optional dependency it lacks."""


class Parser(argparse.ArgumentParser):
    """argparse whose usage errors reach :func:`main`, which prints them as one line,
    ``mmasim compare: error: ...`` (and under ``--json`` as a JSON document too)."""

    def error(self, message):
        raise UsageError(self.prog, message)


def version() -> str:
    try:
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version(DISTRIBUTION)
        except PackageNotFoundError:
            pass
    except ImportError:  # pragma: no cover
        pass
    from mmasim import __version__

    return __version__



# ------------------------------------------------------------ argument types
def words_arg(text: str, what: str) -> list:
    """Hex words separated by spaces or commas (:func:`mmasim.operands.text.parse_words`); a bad one is a
    usage error."""
    try:
        return parse_words(text, what)
    except WordSyntaxError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def word_arg(text: str, what: str) -> int:
    words = words_arg(text, what)
    if len(words) != 1:
        raise argparse.ArgumentTypeError(f"{what}: one hex word, not {text!r}")
    return words[0]


#: the longest count option value read (2**64 has 20 digits)
MAX_COUNT_CHARS = 40


def count_arg(minimum: int, what: str):
    def parse(text: str) -> int:
        if len(text) > MAX_COUNT_CHARS:       # no count is that long (and int() refuses 4,300+ digits)
            raise argparse.ArgumentTypeError(f"must be an integer of at most {MAX_COUNT_CHARS} decimal digits, "
                                             f"not a value of {len(text):,} characters ({text[:12]}...)")
        value = parse_count(text)
        if value is None:
            if text.startswith("-") and parse_count(text[1:]) is not None:
                raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {text}")
            raise argparse.ArgumentTypeError(f"must be an integer (decimal digits), not {text!r}")
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    parse.__name__ = what
    return parse


def plot_path_arg(text: str) -> pathlib.Path:
    from mmasim.compare import PLOT_TYPES

    path = pathlib.Path(text)
    ext = path.suffix.lower().lstrip(".")
    if ext not in PLOT_TYPES:
        raise argparse.ArgumentTypeError(
            f"cannot tell the image type of {text!r}: the file name must end in one of "
            + ", ".join("." + t for t in PLOT_TYPES))
    folder = path.parent if str(path.parent) else pathlib.Path(".")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: no folder {str(folder)!r}")
    if path.is_dir() or text.endswith(("/", os.sep)):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: it is a folder; name an image file in it")
    if not os.access(path if path.exists() else folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: permission denied")
    return path


def path_arg(kind: str):
    """A path option (``kind``: ``"folder"`` for ``--out``, ``"file"``): any path but the empty
    one, which pathlib would silently read as the working folder."""
    def parse(text: str) -> pathlib.Path:
        if not text:
            raise argparse.ArgumentTypeError(f"the empty path; name the {kind}"
                                             + (" ('.' for the working folder)" if kind == "folder" else ""))
        return pathlib.Path(text)

    parse.__name__ = kind
    return parse


def qualifiers_of(args) -> dict:
    q = {}
    for key in ("a_type", "b_type", "c_type", "d_type", "scale_type"):
        if getattr(args, key, None):
            q[key] = getattr(args, key)
    if getattr(args, "saturate", False):
        q["saturate"] = True
    return q
