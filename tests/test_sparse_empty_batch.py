"""A batch of 0 rows gives an empty D on every sparse datapath, as it does on the dense ones:
its metadata has no selector to check (mmasim.arith.sparse.nibbles on (0, words))."""

import numpy as np
import pytest

from mmasim.execution.model import Model
from mmasim.registry.build import get_registry

SPARSE = sorted({(dp.arch, dp.canonical(get_registry().formats)): dp
                 for arch in get_registry().architectures.values() for dp in arch.datapaths if dp.sparse}.items())


def _empty(model, **extra):
    dp = model.datapath
    kw = {}
    if dp.scale:
        kw = dict(scale_a=np.zeros((0, dp.blocks), np.uint8), scale_b=np.zeros((0, dp.blocks), np.uint8))
    return model.dot(np.zeros((0, dp.k), np.uint8), np.zeros((0, dp.k), np.uint8), np.zeros(0, np.uint32),
                     backend="numpy", **kw, **extra)


def test_every_sparse_datapath_gives_an_empty_d_for_zero_rows():
    reg = get_registry()
    assert len(SPARSE) > 100
    for (arch, name), dp in SPARSE:
        m = Model(dp, reg)
        md = np.zeros((0, m.sparse_rule.words(dp.k)), np.uint32)
        d = _empty(m, sparse_metadata=md)
        assert d.shape == (0,) and d.dtype == np.dtype(m.encoding.dtype), (arch, name)


@pytest.mark.parametrize("arch, instruction", [("A100", "mma.sync.sp.m16n8k32.f32.f16.f16"),
                                               ("B200", "tcgen05.mma.sp.kind::tf32")])
def test_zero_rows_still_need_metadata_of_the_right_width(arch, instruction):
    import mmasim

    m = mmasim.MMA(arch, instruction)
    with pytest.raises(mmasim.SparseMetadataError):
        _empty(m, sparse_metadata=np.zeros((0, m.sparse_rule.words(m.k) + 1), np.uint32))
