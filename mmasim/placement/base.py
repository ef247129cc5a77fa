"""The common base of every layout object the ``mmasim_layouts`` hook accepts."""


class Layout:
    """Base class of :class:`ResultSlice`, :class:`SmemLayout` (and
    :class:`CoreMatrixLayout`) and :class:`FragmentRule`: the registry keys them by
    ``name`` and filters them by ``arch``."""

    __slots__ = ()
