"""mmasim: bit-exact simulation of GPU matrix-multiply-accumulate instructions.

This module is the public API; the packages under it are laid out by layer, lowest
first, in docs/architecture.md.  It also names the built-in plugins
(:data:`DEFAULT_PLUGINS`), imports them and hands them to the registry's plugin manager, so
that no module below the top names or imports a plugin.

>>> import mmasim
>>> m = mmasim.MMA("B200", "tcgen05.mma.kind::tf32")
>>> hex(int(m.dot([0x3F800000] * 8, [0x3F800000] * 8, 0)))
'0x41000000'
"""

from importlib import import_module as _import_module

from mmasim.errors import (
    AccuracyError,
    AmbiguousInstruction,
    BlockShapeError,
    CopyMismatch,
    DtypeError,
    EmulationError,
    FormatRangeError,
    GemmOptionError,
    MMAError,
    NonFiniteError,
    NotEmulated,
    OperandError,
    PluginConflict,
    PluginError,
    QualifierValueError,
    QuantizeError,
    ScaleError,
    ShapeError,
    SparseMetadataError,
    TableError,
    ThreadCountError,
    UnknownArchitecture,
    UnknownInstruction,
    UnknownOption,
    UnknownPreset,
    UnknownQualifier,
    UnknownScheme,
    UnsupportedDatapath,
    WordRangeError,
    WordSyntaxError,
)
from mmasim.composition.gemm import gemm
from mmasim.accuracy import accuracy
from mmasim.registry.lookup import resolve_arch
from mmasim.execution.model import Model
from mmasim.registry import manager as _plugin_manager
from mmasim.registry.hookspecs import hookimpl
from mmasim.registry.registration import register, unregister
from mmasim.quantization.quantize import Quantized, quantize
from mmasim.quantization.quantize import schemes as quantize_schemes
from mmasim.registry.build import get_registry
from mmasim.mma_sim_compat.paths import install as _install_mma_sim_paths

__version__ = "0.1.0"
#: the distribution name (pip install mmasim-exact); PyPI's "mmasim" is MMA-Sim, another project
DISTRIBUTION = "mmasim-exact"

#: The built-in plugins, registered in this order before any entry point: the core's parts, the
#: backends and their compiled kernels, the quantization schemes, the instruction families, every
#: table in ``archs/``, and the architectures whose code differs from the core's (B200 layouts,
#: RTX Blackwell's e2m1 container).
DEFAULT_PLUGINS = (
    "mmasim.registry.core_parts",
    # the built-in backends (mmasim_backends) and their kernels (mmasim_kernels)
    "mmasim.backends.numpy",
    "mmasim.backends.numba",
    "mmasim.backends.cuda.backend",
    "mmasim.quantization.schemes",
    "mmasim_plugins.families",
    "mmasim_plugins.archs",
    "mmasim_plugins.blackwell",
    "mmasim_plugins.rtx_blackwell",
)


def _builtin_plugins() -> list:
    """``[(name, module)]`` of :data:`DEFAULT_PLUGINS`, imported here, at the top of the package
    (a built-in that does not import is a bug: its ImportError is raised)."""
    return [(name, _import_module(name)) for name in DEFAULT_PLUGINS]


_plugin_manager.use_builtins(_builtin_plugins)
_install_mma_sim_paths()   # MMA-Sim's import paths, mmasim.nv_ptx.sim and mmasim.amd.sim (aliases)


def MMA(arch: str, instruction: str, backend: str | None = None, **qualifiers) -> Model:
    """The model of ``instruction`` on ``arch``.

    ``arch``: family ("Blackwell"), product ("B200") or target ("sm_100a").
    ``instruction``: PTX-style qualifiers (MMA-Sim 2.1.1 strings accepted).
    ``qualifiers``: ``a_type``, ``b_type``, ``c_type``, ``d_type``,
    ``scale_type``, ``saturate``, ``sparse``, ``block``, ``scale_vec``, ``kind``
    (any other raises :class:`UnknownQualifier`), each read by its type: format
    names and kinds as strings (any case), ``scale_vec`` as ``"1X"``/``"2X"``/``"4X"``,
    ``block`` as an int, ``saturate`` and ``sparse`` as ``True``/``False``; any
    other value raises :class:`QualifierValueError`.  A lookup that leaves several
    datapaths open raises :class:`AmbiguousInstruction`; ``Model.resolution``
    records the shape the string named and any qualifier a table default filled.
    ``backend``: ``"numpy"``, ``"numba"`` or ``"auto"`` for this model's
    computations (default: the ``MMASIM_BACKEND`` environment variable, else
    auto); see :mod:`mmasim.backends`.
    """
    return Model.lookup(arch, instruction, backend, **qualifiers)


def architectures() -> list:
    """Names of every registered architecture."""
    return sorted(get_registry().architectures)


def aliases(arch: str) -> list:
    """Every name that resolves to ``arch``."""
    reg = get_registry()
    name = resolve_arch(reg, arch)
    return [name, *reg.architectures[name].aliases]


def instructions(arch: str) -> list:
    """Canonical names of every datapath of ``arch``."""
    reg = get_registry()
    name = resolve_arch(reg, arch)
    return [dp.canonical(reg.formats) for dp in reg.architectures[name].datapaths]


def datapaths(arch: str) -> list:
    """Every :class:`~mmasim.registry.datapath.Datapath` of ``arch``."""
    reg = get_registry()
    return list(reg.architectures[resolve_arch(reg, arch)].datapaths)


def layouts(arch: str | None = None) -> list:
    """Registered layouts (of ``arch``, or all): register / TMEM fragment rules
    (:mod:`mmasim.placement`; generic ones have no architecture), shared-memory
    operand layouts and result slices."""
    reg = get_registry()
    items = list(reg.layouts.values())
    if arch is not None:
        name = resolve_arch(reg, arch)
        items = [x for x in items if (x.arch == name if isinstance(x.arch, str) else name in x.arch)]
    return items


__all__ = [
    "MMA", "Model", "gemm", "accuracy", "quantize", "Quantized", "quantize_schemes", "architectures", "aliases",
    "instructions", "datapaths", "layouts", "register", "unregister", "hookimpl",
    "MMAError", "UnknownArchitecture", "UnknownInstruction", "AmbiguousInstruction", "UnknownQualifier", "QualifierValueError", "UnknownOption",
    "UnsupportedDatapath", "OperandError", "ShapeError", "DtypeError", "WordRangeError", "WordSyntaxError",
    "ScaleError", "SparseMetadataError", "GemmOptionError", "AccuracyError", "CopyMismatch", "TableError",
    "ThreadCountError", "PluginError", "PluginConflict",
    "QuantizeError", "UnknownScheme", "BlockShapeError", "NonFiniteError", "FormatRangeError",
    "EmulationError", "UnknownPreset", "NotEmulated",
]
