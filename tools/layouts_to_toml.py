"""Render :class:`mmasim.placement.FragmentRule` objects as a layout table (TOML).

A contributor tool, not part of the package: a rule written in Python (a plugin's list, or a
rule made by a loop) becomes the ``[[layout]]`` rows that :func:`mmasim.placement.load_layouts`
reads (docs/layouts.md, "Adding a layout").  Only the fields that differ from FragmentRule's
defaults are written, in a fixed order; strings are carried verbatim (long ones wrapped with
TOML's line-ending backslash, which the parser removes)::

    python tools/layouts_to_toml.py some.module:RULES > archs/layouts/some.toml
    python tools/layouts_to_toml.py path/to/rules.py:A_RULES,B_RULES > archs/layouts/some.toml
    python tools/layouts_to_toml.py path/to/rules.py > archs/layouts/some.toml

The source is a module (dotted name, or a ``.py`` file, loaded as a module of
``mmasim.placement`` so that its relative imports work) and the names of its lists of rules,
comma-separated; without names, every module-level list of FragmentRule objects, in the order
the module defines them.  A rule module written against the former Python catalogue
(``from .catalog_base import _ISA, rule_maker``) converts as it is: the tool stands in for that
module when the package no longer has it.

``render`` checks its own output: the text parsed back through ``load_layouts`` must give rules
equal to the ones it was given, or it raises.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import pathlib
import sys
import types

import attrs

#: FragmentRule's fields in the order a row lists them: what selects, then the formulas, then the words
ORDER = ("name", "op", "operands", "m", "n", "k", "bits", "arch", "kind", "types", "abits", "alayout", "blayout",
         "sparse", "qualifiers", "storage", "lanes", "blocks", "block", "elements", "row", "col", "valid",
         "copies", "selectors", "legal", "description", "source", "evidence")
#: tuple fields written as a plain value when they hold one (``bits = 16``), a list otherwise
_SCALAR_WHEN_ONE = ("bits", "arch", "types", "abits")
WIDTH = 100
#: a string up to this long stays on its key's line
ONE_LINE = 120


def _string(text: str, key: str) -> str:
    body = "".join({'"': '\\"', "\\": "\\\\", "\n": "\\n", "\t": "\\t"}.get(c, c) if c >= " " or c in "\n\t"
                   else f"\\u{ord(c):04x}" for c in text)
    if len(key) + len(body) + 5 <= ONE_LINE:
        return f'"{body}"'
    if "  " in body or body.startswith(" ") or body.endswith(" "):
        return f'"{body}"'          # runs of spaces: one line, as the wrapping below would eat them
    # a multi-line basic string: each line but the last ends in "<space>\\", which TOML joins with
    # the next line's text (the backslash eats the newline and the next line's leading spaces),
    # so break only at a single space followed by a non-space
    lines, line = [], ""
    for word in body.split(" "):
        if line and len(line) + len(word) + 3 > WIDTH:
            lines.append(line + " \\")
            line = word
        else:
            line = f"{line} {word}" if line else word
    lines.append(line)
    return '"""\\\n' + "\n".join(lines) + '"""'


def _value(key: str, v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return _string(v, key)
    if isinstance(v, tuple):
        if key in _SCALAR_WHEN_ONE and len(v) == 1:
            return _value(key, v[0])
        return "[" + ", ".join(_value(key, x) for x in v) + "]"
    raise TypeError(f"field {key!r}: cannot write {type(v).__name__} {v!r}")


def render_rule(rule) -> str:
    """One ``[[layout]]`` row."""
    from mmasim.placement import FragmentRule

    fields = {f.name: f for f in attrs.fields(FragmentRule)}
    missing = set(fields) - set(ORDER)
    if missing:       # a field FragmentRule gained that this tool does not know: refuse, never drop it
        raise SystemExit(f"layouts_to_toml: FragmentRule fields {sorted(missing)} are not in ORDER")
    out = ["[[layout]]"]
    for key in ORDER:
        v = getattr(rule, key)
        default = fields[key].default
        if default is not attrs.NOTHING and type(v) is type(default) and v == default:
            continue            # FragmentRule's default (None for m, kind, sparse, qualifiers ...)
        out.append(f"{key} = {_value(key, v)}")
    return "\n".join(out)


def render(rules, header: str = "") -> str:
    """The layout table of ``rules`` (a comment ``header`` first), checked by loading it back."""
    from mmasim.placement import load_layouts

    text = "".join(f"# {line}".rstrip() + "\n" for line in header.splitlines())
    text += "".join("\n" + render_rule(r) + "\n" for r in rules)
    back = load_layouts(text)
    if list(back) != list(rules):
        bad = [r.name for r, b in zip(rules, back) if r != b] or ["(count differs)"]
        raise SystemExit(f"layouts_to_toml: the rendered table does not load back to the same rules: {bad}")
    return text


def _former_catalogue_base() -> None:
    """Stand in for ``mmasim.placement.catalog_base`` (removed when the built-in rules became
    tables) so that a rule module written against it imports: ``_ISA`` and ``rule_maker``,
    whose ``R(name, ...)`` takes the evidence from ``evidence=`` or the module's table."""
    name = "mmasim.placement.catalog_base"
    try:
        importlib.import_module(name)
        return
    except ModuleNotFoundError:
        pass
    from mmasim.placement import FragmentRule

    def rule_maker(evidence_table: dict):
        def R(rule_name, *args, evidence=None, **kw):
            return FragmentRule(rule_name, *args, evidence=evidence or evidence_table[rule_name], **kw)
        return R

    module = types.ModuleType(name)
    module._ISA, module.rule_maker = "PTX ISA 9.0", rule_maker
    sys.modules[name] = module


def load_rules(source: str) -> list:
    """The rules ``source`` (``module[:NAME,NAME...]`` or ``file.py[:NAME,...]``) names."""
    from mmasim.placement import FragmentRule

    target, _, names = source.partition(":")
    _former_catalogue_base()
    if target.endswith(".py"):
        path = pathlib.Path(target)
        name = f"mmasim.placement.{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(target)
    if names:
        lists = [getattr(module, n) for n in names.split(",")]
    else:
        lists = [v for k, v in vars(module).items() if not k.startswith("__") and isinstance(v, (list, tuple))
                 and v and all(isinstance(x, FragmentRule) for x in v)]
    rules, seen = [], set()
    for lst in lists:
        for r in lst:
            if id(r) not in seen:
                seen.add(id(r))
                rules.append(r)
    if not rules:
        raise SystemExit(f"layouts_to_toml: {source} names no FragmentRule")
    return rules


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("source", help="module[:NAME,...] or file.py[:NAME,...]: lists of FragmentRule objects")
    p.add_argument("--header", default="", help="comment lines to put at the top")
    args = p.parse_args(argv)
    sys.stdout.write(render(load_rules(args.source), args.header))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
