"""Declared parameters of the accumulator families: the validators a ``Params`` class is built of.

Every accumulator record (:class:`mmasim.accumulators.Accumulator`) names its ``Params``: a
frozen attrs class whose fields are the keyword parameters it takes (name, type, range,
default), built from the validators here (:func:`integer`, :func:`boolean`, :func:`one_of`,
:func:`table_of`, ...).  When a table loads, a datapath's ``params`` are checked against it
(:func:`mmasim.registry.tables.check_params`), and a value it refuses is a :class:`ParamError`
naming the field; the accumulator is still called with the table's values as keyword
arguments.  An accumulator without ``Params`` takes its parameters unchecked.
"""

from __future__ import annotations

from types import SimpleNamespace

import attrs

#: Bounds for exponent-like parameters (window widths, e_zero, floors): far
#: beyond any real format (f64 exponents reach about -1100), small enough to
#: catch a typo such as 1e8.
EXP_LIMIT = 4096


def _describe(value) -> str:
    return f"{value!r} ({type(value).__name__})"


class ParamError(ValueError):
    """A parameter value an accumulator does not accept (its message names the field)."""


def _fail(attribute, why: str):
    raise ParamError(f"field 'params.{attribute.name}': {why}")


def integer(lo: int = -EXP_LIMIT, hi: int = EXP_LIMIT):
    """Validator: a TOML integer (not a bool, not a float) in ``[lo, hi]``."""

    def check(_instance, attribute, value):
        if isinstance(value, bool) or not isinstance(value, int):
            _fail(attribute, f"must be an integer, not {_describe(value)}")
        if not lo <= value <= hi:
            _fail(attribute, f"{value} is outside {lo}..{hi}")

    return check


def boolean(_instance, attribute, value):
    """Validator: a TOML boolean."""
    if not isinstance(value, bool):
        _fail(attribute, f"must be true or false, not {_describe(value)}")


def optional(validator):
    """Validator: ``None`` (the parameter left out) or what ``validator`` accepts."""

    def check(instance, attribute, value):
        if value is not None:
            validator(instance, attribute, value)

    return check


def one_of(*choices):
    """Validator: one of ``choices`` (compared by value and type)."""

    def check(_instance, attribute, value):
        if not any(type(value) is type(c) and value == c for c in choices):
            _fail(attribute, f"must be one of {', '.join(map(repr, choices))}, not {_describe(value)}")

    return check


def either(*validators, expected: str):
    """Validator: what any one of ``validators`` accepts."""

    def check(instance, attribute, value):
        for v in validators:
            try:
                v(instance, attribute, value)
                return
            except ValueError:
                pass
        _fail(attribute, f"must be {expected}, not {_describe(value)}")

    return check


def table_of(**fields):
    """Validator: an inline table with exactly ``fields`` (name -> validator)."""

    def check(instance, attribute, value):
        if not isinstance(value, dict):
            _fail(attribute, f"must be an inline table {{{', '.join(fields)}}}, not {_describe(value)}")
        unknown = sorted(set(value) - set(fields))
        missing = sorted(set(fields) - set(value))
        if unknown or missing:
            _fail(attribute, f"must have exactly the keys {sorted(fields)}"
                  + (f"; unknown {unknown}" if unknown else "") + (f"; missing {missing}" if missing else ""))
        for key, validator in fields.items():
            validator(instance, SimpleNamespace(name=f"{attribute.name}.{key}"), value[key])

    return check


@attrs.frozen(kw_only=True)
class NoParams:
    """An accumulator that takes no parameters."""


__all__ = ["EXP_LIMIT", "ParamError", "integer", "boolean", "optional", "one_of", "either", "table_of", "NoParams"]
