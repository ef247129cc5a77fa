"""The harness's table: each instruction family's emitter and the device class its kernels run
on, by family name (the ``op`` of its datapaths).

An emitter is a module (or any object with its functions: ``specs``, ``place``, ``read``,
``source``, ``build_line``, ``simulate``) that writes and reads one family's kernels; a device
class is what ``harness run`` builds when given no device (``info()``, ``run``,
``expected(target)``, ``reports``: :class:`mmasim.harness.measure.Device`).  The built-in families'
are :data:`EMITTERS` and :data:`DEVICES`; a plugin that registers a family of its own
(``mmasim_families``) gives its emitter and device class through the ``mmasim_harness_emitters``
and ``mmasim_harness_devices`` hooks (docs/plugins.md, "Harness emitters and devices").  An
entry is the module or class itself, or its dotted name (``"pkg.module"``, ``"pkg.module.Class"``),
imported when the harness first uses it.  A family has one emitter and one device class: a
plugin that gives another for a family that has one is a :class:`~mmasim.errors.PluginConflict`;
a plugin the registry left out gives none.  The registry and the family records name no harness
module: this table does.
"""

from __future__ import annotations

import importlib

import attrs

from mmasim.errors import PluginConflict, PluginError, UnsupportedDatapath
from mmasim.registry.build import get_registry
from mmasim.registry.manager import describe, get_plugin_manager

#: the built-in families' emitters
EMITTERS = {
    "mma.sync": "mmasim.harness.nv_sync",
    "wgmma.mma_async": "mmasim.harness.nv_async",
    "tcgen05.mma": "mmasim.harness.nv_tcgen05",
    "v_mfma": "mmasim.harness.amd",
    "v_smfmac": "mmasim.harness.amd",
}
#: the built-in families' device classes: an NVIDIA GPU through nvcc, an AMD GPU through hipcc
DEVICES = {
    "mma.sync": "mmasim.harness.measure.CudaDevice",
    "wgmma.mma_async": "mmasim.harness.measure.CudaDevice",
    "tcgen05.mma": "mmasim.harness.measure.CudaDevice",
    "v_mfma": "mmasim.harness.amd.HipDevice",
    "v_smfmac": "mmasim.harness.amd.HipDevice",
}

#: what each kind of entry is, its built-in table and the hook plugins give theirs through
KINDS = {"emitter": (EMITTERS, "mmasim_harness_emitters"), "device class": (DEVICES, "mmasim_harness_devices")}


@attrs.frozen
class Entry:
    """One family's emitter or device class: the object or its dotted name, and who gives it."""

    kind: str = attrs.field(validator=attrs.validators.in_(tuple(KINDS)))
    value: object
    owner: str                      # "the harness's table", or the plugin as messages name it

    @property
    def name(self) -> str:
        """The dotted name: ``"pkg.module"`` of an emitter, ``"pkg.module.Class"`` of a device class."""
        if isinstance(self.value, str):
            return self.value
        if isinstance(self.value, type):
            return f"{self.value.__module__}.{self.value.__qualname__}"
        return getattr(self.value, "__name__", None) or repr(self.value)

    def load(self):
        """The emitter or class itself (imported by its name); ImportError / AttributeError when
        it is not there."""
        if not isinstance(self.value, str):
            return self.value
        if self.kind == "emitter":
            return importlib.import_module(self.value)
        module, _, name = self.value.rpartition(".")
        return getattr(importlib.import_module(module), name)

    def same(self, other: "Entry") -> bool:
        return self.value is other.value or self.name == other.name


def _checked(kind: str, hook: str, where: str, result) -> dict:
    """A plugin's ``hook`` result, or :class:`~mmasim.errors.PluginError` naming what is wrong."""
    if not isinstance(result, dict):
        raise PluginError(f"{where}: hook {hook}() must return a dict family name -> {kind}, "
                          f"not {type(result).__name__}")
    for family, value in result.items():
        wrong = value is None or (kind == "device class" and not isinstance(value, (str, type)))
        if not isinstance(family, str) or wrong:
            want = "a class or its dotted name" if kind == "device class" else "a module or its dotted name"
            raise PluginError(f"{where}: hook {hook}() must map family names (str) to {want}, not "
                              f"{family!r} -> {type(value).__name__}")
    return result


def entry(kind: str, family: str) -> Entry | None:
    """The ``kind`` (``"emitter"`` or ``"device class"``) of instruction family ``family``: the
    harness's own, else the one a plugin gives; ``None`` when there is none."""
    builtin, hook = KINDS[kind]
    held = Entry(kind, builtin[family], "the harness's table") if family in builtin else None
    left_out = get_registry().failures
    for impl in getattr(get_plugin_manager().hook, hook).get_hookimpls():    # in registration order
        if impl.plugin_name in left_out:
            continue
        where = describe(impl.plugin_name)
        try:
            result = impl.function()
        except Exception as exc:  # noqa: BLE001 - any failure is the plugin's
            raise PluginError(f"{where}: hook {hook}() raised {type(exc).__name__}: {exc}") from exc
        result = _checked(kind, hook, where, result)
        if family not in result:
            continue
        given = Entry(kind, result[family], where)
        if held is None:
            held = given
        elif not held.same(given):
            raise PluginConflict(f"{where} gives the {family} instructions the {kind} {given.name}, but "
                                 f"{held.owner} already gives them {held.name}; a plugin gives the harness "
                                 "entries of its own instruction families")
    return held


def emitter(family: str) -> Entry | None:
    """The emitter of instruction family ``family`` (``None``: ``harness generate`` lists its
    instructions as not generated)."""
    return entry("emitter", family)


def device(family: str) -> Entry | None:
    """The device class of instruction family ``family`` (``None``: ``harness run`` refuses its
    instructions)."""
    return entry("device class", family)


def emits(model, module: str) -> bool:
    """Whether ``module`` (a dotted name) is the emitter of ``model``'s instruction family."""
    held = emitter(model.family.name)
    return held is not None and held.name == module


def refuse_unless_emitted_by(model, module: str) -> None:
    """:class:`~mmasim.errors.UnsupportedDatapath` unless ``module`` emits ``model``'s instructions."""
    if not emits(model, module):
        held = emitter(model.family.name)
        raise UnsupportedDatapath(f"{model.instruction}: not a {module} instruction (its emitter is "
                                  f"{held.name if held else None})")


__all__ = ["EMITTERS", "DEVICES", "Entry", "entry", "emitter", "device", "emits", "refuse_unless_emitted_by"]
