"""B200 tcgen05 FP4 block-scale rules (docs/datapaths.md §6).

Two rules of the block-scaled FP4 window, stated precisely:

1. The scale floor ``max scale raw - 35`` takes the max only over the scale blocks
   that hold at least one nonzero product: a block whose products are all zero, or
   whose scale is zero, does not raise the floor.
2. The ue8m0 subnormal redo applies only when the RZ-F32 result is a *nonzero*
   f32 subnormal (2^-149 <= |sum| < 2^-126), not when the exact sum is nonzero
   below 2^-126 but truncates to zero.

Every expected word below is derived by hand from those rules (the derivation is
in each docstring) and written as an exact value; :func:`rz_f32` turns it into
the word independently of mmasim.  Each case runs for every FP4 kind it applies
to, dense and sparse (``tcgen05.mma.sp``, metadata in chunks of 8 whose two
fields pick two adjacent pairs), on both backends (``Model.dot(backend=...)``:
the numpy lean path / reference and the compiled kernels), through the reference
accumulator itself, and through the matrix form.

Notation: e2m1 words 0x2 = 1.0, 0xA = -1.0, 0x7 = 6.0; a ue8m0 word x is 2^(x-127)
with raw exponent x-127; ue4m3 0x38 = 1.0 (raw 0), 0x7E = 448 (raw 8), 0x00 = 0.
"Scale raw" of a block = raw(scale_a) + raw(scale_b).  The product raw of
1.0 x 1.0 (e2m1 raw 0 each) is the block's scale raw.

The redo (rule 2) exists only for the ue8m0 kinds.  NVFP4 (ue4m3 scales) has none,
and there a nonzero sum cannot fall below 2^-126 at all: the smallest nonzero
product is 0.5 * 0.5 * 2^-9 * 2^-9 = 2^-20 and the quantum is at least
max product raw - 39 >= -12 - 39, so the rule-2 cases are for the ue8m0 kinds only.
"""

from fractions import Fraction

import attrs
import numpy as np
import pytest

import mmasim
from helpers import f32, f32_rz
from mmasim.backends.numpy import reference
from mmasim.execution.model import Model
from mmasim.registry.build import get_registry

ONE, NEG_ONE, SIX = 0x2, 0xA, 0x7          # e2m1 words
UE8M0_ONE, UE4M3_ONE = 0x7F, 0x38

KINDS = {
    "mxf4 ue8m0 2X": ("kind::mxf4.block_scale.scale_vec::2X.block32.f32.e2m1.e2m1.ue8m0", 32),
    "mxf4nvf4 ue8m0 2X": ("kind::mxf4nvf4.block_scale.scale_vec::2X.block32.f32.e2m1.e2m1.ue8m0", 32),
    "mxf4nvf4 ue8m0 4X": ("kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue8m0", 16),
    "mxf4nvf4 ue4m3 4X (NVFP4)": ("kind::mxf4nvf4.block_scale.scale_vec::4X.block16.f32.e2m1.e2m1.ue4m3", 16),
}
UE8M0_KINDS = [k for k in KINDS if "ue8m0" in k]
K = 64                                     # stored (compacted) K of every FP4 kind

# Sparse metadata: nibble i is the selector of logical chunk i (8 elements, low nibble
# of word 0 first); bits 1:0 and 3:2 pick two adjacent pairs.  Chunks 0-7 use 0xE
# (pairs 2 and 3: elements 4-7), chunks 8-15 use 0x4 (pairs 0 and 1: elements 0-3).
SPARSE_METADATA = [0xEEEEEEEE, 0x44444444]


def logical_position(i):
    """Logical K position of compacted element ``i`` under SPARSE_METADATA."""
    chunk, within = divmod(i, 4)
    return chunk * 8 + (4 if chunk < 8 else 0) + within


def rz_f32(x: Fraction) -> int:
    """f32 word of the exact value ``x`` truncated toward zero, subnormals included;
    a result that truncates to zero is +0 (the NVIDIA fixed-point rule)."""
    if x == 0 or abs(x) >= two(-126):
        return f32_rz(x)
    mant = int(abs(x) / two(-149))          # subnormal: steps of 2^-149
    return ((0x80000000 if x < 0 else 0) | mant) if mant else 0


def two(e):
    return Fraction(2) ** e


def test_rz_f32_helper_words():
    # fixed points of the helper itself, from the IEEE binary32 layout
    assert rz_f32(Fraction(1)) == 0x3F800000
    assert rz_f32(two(-149)) == 0x00000001
    assert rz_f32(two(-148) - two(-175)) == 0x00000001
    assert rz_f32(two(-149) - two(-175)) == 0
    assert rz_f32(-(two(-149) - two(-175))) == 0
    assert rz_f32(two(-126)) == 0x00800000
    assert rz_f32(two(-12) + two(-34)) == 0x39800000 | (1 << 1)


# -------------------------------------------------------------------- running
def model_of(kind, sparse):
    ins, _ = KINDS[kind]
    return mmasim.MMA("B200", ("tcgen05.mma.sp." if sparse else "tcgen05.mma.") + ins)


def logical(model, x, fill):
    """The logical operand of compacted ``x``: itself (dense), or spread over the
    positions SPARSE_METADATA selects with ``fill`` in every unselected lane."""
    if not model.datapath.sparse:
        return np.asarray(x, dtype=np.uint8)
    out = np.full(2 * K, fill, dtype=np.uint8)
    for i, v in enumerate(x):
        out[logical_position(i)] = v
    return out


def run_everywhere(model, a, b, c, sa, sb):
    """D of one case on every path: Model.dot on both backends, the reference
    accumulator on the compacted words, and the matrix form on both backends.
    Unselected sparse lanes hold 6.0 x 6.0: were they counted, they would be
    nonzero products of their block."""
    la, lb = logical(model, a, SIX), logical(model, b, SIX)
    md = {"sparse_metadata": SPARSE_METADATA} if model.datapath.sparse else {}
    got = {}
    for be in ("numpy", "numba"):
        got[f"dot {be}"] = int(model.dot(la, lb, c, scale_a=sa, scale_b=sb, backend=be, **md))
    u = lambda x: np.asarray(x, dtype=np.uint64)[None]   # noqa: E731
    got["reference"] = int(reference(model.plan, u(a), u(b), u([c]).reshape(1), u(sa), u(sb))[0])
    # matrix form at the instruction's smallest legal shape: D[i, 0] is the case for every
    # row i; columns 1.. of B are zero (no nonzero product: D = C)
    M, N = model.legal_m[0], model.legal_n[0]
    A = np.stack([la] * M)
    B = np.zeros((la.shape[0], N), dtype=lb.dtype)
    B[:, 0] = lb
    C = np.full((M, N), c, dtype=np.uint32)
    SA = np.array([sa] * M, dtype=np.uint8)
    SB = np.array([sb] * N, dtype=np.uint8).T.copy()
    mmd = {"sparse_metadata": np.array([SPARSE_METADATA] * M, dtype=np.uint32)} if md else {}
    for be in ("numpy", "numba"):
        D = np.asarray(model(A, B, C, scale_a=SA, scale_b=SB, backend=be, **mmd))
        assert {int(x) for x in D[:, 1:].ravel()} == {c}, f"matrix {be}: a zero column must give C"
        rows = {int(x) for x in D[:, 0]}
        assert len(rows) == 1, f"matrix {be}: identical rows differ: {sorted(map(hex, rows))}"
        got[f"matrix {be}"] = rows.pop()
    return got


def check(model, a, b, c, sa, sb, want):
    got = run_everywhere(model, a, b, c, sa, sb)
    bad = {k: hex(v) for k, v in got.items() if v != want}
    assert not bad, f"{model.instruction}: want {want:#010x}, got {bad}"


# ----------------------------------------------- rule 1: the scale floor
def test_a_block_of_zero_products_does_not_raise_the_scale_floor():
    """kind::mxf4.block_scale.scale_vec::2X, a[32] = b[32]
    = 1.0 (0x2), every other element 0, scale_a = scale_b = [0x93, 0x7F], C = 0.

    Block 0 (elements 0-31) has scales 2^20 x 2^20 (scale raw 40) but only zero
    products; block 1 has scales 2^0 x 2^0 (scale raw 0) and the one nonzero
    product 1.0 (product raw 0).  Counting only blocks holding a nonzero product,
    max scale raw = 0 and quantum = max(0 - 39, 0 - 35) = -35; 1.0 is a multiple of
    2^-35, so D = 1.0 = 0x3F800000.  (Counting block 0 too, the floor would be
    40 - 35 = 5: 1.0 truncated to a multiple of 2^5 is 0, giving 0x00000000.)
    No C (C = 0), the result is normal: C-dominant, C-relative and the redo
    do not apply.
    """
    m = mmasim.MMA("B200", "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X")
    a = np.zeros(K, dtype=np.uint8)
    a[32] = ONE
    want = rz_f32(Fraction(1))
    assert want == 0x3F800000
    check(m, a, a.copy(), 0, [0x93, 0x7F], [0x93, 0x7F], want)


FINE_C = two(-12) + two(-34)       # an f32 value: its low bit is 22 places below the top


def floor_case(kind, sparse, dead="products"):
    """Block 0: huge scales but no nonzero product (``dead="products"``: a = 6.0,
    b = 0; ``dead="scale"``: a = b = 6.0 with scale_a = 0, ue4m3 only).  Block 1:
    products +1.0 and -1.0 (the same group of 4 and of 16) at scales 1 x 1, scale raw
    0, product raw 0.  Other blocks: zero products, scales 1.  C = 2^-12 + 2^-34."""
    model = model_of(kind, sparse)
    block = KINDS[kind][1]
    nb = K // block
    ue4m3 = "ue4m3" in kind
    unit = UE4M3_ONE if ue4m3 else UE8M0_ONE
    huge = 0x7E if ue4m3 else 0x93
    a = np.zeros(K, dtype=np.uint8)
    b = np.zeros(K, dtype=np.uint8)
    a[:block] = SIX
    sa, sb = [unit] * nb, [unit] * nb
    sa[0] = sb[0] = huge
    if dead == "scale":
        b[:block] = SIX
        sa[0] = 0x00
    a[block], b[block] = ONE, ONE
    a[block + 1], b[block + 1] = NEG_ONE, ONE
    return model, a, b, f32(float(FINE_C)), sa, sb


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("kind", list(KINDS))
def test_zero_product_block_with_huge_scale_does_not_raise_the_scale_floor(kind, sparse):
    """Block 0 holds only zero products under the largest scales used here
    (ue8m0 2^20 x 2^20, scale raw 40; ue4m3 448 x 448, scale raw 16); block 1
    holds +1.0 and -1.0 at scale 1 (scale raw 0, product raw 0; their exact group
    sum is 0 but the block holds nonzero products).  C = 2^-12 + 2^-34, r_c = -12.

    r_c < max product raw 0: not C-dominant; block 1's group raw 0 > r_c: no
    C-relative truncation.  Max scale raw over blocks with a nonzero product = 0,
    so quantum = max(max(0, -12) - 39, 0 - 35) = -35; C is a multiple of 2^-35 and
    the products sum to 0: D = C exactly, a normal number (no redo).

    Were block 0 counted, the floor would be 40 - 35 = 5 (ue8m0: C truncates to 0,
    D = +0) or 16 - 35 = -19 (ue4m3: C truncates to 2^-12).
    """
    model, a, b, c, sa, sb = floor_case(kind, sparse)
    want = rz_f32(FINE_C)
    assert want == c
    check(model, a, b, c, sa, sb, want)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_zero_scale_block_does_not_raise_the_nvfp4_scale_floor(sparse):
    """NVFP4 (ue4m3 has a zero): block 0 has a = b = 6.0 everywhere but scale_a = 0
    (scale_b = 448), so its products are zero; block 1 as in the test above.

    Only block 1 holds nonzero products: quantum = max(-12 - 39, 0 - 35) = -35 and
    D = C = 2^-12 + 2^-34 exactly.  Were block 0 counted with the raw exponent of
    its zero scale (-6, the smallest normal exponent) plus 8, the floor would be
    2 - 35 = -33 and C would lose its 2^-34 bit.
    """
    model, a, b, c, sa, sb = floor_case("mxf4nvf4 ue4m3 4X (NVFP4)", sparse, dead="scale")
    check(model, a, b, c, sa, sb, rz_f32(FINE_C))


def test_floor_rule_alone_on_the_one_product_per_group_paths():
    """The same rule through the one-product-per-group paths of the window (the
    numpy LeanWindow and the compiled tile kernel): a datapath of the mxf4 formats
    with only ``F = 39`` and ``scale_floor = 35`` (no groups, no C rules, no redo).

    Issue example (a[32] = b[32] = 1.0, scales [0x93, 0x7F]): quantum =
    max(0 - 39, 0 - 35) = -35, D = 1.0.  Floor case (+1.0 and -1.0 in block 1, C =
    2^-12 + 2^-34, block 0 with zero products under 2^20 x 2^20): each product is
    truncated alone at -35 (exact), D = C.
    """
    from mmasim.backends import kernel_for
    from mmasim.backends.numpy import lean_path
    from mmasim.backends.numpy.lean import LeanWindow

    base = model_of("mxf4 ue8m0 2X", False)
    dp = attrs.evolve(base.datapath, params={"F": 39, "zeros": "excluded", "scale_floor": 35})
    model = Model(dp, get_registry())
    assert isinstance(lean_path(model.plan), LeanWindow)
    kern = kernel_for(model)
    assert kern is not None and "lean" in kern.fn.__name__
    a = np.zeros(K, dtype=np.uint8)
    a[32] = ONE
    check(model, a, a.copy(), 0, [0x93, 0x7F], [0x93, 0x7F], 0x3F800000)
    _, a, b, c, sa, sb = floor_case("mxf4 ue8m0 2X", False)
    check(model, a, b, c, sa, sb, rz_f32(FINE_C))


# --------------------------------------------------- rule 2: the subnormal redo
def redo_case(kind, sparse, x_scales, y_scales, x_sign=ONE, y_sign=NEG_ONE):
    """One product x_sign * 1.0 in block 0 and one y_sign * 1.0 in block 1 (the
    first element of each), C = 0; unused blocks (4X) have zero products and the
    smallest scales 2^-127 x 2^-127."""
    model = model_of(kind, sparse)
    block = KINDS[kind][1]
    nb = K // block
    a = np.zeros(K, dtype=np.uint8)
    b = np.zeros(K, dtype=np.uint8)
    a[0], b[0] = x_sign, ONE
    a[block], b[block] = y_sign, ONE
    sa, sb = [0x00] * nb, [0x00] * nb
    sa[0], sb[0] = x_scales
    sa[1], sb[1] = y_scales
    return model, a, b, 0, sa, sb


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("negative", [False, True], ids=["positive", "negative"])
@pytest.mark.parametrize("kind", UE8M0_KINDS)
def test_sum_below_2m126_that_truncates_to_zero_is_not_redone(kind, negative, sparse):
    """Block 0: 1.0 x 1.0 at scales 2^-75 x 2^-74 (0x34, 0x35): X = 2^-149, scale raw
    -149.  Block 1: -1.0 x 1.0 at 2^-88 x 2^-87 (0x27, 0x28): -Y = -2^-175, scale
    raw -175.  C = 0.  (Negated: -X and +Y.)

    quantum = max(-149 - 39, -149 - 35) = -184.  Contributions: 2^35 and -2^9
    quanta; the sum 2^-149 - 2^-175 is nonzero and below 2^-126, but below 2^-149:
    RZ-F32 gives zero, so there is no redo and D = +0 (a zero result is +0, also
    for a negative sum; C = 0 and there are nonzero products, so D is not C).

    (Redone, block 1's group would be left out: scale raw -175 < -149 and its
    2^9 quanta are below 2^(-174 + 184) = 2^10; D would be 2^-149 = 0x00000001,
    or 0x80000001 negated.)
    """
    signs = (NEG_ONE, ONE) if negative else (ONE, NEG_ONE)
    model, a, b, c, sa, sb = redo_case(kind, sparse, (0x34, 0x35), (0x27, 0x28), *signs)
    exact = two(-149) - two(-175)
    want = rz_f32(-exact if negative else exact)
    assert want == 0
    check(model, a, b, c, sa, sb, want)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("kind", UE8M0_KINDS)
def test_nonzero_subnormal_rz_result_is_redone(kind, sparse):
    """Block 0: 1.0 x 1.0 at scales 2^-74 x 2^-74 (0x35, 0x35): X = 2^-148, scale raw
    -148.  Block 1: -1.0 x 1.0 at 2^-88 x 2^-87 (0x27, 0x28): -2^-175, scale raw
    -175.  C = 0.

    quantum = max(-148 - 39, -148 - 35) = -183.  Contributions: 2^35 and -2^8
    quanta; the sum 2^-148 - 2^-175 truncates in RZ-F32 to 2^-149, a nonzero
    subnormal, so the sum is redone: block 1's group has scale raw -175 below the
    max -148 and 2^8 quanta below 2^(-174 + 183) = 2^9, so it is left out; block
    0's group (scale raw at the max) stays.  D = 2^-148 = 0x00000002 (without the
    redo it would be 0x00000001).
    """
    model, a, b, c, sa, sb = redo_case(kind, sparse, (0x35, 0x35), (0x27, 0x28))
    assert rz_f32(two(-148) - two(-175)) == 0x00000001      # the RZ-F32 result: nonzero subnormal
    want = rz_f32(two(-148))
    assert want == 0x00000002
    check(model, a, b, c, sa, sb, want)
