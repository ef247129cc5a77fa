"""MMA-Sim's import paths as aliases: ``import mmasim.nv_ptx.sim``, ``from mmasim.nv_ptx.sim import
MMA``, ``from mmasim.nv_ptx import MMA``, ``mmasim.amd.sim.MFMA`` work as MMA-Sim's users write
them, though no folder ``mmasim/nv_ptx/`` or ``mmasim/amd/`` exists.

``mmasim.nv_ptx.sim`` *is* :mod:`mmasim.mma_sim_compat.nv_ptx` (the same module object, so its
classes are the same classes); ``mmasim.nv_ptx`` is a package holding that module's names, as
MMA-Sim's ``nv_ptx/__init__.py`` does.  Likewise ``mmasim.amd`` for
:mod:`mmasim.mma_sim_compat.amd`.  :func:`install` puts the finder first on ``sys.meta_path``
(it answers for the two package names only; a module is imported when one is asked for, not before);
``mmasim/__init__.py`` calls it.  Imports nothing of mmasim until an alias is imported.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys

#: MMA-Sim's package path -> the module of this package it holds as ``sim``, and whose names it has
PACKAGES = {"mmasim.nv_ptx": "mmasim.mma_sim_compat.nv_ptx", "mmasim.amd": "mmasim.mma_sim_compat.amd"}


class AliasFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds and loads the package aliases of :data:`PACKAGES`, nothing else.  Loading one puts
    its home module in ``sys.modules`` as ``<alias>.sim`` too, so that ``import mmasim.nv_ptx.sim``
    finds the home module itself there (its own ``__spec__`` untouched)."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname in PACKAGES:
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        return None             # a new, empty package module

    def exec_module(self, module):
        home = importlib.import_module(PACKAGES[module.__name__])
        module.__doc__ = (f"MMA-Sim's import path {module.__name__}: the names of {home.__name__}, "
                          f"which is also {module.__name__}.sim (mmasim.mma_sim_compat.paths).")
        module.__dict__.update({name: getattr(home, name) for name in home.__all__})
        module.__all__ = list(home.__all__)
        module.sim = home
        sys.modules[f"{module.__name__}.sim"] = home


FINDER = AliasFinder()


def install() -> None:
    """Put :data:`FINDER` first on ``sys.meta_path`` (once)."""
    if FINDER not in sys.meta_path:
        sys.meta_path.insert(0, FINDER)


__all__ = ["PACKAGES", "AliasFinder", "FINDER", "install"]
