"""CuTe layout arithmetic for the tests that compare mmasim's layouts with CUTLASS's
(tests/test_layout_formulas.py, tests/test_layout_smem_formulas.py): a CuTe layout's offset at a
coordinate, written from CuTe's definition (offset = sum of coordinate x stride), not copied."""


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
