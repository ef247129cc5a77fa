"""``mmasim.gemm`` on operands on a CUDA device (``backend="cuda"``): the plain chain on the
device, a composition (promotion, split-K, the epilogue) from host copies.

The device routines are :mod:`mmasim.backends.cuda.device`'s; this module holds what needs the
GEMM's own checks (:func:`mmasim.composition.operands.check_shapes`), a layer above them.
"""

from __future__ import annotations

import inspect

import numpy as np

from mmasim.backends.cuda import device
from mmasim.composition.operands import check_shapes
from mmasim.errors import ScaleError, SparseMetadataError
from mmasim.execution.model import Model


def gemm_chain(model, A, B, C, k_order, scale_a, scale_b, sparse_metadata):
    """The plain chain of :func:`mmasim.gemm` on device operands, on the device: the operands
    checked once (shapes from their metadata, words by kernels), then one instruction per K
    tile (:func:`~mmasim.backends.cuda.device.device_tile` on views of the tile), D of each tile the C of the next."""
    cuda = device.cuda_module()
    dp = model.datapath
    first = device.first_on_device((A, B, C, scale_a, scale_b, sparse_metadata))
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
    if wc is None:
        wc = cuda.to_device(np.zeros((M, N), model.plan.word_dtypes[2]))
    device.check_device_matrices(model, wa, wb, wc, sa, sb)
    k = dp.k
    nwords = model.sparse_rule.words(k) if dp.sparse else 0
    per_tile = k // dp.block if dp.scale else 0
    D = wc
    for t in order:
        t = int(t)
        scales = ((sa[:, t * per_tile:(t + 1) * per_tile], sb[t * per_tile:(t + 1) * per_tile, :])
                  if dp.scale else (None, None))
        D = device.device_tile(model, wa[:, t * k:(t + 1) * k], wb[t * k:(t + 1) * k, :], D, *scales,
                               md[:, t * nwords:(t + 1) * nwords] if dp.sparse else None)
    return device.as_given_kind(D, first)


#: the options of :func:`mmasim.gemm` that its plain chain on the device (:func:`gemm_chain`) does not take
_HOST_OPTIONS = ("promote_every", "split_k", "promotion_scale_a", "promotion_scale_b", "alpha", "beta",
                 "out_format", "saturate")


def gemm_of_device_operands(fn, args, kwargs):
    """:func:`mmasim.gemm` on device operands.  The plain chain (no promotion, split-K or
    epilogue; words in, words out) runs on the device (:func:`gemm_chain`); with any of those
    options the operands are copied to the host, the composition runs there with the cuda
    backend (each K tile on the GPU) and D is copied back to the device (a torch tensor for torch
    operands)."""
    bound = inspect.signature(fn).bind(*args, **kwargs)
    given = bound.arguments
    qualifiers = given.pop("qualifiers", {})
    model = given.get("model")
    if not any(given.get(o) is not None for o in _HOST_OPTIONS) and given.get("words") in (None, True) \
            and given.get("split_reduce", "sequential") == "sequential" and (model is None) != (
                given.get("arch") is None and given.get("instruction") is None and not qualifiers):
        if model is None:
            model = Model.lookup(given.get("arch"), given.get("instruction"), **qualifiers)
        return gemm_chain(model, given["A"], given["B"], given.get("C"), given.get("k_order", "forward"),
                          given.get("scale_a"), given.get("scale_b"), given.get("sparse_metadata"))
    first = device.first_on_device((*args, *kwargs.values()))
    args = tuple(device.to_host(x) for x in args)
    kwargs = {k: device.to_host(x) for k, x in kwargs.items()}
    kwargs.setdefault("backend", "cuda")
    d = fn(*args, **kwargs)
    return device.as_given_kind(device.cuda_module().to_device(np.ascontiguousarray(d)), first)
