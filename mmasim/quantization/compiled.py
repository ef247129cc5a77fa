"""``mmasim.quantize`` and FP8 per-tensor scaling by the compiled quantization bodies
(:mod:`mmasim.backends.cuda.quantize`), on the CPU (numpy arrays) or on a CUDA device
(``__cuda_array_interface__`` arrays: the words and scales stay there).

Gives :func:`quantize` (:func:`mmasim.quantize`'s schemes and options, but another container:
:func:`compiled` says which; ``seed=``'s bits drawn by :mod:`mmasim.backends.cuda.pcg64`, the
Hadamard transform on a device by :mod:`mmasim.quantization.on_device`), and :func:`per_tensor`
(what :mod:`mmasim.torch.matmul` does under ``scaling="tensor"``), :func:`recontainer`
(:func:`mmasim.quantization.casts.recontainer`) and :func:`values` (words as binary32 values
times alpha: D and an output format's words in :mod:`mmasim.torch.matmul`).  Decides nothing of its own:
the options are checked by :func:`mmasim.quantize` on an empty array of x's dimensions, the
format facts (largest value, ``emax``, NaN words, NVFP4's tensor scales, FP8's current scale)
come from :mod:`mmasim.quantization`, and where a body flags its input the numpy code runs on a
host copy and raises its own error (the one host copy of the device path).
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np

from mmasim.backends.cuda.quantize import (
    MODE_AWAY,
    MODE_RS,
    OK,
    TARGETS,
    cast_body,
    cast_spec,
    deepseek_body,
    mx_floor_body,
    mx_rceil_body,
    nvfp4_body,
    recontainer_body,
    spec_rows,
    tensor_amax,
    values_body,
)
from mmasim.errors import MMAError, QuantizeError
from mmasim.quantization import casts
from mmasim.quantization import rounding as rounding_
from mmasim.quantization.quantize import (
    F32,
    Options,
    Quantized,
    _axis,
    format_named,
    _nan_word,
    _read,
    _rounding_format,
    _scale_rounding,
    _tile,
    current_scale,
    lookup,
    nvfp4_tensor_scales,
    quantize as numpy_quantize,
    refuse_nonfinite_amax,
)

#: what the compiled quantization does not do (the caller quantizes with numpy)
NOT_COMPILED = {"container": "another container"}
#: the scheme rules the bodies compile
RULES = ("_mx", "_nvfp4", "_deepseek")


def compiled(**options) -> str:
    """Why the compiled quantization does not take ``options`` (keywords of :func:`mmasim.quantize`),
    or '' when it does."""
    return "; ".join(why for k, why in NOT_COMPILED.items() if options.get(k) is not None)



Job = namedtuple("Job", "body n CS P scales")


def _job(s, fmt, shape, nan, opts, saturate, tile, amax, prescale=None) -> Job:
    """The body, work items, cast specs, parameters and scales ``(shape, dtype)`` of scheme ``s``
    (a :class:`~mmasim.registry.scheme.Scheme`) on a matrix of ``shape`` (blocks along its last
    axis; DeepSeek: x itself, ``tile`` its tile) whose elements round into ``fmt``."""
    R, C = shape
    stochastic = opts.rounding == "stochastic"
    k = rounding_.rbits_width(fmt) if stochastic else 0
    if s.rule is None:
        if stochastic:
            sat = fmt.name not in ("bf16", "f16") if saturate is None else saturate
            cs = cast_spec(fmt, saturate=sat, nan=nan, mode=MODE_RS, rbits_width=k, stochastic=True, binary32=True,
                           nan_field=casts._nan_field(fmt))
        else:
            cs = cast_spec(fmt, saturate=bool(saturate), nan=nan, nan_field=casts._nan_field(fmt))
        return Job(cast_body, R * C, np.stack([cs, cs]), np.array([prescale or 0, prescale is not None], np.float64),
                   ((1, 1), np.uint8))
    if stochastic:
        elem = cast_spec(fmt, saturate=True, nan="propagate", mode=MODE_RS, rbits_width=k, stochastic=True,
                         nan_field=casts._nan_field(fmt))
    else:
        elem = cast_spec(fmt, saturate=True, nan_field=casts._nan_field(fmt))
    rule = s.rule.__name__
    if rule == "_mx" and opts.scale_rounding == "rceil":
        m, q = casts.largest(fmt)
        ue8m0 = cast_spec(format_named("ue8m0"), saturate=True, mode=MODE_AWAY)
        return Job(mx_rceil_body, R * (C // s.block), np.stack([elem, ue8m0]),
                   np.array([s.block, F32(1.0 / (m * 2.0 ** q))], np.float64), ((R, C // s.block), np.uint8))
    if rule == "_mx":
        return Job(mx_floor_body, R * (C // s.block), np.stack([elem, elem]),
                   np.array([s.block, casts.emax(fmt), _nan_word(fmt), nan == "propagate"], np.float64),
                   ((R, C // s.block), np.uint8))
    if rule == "_nvfp4":
        return Job(nvfp4_body, R * (C // 16), np.stack([elem, cast_spec(format_named(s.scale_format), saturate=True)]),
                   np.array([*nvfp4_tensor_scales(amax), tile is not None], np.float64), ((R, C // 16), np.uint8))
    if rule == "_deepseek":
        elem = cast_spec(fmt, nan_field=casts._nan_field(fmt))
        return Job(deepseek_body, (R // tile[0]) * (C // tile[1]), np.stack([elem, elem]),
                   np.array(tile, np.float64), ((R // tile[0], C // tile[1]), np.float32))
    raise QuantizeError(f"{s.name}: its rule {rule} is not compiled; mmasim.quantize runs it with numpy")


def quantize(x, scheme: str, axis: int = -1, *, target: str = "cpu", saturate=None, nan: str = "raise", tile=None,
             scale_rounding=None, rounding: str = "nearest", rbits=None, seed=None, hadamard=None, pad=None,
             prescale=None):
    """:func:`mmasim.quantize` by the compiled bodies (``target``: ``"cpu"``, the CPU driver on
    numpy arrays; ``"cuda"``, the CUDA driver on ``__cuda_array_interface__`` arrays, whose
    words and scales stay on the device).  The options are checked by :func:`mmasim.quantize`
    itself (on an empty array of x's dimensions); an input the numpy code refuses is refused by
    it, with its message.  ``pad``: the shape of a larger matrix, x in its top-left corner and
    zeros elsewhere, to quantize instead (``rbits`` of that shape); ``prescale`` (plain casts): x
    multiplied by it in binary32 first, as FP8 per-tensor scaling does (:func:`per_tensor`).
    ``target="cuda"``: x a matrix with its blocks along its last axis (``axis`` -1 or 1),
    ``rbits`` a device array; the words and scales are device arrays, NVFP4's tensor amax and
    scale host scalars (one value read back).  ``seed``: the random bits of
    :func:`~mmasim.quantization.rounding.random_bits` drawn where the words are computed
    (:func:`mmasim.backends.cuda.pcg64.random_bits`); ``hadamard``: x transformed first, on a
    device by :func:`mmasim.quantization.on_device.hadamard`."""
    import attrs

    from mmasim.backends.cuda import pcg64
    from mmasim.backends.plan import word_dtype
    from mmasim.quantization import hadamard as rht
    from mmasim.quantization import on_device

    arrays = TARGETS[target]
    s = lookup(scheme)
    rule = None if s.rule is None else s.rule.__name__
    ndim = len(x.shape)
    full = tuple(x.shape) if pad is None else tuple(int(n) for n in pad)
    if pad is not None and (ndim != 2 or len(full) != 2 or any(p < n for p, n in zip(full, x.shape))):
        raise QuantizeError(f"pad must be the shape (rows, columns) of a matrix that holds x {tuple(x.shape)}, "
                            f"not {pad!r}")
    if prescale is not None and rule is not None:
        raise QuantizeError(f"{scheme}: prescale= is for plain casts (FP8 per-tensor scaling)")
    empty = np.zeros((0,) * ndim, np.float32)
    options = dict(saturate=saturate, nan=nan, tile=tile, scale_rounding=scale_rounding, rounding=rounding,
                   seed=seed, hadamard=hadamard)
    numpy_quantize(empty, scheme, axis, rbits=None if rbits is None else np.zeros(empty.shape, np.int64), **options)
    cont = format_named(s.element)
    fmt = _rounding_format(cont)
    spec = rht.Hadamard.of(hadamard)
    if target == "cpu":
        values = source = _read(x, scheme)
        if rbits is not None:
            rbits = rounding_.element_bits(fmt, full, rbits, None)
        elif seed is not None:
            rbits = pcg64.random_bits(seed, (1, int(np.prod(full))), rounding_.rbits_width(fmt), arrays).reshape(full)
        ax = _axis(axis, values.ndim, scheme) if rule is not None else values.ndim - 1
        moved_full = np.moveaxis(np.empty(full, np.bool_), ax, -1).shape if ndim else (1,)
        if rule == "_deepseek":
            mat, rb, shape = values, rbits, full
        else:
            moved = np.moveaxis(values, ax, -1) if ndim else values.reshape(1)
            mat = moved.reshape(-1, moved.shape[-1]) if moved.shape[-1] else moved.reshape(0, 0)
            shape = (int(np.prod(moved_full[:-1], dtype=np.int64)), moved_full[-1])
            rb = None if rbits is None else np.moveaxis(rbits, ax, -1).reshape(shape)
    else:
        if ndim != 2 or (rule is not None and _axis(axis, 2, scheme) != 1):
            raise QuantizeError(f"{scheme}: the CUDA driver quantizes a matrix with its blocks along its last axis "
                                f"(axis -1), not x of shape {tuple(x.shape)} with axis {axis}")
        ax, shape = 1, full
        mat, rb = arrays.put(x), None if rbits is None else arrays.put(rbits)
        source = mat
        if seed is not None:
            rb = pcg64.random_bits(seed, full, rounding_.rbits_width(fmt), arrays)

    def refuse():
        """The numpy code on what the bodies flagged (on the host: this is the one copy), which raises."""
        host = source if target == "cpu" else source.copy_to_host()
        if pad is not None:
            host = np.pad(host, [(0, f - n) for f, n in zip(full, host.shape)])
        if prescale is not None:
            with np.errstate(over="ignore"):
                host = (host.astype(np.float32) * np.float32(prescale)).astype(np.float32)
        rbh = rbits if target == "cpu" or rbits is None else rb.copy_to_host()
        numpy_quantize(host, scheme, axis, rbits=rbh, **options)
        raise QuantizeError(f"{scheme}: the compiled bodies flagged the input and the numpy code did not")

    opts = Options(scale_rounding=_scale_rounding(scale_rounding, s) if rule is not None else None,
                   rounding=rounding)
    if (s.block and shape[1] % s.block) or (spec is not None and shape[1] % rht.SIZE):
        refuse()                    # blocks that do not divide x: the numpy code's error
    if spec is not None and target == "cpu":
        try:
            mat = rht.transform(np.pad(mat, [(0, f - n) for f, n in zip(shape, mat.shape)]), -1, spec, "")
        except MMAError:
            refuse()
    elif spec is not None:
        mat = on_device.hadamard(mat, spec, shape)
        if mat is None:
            refuse()
    tiles = None
    amax = np.float32(0)
    if rule == "_deepseek":
        tiles = _tile(tile, shape, _axis(axis, 2, scheme), scheme)
    elif rule == "_nvfp4":
        tiles = tile
        amax = tensor_amax(mat, arrays)
        if amax is None:
            refuse()
    job = _job(s, fmt, shape, nan, opts, saturate, tiles, amax, prescale)
    out = arrays.empty(shape, word_dtype(fmt))
    scales = arrays.empty(*job.scales)
    status = arrays.put(np.zeros(1, np.int8))
    rbv = rb if rb is not None else arrays.put(np.zeros((0, 0), np.int64))
    arrays.launch(job.body, job.n, mat, rbv, arrays.put(job.CS), arrays.put(np.zeros(1, np.int64)),
               arrays.put(job.P), out, scales, status)
    if arrays.get(status)[0] != OK:
        refuse()
    tile_scales = scales[::16] if rule == "_nvfp4" and tiles is not None else None
    if target == "cpu" and rule != "_deepseek":
        out = np.moveaxis(out.reshape(moved_full), -1, ax) if ndim else out.reshape(())
        if rule is not None:
            scales = np.moveaxis(scales.reshape(*moved_full[:-1], scales.shape[-1]), -1, ax)
            tile_scales = None if tile_scales is None else np.moveaxis(tile_scales, -1, ax)
    out = recontainer(out, fmt, cont, target=target)
    if rule is None:
        return Quantized(out, None, fmt.name, cont.key, None, None, None, None, scheme, None)
    if rule == "_deepseek":
        return Quantized(out, scales, fmt.name, cont.key, s.scale_format, tiles, ax, None, s.name, s.scale_use)
    q = Quantized(out, scales, fmt.name, cont.key, s.scale_format, s.block, ax, None, s.name, s.scale_use)
    if rule == "_nvfp4":
        q = attrs.evolve(q, tensor_scale=nvfp4_tensor_scales(amax)[1], amax=np.float32(amax), tile_scales=tile_scales)
    return q


def per_tensor(x, key: str, *, target: str = "cpu", pad=None):
    """FP8 per-tensor ("current") scaling of matrix ``x`` into format ``key``, as
    :mod:`mmasim.torch.matmul` does it: ``(words, decode scale)``, the scale
    :func:`mmasim.quantization.quantize.current_scale` of x's amax (:func:`amax_body` on the
    device: one value read back), the words of ``RN(x * scale)`` (binary32) cast saturating."""
    arrays = TARGETS[target]
    mat = arrays.put(x) if target != "cpu" else np.asarray(x, np.float32)
    amax = tensor_amax(mat, arrays)
    refuse_nonfinite_amax(amax)
    scale = current_scale(amax, format_named(key))
    q = quantize(x, key, target=target, saturate=True, pad=pad, prescale=scale)
    return q.words, np.float32(np.float32(1) / scale)


def takes_rule(scheme: str) -> bool:
    """Whether the bodies compile ``scheme``'s rule (a plain cast, or one of :data:`RULES`)."""
    s = lookup(scheme)
    return s.rule is None or s.rule.__name__ in RULES


def _launch_elementwise(body, words, shape, CS, TAB, P, dtype, arrays):
    """``body`` over every element of ``shape`` (the top-left corner of 2-D ``words``): ``(out, status)``."""
    out = arrays.empty(shape, dtype)
    status = arrays.put(np.zeros(1, np.int8))
    arrays.launch(body, int(np.prod(shape)), words, arrays.put(np.zeros((0, 0), np.int64)), arrays.put(CS),
                  arrays.put(TAB), arrays.put(np.asarray(P, np.float64)), out, out, status)
    return out, arrays.get(status)[0]


def recontainer(words, src, dst, *, target: str = "cpu"):
    """:func:`mmasim.quantization.casts.recontainer` (``src``'s container words as ``dst``'s,
    another container of the same format, by value) by :func:`recontainer_body`: on a CUDA
    device (``target="cuda"``, a matrix) the words stay there; a word ``dst`` does not hold is
    refused by the numpy code (on a host copy), with its message."""
    if src.key == dst.key:
        return words
    from mmasim.backends.plan import word_dtype

    arrays = TARGETS[target]
    specs = spec_rows([cast_spec(dst, saturate=True, nan="propagate", nan_field=casts._nan_field(dst))], [src, dst])
    if target == "cpu" and specs is None:
        return casts.recontainer(words, src, dst)
    if specs is None:
        raise QuantizeError(f"{src.key} -> {dst.key}: a format whose words the CUDA driver does not decode")
    host_shape = None if target != "cpu" else np.shape(words)
    mat = arrays.put(words) if target != "cpu" else np.asarray(words).reshape(1, -1)
    out, status = _launch_elementwise(recontainer_body, mat, tuple(mat.shape), *specs, [0], word_dtype(dst), arrays)
    if status != OK:
        casts.recontainer(mat.copy_to_host() if target != "cpu" else words, src, dst)
        raise QuantizeError(f"{src.key} -> {dst.key}: the compiled body flagged a word and the numpy code did not")
    return out if host_shape is None else out.reshape(host_shape)


def values(words, fmt, *, target: str = "cpu", alpha=1.0, shape=None):
    """The binary32 values (float32) of ``fmt``'s words (a matrix; ``shape``: of its top-left
    corner) times ``alpha`` in binary32 unless it is 1, by :func:`values_body`: the float32 D
    of :func:`mmasim.torch.matmul.matmul` (``np.asarray(d, np.float32) * alpha``, an output
    format's ``dequantize()``); on a CUDA device the values stay there."""
    arrays = TARGETS[target]
    specs = spec_rows([], [fmt])
    if specs is None:
        raise QuantizeError(f"{fmt.key}: a format whose words the compiled bodies do not decode")
    mat = arrays.put(words)
    out, _ = _launch_elementwise(values_body, mat, tuple(mat.shape) if shape is None else tuple(shape), *specs,
                                 [np.float32(alpha)], np.float32, arrays)
    return out


def placed_in(scheme: str) -> str:
    """The container key the compiled quantization gives ``scheme``'s words in, on either target:
    its element format's (words rounded in another container, e2m1.sm120's in e2m1, are moved
    into it by :func:`recontainer`)."""
    return format_named(lookup(scheme).element).key
