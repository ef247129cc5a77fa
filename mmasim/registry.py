"""The registry: every part the plugins registered, checked and indexed."""

from __future__ import annotations

import attrs

from .datapath import Architecture
from .errors import TableError
from .plugins import get_plugin_manager
from .tables import build_architecture, inherit, load_table


def normalize_name(name: str) -> str:
    """Architecture names compare without case, spaces, '-' or '_'."""
    return "".join(ch for ch in str(name).lower() if ch not in " -_")


@attrs.define
class Registry:
    formats: dict
    decoders: dict
    accumulators: dict
    encodings: dict
    layouts: dict
    architectures: dict          # name -> Architecture
    arch_index: dict             # normalized alias -> name

    def check(self) -> None:
        """Every name a table or format uses must be registered."""
        for fmt in self.formats.values():
            if fmt.decoder not in self.decoders:
                raise TableError(f"format {fmt.key}: unknown decoder {fmt.decoder!r}")
        for arch in self.architectures.values():
            for dp in arch.datapaths:
                where = f"architecture {arch.name}, datapath {dp.op} {dp.kind or ''} {dp.a}x{dp.b}->{dp.d}"
                for key in (dp.a, dp.b, dp.c, dp.d) + ((dp.scale,) if dp.scale else ()):
                    if key not in self.formats:
                        raise TableError(f"{where}: unknown format {key!r}")
                if dp.accumulator not in self.accumulators:
                    raise TableError(f"{where}: unknown accumulator {dp.accumulator!r}")
                if dp.rounding not in self.encodings:
                    raise TableError(f"{where}: unknown rounding {dp.rounding!r}")
                if dp.block and dp.stored_k % dp.block:
                    raise TableError(f"{where}: K {dp.stored_k} is not a multiple of block {dp.block}")
                if dp.chunk and dp.chunk < dp.stored_k and dp.stored_k % dp.chunk:
                    raise TableError(f"{where}: K {dp.stored_k} is not a multiple of chunk {dp.chunk}")


def _collect(results, what):
    out = {}
    for result in results:
        items = result.items() if isinstance(result, dict) else ((getattr(x, "key", None) or x.name, x) for x in result)
        for key, value in items:
            if key in out and out[key] != value:
                raise TableError(f"two plugins register different {what} named {key!r}")
            out[key] = value
    return out


def build_registry() -> Registry:
    hook = get_plugin_manager().hook
    formats = _collect(hook.mmasim_formats(), "formats")
    decoders = _collect(hook.mmasim_decoders(), "decoders")
    accumulators = _collect(hook.mmasim_accumulators(), "accumulators")
    encodings = _collect(hook.mmasim_encodings(), "encodings")
    layouts = _collect(hook.mmasim_layouts(), "layouts")
    architectures: dict[str, Architecture] = {}
    arch_index: dict[str, str] = {}
    for tables in hook.mmasim_architectures():
        for source in tables:
            arch = build_architecture(load_table(source))
            if arch.name in architectures:  # a second table extends the architecture
                old = architectures[arch.name]
                arch = attrs.evolve(
                    old,
                    aliases=old.aliases + tuple(a for a in arch.aliases if a not in old.aliases),
                    datapaths=old.datapaths + arch.datapaths,
                    description=old.description or arch.description,
                    vendor=old.vendor or arch.vendor,
                )
            architectures[arch.name] = arch
    for name, arch in list(architectures.items()):
        if arch.inherits:
            if arch.inherits not in architectures:
                raise TableError(f"architecture {name} inherits unknown architecture {arch.inherits!r}")
            architectures[name] = inherit(arch, architectures[arch.inherits])
    for arch in architectures.values():
        for alias in (arch.name,) + arch.aliases:
            key = normalize_name(alias)
            if arch_index.get(key, arch.name) != arch.name:
                raise TableError(
                    f"architecture alias {alias!r} names both {arch_index[key]} and {arch.name}"
                )
            arch_index[key] = arch.name
    reg = Registry(formats, decoders, accumulators, encodings, layouts, architectures, arch_index)
    reg.check()
    return reg


_registry: Registry | None = None


def get_registry() -> Registry:
    global _registry
    if _registry is None:
        _registry = build_registry()
    return _registry


def reset_registry() -> None:
    global _registry
    _registry = None
