"""``mmasim.gemm`` on operands on a CUDA device (``backend="cuda"``), all on the device: the plain
chain, promotion (with or without promotion scales), split-K (sequential or tree) and the
epilogue (``alpha``, ``beta``, ``out_format``, ``saturate``), by the host's K loop
(:mod:`mmasim.composition.mainloop`) and epilogue (:meth:`mmasim.composition.epilogue.Epilogue.apply`)
with the device's binary32 operations and conversions (:mod:`mmasim.backends.cuda.arith32`).
No operand is copied to the host: D is a device array (a torch tensor for torch operands).

The device routines are :mod:`mmasim.backends.cuda.device`'s; this module holds what needs the
GEMM's own checks (:func:`mmasim.composition.operands.check_shapes`, the epilogue's
:func:`~mmasim.composition.epilogue.of_gemm`), a layer above them.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from mmasim.backends.cuda import device
from mmasim.composition import epilogue as ep
from mmasim.composition import mainloop, operands
from mmasim.composition.operands import check_shapes, gemm_model, promotion_blocks, requested_options
from mmasim.errors import DtypeError, GemmOptionError, ScaleError, SparseMetadataError


def _device_operands(model, A, B, C, k_order, scale_a, scale_b, sparse_metadata, c_format=None):
    """The operands of :func:`mmasim.gemm` on the device, checked once (shapes from their
    metadata, words by kernels; C's words in ``c_format``, default the instruction's C format):
    ``(A, B, C or None, scale_a, scale_b, metadata, M, K, N, order)``."""
    dp = model.datapath
    c_format = model.c_format if c_format is None else c_format
    wa, wb = device.device_words(model, A, model.a_format, "A"), device.device_words(model, B, model.b_format, "B")
    wc = None if C is None else device.device_words(model, C, c_format, "C")
    sa = None if scale_a is None else device.device_words(model, scale_a, model.scale_format, "scale_a")
    sb = None if scale_b is None else device.device_words(model, scale_b, model.scale_format, "scale_b")
    md = None if sparse_metadata is None else device.device_metadata(sparse_metadata)
    shape = (lambda x: None if x is None else tuple(x.shape))
    M, K, N, order = check_shapes(model, shape(wa), shape(wb), shape(wc), k_order, shape(sa), shape(sb), shape(md))
    if scale_a is not None and not dp.scale:
        raise ScaleError(f"{model.instruction} is not block-scaled: scale_a/scale_b must be None")
    if dp.sparse and md is None:
        raise SparseMetadataError(f"{model.instruction} is sparse: pass sparse_metadata")
    device.check_device_matrices(model, wa, wb, wc, sa, sb, c_format)
    return wa, wb, wc, sa, sb, md, M, K, N, order


def gemm_chain(model, A, B, C, k_order, scale_a, scale_b, sparse_metadata):
    """The plain chain of :func:`mmasim.gemm` on device operands, on the device: the operands
    checked once, then :func:`mmasim.composition.mainloop.chain` with one instruction per K
    tile on the device (:func:`~mmasim.backends.cuda.device.device_tile` on views of the tile),
    D of each tile the C of the next: D's words, a device array."""
    wa, wb, wc, sa, sb, md, M, K, N, order = _device_operands(model, A, B, C, k_order, scale_a, scale_b,
                                                               sparse_metadata)
    if wc is None:
        wc = device.cuda_module().to_device(np.zeros((M, N), model.plan.word_dtypes[2]))
    return mainloop.chain(model, wa, wb, wc, [int(t) for t in order], sa, sb, md, None, 1, None, device_arith().tile)


@functools.lru_cache(maxsize=None)
def device_arith() -> mainloop.Arith:
    """The K loop's binary32 operations and tile on the device (:class:`mmasim.composition.mainloop.Arith`;
    numba imported with the first device operand)."""
    from mmasim.backends.cuda import arith32

    return mainloop.Arith(zeros=arith32.zeros, values=arith32.values, add=arith32.add, mul=arith32.mul,
                          fma=arith32.fma, widen=arith32.widen, tile=arith32.tile, words=arith32.to_words,
                          cast=arith32.cast)


def _device_scale(x, what):
    """A promotion scale on the device (float32), or ``None``; a host one checked as the host path checks it."""
    if x is None:
        return None
    if not device.is_device(x):
        return device.cuda_module().to_device(np.ascontiguousarray(mainloop.promotion_scale(x, what)))
    d = device.as_device(x)
    if np.dtype(d.dtype) != np.float32:
        raise DtypeError(f"gemm: {what} must be float32 (binary32) values, not {d.dtype}")
    return d


def gemm_composed(model, given, options):
    """Promotion, split-K and the epilogue of :func:`mmasim.gemm` on device operands
    (``options``: those beyond the plain chain, as :func:`mmasim.composition.gemm.requested`
    names them), on the device: the host's K loop (:func:`mmasim.composition.mainloop.accumulate`)
    and epilogue (:meth:`mmasim.composition.epilogue.Epilogue.apply`, from
    :func:`~mmasim.composition.epilogue.of_gemm`'s checks) with the device's binary32 operations
    (:func:`device_arith`, :mod:`mmasim.backends.cuda.arith32`).  As on the host, with an epilogue
    the K loop starts from zero and C (its words in the output format, checked on the device) is
    the source.  Returns ``(D words, their format)``: the accumulator's f32 words, or the epilogue's."""
    A, B, C = given["A"], given["B"], given.get("C")
    k_order = given.get("k_order", "forward")
    mainloop.check_composition(model, k_order, options)
    psa, psb = given.get("promotion_scale_a"), given.get("promotion_scale_b")
    split_k, promote_every = given.get("split_k"), given.get("promote_every")
    split_reduce = given.get("split_reduce", "sequential")
    epi = ep.of_gemm(given.get("alpha"), given.get("beta"), given.get("out_format"), given.get("saturate"), C)
    wa, wb, wc, sa, sb, md, M, K, N, _ = _device_operands(model, A, B, C, k_order, given.get("scale_a"),
                                                          given.get("scale_b"), given.get("sparse_metadata"),
                                                          None if epi is None else epi.out)
    psa, psb = _device_scale(psa, "promotion_scale_a"), _device_scale(psb, "promotion_scale_b")
    bk, bn = promotion_blocks(psa, psb, M, K, N)
    loop = mainloop.Loop(split_k=mainloop.count_option(split_k, "split_k", 1), reduce=split_reduce,
                         promote_every=mainloop.count_option(promote_every, "promote_every", None),
                         scale_a=psa, scale_b=psb, block_k=bk, block_n=bn, c_starts=epi is None)
    mainloop.check(model, loop, K, N)
    ops = dict(A=wa, B=wb, scale_a=sa, scale_b=sb, sparse_metadata=md)
    acc = mainloop.accumulate(model, loop, ops, wc if loop.c_starts else None, slice(0, M), None, None,
                              device_arith())
    return ep.output(epi, acc, wc, device_arith())


def _values_dtype(fmt, first):
    """The dtype of D's values of ``fmt`` on the device (``words=False``): torch's of that name
    for torch operands, else float32 or float16 (those numba's device arrays hold); a
    :class:`GemmOptionError` where there is none."""
    torch_ = first is not None and type(first).__module__.startswith("torch")
    if torch_:
        import torch

        dtype = getattr(torch, fmt.typed or "", None)
    else:
        dtype = np.dtype(fmt.typed) if fmt.typed in ("float32", "float16") else None
    if dtype is None:
        raise GemmOptionError(f"gemm: words=False on the CUDA device gives D's values, but "
                              f"{'torch' if torch_ else 'a numba device array'} has no dtype of {fmt.name}; "
                              "pass words=None or True (D's words), or torch tensors")
    return dtype


def gemm_of_device_operands(fn, args, kwargs):
    """:func:`mmasim.gemm` on device operands, on the device: the plain chain (:func:`gemm_chain`),
    promotion, split-K and the epilogue (:func:`gemm_composed`); no operand is copied to the
    host.  The arguments are checked as the host checks them (``model`` / ``arch`` /
    ``instruction``, ``words``, the options); device operands are words, and D is their words
    (a device array; a torch tensor for torch operands), or with ``words=False`` their values
    where the device holds that dtype (:func:`_values_dtype`): a view of the same memory."""

    bound = inspect.signature(fn).bind(*args, **kwargs)
    given = bound.arguments
    first = device.first_on_device((*args, *kwargs.values()))
    model = gemm_model(given.get("model"), given.get("arch"), given.get("instruction"),
                         given.pop("qualifiers", {}))
    words = operands.words_option(given.get("words"))
    for what in ("A", "B"):
        if operands.is_quantized(given[what]):
            raise DtypeError(f"gemm on the CUDA device: {what} is a quantized tensor, a host object; pass its words "
                             "and scales as operands on the device (a tensor scale as alpha), or every operand on "
                             "the host")
    options = requested_options(given["A"], given["B"], *(given.get(o) for o in (
        "promote_every", "split_k")), given.get("split_reduce", "sequential"), *(given.get(o) for o in (
            "promotion_scale_a", "promotion_scale_b", "alpha", "beta", "out_format", "saturate")))
    if options:
        d, fmt = gemm_composed(model, given, options)
    else:
        d, fmt = gemm_chain(model, given["A"], given["B"], given.get("C"), given.get("k_order", "forward"),
                            given.get("scale_a"), given.get("scale_b"), given.get("sparse_metadata")), model.d_format
    d = device.as_given_kind(d, first)
    if words is False and not fmt.integer:
        return d.view(_values_dtype(fmt, first))
    return d
