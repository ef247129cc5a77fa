"""The plugin manager: the built-ins it is handed and the entry points, and what is known of each plugin.

The built-in plugins are named at the top of the package (:data:`mmasim.DEFAULT_PLUGINS`),
which imports them and hands them here through :func:`use_builtins`; this module names no
plugin and imports none, so no path runs from the registry up to a plugin and back.  Owns the
``mmasim`` entry-point group, loaded one by one: one that does not import or register is
skipped and reported (:func:`failed`, :class:`PluginStatus`).  Gives :func:`get_plugin_manager`,
:func:`add` / :func:`remove` for :func:`mmasim.registry.registration.register`, and :func:`forget`.
Knows nothing of the registry built from the plugins (:mod:`mmasim.registry.build` uses this
module; :mod:`mmasim.registry.registration` joins the two), so the import graph has no circle.
"""

from __future__ import annotations

import importlib.metadata
import warnings
from typing import Callable, Iterable

import attrs
import pluggy

from mmasim.registry import hookspecs
from mmasim.errors import PluginConflict, PluginError, PluginWarning

#: Where a plugin came from (``PluginStatus.source``).
SOURCES = ("builtin", "entry point", "register()")


@attrs.frozen
class PluginStatus:
    """One plugin: where it came from, and whether it is in use (``ok``) or skipped (``error``)."""

    name: str
    source: str = attrs.field(validator=attrs.validators.in_(SOURCES))
    distribution: str | None = None     # "name version" of the distribution (entry points)
    entry_point: str | None = None      # "name = module:attr" (entry points)
    ok: bool = True
    error: str | None = None
    unavailable: str | None = None      # loaded, but what it adds cannot be used here, and why

    def describe(self) -> str:
        """The plugin as error messages name it."""
        if self.source == "builtin":
            return f"built-in plugin {self.name!r}"
        if self.source == "entry point":
            dist = f" of distribution {self.distribution}" if self.distribution else ""
            return f"plugin {self.name!r} (entry point {self.entry_point}{dist})"
        return f"plugin {self.name!r} (registered with mmasim.register)"


_manager: pluggy.PluginManager | None = None
_builtins: Callable[[], Iterable[tuple[str, object]]] | None = None   # handed by use_builtins
_known: dict[str, PluginStatus] = {}   # registered plugins, by name
_failed: list[PluginStatus] = []       # entry points that could not be loaded
_reported: set = set()                 # (name, error) already warned about


def entry_points():
    """The ``mmasim`` entry points of the installed distributions."""
    return importlib.metadata.entry_points(group="mmasim")


def use_builtins(load: Callable[[], Iterable[tuple[str, object]]]) -> None:
    """Hand the manager its built-in plugins: ``load()`` gives ``(name, plugin)`` pairs in
    registration order, imported by the caller.  ``import mmasim`` does this (its
    :data:`~mmasim.DEFAULT_PLUGINS`); the manager calls ``load`` when it is first built, and
    again after :func:`forget`."""
    global _builtins
    _builtins = load


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager (built on first use)."""
    global _manager
    if _manager is None:
        if _builtins is None:
            raise PluginError("the plugin manager was handed no built-in plugins: `import mmasim` hands them "
                              "(mmasim.DEFAULT_PLUGINS, through mmasim.registry.manager.use_builtins)")
        pm = pluggy.PluginManager("mmasim")
        pm.add_hookspecs(hookspecs)
        for name, plugin in _builtins():   # a built-in that does not import is a bug: raise
            pm.register(plugin, name=name)
            _known[name] = PluginStatus(name, "builtin")
        _manager = pm
        _load_entry_points(pm)
    return _manager


def _distribution(ep) -> str | None:
    dist = getattr(ep, "dist", None)
    if dist is None:
        return None
    try:
        return f"{dist.metadata['Name']} {dist.version}"
    except Exception:  # noqa: BLE001 - broken metadata only loses the label
        return None


def _load_entry_points(pm: pluggy.PluginManager) -> None:
    try:
        eps = list(entry_points())
    except Exception as exc:  # noqa: BLE001 - unreadable metadata must not take mmasim down
        warnings.warn_explicit(f"cannot list the 'mmasim' entry points: {exc}", PluginWarning,
                               filename="mmasim", lineno=0, module="mmasim.registry.registration")
        return
    for ep in eps:
        info = PluginStatus(ep.name, "entry point", _distribution(ep), f"{ep.name} = {ep.value}")
        if pm.is_blocked(ep.name):
            continue
        if ep.name in _known:
            error = PluginConflict(f"{info.describe()}: the plugin name {ep.name!r} is already taken by "
                                   f"{_known[ep.name].describe()}")
        else:
            try:
                plugin = ep.load()
            except Exception as exc:  # noqa: BLE001 - any import failure skips this plugin only
                error = PluginError(f"{info.describe()}: cannot import {ep.value}: {type(exc).__name__}: {exc}")
            else:
                try:
                    pm.register(plugin, name=ep.name)
                    _known[ep.name] = info
                    continue
                except Exception as exc:  # noqa: BLE001 - pluggy validation, name clashes
                    error = PluginError(f"{info.describe()}: cannot register: {type(exc).__name__}: {exc}")
        failed = attrs.evolve(info, ok=False, error=str(error))
        _failed.append(failed)
        _report(failed.name, error)


def plugin_status(name: str) -> PluginStatus:
    """What is known of the registered plugin ``name`` (``ok`` not yet filled in)."""
    return _known.get(name) or PluginStatus(name, "register()")


def is_builtin(name: str) -> bool:
    return plugin_status(name).source == "builtin"


def describe(name: str) -> str:
    """The plugin ``name`` as error messages name it (distribution and entry point if any)."""
    return plugin_status(name).describe()


def _report(name: str, error: Exception) -> None:
    key = (name, str(error))
    if key in _reported:
        return
    _reported.add(key)
    # one line on stderr: no source line to quote (the culprit is the plugin, not a caller)
    warnings.warn_explicit(f"{error}; the plugin is skipped", PluginWarning, filename="mmasim", lineno=0,
                           module="mmasim.registry.registration")


def report_failures(failures: dict) -> None:
    """Warn once about each plugin the registry skipped (``name -> error``)."""
    for name, error in failures.items():
        _report(name, error)


def add(plugin, name: str | None) -> str:
    """Register ``plugin`` (a :func:`mmasim.registry.registration.register` call) and return its name.

    A taken name is a :class:`~mmasim.errors.PluginConflict`, a plugin pluggy
    refuses a :class:`~mmasim.errors.PluginError`.
    """
    pm = get_plugin_manager()
    if name is not None and pm.get_plugin(name) is not None:
        raise PluginConflict(f"plugin {name!r}: the name is already taken by {describe(name)}")
    try:
        name = pm.register(plugin, name=name)
    except ValueError as exc:
        raise PluginConflict(f"plugin {name!r}: {exc}") from exc
    except pluggy.PluginValidationError as exc:
        raise PluginError(f"plugin {name!r}: {exc}") from exc
    if name is None:
        raise PluginError("the plugin's name is blocked in the plugin manager")
    _known[name] = PluginStatus(name, "register()")
    return name


def remove(plugin=None, name: str | None = None) -> None:
    """Unregister a plugin and forget what is known of it."""
    pm = get_plugin_manager()
    pm.unregister(plugin=plugin, name=name)
    for key in [k for k in _known if pm.get_plugin(k) is None]:
        del _known[key]


def failed() -> list:
    """The entry points that could not be loaded, as :class:`PluginStatus` with their error."""
    return list(_failed)


def forget() -> None:
    """Forget every plugin: the next use loads the built-ins and the entry points afresh."""
    global _manager
    _manager = None
    _known.clear()
    _failed.clear()
    _reported.clear()
