"""The registry: every part the plugins registered, checked and indexed.

The registry is built plugin by plugin (built-ins first, then entry points, then
:func:`mmasim.register`, each in registration order), so that every part has one owner and
a failure is blamed on the plugin that caused it (:func:`build_registry` lists the checks).
A third-party plugin that fails is left out as a whole (``Registry.failures``) and the
registry is built again without it; a built-in one raises.  The plugins come from
:mod:`mmasim.registry.manager`; :mod:`mmasim.registry.registration` (which changes them)
rebuilds the registry through :func:`reset_registry` and :func:`install_registry`.
"""

from __future__ import annotations

import functools

import attrs
import numpy as np

from mmasim.registry import manager as plugin_manager
from mmasim.accumulators import Accumulator
from mmasim.accumulators.accumulator import ContractError
from mmasim.registry.datapath import Architecture, Datapath
from mmasim.registry.family import Family, plain
from mmasim.registry.scheme import Scheme
from mmasim.arith.decode import Decoded
from mmasim.arith.encode import Encoding
from mmasim.errors import MMAError, PluginConflict, PluginError, TableError, UnknownInstruction
from mmasim.arith.formats import Format
from mmasim.placement import FragmentRule, Layout
from mmasim.placement.claims import taken
from mmasim.registry.lookup import datapath_of, normalize_name
from mmasim.registry.tables import build_architecture, check_scales, inherit, load_table, table_extends


def datapath_identity(dp: Datapath) -> tuple:
    """What makes two datapaths the same instruction: op, kind, the A/B/C/D formats, K,
    block scaling (scale format, block, scale_vec), the sparse rule, saturation and the
    extra PTX qualifiers (``.and.popc``, ``cta_group::2``, ``.ws``).

    Two datapaths of one architecture with the same identity collide when their
    M and N sets overlap (an empty set means any M or N).
    """
    return (dp.op, dp.kind, dp.a, dp.b, dp.c, dp.d, dp.k, dp.scale, dp.block, dp.scale_vec,
            dp.sparse, dp.saturate, dp.qualifiers)


def _overlap(x: tuple, y: tuple) -> bool:
    return not x or not y or bool(set(x) & set(y))


def _label(dp: Datapath) -> str:
    parts = [dp.op] + ([f"kind::{dp.kind}"] if dp.kind else []) + (["sp"] if dp.sparse else [])
    shape = f"k{dp.k}" + "".join(f" {x}{list(v)}" for x, v in (("m", dp.m), ("n", dp.n)) if 0 < len(v) < 4)
    return f"{' '.join(parts)} {shape} {dp.a} x {dp.b} + {dp.c} -> {dp.d}" + (
        f" scale {dp.scale} block {dp.block}" if dp.scale else "")


@attrs.define
class Registry:
    formats: dict
    decoders: dict
    accumulators: dict
    encodings: dict
    layouts: dict
    architectures: dict          # name -> Architecture
    arch_index: dict             # normalized alias -> name
    kernels: dict = attrs.field(factory=dict)       # (backend, accumulator name) -> compiled-kernel builder
    backends: dict = attrs.field(factory=dict)      # backend name -> factory() -> backend (mmasim.backends)
    failures: dict = attrs.field(factory=dict)      # skipped plugin name -> its error
    owners: dict = attrs.field(factory=dict)        # architecture name -> plugin that declares it
    datapath_plugins: dict = attrs.field(factory=dict)  # Datapath -> plugin that added it
    families: dict = attrs.field(factory=dict)      # op -> Family (mmasim.registry.family)
    schemes: dict = attrs.field(factory=dict)       # name -> Scheme (mmasim.registry.scheme): quantize's recipes

    def family(self, op: str) -> Family:
        """The instruction family of datapaths of ``op`` (:func:`~mmasim.registry.family.plain` if none is registered)."""
        return self.families.get(op) or plain(op)

    def check(self) -> None:
        """Every name a table or format uses must be registered."""
        for fmt in self.formats.values():
            if fmt.decoder not in self.decoders:
                raise TableError(f"format {fmt.key}: unknown decoder {fmt.decoder!r}")
        for arch in self.architectures.values():
            for dp in arch.datapaths:
                _check_references(self, dp, f"architecture {arch.name}")


def _check_references(reg, dp: Datapath, where: str) -> None:
    where = f"{where}, datapath {_label(dp)}"
    for field in ("a", "b", "c", "d", "scale"):
        key = getattr(dp, field)
        if key is not None and key not in reg.formats:
            raise TableError(f"{where}: field {field!r}: unknown format {key!r}")
    if dp.accumulator not in reg.accumulators:
        raise TableError(f"{where}: field 'accumulator': unknown accumulator {dp.accumulator!r}")
    check_scales(dp.accumulator, reg.accumulators[dp.accumulator], bool(dp.scale), where)
    if dp.rounding not in reg.encodings:
        raise TableError(f"{where}: field 'rounding': unknown rounding {dp.rounding!r}")
    if dp.scale and not dp.block:
        raise TableError(f"{where}: field 'block': a block-scaled datapath needs its block size")
    if dp.block and dp.stored_k % dp.block:
        raise TableError(f"{where}: field 'block': K {dp.stored_k} is not a multiple of block {dp.block}")
    if dp.stored_k % dp.step:
        raise TableError(f"{where}: field 'chunk': K {dp.stored_k} is not a multiple of chunk {dp.chunk}")
    if dp.interleave and (dp.sparse or dp.scale):
        raise TableError(f"{where}: field 'interleave': not defined for sparse or block-scaled datapaths")
    if dp.interleave and dp.stored_k % (dp.interleave * (dp.stored_k // dp.step)):
        raise TableError(f"{where}: field 'interleave': runs of {dp.interleave} do not deal K {dp.stored_k} "
                         f"evenly to {dp.stored_k // dp.step} steps")
    if dp.c_add is not None:
        enc = reg.encodings.get(dp.c_add)
        if enc is None:
            raise TableError(f"{where}: field 'c_add': unknown rounding {dp.c_add!r}")
        if enc.format != dp.d or enc.mode != "rne" or dp.c != dp.d:
            raise TableError(f"{where}: field 'c_add': C is added by one IEEE addition in D's format: "
                             f"an RNE encoding into {dp.d} with C of that format, not {dp.c_add!r}")


# ------------------------------------------------------------------ hook results
_PARTS = (  # hook, registry field, what one item is, its type(s), its key
    ("mmasim_formats", "formats", "format", (Format,), lambda x: x.key),
    ("mmasim_encodings", "encodings", "encoding", (Encoding,), lambda x: x.key),
    ("mmasim_layouts", "layouts", "layout", (Layout,), lambda x: x.name),
    ("mmasim_families", "families", "instruction family", (Family,), lambda x: x.name),
    ("mmasim_schemes", "schemes", "quantization scheme", (Scheme,), lambda x: x.name),
)
_FUNCTIONS = (("mmasim_decoders", "decoders", "decoder"), ("mmasim_accumulators", "accumulators", "accumulator"),
              ("mmasim_kernels", "kernels", "kernel"), ("mmasim_backends", "backends", "backend"))
#: the backend a kernel registered under a plain family name is for
DEFAULT_KERNEL_BACKEND = "numba"
_HOOKS = [p[0] for p in _PARTS] + [f[0] for f in _FUNCTIONS] + ["mmasim_architectures"]


class _Blame(Exception):
    """``error`` caused by plugin ``plugin``: leave the plugin out and rebuild."""

    def __init__(self, plugin: str, error: Exception):
        super().__init__(str(error))
        self.plugin = plugin
        self.error = error


def _sequence(result, hook: str, what: str) -> list:
    if result is None:
        return []
    if isinstance(result, (str, bytes, dict)) or not hasattr(result, "__iter__"):
        raise PluginError(f"hook {hook}() must return a list of {what}, not {type(result).__name__}")
    return list(result)


def _normalize(hook: str, result, where: str):
    """A hook's result as ``[(key, value)]`` (parts) or ``[table dict]`` (architectures)."""
    for phook, _field, what, types, key in _PARTS:
        if hook == phook:
            items = _sequence(result, hook, f"{' / '.join(t.__name__ for t in types)} objects")
            for x in items:
                if not isinstance(x, types):
                    raise PluginError(f"hook {hook}() returned a {type(x).__name__}, not a "
                                      f"{' or '.join(t.__name__ for t in types)}")
            return [(key(x), x) for x in items]
    for fhook, _field, what in _FUNCTIONS:
        if hook == fhook:
            if result is None:
                return []
            if not isinstance(result, dict):
                raise PluginError(f"hook {hook}() must return a dict name -> {what} function, "
                                  f"not {type(result).__name__}")
            if hook == "mmasim_kernels":
                return [(_kernel_key(k, v), v) for k, v in result.items()]
            for k, v in result.items():
                if not isinstance(k, str) or not callable(v):
                    raise PluginError(f"hook {hook}() must map names (str) to functions, not "
                                      f"{k!r} -> {type(v).__name__}")
            if hook == "mmasim_accumulators":
                return [(k, _accumulator(k, v)) for k, v in result.items()]
            return list(result.items())
    tables = []
    for i, source in enumerate(_sequence(result, hook, "tables (TOML text, dict or path)")):
        if not isinstance(source, (str, dict)) and not hasattr(source, "read_text"):
            raise PluginError(f"hook {hook}() returned a {type(source).__name__}, not a table "
                              "(TOML text, a dict or a path)")
        data = dict(load_table(source))
        if not data.get("_source"):
            data["_source"] = f"table #{i + 1}"
        tables.append(data)
    return tables


def _kernel_key(key, builder) -> tuple:
    """``(backend, family)`` of a ``mmasim_kernels`` key: a pair of names, or a family name alone
    (a kernel of :data:`DEFAULT_KERNEL_BACKEND`, as plugins wrote them before kernels had a backend)."""
    pair = (DEFAULT_KERNEL_BACKEND, key) if isinstance(key, str) else key
    named = isinstance(pair, tuple) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
    if not named or not callable(builder):
        raise PluginError(f"hook mmasim_kernels() must map (backend, family) pairs or family names (str) to "
                          f"builders, not {key!r} -> {type(builder).__name__}")
    return pair


def _accumulator(name: str, value) -> Accumulator:
    """``value`` as a checked :class:`~mmasim.accumulators.Accumulator` record."""
    acc = Accumulator.of(value)
    try:
        acc.check()
    except ContractError as exc:
        raise PluginError(f"accumulator {name!r}: {exc}") from exc
    return acc


def _contributions(pm) -> tuple[list, dict, dict]:
    """(plugin names in registration order, name -> {hook: result}, name -> error)."""
    impls: dict = {}
    for hook in _HOOKS:
        for impl in getattr(pm.hook, hook).get_hookimpls():
            impls.setdefault(impl.plugin_name, {})[hook] = impl
    order = [name for name, plugin in pm.list_name_plugin() if plugin is not None and name in impls]
    results: dict = {}
    errors: dict = {}
    for name in order:
        where = plugin_manager.describe(name)
        out = {}
        try:
            for hook, impl in impls[name].items():
                if impl.hookwrapper or getattr(impl, "wrapper", False):
                    raise PluginError(f"{where}: hook {hook}: hook wrappers are not supported")
                try:
                    result = impl.function()
                except MMAError as exc:
                    raise type(exc)(f"{where}: hook {hook}() failed: {exc}") from exc
                except Exception as exc:  # noqa: BLE001 - any failure is the plugin's
                    raise PluginError(f"{where}: hook {hook}() raised {type(exc).__name__}: {exc}") from exc
                try:
                    out[hook] = _normalize(hook, result, where)
                except PluginError as exc:
                    raise PluginError(f"{where}: {exc}") from exc
                except TableError as exc:
                    raise TableError(f"{where}: {exc}") from exc
        except MMAError as exc:
            errors[name] = exc
            continue
        results[name] = out
    return order, results, errors


def _same(x, y) -> bool:
    try:
        return x is y or bool(x == y)
    except Exception:  # noqa: BLE001 - values that do not compare are different
        return False


def _checked_decoder(fn, name: str, plugin: str):
    """``fn`` wrapped so that a failure or output of the wrong shape is a PluginError naming ``plugin``."""
    where = f"decoder {name!r} of {plugin_manager.describe(plugin)}"

    @functools.wraps(fn)
    def decode(fmt, words):
        try:
            out = fn(fmt, words)
        except MMAError:
            raise
        except Exception as exc:  # noqa: BLE001
            raise PluginError(f"{where} raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(out, Decoded):
            raise PluginError(f"{where} returned a {type(out).__name__}, not mmasim.arith.decode.Decoded")
        shape = np.shape(words)
        for field in attrs.fields(Decoded):
            got = np.shape(getattr(out, field.name))
            if got != shape:
                raise PluginError(f"{where} returned {field.name} of shape {got} for words of shape {shape} "
                                  f"(format {fmt.key!r}); a decoder returns arrays of the words' shape")
        return out

    decode.plugin = plugin
    return decode


#: hook -> (registry field, what one item is) of every part registered by name
_HOOK_FIELDS = {p[0]: (p[1], p[2]) for p in _PARTS} | {f[0]: (f[1], f[2]) for f in _FUNCTIONS}


def _assemble(order: list, results: dict, pm) -> Registry:
    """The registry of the plugins in ``order``; raises :class:`_Blame` at the first failure.

    The phases, in order: the parts registered by name, one owner each (:func:`_collect_parts`);
    the registry of those parts (:func:`_parts_registry`); the architecture tables, the declaring
    ones first (:meth:`_Architectures.declare`), then those that extend one
    (:meth:`_Architectures.extend`); each architecture's datapaths in pluggy's call order
    (:func:`_place_datapaths`); inheritance (:func:`_inherit`); the layout claims
    (:func:`_check_layout_claims`).
    """
    fields, owner_of = _collect_parts(order, results)
    reg = _parts_registry(fields, owner_of)
    tables = _Architectures(reg)
    # (plugin, its table's position in the plugin's list, the table)
    listed = [(name, i, data) for name in order
              for i, data in enumerate(results[name].get("mmasim_architectures", ()))]
    for name, position, data in listed:
        if not table_extends(data):
            tables.declare(name, position, data)
    for name, position, data in listed:
        if table_extends(data):
            tables.extend(name, position, data)
    _place_datapaths(reg, tables, pm)
    _inherit(reg, tables.owners)
    reg.owners = dict(tables.owners)
    reg.arch_index = {key: held[0] for key, held in tables.index.items()}
    _check_layout_claims(reg, owner_of["layouts"])
    return reg


def _collect_parts(order: list, results: dict) -> tuple[dict, dict]:
    """``(field -> key -> part, field -> key -> plugin)``: every part the plugins in ``order``
    register by name (formats, decoders, accumulators, encodings, layouts, families, kernels,
    schemes).

    A name has one owner: the same part registered again is no conflict, a different one is a
    :class:`~mmasim.errors.PluginConflict` blamed on the later plugin.
    """
    describe = plugin_manager.describe
    fields: dict = {field: {} for field, _what in _HOOK_FIELDS.values()}       # field -> key -> value
    owner_of: dict = {field: {} for field, _what in _HOOK_FIELDS.values()}     # field -> key -> plugin
    for name in order:
        for hook, (field, what) in _HOOK_FIELDS.items():
            for key, value in results[name].get(hook, ()):
                if key in fields[field]:
                    if not _same(fields[field][key], value):
                        owner = owner_of[field][key]
                        hint = ("a plugin's kernels are for its own accumulator families or its own backend"
                                if what == "kernel" else "choose another name")
                        raise _Blame(name, PluginConflict(
                            f"{describe(name)} registers {what} {key!r}, which {describe(owner)} already "
                            f"registers differently; {hint}"))
                    continue
                fields[field][key] = value
                owner_of[field][key] = name
    return fields, owner_of


def _parts_registry(fields: dict, owner_of: dict) -> Registry:
    """The registry of the named parts, no architecture yet: every format's decoder must be
    registered (a :class:`~mmasim.errors.TableError` blamed on the format's plugin), and a
    third-party plugin's decoders are wrapped in :func:`_checked_decoder`."""
    describe = plugin_manager.describe
    for key, fmt in fields["formats"].items():
        if fmt.decoder not in fields["decoders"]:
            owner = owner_of["formats"][key]
            raise _Blame(owner, TableError(f"{describe(owner)}: format {key!r}: unknown decoder {fmt.decoder!r}"))
    decoders = {
        key: fn if plugin_manager.is_builtin(owner_of["decoders"][key]) else _checked_decoder(fn, key, owner_of["decoders"][key])
        for key, fn in fields["decoders"].items()
    }
    for key in fields["schemes"]:       # a format's key is the name of its plain cast
        if key in fields["formats"]:
            owner = owner_of["schemes"][key]
            raise _Blame(owner, PluginConflict(
                f"{describe(owner)} registers quantization scheme {key!r}, the name of the plain cast into "
                f"format {key!r} ({describe(owner_of['formats'][key])}); choose another name"))
    return Registry(fields["formats"], decoders, fields["accumulators"], fields["encodings"],
                    fields["layouts"], {}, {}, kernels=fields["kernels"], backends=fields["backends"],
                    families=fields["families"], schemes=fields["schemes"])


class _Architectures:
    """The architecture tables as they are read: each architecture name and alias has one owner,
    each datapath and literal datapath name one table; :meth:`declare` reads a table that
    declares an architecture, :meth:`extend` one that adds datapaths to a declared one."""

    def __init__(self, reg: Registry):
        self.reg = reg
        self.index: dict = {}        # normalized name or alias -> (architecture, plugin, table)
        self.archs: dict = {}        # name -> Architecture (the declaring table's)
        self.segments: dict = {}     # name -> [(plugin, position, datapaths)]: one per table
        self.by_identity: dict = {}  # (arch, identity) -> [(plugin, source, dp)]
        self.by_literal: dict = {}   # (arch, literal name) -> (plugin, source, dp)
        self.owners: dict = {}       # name -> the plugin whose table declares it
        self.declared_in: dict = {}  # name -> the table that declares it

    def owner(self, arch_name: str) -> str:
        """The plugin and table that declare ``arch_name``, as messages name them."""
        return f"{plugin_manager.describe(self.owners[arch_name])} ({self.declared_in[arch_name]})"

    def build(self, name: str, data: dict) -> Architecture:
        """Plugin ``name``'s table ``data`` as an :class:`Architecture`, every name its datapaths use registered."""
        try:
            arch = build_architecture(data, self.reg.accumulators)
            for dp in arch.datapaths:
                _check_references(self.reg, dp, data["_source"])
        except TableError as exc:
            raise _Blame(name, TableError(f"{plugin_manager.describe(name)}: {exc}")) from exc
        return arch

    def claim(self, name: str, arch_name: str, alias: str, source: str) -> None:
        """``alias`` for ``arch_name``, by plugin ``name``: a conflict if another architecture holds it."""
        describe = plugin_manager.describe
        key = normalize_name(alias)
        held = self.index.setdefault(key, (arch_name, name, source))
        if held[0] != arch_name:
            hint = (f"; to add datapaths to it, the table declares [architecture] extends = {held[0]!r}"
                    if key == normalize_name(held[0]) else "")
            raise _Blame(name, PluginConflict(
                f"{describe(name)} declares architecture {arch_name!r} with the name {alias!r}, which "
                f"{describe(held[1])} ({held[2]}) already uses for architecture {held[0]!r}{hint}"))

    def _clash(self, name: str, source: str, other_plugin: str, what: str) -> _Blame:
        """Two tables give one architecture the same datapath or literal name: a conflict between
        plugins, a table error within one."""
        cls = TableError if other_plugin == name else PluginConflict
        return _Blame(name, cls(f"{plugin_manager.describe(name)} ({source}) {what}"))

    def unclaimed(self, name: str, arch_name: str, datapaths, source: str) -> None:
        """No other table (of one plugin or of two) gives ``arch_name`` any of ``datapaths`` or
        their literal names."""
        describe = plugin_manager.describe
        for dp in datapaths:
            for other_plugin, other_source, other in self.by_identity.get((arch_name, datapath_identity(dp)), ()):
                if (other_plugin, other_source) != (name, source) and _overlap(dp.m, other.m) \
                        and _overlap(dp.n, other.n):
                    raise self._clash(name, source, other_plugin,
                                      f"adds the datapath {_label(dp)} to architecture {arch_name!r}, "
                                      f"which {describe(other_plugin)} ({other_source}) already registers")
            for literal in dp.names:
                held = self.by_literal.get((arch_name, literal))
                if held is not None and held[:2] != (name, source):
                    raise self._clash(name, source, held[0],
                                      f"names a datapath {literal!r} in architecture {arch_name!r}, a name "
                                      f"{describe(held[0])} ({held[1]}) already gives to {_label(held[2])}")

    def add(self, name: str, position: int, arch_name: str, datapaths, source: str) -> None:
        """``datapaths`` of plugin ``name``'s table (at ``position`` in its list) to ``arch_name``."""
        self.unclaimed(name, arch_name, datapaths, source)
        for dp in datapaths:
            self.by_identity.setdefault((arch_name, datapath_identity(dp)), []).append((name, source, dp))
            for literal in dp.names:
                self.by_literal.setdefault((arch_name, literal), (name, source, dp))
        self.segments.setdefault(arch_name, []).append((name, position, datapaths))

    def declare(self, name: str, position: int, data: dict) -> None:
        """A table that declares an architecture: its name and aliases claimed, its datapaths added."""
        arch = self.build(name, data)
        if arch.name in self.archs:
            # the same plugin declaring one architecture twice is a table error, another plugin a conflict
            held = self.owners[arch.name]
            cls = TableError if held == name else PluginConflict
            raise _Blame(name, cls(
                f"{plugin_manager.describe(name)} ({data['_source']}) declares architecture {arch.name!r}, which "
                f"{self.owner(arch.name)} already declares; a table that adds datapaths to it declares "
                f"[architecture] extends = {arch.name!r}"))
        for alias in (arch.name,) + arch.aliases:
            self.claim(name, arch.name, alias, data["_source"])
        self.archs[arch.name] = arch
        self.owners[arch.name] = name
        self.declared_in[arch.name] = data["_source"]
        self.add(name, position, arch.name, arch.datapaths, data["_source"])

    def extend(self, name: str, position: int, data: dict) -> None:
        """A table that adds datapaths (and aliases) to a declared architecture; it may not change
        how an existing instruction string resolves (:meth:`refuse_defaults`,
        :meth:`refuse_new_meanings`)."""
        target = table_extends(data)
        held = self.index.get(normalize_name(target))
        if held is None or held[0] not in self.archs:
            raise _Blame(name, TableError(
                f"{plugin_manager.describe(name)}: {data['_source']}: [architecture] extends {target!r}, which no "
                f"plugin declares (known: {', '.join(sorted(self.archs))})"))
        arch_name = held[0]
        ext = self.build(name, data)
        datapaths = tuple(attrs.evolve(dp, arch=arch_name) if dp.arch != arch_name else dp
                          for dp in ext.datapaths)
        if self.owners[arch_name] != name:
            self.refuse_defaults(name, arch_name, datapaths, data["_source"])
        self.unclaimed(name, arch_name, datapaths, data["_source"])
        self.refuse_new_meanings(name, arch_name, datapaths, data["_source"])
        new_aliases = []
        for alias in ext.aliases:
            self.claim(name, arch_name, alias, data["_source"])
            if alias not in self.archs[arch_name].aliases and alias not in new_aliases:
                new_aliases.append(alias)
        old = self.archs[arch_name]
        self.archs[arch_name] = attrs.evolve(old, aliases=old.aliases + tuple(new_aliases),
                                             description=old.description or ext.description,
                                             vendor=old.vendor or ext.vendor)
        self.add(name, position, arch_name, datapaths, data["_source"])

    def refuse_defaults(self, name: str, arch_name: str, datapaths, source: str) -> None:
        """An extension of another plugin's architecture declares no ``default_for``."""
        for dp in datapaths:
            if dp.default_for:
                raise _Blame(name, PluginConflict(
                    f"{plugin_manager.describe(name)} ({source}) extends architecture {arch_name!r} "
                    f"(declared by {self.owner(arch_name)}) with a default datapath "
                    f"{_label(dp)}; an extension may not change how {arch_name!r} resolves "
                    "existing instruction strings: remove default_for"))

    def refuse_new_meanings(self, name: str, arch_name: str, datapaths, source: str) -> None:
        """No literal name of ``datapaths`` and (for another plugin's architecture) no string
        mmasim prints for one already resolves on ``arch_name``: a format of the same display name
        as another's would make it resolve twice."""
        for dp in datapaths:
            strings = [(literal, "the literal name") for literal in dp.names]
            if self.owners[arch_name] != name:
                strings.insert(0, (dp.canonical(self.reg.formats), "the instruction string"))
            for text, what in strings:
                clash = _resolves(self.reg, self.archs[arch_name], self.segments[arch_name], text)
                if clash:
                    raise _Blame(name, PluginConflict(
                        f"{plugin_manager.describe(name)} ({source}) gives a datapath {what} {text!r}, "
                        f"which already resolves on architecture {arch_name!r} ({clash}); an extension may "
                        "not change what an existing instruction string means"))


def _table_place(rank: dict, segment: tuple) -> tuple:
    """Where a table's datapaths go: its plugin's place in pluggy's call order, then the
    table's place in the plugin's list."""
    return rank.get(segment[0], 0), segment[1]


def _place_datapaths(reg: Registry, tables: _Architectures, pm) -> None:
    """Every architecture into ``reg`` with its datapaths, and each datapath's plugin.

    The order is pluggy's: the plugins as it calls them (the last registered first), each
    plugin's tables in the order it lists them; an architecture's datapaths table by table in
    that order, the architectures by their first table.
    """
    calls = list(reversed(pm.hook.mmasim_architectures.get_hookimpls()))
    place = functools.partial(_table_place, {impl.plugin_name: i for i, impl in enumerate(calls)})
    first = {a: min(map(place, tables.segments.get(a, [(None, 0, ())]))) for a in tables.archs}
    for arch_name in sorted(tables.archs, key=first.__getitem__):
        parts = sorted(tables.segments.get(arch_name, []), key=place)
        datapaths = tuple(dp for _, _, dps in parts for dp in dps)
        reg.architectures[arch_name] = attrs.evolve(tables.archs[arch_name], datapaths=datapaths)
        for plugin, _, dps in parts:
            for dp in dps:
                reg.datapath_plugins.setdefault(dp, plugin)


def _inherit(reg: Registry, owners: dict) -> None:
    """Each architecture that ``inherits`` another gets its datapaths, relabelled by its own
    ``[[evidence]]`` (:func:`mmasim.registry.tables.inherit`); the parent must be declared and
    inherit nothing itself."""
    describe = plugin_manager.describe
    for arch_name, arch in list(reg.architectures.items()):
        if not arch.inherits:
            continue
        parent = reg.architectures.get(arch.inherits)
        if parent is None or parent.inherits:
            raise _Blame(owners[arch_name], TableError(
                f"{describe(owners[arch_name])}: architecture {arch_name!r} inherits {arch.inherits!r}, "
                "which is not a declared architecture (or itself inherits)"))
        try:
            reg.architectures[arch_name] = inherit(arch, parent)
        except TableError as exc:
            raise _Blame(owners[arch_name], TableError(f"{describe(owners[arch_name])}: {exc}")) from exc
        for dp in reg.architectures[arch_name].datapaths:
            reg.datapath_plugins.setdefault(dp, owners[arch_name])


def _check_layout_claims(reg: Registry, owner_of: dict) -> None:
    """A third-party register layout may not place an operand of another plugin's datapath
    that another plugin's layout places (:func:`mmasim.placement.claims.taken`)."""
    describe = plugin_manager.describe
    rules = [(name, r) for name, r in reg.layouts.items() if isinstance(r, FragmentRule)]
    for name, rule in rules:
        plugin = owner_of[name]
        if plugin_manager.is_builtin(plugin):
            continue
        others = [r for other, r in rules if owner_of[other] != plugin]
        datapaths = [dp for arch in reg.architectures.values() for dp in arch.datapaths
                     if reg.datapath_plugins.get(dp) != plugin]
        claim = taken(rule, others, datapaths, reg.formats, reg.family)
        if claim is not None:
            dp = claim.datapath
            shape = "".join(f"{x}{v}" for x, v in (("m", claim.m), ("n", claim.n)) if v is not None and v >= 0)
            raise _Blame(plugin, PluginConflict(
                f"{describe(plugin)} registers layout {rule.name!r}, which would place operand "
                f"{claim.operand} of {dp.arch}: {_label(dp)}{' at ' + shape if shape else ''} (a datapath of "
                f"{describe(reg.datapath_plugins.get(dp, reg.owners.get(dp.arch, '?')))}), which layout "
                f"{claim.held.name!r} of {describe(owner_of[claim.held.name])} already places; a plugin's "
                "layouts place its own datapaths' operands, and operands no other plugin's layout places"))


def _resolves(reg: Registry, arch: Architecture, segments: list, instruction: str) -> str:
    """What ``instruction`` resolves to on ``arch`` as it stands (its datapaths so far), or ''."""
    current = attrs.evolve(arch, datapaths=tuple(dp for _, _, dps in segments for dp in dps))
    probe = attrs.evolve(reg, architectures={arch.name: current}, arch_index={normalize_name(arch.name): arch.name})
    try:
        dp = datapath_of(probe, arch.name, instruction, {})
    except UnknownInstruction:
        return ""
    except MMAError as exc:
        return f"{type(exc).__name__}"
    except Exception:  # noqa: BLE001 - a string the parser cannot read resolves to nothing
        return ""
    owner = next((plugin for plugin, _, dps in segments if dp in dps), None)
    return _label(dp) + (f" of {plugin_manager.describe(owner)}" if owner else "")


def build_registry() -> Registry:
    """Build the registry from every registered plugin, leaving out the third-party ones that fail.

    A built-in plugin that fails raises its error (a bug in mmasim).  The checks:

    - a name (format, decoder, accumulator, encoding, layout, (backend, family) kernel, backend,
      instruction family, quantization scheme, architecture or alias; a scheme may not take a
      format's key, the name of its plain cast) or a datapath (:func:`datapath_identity`) that another plugin already
      owns is a :class:`~mmasim.errors.PluginConflict` naming both plugins (two
      tables of one plugin giving one architecture the same datapath, a
      :class:`~mmasim.errors.TableError`); so is a register layout that would place
      an operand of another plugin's datapath which another plugin's layout places
      (:mod:`mmasim.placement.claims`);
    - a table adds datapaths to an architecture another table declares only with
      ``[architecture] extends = "<name>"``; such datapaths may not declare
      ``default_for``, and neither their literal names nor (for another plugin's
      architecture) their printed instruction strings may already resolve there (each
      would change how the existing architecture resolves an instruction string);
    - every accumulator is an :class:`~mmasim.accumulators.Accumulator` record
      (a plain function is wrapped in one), checked as it registers
      (:meth:`~mmasim.accumulators.Accumulator.check`);
    - a table that ``inherits`` another architecture gets its datapaths, relabelled
      by its own ``[[evidence]]`` (:func:`mmasim.registry.tables.inherit`);
    - a hook that raises or returns the wrong type is a
      :class:`~mmasim.errors.PluginError`, an invalid table a
      :class:`~mmasim.errors.TableError`;
    - decoders of third-party plugins are wrapped so that output of the wrong shape
      is a ``PluginError`` naming the plugin.
    """
    pm = plugin_manager.get_plugin_manager()
    order, results, failures = _contributions(pm)
    for name, error in failures.items():
        if plugin_manager.is_builtin(name):
            raise error
    while True:
        active = [name for name in order if name not in failures]
        try:
            reg = _assemble(active, results, pm)
        except _Blame as blame:
            if plugin_manager.is_builtin(blame.plugin):
                raise blame.error from blame.error.__cause__
            failures[blame.plugin] = blame.error
            continue
        reg.failures = failures
        return reg


_registry: Registry | None = None


def get_registry() -> Registry:
    global _registry
    if _registry is None:
        reg = build_registry()
        _registry = reg
        plugin_manager.report_failures(reg.failures)
    return _registry


def install_registry(reg: Registry) -> None:
    """Use ``reg`` (built by :func:`build_registry`) as the registry and report its failures."""
    global _registry
    _registry = reg
    plugin_manager.report_failures(reg.failures)


def reset_registry() -> None:
    global _registry
    _registry = None
