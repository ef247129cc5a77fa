"""Reading architecture tables (TOML) into :class:`~mmasim.datapath.Architecture`.

Schema (see docs/tables.md): ``[architecture]`` names the architecture;
``[defaults]`` gives keys every ``[[datapath]]`` inherits; each ``[[datapath]]``
may list keys in ``expand`` whose values are lists, expanded as a cartesian
product; ``by_d`` overrides keys per D format and ``when`` (a list of
``{match = {...}, set = {...}}``) overrides keys of the expanded datapaths a
match selects; ``[[evidence]]`` entries set the
validation status of every datapath their ``match`` selects (last match wins).
``inherits = "Name"`` in ``[architecture]`` gives the architecture every datapath of
another one, relabelled by its own ``[[evidence]]`` (see :func:`inherit`).
"""

from __future__ import annotations

import copy
import itertools

import attrs

from .datapath import Architecture, Datapath, Status
from .errors import TableError

try:  # Python >= 3.11
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib

_DATAPATH_KEYS = {
    "op", "kind", "a", "b", "c", "d", "k", "accumulator", "rounding", "params", "chunk",
    "scale", "block", "scale_vec", "sparse", "saturate", "m", "n", "names", "default_for",
    "refuse", "status", "notes",
}
# default_for fields: the qualifiers a lookup may leave open (see mmasim.lookup)
_DEFAULTABLE = {"scale", "scale_vec", "c"}
_CONTROL_KEYS = {"expand", "by_d", "when"}


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


def build_architecture(data: dict) -> Architecture:
    where = data.get("_source") or "architecture table"
    head = data.get("architecture")
    if not isinstance(head, dict) or "name" not in head:
        raise TableError(f"{where}: missing [architecture] with a name")
    name = head["name"]
    defaults = data.get("defaults", {})
    datapaths = []
    for i, raw in enumerate(data.get("datapath", [])):
        entry = copy.deepcopy(defaults)
        if "accumulator" in raw and raw["accumulator"] != entry.get("accumulator"):
            entry.pop("params", None)  # default parameters belong to the default accumulator
        elif "params" in raw and "params" in entry:
            raw = {**raw, "params": {**entry["params"], **raw["params"]}}
        entry.update(raw)
        here = f"{where}: datapath #{i + 1}"
        if "default" in entry:
            raise TableError(
                f"{here}: 'default' is gone: a datapath may only fill qualifiers a lookup leaves open, "
                f"declared as default_for = {{field = \"reason\"}} (fields: {', '.join(sorted(_DEFAULTABLE))})"
            )
        bad = set(entry.get("default_for", {})) - _DEFAULTABLE
        if bad:
            raise TableError(f"{here}: default_for names {sorted(bad)}; only {sorted(_DEFAULTABLE)} can be defaulted")
        unknown = set(entry) - _DATAPATH_KEYS - _CONTROL_KEYS
        if unknown:
            raise TableError(f"{here}: unknown keys {sorted(unknown)}")
        for item in _expand(entry, here):
            item.setdefault("c", item.get("d"))
            sparse = item.get("sparse") or None
            try:
                dp = Datapath(
                    arch=name,
                    op=item["op"],
                    kind=item.get("kind"),
                    a=item["a"], b=item["b"], c=item["c"], d=item["d"],
                    k=int(item["k"]) * (2 if sparse else 1),
                    accumulator=item["accumulator"],
                    rounding=item["rounding"],
                    params=item.get("params", {}),
                    chunk=item.get("chunk"),
                    scale=item.get("scale"),
                    block=item.get("block"),
                    scale_vec=item.get("scale_vec"),
                    sparse=sparse,
                    saturate=bool(item.get("saturate", False)),
                    m=_range(item.get("m"), "m", here),
                    n=_range(item.get("n"), "n", here),
                    names=item.get("names", ()),
                    default_for=item.get("default_for", {}),
                    refuse=item.get("refuse", ""),
                    status=_status(item.get("status", "assumed"), here),
                    notes=item.get("notes", ""),
                )
            except KeyError as exc:
                raise TableError(f"{here}: missing key {exc.args[0]!r}") from exc
            except (TypeError, ValueError) as exc:
                raise TableError(f"{here}: {exc}") from exc
            datapaths.append(dp)
    evidence = tuple((ev.get("match", {}), _status(ev.get("status"), f"{where}: evidence"))
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
    """Apply ``[[evidence]]`` rules in order (the last match wins)."""
    for match, status in evidence:
        datapaths = [attrs.evolve(dp, status=status) if _matches(dp, match) else dp for dp in datapaths]
    return tuple(datapaths)


def inherit(child: Architecture, parent: Architecture) -> Architecture:
    """``child`` with every datapath of ``parent``, renamed to ``child`` and relabelled by
    ``child``'s own ``[[evidence]]`` (an inheriting table must say what its claims rest on,
    so a datapath no rule selects is refused)."""
    datapaths = _relabel([attrs.evolve(dp, arch=child.name) for dp in parent.datapaths], child.evidence)
    unlabelled = [dp for dp in datapaths if not any(_matches(dp, m) for m, _ in child.evidence)]
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

    A plugin whose architecture is nothing but a table is one line::

        mmasim_architectures = table_hook("volta.toml")
    """
    from .plugins import hookimpl

    @hookimpl
    def mmasim_architectures():
        return [table_path(package, name) for name in filenames]

    return mmasim_architectures


__all__ = ["load_table", "build_architecture", "inherit", "table_path", "table_hook"]
