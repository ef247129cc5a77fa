"""The accumulator contract: one record per datapath family.

Gives :class:`Accumulator`: what the rest of mmasim needs to know of a family (its function,
its ``Params``, its use of block scales, its special-value text), called exactly like its
function, ``acc(a, b, c, scale_a, scale_b, encoding, **params)``.  :meth:`Accumulator.check`,
run when the registry is built, refuses a record that contradicts itself
(:class:`ContractError`).  Each built-in family lives in the module of its name and is
registered under that name: ``mmasim/accumulators/window.py`` defines ``window``, the registry
key ``"window"`` (file = function = key).
"""

from __future__ import annotations

import importlib
import inspect
import sys
from typing import Callable

import attrs

from mmasim.accumulators.params import NoParams

#: ``Accumulator.scales``: the family takes no block scales, may take them, or needs them.
SCALES = ("none", "optional", "required")
#: The positional arguments of every accumulator, in order.
ARGUMENTS = ("a", "b", "c", "scale_a", "scale_b", "encoding")


class ContractError(ValueError):
    """An accumulator record that contradicts itself (its message says how)."""


@attrs.frozen
class Accumulator:
    """A datapath family: ``function``, its parameter class ``Params``, its use of
    block scales (``scales``: one of :data:`SCALES`) and its special-value text."""

    function: Callable
    Params: type | None = NoParams      # None: parameters unchecked (a plain third-party function)
    scales: str = "none"
    special_values: str = ""

    def __call__(self, a, b, c, scale_a, scale_b, encoding, **params):
        return self.function(a, b, c, scale_a, scale_b, encoding, **params)

    @property
    def __name__(self) -> str:
        return getattr(self.function, "__name__", type(self.function).__name__)

    def __reduce__(self):
        # a built-in record takes its function's name in its module (window.window is the
        # record): it pickles as that name, since the function itself is not reachable by it
        module, name = getattr(self.function, "__module__", None), getattr(self.function, "__name__", None)
        if module and name and getattr(sys.modules.get(module), name, None) is self:
            return _named, (module, name)
        return Accumulator, (self.function, self.Params, self.scales, self.special_values)

    @classmethod
    def of(cls, value) -> "Accumulator":
        """``value`` as a record: a record as it is; a plain function (a plugin may return one)
        with its ``Params`` and ``special_values`` attributes if it has them, and scales
        not checked."""
        if isinstance(value, cls):
            return value
        return cls(value, getattr(value, "Params", None), "optional",
                   str(getattr(value, "special_values", "") or ""))

    def check(self) -> None:
        """Raise :class:`ContractError` if the record contradicts itself: ``Params`` must be an
        attrs class whose fields are the function's keyword parameters, so a table's ``params``
        (checked against ``Params`` when the table loads) are exactly what the function is
        called with.  (That a block-scaled datapath uses only an accumulator that takes scales,
        and one that needs them only a block-scaled datapath, is checked per table:
        :func:`mmasim.registry.tables.check_scales`.)"""
        if not callable(self.function):
            raise ContractError(f"function {self.function!r} is not callable")
        if self.scales not in SCALES:
            raise ContractError(f"scales must be one of {', '.join(map(repr, SCALES))}, not {self.scales!r}")
        if not isinstance(self.special_values, str):
            raise ContractError(f"special_values must be text, not {type(self.special_values).__name__}")
        if self.Params is not None and not (isinstance(self.Params, type) and attrs.has(self.Params)):
            raise ContractError(f"Params must be an attrs class, not {self.Params!r}")
        try:
            signature = inspect.signature(self.function)
        except (TypeError, ValueError):
            return  # a callable without a signature (a builtin): nothing more to check
        params = list(signature.parameters.values())
        if any(p.kind is p.VAR_POSITIONAL for p in params):
            positional = len(ARGUMENTS)
        else:
            positional = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        if positional < len(ARGUMENTS):
            raise ContractError(f"the function takes {positional} positional arguments, not the "
                                f"{len(ARGUMENTS)} of acc({', '.join(ARGUMENTS)}, **params)")
        if self.Params is None:
            return
        declared = attrs.fields_dict(self.Params)
        named = {p.name: p for p in params[len(ARGUMENTS):]
                 if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
        if not any(p.kind is p.VAR_KEYWORD for p in params):
            missing = sorted(set(declared) - set(named))
            if missing:
                raise ContractError(f"Params declares {missing}, which the function does not take")
        required = sorted(k for k, p in named.items() if p.default is p.empty and k not in declared)
        if required:
            raise ContractError(f"the function needs the parameters {required}, which Params does not declare")


def _named(module: str, name: str) -> Accumulator:
    return getattr(importlib.import_module(module), name)


__all__ = ["Accumulator", "ContractError", "SCALES", "ARGUMENTS"]
