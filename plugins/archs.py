"""Every table in ``archs/`` (installed as ``mmasim_archs``), as one plugin.

An architecture whose arithmetic the core's parts compose entirely is nothing but
a table: Volta, Turing, Ampere, Ada Lovelace, Hopper, Blackwell (``tcgen05.mma``
and ``mma.sync``), Blackwell Ultra, RTX Blackwell and AMD CDNA1-3.  This plugin
registers every ``.toml`` file of the folder, in the order of their names, exactly
as a third-party plugin registers its tables; a new table needs no code.  The register /
TMEM layouts are tables too, in ``archs/layouts/`` (PTX ``mma.sync``, ``mma.sp``,
``wgmma``, ``tcgen05`` and AMD ``v_mfma`` / ``v_smfmac`` formulas), registered through
the ``mmasim_layouts`` hook the same way a third party's are.  What differs in code lives
in the plugins beside it: ``blackwell`` (B200 operand and result layouts) and
``rtx_blackwell`` (the e2m1 container of ``kind::f8f6f4``).
"""

from importlib import resources

from mmasim.registry.hookspecs import hookimpl
from mmasim.placement import load_layouts

PACKAGE = "mmasim_archs"
#: the folder of ``mmasim_archs`` holding the layout tables (never read as architecture tables)
LAYOUTS = "layouts"


def tables() -> list:
    """Every architecture table of ``archs/`` (its top-level ``.toml`` files), sorted by file name."""
    return sorted((f for f in resources.files(PACKAGE).iterdir() if f.is_file() and f.name.endswith(".toml")),
                  key=lambda f: f.name)


def layout_tables() -> list:
    """Every layout table of ``archs/layouts/``, sorted by file name."""
    return sorted((f for f in resources.files(PACKAGE).joinpath(LAYOUTS).iterdir()
                   if f.is_file() and f.name.endswith(".toml")), key=lambda f: f.name)


@hookimpl
def mmasim_architectures():
    return tables()


@hookimpl
def mmasim_layouts():
    return [rule for table in layout_tables() for rule in load_layouts(table)]
