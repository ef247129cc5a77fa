"""Resolving ``(arch, instruction, **qualifiers)`` to one datapath (:func:`lookup_instruction`,
whose docstring gives the rules).

The instruction string is read as PTX-style qualifiers separated by dots, in any of the
spellings users write: MMA-Sim 2.1.1's strings (``m16n8k16.f32.f16.f16.f32``), full PTX
(``mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32``) or a family prefix with keyword
qualifiers (``tcgen05.mma.kind::f8f6f4`` + ``a_type=...``); datapaths may list literal extra
names (``names`` in the table).  Every function takes the registry as ``reg``; this module
does not import it, since the registry uses the lookup to check that a table extending an
architecture changes no existing name.
"""

from __future__ import annotations

import difflib
import numbers
import re

import attrs
import numpy as np

from mmasim.errors import (
    AmbiguousInstruction,
    MMAError,
    QualifierValueError,
    UnknownArchitecture,
    UnknownInstruction,
    UnknownQualifier,
    UnsupportedDatapath,
)
from mmasim.arith.sparse import RULES as SPARSE_RULES

# each read with fullmatch: ASCII digits without leading zeros, nothing after the token
_N = "([1-9][0-9]*)"
_SHAPE = re.compile(f"m{_N}n{_N}k{_N}", re.ASCII)
_KSHAPE = re.compile(f"k{_N}", re.ASCII)
_BLOCK = re.compile(f"block{_N}", re.ASCII)
_VEC = re.compile(r"(?:scale_vec::)?([124])x", re.ASCII)
_CTA = re.compile(r"cta_group::([0-9A-Za-z_]+)", re.ASCII)


QUALIFIERS = ("a_type", "b_type", "c_type", "d_type", "scale_type", "saturate", "sparse",
              "block", "scale_vec", "kind")
_TYPE_FIELD = {"a_type": "a", "b_type": "b", "c_type": "c", "d_type": "d", "scale_type": "scale"}
_FIELD_NAME = {"a": "a_type", "b": "b_type", "c": "c_type", "d": "d_type", "scale": "scale_type"}


@attrs.frozen
class Resolution:
    """What a lookup resolved to: the datapath, the shape the string named (``None``
    where it named none), the qualifiers a table default filled,
    as ``((qualifier, value, reason), ...)``, and the ``.row`` / ``.col`` pair it named."""

    datapath: object
    m: int | None = None
    n: int | None = None
    defaulted: tuple = ()
    layout: tuple | None = None     # the string's (.alayout, .blayout), e.g. ("col", "row"); None: not named

    @property
    def status(self):
        """The datapath's validation status at the shape asked for."""
        return self.datapath.status_for(self.m, self.n)


def normalize_name(name: str) -> str:
    """Architecture names compare without case, spaces, '-' or '_'."""
    return "".join(ch for ch in str(name).lower() if ch not in " -_")


def resolve_arch(reg, arch: str) -> str:
    if not isinstance(arch, str) or not arch.isascii():
        raise UnknownArchitecture(f"unknown architecture {arch!r}: an architecture name is an ASCII string "
                                  f"(see mmasim.architectures())")
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


class _Want(dict):
    """Field -> value, remembering the token that set each field."""

    def __init__(self):
        super().__init__()
        self.tokens: dict = {}

    def put(self, field: str, value, token: str, text: str):
        if field in self:
            raise UnknownInstruction(
                f"instruction {text!r}: {self.tokens[field]!r} and {token!r} both set {field}"
                if self.tokens[field] != token else f"instruction {text!r}: {token!r} is repeated"
            )
        self[field] = value
        self.tokens[field] = token


def _vocabulary(reg):
    names = {f.name.lower(): f.name for f in reg.formats.values()}
    kinds = {dp.kind.lower(): dp.kind for a in reg.architectures.values() for dp in a.datapaths if dp.kind}
    ops = {dp.op for a in reg.architectures.values() for dp in a.datapaths}
    return names, kinds, ops


def _families(reg) -> list:
    """The registered families, in registration order."""
    return list(reg.families.values())


def _lead(tokens: list, ops, reg) -> tuple:
    """``(op, number of tokens that name it)`` from the start of ``tokens`` (``(None, 0)``:
    the string names no family, as MMA-Sim 2.1.1's strings)."""
    low = [t.lower() for t in tokens]
    best = (None, 0)
    for op in ops:
        lead = reg.family(op).syntax.lead
        for spelling in (lead, lead[:1]):          # "tcgen05.mma" or "tcgen05"; "wgmma.mma_async" or "wgmma"
            n = len(spelling)
            if tuple(low[:n]) == spelling and n > best[1]:
                best = (op, n)
    return best


def instruction_text(instruction) -> str:
    """``instruction`` as the lookup reads it: printable ASCII without spaces, tabs or line
    breaks (PTX qualifiers joined by '.'), spaces around it dropped; anything else is
    :class:`UnknownInstruction` naming the first character it cannot take."""
    if not isinstance(instruction, str):
        raise UnknownInstruction(f"an instruction is a string, not {type(instruction).__name__} {instruction!r}")
    text = instruction.strip(" ")
    for i, ch in enumerate(text):
        if not "!" <= ch <= "~":
            raise UnknownInstruction(
                f"instruction {text!r}: character {ascii(ch)} (U+{ord(ch):04X}) at position {i}: an instruction "
                "string is printable ASCII without spaces, tabs or line breaks (PTX qualifiers joined by '.')")
    return text


def parse_instruction(text: str, reg) -> dict:
    """Constraints an instruction string places on a datapath (raises on any token it cannot read)."""
    names, kinds, ops = _vocabulary(reg)
    scale_names = {reg.formats[k].name.lower() for k in ("ue8m0", "ue4m3") if k in reg.formats}
    text = instruction_text(text)
    tokens = text.split(".")
    if not text or any(not t for t in tokens):
        raise UnknownInstruction(f"instruction {text!r}: empty qualifier (stray '.')" if text
                                 else "empty instruction string")
    want = _Want()
    types: list = []
    layouts: list = []
    families = _families(reg)
    fixed = {t for f in families for t in f.syntax.fixed}
    hints = {t: (field, f.name) for f in families for t, field in f.syntax.hints.items()}
    refused = {t: why for f in families for t, why in f.syntax.refused.items()}
    naming = {t: f.name for f in families for t in f.syntax.naming}
    op, used = _lead(tokens, ops, reg)
    if op:
        want.put("op", op, ".".join(tokens[:used]), text)
    for tok in tokens[used:]:
        low = tok.lower()
        if low in fixed:
            want.put(low, True, tok, text)
            want.setdefault("ops", set()).add(frozenset(f.name for f in families if low in f.syntax.fixed))
        elif low in ("row", "col"):
            layouts.append(tok)
        elif low == "sp":
            want.put("sparse", True, tok, text)
        elif low == "sp::ordered_metadata":     # PTX mma.sp::ordered_metadata (its own selector rules)
            want.put("sparse", True, tok, text)
            want["ordered_metadata"] = True
        elif low.startswith("kind::"):
            kind = low[len("kind::"):]
            if kind not in kinds:
                close = difflib.get_close_matches(kind, list(kinds), n=3, cutoff=0.5)
                raise UnknownInstruction(
                    f"instruction {text!r}: unknown kind {tok!r}"
                    + (f"; did you mean {', '.join('kind::' + kinds[c] for c in close)}?" if close else "")
                    + f" Known kinds: {', '.join(sorted(kinds.values()))}")
            want.put("kind", kinds[kind], tok, text)
        elif low in ("satfinite", "sat", "saturate"):
            want.put("saturate", True, tok, text)
        elif low == "block_scale":
            want.put("block_scale", True, tok, text)
        elif low in hints:
            want.put(hints[low][0], low, tok, text)
            want.setdefault("ops", set()).add(frozenset({hints[low][1]}))
        elif low in refused:
            raise UnsupportedDatapath(f"instruction {text!r}: {refused[low]}")
        elif low in naming:
            want.put(f"qualifier {low}", True, tok, text)
            want.setdefault("qualifiers", set()).add(low)
            want.setdefault("ops", set()).add(frozenset({naming[low]}))
        elif (m := _CTA.fullmatch(low)):
            if m.group(1) not in ("1", "2"):
                raise UnknownInstruction(f"instruction {text!r}: {tok!r}: PTX defines cta_group::1 and cta_group::2")
            want.put("cta_group", int(m.group(1)), tok, text)
            if m.group(1) == "2":
                want.setdefault("qualifiers", set()).add(low)
            want.setdefault("ops", set()).add(frozenset(f.name for f in families if f.syntax.cta_group))
        elif (m := _SHAPE.fullmatch(low)):
            want.put("shape", tuple(int(x) for x in m.groups()), tok, text)
        elif (m := _KSHAPE.fullmatch(low)):
            want.put("k", int(m.group(1)), tok, text)
        elif (m := _BLOCK.fullmatch(low)):
            want.put("block", int(m.group(1)), tok, text)
        elif (m := _VEC.fullmatch(low)):
            want.put("scale_vec", f"{m.group(1)}X", tok, text)
        elif low in scale_names:
            want.put("scale", names[low], tok, text)
        elif low in names:
            types.append((names[low], tok))
        else:
            raise UnknownInstruction(f"instruction {text!r}: cannot read {tok!r}{_token_hint(low, names, kinds)}")
    _check_naming(want, text, families, tuple(t for t, _ in types))
    if "shape" in want:
        if "k" in want:
            raise UnknownInstruction(f"instruction {text!r}: {want.tokens['shape']!r} and {want.tokens['k']!r} both set k")
        want["m"], want["n"], want["k"] = want.pop("shape")
        want.tokens["k"] = want.tokens["m"] = want.tokens["n"] = want.tokens.pop("shape")
    if layouts:
        if len(layouts) != 2:
            takes = " / ".join(f.name for f in families if f.syntax.layouts) or "an instruction"
            raise UnknownInstruction(
                f"instruction {text!r}: layout tokens {', '.join(map(repr, layouts))}: {takes} takes "
                "exactly two (.alayout for A, then .blayout for B)")
        want["layout"] = tuple(t.lower() for t in layouts)
        want.tokens["layout"] = ".".join(layouts)
        want.setdefault("ops", set()).add(frozenset(f.name for f in families if f.syntax.layouts))
    if len(types) == 4:
        want["d"], want["a"], want["b"], want["c"] = (t for t, _ in types)
    elif len(types) == 3:
        want["d"], want["a"], want["b"] = (t for t, _ in types)
        want["three_types"] = True
    elif len(types) in (1, 2):
        raise UnknownInstruction(
            f"instruction {text!r}: give the types as D.A.B[.C] or with a_type=/b_type=/d_type="
        )
    elif len(types) > 4:
        raise UnknownInstruction(
            f"instruction {text!r}: too many type qualifiers ({', '.join(t for _, t in types)}); D.A.B[.C] is four at most")
    want.tokens.update(zip("dabc", (tok for _, tok in types)))
    return want


def _check_naming(want: dict, text: str, families, types: tuple) -> None:
    """Each family's rules on the naming qualifiers and the types (``Syntax.check``: e.g.
    PTX's pairings ``.and.popc`` / ``.xor.popc``)."""
    q = frozenset(want.get("qualifiers", ()))
    for f in families:
        why = f.syntax.check(q, types) if f.syntax.check else None
        if why:
            raise UnknownInstruction(f"instruction {text!r}: {why}")
    if q:
        want["qualifiers"] = q


def _normal(text: str, reg) -> str:
    """A spelling for close-match suggestions: no case, no family prefixes (``Syntax.prefixes``)."""
    text = str(text).lower()
    for prefix in (p for f in _families(reg) for p in f.syntax.prefixes):
        if text.startswith(prefix):
            text = text[len(prefix):]
    return text


def _token_hint(low: str, names: dict, kinds: dict) -> str:
    pool = {**{n: n for n in names.values()}, **{f"kind::{k}": f"kind::{k}" for k in kinds.values()},
            "satfinite": "satfinite", "block_scale": "block_scale", "cta_group::1": "cta_group::1"}
    close = difflib.get_close_matches(low, {p.lower(): p for p in pool}, n=3, cutoff=0.6)
    return f"; did you mean {', '.join(repr(pool[c] if c in pool else c) for c in close)}?" if close else ""


def qualifier_value(key: str, value, reg):
    """The value of keyword qualifier ``key`` as a lookup compares it, read strictly by the
    qualifier's type: a format name or a kind (strings, any case), ``scale_vec`` ``"1X"`` /
    ``"2X"`` / ``"4X"``, ``block`` an int, ``saturate`` / ``sparse`` a bool.  Anything else is
    :class:`QualifierValueError` listing what ``key`` takes."""
    def refused(takes):
        return QualifierValueError(f"{key}={value!r} is not accepted: {key} takes {takes}")

    text = value.lower() if isinstance(value, str) and value.isascii() else None
    if key in _TYPE_FIELD or key == "kind":
        names, kinds, _ = _vocabulary(reg)
        if key == "kind":
            low = None if text is None else text.removeprefix("kind::")
            if low in kinds:
                return kinds[low]
            raise refused(f"a kind, in any case, 'kind::' optional: {', '.join(sorted(kinds.values()))}")
        if text in names:
            return names[text]
        raise refused(f"a format name, in any case: {', '.join(sorted(names.values()))}")
    if key == "scale_vec":
        m = None if text is None else _VEC.fullmatch(text)
        if m:
            return f"{m.group(1)}X"
        raise refused("'1X', '2X' or '4X', in any case, 'scale_vec::' optional")
    if key == "block":
        blocks = sorted({dp.block for a in reg.architectures.values() for dp in a.datapaths if dp.block})
        if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) in blocks:
            return int(value)
        raise refused(f"an int, the elements per scale: {', '.join(map(str, blocks))}")
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise refused("True or False (a bool: no string or number is read as one)")


def _apply_qualifiers(want: dict, qualifiers: dict, reg) -> dict:
    out = _Want()
    out.update(want)
    out.tokens = dict(getattr(want, "tokens", {}))
    for key, value in qualifiers.items():
        if key not in QUALIFIERS:
            close = difflib.get_close_matches(str(key), QUALIFIERS, n=1, cutoff=0.6)
            raise UnknownQualifier(
                f"unknown qualifier {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                + f"; accepted: {', '.join(QUALIFIERS)}")
        if value is None:
            continue
        field = _TYPE_FIELD.get(key, key)
        value = qualifier_value(key, value, reg)
        if field in out and out[field] != value:
            raise UnknownInstruction(
                f"qualifier {key}={value!r} contradicts the instruction string ({out.tokens.get(field, field)!r})"
            )
        out[field] = value
        out.tokens.setdefault(field, f"{key}={value!r}")
    return out


def _fits(dp, want: dict, reg) -> bool:
    fmt = reg.formats
    syntax = reg.family(dp.op).syntax
    for key, value in want.items():
        if key in ("a", "b", "c", "d", "scale"):
            actual = getattr(dp, key)
            if actual is None or fmt[actual].name != value and actual != value:
                return False
        elif key == "sparse":
            if bool(dp.sparse) != bool(value):
                return False
            if dp.sparse and SPARSE_RULES[dp.sparse].ordered != bool(want.get("ordered_metadata")):
                return False        # .sp and .sp::ordered_metadata are different instructions
        elif key in ("m", "n"):
            legal = getattr(dp, key)
            if legal and value not in legal:
                return False
        elif key == "qualifiers":
            if frozenset(dp.qualifiers) != value:
                return False
        elif key == "ops":
            if any(dp.op not in allowed for allowed in value):
                return False
        elif key == "block_scale":
            if not dp.scale:
                return False
        elif key in ("op", "kind", "k", "block", "scale_vec", "saturate"):
            if getattr(dp, key) != value:
                return False
    if "kind" not in want and syntax.kind_optional and dp.kind is not None:
        return False            # mma.sync / v_mfma without kind:: is the kind-less instruction
    if want.get("three_types") and "c" not in want and dp.c != dp.d:
        return False            # D.A.B: C = D
    return True


def _close_hint(reg, architecture, instruction: str, datapaths=None) -> str:
    """Close matches of ``instruction`` among the names of ``datapaths`` (default: all of
    ``architecture``'s)."""
    datapaths = architecture.datapaths if datapaths is None else datapaths
    known = sorted({dp.canonical(reg.formats) for dp in datapaths} | {n for dp in datapaths for n in dp.names})
    by_normal = {}
    for name in sorted(known, key=lambda x: (x != _normal(x, reg), len(x), x)):   # plainest spelling first
        by_normal.setdefault(_normal(name, reg), name)
    close = difflib.get_close_matches(_normal(instruction, reg), list(by_normal), n=5, cutoff=0.4)
    return f" Close matches: {', '.join(by_normal[c] for c in close)}." if close else ""


_FIELDS = ("op", "kind", "a", "b", "c", "d", "k", "scale", "block", "scale_vec", "sparse", "saturate", "m", "n")


def _value(dp, field, reg):
    v = getattr(dp, field)
    if field in ("a", "b", "c", "d", "scale") and v is not None:
        return reg.formats[v].name
    return bool(v) if field == "sparse" else v


def _apply_defaults(candidates: list, reg) -> list:
    """Narrow ``candidates`` by the tables' ``default_for`` declarations, only where the
    candidates differ in nothing but defaultable qualifiers: a default never settles a
    qualifier that has none (``kind::mxf4nvf4`` without a scale_vec stays ambiguous)."""
    open_fields = {f for f in _FIELDS if len({_value(dp, f, reg) for dp in candidates}) > 1}
    groups = {"scale": {"scale"}, "scale_vec": {"scale_vec", "block"}, "c": {"c"}}

    def covered(dp):
        return set().union(*(groups[d] for d in dp.defaults)) if dp.defaults else set()

    chosen = [dp for dp in candidates if open_fields and open_fields <= covered(dp)]
    return chosen if len(chosen) == 1 else candidates


def _defaulted(dp, want: dict, reg) -> tuple:
    """The qualifiers of ``dp`` the lookup did not name and a default filled."""
    out = []
    for field, reason in dp.default_for:
        named = field in want or (field == "scale_vec" and "block" in want)
        if not named:
            name = _FIELD_NAME.get(field, field)
            out.append((name, _value(dp, field, reg), reason))
    if want.get("three_types") and "c" not in want and reg.family(dp.op).syntax.c_type:
        out.append(("c_type", _value(dp, "c", reg), "three-type spelling D.A.B means C = D (MMA-Sim 2.1.1)"))
    return tuple(out)


def _candidates(reg, architecture, text: str, instruction: str, qualifiers: dict) -> tuple:
    """``(datapaths of architecture that fit, what the lookup asked for)``; raises where the
    string or a qualifier cannot be read."""
    low = text.lower()
    literal = [dp for dp in architecture.datapaths if low in {n.lower() for n in dp.names}]
    if literal and not qualifiers:
        return literal, _Want()
    want = _apply_qualifiers(parse_instruction(instruction, reg) if not literal else _Want(), qualifiers, reg)
    want.setdefault("sparse", False)       # no .sp: the dense instruction
    want.setdefault("saturate", False)     # no .satfinite: the wrapping one
    want.setdefault("qualifiers", frozenset())   # no cta_group::2 / .ws / .popc: the plain one
    return [dp for dp in (literal or architecture.datapaths) if _fits(dp, want, reg)], want


def offered(datapaths) -> tuple:
    """Those of ``datapaths`` a lookup resolves to: all but the ones a table refuses
    (``refuse``: e.g. Blackwell Ultra's tcgen05 ``kind::i8``, which sm_103a lacks).
    ``offered(architecture.datapaths)`` is what ``mmasim list ARCH`` shows."""
    return tuple(dp for dp in datapaths if not dp.refuse)


def _elsewhere(reg, name: str, text: str, instruction: str, qualifiers: dict) -> tuple:
    """The other architectures on which the lookup finds datapaths it resolves to, and the
    operand formats (A, B, D) of those datapaths."""
    out, ops = [], set()
    for other, architecture in sorted(reg.architectures.items()):
        if other == name:
            continue
        try:
            found, _ = _candidates(reg, architecture, text, instruction, qualifiers)
        except MMAError:
            continue
        if offered(found):
            out.append(other)
            ops |= {(dp.a, dp.b, dp.d) for dp in offered(found)}
    return out, ops


def _hint(reg, name: str, text: str, instruction: str, qualifiers: dict) -> str:
    """What a failed lookup on ``name`` suggests: the architectures that have the
    instruction, where others do, with the close matches on ``name`` among its datapaths of
    the same operand formats only (CDNA3's ``f32_32x32x8_f16`` for the CDNA1 spelling; an A100
    asked for an fp8 ``mma.sync`` or ``wgmma`` gets no integer suggestions); else the close
    matches on ``name``."""
    others, formats = _elsewhere(reg, name, text, instruction, qualifiers)
    architecture = reg.architectures[name]
    if others:
        listed = ", ".join(others[:-1]) + (" and " if len(others) > 1 else "") + others[-1]
        alike = [dp for dp in offered(architecture.datapaths) if (dp.a, dp.b, dp.d) in formats]
        close = _close_hint(reg, architecture, instruction, alike) if alike else ""
        return (f" {listed} {'have' if len(others) > 1 else 'has'} it, {name} does not "
                f"(see mmasim.instructions({others[0]!r})).{close}")
    return f"{_close_hint(reg, architecture, instruction)} See mmasim.instructions({name!r})."


def lookup_instruction(reg, arch: str, instruction: str, qualifiers: dict) -> Resolution:
    """Resolve a lookup to one datapath, or raise.  The rules:

    - An instruction string is printable ASCII without spaces or line breaks
      (:func:`instruction_text`); each token is read whole (shapes in ASCII decimal digits).
      Keyword qualifiers are read by their types (:func:`qualifier_value`).
    - Every token is read, or the lookup fails with :class:`UnknownInstruction`
      naming it; two tokens for one field (two kinds, two shapes, two layouts for A,
      a repeated ``satfinite``) fail naming both.  Type names, kinds and shapes
      match without regard to case (PTX spells each one way).
    - Syntax tokens belong to an instruction family, as its record says
      (:class:`mmasim.registry.family.Syntax`, ``reg.family(op).syntax``): the optional fixed
      tokens, the ``.row`` / ``.col`` pairs it allows, ``cta_group::N``, tokens that change no
      arithmetic (``hints``) and tokens it refuses; ``block_scale`` belongs to block-scaled kinds.
    - Qualifiers that name an instruction of their own (``Syntax.naming``, ``cta_group::2``):
      a datapath lists them (``Datapath.qualifiers``) and a lookup matches it only when it
      names exactly those (``cta_group::1`` is the default and names nothing).
    - An optional PTX token that is absent means the instruction without it
      (dense without ``sp``, wrapping without ``satfinite``, no ``kind::`` where the
      family's kind is optional).  Three types ``D.A.B`` mean C = D (MMA-Sim
      2.1.1's spelling; wgmma / tcgen05 have no C type at all).
    - Anything else left open must be named: a lookup that leaves several datapaths
      is :class:`AmbiguousInstruction` listing them, unless they differ only in
      qualifiers the tables declare a default for (``default_for``: e.g. the
      design card's ``tcgen05.kind::mxf4nvf4.4X`` is NVFP4 with ue4m3 scales; PTX's
      own ``scale_vec`` defaults).  :class:`Resolution` records what was defaulted
      and why; ``Model.describe()`` prints it.
    """
    name = resolve_arch(reg, arch)
    architecture = reg.architectures[name]
    try:
        text = instruction_text(instruction)
    except UnknownInstruction as exc:
        raise UnknownInstruction(f"{name}: {exc}") from None
    try:
        candidates, want = _candidates(reg, architecture, text, instruction, qualifiers)
    except (UnknownInstruction, UnsupportedDatapath) as exc:
        raise type(exc)(f"{name}: {exc}.{_hint(reg, name, text, instruction, qualifiers)}") from None
    if not candidates:
        raise UnknownInstruction(
            f"{name} has no instruction matching {instruction!r}"
            + (f" with {qualifiers}" if qualifiers else "")
            + f".{_hint(reg, name, text, instruction, qualifiers)}"
        )
    if len(candidates) > 1:
        candidates = _apply_defaults(candidates, reg)
    if len(candidates) > 1:
        listing = sorted(dp.canonical(reg.formats) for dp in candidates)
        shown = "\n  ".join(listing[:40]) + ("\n  ..." if len(listing) > 40 else "")
        raise AmbiguousInstruction(
            f"{instruction!r} on {name} matches {len(candidates)} datapaths; add qualifiers "
            f"(a_type=, b_type=, d_type=, scale_type=, ...) or spell it out:\n  {shown}",
            candidates=listing,
        )
    dp = candidates[0]
    syntax = reg.family(dp.op).syntax
    if "layout" in want and want["layout"] not in syntax.layouts_of(dp, reg.formats):
        raise UnknownInstruction(
            f"{instruction!r}: layout {want.tokens['layout']!r}: {syntax.layout_rule(dp, reg.formats)}")
    if dp.refuse:
        raise UnsupportedDatapath(f"{dp.canonical(reg.formats)} on {name}: {dp.refuse}")
    return Resolution(dp, m=want.get("m"), n=want.get("n"), defaulted=_defaulted(dp, want, reg),
                      layout=want.get("layout"))


def datapath_of(reg, arch: str, instruction: str, qualifiers: dict):
    """The datapath a lookup resolves to (see :func:`lookup_instruction` for what else it says)."""
    return lookup_instruction(reg, arch, instruction, qualifiers).datapath
