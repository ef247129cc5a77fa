"""The proposed ``[[datapath]]`` entry as TOML text (the keys of docs/tables.md)."""

from __future__ import annotations

ORDER = ("op", "kind", "a", "b", "c", "d", "k", "chunk", "scale", "block", "scale_vec", "sparse",
         "accumulator", "params", "rounding")


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return f'"{v}"'
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {_value(x)}" for k, x in v.items()) + " }"
    return str(v)


def entry_toml(proposal) -> str:
    """``[[datapath]]`` with the proposal's keys, then one comment line per parameter saying what
    decided it (or what the probes leave open)."""
    if not proposal.entry:
        return "# no window-family datapath reproduces the probe words\n"
    lines = [f"# mmasim characterize {proposal.arch} {proposal.instruction}",
             f"# {proposal.family}: reproduces {proposal.reproduced} of {proposal.total} probe words",
             "[[datapath]]"]
    entry = proposal.entry
    for key in ORDER:
        if key in entry:
            lines.append(f"{key} = {_value(entry[key])}")
    for f in proposal.findings.values():
        lines.append(f"# {f.describe()}")
    for alt in proposal.alternatives:
        lines.append(f"# the probes do not separate this from: accumulator = {_value(alt.family)}, "
                     f"params = {_value(alt.entry['params'])}, rounding = {_value(alt.entry['rounding'])}"
                     + (f", chunk = {alt.entry['chunk']}" if "chunk" in alt.entry else ""))
    if proposal.mismatches:
        lines.append(f"# NOT reproduced: {', '.join(proposal.mismatches[:8])}")
    return "\n".join(lines) + "\n"


__all__ = ["entry_toml"]
