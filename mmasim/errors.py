"""Exceptions raised by mmasim.  Every error a user can provoke derives from MMAError."""


class MMAError(Exception):
    """Base class of every mmasim error."""


class UnknownArchitecture(MMAError, LookupError):
    """The architecture name matches no registered architecture."""


class UnknownInstruction(MMAError, LookupError):
    """The instruction string matches no datapath of the architecture."""


class AmbiguousInstruction(MMAError, LookupError):
    """The instruction string (and qualifiers) leave several datapaths open."""

    def __init__(self, message, candidates=()):
        super().__init__(message)
        self.candidates = tuple(candidates)


class OperandError(MMAError, ValueError):
    """An operand has the wrong shape, dtype, word range, scale count or sparse selector."""


class ShapeError(OperandError):
    """Operand shapes do not fit the instruction (K, batch shape, matrix shape)."""


class DtypeError(OperandError):
    """An operand array has a dtype that cannot carry the operand's container words."""


class WordRangeError(OperandError):
    """A container word lies outside the container's range."""


class ScaleError(OperandError):
    """Scale arrays are missing, unexpected, or have the wrong number of blocks."""


class SparseMetadataError(OperandError):
    """Sparse metadata is missing, has the wrong shape, or holds an illegal selector."""


class UnknownOption(OperandError, TypeError):
    """A keyword argument a layout call (``layout``, ``fragments``, ``unfragment``, ``warp``) does
    not take (a ``TypeError`` too, as Python's own unknown keywords)."""


class CopyMismatch(OperandError):
    """A Tensor Memory image whose duplicated lane groups (a layout's ``copies``) hold different words."""


class ThreadCountError(MMAError, ValueError):
    """A thread count (the ``threads=`` argument or ``MMASIM_THREADS``) that is not a positive integer."""


class UnsupportedDatapath(MMAError):
    """The instruction exists but its arithmetic was never measured and is refused."""


class TableError(MMAError):
    """An architecture table (TOML) or plugin registration is malformed."""


class UnknownQualifier(MMAError, TypeError):
    """A keyword qualifier of ``MMA(...)`` that no lookup accepts (a ``TypeError`` too)."""


class PluginError(MMAError):
    """A plugin failed: its entry point does not import, a hook raised or returned the
    wrong type, or a part it registered (a decoder, a table) misbehaves."""


class PluginConflict(PluginError):
    """Two plugins register the same name (architecture, alias, format, decoder,
    accumulator, encoding, layout) or the same datapath; the message names both."""


class PluginWarning(UserWarning):
    """A third-party plugin was skipped (``mmasim.plugins.status()`` says why)."""


class HarnessError(MMAError):
    """The hardware harness cannot run: no GPU, a device that is not the architecture, a failed
    build or run of a generated kernel (``mmasim harness``)."""


class ToolchainError(HarnessError):
    """No compiler (nvcc) for a target, or the compiler rejected a generated source."""


class CharacterizeError(MMAError, ValueError):
    """An instruction the probe ladders cannot characterize (integer operands), or a vector file
    without the probe cases (mmasim.characterize)."""
