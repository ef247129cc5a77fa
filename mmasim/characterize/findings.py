"""What the probe ladders say (docs/characterize.md): one parameter's :class:`Finding` and the whole
:class:`Proposal` that :func:`mmasim.characterize.infer` returns."""

from __future__ import annotations

import attrs


@attrs.frozen
class Finding:
    """One parameter: its value when the words decide it, else the values they leave open.

    ``lo``/``hi``: integer bounds (``None``: unbounded) of the open values; ``also``: non-integer
    values also consistent (``"excluded"``, ``None`` for a parameter left out, a rounding key).
    """

    name: str
    value: object = None
    determined: bool = False
    lo: int | None = None
    hi: int | None = None
    also: tuple = ()
    probes: tuple = ()
    note: str = ""
    anything: bool = False          # no probe could tell: every value is consistent

    def admits(self, v) -> bool:
        """Whether ``v`` is consistent with what the probes showed."""
        if self.anything:
            return True
        if self.determined:
            return v == self.value
        if v in self.also:
            return True
        if isinstance(v, bool) or not isinstance(v, int):
            return False
        if self.lo is None and self.hi is None and not self.also:
            return True
        if self.lo is None and self.hi is None:
            return False
        return (self.lo is None or v >= self.lo) and (self.hi is None or v <= self.hi)

    def describe(self) -> str:
        if self.determined:
            text = f"{self.name} = {_fmt(self.value)}"
        else:
            opts = []
            if self.lo is not None or self.hi is not None:
                opts.append(_range(self.lo, self.hi))
            opts += [_fmt(x) for x in self.also]
            text = f"{self.name}: undetermined ({' or '.join(opts) if opts and not self.anything else 'any value'})"
        if self.probes:
            shown = list(self.probes[:2]) + ([f"{len(self.probes) - 2} more"] if len(self.probes) > 2 else [])
            text += f"; decided by {', '.join(shown)}"
        if self.note:
            text += f" ({self.note})"
        return text


def _fmt(v):
    return "left out" if v is None else (f'"{v}"' if isinstance(v, str) else str(v))


def _range(lo, hi):
    if lo is not None and hi is not None:
        return f"{lo}..{hi}"
    if lo is not None:
        return f">= {lo}"
    return f"<= {hi}"


@attrs.frozen
class Proposal:
    """What the probes say about one datapath."""

    arch: str
    instruction: str
    family: str | None
    findings: dict                  # name -> Finding
    entry: dict                     # the proposed [[datapath]] keys
    reproduced: int                 # probe words the proposal reproduces
    total: int
    mismatches: tuple = ()          # labels of probes the proposal does not reproduce
    rejected: tuple = ()            # (family, why) of the families tried first
    alternatives: tuple = ()        # proposals of other families that reproduce every probe word too

    @property
    def consistent(self) -> bool:
        return self.family is not None and not self.mismatches

    def toml(self) -> str:
        from mmasim.characterize.toml import entry_toml
        return entry_toml(self)

    def to_json(self) -> dict:
        return {
            "arch": self.arch, "instruction": self.instruction, "family": self.family,
            "reproduced": self.reproduced, "total": self.total, "mismatches": list(self.mismatches),
            "rejected": [list(r) for r in self.rejected],
            "alternatives": [{"family": a.family, "entry": a.entry} for a in self.alternatives],
            "parameters": {k: {"value": f.value if f.determined else None, "determined": f.determined,
                               "lo": f.lo, "hi": f.hi, "also": list(f.also), "probes": list(f.probes),
                               "note": f.note, "text": f.describe()} for k, f in self.findings.items()},
            "entry": self.entry, "toml": self.toml(),
        }
