"""Number formats: what a container word holds (docs/datapaths.md section 1).

A :class:`Format` describes a number format *and its container*: where the
element's bits sit in the word the hardware reads.  The generic decoders in
:mod:`mmasim.arith.decode` interpret any format described here; a plugin with a truly
different encoding registers its own decoder name and sets ``decoder``.
"""

from __future__ import annotations

import attrs

#: Special-value encodings.
NAN_RULES = (
    "ieee",      # exponent all ones: zero fraction is inf, nonzero is NaN
    "max",       # all exponent and fraction bits ones is NaN, no inf (e4m3, ue4m3)
    "negzero",   # the negative-zero pattern is NaN, no inf, no -0 (AMD fnuz)
    "allones",   # the whole field all ones is NaN, no inf (ue8m0)
    "none",      # every pattern is a finite number (e3m2, e2m3, e2m1)
)


def _check_nan_rule(instance, attribute, value):
    if value not in NAN_RULES:
        raise ValueError(f"nan rule must be one of {NAN_RULES}, not {value!r}")


@attrs.frozen
class Format:
    """A number format in its container.

    ``key`` is the registry name (unique); ``name`` the format's own name as
    PTX/ISA documents spell it (several keys may share a name when the same
    format sits in different containers).
    """

    key: str
    name: str
    container_bits: int = attrs.field(validator=attrs.validators.in_((1, 4, 8, 16, 32, 64)))
    field_shift: int = attrs.field(default=0)
    field_bits: int | None = None       # bits of the element proper; default: whole container
    exp_bits: int = 0
    man_bits: int = 0
    bias: int = 0
    signed: bool = True
    nan: str = attrs.field(default="ieee", validator=_check_nan_rule)
    subnormals: bool = True
    integer: bool = False
    decoder: str = "float"
    typed: str | None = None            # numpy / ml_dtypes dtype name for typed arrays
    typed_shift: int = 0                # shift of the typed value's bits into the container
    note: str = ""

    def __attrs_post_init__(self):
        if self.field_bits is None:
            object.__setattr__(self, "field_bits", self.container_bits - self.field_shift)
        if self.field_shift + self.field_bits > self.container_bits:
            raise ValueError(f"format {self.key}: field does not fit its container")
        if not self.integer and self.field_bits != int(self.signed) + self.exp_bits + self.man_bits:
            raise ValueError(
                f"format {self.key}: sign+exponent+mantissa bits != field bits {self.field_bits}"
            )

    @property
    def emin(self) -> int:
        """Exponent of the smallest normal number's leading bit."""
        return 1 - self.bias if self.subnormals else -self.bias

    def describe(self) -> str:
        if self.integer:
            kind = "signed" if self.signed else "unsigned"
            return f"{self.name}: {kind} {self.field_bits}-bit integer in a {self.container_bits}-bit word"
        where = (
            "the whole word"
            if self.field_bits == self.container_bits
            else f"bits {self.field_shift + self.field_bits - 1}:{self.field_shift} of a {self.container_bits}-bit word"
        )
        return (
            f"{self.name}: E{self.exp_bits} M{self.man_bits} bias {self.bias}, "
            f"{'signed' if self.signed else 'unsigned'}, NaN rule {self.nan}, in {where}"
            + (f" ({self.note})" if self.note else "")
        )


def _f(key, name, container, e, m, bias, **kw):
    return Format(key=key, name=name, container_bits=container, exp_bits=e, man_bits=m, bias=bias, **kw)


#: The formats of docs/datapaths.md section 1, registered by the core's own plugin.
BUILTIN_FORMATS = (
    _f("f64", "f64", 64, 11, 52, 1023, typed="float64"),
    _f("f32", "f32", 32, 8, 23, 127, typed="float32"),
    _f("tf32", "tf32", 32, 8, 10, 127, field_shift=13, typed="float32", typed_shift=0,
       note="f32 word; the low 13 bits are ignored before classification"),
    _f("xf32", "xf32", 32, 8, 10, 127, field_shift=13, typed="float32", typed_shift=0,
       note="AMD's tf32 (CDNA3): f32 word; the low 13 bits are ignored before classification"),
    _f("bf16", "bf16", 16, 8, 7, 127, typed="bfloat16"),
    _f("f16", "f16", 16, 5, 10, 15, typed="float16"),
    _f("e4m3", "e4m3", 8, 4, 3, 7, nan="max", typed="float8_e4m3fn"),
    _f("e5m2", "e5m2", 8, 5, 2, 15, typed="float8_e5m2"),
    _f("e3m2", "e3m2", 8, 3, 2, 3, field_bits=6, nan="none", typed="float6_e3m2fn",
       note="bits 7:6 are padding"),
    _f("e2m3", "e2m3", 8, 2, 3, 1, field_bits=6, nan="none", typed="float6_e2m3fn",
       note="bits 7:6 are padding"),
    _f("e2m1", "e2m1", 8, 2, 1, 1, field_shift=2, field_bits=4, nan="none",
       typed="float4_e2m1fn", typed_shift=2, note="bits 7:6 and 1:0 are padding"),
    _f("e2m1x", "e2m1", 4, 2, 1, 1, nan="none", typed="float4_e2m1fn",
       note="packed fp4 kinds: one element per array entry, code in bits 3:0"),
    _f("ue8m0", "ue8m0", 8, 8, 0, 127, signed=False, nan="allones", subnormals=False,
       typed="float8_e8m0fnu", note="scale 2^(x-127), no zero"),
    _f("ue4m3", "ue4m3", 8, 4, 3, 7, field_bits=7, signed=False, nan="max", typed="float8_e4m3fn",
       note="unsigned e4m3: bit 7 ignored; typed: non-negative float8_e4m3fn values"),
    _f("e4m3fnuz", "e4m3fnuz", 8, 4, 3, 8, nan="negzero", typed="float8_e4m3fnuz",
       note="AMD fp8"),
    _f("e5m2fnuz", "e5m2fnuz", 8, 5, 2, 16, nan="negzero", typed="float8_e5m2fnuz",
       note="AMD bf8"),
    Format(key="s8", name="s8", container_bits=8, integer=True, decoder="int", typed="int8"),
    Format(key="u8", name="u8", container_bits=8, integer=True, signed=False, decoder="int",
           typed="uint8"),
    Format(key="s32", name="s32", container_bits=32, integer=True, decoder="int", typed="int32"),
    # sub-byte integers (PTX mma .s4/.u4/.b1): one element per array entry
    Format(key="s4", name="s4", container_bits=4, integer=True, decoder="int",
           note="one element per array entry, two's complement code in bits 3:0"),
    Format(key="u4", name="u4", container_bits=4, integer=True, signed=False, decoder="int",
           note="one element per array entry, code in bits 3:0"),
    Format(key="b1", name="b1", container_bits=1, integer=True, signed=False, decoder="int",
           note="one bit per array entry (0 or 1)"),
)
