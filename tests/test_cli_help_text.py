"""Every argument of every ``mmasim`` command says what it takes (``--help``)."""

import argparse

from mmasim.cli.main import build_parser, main


def _parsers(parser, prog="mmasim"):
    yield prog, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{prog} {name}")


def test_every_argument_has_help_text():
    missing = [f"{prog} {'/'.join(a.option_strings) or a.dest}"
               for prog, parser in _parsers(build_parser())
               for a in parser._actions
               if not isinstance(a, (argparse._HelpAction, argparse._SubParsersAction, argparse._VersionAction))
               and not (a.help or "").strip()]
    assert not missing, missing


def test_the_qualifier_options_name_what_they_take(capsys):
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--a-type FORMAT" in out and "A's number format" in out and "--scale-type FORMAT" in out
