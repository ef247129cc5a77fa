"""``mmasim harness generate``: one self-contained source per instruction, its spec and a build script.

Each instruction goes to its family's emitter in the harness's table (:mod:`mmasim.harness.table`:
a module with ``specs``, ``place``, ``read``, ``source``, ``build_line`` and ``simulate``).
An instruction no emitter can take (the module is missing, mmasim refuses the datapath, a
layout is not registered) is listed with the reason, never dropped silently.
"""
from __future__ import annotations

import pathlib

import attrs

from mmasim import MMA, instructions as _instructions
from mmasim.operands.display import one_line
from mmasim.errors import HarnessError, MMAError
from mmasim.harness import table
from mmasim.harness.spec import KernelSpec, source_text

class NotGenerated(MMAError):
    """An instruction the harness cannot generate a kernel for (the message says why)."""


@attrs.frozen
class Generated:
    """What :func:`generate` wrote (``kernels``) and what it could not (``skipped``)."""

    arch: str
    out: str
    kernels: tuple            # ((KernelSpec, source path), ...)
    skipped: tuple            # ((instruction, reason), ...)


def emitter(model):
    """The emitter module of ``model``'s family (:func:`mmasim.harness.table.emitter`);
    :class:`NotGenerated` when there is none."""
    family = model.family.name
    held = table.emitter(family)
    if held is None:
        raise NotGenerated(f"no harness emitter for {family} instructions")
    try:
        return held.load()
    except ImportError as e:
        raise NotGenerated(f"the {family} emitter {held.name} is not available ({e})") from None


def model_specs(model) -> list:
    """The kernel specs of ``model``; :class:`NotGenerated` naming the reason when none can be made."""
    mod = emitter(model)
    try:
        return list(mod.specs(model))
    except MMAError as e:
        raise NotGenerated(str(e)) from None


def specs_for(arch: str, instructions=None):
    """``(specs, skipped)`` for ``instructions`` of ``arch`` (default: every one)."""
    names = list(instructions) if instructions else _instructions(arch)
    out, skipped = [], []
    for ins in names:
        try:
            model = MMA(arch, ins)
        except MMAError as e:
            if instructions:          # the user named it: an unknown name is an error, a refused one a skip
                from mmasim.errors import UnsupportedDatapath
                if not isinstance(e, UnsupportedDatapath):
                    raise
            skipped.append((ins, f"not generated: {e}"))
            continue
        if model.resolution.layout not in (None, ("row", "col")):
            skipped.append((ins, "not generated: the harness emits and places .row.col operands only"))
            continue
        try:
            out += [(model, s) for s in model_specs(model)]
        except NotGenerated as e:
            skipped.append((model.instruction, f"not generated: {e}"))
    return out, skipped


def source(model, spec: KernelSpec) -> tuple:
    """``(text, suffix)`` of the self-contained source of ``spec``."""
    return emitter(model).source(spec)


def build_line(model, spec: KernelSpec, src: str) -> str:
    """The ``build.sh`` line that builds ``src`` into the executable ``spec.name``."""
    return emitter(model).build_line(spec, src, spec.name)


def generate(arch: str, instructions=None, out=".") -> Generated:
    """Write ``<name>.cu`` (or ``.hip``), ``<name>.json`` per kernel and ``build.sh`` into ``out``
    (a folder, made where missing; ``"."`` the working folder, never the empty path)."""
    if isinstance(out, (str, bytes)) and not out:
        raise HarnessError("harness generate: out is the empty path; name the folder to write into "
                           "('.' for the working folder)")
    out = pathlib.Path(out)
    for ins in instructions or ():      # the user's text: refused before anything is written
        source_text(ins, "instruction")
    source_text(arch, "architecture")
    pairs, skipped = specs_for(arch, instructions)
    out.mkdir(parents=True, exist_ok=True)
    kernels, lines = [], ["#!/usr/bin/env sh", f"# mmasim harness: build every kernel of {arch}",
                          "# (NVCC / HIPCC: the compilers; default nvcc / hipcc on PATH)", "set -e",
                          'cd "$(dirname "$0")"']
    for model, spec in pairs:
        text, suffix = source(model, spec)
        path = out / (spec.name + suffix)
        path.write_text(text)
        (out / (spec.name + ".json")).write_text(spec.to_json())
        kernels.append((spec, str(path)))
        lines.append(build_line(model, spec, path.name))
    for ins, why in skipped:
        lines.append(f"# {one_line(f'{ins}: {why}')}")
    script = out / "build.sh"
    script.write_text("\n".join(lines) + "\n")
    script.chmod(0o755)
    return Generated(arch=arch, out=str(out), kernels=tuple(kernels), skipped=tuple(skipped))
