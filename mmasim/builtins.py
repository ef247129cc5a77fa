"""The core's own parts, registered through the plugin hooks like any plugin's."""

from .accumulators import BUILTIN_ACCUMULATORS
from .decode import BUILTIN_DECODERS
from .encode import BUILTIN_ENCODINGS
from .formats import BUILTIN_FORMATS
from .placement.catalog import BUILTIN_FRAGMENTS
from .plugins import hookimpl


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


@hookimpl
def mmasim_layouts():
    return BUILTIN_FRAGMENTS
