"""Registration: register, unregister and list the plugins; the registry is rebuilt from them.

Joins the plugin manager (:mod:`mmasim.registry.manager`: the built-ins of
:data:`mmasim.DEFAULT_PLUGINS` and the ``mmasim`` entry points) and the registry built from them
(:mod:`mmasim.registry.build`); neither imports this module.  Gives :func:`register`,
:func:`unregister`, :func:`status` and :func:`reset`.  A plugin that fails while the registry
is built is skipped and reported once as a :class:`~mmasim.errors.PluginWarning`; one given to
:func:`register` is removed again and its error raised; a failing built-in plugin is a bug,
raised.  The rules: docs/plugins.md, "Isolation and conflicts".
"""

from __future__ import annotations

import attrs

from mmasim.registry import manager as plugin_manager
from mmasim.registry import build as registry
from mmasim.registry.hookspecs import hookimpl
from mmasim.registry.manager import (
    SOURCES,
    PluginStatus,
    describe,
    entry_points,
    get_plugin_manager,
    is_builtin,
    plugin_status,
    report_failures,
)


def _unavailable(pm) -> dict:
    """``{plugin name: reason}`` from the ``mmasim_unavailable`` hook (a hook that raises
    makes its plugin unavailable, the failure its reason)."""
    out = {}
    for impl in pm.hook.mmasim_unavailable.get_hookimpls():
        try:
            why = impl.function()
        except Exception as exc:  # noqa: BLE001 - the plugin's failure, named
            why = f"hook mmasim_unavailable() failed: {type(exc).__name__}: {exc}"
        if why:
            out[impl.plugin_name] = str(why)
    return out


def status() -> list:
    """Every plugin, built-in or third-party, as a :class:`PluginStatus` (``ok`` or its
    ``error``; ``unavailable``: why what a loaded plugin adds cannot be used here)."""
    failures = registry.get_registry().failures
    pm = get_plugin_manager()
    unavailable = _unavailable(pm)
    out = []
    for name, plugin in pm.list_name_plugin():
        if plugin is None:
            continue
        error = failures.get(name)
        out.append(attrs.evolve(plugin_status(name), ok=error is None,
                                error=None if error is None else str(error), unavailable=unavailable.get(name)))
    return out + plugin_manager.failed()


def register(plugin, name: str | None = None) -> None:
    """Register a plugin object or module at run time and rebuild the registry.

    A plugin that fails (a hook raises or returns the wrong type, an invalid
    table, a name or datapath another plugin owns) is unregistered again and
    its error raised: :class:`~mmasim.errors.PluginError`,
    :class:`~mmasim.errors.PluginConflict` or :class:`~mmasim.errors.TableError`.
    """
    name = plugin_manager.add(plugin, name)
    registry.reset_registry()
    reg = registry.build_registry()
    error = reg.failures.get(name)
    if error is not None:
        plugin_manager.remove(name=name)
        registry.reset_registry()
        raise error
    registry.install_registry(reg)


def unregister(plugin=None, name: str | None = None) -> None:
    """Remove a plugin registered with :func:`register`."""
    plugin_manager.remove(plugin=plugin, name=name)
    registry.reset_registry()


def reset() -> None:
    """Forget every plugin and the registry: the next use loads the built-ins and the
    entry points afresh (plugins added with :func:`register` are gone)."""
    plugin_manager.forget()
    registry.reset_registry()


__all__ = ["hookimpl", "SOURCES", "PluginStatus", "describe", "entry_points",
           "get_plugin_manager", "is_builtin", "plugin_status", "report_failures", "status", "register",
           "unregister", "reset"]
