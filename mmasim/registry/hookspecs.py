"""Every hook an mmasim plugin can implement, and the two markers.

A leaf: imports nothing of mmasim, so that a plugin (built-in or third-party) and the core
modules it uses can import ``hookimpl`` without an import circle.  A plugin is any module or
object with functions decorated by :data:`hookimpl` (re-exported as ``mmasim.hookimpl``) and
named like the specs below; each spec's docstring is its contract.  Built-in parts are
registered through these same hooks; third-party plugins are found through the ``mmasim``
entry-point group.  Every registered name, datapath and placed operand has one owner
(:class:`~mmasim.errors.PluginConflict` otherwise); a hook that raises or returns the wrong type
is a :class:`~mmasim.errors.PluginError`.  docs/plugins.md: the hooks, entry points,
"Isolation and conflicts".
"""

import pluggy

#: Marks a function of this module as a hook specification.
hookspec = pluggy.HookspecMarker("mmasim")
#: Marks a plugin's function as the implementation of the hook of the same name.
hookimpl = pluggy.HookimplMarker("mmasim")


@hookspec
def mmasim_formats():
    """Return an iterable of :class:`mmasim.arith.formats.Format` (number formats in their containers)."""


@hookspec
def mmasim_decoders():
    """Return a mapping ``name -> decode(fmt, words) -> Decoded`` of decoder functions.

    A :class:`~mmasim.arith.formats.Format` names its decoder in ``Format.decoder``;
    the core provides ``"float"`` (any IEEE-like minifloat) and ``"int"``.
    A decoder returns a :class:`~mmasim.arith.decode.Decoded` whose arrays all have
    the shape of ``words``; anything else is a :class:`~mmasim.errors.PluginError`
    naming the plugin when the decoder is used.
    """


@hookspec
def mmasim_accumulators():
    """Return a mapping ``name -> accumulator`` of datapath families.

    An accumulator is an :class:`mmasim.accumulators.Accumulator` record: the
    function (called as ``acc(a, b, c, scale_a, scale_b, encoding, **params)`` on
    decoded arrays of one hardware step, returning D words), its parameter class
    ``Params`` (a frozen attrs class, see :mod:`mmasim.accumulators.params`),
    whether it takes block scales (``scales``) and its special-value text.  The
    record is checked when the registry is built (a
    :class:`~mmasim.errors.PluginError` if it is inconsistent), and tables are
    checked against ``Params`` when they load.  A plain function is accepted
    too (its ``Params`` and ``special_values`` attributes, if any, are read).
    """


@hookspec
def mmasim_encodings():
    """Return an iterable of :class:`mmasim.arith.encode.Encoding` (output rounding ρ)."""


@hookspec
def mmasim_layouts():
    """Return an iterable of layouts: :class:`mmasim.placement.FragmentRule` (register / TMEM fragments; a layout table (TOML) gives them through :func:`mmasim.placement.load_layouts`), :class:`mmasim.placement.SmemLayout` (or ``CoreMatrixLayout``) and :class:`mmasim.placement.ResultSlice` (docs/layouts.md)."""


@hookspec
def mmasim_families():
    """Return an iterable of :class:`mmasim.registry.family.Family`: instruction families (the
    ``op`` of datapaths), each with its syntax, operand storage, warp-level execution and
    compile-target rule (docs/plugins.md, "Instruction families")."""


@hookspec
def mmasim_architectures():
    """Return an iterable of architecture tables: TOML text (``str``), a parsed
    ``dict``, or a :class:`pathlib.Path` / ``importlib.resources`` traversable of a
    ``.toml`` file.  See ``docs/tables.md`` for the table schema.

    A table declares a new architecture (``[architecture] name = ...``) or adds
    datapaths to one another table declares (``[architecture] extends = ...``);
    tables are checked when they load (:class:`~mmasim.errors.TableError` with
    the file, datapath and field)."""


@hookspec
def mmasim_schemes():
    """Return an iterable of :class:`mmasim.registry.scheme.Scheme`: quantization recipes that
    ``mmasim.quantize(x, name)`` and ``mmasim.torch.Emulation(scaling="scheme", scheme=name)``
    run (docs/plugins.md, "Quantization schemes").  A scheme's ``rule`` is called as
    ``rule(scheme, x, fmt, axis, nan, tile, opts)`` and returns a :class:`mmasim.Quantized`;
    its other fields say what callers may ask of it (tiles, scale rounding, stochastic
    rounding, the Hadamard transform) and where its scales are applied.  A scheme name has one
    owner: another scheme of that name, or a format's key (the name of its plain cast), is a
    :class:`~mmasim.errors.PluginConflict`.  The built-in recipes (OCP MX, NVFP4, DeepSeek FP8)
    are registered through this hook by :mod:`mmasim.quantization.schemes`."""


# ----------------------------------------------------------- backends and their kernels
# (a backend or a kernel is a way to compute a datapath, never part of what the datapath is:
# the registry holds them, mmasim.backends uses them)
@hookspec
def mmasim_backends():
    """Return a mapping ``backend name -> factory``.

    ``factory()`` returns the backend object: ``name``, ``compute(plan, rows)`` (the D words of
    :class:`~mmasim.backends.plan.Rows` of a :class:`~mmasim.backends.plan.Plan`) and
    ``takes_matrices(plan)`` (whether ``compute`` reads the matrix form in place).  A factory may
    have ``unavailable()``, returning why the backend cannot be used here (a package that is
    not installed, no device) or ``''`` when it can; it is asked before the factory is called,
    so that naming an unusable backend is a :class:`~mmasim.backends.BackendError` with that
    reason.  A factory may have ``auto_takes(products)``: whether ``auto`` gives this backend a
    job of that many products (a GPU backend: large jobs, with a GPU present).  Each backend
    keeps what it prepares per plan itself (a plan is frozen).  A backend name has one owner: another plugin's factory under a registered name is a
    :class:`~mmasim.errors.PluginConflict`.  The built-in ``numpy``, ``numba`` and ``cuda``
    backends are registered through this hook by :mod:`mmasim.backends.numpy`,
    :mod:`mmasim.backends.numba` and :mod:`mmasim.backends.cuda.backend`."""


@hookspec
def mmasim_kernels():
    """Return a mapping ``(backend, accumulator name) -> builder(plan) -> kernel | None``.

    A backend asks the builder of a datapath's accumulator registered for it for a compiled
    kernel of its :class:`~mmasim.backends.plan.Plan`; ``None`` (or no builder) leaves the
    datapath to the reference.  A key that is an accumulator name alone means the ``numba``
    backend's kernel (``{"window": builder}`` is ``{("numba", "window"): builder}``).  A
    (backend, family) kernel has one owner, like every other name: a builder for a pair whose
    kernel another plugin registers (a built-in family such as ``("numba", "window")``) is a
    :class:`~mmasim.errors.PluginConflict`; two backends' kernels of one family are not.  The
    numba backend's built-in kernels are registered through this hook by
    :mod:`mmasim.backends.numba`."""


# ----------------------------------------------------------- the harness's entries
# (read by the harness, which keeps the built-in families' in its own table; the registry
# reads neither: docs/plugins.md, "Harness emitters and devices")
@hookspec
def mmasim_harness_emitters():
    """Return a mapping ``family name -> emitter``: for each instruction family the plugin
    registers (``mmasim_families``), the module that writes and reads its kernels (``specs``,
    ``place``, ``read``, ``source``, ``build_line``, ``simulate``), or its dotted name.  A family
    has one emitter: another for a family that has one is a
    :class:`~mmasim.errors.PluginConflict` when the harness asks for it."""


@hookspec
def mmasim_harness_devices():
    """Return a mapping ``family name -> device class``: for each instruction family the plugin
    registers, the class ``harness run`` builds when given no device (``info()``, ``run``,
    ``expected(target)``, ``reports``), or its dotted name ``"module.Class"``.  One per family,
    like the emitters."""


# --------------------------------------------------------------- availability
@hookspec
def mmasim_unavailable():
    """Return why what this plugin adds cannot be used here (an optional dependency that
    is not installed, with the line that installs it), or ``None`` when it can.

    The plugin stays loaded; :func:`mmasim.registry.registration.status` and ``mmasim plugins``
    report it as unavailable with this reason.  The built-in numba backend says so
    where numba cannot be imported."""
