"""Output encoders: the rounding ρ of docs/datapaths.md section 2.

An exact result ``(-1)**neg * mag * 2**e0`` (integer ``mag``) is rounded into a
float format with RZ or RNE, or an integer sum is wrapped or saturated to s32.
Pure integer arithmetic.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.arith.intmath import bit_length, clip, shift


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
        mag = np.asarray(mag, dtype=np.int64)
        e0 = np.asarray(e0, dtype=np.int64)
        neg = np.asarray(neg, dtype=bool)
        emin = 1 - self.bias
        frac = self.frac_bits
        lead = e0 + bit_length(mag) - 1
        top = np.maximum(lead, emin)                # exponent of the word's leading bit
        drop = top - frac - e0                      # bits below the kept last bit
        keep = shift(mag, -drop)                    # truncated to the kept last bit
        if self.mode == "rne":
            d = clip(drop, 1, 63)
            rem = mag & ((np.int64(1) << np.minimum(d, 62)) - 1)
            rem = np.where(d > 62, mag, rem)
            half = np.where(d > 62, np.int64(1) << 62, np.int64(1) << (d - 1))
            up = (rem > half) | ((rem == half) & ((keep & 1) == 1))
            keep = keep + np.where(drop > 0, up, False)
        wmag = ((top - emin) << frac) + keep
        wmag = np.where(mag == 0, 0, wmag)
        if frac != self.word_frac_bits:  # e.g. E8M13 results in an f32 word
            wmag = ((wmag >> frac) << self.word_frac_bits) | ((wmag & ((1 << frac) - 1)) << (self.word_frac_bits - frac))
        # a lead past the largest exponent is inf (the shifted exponent could wrap int64)
        overflow = (wmag >= self.inf_word) | ((lead > self.bias) & (mag != 0))
        wmag = np.where(overflow, self.inf_word, wmag)
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
