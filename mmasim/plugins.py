"""The plugin manager: registers the built-ins, loads third-party entry points.

Built-in parts are plugins like any other: the core's own parts
(:mod:`mmasim.builtins`) and the built-in architectures listed in
``DEFAULT_PLUGINS``.  Third-party plugins come from the ``mmasim`` entry-point
group or from :func:`register`.
"""

from __future__ import annotations

import importlib

import pluggy

from . import hookspecs

hookimpl = pluggy.HookimplMarker("mmasim")

DEFAULT_PLUGINS = (
    "mmasim.builtins",
    "mmasim_plugins.blackwell",
    "mmasim_plugins.volta",
    "mmasim_plugins.turing",
    "mmasim_plugins.ampere",
    "mmasim_plugins.ada_lovelace",
    "mmasim_plugins.hopper",
    "mmasim_plugins.blackwell_mma_sync",
    "mmasim_plugins.rtx_blackwell",
    "mmasim_plugins.amd_cdna",
)

_manager: pluggy.PluginManager | None = None


def get_plugin_manager() -> pluggy.PluginManager:
    """The process-wide plugin manager (built on first use)."""
    global _manager
    if _manager is None:
        pm = pluggy.PluginManager("mmasim")
        pm.add_hookspecs(hookspecs)
        for name in DEFAULT_PLUGINS:
            pm.register(importlib.import_module(name), name=name)
        pm.load_setuptools_entrypoints("mmasim")
        _manager = pm
    return _manager


def register(plugin, name: str | None = None) -> None:
    """Register a plugin object or module at run time and rebuild the registry."""
    get_plugin_manager().register(plugin, name=name)
    from .registry import reset_registry

    reset_registry()


def unregister(plugin=None, name: str | None = None) -> None:
    """Remove a plugin registered with :func:`register`."""
    get_plugin_manager().unregister(plugin=plugin, name=name)
    from .registry import reset_registry

    reset_registry()
