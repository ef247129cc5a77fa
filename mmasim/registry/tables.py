"""Reading architecture tables (TOML) into :class:`~mmasim.registry.datapath.Architecture`.

Owns the table schema (docs/tables.md): ``[architecture]``, ``[defaults]``, ``[[datapath]]``
with ``expand`` / ``by_d`` / ``when``, ``[[evidence]]``, ``inherits`` (:func:`inherit`) and
``extends``.  Gives :func:`load_table`, :func:`build_architecture`, :func:`inherit` and the
checks the registry reuses (:func:`check_params`, :func:`check_scales`).  Every table is
checked as it loads: unknown keys anywhere, wrong types, K outside ``1..MAX_K``, unknown sparse
rules, parameters the accumulator does not declare and block scales it does not take (or needs
and lacks) are a :class:`~mmasim.errors.TableError` naming the file, the datapath and the field.
"""

from __future__ import annotations

import copy
import itertools

import attrs

from mmasim.registry.datapath import Architecture, Datapath, Status
from mmasim.errors import TableError
from mmasim.registry.hookspecs import hookimpl
from mmasim.arith.sparse import RULES as SPARSE_RULES

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

_DATAPATH_KEYS = {
    "op", "kind", "a", "b", "c", "d", "k", "accumulator", "rounding", "params", "chunk", "interleave", "c_add",
    "scale", "block", "scale_vec", "sparse", "saturate", "m", "n", "names", "default_for",
    "refuse", "status", "notes", "qualifiers",
}
# default_for fields: the qualifiers a lookup may leave open (see mmasim.registry.lookup)
_DEFAULTABLE = {"scale", "scale_vec", "c"}
_CONTROL_KEYS = {"expand", "by_d", "when"}
_TOP_KEYS = {"architecture", "defaults", "datapath", "evidence", "_source"}
_HEAD_KEYS = {"name", "extends", "inherits", "vendor", "description", "aliases"}
_SCALE_VECS = ("1X", "2X", "4X")

#: The largest K (and chunk, block) a table may declare: real instructions have
#: K <= 256; the bound catches typos such as ``k = 1e8``.
MAX_K = 4096
#: The largest M or N a table may declare.
MAX_MN = 4096


def load_table(source) -> dict:
    """Parse a table given as TOML text, a dict, or a path/traversable."""
    if isinstance(source, dict):
        return source
    if isinstance(source, str):
        text, where = source, "<string>"
    else:
        try:
            text, where = source.read_text(encoding="utf-8"), str(source)
        except (AttributeError, OSError) as exc:
            raise TableError(f"cannot read architecture table {source!r}: {exc}") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TableError(f"architecture table {where}: invalid TOML: {exc}") from exc
    data.setdefault("_source", where if not isinstance(source, str) else "")
    return data


def _range(spec, key, where):
    if isinstance(spec, dict):
        try:
            return tuple(range(spec["from"], spec["to"] + 1, spec.get("step", 1)))
        except KeyError as exc:
            raise TableError(f"{where}: {key} range needs 'from' and 'to'") from exc
    if isinstance(spec, int):
        return (spec,)
    return tuple(spec or ())


def _status(spec, where) -> Status:
    if isinstance(spec, Status):
        return spec
    if isinstance(spec, str):
        spec = {"kind": spec}
    try:
        return Status(**spec)
    except (TypeError, ValueError) as exc:
        raise TableError(f"{where}: bad status {spec!r}: {exc}") from exc


def _matches(dp: Datapath, match: dict) -> bool:
    for key, want in match.items():
        wants = want if isinstance(want, list) else [want]
        if key == "ab":
            if not (dp.a == dp.b and dp.a in wants):
                return False
            continue
        if not hasattr(dp, key):
            raise TableError(f"evidence match key {key!r} is not a datapath attribute")
        value = getattr(dp, key)
        if key == "sparse":
            value = bool(value)
        if key == "qualifiers":
            value = list(value)
        if value not in wants:
            return False
    return True


def _expand(entry: dict, where: str):
    keys = entry.get("expand", [])
    for key in keys:
        if not isinstance(entry.get(key), list):
            raise TableError(f"{where}: expand key {key!r} must be a list")
    combos = itertools.product(*(entry[k] for k in keys)) if keys else [()]
    for combo in combos:
        item = {k: v for k, v in entry.items() if k not in _CONTROL_KEYS}
        item.update(zip(keys, combo))
        rules = [({"d": d}, o) for d, o in entry.get("by_d", {}).items()]
        rules += [(w.get("match", {}), w.get("set", {})) for w in entry.get("when", [])]
        for match, overrides in rules:
            if not all(item.get(k) in (v if isinstance(v, list) else [v]) for k, v in match.items()):
                continue
            for key, value in overrides.items():
                if key == "params":
                    item["params"] = {**item.get("params", {}), **value}
                else:
                    item[key] = value
        yield item


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _show(value) -> str:
    return f"{value!r} ({type(value).__name__})"


def _label(item: dict) -> str:
    """A datapath as a table entry names it: op, kind, A x B -> D (what is there)."""
    parts = [str(item.get("op", "?"))]
    if item.get("kind"):
        parts.append(f"kind::{item['kind']}")
    if item.get("sparse"):
        parts.append(f"sparse {item['sparse']}")
    if "k" in item:
        parts.append(f"k={item['k']}")
    parts.append(f"{item.get('a', '?')} x {item.get('b', '?')} -> {item.get('d', '?')}")
    return " ".join(parts)


def _check_item(item: dict, here: str) -> None:
    """Type and range checks of one expanded datapath entry."""

    def bad(field, why):
        raise TableError(f"{here}: field {field!r}: {why}")

    unknown = set(item) - _DATAPATH_KEYS
    if unknown:
        raise TableError(f"{here}: unknown keys {sorted(unknown)} (a by_d or when override sets them); "
                         f"known: {sorted(_DATAPATH_KEYS)}")
    for field in ("op", "a", "b", "d", "k", "accumulator", "rounding"):
        if field not in item:
            raise TableError(f"{here}: missing key {field!r}")
    for field in ("op", "kind", "a", "b", "c", "d", "accumulator", "rounding", "scale", "refuse", "notes", "c_add"):
        if field in item and not isinstance(item[field], str):
            bad(field, f"must be a string, not {_show(item[field])}")
    if not item["op"]:
        bad("op", "must not be empty")
    k = item["k"]
    if not _is_int(k):
        bad("k", f"K must be an integer, not {_show(k)}")
    if not 1 <= k <= MAX_K:
        bad("k", f"K = {k} is outside 1..{MAX_K}")
    for field in ("chunk", "block", "interleave"):
        value = item.get(field)
        if value is not None and not (_is_int(value) and 1 <= value <= MAX_K):
            bad(field, f"must be an integer in 1..{MAX_K}, not {_show(value)}")
    if "scale_vec" in item and item["scale_vec"] not in _SCALE_VECS:
        bad("scale_vec", f"must be one of {', '.join(_SCALE_VECS)}, not {_show(item['scale_vec'])}")
    sparse = item.get("sparse", "")
    if sparse not in ("",) and sparse not in SPARSE_RULES:
        bad("sparse", f"unknown sparse rule {sparse!r}; known: \"\" (dense), {', '.join(map(repr, SPARSE_RULES))}")
    if sparse and (2 * k) % SPARSE_RULES[sparse].chunk:
        bad("sparse", f"the logical K {2 * k} is not a multiple of the {sparse!r} rule's chunk "
                      f"{SPARSE_RULES[sparse].chunk}")
    if "saturate" in item and not isinstance(item["saturate"], bool):
        bad("saturate", f"must be true or false, not {_show(item['saturate'])}")
    default_for = item.get("default_for", {})
    if not isinstance(default_for, dict) or not all(isinstance(v, str) for v in default_for.values()):
        bad("default_for", f"must be an inline table of field = \"reason\", not {_show(default_for)}")
    if "params" in item and not isinstance(item["params"], dict):
        bad("params", f"must be an inline table, not {_show(item['params'])}")
    qualifiers = item.get("qualifiers", [])
    if not isinstance(qualifiers, list) or not all(isinstance(x, str) and x for x in qualifiers):
        bad("qualifiers", f"must be a list of non-empty strings, not {_show(qualifiers)}")
    names = item.get("names", [])
    if not isinstance(names, list) or not all(isinstance(x, str) and x for x in names):
        bad("names", f"must be a list of non-empty strings, not {_show(names)}")
    for field in ("m", "n"):
        spec = item.get(field)
        if spec is None:
            continue
        if isinstance(spec, dict):
            extra = set(spec) - {"from", "to", "step"}
            if extra or not all(_is_int(v) and 1 <= v <= MAX_MN for v in spec.values()):
                bad(field, f"a range is {{from = int, to = int, step = int}}, each in 1..{MAX_MN}, not {spec!r}")
            values = _range(spec, field, here)
        else:
            values = spec if isinstance(spec, list) else [spec]
        if not all(_is_int(v) and 1 <= v <= MAX_MN for v in values):
            bad(field, f"must be integers in 1..{MAX_MN}, not {spec!r}")


def check_params(name: str, accumulator, params: dict, here: str) -> None:
    """Check ``params`` against the parameters ``accumulator`` declares (``accumulator.Params``).

    An accumulator without ``Params`` (a third-party one that declares nothing)
    takes its parameters unchecked.
    """
    cls = getattr(accumulator, "Params", None)
    if cls is None:
        return
    fields = attrs.fields_dict(cls)
    takes = ", ".join(fields) or "none"
    for key in params:
        if key not in fields:
            raise TableError(f"{here}: field 'params.{key}': the {name!r} accumulator takes no parameter "
                             f"{key!r} (it takes: {takes})")
    for key, field in fields.items():
        if field.default is attrs.NOTHING and key not in params:
            raise TableError(f"{here}: field 'params.{key}': missing; the {name!r} accumulator needs it "
                             f"(it takes: {takes})")
    try:
        cls(**params)
    except (TypeError, ValueError) as exc:
        raise TableError(f"{here}: {exc}") from exc


def check_scales(name: str, accumulator, scaled: bool, here: str) -> None:
    """A block-scaled datapath (``scaled``) uses an accumulator that takes scales, and an
    accumulator that needs them (``accumulator.scales``) is used only on a block-scaled one."""
    scales = getattr(accumulator, "scales", "optional")
    if scaled and scales == "none":
        raise TableError(f"{here}: field 'accumulator': the {name!r} accumulator takes no block scales, "
                         "and the datapath is block-scaled (field 'scale')")
    if not scaled and scales == "required":
        raise TableError(f"{here}: field 'accumulator': the {name!r} accumulator needs block scales, "
                         "and the datapath has no field 'scale'")


def _control_characters(value, path: str = ""):
    """The first ``(path, text)`` of a string in a parsed table holding a control character."""
    if isinstance(value, str):
        return (path, value) if any(ord(ch) < 32 or ord(ch) == 127 for ch in value) else None
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        if key == "_source":
            continue
        found = _control_characters(item, f"{path}.{key}" if path else str(key))
        if found:
            return found
    return None


def _check_shape(data: dict, where: str) -> dict:
    """Top-level structure: known sections and [architecture] keys of the right types;
    no control characters in any text (names, notes and evidence are printed as they are)."""
    found = _control_characters(data)
    if found:
        raise TableError(f"{where}: field {found[0]!r}: control characters are not allowed in table text "
                         f"({found[1].encode('unicode_escape').decode()[:60]!r})")
    unknown = set(data) - _TOP_KEYS
    if unknown:
        raise TableError(f"{where}: unknown sections {sorted(unknown)}; known: architecture, defaults, "
                         "datapath, evidence")
    head = data.get("architecture")
    if not isinstance(head, dict) or not (head.get("name") or head.get("extends")):
        raise TableError(f"{where}: missing [architecture] with a name (or extends)")
    unknown = set(head) - _HEAD_KEYS
    if unknown:
        raise TableError(f"{where}: [architecture]: unknown keys {sorted(unknown)}; known: {sorted(_HEAD_KEYS)}")
    for key in ("name", "extends", "vendor", "description"):
        if key in head and not isinstance(head[key], str):
            raise TableError(f"{where}: [architecture]: {key} must be a string, not {_show(head[key])}")
    if head.get("name") and head.get("extends") and head["name"] != head["extends"]:
        raise TableError(f"{where}: [architecture]: name {head['name']!r} and extends {head['extends']!r} differ")
    aliases = head.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        raise TableError(f"{where}: [architecture]: aliases must be a list of non-empty strings")
    defaults = data.get("defaults", {})
    if not isinstance(defaults, dict):
        raise TableError(f"{where}: [defaults] must be a table")
    unknown = set(defaults) - _DATAPATH_KEYS - _CONTROL_KEYS
    if unknown:
        raise TableError(f"{where}: [defaults]: unknown keys {sorted(unknown)}")
    for key in ("datapath", "evidence"):
        if not isinstance(data.get(key, []), list):
            raise TableError(f"{where}: {key} must be an array of tables ([[{key}]])")
    fields = set(attrs.fields_dict(Datapath)) | {"ab"}
    for i, ev in enumerate(data.get("evidence", [])):
        here = f"{where}: evidence #{i + 1}"
        if not isinstance(ev, dict) or set(ev) - {"match", "status", "refuse"} or "status" not in ev:
            raise TableError(f"{here}: an [[evidence]] entry has a match, a status and optionally refuse")
        if not isinstance(ev.get("refuse", ""), str):
            raise TableError(f"{here}: refuse must be a string (why the datapaths it matches are refused)")
        if not isinstance(ev.get("match", {}), dict):
            raise TableError(f"{here}: match must be an inline table")
        bad = set(ev.get("match", {})) - fields
        if bad:
            raise TableError(f"{here}: match keys {sorted(bad)} are not datapath attributes")
    return head


def table_extends(data: dict) -> str | None:
    """The architecture a table extends (``[architecture] extends = ...``), or None."""
    head = data.get("architecture")
    return head.get("extends") if isinstance(head, dict) else None


def build_architecture(data: dict, accumulators: dict | None = None) -> Architecture:
    """The :class:`Architecture` a parsed table declares, checked field by field.

    ``accumulators`` (name -> accumulator): when given, each datapath's
    ``params`` are checked against its accumulator's declared parameters.  A
    table that extends another architecture (``extends = "Blackwell"``) gives an
    Architecture under that name with only its own datapaths (the registry
    merges it).
    """
    where = data.get("_source") or "architecture table"
    head = _check_shape(data, where)
    name = head.get("extends") or head["name"]
    defaults = data.get("defaults", {})
    datapaths = []
    for i, raw in enumerate(data.get("datapath", [])):
        here = f"{where}: datapath #{i + 1}"
        if not isinstance(raw, dict):
            raise TableError(f"{here}: must be a table")
        entry = copy.deepcopy(defaults)
        if "accumulator" in raw and raw["accumulator"] != entry.get("accumulator"):
            entry.pop("params", None)  # default parameters belong to the default accumulator
        elif isinstance(raw.get("params"), dict) and isinstance(entry.get("params"), dict):
            raw = {**raw, "params": {**entry["params"], **raw["params"]}}
        entry.update(raw)
        if "default" in entry:
            raise TableError(
                f"{here}: 'default' is gone: a datapath may only fill qualifiers a lookup leaves open, "
                f"declared as default_for = {{field = \"reason\"}} (fields: {', '.join(sorted(_DEFAULTABLE))})"
            )
        if not isinstance(entry.get("default_for", {}), dict):
            raise TableError(f"{here}: field 'default_for': must be an inline table of field = \"reason\", "
                             f"not {_show(entry['default_for'])}")
        bad = set(entry.get("default_for", {})) - _DEFAULTABLE
        if bad:
            raise TableError(f"{here}: default_for names {sorted(bad)}; only {sorted(_DEFAULTABLE)} can be defaulted")
        unknown = set(entry) - _DATAPATH_KEYS - _CONTROL_KEYS
        if unknown:
            raise TableError(f"{here}: unknown keys {sorted(unknown)}")
        _check_controls(entry, here)
        for item in _expand(entry, here):
            item.setdefault("c", item.get("d"))
            at = f"{here} ({_label(item)})"
            _check_item(item, at)
            if accumulators is not None and item["accumulator"] in accumulators:
                accumulator = accumulators[item["accumulator"]]
                check_params(item["accumulator"], accumulator, item.get("params", {}), at)
                check_scales(item["accumulator"], accumulator, bool(item.get("scale")), at)
            sparse = item.get("sparse") or None
            try:
                dp = Datapath(
                    arch=name,
                    op=item["op"],
                    kind=item.get("kind"),
                    a=item["a"], b=item["b"], c=item["c"], d=item["d"],
                    k=item["k"] * (2 if sparse else 1),
                    accumulator=item["accumulator"],
                    rounding=item["rounding"],
                    params=item.get("params", {}),
                    chunk=item.get("chunk"),
                    interleave=item.get("interleave", 0),
                    c_add=item.get("c_add"),
                    scale=item.get("scale"),
                    block=item.get("block"),
                    scale_vec=item.get("scale_vec"),
                    sparse=sparse,
                    saturate=item.get("saturate", False),
                    m=_range(item.get("m"), "m", at),
                    n=_range(item.get("n"), "n", at),
                    names=item.get("names", ()),
                    qualifiers=item.get("qualifiers", ()),
                    default_for=item.get("default_for", {}),
                    refuse=item.get("refuse", ""),
                    status=_status(item.get("status", "assumed"), at),
                    notes=item.get("notes", ""),
                )
            except (TypeError, ValueError) as exc:
                raise TableError(f"{at}: {exc}") from exc
            datapaths.append(dp)
    evidence = tuple((ev.get("match", {}), _status(ev.get("status"), f"{where}: evidence"))
                     + ((ev["refuse"],) if ev.get("refuse") else ())
                     for ev in data.get("evidence", []))
    inherits = head.get("inherits", "")
    if inherits and datapaths:
        raise TableError(f"{where}: an architecture that inherits {inherits!r} declares no datapaths of its own")
    return Architecture(
        name=name,
        vendor=head.get("vendor", ""),
        description=head.get("description", ""),
        aliases=tuple(head.get("aliases", ())),
        datapaths=_relabel(datapaths, evidence),
        source=str(where),
        inherits=inherits,
        evidence=evidence,
    )


def _relabel(datapaths, evidence) -> tuple:
    """Apply ``[[evidence]]`` rules in order (the last match wins); a rule with ``refuse`` also
    refuses what it matches (an inheriting table dropping what its chip does not have)."""
    for match, status, *refuse in evidence:
        extra = {"refuse": refuse[0]} if refuse else {}
        datapaths = [attrs.evolve(dp, status=status, **extra) if _matches(dp, match) else dp for dp in datapaths]
    return tuple(datapaths)


def _check_controls(entry: dict, here: str) -> None:
    """``expand``, ``by_d`` and ``when`` have the documented shapes."""
    if not isinstance(entry.get("expand", []), list):
        raise TableError(f"{here}: field 'expand': must be a list of keys")
    by_d = entry.get("by_d", {})
    if not isinstance(by_d, dict) or not all(isinstance(v, dict) for v in by_d.values()):
        raise TableError(f"{here}: field 'by_d': must map D formats to inline tables of overrides")
    when = entry.get("when", [])
    if not isinstance(when, list) or not all(
        isinstance(w, dict) and not set(w) - {"match", "set"}
        and isinstance(w.get("match", {}), dict) and isinstance(w.get("set", {}), dict) for w in when
    ):
        raise TableError(f"{here}: field 'when': must be a list of {{match = {{...}}, set = {{...}}}}")
    for override in [*by_d.values(), *(w.get("set", {}) for w in when)]:
        if "params" in override and not isinstance(override["params"], dict):
            raise TableError(f"{here}: field 'params': an override's params must be an inline table")


def inherit(child: Architecture, parent: Architecture) -> Architecture:
    """``child`` with every datapath of ``parent``, renamed to ``child`` and relabelled by
    ``child``'s own ``[[evidence]]`` (an inheriting table must say what its claims rest on,
    so a datapath no rule selects is refused)."""
    datapaths = _relabel([attrs.evolve(dp, arch=child.name) for dp in parent.datapaths], child.evidence)
    unlabelled = [dp for dp in datapaths if not any(_matches(dp, m) for m, *_ in child.evidence)]
    if unlabelled:
        raise TableError(
            f"{child.source or child.name}: inherits {parent.name!r} but no [[evidence]] rule labels "
            f"{len(unlabelled)} of its datapaths (the parent's labels are the parent's measurements)"
        )
    return attrs.evolve(child, datapaths=datapaths, vendor=child.vendor or parent.vendor)


def table_path(package: str, filename: str):
    """A table shipped as package data (``importlib.resources``)."""
    from importlib import resources

    return resources.files(package).joinpath(filename)


def table_hook(*filenames: str, package: str = "mmasim_archs"):
    """The ``mmasim_architectures`` hook of a plugin that ships tables as package data.

    A third-party plugin whose architecture is nothing but a table is one line::

        mmasim_architectures = table_hook("myarch.toml", package="myarch_tables")

    (mmasim's own tables need none: ``mmasim_plugins.archs`` registers every
    table in ``archs/``.)
    """

    @hookimpl
    def mmasim_architectures():
        return [table_path(package, name) for name in filenames]

    return mmasim_architectures


__all__ = ["load_table", "build_architecture", "inherit", "check_params", "check_scales", "table_extends",
           "table_path", "table_hook", "MAX_K", "MAX_MN"]
