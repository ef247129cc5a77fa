"""Every architecture table in ``archs/`` (installed as ``mmasim_archs``), as one plugin.

An architecture whose arithmetic the core's parts compose entirely is nothing but
a table: Volta, Turing, Ampere, Ada Lovelace, Hopper, Blackwell (``tcgen05.mma``
and ``mma.sync``), Blackwell Ultra, RTX Blackwell and AMD CDNA1-3.  This plugin
registers every ``.toml`` file of the folder, in the order of their names, exactly
as a third-party plugin registers its tables; a new table needs no code.  What
differs in code lives in the plugins beside it: ``blackwell`` (B200 operand and
result layouts) and ``rtx_blackwell`` (the e2m1 container of ``kind::f8f6f4``).
"""

from importlib import resources

from mmasim import hookimpl

PACKAGE = "mmasim_archs"


def tables() -> list:
    """Every table of ``archs/``, sorted by file name."""
    return sorted((f for f in resources.files(PACKAGE).iterdir() if f.name.endswith(".toml")),
                  key=lambda f: f.name)


@hookimpl
def mmasim_architectures():
    return tables()
