"""``mmasim presets``: the table of :func:`mmasim.torch.presets` (or, with ``--json``, the
``mmasim.presets/1`` document, docs/user-guide.md).  Neither imports torch."""

from __future__ import annotations

import json

from mmasim.operands.display import safe


def add_parser(sub, add_json):
    """Add the ``presets`` subcommand to ``sub``; returns its parser."""
    s = sub.add_parser(
        "presets", help="the mmasim.torch presets: instruction and recipe of each GEMM (docs/torch.md)",
        description="Every mmasim.torch preset (mmasim.torch.preset(NAME), emulate(model, NAME)): the "
                    "architecture, the instruction and the recipe of the forward, input-gradient (dgrad) "
                    "and weight-gradient (wgrad) GEMMs, and what the preset models. Needs no torch.")
    add_json(s)
    s.set_defaults(func=show_presets)
    return s


def show_presets(args) -> int:
    from mmasim.torch.emulation import presets

    table = presets()
    if args.json:
        print(json.dumps(table.to_json(), indent=2))
    else:
        print(safe(str(table), newlines=True))
    return 0
