"""Output encoders: the rounding ρ of docs/datapaths.md section 2, and the encoder of casts.

An exact value ``(-1)**neg * mag * 2**e0`` (integer ``mag``) is rounded onto a float format's
grid by :func:`round_code`, the one rounding engine: toward zero, to nearest even, away from
zero, or stochastically (the carry of given random bits).  Two encoders put its codes in words:
:class:`Encoding` (a datapath's D: RZ / RNE into f32, f16, e8m13, f64, or an integer sum
wrapped or saturated to s32) and :func:`encode` (any float :class:`~mmasim.arith.formats.Format`
the generic decoder reads: its bias, subnormals, signedness, NaN rule and container, with
saturation; the casts of :mod:`mmasim.quantization.casts`).  Pure integer arithmetic.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.arith.formats import Format
from mmasim.arith.intmath import bit_length, clip, shift

#: rounding modes of :func:`round_code`: toward zero, to nearest (ties to the even
#: significand), away from zero (``cvt.rp`` of a non-negative value), stochastic (``cvt.rs``)
ROUNDINGS = ("rz", "rne", "away", "rs")


def round_code(mag, e0, *, emin: int, frac: int, mode: str, max_code: int, subnormals: bool = True,
               rbits=None, rbits_width: int = 0):
    """``mag * 2**e0`` (non-negative int64 ``mag`` below 2**62) rounded onto the grid of a
    float format with ``frac`` fraction bits whose smallest normal number is ``2**emin``:
    ``(code, over)``.

    ``code`` is the format's magnitude field, exponent and fraction: ``((t - emin) << frac) +
    s`` for the rounded value ``s * 2**(t - frac)`` (``s`` the significand, leading bit
    included, ``t`` its binade, at least ``emin``), so a carry out of the significand moves
    into the exponent.  ``subnormals=False`` (every exponent code normal, no zero: ue8m0):
    ``code`` counts from ``2**emin`` (its leading bit not stored), and what rounds below it is
    ``2**emin``, the format's smallest value, as a zero ``mag`` is.  ``over``: a nonzero value
    whose rounded code passes ``max_code`` (the largest finite code).

    The rounding step from the bits below the kept last bit (``rem``, of ``drop`` bits):

    * ``"rz"``: none;  ``"away"``: one when ``rem`` is not 0;
    * ``"rne"``: one above half, and at half when the kept significand is odd (with no
      fraction bits every significand is 1: ties go up);
    * ``"rs"``: the carry out of ``floor(rem / 2**drop * 2**rbits_width) + rbits``, a
      ``rbits_width``-bit addition: the random bits sit right below the kept last bit (PTX
      ``cvt.rs``).

    The compiled kernels (numba, CPU and CUDA) round one value at a time by the scalar form of
    this rule, :func:`mmasim.backends.numba.primitives._round_any` (every mode; its
    ``_round_code``, ``"rz"`` and ``"rne"`` with subnormals, is what their encoder ``_pack`` and
    ``tiles._rz_f32`` call; the compiled casts, :mod:`mmasim.backends.cuda.quantize`, call it
    whole); a change here is a change there."""
    mag = np.asarray(mag, dtype=np.int64)
    e0 = np.asarray(e0, dtype=np.int64)
    lead = e0 + bit_length(mag) - 1
    top = np.maximum(lead, emin)                # the binade of the kept last bit's leading bit
    drop = top - frac - e0                      # bits below the kept last bit
    d = clip(drop, 0, 63)
    keep = (mag << clip(-drop, 0, 62)) >> d     # truncated to the kept last bit
    if mode != "rz":
        rem = mag - ((mag >> d) << d)           # the dropped bits
        if mode == "rne":
            half = np.int64(1) << np.maximum(d - 1, 0)      # drop >= 63: 2**62, above rem (< 2**62)
            up = (rem > half) | ((rem == half) & ((keep & 1) == 1))
        elif mode == "away":
            up = rem != 0
        elif mode == "rs":
            up = shift(rem, rbits_width - drop) + np.asarray(rbits, dtype=np.int64) >= (1 << rbits_width)
        else:
            raise ValueError(f"rounding mode must be one of {ROUNDINGS}, not {mode!r}")
        keep = keep + up
    code = ((top - emin) << frac) + keep
    if subnormals:
        code = np.where(mag == 0, 0, code)
        lead_max = emin + (max_code >> frac) - 1
    else:
        code = np.maximum(code, 1 << frac) - (1 << frac)
        lead_max = emin + (max_code >> frac)
    # a lead past the largest binade is over (the shifted exponent could wrap int64)
    over = (mag != 0) & ((code > max_code) | (lead > lead_max))
    return code, over


@attrs.frozen
class Encoding:
    """How a datapath turns its exact result into D words."""

    key: str
    format: str                 # key of the output format (f32, f16, f64, s32)
    mode: str = attrs.field(validator=attrs.validators.in_(("rz", "rne", "wrap", "sat")))
    word_bits: int = 32
    exp_bits: int = 8
    frac_bits: int = 23         # fraction bits kept
    word_frac_bits: int = 23    # fraction bits of the word layout
    nan_word: int = 0x7FFFFFFF
    description: str = ""

    @property
    def bias(self) -> int:
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def inf_word(self) -> int:
        return ((1 << self.exp_bits) - 1) << self.word_frac_bits

    @property
    def sign_bit(self) -> int:
        return 1 << (self.word_bits - 1)

    @property
    def dtype(self):
        return {16: np.uint16, 32: np.uint32, 64: np.uint64}[self.word_bits]

    def pack(self, neg, mag, e0, nan=None, inf=None, inf_neg=None, zero_neg=None) -> np.ndarray:
        """Round ``±mag * 2**e0`` and return D words; ``nan``/``inf`` masks
        override with the canonical NaN and ``±inf``.  Zero results are +0
        unless ``zero_neg`` says otherwise."""
        if self.mode in ("wrap", "sat"):
            raise TypeError("integer encodings use pack_int")
        frac = self.frac_bits
        inf_code = ((1 << self.exp_bits) - 1) << frac
        wmag, overflow = round_code(mag, e0, emin=1 - self.bias, frac=frac, mode=self.mode, max_code=inf_code - 1)
        if frac != self.word_frac_bits:  # e.g. E8M13 results in an f32 word
            wmag = ((wmag >> frac) << self.word_frac_bits) | ((wmag & ((1 << frac) - 1)) << (self.word_frac_bits - frac))
        wmag = np.where(overflow, self.inf_word, wmag)
        neg = np.asarray(neg, dtype=bool)
        neg_out = neg & (wmag != 0)
        if zero_neg is not None:
            neg_out = neg_out | ((wmag == 0) & np.asarray(zero_neg, dtype=bool))
        words = wmag.astype(np.uint64) | (neg_out.astype(np.uint64) << np.uint64(self.word_bits - 1))   # the sign bit
        if inf is not None:
            inf_w = np.uint64(self.inf_word) | np.where(np.asarray(inf_neg, dtype=bool), np.uint64(self.sign_bit), np.uint64(0))
            words = np.where(inf, inf_w, words)
        if nan is not None:
            words = np.where(nan, np.uint64(self.nan_word), words)
        return words.astype(self.dtype)

    def pack_int(self, total) -> np.ndarray:
        """Wrap or saturate an exact integer sum to s32 words."""
        total = np.asarray(total, dtype=np.int64)
        if self.mode == "sat":
            total = np.clip(total, -(1 << 31), (1 << 31) - 1)
        return (total & 0xFFFFFFFF).astype(np.uint32)


# ------------------------------------------------------------------ any float format (casts)
def encodable(fmt: Format) -> str | None:
    """Why :func:`encode` cannot write ``fmt``'s words, or ``None`` when it can: a float format
    read by the generic decoder (:func:`mmasim.arith.decode.decode_float`), with a NaN rule
    whose largest finite value is the same for both signs."""
    if fmt.integer:
        return f"{fmt.key} is an integer format"
    if fmt.decoder != "float":
        return f"{fmt.key}'s words are read by the {fmt.decoder!r} decoder, which the encoder does not invert"
    if fmt.nan == "allones" and fmt.signed:
        return f"{fmt.key} is signed with an all-ones NaN (its largest finite value depends on the sign)"
    if fmt.nan == "ieee" and fmt.man_bits == 0:
        return f"{fmt.key} has the IEEE NaN rule but no fraction bit to tell NaN from infinity"
    return None


def max_field(fmt: Format) -> int:
    """The magnitude field (exponent and fraction, no sign) of ``fmt``'s largest finite value."""
    ones = (1 << (fmt.exp_bits + fmt.man_bits)) - 1
    if fmt.nan == "ieee":
        return ones - (1 << fmt.man_bits)               # the exponent field all ones is inf / NaN
    if fmt.nan in ("max", "allones"):
        return ones - 1                                  # all ones is NaN
    return ones                                          # "negzero", "none": every magnitude is finite


def quiet_nan_field(fmt: Format) -> int | None:
    """The field of ``fmt``'s NaN without its sign: IEEE formats the quiet NaN (exponent all
    ones, the fraction's top bit set, as numpy and ml_dtypes give), ``max`` and ``allones``
    all ones, ``negzero`` the negative-zero pattern; ``None`` for a format without NaN."""
    mag_bits = fmt.exp_bits + fmt.man_bits
    if fmt.nan == "ieee":
        return (((1 << fmt.exp_bits) - 1) << fmt.man_bits) | (1 << (fmt.man_bits - 1))
    return {"max": (1 << mag_bits) - 1, "allones": (1 << fmt.field_bits) - 1,
            "negzero": 1 << mag_bits}.get(fmt.nan)


def encode(fmt: Format, neg, mag, e0, *, mode: str = "rne", saturate: bool = False, nan=None, inf=None,
           nan_field: int | None = None, rbits=None, rbits_width: int = 0):
    """``(-1)**neg * mag * 2**e0`` rounded (:func:`round_code`, ``mode``) into float format
    ``fmt`` (:func:`encodable`); ``nan`` / ``inf`` mark NaN and infinite inputs (``neg`` their
    sign).  Returns ``(words, over)``: container words (``uint64``, padding bits 0) and the
    inputs that are infinite or round past the largest finite value.

    ``over`` is the largest finite value with its sign under ``saturate``; otherwise infinity
    in a format with one, NaN in a format with NaN but no infinity (OCP's 8-bit conversion
    without saturation), and the largest finite value in a format with neither (the caller
    refuses those).  NaN is ``nan_field`` (default :func:`quiet_nan_field`) with the input's
    sign where the format's NaNs have one (rules ``ieee`` and ``max``).  Zeros and values
    that round to zero keep their sign, except in an unsigned format and under the
    ``negzero`` rule (whose -0 pattern is NaN): +0."""
    why = encodable(fmt)
    if why:
        raise ValueError(f"no encoder for {fmt.key}: {why}")
    neg = np.asarray(neg, dtype=bool) & fmt.signed
    top = max_field(fmt)
    code, over = round_code(mag, e0, emin=fmt.emin, frac=fmt.man_bits, mode=mode, max_code=top,
                            subnormals=fmt.subnormals, rbits=rbits, rbits_width=rbits_width)
    if inf is not None:
        over = over | np.asarray(inf, dtype=bool)
    nan_code = quiet_nan_field(fmt) if nan_field is None else nan_field
    if saturate or fmt.nan == "none":
        past = top
    elif fmt.nan == "ieee":
        past = top + 1                                   # the next code: infinity
    else:
        past = nan_code
    code = np.where(over, past, code)
    if nan is not None:
        code = np.where(nan, nan_code, code)
    if fmt.nan in ("negzero", "allones"):                # one NaN, its own sign pattern; no -0
        neg = neg & (code != 0) & (code != nan_code)
    sign = np.uint64(1 << (fmt.exp_bits + fmt.man_bits))
    words = code.astype(np.uint64) | np.where(neg, sign, np.uint64(0))
    return words << np.uint64(fmt.field_shift), over


BUILTIN_ENCODINGS = (
    Encoding("rz-f32", "f32", "rz", description="truncate the magnitude to f32; past the range gives ±inf; NaN 0x7FFFFFFF"),
    Encoding("rne-f32", "f32", "rne", description="round to nearest even into f32"),
    Encoding("rz-e8m13", "f32", "rz", frac_bits=13,
             description="f32 word keeping 13 fraction bits, by truncation (fp8 on Ada/Hopper)"),
    Encoding("rne-f16", "f16", "rne", word_bits=16, exp_bits=5, frac_bits=10, word_frac_bits=10,
             nan_word=0x7FFF, description="round to nearest even into f16; NaN 0x7FFF"),
    Encoding("rne-f64", "f64", "rne", word_bits=64, exp_bits=11, frac_bits=52, word_frac_bits=52,
             nan_word=0x7FF8000000000000, description="round to nearest even into f64"),
    Encoding("s32-wrap", "s32", "wrap", description="exact sum wrapped to 32-bit two's complement"),
    Encoding("s32-sat", "s32", "sat", description="exact sum saturated to [-2^31, 2^31-1]"),
)
