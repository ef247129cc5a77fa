"""A batch of no dot products is an empty result on every sparse datapath, as on a dense one.

The sparse metadata of zero rows has no selector to check and no element to select: the
result is D words of the batch's shape, in the D format's word dtype, the dtype a dense
datapath with the same D format returns for its own empty batch; on both backends, through
``Model.dot`` and through a backend given no rows directly.
"""

import numpy as np
import pytest

from mmasim import backends
from mmasim.backends.plan import Rows, compute
from mmasim.execution.model import Model
from mmasim.registry.build import get_registry

BACKENDS = ["numpy"] + (["numba"] if backends.numba_available() else [])
EMPTY_BATCHES = [(0,), (0, 3), (2, 0)]


def _datapaths(sparse):
    reg = get_registry()
    return [dp for arch in reg.architectures.values() if not arch.inherits
            for dp in arch.datapaths if bool(dp.sparse) == sparse and not dp.refuse]


def _empty_operands(model, batch):
    """Container words of ``batch`` dot products (no rows), each operand in its word dtype."""
    dp, dt = model.datapath, model.plan.word_dtypes
    ops = [np.zeros(batch + (dp.k,), dt[0]), np.zeros(batch + (dp.k,), dt[1]), np.zeros(batch, dt[2])]
    kw = {}
    if dp.scale:
        kw = dict(scale_a=np.zeros(batch + (dp.blocks,), dt[3]), scale_b=np.zeros(batch + (dp.blocks,), dt[4]))
    if dp.sparse:
        kw["sparse_metadata"] = np.zeros(batch + (model.sparse_rule.words(dp.k),), np.uint32)
    return ops, kw


@pytest.fixture(scope="module")
def dense_dtype():
    """D format -> the dtype of a dense datapath's empty result with that D format."""
    reg, seen = get_registry(), {}
    for dp in _datapaths(sparse=False):
        if dp.d not in seen:
            model = Model(dp, reg, backend="numpy")
            ops, kw = _empty_operands(model, (0,))
            seen[dp.d] = model.dot(*ops, **kw).dtype
    return seen


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_sparse_datapath_gives_an_empty_result_for_an_empty_batch(backend, dense_dtype):
    reg = get_registry()
    sparse = _datapaths(sparse=True)
    assert sparse
    for dp in sparse:
        model = Model(dp, reg, backend=backend)
        for batch in EMPTY_BATCHES:
            ops, kw = _empty_operands(model, batch)
            d = model.dot(*ops, **kw)
            assert d.shape == batch, (dp.arch, model.instruction, batch)
            assert d.dtype == dense_dtype[dp.d], (dp.arch, model.instruction, d.dtype)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backend_given_no_rows_of_a_sparse_datapath_returns_no_words(backend, dense_dtype):
    reg, be = get_registry(), backends.get(backend)
    for dp in _datapaths(sparse=True):
        model = Model(dp, reg, backend=backend)
        ops, kw = _empty_operands(model, (0,))
        arrays = ops + [kw[name] for name in ("scale_a", "scale_b") if name in kw] + [kw["sparse_metadata"]]
        d = compute(be, model.plan, Rows.batch(arrays, (0,), 0, 0))
        assert d.shape == (0,) and d.dtype == dense_dtype[dp.d], (dp.arch, model.instruction)


@pytest.mark.parametrize("arch, instruction", [("A100", "mma.sync.sp.m16n8k32.f32.f16.f16"),
                                               ("B200", "tcgen05.mma.sp.kind::tf32")])
def test_zero_rows_still_need_metadata_of_the_right_width(arch, instruction):
    import mmasim

    m = mmasim.MMA(arch, instruction, backend="numpy")
    ops, kw = _empty_operands(m, (0,))
    kw["sparse_metadata"] = np.zeros((0, m.sparse_rule.words(m.k) + 1), np.uint32)
    with pytest.raises(mmasim.SparseMetadataError):
        m.dot(*ops, **kw)
