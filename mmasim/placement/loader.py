"""Layout tables: register / TMEM layout rules written as TOML, read into :class:`FragmentRule`.

Owns the ``[[layout]]`` row (its keys, :data:`KEYS`, are :class:`FragmentRule`'s fields) and
the checks a row passes as it loads; gives :func:`load_layouts`.  Holds no layout: the
built-in ones are ``archs/layouts/*.toml``, registered by ``mmasim_plugins.archs``.  Refuses,
as a :class:`~mmasim.errors.TableError` naming the file and the rule, unknown or missing keys,
a value of the wrong type, a formula outside :mod:`mmasim.placement.expr`, a missing evidence,
a name given twice and formulas that are not a bijection onto the matrix.  The row format and
an example: docs/layouts.md, "Adding a layout".
"""

from __future__ import annotations

import ast
import os
import pathlib

from mmasim.errors import TableError
from mmasim.placement.expr import compile_expr
from mmasim.placement.fragment import MATRICES, FragmentRule

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

_STR, _INT, _BOOL, _STRS, _INTS, _FORMULA = "a string", "an integer", "true or false", \
    "a string or a list of strings", "an integer or a list of integers", "a formula (a string or an integer)"
#: every key of a ``[[layout]]`` row and what its value must be
KEYS = {
    "name": _STR, "op": _STR, "operands": _STRS, "m": _INT, "n": _INT, "k": _INT, "bits": _INTS,
    "arch": _STRS, "kind": _STR, "types": _STRS, "abits": _INTS, "alayout": _STR, "blayout": _STR,
    "sparse": _BOOL, "qualifiers": _STRS, "storage": _STR, "lanes": _INT, "blocks": _INT, "block": _FORMULA,
    "elements": _FORMULA, "row": _FORMULA, "col": _FORMULA, "valid": _STR, "copies": _INTS, "selectors": _STRS,
    "legal": _STR,
    "description": _STR, "source": _STR, "evidence": _STR,
}
#: the keys a row must give (``evidence``: what the formulas rest on, never implied)
REQUIRED = ("name", "op", "operands", "row", "col", "elements", "evidence")
#: the shape dimensions each matrix operand depends on
_DIMS = {"a": "MK", "b": "KN", "c": "MN", "d": "MN"}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _fits(v, want: str) -> bool:
    if want == _STR:
        return isinstance(v, str)
    if want == _INT:
        return _is_int(v)
    if want == _BOOL:
        return isinstance(v, bool)
    if want == _STRS:
        return isinstance(v, str) or (isinstance(v, list) and all(isinstance(x, str) for x in v))
    if want == _INTS:
        return _is_int(v) or (isinstance(v, list) and all(_is_int(x) for x in v))
    return isinstance(v, str) or _is_int(v)         # a formula


def _read(source) -> tuple:
    """``(parsed TOML, where)`` of TOML text, a path, a traversable or an already parsed dict."""
    if isinstance(source, dict):
        return source, "<dict>"
    if isinstance(source, str) and ("\n" in source or not source.rstrip().endswith(".toml")):
        text, where = source, "<string>"
    else:
        if isinstance(source, (str, os.PathLike)) and not hasattr(source, "read_text"):
            source = pathlib.Path(source)       # a file name: one line ending in .toml
        try:
            text, where = source.read_text(encoding="utf-8"), str(source)
        except (AttributeError, OSError) as exc:
            raise TableError(f"cannot read layout table {source!r}: {exc}") from exc
    try:
        return tomllib.loads(text), where
    except tomllib.TOMLDecodeError as exc:
        raise TableError(f"layout table {where}: invalid TOML: {exc}") from exc


def load_layouts(source) -> list:
    """The :class:`FragmentRule` objects of one layout table, in the file's order.

    ``source``: a path (``pathlib.Path``, ``os.PathLike``, an ``importlib.resources``
    traversable, or a one-line ``str`` ending in ``.toml``), TOML text (any other ``str``) or a
    dict already parsed.  A plugin returns the
    result from its ``mmasim_layouts`` hook.  Raises :class:`~mmasim.errors.TableError`
    naming the file and the rule on anything malformed (see the module's docstring)."""
    data, where = _read(source)
    unknown = set(data) - {"layout"}
    if unknown:
        raise TableError(f"layout table {where}: unknown sections {sorted(unknown)}; a layout table holds only "
                         "[[layout]] rows")
    rows = data.get("layout", [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise TableError(f"layout table {where}: 'layout' must be an array of tables ([[layout]])")
    rules, seen = [], {}
    for number, row in enumerate(rows, 1):
        rule = _rule(row, f"layout table {where}, [[layout]] #{number}" + (
            f" ({row['name']!r})" if isinstance(row.get("name"), str) else ""))
        if rule.name in seen:
            raise TableError(f"layout table {where}: layout {rule.name!r} is given twice ([[layout]] "
                             f"#{seen[rule.name]} and #{number})")
        seen[rule.name] = number
        rules.append(rule)
    return rules


def _rule(row: dict, here: str) -> FragmentRule:
    unknown = set(row) - set(KEYS)
    if unknown:
        raise TableError(f"{here}: unknown keys {sorted(unknown)}; known: {', '.join(KEYS)}")
    for key in REQUIRED:
        if key not in row:
            why = " (what the formulas rest on: 'checked: <document, section>', 'partly checked: ...' or " \
                  "'unverified: ...')" if key == "evidence" else ""
            raise TableError(f"{here}: missing key {key!r}{why}")
    for key, value in row.items():
        if not _fits(value, KEYS[key]):
            raise TableError(f"{here}: field {key!r} must be {KEYS[key]}, not {value!r}")
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in row.items()}
    try:
        rule = FragmentRule(**values)
        _check_bijection(rule)
    except TableError as exc:
        raise TableError(f"{here}: {exc}") from None
    return rule


def _names(rule: FragmentRule) -> set:
    """The names the rule's formulas use."""
    out = set()
    for field in ("row", "col", "block", "elements", "valid"):
        text = getattr(rule, field)
        if text != "":
            out |= {n.id for n in ast.walk(compile_expr(text)) if isinstance(n, ast.Name)}
    return out


def _check_bijection(rule: FragmentRule) -> None:
    """Bind the rule to its own shape where it fixes every dimension its matrix operands and
    formulas use (a rule open in N, such as wgmma's accumulator, is checked when an instruction
    binds it).  A sparse rule's A is the compressed ``M x K/2``."""
    dims = {"M": rule.m, "N": rule.n, "K": rule.k}
    used = _names(rule) & set(dims)
    for operand in rule.operands:
        if operand not in MATRICES or any(dims[d] is None for d in set(_DIMS[operand]) | used):
            continue
        M, N, K = (dims[d] or 0 for d in "MNK")
        shape = (M, K // 2) if operand == "a" and rule.sparse else None
        rule.bind(operand, M, N, K, rule.bits[0] if rule.bits else 32, shape=shape)
