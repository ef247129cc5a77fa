"""Quantization as target-neutral numba bodies (issue 31): plain casts (with FP8 per-tensor
scaling's binary32 product first), OCP MX (FLOOR and RCEIL), NVFP4 (1 x 16 blocks and 16 x 16 tiles) and DeepSeek FP8
tiles, rounding to nearest even or stochastically (``cvt.rs`` with given random bits); and the
reverse way, words as binary32 values (:func:`values_body`) and words moved into another
container of their format by value (:func:`recontainer_body`), decoded by the kernels' decoder.

Each body works on one element or one block of a matrix ``x`` whose blocks run along its last
axis, holds nothing but scalars and writes its words (and its block's scale); it returns a
status (:data:`OK` or why the numpy code refuses the input).  Every rule is the numpy code's
(:mod:`mmasim.quantization`), one value at a time by the shared scalar functions: the rounding
is :func:`~mmasim.backends.numba.primitives._round_any` (the one-value
:func:`mmasim.arith.encode.round_code`), a binary64 is decomposed by the kernels' decoder
(:func:`~mmasim.backends.numba.primitives._decode`), and :func:`_encode` is the one-value
:func:`mmasim.arith.encode.encode`.  What the bodies restate are the recipes' few binary32
operations (``_mx_rceil``, ``_nvfp4``, ``_deepseek``: a product, a quotient, a min), because
the numpy code writes them over whole arrays with ``np.minimum`` / ``np.where`` under
``np.errstate`` (a quotient by zero is inf there, an exception in numba's Python error model):
the same IEEE operations in the same order, checked word for word by
``tests/test_compiled_quantize.py``.  The format facts (largest value, NaN word, ``emax``) and
everything a refusal says come from the numpy code itself: a body flags its element or block,
and :func:`mmasim.quantization.compiled.quantize` (the host side, a layer above) then runs the
numpy code, which raises its own error.

:func:`cpu_driver` runs a body over every element or block in a compiled loop; the CUDA driver
(:func:`mmasim.backends.cuda.driver.quantize_cuda`) runs it in a thread each (:class:`CudaArrays`),
and :mod:`.target` compiles it to PTX.  :func:`tensor_amax` reduces a matrix to its binary32
amax by :func:`amax_body` (NVFP4's tensor amax, FP8 per-tensor scaling's).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from mmasim.arith.encode import max_field, quiet_nan_field
from mmasim.backends.cuda import arrays
from mmasim.backends.cuda.arrays import Driver
from mmasim.backends.numba.cache import jit as _jit
from mmasim.backends.numba.primitives import (
    INF,
    MODE_AWAY,
    MODE_RNE,
    MODE_RS,
    NAN,
    NAN_ALLONES,
    NAN_IEEE,
    NAN_NEGZERO,
    NAN_NONE,
    _NAN_CODES,
    FormatSpec,
    _bitcast,
    _bitlen,
    _decode,
    _f32_value,
    _inline,
    _inline_rows,
    _pow2,
    _round_any,
    _value,
)

#: a body's status: done, or what the numpy code refuses (NaN, a negative value in an unsigned
#: format, 0 in a format without zero, a value past the range it may not clamp, an MX block that
#: would get the NaN scale, NaN or infinity where a recipe computes in binary32, a value that
#: is not binary32 where one must be, a word another container of its format does not hold)
OK, ST_NAN, ST_NEGATIVE, ST_ZERO, ST_OVER, ST_NAN_SCALE, ST_NONFINITE, ST_NOT_BINARY32, ST_LOST = range(9)

#: One cast into a float format (a row of the int64 array ``CS``, read by :func:`_spec`): the
#: format's fields (:class:`~mmasim.arith.formats.Format`), ``max_field`` / ``nan_code`` (the
#: magnitude fields of its largest finite value and of its NaN: :func:`mmasim.arith.encode.max_field`,
#: the cast's NaN), ``saturate``, ``propagate`` (``nan="propagate"``), ``mode`` (a ``MODE_*`` of
#: :mod:`~mmasim.backends.numba.primitives`), ``rbits_width``, ``stochastic`` (``cvt.rs``'s NaN
#: rule, :func:`mmasim.quantization.rounding.stochastic`) and ``binary32`` (the input must be
#: binary32, :func:`mmasim.quantization.rounding.binary32_values`).
CastSpec = namedtuple("CastSpec", "exp_bits man_bits emin signed nan_rule subnormals field_shift max_field nan_code "
                                  "saturate propagate mode rbits_width stochastic binary32")

#: binary64 decoded arithmetically: :func:`_decode` of its bits is ``ieee.decompose``
F64_SPEC = FormatSpec(tab_off=0, tab_len=0, integer=0, field_shift=0, field_bits=64, exp_bits=11, man_bits=52,
                      bias=1023, signed=1, nan_rule=NAN_IEEE, subnormals=1)
#: ue4m3 (NVFP4's block scales) decoded arithmetically
UE4M3_SPEC = FormatSpec(tab_off=0, tab_len=0, integer=0, field_shift=0, field_bits=7, exp_bits=4, man_bits=3,
                        bias=7, signed=0, nan_rule=_NAN_CODES["max"], subnormals=1)
FLT_MAX = np.float32(np.finfo(np.float32).max)


def cast_spec(fmt, *, saturate=False, nan="raise", mode=MODE_RNE, rbits_width=0, stochastic=False,
              binary32=False, nan_field=None) -> np.ndarray:
    """The :data:`CastSpec` row of a cast into ``fmt`` (int64), as :func:`mmasim.quantization.casts.cast`
    and :func:`~mmasim.quantization.rounding.stochastic` round (``nan_field``: the cast's NaN
    field where it is not the format's quiet NaN, as :func:`mmasim.arith.encode.encode` takes it)."""
    nan_code = quiet_nan_field(fmt) if nan_field is None else nan_field
    nan_code = nan_code or 0
    return np.array(CastSpec(fmt.exp_bits, fmt.man_bits, fmt.emin, int(fmt.signed), _NAN_CODES[fmt.nan],
                             int(fmt.subnormals), fmt.field_shift, max_field(fmt), nan_code, int(bool(saturate)),
                             int(nan == "propagate"), mode, rbits_width, int(stochastic), int(binary32)), np.int64)


@_inline
def _spec(CS, i):
    """Row ``i`` of ``CS`` as a :data:`CastSpec` of values."""
    r = CS[i]
    return CastSpec(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11], r[12], r[13], r[14])


@_inline
def _encode(neg, mag, e0, nan, inf, cs, rbits):
    """:func:`mmasim.arith.encode.encode` for one value: ``(word, over)``."""
    neg = neg and cs.signed == 1
    code, over = _round_any(mag, e0, cs.emin, cs.man_bits, cs.mode, cs.max_field, cs.subnormals == 1, rbits,
                            cs.rbits_width)
    if inf:
        over = True
    if over:
        if cs.saturate == 1 or cs.nan_rule == NAN_NONE:
            code = cs.max_field
        elif cs.nan_rule == NAN_IEEE:
            code = cs.max_field + 1                     # the next code: infinity
        else:
            code = cs.nan_code
    if nan:
        code = cs.nan_code
    if cs.nan_rule == NAN_NEGZERO or cs.nan_rule == NAN_ALLONES:
        neg = neg and code != 0 and code != cs.nan_code
    if neg:
        code |= np.int64(1) << (cs.exp_bits + cs.man_bits)
    return code << cs.field_shift, over


@_inline
def _cast_value(x, cs, rbits, TAB):
    """:func:`mmasim.quantization.casts.cast` of one binary64 ``x`` (and, ``cs.stochastic``, the
    NaN rule of :func:`~mmasim.quantization.rounding.stochastic` before it): ``(word, status)``."""
    if cs.binary32 == 1 and x == x and np.float64(np.float32(x)) != x:
        return np.int64(0), ST_NOT_BINARY32
    if x != x:
        if cs.propagate == 0 or (cs.nan_rule == NAN_NONE and cs.stochastic == 0):
            return np.int64(0), ST_NAN
        if cs.stochastic == 1:      # the NaN word without a sign; no NaN: +MAX_NORM, as +inf gives
            x = np.inf if cs.nan_rule == NAN_NONE else np.nan
    if cs.signed == 0 and x < 0:
        return np.int64(0), ST_NEGATIVE
    if cs.subnormals == 0 and x == 0:
        return np.int64(0), ST_ZERO
    cls, s, m, q, _ = _decode(_bitcast(x), F64_SPEC, TAB)
    word, over = _encode(s == 1, m, q, cls == NAN, cls == INF, cs, rbits)
    may_nan = cs.nan_rule != NAN_NONE and (cs.propagate == 1 or cs.stochastic == 1)
    if over and cs.saturate == 0 and not (cs.nan_rule == NAN_IEEE or may_nan):
        return word, ST_OVER
    return word, OK


@_inline
def _rbits(rb, i, j):
    return np.int64(rb[i, j]) if rb.shape[0] > 0 else np.int64(0)


@_inline
def _at(x, i, j):
    """``x[i, j]`` as binary64, 0 past x's end: the zero padding of a matrix quantized into
    larger words (``out``'s shape), as :func:`mmasim.torch.matmul` pads it."""
    if i < x.shape[0] and j < x.shape[1]:
        return np.float64(x[i, j])
    return 0.0


@_inline
def _element(b, out):
    """``(i, j)``: work item ``b`` as element ``(i, j)`` (C order) of the 2-D ``out``."""
    i = b // out.shape[1]
    return i, b - i * out.shape[1]


@_inline
def _abs32(x, i, j):
    """``|x[i, j]|`` (:func:`_at`) in binary32 and its status: a recipe that computes in binary32
    refuses a value binary32 does not hold, NaN and infinities
    (:func:`mmasim.quantization.quantize._binary32`)."""
    v = _at(x, i, j)
    if v == v and np.float64(np.float32(v)) != v:
        return np.float32(0), ST_NOT_BINARY32
    a = abs(np.float32(v))
    return a, OK if a < np.float32(np.inf) else ST_NONFINITE


@_inline
def _tile_amax(x, r0, r1, j0, j1):
    """The largest ``|x|`` (binary32) over rows ``r0 .. r1 - 1`` and columns ``j0 .. j1 - 1``, and
    the status of the first value a binary32 recipe refuses (:func:`_abs32`)."""
    amax = np.float32(0)
    for r in range(r0, r1):
        for j in range(j0, j1):
            a, st = _abs32(x, r, j)
            if st != OK:
                return amax, st
            amax = a if a > amax else amax
    return amax, OK


@_inline
def _cast_scaled(x, rb, r0, r1, j0, j1, factor, cs, TAB, out):
    """The elements of rows ``r0 .. r1 - 1``, columns ``j0 .. j1 - 1``: ``RN(x * factor)`` in
    binary32, cast by ``cs`` into ``out``; the status of one the cast refuses."""
    status = OK
    for r in range(r0, r1):
        for j in range(j0, j1):
            w, st = _cast_value(np.float64(np.float32(_at(x, r, j)) * factor), cs, _rbits(rb, r, j), TAB)
            out[r, j] = w
            status = st if st != OK else status
    return status


# ------------------------------------------------------------------ the bodies
# body(b, x, rb, CS, TAB, P, out, scales) -> status: work item b of matrix x (blocks along its
# last axis), random bits rb (x's shape, or (0, 0)), cast specs CS (row 0 the elements', row 1
# the scales'), parameters P (float64), words out (x's shape), scales (one per block or tile)
@_inline_rows
def cast_body(b, x, rb, CS, TAB, P, out, scales):
    """Element ``b`` of ``x`` (C order) cast by ``CS[0]``."""
    C = out.shape[1]
    i = b // C
    j = b - i * C
    v = _at(x, i, j)
    if P[1] != 0:                   # per-tensor scaling: RN(x * scale) in binary32 first
        v = np.float64(np.float32(v) * np.float32(P[0]))
    w, st = _cast_value(v, _spec(CS, 0), _rbits(rb, i, j), TAB)
    out[i, j] = w
    return st


@_inline_rows
def mx_floor_body(b, x, rb, CS, TAB, P, out, scales):
    """OCP MX block ``b`` (:func:`mmasim.quantization.quantize._mx`), ``P = (block, emax,
    NaN word, nan='propagate')``: the shared exponent ``floor(log2(amax)) - emax`` (at least
    -127), the elements ``x * 2**-se`` cast saturating; a block with NaN, an infinity or a
    scale past 2**127 the NaN scale 0xFF and NaN words (or refused)."""
    block = np.int64(P[0])
    nb = out.shape[1] // block
    i = b // nb
    k = b - i * nb
    j0 = k * block
    bad = False
    amax = 0.0
    for j in range(j0, j0 + block):
        v = abs(_at(x, i, j))
        if not v < np.inf:
            bad = True
        elif v > amax:
            amax = v
    se = np.int64(-127)
    if not bad and amax > 0:
        _, _, m, q, _ = _decode(_bitcast(amax), F64_SPEC, TAB)
        se = q + _bitlen(m) - 1 - np.int64(P[1])                # floor(log2(amax)) - emax
        se = se if se > -127 else np.int64(-127)
    if bad or se > 127:
        if P[3] == 0:
            return ST_NAN_SCALE
        for j in range(j0, j0 + block):
            out[i, j] = np.int64(P[2])
        scales[i, k] = 0xFF
        return OK
    scales[i, k] = se + 127
    cs = _spec(CS, 0)
    status = OK
    for j in range(j0, j0 + block):
        w, st = _cast_value(_at(x, i, j) * _pow2(-se), cs, _rbits(rb, i, j), TAB)   # np.ldexp(x, -se)
        out[i, j] = w
        status = st if st != OK else status
    return status


@_inline_rows
def mx_rceil_body(b, x, rb, CS, TAB, P, out, scales):
    """MX block ``b`` with the scale rounded up (:func:`mmasim.quantization.quantize._mx_rceil`),
    ``P = (block, RN(1 / max_elem))``: ``w = cvt.rp.satfinite.ue8m0(amax * RN(1 / max_elem))``
    (``CS[1]``: ue8m0, away from zero, saturating), the elements ``RN(x * 2**(127 - w))`` cast."""
    block = np.int64(P[0])
    nb = out.shape[1] // block
    i = b // nb
    k = b - i * nb
    j0 = k * block
    amax, st = _tile_amax(x, i, i + 1, j0, j0 + block)
    if st != OK:
        return st
    v = amax * np.float32(P[1])
    cls, s, m, q, _ = _decode(_bitcast(np.float64(v)), F64_SPEC, TAB)
    w, _ = _encode(False, m, q, cls == NAN, cls == INF, _spec(CS, 1), np.int64(0))
    scales[i, k] = w
    rcp = np.float32(_pow2(127 - w))                              # rounding.ue8m0_reciprocal, exact
    return _cast_scaled(x, rb, i, i + 1, j0, j0 + block, rcp, _spec(CS, 0), TAB, out)


@_inline_rows
def nvfp4_body(b, x, rb, CS, TAB, P, out, scales):
    """NVFP4 block ``b`` of 16 (:func:`mmasim.quantization.quantize._nvfp4`), ``P = (S_enc,
    S_dec, tiled)`` (:func:`~mmasim.quantization.quantize.nvfp4_tensor_scales` of the tensor's
    amax): the block's ue4m3 scale ``CS[1](min(block_amax * (S_enc * (1 / 6)), FLT_MAX))``
    (``tiled``: the amax of its 16 x 16 tile), the elements ``x * min(1 / (scale * S_dec),
    FLT_MAX)`` cast by ``CS[0]``."""
    nb = out.shape[1] // 16
    i = b // nb
    k = b - i * nb
    j0 = k * 16
    r0 = i - i % 16 if P[2] != 0 else i
    r1 = r0 + 16 if P[2] != 0 else i + 1
    bamax, st = _tile_amax(x, r0, r1, j0, j0 + 16)
    if st != OK:
        return st
    s_enc = np.float32(P[0])
    s_dec = np.float32(P[1])
    decode = bamax * (s_enc * (np.float32(1) / np.float32(6)))
    decode = FLT_MAX if decode > FLT_MAX else decode
    sw, _ = _cast_value(np.float64(decode), _spec(CS, 1), np.int64(0), TAB)
    scales[i, k] = sw
    _, _, m, q, _ = _decode(sw, UE4M3_SPEC, TAB)
    den = np.float32(np.float64(m) * _pow2(q)) * s_dec
    enc = FLT_MAX
    if den != 0:
        enc = np.float32(1) / den
        enc = FLT_MAX if enc > FLT_MAX else enc
    return _cast_scaled(x, rb, i, i + 1, j0, j0 + 16, enc, _spec(CS, 0), TAB, out)


@_inline_rows
def deepseek_body(b, x, rb, CS, TAB, P, out, scales):
    """DeepSeek FP8 tile ``b`` (:func:`mmasim.quantization.quantize._deepseek`), ``P = (t0, t1)``:
    ``sf = max(amax, 1e-4) * (1 / 448)``, the elements ``x * (1 / sf)`` cast by ``CS[0]``."""
    t0 = np.int64(P[0])
    t1 = np.int64(P[1])
    nt = out.shape[1] // t1
    ti = b // nt
    tj = b - ti * nt
    amax, st = _tile_amax(x, ti * t0, ti * t0 + t0, tj * t1, tj * t1 + t1)
    if st != OK:
        return st
    amax = amax if amax > np.float32(1e-4) else np.float32(1e-4)
    sf = amax * (np.float32(1) / np.float32(448))
    scales[ti, tj] = sf
    inv = np.float32(1) / sf
    return _cast_scaled(x, rb, ti * t0, ti * t0 + t0, tj * t1, tj * t1 + t1, inv, _spec(CS, 0), TAB, out)


@_inline_rows
def amax_body(b, x, rb, CS, TAB, P, out, scales):
    """``out[b, 0]`` = the largest ``|x[b, :]|`` in binary32 (a row of NVFP4's tensor amax;
    :func:`amax` reduces the rows); NaN or infinity flagged."""
    amax, st = _tile_amax(x, b, b + 1, 0, x.shape[1])
    if st != OK:
        return st
    out[b, 0] = amax
    return OK


@_inline
def _fspec(CS, i):
    """Row ``i`` of ``CS`` as a :class:`~mmasim.backends.numba.primitives.FormatSpec` (a
    format's decode spec in the first fields of the row: :func:`spec_rows`)."""
    r = CS[i]
    return FormatSpec(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10])


@_inline
def _word_value(w, fp, TAB):
    """The binary64 value of word ``w`` of the format decoded by ``fp``
    (:func:`mmasim.quantization.casts.values`: NaN, the infinities, integers and floats exact)."""
    cls, s, m, q, _ = _decode(w, fp, TAB)
    return _value(cls, s, m, q)


@_inline_rows
def values_body(b, x, rb, CS, TAB, P, out, scales):
    """``out[i, j]`` (work item ``b``, C order, over ``out``'s shape) = the value of the word
    ``x[i, j]`` (of the format ``CS[0]`` decodes: D's, or an output format's) in binary32,
    times ``alpha = P[0]`` in binary32 unless it is 1: :func:`mmasim.torch.matmul.matmul`'s
    ``y * alpha`` (and its ``dequantize()``); an f32 word's value is its binary32 bits."""
    i, j = _element(b, out)
    w = np.int64(x[i, j])
    fp = _fspec(CS, 0)
    if fp.tab_len == 0 and fp.integer == 0 and fp.field_shift == 0 and fp.field_bits == 32 and fp.exp_bits == 8:
        y = np.float32(_f32_value(w))
    else:
        y = np.float32(_word_value(w, fp, TAB))
    if P[0] != 1:
        y = y * np.float32(P[0])
    out[i, j] = y
    return OK


@_inline_rows
def recontainer_body(b, x, rb, CS, TAB, P, out, scales):
    """Word ``b`` (C order) of ``x``, a container of a format (decoded by ``CS[1]``), placed in
    another of the same format (decoded by ``CS[2]``) by value
    (:func:`mmasim.quantization.casts.recontainer`): its value cast by ``CS[0]`` (saturating,
    NaN propagated), flagged where the word it gives reads another value."""
    i, j = _element(b, out)
    v = _word_value(np.int64(x[i, j]), _fspec(CS, 1), TAB)
    w, st = _cast_value(v, _spec(CS, 0), np.int64(0), TAB)
    if st != OK:
        return st
    back = _word_value(w, _fspec(CS, 2), TAB)
    if not (back == v or (back != back and v != v)):
        return ST_LOST
    out[i, j] = w
    return OK


BODIES = {"cast": cast_body, "mx_floor": mx_floor_body, "mx_rceil": mx_rceil_body, "nvfp4": nvfp4_body,
          "deepseek": deepseek_body, "amax": amax_body,
          "values": values_body, "recontainer": recontainer_body}

_DRIVERS: dict = {}


def cpu_driver(body):
    """The CPU driver of ``body``: work items ``0 .. n - 1`` in a compiled loop; ``status[0]``
    the status of one that is not :data:`OK` (else left as it is)."""
    if body not in _DRIVERS:
        def quantize_cpu(n, x, rb, CS, TAB, P, out, scales, status):
            for b in range(n):
                st = body(b, x, rb, CS, TAB, P, out, scales)
                if st != OK:
                    status[0] = st

        quantize_cpu.__qualname__ = quantize_cpu.__name__ = "quantize_cpu_" + body.py_func.__name__
        _DRIVERS[body] = _jit(quantize_cpu)
    return _DRIVERS[body]


# ------------------------------------------------------------------ the host side
#: how the quantization bodies are driven: work item ``b`` of ``n`` (the first argument) each
ITEMS = Driver(cpu_driver, "quantize_cuda")


class _Items:
    """A target (:mod:`.arrays`) that launches a quantization body over ``n`` work items."""

    @classmethod
    def launch(cls, body, n, *args):
        cls.drive(ITEMS, body, n, np.int64(n), *args)


class CpuArrays(_Items, arrays.CpuArrays):
    """The CPU driver's arrays: numpy."""


class CudaArrays(_Items, arrays.CudaArrays):
    """The CUDA driver's arrays, a thread per work item (:func:`mmasim.backends.cuda.driver.quantize_cuda`)."""


TARGETS = {"cpu": CpuArrays, "cuda": CudaArrays}


def spec_rows(cast_specs, formats):
    """``(CS, TAB)`` of a body that casts and decodes: the rows of ``cast_specs``
    (:func:`cast_spec`), then the decode spec of each of ``formats`` (:func:`_fspec`, by
    :func:`mmasim.backends.numba.kernels.format_spec` with its registered decoder) padded to a
    row, their tables in ``TAB``; ``None`` where a format's words cannot be decoded so."""
    from mmasim.backends.numba.kernels import placed_specs
    from mmasim.registry.build import get_registry

    decoders = get_registry().decoders
    placed = placed_specs(formats, lambda f: decoders[f.decoder])
    if placed is None:
        return None
    specs, tabs = placed
    rows = [np.asarray(c, np.int64) for c in cast_specs]
    rows += [np.array(list(row) + [0] * (len(CastSpec._fields) - len(row)), np.int64) for row in specs]
    TAB = np.concatenate(tabs).astype(np.int64) if tabs else np.zeros(1, np.int64)
    return np.stack(rows), TAB


def tensor_amax(x, arrays) -> np.float32:
    """NVFP4's tensor amax (binary32) of matrix ``x``: each row's, then the rows' (exact in any
    order), by ``amax_body``; ``None`` where x holds NaN or an infinity."""
    R = x.shape[0]
    if not R * x.shape[1]:
        return np.float32(0)
    none = arrays.empty((0, 0), np.int64)
    TAB = arrays.put(np.zeros(1, np.int64))
    rows = arrays.empty((R, 1), np.float64)
    top = arrays.empty((1, 1), np.float64)
    status = arrays.put(np.zeros(1, np.int8))
    CS = arrays.put(np.zeros((2, len(CastSpec._fields)), np.int64))
    P = arrays.put(np.zeros(1))
    arrays.launch(amax_body, R, x, none, CS, TAB, P, rows, rows, status)
    if R:
        arrays.launch(amax_body, 1, rows.reshape(1, R), none, CS, TAB, P, top, top, status)
    if arrays.get(status)[0] != OK:
        return None
    return np.float32(arrays.get(top)[0, 0]) if R else np.float32(0)
