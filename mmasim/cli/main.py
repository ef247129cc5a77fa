"""The ``mmasim`` command line.

Exit status: 0 success; 1 a failure (an :class:`mmasim.MMAError`, an
``OSError``, a vector file that does not validate, a plugin that failed to
load, output that could not be written: :mod:`mmasim.cli.output`); 2 a usage
error (argparse; an unknown option is named by its command).  Every message is one line on stderr,
``mmasim: error: ...``; text that came from outside (vector files, tables,
plugins, paths, arguments) is printed with control characters escaped
(:func:`mmasim.operands.display.safe`).  ``--json`` prints one JSON document on stdout
(schemas ``mmasim.<command>/1``, docs/user-guide.md "JSON output").
"""

from __future__ import annotations

import argparse
import sys

from mmasim.cli import output
from mmasim.cli.arguments import Failure, UsageError
from mmasim.cli.commands import cmd_accuracy, cmd_compare
from mmasim.cli.output import dump
from mmasim.cli.parser import build_parser
from mmasim.errors import MMAError
from mmasim.operands.display import one_line


def _json_wanted(args, argv) -> bool:
    if args is not None:
        return bool(getattr(args, "json", False))
    return "--json" in (argv[:argv.index("--")] if "--" in argv else argv)


def _command_of(argv) -> str | None:
    """The command words at the start of ``argv`` (``"harness run"``), or None."""
    words, choices = [], _subcommands(build_parser())
    for token in argv:
        if token not in choices:
            break
        words.append(token)
        choices = _subcommands(choices[token])
    return " ".join(words) or None


def _subcommands(parser) -> dict:
    return {name: sub for a in parser._actions if isinstance(a, argparse._SubParsersAction)
            for name, sub in a.choices.items()}


def _error(args, argv, status: int, kind: str, message, prog: str = "mmasim") -> int:
    """Report an error: one line on stderr, ``PROG: error: MESSAGE``; under ``--json`` also
    the ``mmasim.error/1`` document on stdout.  Returns the exit status."""
    message = one_line(message)
    hint = f" (see {prog} --help)" if status == 2 else ""
    print(f"{prog}: error: {message}{hint}", file=sys.stderr)
    if _json_wanted(args, argv):
        if args is not None:
            command = " ".join(x for x in (args.command, getattr(args, "harness_command", None)) if x)
        else:
            command = prog.partition(" ")[2] or _command_of(argv)
        try:
            dump({"schema": "mmasim.error/1", "command": command, "error": kind, "message": message,
                   "exit_status": status})
        except output.OutputLost as exc:     # the error is said on stderr; the output is gone too
            output.lost(exc, say=False)
    return status


def main(argv=None) -> int:
    """Run the command line ``argv`` (default ``sys.argv[1:]``); the exit status.  Everything
    it prints goes through :func:`mmasim.cli.output.guard`: a closed pipe or a failed write
    ends it with status 1 (docs/user-guide.md, "Command line")."""
    try:
        with output.guard():
            return _main(sys.argv[1:] if argv is None else [str(a) for a in argv])
    except output.OutputLost as exc:
        return output.lost(exc)


def _main(argv: list) -> int:
    parser = build_parser()
    args = None
    try:
        args, extra = parser.parse_known_args(argv)
        if extra:       # named by the command they were given to (argparse names the top level)
            raise UsageError(_subparser(parser, args).prog, f"unrecognized arguments: {' '.join(extra)}")
        if args.func in (cmd_compare, cmd_accuracy):
            return args.func(args, _subparser(parser, args))
        return args.func(args)
    except output.OutputLost:
        raise
    except UsageError as exc:
        return _error(args, argv, 2, "usage", exc, exc.prog)
    except SystemExit as exc:           # --help and --version (0)
        return exc.code if isinstance(exc.code, int) else 2
    except argparse.ArgumentTypeError as exc:   # a value checked after parsing (a word of run)
        return _error(args, argv, 2, "usage", exc, f"mmasim {args.command}")
    except MMAError as exc:
        return _error(args, argv, 1, type(exc).__name__, exc)
    except Failure as exc:
        return _error(args, argv, 1, "failure", exc)
    except OSError as exc:
        where = f"{exc.filename}: " if getattr(exc, "filename", None) else ""
        return _error(args, argv, 1, type(exc).__name__, f"{where}{exc.strerror or exc}")
    except KeyboardInterrupt:  # pragma: no cover
        print("mmasim: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: still one line, and say so
        return _error(args, argv, 1, "internal", f"internal error: {type(exc).__name__}: {exc} (please report this)")


def _subparser(parser, args) -> argparse.ArgumentParser:
    """The parser of the command ``args`` holds (``mmasim harness run``'s for harness run)."""
    for word in (args.command, getattr(args, "harness_command", None)):
        if word is None:
            break
        parser = _subcommands(parser)[word]
    return parser


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
