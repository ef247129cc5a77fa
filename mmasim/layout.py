"""Compatibility module: the layout classes live in :mod:`mmasim.placement`.

``ResultSlice`` (the (thread, register) words of a load that carry results) and
``CoreMatrixLayout`` (the no-swizzle K-major shared-memory layout in element
units, an instance of :class:`mmasim.placement.SmemLayout`) are re-exported here
for plugins written against this module.
"""

from .placement import CoreMatrixLayout, FragmentRule, Layout, ResultSlice, SmemLayout  # noqa: F401

LAYOUT_TYPES = (Layout,)

__all__ = ["ResultSlice", "CoreMatrixLayout", "SmemLayout", "FragmentRule", "Layout", "LAYOUT_TYPES"]
