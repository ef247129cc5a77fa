"""Resolving ``(arch, instruction, **qualifiers)`` to one datapath.

The instruction string is read as PTX-style qualifiers separated by dots, in
any of the spellings users write: MMA-Sim 2.1.1's strings
(``m16n8k16.f32.f16.f16.f32``, ``m128n8k16.kind::f16.f32.bf16.bf16``), full PTX
(``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``) or a family prefix
with keyword qualifiers (``tcgen05.mma.kind::f8f6f4`` + ``a_type=...``).
Datapaths may also list literal extra names (``names`` in the table).
"""

from __future__ import annotations

import difflib
import re

from .errors import AmbiguousInstruction, UnknownArchitecture, UnknownInstruction, UnsupportedDatapath
from .registry import Registry, normalize_name

_SHAPE = re.compile(r"^m(\d+)n(\d+)k(\d+)$")
_KSHAPE = re.compile(r"^k(\d+)$")
_BLOCK = re.compile(r"^block(\d+)$")
_VEC = re.compile(r"^(?:scale_vec::)?([124])x$", re.IGNORECASE)
_OPS = {
    "tcgen05": "tcgen05.mma",
    "wgmma": "wgmma.mma_async",
    "v_mfma": "v_mfma",
}
_IGNORED = {
    "mma", "sync", "aligned", "row", "col", "mma_async", "cta_group::1", "cta_group::2",
    "collector::a::discard", "ws", "block_scale",
}
QUALIFIERS = ("a_type", "b_type", "c_type", "d_type", "scale_type", "saturate", "sparse",
              "block", "scale_vec", "kind")


def resolve_arch(reg: Registry, arch: str) -> str:
    key = normalize_name(arch)
    if key in reg.arch_index:
        return reg.arch_index[key]
    names = sorted({*reg.architectures, *(a for x in reg.architectures.values() for a in x.aliases)})
    close = difflib.get_close_matches(str(arch), names, n=3, cutoff=0.5)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise UnknownArchitecture(
        f"unknown architecture {arch!r}.{hint} Known: {', '.join(sorted(reg.architectures))} "
        "(see mmasim.architectures())"
    )


def parse_instruction(text: str, reg: Registry) -> dict:
    """Constraints an instruction string places on a datapath."""
    names = {f.name for f in reg.formats.values()}
    scale_names = {reg.formats[k].name for k in ("ue8m0", "ue4m3") if k in reg.formats}
    want: dict = {}
    types: list[str] = []
    text = str(text).strip()
    ops = sorted({dp.op for arch in reg.architectures.values() for dp in arch.datapaths}, key=len, reverse=True)
    for op in ops:
        if text == op or text.startswith(op + "."):
            want["op"] = op
            text = text[len(op):]
            break
    tokens = [t for t in text.split(".") if t]
    if not tokens and "op" not in want:
        raise UnknownInstruction("empty instruction string")
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        low = tok.lower()
        if low == "mma" and i + 1 < len(tokens) and tokens[i + 1] == "sync":
            want["op"] = "mma.sync"
        elif low in _OPS:
            want["op"] = _OPS[low]
        elif low in _IGNORED or low.startswith("cta_group::"):
            pass
        elif low == "sp":
            want["sparse"] = True
        elif low.startswith("kind::"):
            want["kind"] = tok[len("kind::"):]
        elif low in ("satfinite", "sat", "saturate"):
            want["saturate"] = True
        elif (m := _SHAPE.match(low)):
            want["m"], want["n"], want["k"] = (int(x) for x in m.groups())
        elif (m := _KSHAPE.match(low)):
            want["k"] = int(m.group(1))
        elif (m := _BLOCK.match(low)):
            want["block"] = int(m.group(1))
        elif (m := _VEC.match(tok)):
            want["scale_vec"] = f"{m.group(1)}X"
        elif tok in scale_names:
            want["scale"] = tok
        elif tok in names:
            types.append(tok)
        else:
            raise UnknownInstruction(f"cannot read {tok!r} in instruction {text!r}")
        i += 1
    if len(types) == 4:
        want["d"], want["a"], want["b"], want["c"] = types
    elif len(types) == 3:
        want["d"], want["a"], want["b"] = types
    elif len(types) in (1, 2):
        raise UnknownInstruction(
            f"instruction {text!r}: give the types as D.A.B[.C] or with a_type=/b_type=/d_type="
        )
    elif len(types) > 4:
        raise UnknownInstruction(f"instruction {text!r}: too many type qualifiers {types}")
    return want


def _apply_qualifiers(want: dict, qualifiers: dict) -> dict:
    want = dict(want)
    for key, value in qualifiers.items():
        if key not in QUALIFIERS:
            raise TypeError(f"unknown qualifier {key!r}; expected one of {', '.join(QUALIFIERS)}")
        if value is None:
            continue
        field = {"a_type": "a", "b_type": "b", "c_type": "c", "d_type": "d", "scale_type": "scale"}.get(key, key)
        if field == "scale_vec":
            value = str(value).upper().replace("SCALE_VEC::", "")
        if field in want and want[field] != value:
            raise UnknownInstruction(
                f"qualifier {key}={value!r} contradicts the instruction string ({field}={want[field]!r})"
            )
        want[field] = value
    return want


def _fits(dp, want: dict, reg: Registry) -> bool:
    fmt = reg.formats
    for key, value in want.items():
        if key in ("a", "b", "c", "d", "scale"):
            actual = getattr(dp, key)
            if actual is None or fmt[actual].name != value and actual != value:
                return False
        elif key == "sparse":
            if bool(dp.sparse) != bool(value):
                return False
        elif key == "m":
            if dp.m and value not in dp.m:
                return False
        elif key == "n":
            if dp.n and value not in dp.n:
                return False
        elif getattr(dp, key) != value:
            return False
    if "c" not in want and "d" in want and "a" in want and dp.c != dp.d and fmt[dp.c].name != want["d"]:
        # MMA-Sim's three-type spellings mean C = D
        return False
    return True


def _close_hint(reg: Registry, architecture, instruction: str) -> str:
    known = sorted({dp.canonical(reg.formats) for dp in architecture.datapaths}
                   | {n for dp in architecture.datapaths for n in dp.names})
    close = difflib.get_close_matches(str(instruction), known, n=5, cutoff=0.4)
    return f" Close matches: {', '.join(close)}." if close else ""


def resolve(reg: Registry, arch: str, instruction: str, qualifiers: dict):
    name = resolve_arch(reg, arch)
    architecture = reg.architectures[name]
    literal = [dp for dp in architecture.datapaths if instruction in dp.names]
    if literal and not qualifiers:
        candidates = literal
    else:
        try:
            want = _apply_qualifiers(parse_instruction(instruction, reg), qualifiers)
        except UnknownInstruction as exc:
            raise UnknownInstruction(
                f"{name}: {exc}.{_close_hint(reg, architecture, instruction)} See mmasim.instructions({name!r})."
            ) from None
        want.setdefault("sparse", False)
        want.setdefault("saturate", False)
        candidates = [dp for dp in (literal or architecture.datapaths) if _fits(dp, want, reg)]
    if not candidates:
        hint = _close_hint(reg, architecture, instruction)
        raise UnknownInstruction(
            f"{name} has no instruction matching {instruction!r}"
            + (f" with {qualifiers}" if qualifiers else "")
            + f".{hint} See mmasim.instructions({name!r})."
        )
    if len(candidates) > 1:
        defaults = [dp for dp in candidates if dp.default]
        if len(defaults) == 1:
            return defaults[0]
        listing = sorted(dp.canonical(reg.formats) for dp in candidates)
        shown = "\n  ".join(listing[:40]) + ("\n  ..." if len(listing) > 40 else "")
        raise AmbiguousInstruction(
            f"{instruction!r} on {name} matches {len(candidates)} datapaths; add qualifiers "
            f"(a_type=, b_type=, d_type=, scale_type=, ...) or spell it out:\n  {shown}",
            candidates=listing,
        )
    dp = candidates[0]
    if dp.refuse:
        raise UnsupportedDatapath(f"{dp.canonical(reg.formats)} on {name}: {dp.refuse}")
    return dp
