"""Every hook an mmasim plugin can implement.

A plugin is any module or object with functions decorated by
``mmasim.hookimpl`` and named like the specs below.  Built-in parts (the core's
formats, decoders, accumulators and encoders, and the built-in architectures)
are registered through these same hooks; third-party plugins are found through
the ``mmasim`` entry-point group::

    [project.entry-points.mmasim]
    myarch = "myarch_plugin"
"""

import pluggy

hookspec = pluggy.HookspecMarker("mmasim")


@hookspec
def mmasim_formats():
    """Return an iterable of :class:`mmasim.formats.Format` (number formats in their containers)."""


@hookspec
def mmasim_decoders():
    """Return a mapping ``name -> decode(fmt, words) -> Decoded`` of decoder functions.

    A :class:`~mmasim.formats.Format` names its decoder in ``Format.decoder``;
    the core provides ``"float"`` (any IEEE-like minifloat) and ``"int"``.
    """


@hookspec
def mmasim_accumulators():
    """Return a mapping ``name -> accumulator`` of datapath families.

    An accumulator is called as ``acc(a, b, c, scale_a, scale_b, encoding, **params)``
    on decoded arrays of one hardware step and returns D words.
    """


@hookspec
def mmasim_encodings():
    """Return an iterable of :class:`mmasim.encode.Encoding` (output rounding ρ)."""


@hookspec
def mmasim_layouts():
    """Return an iterable of :class:`mmasim.layout.ResultSlice` or :class:`mmasim.layout.CoreMatrixLayout` (operand layouts, result slices)."""


@hookspec
def mmasim_architectures():
    """Return an iterable of architecture tables: TOML text (``str``), a parsed
    ``dict``, or a :class:`pathlib.Path` / ``importlib.resources`` traversable of a
    ``.toml`` file.  See ``docs/tables.md`` for the table schema."""
