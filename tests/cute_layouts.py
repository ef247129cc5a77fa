"""CuTe layout arithmetic for the tests that compare mmasim's layouts with CUTLASS's
(tests/test_layout_formulas.py, tests/test_layout_smem_formulas.py, tests/test_tcgen05_*.py): a
CuTe layout's offset at a coordinate, written from CuTe's definition (offset = sum of coordinate x
stride), not copied."""

import numpy as np


def cute(shape, stride, coord):
    """Offset of a CuTe layout at a (hierarchical) coordinate: sum of coordinate x stride."""
    if isinstance(shape, tuple):
        return sum(cute(sh, st, c) for sh, st, c in zip(shape, stride, coord))
    assert 0 <= coord < shape
    return coord * stride


def split(x, shape):
    """A flat index as the coordinate of a (possibly nested-flat) mode, first sub-mode fastest."""
    out = []
    for n in shape:
        out.append(x % n)
        x //= n
    return tuple(out)


def size(shape):
    """The number of coordinates of a (nested) CuTe shape."""
    return shape if isinstance(shape, int) else int(np.prod([size(s) for s in shape]))


def at(shape, stride, index):
    """Offset of a (nested) CuTe layout at a 1-D index, the index split colexicographically
    (first mode fastest) over the nested shape."""
    if isinstance(shape, int):
        return index * stride
    out = 0
    for s, d in zip(shape, stride):
        out += at(s, d, index % size(s))
        index //= size(s)
    return out
