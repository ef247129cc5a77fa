"""Float tensors to element words and scales, by the recipes kernels run.

Gives ``mmasim.quantize(x, scheme, axis=-1, ...)`` (:func:`quantize`), which returns a
:class:`Quantized` whose ``words`` (and ``scales``) go to :meth:`mmasim.Model.dot` /
:func:`mmasim.gemm` as they are, :func:`schemes`, and :func:`current_scale` (FP8 per-tensor
scaling's scale).  Owns the schemes: a plain cast per
element format (its registry key, :func:`mmasim.quantization.casts.cast`), OCP MX v1.0
(:func:`_mx`), NVFP4 as NVIDIA Transformer Engine computes it (:func:`_nvfp4`) and DeepSeek
fine-grained FP8 as DeepGEMM computes it (:func:`_deepseek`).  Refuses an unknown scheme
(``UnknownScheme``), integers and values binary64 cannot hold (``DtypeError``), a value the
recipe defines no result for (``NonFiniteError``) and blocks that do not divide ``x``
(``BlockShapeError``).  docs/quantize.md gives each scheme's rule and source.
"""

from __future__ import annotations

import difflib

import attrs
import numpy as np

from mmasim.quantization import casts, hadamard
from mmasim.quantization import rounding as rounding_
from mmasim.errors import (
    BlockShapeError,
    DtypeError,
    NonFiniteError,
    OperandError,
    QuantizeError,
    UnknownScheme,
)
from mmasim.arith.formats import Format
from mmasim.registry.build import get_registry
from mmasim.registry.scheme import SCALE_USES, Scheme
from mmasim.operands.words import WORDS, as_array

F32 = np.float32
FLT_MAX = np.finfo(np.float32).max


@attrs.frozen(eq=False)
class Quantized:
    """A float tensor as element words and scales.

    ``words``: element container words (``container``, a registry format key, of the
    format named ``format``), the shape of the input.  ``scales``: ue8m0 / ue4m3 scale
    words for the instruction (``scale_use="instruction"``; the input's shape with
    ``axis`` divided by ``block``: ``scale_a`` ``(M, K / block)`` of an ``(M, K)`` A,
    ``scale_b`` ``(K / block, N)`` of a ``(K, N)`` B), float32 scales applied at
    promotion (``scale_use="promotion"``; ``scales[i, j]`` belongs to tile ``(i, j)``
    of shape ``block``), or ``None``.  ``tensor_scale``: NVFP4's per-tensor decode
    scale (float32); ``amax``: NVFP4's per-tensor absolute maximum (float32), from
    which Transformer Engine computes its GEMM's alpha.
    """

    words: np.ndarray
    scales: np.ndarray | None
    format: str
    container: str
    scale_format: str | None
    block: object
    axis: int | None
    tensor_scale: np.float32 | None
    scheme: str
    scale_use: str | None
    amax: np.float32 | None = None
    tile_scales: np.ndarray | None = None

    @property
    def shape(self) -> tuple:
        return self.words.shape

    def element_values(self) -> np.ndarray:
        """The elements' own values (float64, exact), before any scale."""
        return casts.values(format_named(self.container), self.words)

    def dequantize(self) -> np.ndarray:
        """The float64 values the words and scales represent (exact: every product fits binary64)."""
        v = self.element_values()
        if self.scale_use == "instruction":
            s = casts.values(format_named(self.scale_format), self.scales)
            v = v * np.repeat(s, self.block, axis=self.axis)
        elif self.scale_use == "promotion":
            t0, t1 = self.block
            v = v * np.repeat(np.repeat(self.scales.astype(np.float64), t0, axis=0), t1, axis=1)
        if self.tensor_scale is not None:
            v = v * np.float64(self.tensor_scale)
        return v

    def transposed(self) -> "Quantized":
        """What a transposed read of the same tensor uses (16 x 16 NVFP4 tiles only): the words
        transposed and the same tile scales, laid out for blocks along the other axis, as
        Transformer Engine's 2D kernel writes its columnwise copy."""
        if self.tile_scales is None:
            raise QuantizeError(f"{self.scheme}: only 16 x 16 tiles (tile=(16, 16)) serve a transposed read; "
                                "quantize x.T for blocks along the other axis")
        ts = self.tile_scales.T
        return attrs.evolve(self, words=self.words.T, tile_scales=ts,
                            scales=np.repeat(ts, 16, axis=1 - self.axis))

    def words_for(self, fmt) -> np.ndarray:
        """The element words in container ``fmt`` (a :class:`~mmasim.arith.formats.Format` or its
        key) of the same format: ``"e2m1"`` (bits 5:2 of a byte, ``kind::mxf8f6f4``) for
        words made in ``"e2m1x"`` (a 4-bit code, ``kind::mxf4``), or ``model.a_format``."""
        f = fmt if isinstance(fmt, Format) else format_named(fmt, "container")
        if f.name != self.format:
            raise UnknownScheme(f"words of {self.format} cannot become {f.name} words ({f.key}); "
                                f"containers of {self.format}: {', '.join(_containers(self.format))}")
        return casts.recontainer(self.words, format_named(self.container), f, what=f"{f.key} words")


@attrs.frozen
class Options:
    """What a recipe does beyond its defaults: the shared exponent's rounding (MX), the element
    rounding with one random word per element of x (``rbits``: x's shape, or ``None``), the
    Hadamard transform (NVFP4)."""

    scale_rounding: str = "floor"
    rounding: str = "nearest"
    rbits: np.ndarray | None = None
    hadamard: object = None


def quantize(x, scheme: str, axis: int = -1, *, saturate=None, nan: str = "raise", tile=None,
             container: str | None = None, scale_rounding: str | None = None, rounding: str = "nearest",
             rbits=None, seed=None, hadamard=None) -> Quantized:
    """``x`` (float values: numpy float16/32/64 or ``ml_dtypes`` arrays, torch float
    tensors, Python floats) as the words and scales of ``scheme`` (docs/quantize.md gives
    each rule, :func:`schemes` every name).

    ``axis``: the axis the blocks run along (K: -1 for an ``(M, K)`` A, 0 for a
    ``(K, N)`` B).  ``saturate`` (plain casts only): clamp what rounds past the
    largest finite value to it instead of inf / NaN.  ``nan``: ``"raise"`` (default)
    refuses NaN, and for OCP MX a block that would get the NaN scale; ``"propagate"``
    gives them their NaN words.  ``tile``: the tile of one scale, in x's axis order
    (``deepseek_fp8``: default 128 along ``axis`` and 1 across; ``nvfp4``: ``(16, 16)``
    for weights).  ``container``: a registry format key of the same element format to hold
    the words (``"e2m1"`` for ``kind::mxf8f6f4``; default: the scheme's own).
    ``scale_rounding`` (MX schemes): ``"floor"`` (default, OCP MX) or ``"rceil"``
    (``cvt.rp.satfinite.ue8m0x2.f32``, Transformer Engine and cuBLAS).  ``rounding``:
    ``"nearest"`` or ``"stochastic"`` (``cvt.rs``, with ``rbits``, one random integer per
    element, or ``seed``).  ``hadamard`` (``nvfp4``): the random Hadamard transform before
    quantization (``True``, a 16-bit sign mask, 16 signs or a
    :class:`~mmasim.quantization.hadamard.Hadamard`).
    """
    s = lookup(scheme)
    casts.check_nan_policy(nan)
    rounding_.check_rounding(rounding, rbits, seed)
    values = _read(x, scheme)
    what = f"quantize(x, {scheme!r})"
    if s.rule is None:
        if tile is not None or scale_rounding is not None or hadamard is not None:
            raise QuantizeError(f"{scheme}: tile=, scale_rounding= and hadamard= are for recipes, not a plain cast")
        own = format_named(s.element)
        cont = _container(own, container, scheme)
        fmt = _rounding_format(cont)
        if rounding == "stochastic":
            sat = fmt.name not in ("bf16", "f16") if saturate is None else saturate
            words = rounding_.stochastic(fmt, rounding_.binary32_values(values, what),
                                         rounding_.element_bits(fmt, values.shape, rbits, seed),
                                         saturate=sat, nan=nan, what=what)
        else:
            words = casts.cast(fmt, values, saturate=False if saturate is None else saturate, nan=nan, what=what)
        return Quantized(casts.recontainer(words, fmt, cont), None, own.name, cont.key, None, None, None, None,
                         scheme, None)
    if saturate is not None:
        raise QuantizeError(f"{scheme}: saturate= is for plain casts; {scheme} saturates as its source says")
    if tile is not None and s.tiles is None:
        raise QuantizeError(f"{scheme}: tile= is for {offering('tiles')}; {scheme} has blocks of {s.block} "
                            "along axis")
    if scale_rounding is not None and not s.scale_roundings:
        raise QuantizeError(f"{scheme}: scale_rounding= is for {offering('scale_roundings')}")
    if hadamard is not None and s.hadamard is None:
        raise QuantizeError(f"{scheme}: hadamard= is for {offering('hadamard')}")
    if rounding == "stochastic" and not s.stochastic:
        raise QuantizeError(f"{scheme}: {s.source or 'the recipe'} rounds to nearest; rounding='stochastic' is for "
                            f"{offering('stochastic')} and plain casts")
    cont = _container(format_named(s.element), container, scheme)
    fmt = _rounding_format(cont)
    opts = Options(scale_rounding=_scale_rounding(scale_rounding, s), rounding=rounding, hadamard=hadamard,
                   rbits=None if rounding == "nearest" else rounding_.element_bits(fmt, values.shape, rbits, seed))
    q = s.rule(s, values, fmt, axis, nan, tile, opts)
    return attrs.evolve(q, words=casts.recontainer(q.words, format_named(q.container), cont), container=cont.key)


def current_scale(amax, fmt) -> np.float32:
    """FP8 per-tensor ("current") scaling's encode scale for a tensor of absolute maximum
    ``amax`` (a binary32 value) cast into element format ``fmt`` (a
    :class:`~mmasim.arith.formats.Format` or its key), as Transformer Engine's
    ``compute_scale_from_amax`` computes it (``transformer_engine/common/recipe/recipe_common.cuh``,
    no epsilon, no power-of-two rounding): ``RN(max_finite / amax)`` in binary32; 1 when amax
    is 0; FLT_MAX where the quotient overflows (an amax below ``max_finite / FLT_MAX``).  The
    tensor is cast as ``x * scale`` and D multiplied back by ``RN(1 / scale)``."""
    a = np.float32(amax)
    if not np.isfinite(a):
        raise NonFiniteError(f"current scaling: amax is {amax!r}; the recipe defines no scale for NaN or infinity")
    if a != np.float64(amax) or a < 0:
        raise QuantizeError(f"current scaling: amax must be a non-negative binary32 value, not {amax!r}")
    if a == 0:
        return F32(1)
    f = fmt if isinstance(fmt, Format) else format_named(fmt)
    m, q = casts.largest(f)
    with np.errstate(over="ignore"):
        scale = F32(np.ldexp(float(m), q)) / a
    return FLT_MAX if np.isinf(scale) else F32(scale)


def refuse_nonfinite_amax(amax) -> None:
    """FP8 per-tensor scaling refuses a tensor whose amax is not finite (``None``: the compiled
    reduction, :func:`mmasim.backends.cuda.quantize.tensor_amax`, found NaN or an infinity)."""
    if amax is None or not np.isfinite(amax):
        raise OperandError("per-tensor scaling: the tensor holds inf or NaN")


def _scale_rounding(mode, s: Scheme):
    """``scale_rounding`` checked against the scheme's (its default where ``None``)."""
    if mode is None:
        return s.scale_roundings[0] if s.scale_roundings else None
    if not isinstance(mode, str) or mode not in s.scale_roundings:
        raise QuantizeError(f"scale_rounding must be one of {', '.join(map(repr, s.scale_roundings))}, "
                            f"not {mode!r}")
    return mode


def lookup(name) -> Scheme:
    """The :class:`~mmasim.registry.scheme.Scheme` ``name`` names: a registered recipe, or the
    plain cast into the format of that key (``rule`` ``None``); :class:`~mmasim.errors.UnknownScheme`
    with the close matches otherwise."""
    recipes = get_registry().schemes
    plain = casts.element_formats()
    if isinstance(name, str) and name in recipes:
        return recipes[name]
    if isinstance(name, str) and name in plain:
        return Scheme(name, name, None, None, None, None, source="a cast to nearest even")
    names = schemes()
    close = difflib.get_close_matches(str(name), names, n=3)
    hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
    raise UnknownScheme(f"unknown quantization scheme {name!r}{hint}; schemes: {', '.join(names)}")


def offering(field: str) -> str:
    """The registered recipes whose ``field`` is set, for a refusal's message."""
    names = [n for n, s in get_registry().schemes.items() if getattr(s, field)]
    return ", ".join(names) if names else "no registered scheme"


def _elements(fmt: Format, scaled, opts: Options, rbits, what: str) -> np.ndarray:
    """Scaled element values to words, saturating: ``cvt.rn.satfinite`` or ``cvt.rs.satfinite``
    (``rbits``: each element's random bits, the shape of ``scaled``)."""
    if opts.rounding == "stochastic":
        return rounding_.stochastic(fmt, scaled, rbits, saturate=True, nan="propagate", what=what)
    return casts.cast(fmt, scaled, saturate=True, what=what)


def schemes() -> list:
    """Every scheme name :func:`quantize` accepts: the registered recipes (the ``mmasim_schemes``
    hook), then one plain cast per element format."""
    return [*get_registry().schemes, *casts.element_formats()]


# ------------------------------------------------------------------ inputs and containers
def format_named(key: str, what: str = "format") -> Format:
    """The registered format ``key``; an unknown key is an :class:`~mmasim.UnknownScheme` naming them."""
    try:
        return get_registry().formats[key]
    except KeyError:
        raise UnknownScheme(f"unknown {what} {key!r}; formats: {', '.join(sorted(get_registry().formats))}") from None


def _containers(name: str) -> list:
    return [k for k, f in get_registry().formats.items() if f.name == name]


def _container(fmt: Format, container, scheme: str) -> Format:
    if container is None:
        return fmt
    f = format_named(container, "container") if isinstance(container, str) else container
    if not isinstance(f, Format) or f.name != fmt.name:
        raise UnknownScheme(f"{scheme}: container {container!r} does not hold {fmt.name}; "
                            f"containers of {fmt.name}: {', '.join(_containers(fmt.name))}")
    return f


_VALUE_SET = ("exp_bits", "man_bits", "bias", "signed", "nan", "subnormals")


def _rounding_format(fmt: Format) -> Format:
    """The format values are rounded in: ``fmt`` itself, unless the format registered under its
    name holds other values (RTX Blackwell's e2m1 container reads 6 bits: its values are rounded
    in e2m1, then placed)."""
    own = get_registry().formats.get(fmt.name, fmt)
    return fmt if all(getattr(fmt, a) == getattr(own, a) for a in _VALUE_SET) else own


def _read(x, scheme: str) -> np.ndarray:
    """``x`` as exact binary64 values."""
    arr, mode = as_array(x, "x")
    if mode == WORDS:
        raise DtypeError(f"quantize(x, {scheme!r}): x holds integers, which mmasim reads as container words; "
                         "quantize takes float values (numpy float16/32/64 or ml_dtypes arrays, torch float "
                         "tensors, Python floats)")
    if mode is None:
        return np.zeros(np.shape(arr), dtype=np.float64)
    out = arr.astype(np.float64)
    if arr.dtype.kind == "f" and arr.dtype.itemsize > 8:
        lost = ~((out == arr) | np.isnan(arr))
        if lost.any():
            raise DtypeError(f"quantize(x, {scheme!r}): x holds {arr.dtype} values binary64 cannot hold exactly "
                             f"(the first at index {casts._at(lost)}); pass float64 or narrower values")
    return out


def _binary32(x: np.ndarray, scheme: str, nan: str) -> np.ndarray:
    """``x`` as float32 (a recipe computed in binary32): every value must be one, and finite."""
    if nan != "raise":
        raise QuantizeError(f"{scheme}: nan must be 'raise': the recipe defines no result for NaN or infinity")
    bad = ~np.isfinite(x)
    if bad.any():
        at = casts._at(bad)
        raise NonFiniteError(f"{scheme}: {x[at]!r} at index {at}: the recipe defines no result for NaN or infinity")
    x32 = x.astype(np.float32)
    lost = x32.astype(np.float64) != x
    if lost.any():
        at = casts._at(lost)
        raise DtypeError(f"{scheme}: value {float(x[at])!r} at index {at} is not a binary32 value; the recipe "
                         "computes in binary32 from bf16 / f32 tensors: pass x.astype(np.float32)")
    return x32


def _axis(axis, ndim: int, scheme: str) -> int:
    if isinstance(axis, (bool, np.bool_)) or not isinstance(axis, (int, np.integer)):
        raise BlockShapeError(f"{scheme}: axis must be an integer, not {axis!r}")
    if ndim == 0:
        raise BlockShapeError(f"{scheme}: x is a scalar; blocks need an axis")
    if not -ndim <= axis < ndim:
        raise BlockShapeError(f"{scheme}: axis {axis} is out of range for x of {ndim} dimension(s)")
    return int(axis) % ndim


def _blocks(x: np.ndarray, axis, block: int, scheme: str):
    """``(axis, blocks)``: ``x`` with ``axis`` last, cut into blocks ``(..., n / block, block)``."""
    axis = _axis(axis, x.ndim, scheme)
    n = x.shape[axis]
    if n % block:
        raise BlockShapeError(f"{scheme}: axis {axis} of x {x.shape} has length {n}, not a multiple of the "
                              f"block of {block}")
    xm = np.moveaxis(x, axis, -1)
    return axis, xm.reshape(*xm.shape[:-1], n // block, block)


def _unblock(b: np.ndarray, axis: int) -> np.ndarray:
    """The inverse of :func:`_blocks` for words of the same shape."""
    return np.moveaxis(b.reshape(*b.shape[:-2], b.shape[-2] * b.shape[-1]), -1, axis)


def _nan_word(fmt: Format) -> int:
    return int(casts.cast(fmt, np.nan, nan="propagate")) if fmt.nan != "none" else 0


# ------------------------------------------------------------------ the recipes
def _mx(s: Scheme, x, fmt: Format, axis, nan: str, tile, opts: Options) -> Quantized:
    """OCP MX v1.0 section 6.3: ``X = 2**(floor(log2(max |V|)) - emax_elem)``, ``P = V / X``
    rounded to nearest even, normals past the largest clamped to it.  e8m0 holds
    2**-127 .. 2**127: a smaller X is clamped to 2**-127 (an all-zero block, which has no
    log2, gets it too: Microsoft's microxcaling and torchao's ``to_mx`` do the same), and a
    block with NaN, an infinity or an X past 2**127 gets the NaN scale 0xFF.
    ``scale_rounding="rceil"``: :func:`_mx_rceil`."""
    if opts.scale_rounding == "rceil":
        return _mx_rceil(s, x, fmt, axis, nan, opts)
    axis, xb = _blocks(x, axis, s.block, s.name)
    amax = np.max(np.abs(xb), axis=-1, initial=0.0)
    finite = np.isfinite(amax)
    exp = np.frexp(np.where(finite, amax, 0.0))[1].astype(np.int64) - 1       # floor(log2(amax))
    se = np.maximum(np.where(amax > 0, exp - casts.emax(fmt), -127), -127)
    bad = ~finite | (se > 127)
    if bad.any() and nan == "raise":
        at = casts._at(bad)
        why = (f"its largest magnitude {float(amax[at])!r} needs a scale past e8m0's largest 2**127" if finite[at]
               else "it holds NaN or an infinity")
        raise NonFiniteError(f"{s.name}: block {at} (blocks of {s.block} along axis {axis}): {why}; OCP MX gives "
                             "it the NaN scale 0xFF: pass nan='propagate' for that")
    se = np.where(bad, 0, se)
    scaled = np.ldexp(np.where(bad[..., None], 0.0, xb), -se[..., None])
    words = _elements(fmt, scaled, opts, _rbits_blocks(opts, axis, s.block, s.name), f"quantize(x, {s.name!r})")
    words[bad] = _nan_word(fmt)
    scales = np.where(bad, 0xFF, se + 127).astype(np.uint8)
    return Quantized(_unblock(words, axis), np.moveaxis(scales, -1, axis), fmt.name, fmt.key, s.scale_format,
                     s.block, axis, None, s.name, s.scale_use)


def _rbits_blocks(opts: Options, axis: int, block: int, scheme: str):
    return None if opts.rbits is None else _blocks(opts.rbits, axis, block, scheme)[1]


def _mx_rceil(s: Scheme, x, fmt: Format, axis, nan: str, opts: Options) -> Quantized:
    """MX with the shared exponent rounded up, as NVIDIA Transformer Engine's MXFP8 kernels
    compute it (``transformer_engine/common/cast/mxfp8/quantize_mxfp8.cuh``), in binary32
    operations: ``v = RN(amax * RN(1 / max_elem))`` (``Quantized_Limits::max_norm_rcp``),
    the scale word ``cvt.rp.satfinite.ue8m0x2.f32`` of v
    (:func:`~mmasim.quantization.rounding.ue8m0_rceil`), the elements
    ``RN(x * 2**(127 - w))`` (``exp2f_rcp``) converted with ``cvt.rn.satfinite``.  Inputs are
    finite binary32 values."""
    x = _binary32(x, s.name, nan)
    axis, xb = _blocks(x, axis, s.block, s.name)
    amax = np.max(np.abs(xb), axis=-1, initial=F32(0))
    m, q = casts.largest(fmt)
    scales = rounding_.ue8m0_rceil(amax * F32(1.0 / (m * 2.0 ** q)))
    scaled = xb * rounding_.ue8m0_reciprocal(scales)[..., None]
    words = _elements(fmt, scaled, opts, _rbits_blocks(opts, axis, s.block, s.name), f"quantize(x, {s.name!r})")
    return Quantized(_unblock(words, axis), np.moveaxis(scales, -1, axis), fmt.name, fmt.key, s.scale_format,
                     s.block, axis, None, s.name, s.scale_use)


def _nvfp4(s: Scheme, x, fmt: Format, axis, nan: str, tile, opts: Options) -> Quantized:
    """NVIDIA Transformer Engine's NVFP4 (1 x 16 blocks), in binary32 operations:
    ``S_enc = 448 * 6 / amax`` (at most FLT_MAX; 1 when amax is 0), ``S_dec = 1 / S_enc``;
    per block ``e4m3(block_amax * (S_enc * (1 / 6)))`` saturating, its encode scale
    ``min(1 / (scale * S_dec), FLT_MAX)``, and each element ``x * encode`` rounded to
    nearest even into e2m1, saturating.  ``tile=(16, 16)``: every 16 x 16 tile of a matrix shares
    one scale, from the tile's amax (:func:`_nvfp4_tiles`).  ``hadamard``: x is first
    transformed (:func:`mmasim.quantization.hadamard.transform`) and the amax is the
    transformed tensor's, as TE's ``with_post_rht_amax``."""
    x = _binary32(x, s.name, nan)
    spec = hadamard.Hadamard.of(opts.hadamard)
    tiled = _nvfp4_tiles(tile, x, spec, s.name)
    if spec is not None:
        x = _binary32(hadamard.transform(x, _axis(axis, x.ndim, s.name), spec, f"quantize(x, {s.name!r})"), s.name,
                      nan)
    axis, xb = _blocks(x, axis, s.block, s.name)
    amax = np.max(np.abs(x), initial=F32(0))
    s_enc, s_dec = nvfp4_tensor_scales(amax)
    ue4m3 = format_named(s.scale_format)
    block_amax = np.max(np.abs(xb), axis=-1, initial=F32(0))
    if tiled:                   # (rows, blocks) -> the max of each 16 rows, for each of them
        r, c = block_amax.shape
        block_amax = np.repeat(block_amax.reshape(r // 16, 16, c).max(axis=1), 16, axis=0)
    decode = np.minimum(block_amax * (s_enc * (F32(1) / F32(6))), FLT_MAX)
    scales = casts.cast(ue4m3, decode, saturate=True, what=f"{s.name} block scales")
    with np.errstate(divide="ignore", over="ignore"):
        encode = np.minimum(F32(1) / (casts.values(ue4m3, scales).astype(F32) * s_dec), FLT_MAX)
        scaled = xb * encode[..., None]
    words = _elements(fmt, scaled, opts, _rbits_blocks(opts, axis, s.block, s.name), f"quantize(x, {s.name!r})")
    return Quantized(_unblock(words, axis), np.moveaxis(scales, -1, axis), fmt.name, fmt.key, s.scale_format,
                     s.block, axis, F32(s_dec), s.name, s.scale_use, amax=F32(amax),
                     tile_scales=np.moveaxis(scales[::16], -1, axis) if tiled else None)


def nvfp4_tensor_scales(amax) -> tuple:
    """``(S_enc, S_dec)`` of NVFP4's tensor amax (binary32), as :func:`_nvfp4` says: ``S_enc =
    min(448 * 6 / amax, FLT_MAX)``, 1 when amax is 0, ``S_dec = 1 / S_enc`` (the compiled
    bodies, :mod:`mmasim.backends.cuda.quantize`, take both from here)."""
    with np.errstate(divide="ignore", over="ignore"):
        s_enc = min(F32(448 * 6) / amax, FLT_MAX)
    if amax == 0:
        s_enc = F32(1)
    return s_enc, F32(1) / s_enc


def _nvfp4_tiles(tile, x, spec, scheme: str) -> bool:
    """Whether ``tile`` asks for NVFP4's 16 x 16 weight tiles (TE's ``NVFP4BlockScaling`` 2D
    quantization, ``quantize_transpose_nvfp4_2D_kernel`` in
    ``transformer_engine/common/cast/nvfp4/quantize_transpose_nvfp4.cuh``), checked against x."""
    if tile is None:
        return False
    if not isinstance(tile, (tuple, list)) or tuple(tile) != (16, 16):
        raise BlockShapeError(f"{scheme}: tile must be (16, 16) (the 2D weight tiles) or None (1 x 16 blocks along "
                              f"axis), not {tile!r}")
    if spec is not None:
        raise QuantizeError(f"{scheme}: Transformer Engine quantizes 16 x 16 weight tiles without the Hadamard "
                            "transform; pass tile= or hadamard=, not both")
    if x.ndim != 2 or x.shape[0] % 16 or x.shape[1] % 16:
        raise BlockShapeError(f"{scheme}: 16 x 16 tiles need a matrix whose sides are multiples of 16, not shape "
                              f"{x.shape}")
    return True


def _tile(tile, shape, axis: int, scheme: str) -> tuple:
    if tile is None:
        tile = (1, 128) if axis == 1 else (128, 1)
    try:
        t = tuple(tile)
    except TypeError:
        t = ()
    if len(t) != 2 or any(isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)) or v < 1
                          for v in t):
        raise BlockShapeError(f"{scheme}: tile must be two positive integers (rows, columns), not {tile!r}")
    if shape[0] % t[0] or shape[1] % t[1]:
        raise BlockShapeError(f"{scheme}: tile {t} does not divide x of shape {shape}")
    return int(t[0]), int(t[1])


def _deepseek(s: Scheme, x, fmt: Format, axis, nan: str, tile, opts: Options) -> Quantized:
    """DeepGEMM's per-token / per-block FP8 cast (``use_ue8m0=False``) on CUDA tensors, in
    binary32: per tile ``amax = max(max |x|, 1e-4)``, scale ``sf = amax / 448``, which PyTorch
    computes as ``amax * (1 / 448)`` for a Python-number divisor on the GPU
    (``aten/src/ATen/native/cuda/BinaryDivTrueKernel.cu``, ``div_true_kernel_cuda``), elements
    ``e4m3(x * (1 / sf))`` rounded to nearest even (``|x * (1 / sf)|`` stays below e4m3's
    overflow threshold 464, so no value saturates)."""
    x = _binary32(x, s.name, nan)
    if x.ndim != 2:
        raise BlockShapeError(f"{s.name}: x must be a matrix (2-D), not of shape {x.shape}")
    axis = _axis(axis, 2, s.name)
    t0, t1 = _tile(tile, x.shape, axis, s.name)
    m, n = x.shape
    xt = x.reshape(m // t0, t0, n // t1, t1)
    amax = np.maximum(np.max(np.abs(xt), axis=(1, 3), initial=F32(0)), F32(1e-4))
    sf = amax * (F32(1) / F32(448))
    scaled = xt * (F32(1) / sf)[:, None, :, None]
    words = casts.cast(fmt, scaled, what=f"quantize(x, {s.name!r})")
    return Quantized(words.reshape(m, n), sf, fmt.name, fmt.key, s.scale_format, (t0, t1), axis, None, s.name,
                     s.scale_use)


__all__ = ["Quantized", "Scheme", "Options", "SCALE_USES", "quantize", "schemes", "lookup", "current_scale"]
