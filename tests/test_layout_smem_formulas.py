"""One test per shared-memory layout / descriptor formula of the PTX ISA (the canonical K- and
MN-major layouts, their swizzles, the wgmma / tcgen05 matrix descriptors) and the tcgen05 data path
layouts A-G; the register fragments are in tests/test_layout_formulas.py.  Each expectation is
written from the document's formula (quoted in the docstring, with its section), never from
mmasim's output (PTX ISA 9.0; where a document gives a layout only as a figure the docstring says
so)."""

import numpy as np
import pytest

import mmasim
from mmasim.placement import CoreMatrixLayout, SmemLayout, decode_descriptor, encode_descriptor

from cute_layouts import cute as _cute, split as _split


# ------------------------------------------------------------------ shared memory
def test_t1_bf16_core_matrix_layout_is_the_no_swizzle_k_major_instance():
    """T1: offset(i, k) = (i & 7) * 8 + (i >> 3) * 32 + (k & 7) + (k >> 3) * 64 bf16 elements, i.e.
    the K-major no-swizzle layout with SBO = 32 * 2 = 64 bytes and LBO = 64 * 2 = 128 bytes."""
    t1 = [x for x in mmasim.layouts("B200") if x.name == "tcgen05.smem.operand.bf16"][0]
    assert isinstance(t1, SmemLayout) and (t1.major, t1.swizzle, t1.sbo, t1.lbo) == ("K", 0, 64, 128)
    general = SmemLayout("k-major", major="K", swizzle=0, lbo=128, sbo=64, element_bits=16)
    i, k = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    assert np.array_equal(general.offset(i, k), 2 * ((i & 7) * 8 + (i >> 3) * 32 + (k & 7) + (k >> 3) * 64))
    assert np.array_equal(t1.offset(i, k), general.offset(i, k) // 2)


def _cute_swizzle(addr, b):
    """CuTe Swizzle<B, 4, 3>: x ^ ((x & (((1 << B) - 1) << 7)) >> 3)."""
    return addr ^ ((addr & (((1 << b) - 1) << 7)) >> 3)


@pytest.mark.parametrize("what,major,swz,bits,lbo,sbo,shape,stride", [
    # §9.7.15.5.1.2.1.3 / §9.7.16.3.3 worked examples: "Exact layout", LBO and SBO in elements
    ("K-major, no-swizzling, tf32", "K", 0, 32, 64, 32, ((8, 2), (4, 4)), ((4, 32), (1, 64))),
    ("K-major, 32B swizzling, tf32", "K", 32, 32, 0, 64, ((8, 2), (4, 2)), ((8, 64), (1, 4))),
    ("MN-major, no-swizzling, bf16", "MN", 0, 16, 128, 64, ((8, 1, 2), (8, 2)), ((1, 8, 64), (8, 128))),
    ("MN-major, 32B swizzling, bf16", "MN", 32, 16, 128, 256, ((8, 2, 2), (8, 2)), ((1, 8, 128), (16, 256))),
    ("MN-major, 64B swizzling, bf16", "MN", 64, 16, 256, 512, ((8, 4, 2), (8, 2)), ((1, 8, 256), (32, 512))),
])
def test_ptx_canonical_layout_examples(what, major, swz, bits, lbo, sbo, shape, stride):
    """PTX ISA 9.0 §9.7.15.5.1.2.1.3 (wgmma) / §9.7.16.3.3 (tcgen05) 'Canonical Layouts', examples:
    K-major no-swizzling tf32 "Swizzle<0,4,3> o ((8,2),(4,4)):((4,32),(1,64))", LBO = 64*sizeof(tf32),
    SBO = 32*sizeof(tf32); K-major 32B tf32 "Swizzle<1,4,3> o ((8,2),(4,4)):((8,64),(1,4))",
    SBO = 64*sizeof(tf32) (its first 8 K elements, one 32-byte row: the layout holds K within the
    swizzle width); MN-major no-swizzling bf16 "Swizzle<0,4,3> o ((8,1,2),(8,2)):((1,8,64),(8,128))",
    LBO = 128*sizeof(bf16), SBO = 64*sizeof(bf16) - SBO steps along MN, LBO along K, as the table's
    "((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))"; MN-major 32B bf16 "Swizzle<1,4,3> o
    ((8,2,2),(8,2)):((1,8,128),(16,256))", LBO = 128, SBO = 256 elements; MN-major 64B bf16
    "Swizzle<2,4,3> o ((8,4,2),(8,2)):((1,8,256),(32,512))", LBO = 256, SBO = 512 elements.
    The swizzle acts on byte addresses (base offset = (pattern start addr >> 7) & 7)."""
    eb = bits // 8
    L = SmemLayout(what, major=major, swizzle=swz, lbo=lbo * eb, sbo=sbo * eb, element_bits=bits)
    (s_mn, s_k), (d_mn, d_k) = shape, stride
    n_mn = int(np.prod(s_mn)) if isinstance(s_mn, tuple) else s_mn
    n_k = int(np.prod(s_k)) if isinstance(s_k, tuple) else s_k
    b = {0: 0, 32: 1, 64: 2, 128: 3}[swz]
    for r in range(n_mn):
        for k in range(n_k):
            elem = _cute((s_mn, s_k), (d_mn, d_k), (_split(r, s_mn), _split(k, s_k)))
            assert L.offset(r, k) == _cute_swizzle(elem * eb, b), (r, k)


@pytest.mark.parametrize("major,swz", [(mj, sw) for mj in ("K", "MN") for sw in (0, 32, 64, 128)])
def test_ptx_canonical_layout_table(major, swz):
    """§9.7.16.3.3 (= §9.7.15.5.1.2.1.3) table, T = 128 / element bits, in elements:
    MN-major none "((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))", 32B "((T,2,m),(8,k)):((1,T,LBO),(2T,SBO))",
    64B "((T,4,m),(8,k)):((1,T,LBO),(4T,SBO))", 128B "((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))";
    K-major none "((8,m),(T,2k)):((1T,SBO),(1,LBO))", 32B "((8,m),(T,2k)):((2T,SBO),(1,T))",
    64B "((8,m),(T,2k)):((4T,SBO),(1,T))", 128B "((8,m),(T,2k)):((8T,SBO),(1,T))"; each under
    Swizzle<0|1|2|3, 4, 3>.  bf16 (T = 8), m = 2 repeats; K-major swizzled layouts fill one
    S-byte row (2k = S / 16 chunks)."""
    T, m, eb = 8, 2, 2
    c = swz // 16                                   # 16-byte chunks per swizzle row (0: none)
    b = {0: 0, 32: 1, 64: 2, 128: 3}[swz]
    if major == "MN":
        k = 2
        lbo, sbo = (512, 64) if not swz else (8 * c * T, 8 * c * T * m)     # elements
        shape = ((T, 1, m), (8, k)) if not swz else ((T, c, m), (8, k))
        stride = ((1, T, sbo), (T, lbo)) if not swz else ((1, T, lbo), (c * T, sbo))
    else:
        k = 2 if not swz else c // 2
        lbo, sbo = (64, 256) if not swz else (0, 8 * c * T)
        shape = ((8, m), (T, 2 * k))
        stride = ((T, sbo), (1, lbo)) if not swz else ((c * T, sbo), (1, T))
    L = SmemLayout("table", major=major, swizzle=swz, lbo=lbo * eb, sbo=sbo * eb, element_bits=16)
    n_mn, n_k = int(np.prod(shape[0])), int(np.prod(shape[1]))
    seen = set()
    for r in range(n_mn):
        for kk in range(n_k):
            elem = _cute(shape, stride, (_split(r, shape[0]), _split(kk, shape[1])))
            want = _cute_swizzle(elem * eb, b)
            assert L.offset(r, kk) == want, (r, kk)
            seen.add(want)
    assert len(seen) == n_mn * n_k


def test_mn_major_no_swizzle_sbo_steps_along_mn_and_lbo_along_k():
    """§9.7.16.3.3 table, MN-major "No-swizzling or Interleaved": ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)):
    the next T elements along MN (the next 16 bytes) are SBO away, the next 8 along K are LBO away."""
    L = SmemLayout("mn", major="MN", lbo=256, sbo=128, element_bits=16)
    assert L.offset(0, 0) == 0 and L.offset(7, 0) == 14 and L.offset(8, 0) == 128
    assert L.offset(0, 1) == 16 and L.offset(0, 8) == 256 and L.offset(9, 9) == 2 + 128 + 16 + 256


@pytest.mark.parametrize("mode,xor", [(128, lambda r: r % 8), (64, lambda r: (r // 2) % 4),
                                      (32, lambda r: (r // 4) % 2)])
def test_k_major_swizzle_permutes_16_byte_chunks(mode, xor):
    """§9.7.16.3.3 table, K-major S-byte: ((8,m),(T,2k)):(((S/16)T,SBO),(1,T)) under Swizzle<B,4,3>
    (B = 3, 2, 1 for 128, 64, 32 bytes): 8 rows of S bytes; the 16-byte chunk index of each row is XOR-ed with
    address bits 7.. (Swizzle<3,4,3> for 128B: chunk ^ (row % 8); 64B: chunk ^ ((row / 2) % 4);
    32B: chunk ^ ((row / 4) % 2)); SBO steps between 8-row groups."""
    L = SmemLayout("sw", major="K", swizzle=mode, sbo=8 * mode, element_bits=16)
    for r in range(16):
        for k in range(mode // 2):
            kb = 2 * k
            want = (r // 8) * 8 * mode + (r % 8) * mode + ((kb // 16) ^ xor(r % 8)) * 16 + kb % 16
            assert L.offset(r, k) == want
    with pytest.raises(mmasim.ShapeError, match="K-major"):
        L.offset(0, mode // 2)


def test_swizzled_images_round_trip():
    L = SmemLayout("sw128", major="K", swizzle=128, sbo=1024, element_bits=16)
    X = np.arange(64 * 64).reshape(64, 64)
    assert np.array_equal(L.from_image(L.to_image(X), 64, 64), X)


def test_wgmma_descriptor_fields():
    """PTX ISA 9.0 §9.7.15.5.1.2.2 'Matrix Descriptor Format': 13-0 matrix-descriptor-encode(start
    address), 29-16 encode(LBO), 45-32 encode(SBO), 51-49 base offset, 63-62 swizzle "0: No swizzle,
    1: 128-Byte swizzle, 2: 64-Byte swizzle, 3: 32-Byte swizzle"; encode(x) = (x & 0x3FFFF) >> 4.
    The canonical-layout example "K-Major, no-swizzling and tf32": LBO 64*4 bytes encodes as 16,
    SBO 32*4 as 8."""
    ex = encode_descriptor(0, 64 * 4, 32 * 4)
    assert (ex >> 16) & 0x3FFF == 16 and (ex >> 32) & 0x3FFF == 8
    w = encode_descriptor(0x400, 128, 64, 128)
    assert w == (0x400 >> 4) | (128 >> 4) << 16 | (64 >> 4) << 32 | 1 << 62
    assert encode_descriptor(0x400, 128, 64, 32) >> 62 == 3
    d = decode_descriptor(w)
    assert (d.start_address, d.lbo, d.sbo, d.swizzle) == (0x400, 128, 64, 128)
    with pytest.raises(mmasim.ShapeError, match="multiple of 16"):
        encode_descriptor(0x401, 128, 64)


def test_tcgen05_descriptor_fields():
    """PTX ISA 9.0 §9.7.16.4.1 Table 40 'Shared memory descriptor layout': 0-13, 16-29, 32-45 as
    wgmma's; 46-48 "Fixed constant value of 0b001"; 49-51 matrix base offset; 52 leading dimension
    stride mode "0: byte offset relative, 1: byte address absolute"; 53-60 fixed constant 0;
    61-63 swizzle "0. No swizzling 1. 128-Byte with 32B atomic swizzling 2. 128-Byte swizzling
    4. 64-Byte swizzling 6. 32-Byte swizzling; Values 3, 5 and 7 are invalid"."""
    assert [encode_descriptor(0, 16, 16, sw, target="tcgen05") >> 61 for sw in (0, "128B_base32B", 128, 64, 32)] \
        == [0, 1, 2, 4, 6]
    w52 = encode_descriptor(0, 16, 16, 128, target="tcgen05", base_offset=5, lbo_mode=1)
    assert (w52 >> 52) & 1 == 1 and (w52 >> 49) & 7 == 5
    d52 = decode_descriptor(w52, "tcgen05")
    assert (d52.lbo_mode, d52.base_offset, d52.swizzle) == (1, 5, 128)
    ok = encode_descriptor(0, 16, 16, target="tcgen05")
    for code in (3, 5, 7):
        with pytest.raises(mmasim.ShapeError, match="reserved"):
            decode_descriptor(ok | code << 61, "tcgen05")
    with pytest.raises(mmasim.ShapeError, match="53-60"):
        decode_descriptor(ok | 1 << 53, "tcgen05")
    w = encode_descriptor(0x800, 128, 64, 64, target="tcgen05")
    assert w == (0x800 >> 4) | (128 >> 4) << 16 | (64 >> 4) << 32 | 1 << 46 | 4 << 61
    d = decode_descriptor(w, target="tcgen05")
    assert (d.start_address, d.lbo, d.sbo, d.swizzle, d.lbo_mode) == (0x800, 128, 64, 64, 0)
    t1 = [x for x in mmasim.layouts("B200") if x.name == "tcgen05.smem.operand.bf16"][0]
    assert decode_descriptor(t1.descriptor(0x1000, target="tcgen05"), "tcgen05").sbo == 64
    with pytest.raises(mmasim.ShapeError, match="0b001"):
        decode_descriptor(0, target="tcgen05")


def test_core_matrix_layout_still_constructs_from_element_units():
    lay = CoreMatrixLayout(name="x", arch="", description="", T=8, SBO=32, LBO=64)
    assert (lay.sbo, lay.lbo, lay.element_bits) == (64, 128, 16)


@pytest.mark.parametrize("letter,n,where", [
    ("A", 16, lambda i, j, N: (i, j)),
    ("D", 24, lambda i, j, N: (i, j)),
    ("B", 32, lambda i, j, N: (i + 64 * (j // (N // 2)), j % (N // 2))),
    ("E", 16, lambda i, j, N: (i + 64 * (j // (N // 2)), j % (N // 2))),
    ("C", 8, lambda i, j, N: (32 * (i // 16) + i % 16, j)),
    ("F", 8, lambda i, j, N: (32 * (i // 16) + i % 16, j)),
    ("G", 64, lambda i, j, N: (i + 32 * (j // (N // 4)), j % (N // 4))),
])
def test_ptx_tcgen05_datapath_layouts_a_to_g(letter, n, where):
    """PTX ISA 9.0 §9.7.16.10.5 'Data Path Layout Organization' table (checked: A 4x1, B 2x2, C 4x1
    half, D 4x1, E '2x3' as printed, F 4x1 half, G 1x4) and Figures 205-218 (the placement, read from the
    figures and not compared with them cell by cell), per CTA: A (M=256, cta_group::2) and D (M=128): row i
    in TMEM lane i; B (M=128 cta_group::2 dense) and E (M=64 .ws): element [i, j] in lane
    i + 64 * (j // (N/2)), column j % (N/2); C (M=128 cta_group::2 sparse) and F (M=64):
    row i in lane 32 * (i // 16) + i % 16; G (M=32 .ws): [i, j] in lane i + 32 * (j // (N/4)),
    column j % (N/4)."""
    from mmasim.placement import tmem_datapath

    L = tmem_datapath(letter, n)
    assert L.storage == "tmem" and L.lanes == 128 and L.cols == n
    for i in range(L.rows):
        for j in range(n):
            assert L.owner(i, j) == where(i, j, n)
    with pytest.raises(mmasim.ShapeError, match="one of"):
        tmem_datapath("H", 8)
