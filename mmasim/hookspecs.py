"""Every hook an mmasim plugin can implement.

A plugin is any module or object with functions decorated by
``mmasim.hookimpl`` and named like the specs below.  Built-in parts (the core's
formats, decoders, accumulators and encoders, and the built-in architectures)
are registered through these same hooks; third-party plugins are found through
the ``mmasim`` entry-point group::

    [project.entry-points.mmasim]
    myarch = "myarch_plugin"

Every name a plugin registers (format, decoder, accumulator, encoding, layout,
architecture and alias) and every datapath has one owner: registering one that
another plugin owns with a different value is a
:class:`~mmasim.errors.PluginConflict` naming both plugins.  A hook that raises
or returns the wrong type is a :class:`~mmasim.errors.PluginError`; the
plugin is then skipped (and reported once), or, for :func:`mmasim.register`,
the error is raised.  See docs/plugins.md "Isolation and conflicts".
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
    A decoder returns a :class:`~mmasim.decode.Decoded` whose arrays all have
    the shape of ``words``; anything else is a :class:`~mmasim.errors.PluginError`
    naming the plugin when the decoder is used.
    """


@hookspec
def mmasim_accumulators():
    """Return a mapping ``name -> accumulator`` of datapath families.

    An accumulator is called as ``acc(a, b, c, scale_a, scale_b, encoding, **params)``
    on decoded arrays of one hardware step and returns D words.  It declares its
    parameters as ``acc.Params``, a frozen attrs class (see
    :mod:`mmasim.accumulators.params`); tables are checked against it when they load.
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
    ``.toml`` file.  See ``docs/tables.md`` for the table schema.

    A table declares a new architecture (``[architecture] name = ...``) or adds
    datapaths to one another table declares (``[architecture] extends = ...``);
    tables are checked when they load (:class:`~mmasim.errors.TableError` with
    the file, datapath and field)."""


# ----------------------------------------------------------- compiled kernels
# (read by mmasim.backends, not by the registry: a kernel is a way to compute a
# datapath, never part of what the datapath is)
@hookspec
def mmasim_kernels():
    """Return a mapping ``accumulator name -> builder(plan) -> kernel | None``.

    The ``numba`` backend asks the builder of a datapath's accumulator for a
    compiled kernel of its :class:`~mmasim.plan.Plan`; ``None`` (or no builder)
    leaves the datapath to numpy.  A plugin registered later replaces an earlier
    plugin's builder of the same name.  The built-in kernels are registered
    through this hook by :mod:`mmasim.backends.numba`."""
