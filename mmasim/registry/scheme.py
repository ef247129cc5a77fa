"""The quantization-scheme record: a recipe that ``mmasim.quantize(x, name)`` runs, registered
through the ``mmasim_schemes`` hook (docs/plugins.md, "Quantization schemes").

A leaf like :mod:`mmasim.registry.family`: imports nothing of mmasim, so the registry can check
what a plugin returns without importing the quantization layer above it.  What a recipe does
(its ``rule``) and what its callers may ask of it (tiles, scale rounding, stochastic rounding,
the Hadamard transform, where its scales are applied) are fields of the record: the code that
uses a scheme (:func:`mmasim.quantize`, :mod:`mmasim.torch`) reads them and names no scheme.
"""

from __future__ import annotations

import attrs

#: where a scheme's scales are applied: by the block-scaled instruction (``scale_a`` /
#: ``scale_b`` words), or by :func:`mmasim.gemm` at promotion (float32 tile scales)
SCALE_USES = ("instruction", "promotion")
#: ``Scheme.tiles`` of a scheme that takes any tile dividing x
ANY_TILE = "any"


def _tiles(instance, attribute, value):
    ok = value is None or value == ANY_TILE or (
        isinstance(value, tuple) and value and all(
            isinstance(t, tuple) and len(t) == 2 and all(isinstance(v, int) and v >= 1 for v in t) for t in value))
    if not ok:
        raise ValueError(f"Scheme.tiles must be None, {ANY_TILE!r} or a tuple of (rows, columns) pairs, not "
                         f"{value!r}")


def _pad(instance, attribute, value):
    if not (isinstance(value, tuple) and len(value) == 3 and all(isinstance(v, int) and v >= 1 for v in value)):
        raise ValueError(f"Scheme.pad must be three positive integers (M, N, K), not {value!r}")


def _callable(instance, attribute, value):
    if value is not None and not callable(value):
        raise ValueError(f"Scheme.rule must be callable, not {type(value).__name__}")


@attrs.frozen
class Scheme:
    """A quantization recipe: element format, scales, block, its rule, what it accepts.

    - ``name``: the name ``mmasim.quantize(x, name)`` takes (one owner, like every registered
      name; a plain cast's name, a format key, is taken too).
    - ``element``: the registry key of its element format (the words' default container);
      ``scale_format``: the key of its scale format (``None``: no block scales);
      ``block``: the number of elements along ``axis`` that share a scale (``None``: tiles).
    - ``scale_use``: :data:`SCALE_USES`: ``"instruction"`` (scale words for a block-scaled
      instruction) or ``"promotion"`` (float32 tile scales :func:`mmasim.gemm` applies when it
      promotes a partial sum).
    - ``rule``: ``rule(scheme, x, fmt, axis, nan, tile, opts) -> mmasim.Quantized``: ``x`` the
      exact binary64 values, ``fmt`` the element :class:`~mmasim.arith.formats.Format` to round
      in, ``opts`` a :class:`mmasim.quantization.quantize.Options` (scale rounding, element
      rounding with its random bits, Hadamard transform); ``None`` for a plain cast.
    - ``tiles``: the ``tile=`` values it takes: ``None`` (none: blocks along ``axis`` only),
      :data:`ANY_TILE` or a tuple of ``(rows, columns)`` pairs.
    - ``scale_roundings``: the ``scale_rounding=`` values it takes, its default first (``()``:
      none).
    - ``stochastic``: whether it takes ``rounding="stochastic"`` (``cvt.rs``).
    - ``hadamard``: ``None`` (no ``hadamard=``), or the registry key of the format the
      transform's kernel reads (an emulated GEMM rounds an operand to it first).
    - ``pad``: the multiples of (M, N, K) an emulated GEMM pads its operands to so that whole
      scale tiles cover them (beyond the instruction's own tile).
    - ``source``: the implementation it follows, in a few words.
    """

    name: str
    element: str
    scale_format: str | None
    block: int | None
    scale_use: str | None = attrs.field(validator=attrs.validators.optional(attrs.validators.in_(SCALE_USES)))
    rule: object = attrs.field(validator=_callable)
    tiles: object = attrs.field(default=None, validator=_tiles)
    scale_roundings: tuple = ()
    stochastic: bool = True
    hadamard: str | None = None
    pad: tuple = attrs.field(default=(1, 1, 1), validator=_pad)
    source: str = ""

    @property
    def block_scaled(self) -> bool:
        """Whether it gives scales (a recipe, not a plain cast)."""
        return self.scale_use is not None

    def takes_tile(self, tile) -> bool:
        """Whether ``tile=tile`` (a ``(rows, columns)`` pair) is one this scheme takes."""
        if self.tiles is None:
            return False
        return self.tiles == ANY_TILE or tuple(tile) in self.tiles

    def describe_tiles(self) -> str:
        if self.tiles is None:
            return "no tile= (blocks along axis)"
        if self.tiles == ANY_TILE:
            return "any tile (rows, columns) dividing x"
        return " or ".join(f"({r}, {c})" for r, c in self.tiles)


__all__ = ["Scheme", "SCALE_USES", "ANY_TILE"]
