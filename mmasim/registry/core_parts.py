"""The core's own parts, registered through the plugin hooks like any plugin's.

The core registers no layout: the register / TMEM layout rules are tables
(``archs/layouts/*.toml``) that the table plugin ``mmasim_plugins.archs`` registers
through the ``mmasim_layouts`` hook, as a third-party plugin would.
"""

from mmasim.accumulators import BUILTIN_ACCUMULATORS
from mmasim.arith.decode import BUILTIN_DECODERS
from mmasim.arith.encode import BUILTIN_ENCODINGS
from mmasim.arith.formats import BUILTIN_FORMATS
from mmasim.registry.hookspecs import hookimpl


@hookimpl
def mmasim_formats():
    return BUILTIN_FORMATS


@hookimpl
def mmasim_decoders():
    return BUILTIN_DECODERS


@hookimpl
def mmasim_accumulators():
    return BUILTIN_ACCUMULATORS


@hookimpl
def mmasim_encodings():
    return BUILTIN_ENCODINGS
