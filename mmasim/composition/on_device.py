"""``mmasim.gemm`` on operands on a CUDA device (``backend="cuda"``): the plain chain, promotion
(with or without promotion scales) and split-K (sequential or tree) on the device, the host's K
loop (:mod:`mmasim.composition.mainloop`) with the device's binary32 operations
(:mod:`mmasim.backends.cuda.arith32`); with an epilogue (``alpha``, ``beta``, ``out_format``,
``saturate``) the composition runs from host copies of the operands.

The device routines are :mod:`mmasim.backends.cuda.device`'s; this module holds what needs the
GEMM's own checks (:func:`mmasim.composition.operands.check_shapes`), a layer above them.
"""

from __future__ import annotations

import functools
import inspect

import numpy as np

from mmasim.backends.cuda import device
from mmasim.composition import mainloop
from mmasim.composition.operands import check_shapes, promotion_blocks
from mmasim.errors import DtypeError, GemmOptionError, ScaleError, SparseMetadataError
from mmasim.execution.model import Model


def _device_operands(model, A, B, C, k_order, scale_a, scale_b, sparse_metadata):
    """The operands of :func:`mmasim.gemm` on the device, checked once (shapes from their
    metadata, words by kernels): ``(A, B, C or None, scale_a, scale_b, metadata, M, K, N, order)``."""
    dp = model.datapath
    wa, wb = device.device_words(model, A, model.a_format, "A"), device.device_words(model, B, model.b_format, "B")
    wc = None if C is None else device.device_words(model, C, model.c_format, "C")
    sa = None if scale_a is None else device.device_words(model, scale_a, model.scale_format, "scale_a")
    sb = None if scale_b is None else device.device_words(model, scale_b, model.scale_format, "scale_b")
    md = None if sparse_metadata is None else device.device_metadata(sparse_metadata)
    shape = (lambda x: None if x is None else tuple(x.shape))
    M, K, N, order = check_shapes(model, shape(wa), shape(wb), shape(wc), k_order, shape(sa), shape(sb), shape(md))
    if scale_a is not None and not dp.scale:
        raise ScaleError(f"{model.instruction} is not block-scaled: scale_a/scale_b must be None")
    if dp.sparse and md is None:
        raise SparseMetadataError(f"{model.instruction} is sparse: pass sparse_metadata")
    device.check_device_matrices(model, wa, wb, wc, sa, sb)
    return wa, wb, wc, sa, sb, md, M, K, N, order


def gemm_chain(model, A, B, C, k_order, scale_a, scale_b, sparse_metadata):
    """The plain chain of :func:`mmasim.gemm` on device operands, on the device: the operands
    checked once, then :func:`mmasim.composition.mainloop.chain` with one instruction per K
    tile on the device (:func:`~mmasim.backends.cuda.device.device_tile` on views of the tile),
    D of each tile the C of the next."""
    first = device.first_on_device((A, B, C, scale_a, scale_b, sparse_metadata))
    wa, wb, wc, sa, sb, md, M, K, N, order = _device_operands(model, A, B, C, k_order, scale_a, scale_b,
                                                               sparse_metadata)
    if wc is None:
        wc = device.cuda_module().to_device(np.zeros((M, N), model.plan.word_dtypes[2]))
    D = mainloop.chain(model, wa, wb, wc, [int(t) for t in order], sa, sb, md, None, 1, None, device_arith().tile)
    return device.as_given_kind(D, first)


@functools.lru_cache(maxsize=None)
def device_arith() -> mainloop.Arith:
    """The K loop's binary32 operations and tile on the device (:class:`mmasim.composition.mainloop.Arith`;
    numba imported with the first device operand)."""
    from mmasim.backends.cuda import arith32

    return mainloop.Arith(zeros=arith32.zeros, values=arith32.values, add=arith32.add, mul=arith32.mul,
                          fma=arith32.fma, widen=arith32.widen, tile=arith32.tile)


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


def gemm_composed(model, given):
    """Promotion and split-K (no epilogue) of :func:`mmasim.gemm` on device operands, on the
    device: the host's K loop (:func:`mmasim.composition.mainloop.accumulate`) with the device's
    binary32 operations (:func:`device_arith`, :mod:`mmasim.backends.cuda.arith32`); D the accumulator's f32 words."""
    A, B, C = given["A"], given["B"], given.get("C")
    first = device.first_on_device(tuple(given.values()))
    k_order = given.get("k_order", "forward")
    if not (isinstance(k_order, str) and k_order == "forward"):
        raise GemmOptionError("gemm: k_order applies to the plain chain; with promotion, split-K or an "
                              f"epilogue the K tiles run forward (got k_order={k_order!r})")
    psa, psb = given.get("promotion_scale_a"), given.get("promotion_scale_b")
    split_k, promote_every = given.get("split_k"), given.get("promote_every")
    split_reduce = given.get("split_reduce", "sequential")
    sequential = isinstance(split_reduce, str) and split_reduce == "sequential"
    mainloop.check_binary32_d(model, [o for o in _DEVICE_OPTIONS if given.get(o) is not None]
                              + ([] if sequential else [f"split_reduce={split_reduce!r}"]))
    wa, wb, wc, sa, sb, md, M, K, N, _ = _device_operands(model, A, B, C, k_order, given.get("scale_a"),
                                                          given.get("scale_b"), given.get("sparse_metadata"))
    psa, psb = _device_scale(psa, "promotion_scale_a"), _device_scale(psb, "promotion_scale_b")
    bk, bn = promotion_blocks(psa, psb, M, K, N)
    loop = mainloop.Loop(split_k=mainloop.count_option(split_k, "split_k", 1), reduce=split_reduce,
                         promote_every=mainloop.count_option(promote_every, "promote_every", None),
                         scale_a=psa, scale_b=psb, block_k=bk, block_n=bn)
    mainloop.check(model, loop, K, N)
    ops = dict(A=wa, B=wb, scale_a=sa, scale_b=sb, sparse_metadata=md)
    acc = mainloop.accumulate(model, loop, ops, wc, slice(0, M), None, None, device_arith())
    from mmasim.backends.cuda import arith32

    return device.as_given_kind(arith32.to_words(acc), first)


#: the options of :func:`mmasim.gemm` that the device does not take (the epilogue): with any
#: of them the composition runs from host copies of the operands
_HOST_OPTIONS = ("alpha", "beta", "out_format", "saturate")
#: the options the device's composition (:func:`gemm_composed`) takes
_DEVICE_OPTIONS = ("promote_every", "split_k", "promotion_scale_a", "promotion_scale_b")


def gemm_of_device_operands(fn, args, kwargs):
    """:func:`mmasim.gemm` on device operands.  The plain chain (:func:`gemm_chain`), promotion
    and split-K (:func:`gemm_composed`; words in, words out) run on the device; with an epilogue
    option (:data:`_HOST_OPTIONS`) the operands are copied to the host, the composition runs
    there with the cuda backend (each K tile on the GPU) and D is copied back to the device (a
    torch tensor for torch operands)."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    given = bound.arguments
    qualifiers = given.pop("qualifiers", {})
    model = given.get("model")
    if not any(given.get(o) is not None for o in _HOST_OPTIONS) and given.get("words") in (None, True) \
            and (model is None) != (given.get("arch") is None and given.get("instruction") is None and not qualifiers):
        if model is None:
            model = Model.lookup(given.get("arch"), given.get("instruction"), **qualifiers)
        if any(given.get(o) is not None for o in _DEVICE_OPTIONS) or not (
                isinstance(given.get("split_reduce", "sequential"), str)
                and given.get("split_reduce", "sequential") == "sequential"):
            return gemm_composed(model, given)
        return gemm_chain(model, given["A"], given["B"], given.get("C"), given.get("k_order", "forward"),
                          given.get("scale_a"), given.get("scale_b"), given.get("sparse_metadata"))
    first = device.first_on_device((*args, *kwargs.values()))
    args = tuple(device.to_host(x) for x in args)
    kwargs = {k: device.to_host(x) for k, x in kwargs.items()}
    kwargs.setdefault("backend", "cuda")
    d = fn(*args, **kwargs)
    return device.as_given_kind(device.cuda_module().to_device(np.ascontiguousarray(d)), first)
