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


class QualifierValueError(MMAError, ValueError):
    """A keyword qualifier of ``MMA(...)`` (or of a vector file's ``qualifiers``) whose value is
    not one its type accepts: a format name, a kind, ``"1X"``/``"2X"``/``"4X"``, a block size,
    ``True``/``False``; the message lists the accepted values."""


class OperandError(MMAError, ValueError):
    """An operand has the wrong shape, dtype, word range, scale count or sparse selector."""


class ShapeError(OperandError):
    """Operand shapes do not fit the instruction (K, batch shape, matrix shape)."""


class DtypeError(OperandError):
    """An operand array has a dtype that cannot carry the operand's container words."""


class WordRangeError(OperandError):
    """A container word lies outside the container's range."""


class WordSyntaxError(OperandError):
    """A word written as text (the command line) that is not hex digits with an optional ``0x``."""


class ScaleError(OperandError):
    """Scale arrays are missing, unexpected, or have the wrong number of blocks."""


class SparseMetadataError(OperandError):
    """Sparse metadata is missing, has the wrong shape, or holds an illegal selector."""


class GemmOptionError(OperandError):
    """A GEMM composition option (``promote_every``, ``split_k``, ``split_reduce``, ``alpha``,
    ``beta``, ``out_format``, ``saturate``, promotion scales) that does not fit the operands or
    the instruction."""


class AccuracyError(MMAError, ValueError):
    """An accuracy study that cannot run: an unknown input distribution, an input format with no
    cast, a scheme without :mod:`mmasim.quantize`, inputs whose exact result is not a number."""


class UnknownOption(OperandError, TypeError):
    """A keyword argument a layout call (``layout``, ``fragments``, ``unfragment``, ``warp``) does
    not take (a ``TypeError`` too, as Python's own unknown keywords)."""


class CopyMismatch(OperandError):
    """A Tensor Memory image whose duplicated lane groups (a layout's ``copies``) hold different words."""


class QuantizeError(MMAError, ValueError):
    """A float tensor that ``mmasim.quantize`` cannot convert as asked (an option value it does not
    accept; the subclasses below name the other problems)."""


class UnknownScheme(QuantizeError, LookupError):
    """A quantization scheme (or element container) ``mmasim.quantize`` does not know; the
    message lists the accepted names."""


class BlockShapeError(QuantizeError):
    """The tensor's shape does not fit the scheme's blocks: a bad ``axis``, an axis length that is
    not a multiple of the block, a tile that does not divide the tensor."""


class NonFiniteError(QuantizeError):
    """A NaN or infinity that the NaN policy (``nan=``) or the scheme refuses, or a NaN for a
    format without one."""


class FormatRangeError(QuantizeError):
    """A finite value that rounds past the largest finite value of a format without infinity,
    and saturation was not asked for."""


class EmulationError(MMAError, ValueError):
    """An ``mmasim.torch`` setting that cannot be used: an :class:`~mmasim.torch.Emulation` field
    whose value is not one it accepts (the message names the field and what it takes), an
    ``emulation=`` that is neither an ``Emulation`` nor a preset name, or an ``emulate()`` model
    that is neither a ``torch.nn.Module`` nor ``None``."""


class UnknownPreset(EmulationError, LookupError):
    """A preset name ``mmasim.torch`` does not know; the message gives close matches and every preset."""


class NotEmulated(EmulationError):
    """An op inside ``mmasim.torch.emulate(..., on_unsupported="raise")`` that multiplies matrices
    but is not emulated (``torch._scaled_mm``, a sparse or complex operand, ...); the message names
    the op, the module and why."""


class NotEmulatedWarning(UserWarning):
    """The warning ``mmasim.torch.emulate`` gives (by default) for an op that multiplies matrices
    but runs in torch's own arithmetic; the message names the op, the module and why."""


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
    """A third-party plugin was skipped (``mmasim.registry.registration.status()`` says why)."""


class HarnessError(MMAError):
    """The hardware harness cannot run: no GPU, a device that is not the architecture, a failed
    build or run of a generated kernel (``mmasim harness``)."""


class ToolchainError(HarnessError):
    """No compiler (nvcc) for a target, or the compiler rejected a generated source."""


class CharacterizeError(MMAError, ValueError):
    """An instruction the probe ladders cannot characterize (integer operands), or a vector file
    without the probe cases (mmasim.characterize)."""
