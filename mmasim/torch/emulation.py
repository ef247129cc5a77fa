"""What an emulated GEMM is: :class:`Emulation` (the instruction, how float operands become
words, promotion, split-K, output format) and the documented presets (docs/torch.md).

A linear layer runs three GEMMs: the forward ``y = x W^T``, the input gradient
``dx = dy W`` and the weight gradient ``dW = dy^T x``.  An :class:`Emulation` names the
instruction and settings for all three; ``dgrad`` / ``wgrad`` override them per GEMM
(FP8 recipes quantize gradients to e5m2, so their backward GEMMs use other instructions).
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.errors import OperandError

#: how the operands of a GEMM become words
SCALINGS = ("cast", "tensor", "scheme")


def _scaling(instance, attribute, value):
    if value not in SCALINGS:
        raise OperandError(f"Emulation: scaling must be one of {', '.join(SCALINGS)}, not {value!r}")


def _positive_or_none(instance, attribute, value):
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1):
        raise OperandError(f"Emulation: {attribute.name} must be a positive integer or None, not {value!r}")


def _optional_emulation(instance, attribute, value):
    if value is not None and not isinstance(value, Emulation):
        raise OperandError(f"Emulation: {attribute.name} must be an Emulation or None, not {type(value).__name__}")


@attrs.frozen
class Emulation:
    """One emulated GEMM setting (and, through ``dgrad`` / ``wgrad``, the backward ones).

    - ``arch``, ``instruction``, ``qualifiers``: the instruction, as :func:`mmasim.MMA` takes
      them; its A and B formats are the operands' formats.
    - ``scaling``: ``"cast"`` (each float rounded to nearest even into the operand format,
      saturating where ``saturate``), ``"tensor"`` (FP8 per-tensor scaling: each operand
      divided by ``amax / max_finite`` in binary32, cast, and D multiplied back by both
      scales in binary32, as Transformer Engine's current scaling does), or ``"scheme"``
      (``mmasim.quantize`` with ``scheme``: OCP MX, NVFP4, DeepSeek FP8; block scales go to the
      instruction or, for DeepSeek, are applied at promotion by :func:`mmasim.gemm`).
    - ``promote_every``, ``split_k``, ``split_reduce``: passed to :func:`mmasim.gemm`.
    - ``b_tile``: the tile of B's scales for ``deepseek_fp8`` (``(128, 128)``: DeepSeek's weight
      blocks; ``None``: the scheme's default, 128 x 1 groups along K, as for activations).
    - ``output``: ``None`` (the float32 values of D) or a format key (``"bf16"``, ``"f16"``)
      that D is rounded to (RNE) before it becomes float32 again.
    """

    arch: str
    instruction: str
    scaling: str = attrs.field(default="cast", validator=_scaling)
    scheme: str | None = None
    saturate: bool = True
    promote_every: int | None = attrs.field(default=None, validator=_positive_or_none)
    split_k: int | None = attrs.field(default=None, validator=_positive_or_none)
    split_reduce: str = "sequential"
    output: str | None = None
    b_tile: tuple | None = attrs.field(default=None, converter=lambda t: None if t is None else tuple(t))
    qualifiers: tuple = attrs.field(default=(), converter=lambda q: tuple(sorted(dict(q).items())))
    dgrad: "Emulation | None" = attrs.field(default=None, validator=_optional_emulation)
    wgrad: "Emulation | None" = attrs.field(default=None, validator=_optional_emulation)
    description: str = ""

    def __attrs_post_init__(self):
        if self.scaling == "scheme" and not self.scheme:
            raise OperandError("Emulation: scaling='scheme' needs scheme= (see mmasim.quantize_schemes())")
        if self.scheme and self.scaling != "scheme":
            raise OperandError(f"Emulation: scheme={self.scheme!r} needs scaling='scheme'")

    def for_gemm(self, which: str) -> "Emulation":
        """The setting of GEMM ``which``: ``"forward"``, ``"dgrad"`` or ``"wgrad"``."""
        if which == "forward":
            return self
        if which not in ("dgrad", "wgrad"):
            raise OperandError(f"Emulation.for_gemm: 'forward', 'dgrad' or 'wgrad', not {which!r}")
        return getattr(self, which) or self

    def model(self):
        """The instruction's :class:`~mmasim.execution.model.Model`, looked up once per registry (every
        GEMM of a layer reuses it, and the kernel its plan holds; a plugin registered since,
        which makes a new registry, makes a new lookup)."""
        from mmasim.execution.model import Model
        from mmasim.registry.build import get_registry
        m = _MODELS.get(self)
        if m is None or m._reg is not get_registry():
            m = _MODELS[self] = Model.lookup(self.arch, self.instruction, **dict(self.qualifiers))
        return m


#: Emulation -> its Model (see Emulation.model)
_MODELS: dict = {}


def _fp8(arch, a, b, op):
    if op == "wgmma":
        return f"wgmma.mma_async.k32.f32.{a}.{b}"
    return f"mma.sync.m16n8k32.f32.{a}.{b}.f32"


def _presets() -> dict:
    h100_e4m3 = _fp8("H100", "e4m3", "e4m3", "wgmma")
    return {
        "A100-bf16": Emulation(
            "A100", "mma.sync.m16n8k16.f32.bf16.bf16.f32",
            description="A100 bf16 mma.sync (HMMA.16816) with f32 accumulation chained over K: what cuBLAS "
                        "and CUTLASS run for bf16 training on sm_80"),
        "H100-fp8-tensor": Emulation(
            "H100", h100_e4m3, scaling="tensor",
            dgrad=Emulation("H100", _fp8("H100", "e5m2", "e4m3", "wgmma"), scaling="tensor"),
            wgrad=Emulation("H100", _fp8("H100", "e5m2", "e4m3", "wgmma"), scaling="tensor"),
            description="H100 FP8 with per-tensor scaling (Transformer Engine's HYBRID recipe: e4m3 forward, "
                        "e5m2 gradients), wgmma fp8 accumulating the whole K in its F = 13 window chain, no promotion"),
        "H100-fp8-deepseek": Emulation(
            "H100", h100_e4m3, scaling="scheme", scheme="deepseek_fp8", promote_every=128, b_tile=(128, 128),
            wgrad=Emulation("H100", h100_e4m3, scaling="scheme", scheme="deepseek_fp8", promote_every=128),
            description="H100 FP8 as DeepSeek-V3 / DeepGEMM run it: e4m3 with 1x128 activation and 128x128 weight "
                        "scales (the weight gradient's operands both in 1x128 groups), the tensor-core partial sums "
                        "promoted to f32 every 128 elements of K"),
        "B200-mxfp8": Emulation(
            "B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.f32.e4m3.e4m3.ue8m0", scaling="scheme",
            scheme="mxfp8_e4m3",
            description="B200 MXFP8 (OCP MX: e4m3 elements, an e8m0 scale per 32) on tcgen05 kind::mxf8f6f4"),
        "B200-nvfp4": Emulation(
            "B200", "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.ue4m3", scaling="scheme",
            scheme="nvfp4",
            description="B200 NVFP4 (e2m1 elements, an e4m3 scale per 16, an f32 per-tensor scale) on tcgen05 "
                        "kind::mxf4nvf4"),
        "MI300X-fp8": Emulation(
            "MI300X", "v_mfma_f32_32x32x16_fp8_fp8", scaling="tensor",
            description="MI300X FP8 (e4m3fnuz) v_mfma with per-tensor scaling"),
    }


#: name -> :class:`Emulation`; docs/torch.md says what each models
PRESETS: dict = {}


def preset(name: str) -> Emulation:
    """The preset ``name`` (see :data:`PRESETS`)."""
    if not PRESETS:
        PRESETS.update(_presets())
    try:
        return PRESETS[name]
    except KeyError:
        raise OperandError(f"unknown preset {name!r}; presets: {', '.join(sorted(PRESETS))}") from None


def presets() -> dict:
    """Every preset, name -> :class:`Emulation`."""
    if not PRESETS:
        PRESETS.update(_presets())
    return dict(PRESETS)
