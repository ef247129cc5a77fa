"""What an emulated GEMM is: :class:`Emulation` (the instruction, how float operands become
words, promotion, split-K, output format) and the documented presets (docs/torch.md).

A linear layer runs three GEMMs: the forward ``y = x W^T``, the input gradient
``dx = dy W`` and the weight gradient ``dW = dy^T x``.  An :class:`Emulation` names the
instruction and settings for all three; ``dgrad`` / ``wgrad`` override them per GEMM
(FP8 recipes quantize gradients to e5m2, so their backward GEMMs use other instructions).
"""

from __future__ import annotations

import collections.abc
import difflib
import reprlib
import textwrap

import attrs
import numpy as np

from mmasim.composition.mainloop import SPLIT_REDUCE
from mmasim.errors import EmulationError, UnknownPreset

#: how the operands of a GEMM become words
SCALINGS = ("cast", "tensor", "scheme", "delayed")
#: how scaled_dot_product_attention is emulated (mmasim.torch.attention)
ATTENTIONS = ("softmax", "fa3-fp8", "fa3-fp8-flash", "cudnn-mxfp8", "sage3-nvfp4")
#: how A's elements round (Emulation.a_rounding)
ROUNDINGS = ("nearest", "stochastic")


def _refuse(attribute, accepted: str, value):
    shown = reprlib.repr(value)
    raise EmulationError(f"Emulation: {attribute.name} must be {accepted}, not {shown} ({type(value).__name__})")


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


#: what ``arch`` and ``instruction`` take, for their messages
_NAMES = {"arch": "an architecture name (a str such as 'H100', see mmasim.architectures())",
          "instruction": "an instruction (a str such as 'mma.sync.m16n8k16.f32.bf16.bf16.f32', "
                         "see mmasim.instructions(arch))"}


def _name(instance, attribute, value):
    if not isinstance(value, str) or not value.strip():
        _refuse(attribute, _NAMES[attribute.name], value)


def _one_of(choices):
    def check(instance, attribute, value):
        if not isinstance(value, str) or value not in choices:
            _refuse(attribute, f"one of {', '.join(map(repr, choices))}", value)
    return check


def _scheme(instance, attribute, value):
    if value is None:
        return
    from mmasim.quantization.quantize import schemes
    names = schemes()
    if not isinstance(value, str) or value not in names:
        _refuse(attribute, f"None or a mmasim.quantize scheme: {', '.join(names)}", value)


def _offering(field: str) -> str:
    from mmasim.quantization.quantize import offering
    return offering(field)


def _scale_rounding(instance, attribute, value):
    if value is None:
        return
    from mmasim.quantization.rounding import SCALE_ROUNDINGS
    if not isinstance(value, str) or value not in SCALE_ROUNDINGS:
        _refuse(attribute, f"None (the scheme's default) or one of {', '.join(map(repr, SCALE_ROUNDINGS))}", value)


def _seed(instance, attribute, value):
    if not _is_int(value) or value < 0:
        _refuse(attribute, "a non-negative integer (the seed of the stochastic-rounding bits)", value)


class DelayedScalings:
    """The delayed-scaling state an ``Emulation(scaling="delayed")`` carries across steps: one
    :class:`mmasim.quantization.delayed.DelayedScaling` per module and tensor role, as
    Transformer Engine keeps an ``fp8_meta`` per module with a slot per tensor (the GEMM's A,
    B and the incoming gradient dD: a linear layer's input, weight and output gradient), each in
    its format, made on first use with ``margin``, ``amax_history_len`` and
    ``amax_compute_algo`` (Transformer Engine's ``DelayedScaling`` defaults).  Inside
    :func:`mmasim.torch.emulate` the module is the one that runs the op (its name in
    ``model.named_modules()``, :meth:`for_module`); a GEMM outside a named module
    (:func:`mmasim.torch.linear` called directly) uses the module ``None``.  :meth:`update`
    after each training step (TE's post-step update) updates every module's states;
    :meth:`reset` forgets every history."""

    def __init__(self, *, margin: int = 0, amax_history_len: int = 1024, amax_compute_algo: str = "max"):
        from mmasim.quantization.delayed import DelayedScaling
        DelayedScaling("e4m3", margin=margin, amax_history_len=amax_history_len,
                       amax_compute_algo=amax_compute_algo)        # checks the settings
        self.options = {"margin": margin, "amax_history_len": amax_history_len,
                        "amax_compute_algo": amax_compute_algo}
        self.roles: dict = {}       # (module, role, format) -> DelayedScaling, shared by every view
        self.module = None
        self._views: dict = {None: self}

    def for_module(self, name) -> "DelayedScalings":
        """The same state seen from module ``name``: its roles are that module's own (one view per
        name, so that Emulations scoped to one module compare equal)."""
        view = self._views.get(name)
        if view is None:
            view = object.__new__(DelayedScalings)
            view.options, view.roles, view.module, view._views = self.options, self.roles, name, self._views
            self._views[name] = view
        return view

    def scaling(self, role, fmt: str, module=...):
        """The state of tensor ``role`` of ``module`` (default: this view's) cast to ``fmt``
        (``"e4m3"`` / ``"e5m2"``)."""
        from mmasim.quantization.delayed import DelayedScaling
        key = (self.module if module is ... else module, role, fmt)
        if key not in self.roles:
            self.roles[key] = DelayedScaling(fmt, **self.options)
        return self.roles[key]

    def update(self) -> None:
        """The step's end: every module's and role's scale from its amax history (``DelayedScaling.update``)."""
        for ds in self.roles.values():
            ds.update()

    def reset(self) -> None:
        self.roles.clear()

    def __eq__(self, other):
        return isinstance(other, DelayedScalings) and other.roles is self.roles and other.module == self.module

    def __hash__(self):
        return hash((id(self.roles), self.module))

    def __repr__(self) -> str:
        where = "" if self.module is None else f", module {self.module!r}"
        return (f"DelayedScalings({', '.join(f'{k}={v!r}' for k, v in self.options.items())}, {len(self.roles)} "
                f"roles{where})")


def _delayed(instance, attribute, value):
    if value is not None and not isinstance(value, DelayedScalings):
        _refuse(attribute, "None or an mmasim.torch.DelayedScalings (the state scaling='delayed' carries)", value)


def _output(instance, attribute, value):
    if value is None:
        return
    from mmasim.quantization.casts import element_formats
    keys = sorted(element_formats())
    if not isinstance(value, str) or value not in keys:
        _refuse(attribute, f"None (D as float32) or a format D is rounded to: {', '.join(keys)}", value)


def _bool(instance, attribute, value):
    if not isinstance(value, (bool, np.bool_)):
        _refuse(attribute, "True or False", value)


def _positive_or_none(instance, attribute, value):
    if value is not None and (not _is_int(value) or value < 1):
        _refuse(attribute, "a positive integer or None", value)


def _pair(value):
    return tuple(value) if isinstance(value, list) else value


def _tile(instance, attribute, value):
    if value is not None and not (isinstance(value, tuple) and len(value) == 2
                                  and all(_is_int(v) and v >= 1 for v in value)):
        _refuse(attribute, "None or a pair of positive integers (rows, columns) such as (128, 128)", value)


#: what ``qualifiers`` takes, for its messages
_QUALIFIERS = ("a mapping of mmasim.MMA keyword qualifiers to str, int or bool values, such as "
               "{'d_type': 'f32'}")


def _qualifiers(value):
    """``qualifiers`` as sorted ``(name, value)`` pairs (a mapping, or such pairs again, as
    ``attrs.evolve`` passes them back); anything else is refused, naming what is accepted."""
    if isinstance(value, collections.abc.Mapping):
        items = list(value.items())
    elif isinstance(value, (tuple, list)) and all(isinstance(i, tuple) and len(i) == 2 for i in value):
        items = list(value)
    else:
        raise EmulationError(f"Emulation: qualifiers must be {_QUALIFIERS}, not {reprlib.repr(value)} "
                             f"({type(value).__name__})")
    for key, v in items:
        if not isinstance(key, str) or not isinstance(v, (str, int, bool, np.integer, np.bool_)):
            raise EmulationError(f"Emulation: qualifiers must be {_QUALIFIERS}, not the entry "
                                 f"{reprlib.repr(key)}: {reprlib.repr(v)}")
    if len({k for k, _ in items}) != len(items):
        raise EmulationError(f"Emulation: qualifiers name a qualifier twice: {reprlib.repr(value)}")
    return tuple(sorted(items))


def _optional_emulation(instance, attribute, value):
    if value is not None and not isinstance(value, Emulation):
        _refuse(attribute, "an Emulation (the settings of that GEMM) or None (the forward's)", value)


def _text(instance, attribute, value):
    if not isinstance(value, str):
        _refuse(attribute, "a str", value)


@attrs.frozen
class Emulation:
    """One emulated GEMM setting (and, through ``dgrad`` / ``wgrad``, the backward ones).

    - ``arch``, ``instruction``, ``qualifiers``: the instruction, as :func:`mmasim.MMA` takes
      them (looked up on first use, :meth:`model`); its A and B formats are the operands' formats.
    - ``scaling``: ``"cast"`` (each float rounded to nearest even into the operand format,
      saturating where ``saturate``), ``"tensor"`` (FP8 per-tensor scaling: each operand
      divided by ``amax / max_finite`` in binary32, cast, and D multiplied back by both
      scales in binary32, as Transformer Engine's current scaling does), or ``"scheme"``
      (``mmasim.quantize`` with ``scheme``, a registered recipe such as OCP MX, NVFP4, DeepSeek
      FP8, or a plugin's: its scales go to the instruction or are applied at promotion by
      :func:`mmasim.gemm`, as the scheme's ``scale_use`` says).  What a scheme takes below is
      read from its :class:`~mmasim.registry.scheme.Scheme` record.
    - ``scale_rounding``: ``None`` (the scheme's default, OCP's FLOOR for MX) or one of the
      scheme's ``scale_roundings``: ``"floor"`` / ``"rceil"``, how an MX scheme rounds its e8m0
      block scales (``mmasim.quantize(..., scale_rounding=)``; ``"rceil"``: Transformer
      Engine's and cuBLAS's ``cvt.rp.satfinite.ue8m0x2.f32``).
    - ``a_rounding``: ``"nearest"`` or ``"stochastic"``: how A's elements round under a
      scheme that rounds stochastically (``Scheme.stochastic``: not ``deepseek_fp8``;
      ``mmasim.quantize(..., rounding=, seed=seed)``; the backward GEMMs' A is the gradient
      dy); ``seed``: the seed of those random bits, the same at every call (a reproducible
      stream, not a fresh one per step).
    - ``hadamard``: ``True``: both operands of the GEMM of a scheme that offers it
      (``Scheme.hadamard``: ``nvfp4``) go through the random Hadamard transform along K first
      (``mmasim.quantize(..., hadamard=True)``, TE's default signs), as Transformer Engine does
      for the weight gradient's inputs; its kernels read the format ``Scheme.hadamard`` names
      (bf16), so the operands are rounded to it (RNE) before the transform.
    - ``promote_every``, ``split_k``, ``split_reduce``: passed to :func:`mmasim.gemm`.
    - ``b_tile``: the tile of B's scales, one the scheme's ``tiles`` take: for ``deepseek_fp8``
      (``(128, 128)``: DeepSeek's weight blocks; ``None``: the scheme's default, 128 x 1 groups
      along K, as for activations) or ``nvfp4`` (``(16, 16)``: Transformer Engine's 2D weight
      tiles; ``None``: 1 x 16 blocks).
    - ``output``: ``None`` (the float32 values of D) or a format key (``"bf16"``, ``"f16"``)
      that D is rounded to (RNE) before it becomes float32 again.
    - ``attention``: how ``scaled_dot_product_attention`` runs (:mod:`mmasim.torch.attention`):
      ``"softmax"`` (the normalized float32 softmax, P quantized by the PV GEMM's recipe) or
      ``"fa3-fp8"`` (FlashAttention-3's FP8 forward: Q, K, V scaled per (batch, head), P
      unnormalized times 2^8 and cast, O divided by the row sum at the end; needs ``"cast"`` or
      ``"tensor"`` scaling and an FP8 A format), ``"fa3-fp8-flash"`` (the same forward block by block:
      FA3's key blocks, running max and rescaling of O, :mod:`mmasim.torch.flash_attention`; forward
      only), ``"cudnn-mxfp8"`` (cuDNN's MXFP8 SDPA as Transformer
      Engine calls it: MXFP8 Q, K, V, P cast to e4m3 with unit block scales; an e4m3 x e4m3
      ``ue8m0`` instruction) or ``"sage3-nvfp4"`` (SageAttention3's FP4 forward: NVFP4-style Q, K,
      V without a tensor scale, P scaled to 448 * 6 per row and quantized per 16 keys; an e2m1
      ``ue4m3`` instruction); the last two are forward only (:mod:`mmasim.torch.scaled_attention`).

    Every field is checked when the Emulation is made: a value it does not take raises
    :class:`~mmasim.errors.EmulationError` naming the field and what it accepts.
    """

    arch: str = attrs.field(validator=_name)
    instruction: str = attrs.field(validator=_name)
    scaling: str = attrs.field(default="cast", validator=_one_of(SCALINGS))
    scheme: str | None = attrs.field(default=None, validator=_scheme)
    saturate: bool = attrs.field(default=True, validator=_bool)
    scale_rounding: str | None = attrs.field(default=None, validator=_scale_rounding)
    a_rounding: str = attrs.field(default="nearest", validator=_one_of(ROUNDINGS))
    seed: int = attrs.field(default=0, validator=_seed)
    hadamard: bool = attrs.field(default=False, validator=_bool)
    delayed: DelayedScalings | None = attrs.field(default=None, validator=_delayed)
    promote_every: int | None = attrs.field(default=None, validator=_positive_or_none)
    split_k: int | None = attrs.field(default=None, validator=_positive_or_none)
    split_reduce: str = attrs.field(default="sequential", validator=_one_of(SPLIT_REDUCE))
    output: str | None = attrs.field(default=None, validator=_output)
    attention: str = attrs.field(default="softmax", validator=_one_of(ATTENTIONS))
    b_tile: tuple | None = attrs.field(default=None, converter=_pair, validator=_tile)
    qualifiers: tuple = attrs.field(default=(), converter=_qualifiers)
    dgrad: "Emulation | None" = attrs.field(default=None, validator=_optional_emulation)
    wgrad: "Emulation | None" = attrs.field(default=None, validator=_optional_emulation)
    description: str = attrs.field(default="", validator=_text)

    def __attrs_post_init__(self):
        if self.scaling == "scheme" and not self.scheme:
            raise EmulationError("Emulation: scaling='scheme' needs scheme= (see mmasim.quantize_schemes())")
        if self.scheme and self.scaling != "scheme":
            raise EmulationError(f"Emulation: scheme={self.scheme!r} needs scaling='scheme'")
        if (self.scaling == "delayed") != (self.delayed is not None):
            raise EmulationError("Emulation: scaling='delayed' and delayed= (a DelayedScalings) go together")
        if self.attention == "fa3-fp8" and self.scaling == "scheme":
            raise EmulationError("Emulation: attention='fa3-fp8' scales Q, K and V per tensor; it needs scaling "
                                 "'cast' or 'tensor', not 'scheme'")
        recipe = self.recipe_scheme()
        if self.scale_rounding is not None and not (recipe and recipe.scale_roundings):
            raise EmulationError(f"Emulation: scale_rounding rounds the block scales of a scheme that offers a "
                                 f"choice ({_offering('scale_roundings')}); it needs scaling='scheme' with one, not "
                                 f"scheme={self.scheme!r}")
        if self.scale_rounding is not None and self.scale_rounding not in recipe.scale_roundings:
            raise EmulationError(f"Emulation: scheme {self.scheme!r} rounds its scales "
                                 f"{' or '.join(map(repr, recipe.scale_roundings))}, not {self.scale_rounding!r}")
        if self.b_tile is not None and not (recipe and recipe.takes_tile(self.b_tile)):
            raise EmulationError(f"Emulation: b_tile is the tile of B's scales under a scheme that takes tiles "
                                 f"({_offering('tiles')}); scheme={self.scheme!r} takes "
                                 f"{recipe.describe_tiles() if recipe else 'no tile'}, not {self.b_tile}")
        if self.a_rounding == "stochastic" and not (recipe and recipe.stochastic):
            raise EmulationError(f"Emulation: a_rounding='stochastic' rounds A under a scheme that rounds "
                                 f"stochastically ({_offering('stochastic')}, the plain casts); it needs "
                                 f"scaling='scheme' with one, not scheme={self.scheme!r}")
        if self.hadamard and not (recipe and recipe.hadamard):
            raise EmulationError(f"Emulation: hadamard=True transforms the operands of a scheme that offers the "
                                 f"Hadamard transform ({_offering('hadamard')}); it needs scaling='scheme' with "
                                 f"one, not scheme={self.scheme!r}")
        if self.hadamard and self.b_tile is not None:
            raise EmulationError("Emulation: Transformer Engine quantizes 16 x 16 weight tiles without the Hadamard "
                                 "transform; give hadamard=True or b_tile, not both")

    def gemm_options(self) -> dict:
        """The options of :func:`mmasim.gemm` this setting names: promotion and split-K."""
        kwargs = {}
        if self.promote_every:
            kwargs["promote_every"] = self.promote_every
        if self.split_k:
            kwargs["split_k"] = self.split_k
            kwargs["split_reduce"] = self.split_reduce
        return kwargs

    def recipe_scheme(self):
        """The :class:`~mmasim.registry.scheme.Scheme` of ``scheme`` (``None`` without one)."""
        if self.scheme is None:
            return None
        from mmasim.quantization.quantize import lookup
        return lookup(self.scheme)

    @property
    def recipe(self) -> str:
        """How the operands become words and D is composed, in a few words (the presets table)."""
        if self.scaling == "cast":
            parts = ["cast, RNE" + (", saturating" if self.saturate else "")]
        elif self.scaling == "tensor":
            parts = ["per-tensor scaling"]
        elif self.scaling == "delayed":
            parts = ["delayed per-tensor scaling"]
        else:
            parts = [self.scheme + (f", B tile {self.b_tile[0]} x {self.b_tile[1]}" if self.b_tile else "")
                     + (f", {self.scale_rounding.upper()} scales" if self.scale_rounding else "")
                     + (", RHT" if self.hadamard else "")
                     + (", A stochastic rounding" if self.a_rounding == "stochastic" else "")]
        if self.promote_every:
            parts.append(f"promote every {self.promote_every}")
        if self.split_k:
            parts.append(f"split-K {self.split_k} ({self.split_reduce})")
        if self.output:
            parts.append(f"D rounded to {self.output}")
        if self.attention != "softmax":
            parts.append(f"attention {self.attention}")
        return "; ".join(parts)

    def to_json(self) -> dict:
        """The fields as JSON values (``dgrad`` / ``wgrad`` nested, ``null`` where the forward's apply)."""
        return {"arch": self.arch, "instruction": self.instruction, "qualifiers": dict(self.qualifiers),
                "scaling": self.scaling, "scheme": self.scheme, "saturate": bool(self.saturate),
                "scale_rounding": self.scale_rounding, "a_rounding": self.a_rounding, "seed": int(self.seed),
                "hadamard": bool(self.hadamard),
                "delayed": dict(self.delayed.options) if self.delayed else None,
                "promote_every": self.promote_every, "split_k": self.split_k, "split_reduce": self.split_reduce,
                "output": self.output, "b_tile": list(self.b_tile) if self.b_tile else None,
                "attention": self.attention,
                "recipe": self.recipe, "description": self.description,
                "dgrad": self.dgrad.to_json() if self.dgrad else None,
                "wgrad": self.wgrad.to_json() if self.wgrad else None}

    def for_module(self, name) -> "Emulation":
        """This setting as module ``name`` runs it: under delayed scaling, the module's own
        amax histories and scales (:meth:`DelayedScalings.for_module`); else itself."""
        subs = {k: getattr(self, k).for_module(name) for k in ("dgrad", "wgrad") if getattr(self, k) is not None}
        if self.delayed is None and all(subs[k] is getattr(self, k) for k in subs):
            return self
        own = {"delayed": self.delayed.for_module(name)} if self.delayed is not None else {}
        return attrs.evolve(self, **own, **subs)

    def for_gemm(self, which: str) -> "Emulation":
        """The setting of GEMM ``which``: ``"forward"``, ``"dgrad"`` or ``"wgrad"``."""
        if which == "forward":
            return self
        if which not in ("dgrad", "wgrad"):
            raise EmulationError(f"Emulation.for_gemm: 'forward', 'dgrad' or 'wgrad', not {which!r}")
        return getattr(self, which) or self

    def model(self):
        """The instruction's :class:`~mmasim.execution.model.Model`, looked up once per registry (every
        GEMM of a layer reuses it, and the kernel its plan holds; a plugin registered since,
        which makes a new registry, makes a new lookup)."""
        from mmasim.execution.model import Model
        from mmasim.registry.build import get_registry
        m = _MODELS.get(self)
        if m is None or m.registry is not get_registry():
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
    delayed = DelayedScalings()
    nvfp4 = "tcgen05.mma.kind::mxf4nvf4.block_scale.scale_vec::4X.f32.e2m1.e2m1.ue4m3"
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
        "H100-fp8-fa3": Emulation(
            "H100", h100_e4m3, scaling="tensor", attention="fa3-fp8",
            dgrad=Emulation("H100", _fp8("H100", "e5m2", "e4m3", "wgmma"), scaling="tensor"),
            wgrad=Emulation("H100", _fp8("H100", "e5m2", "e4m3", "wgmma"), scaling="tensor"),
            description="H100-fp8-tensor with attention as FlashAttention-3's FP8 forward runs it: Q, K and V "
                        "e4m3 with a scale per batch and head, QK^T and PV on wgmma e4m3, P = exp2(S * scale - "
                        "max + 8) (up to 2^8) cast to e4m3, O divided by the float32 row sum and V's scale at the "
                        "end (hopper/softmax.h, Max_offset 8)"),
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
        "B200-mxfp8-sdpa": Emulation(
            "B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.f32.e4m3.e4m3.ue8m0", scaling="scheme",
            scheme="mxfp8_e4m3", scale_rounding="rceil", attention="cudnn-mxfp8",
            description="TE-mxfp8 with attention as Transformer Engine runs it under MXFP8BlockScaling: cuDNN's "
                        "MXFP8 SDPA (transformer_engine/common/fused_attn/fused_attn_fp8.cu, TE d0067d0d; "
                        "cudnn-frontend scaled_dot_product_flash_attention.h, 3929da2e): Q and K with e8m0 "
                        "scales per 32 along the head dimension, V per 32 along the keys (RCEIL), the float32 "
                        "softmax of S * scale, P cast to e4m3 with no scale; QK^T and PV on tcgen05 "
                        "kind::mxf8f6f4 (assumed: cuDNN's engine is closed), forward only"),
        "RTX5090-nvfp4-sage3": Emulation(
            "sm_120a", "mma.sync.kind::mxf4nvf4.block_scale.scale_vec::4X.block16.m16n8k64.f32.e2m1.e2m1.ue4m3",
            scaling="scheme", scheme="nvfp4", attention="sage3-nvfp4",
            description="NVFP4 GEMMs on the RTX 5090's mma.sync kind::mxf4nvf4 (Transformer Engine's 1 x 16 "
                        "recipe), and attention as SageAttention3 runs it (thu-ml/SageAttention "
                        "sageattention3_blackwell/, d1a57a54): K less its mean, Q less its mean per 128 "
                        "queries, e2m1 with an e4m3 scale per 16 (amax / 6, no tensor scale), P = "
                        "exp2(S * c - max * c) * 448 * 6 quantized per 16 keys with scale (block max) / 6, "
                        "the online softmax over key blocks of 128, on the SM120 NVFP4 mma.sync the "
                        "kernel uses (SM120_16x32x64_TN_VS_NVFP4), forward only"),
        "B200-nvfp4-sage3": Emulation(
            "B200", nvfp4, scaling="scheme", scheme="nvfp4", attention="sage3-nvfp4",
            description="B200-nvfp4 with attention as RTX5090-nvfp4-sage3 runs it (SageAttention3's FP4 forward), "
                        "QK^T and PV on the B200's tcgen05 kind::mxf4nvf4 scale_vec::4X (assumed: SageAttention3's "
                        "kernel is written for sm_120a's mma.sync; this is the B200's NVFP4 datapath in its "
                        "place), forward only"),
        "TE-mxfp8": Emulation(
            "B200", "tcgen05.mma.kind::mxf8f6f4.block_scale.f32.e4m3.e4m3.ue8m0", scaling="scheme",
            scheme="mxfp8_e4m3", scale_rounding="rceil",
            description="Transformer Engine's MXFP8BlockScaling (transformer_engine/common/recipe/__init__.py, "
                        "default fp8_format E4M3: e4m3 for every tensor, gradients included): 1 x 32 blocks along "
                        "each GEMM's K, e8m0 scales rounded up (RCEIL, cvt.rp.satfinite.ue8m0x2.f32), on B200 "
                        "tcgen05 kind::mxf8f6f4"),
        "TE-nvfp4": Emulation(
            "B200", nvfp4, scaling="scheme", scheme="nvfp4", b_tile=(16, 16),
            dgrad=Emulation("B200", nvfp4, scaling="scheme", scheme="nvfp4", b_tile=(16, 16),
                            a_rounding="stochastic"),
            wgrad=Emulation("B200", nvfp4, scaling="scheme", scheme="nvfp4", a_rounding="stochastic",
                            hadamard=True),
            description="Transformer Engine's NVFP4BlockScaling (transformer_engine/common/recipe/__init__.py; "
                        "the NVFP4 pretraining paper): activations in 1 x 16 blocks rounded to nearest even, "
                        "weights in 16 x 16 tiles (their transposed read in dgrad shares the tile scales), "
                        "gradients rounded stochastically (cvt.rs, seed 0), the wgrad GEMM's inputs (dy and x) "
                        "through the random Hadamard transform along K, on B200 tcgen05 kind::mxf4nvf4"),
        "TE-fp8-delayed": Emulation(
            "H100", h100_e4m3, scaling="delayed", delayed=delayed,
            dgrad=Emulation("H100", _fp8("H100", "e5m2", "e4m3", "wgmma"), scaling="delayed", delayed=delayed),
            wgrad=Emulation("H100", _fp8("H100", "e5m2", "e4m3", "wgmma"), scaling="delayed", delayed=delayed),
            description="Transformer Engine's DelayedScaling (transformer_engine/common/recipe/__init__.py, its "
                        "defaults: HYBRID, margin 0, amax history 1024, max): each tensor role (input, weight, "
                        "output gradient) cast with the scale from earlier steps' amaxes (1 at first), "
                        "its DelayedScalings.update() after each step; one state per module and role, as TE's "
                        "fp8_meta per module; H100 wgmma fp8 as H100-fp8-tensor"),
        "MI300X-fp8": Emulation(
            "MI300X", "v_mfma_f32_32x32x16_fp8_fp8", scaling="tensor",
            description="MI300X FP8 (e4m3fnuz) v_mfma with per-tensor scaling"),
    }


#: the three GEMMs of a layer, in the order the table shows them
GEMMS = ("forward", "dgrad", "wgrad")


class Presets(collections.abc.Mapping):
    """Every preset, name -> :class:`Emulation`; shown (``str``, ``repr``) as a table: per preset
    the architecture, the instruction and recipe of each GEMM, and what it models."""

    def __init__(self, items: dict):
        self._items = dict(items)

    def __getitem__(self, name):
        return self._items[name]

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    @staticmethod
    def _rows(name: str, em: Emulation) -> list:
        """``(preset, arch, GEMMs, instruction, recipe)`` per distinct GEMM setting of ``em``
        (``GEMMs``: ``"all"``, or the GEMMs that share the row's setting); the name on the first,
        the architecture where it changes."""
        groups = {}
        for which in GEMMS:
            groups.setdefault(em.for_gemm(which), []).append(which)
        out = []
        for g, whiches in groups.items():
            q = ", ".join(f"{k}={v}" for k, v in g.qualifiers)
            out.append(("" if out else name, "" if out and g.arch == em.arch else g.arch,
                        "all" if len(whiches) == len(GEMMS) else ", ".join(whiches),
                        g.instruction + (f" ({q})" if q else ""), g.recipe))
        return out

    def table(self, width: int = 100) -> str:
        """The table: a row per distinct GEMM setting, each preset's description wrapped to ``width`` below."""
        head = ("preset", "arch", "GEMMs", "instruction", "recipe")
        rows = {name: self._rows(name, em) for name, em in self._items.items()}
        w = [max(len(r[i]) for r in [head, *(r for rs in rows.values() for r in rs)]) for i in range(len(head))]

        def line(r):
            return "  ".join(f"{c:{n}s}" for c, n in zip(r, w)).rstrip()

        out = [line(head), line(tuple("-" * n for n in w))]
        for name, em in self._items.items():
            out += [""] if len(out) > 2 else []
            out += [line(r) for r in rows[name]]
            out += textwrap.wrap(em.description, width, initial_indent="    ", subsequent_indent="    ")
        out += ["", f"{len(self)} presets: mmasim.torch.preset(NAME), mmasim.torch.emulate(model, NAME) "
                    "(docs/torch.md)"]
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()

    __repr__ = __str__

    def to_json(self) -> dict:
        """The ``mmasim.presets/1`` document (``mmasim presets --json``, docs/user-guide.md)."""
        return {"schema": "mmasim.presets/1",
                "presets": [{"name": n, **em.to_json()} for n, em in self._items.items()]}


#: name -> Emulation, built on the first lookup (some validators read the registry)
_PRESETS: dict = {}


def presets() -> Presets:
    """Every preset, name -> :class:`Emulation`; printed, a table (``mmasim presets``)."""
    if not _PRESETS:
        _PRESETS.update(_presets())
    return Presets(_PRESETS)


def preset(name: str) -> Emulation:
    """The preset ``name`` (see :func:`presets`); an unknown name raises
    :class:`~mmasim.errors.UnknownPreset` with close matches and every preset."""
    table = presets()
    if isinstance(name, str) and name in table:
        return table[name]
    close = difflib.get_close_matches(name, list(table), n=3) if isinstance(name, str) else []
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise UnknownPreset(f"unknown preset {reprlib.repr(name)}.{hint} Presets: {', '.join(table)} "
                        "(mmasim presets shows what each is)")
