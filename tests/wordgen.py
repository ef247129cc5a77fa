"""Test inputs shared by the backend and fast-path equivalence tests.

The words come from the package's one word generator (:mod:`mmasim.wordgen`:
it produces inputs, never expected outputs, so sharing it keeps the tests'
oracles independent); here are only the per-name seeds and the families of
rows the equivalence tests run."""

import zlib

from mmasim.wordgen import operands, words  # noqa: F401  (``words`` is used by the tests)


def seed(name: str) -> int:
    """A deterministic seed for a test parameter (``hash()`` varies between runs)."""
    return zlib.crc32(name.encode())


ROWS = 96   # rows per input family
FAMILIES = ("uniform", "near_one", "edge", "mixed")


def inputs(model, rng):
    """``[(kind, a, b, c, kwargs)]``: :data:`ROWS` rows of ``model``'s operands per family."""
    return [(kind, *operands(model, ROWS, rng, kind)) for kind in FAMILIES]
