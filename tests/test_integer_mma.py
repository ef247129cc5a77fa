"""Integer and sub-byte MMAs: mma.sync .s8/.u8/.s4/.u4/.b1, wgmma .s8/.u8,
AMD v_mfma_i32_*, and tcgen05's cta_group::2 / .ws forms.

The oracle here is written from the ISA text (docs/datapaths.md §10), with Python
integers only, independent of mmasim's decoders and accumulators:

* s8 / s4: two's complement of 8 / 4 bits; u8 / u4 / b1: unsigned; C is an s32 word;
* D = C + sum(a * b) exactly (b1: C + popc(a AND b) or C + popc(a XOR b) over K bits);
* without .satfinite the sum wraps to 32 bits; with it, it is clamped to [-2^31, 2^31 - 1].
"""

import zlib

import numpy as np
import pytest

import mmasim
from mmasim.cli.main import main

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
BITS = {"s8": 8, "u8": 8, "s4": 4, "u4": 4, "b1": 1}


def _value(word: int, fmt: str) -> int:
    bits = BITS[fmt]
    word = int(word)
    assert 0 <= word < 1 << bits
    return word - (1 << bits) if fmt[0] == "s" and word >> (bits - 1) else word


def _s32(word: int) -> int:
    word = int(word)
    return word - (1 << 32) if word >> 31 else word


def oracle(a_words, b_words, c_word, a_fmt, b_fmt, saturate=False, bitop=None) -> int:
    """The ISA's D word for one output element."""
    if bitop == "xor":
        total = sum(int(x) ^ int(y) for x, y in zip(a_words, b_words))
    elif bitop == "and":
        total = sum(int(x) & int(y) for x, y in zip(a_words, b_words))
    else:
        total = sum(_value(x, a_fmt) * _value(y, b_fmt) for x, y in zip(a_words, b_words))
    total += _s32(c_word)
    if saturate:
        total = min(max(total, INT_MIN), INT_MAX)
    return total & 0xFFFFFFFF


# ------------------------------------------------------------------ the instruction set
def _ptx_mma(m, n, k, a, b, sat=False, bitop=None):
    return (f"mma.sync.aligned.m{m}n{n}k{k}.row.col" + (".satfinite" if sat else "")
            + f".s32.{a}.{b}.s32" + (f".{bitop}.popc" if bitop else ""))


# PTX ISA, mma: shapes per type and target (sm_75: the m8n8 forms and .xor.popc only)
S8_SHAPES = {"sm_75": [(8, 8, 16)], "sm_80": [(8, 8, 16), (16, 8, 16), (16, 8, 32)]}
S4_SHAPES = {"sm_75": [(8, 8, 32)], "sm_80": [(8, 8, 32), (16, 8, 32), (16, 8, 64)]}
B1_SHAPES = {"sm_75": [(8, 8, 128)], "sm_80": [(8, 8, 128), (16, 8, 128), (16, 8, 256)]}
B1_OPS = {"sm_75": ["xor"], "sm_80": ["and", "xor"]}
NVIDIA = {"Turing": "sm_75", "Ampere": "sm_80", "Ada Lovelace": "sm_80", "Hopper": "sm_80",
          "Blackwell": "sm_80", "RTX Blackwell": "sm_80"}


def _mma_sync_spellings():
    out = []
    for arch, sm in NVIDIA.items():
        for shapes, types in ((S8_SHAPES[sm], ("s8", "u8")), (S4_SHAPES[sm], ("s4", "u4"))):
            for m, n, k in shapes:
                for a in types:
                    for b in types:
                        for sat in (False, True):
                            out.append((arch, _ptx_mma(m, n, k, a, b, sat), (m, k, a, b, sat, None)))
        for m, n, k in B1_SHAPES[sm]:
            for op in B1_OPS[sm]:
                out.append((arch, _ptx_mma(m, n, k, "b1", "b1", bitop=op), (m, k, "b1", "b1", False, op)))
    return out


MMA_SYNC = _mma_sync_spellings()
WGMMA_N = [8, 16, 24] + list(range(32, 257, 16))
WGMMA = [("Hopper", f"wgmma.mma_async.sync.aligned.m64n{n}k32" + (".satfinite" if sat else "") + f".s32.{a}.{b}",
          (64, 32, a, b, sat, None))
         for n in (8, 24, 48, 256) for a in ("s8", "u8") for b in ("s8", "u8") for sat in (False, True)]
# AMD CDNA1 / CDNA2 and CDNA3 ISA guides: V_MFMA_I32_<M>X<N>X<K>[_<blocks>B]I8 / _I8
MFMA = [(arch, name, (m, k, "s8", "s8", False, None))
        for arch in ("CDNA1", "CDNA2")
        for name, m, k in [("v_mfma_i32_32x32x4i8", 32, 4), ("v_mfma_i32_16x16x4i8", 16, 4),
                           ("v_mfma_i32_4x4x4i8", 4, 4), ("v_mfma_i32_32x32x8i8", 32, 8),
                           ("v_mfma_i32_16x16x16i8", 16, 16)]] + \
       [("CDNA3", name, (m, k, "s8", "s8", False, None))
        for name, m, k in [("v_mfma_i32_32x32x4_2b_i8", 32, 4), ("v_mfma_i32_16x16x4_4b_i8", 16, 4),
                           ("v_mfma_i32_4x4x4_16b_i8", 4, 4), ("v_mfma_i32_32x32x16_i8", 32, 16),
                           ("v_mfma_i32_16x16x32_i8", 16, 32)]]
ALL = MMA_SYNC + WGMMA + MFMA


def _id(case):
    return f"{case[0]}:{case[1]}"


@pytest.mark.parametrize("case", ALL, ids=_id)
def test_every_integer_instruction_resolves_by_its_isa_spelling(case):
    arch, spelling, (m, k, a, b, sat, bitop) = case
    dp = mmasim.MMA(arch, spelling).datapath
    assert (dp.m[0] if len(dp.m) == 1 else m) == m and m in dp.m
    assert (dp.k, dp.a, dp.b, dp.c, dp.d, dp.saturate) == (k, a, b, "s32", "s32", sat)
    assert dp.accumulator == "integer"
    assert dp.rounding == ("s32-sat" if sat else "s32-wrap")
    assert (dp.parameters.get("bitop"), dp.qualifiers) == (
        ("xor" if bitop == "xor" else None), ((bitop, "popc") if bitop else ()))
    assert dp.status.kind == "assumed" and "not measured" in dp.status.evidence
    assert "exact integer arithmetic per the" in dp.status.evidence


def test_the_integer_instruction_set_is_exactly_the_isa_list():
    """No integer datapath beyond the ISA's list (and the B200's measured kind::i8)."""
    expected = {}
    for arch, spelling, _ in ALL:
        expected.setdefault(arch, set()).add(mmasim.MMA(arch, spelling).datapath)
    for arch in list(NVIDIA) + ["CDNA1", "CDNA2", "CDNA3"]:
        have = {dp for dp in mmasim.datapaths(arch)
                if dp.accumulator == "integer" and dp.op != "tcgen05.mma" and not dp.sparse}   # sparse: test_sparse_mma
        assert have == expected[arch], arch


@pytest.mark.parametrize("arch,spelling,why", [
    ("Turing", "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.and.popc", ".and.popc needs sm_80"),
    ("Turing", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "m16n8k32 needs sm_80"),
    ("Turing", "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32", "m16n8k64 needs sm_80"),
    ("Volta", "mma.sync.aligned.m8n8k16.row.col.s32.s8.s8.s32", "integer mma needs sm_75"),
    ("A100", "mma.sync.aligned.m16n8k256.row.col.satfinite.s32.b1.b1.s32.and.popc", "b1 takes no .satfinite"),
    ("A100", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s4.s32", "s8 x s4 mixes sizes"),
    ("H100", "wgmma.mma_async.sync.aligned.m64n40k32.s32.s8.s8", "N = 40 is not an integer wgmma shape"),
    ("MI300X", "v_mfma_i32_32x32x8i8", "CDNA3 dropped 32x32x8i8"),
])
def test_forms_the_isa_does_not_define_are_rejected(arch, spelling, why):
    with pytest.raises(mmasim.MMAError):
        mmasim.MMA(arch, spelling)


@pytest.mark.parametrize("spelling,match", [
    ("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32", "xor.popc or .and.popc"),
    ("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.popc", "xor.popc or .and.popc"),
    ("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and", "xor.popc or .and.popc"),
    ("mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.xor.popc", "both set"),
    ("mma.sync.aligned.m16n8k32.row.row.s32.s8.s8.s32", "only .row.col"),
])
def test_malformed_integer_spellings_name_the_problem(spelling, match):
    with pytest.raises(mmasim.UnknownInstruction, match=match):
        mmasim.MMA("A100", spelling)


def test_satfinite_may_sit_anywhere_ptx_or_mma_sim_puts_it():
    """PTX writes .satfinite after .row.col (mma) or before .s32 (wgmma); both read the same."""
    one = mmasim.MMA("A100", "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32").datapath
    assert mmasim.MMA("A100", "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32.satfinite").datapath == one
    assert mmasim.MMA("A100", "m16n8k32.s32.u8.s8.s32", saturate=True).datapath == one


# ------------------------------------------------------------------ arithmetic
def _random_words(rng, fmt, shape):
    return rng.integers(0, 1 << BITS[fmt], size=shape, dtype=np.uint64)


def _edge_rows(a_fmt, b_fmt, k, rng):
    """All-extreme operands and C near +-2^31: the wrap and clamp edges."""
    lo = {"s8": 0x80, "s4": 0x8, "u8": 0, "u4": 0, "b1": 0}
    hi = {"s8": 0x7F, "s4": 0x7, "u8": 0xFF, "u4": 0xF, "b1": 1}
    rows = []
    for a_word in (lo[a_fmt], hi[a_fmt]):
        for b_word in (lo[b_fmt], hi[b_fmt]):
            for c in (0x7FFFFFFF, 0x7FFFFF00, 0x80000000, 0x80000100, 0xFFFFFFFF, 0, 1):
                rows.append(([a_word] * k, [b_word] * k, c))
    # a sum that crosses 2^31 exactly by one, either way
    for c in (0x7FFFFFFF, 0x80000000):
        a = _random_words(rng, a_fmt, k)
        b = _random_words(rng, b_fmt, k)
        rows.append((list(a), list(b), c))
    return rows


# one representative per (type pair family, shape kind) for the arithmetic, on the archs that have it
ARITH = [c for c in ALL if c[0] in ("Turing", "Ampere", "Hopper", "RTX Blackwell", "CDNA1", "CDNA3")]


@pytest.mark.parametrize("case", ARITH, ids=_id)
def test_dot_equals_the_python_integer_oracle(case):
    arch, spelling, (m, k, a_fmt, b_fmt, sat, bitop) = case
    model = mmasim.MMA(arch, spelling)
    rng = np.random.default_rng(zlib.crc32(spelling.encode()))
    n = 64
    A = _random_words(rng, a_fmt, (n, k))
    B = _random_words(rng, b_fmt, (n, k))
    C = rng.integers(0, 1 << 32, size=n, dtype=np.uint64)
    edges = _edge_rows(a_fmt, b_fmt, k, rng)
    A = np.concatenate([A, np.array([e[0] for e in edges], dtype=np.uint64)])
    B = np.concatenate([B, np.array([e[1] for e in edges], dtype=np.uint64)])
    C = np.concatenate([C, np.array([e[2] for e in edges], dtype=np.uint64)])
    D = model.dot(A, B, C, backend="numpy")
    want = [oracle(A[i], B[i], C[i], a_fmt, b_fmt, sat, bitop) for i in range(len(C))]
    assert [int(x) for x in D] == want


def test_wrap_and_saturation_edges_by_hand():
    """Hand-worked: 32 x (127 * 127) = 516,128 on C = 2^31 - 1 - 516,127 is 2^31 exactly:
    it wraps to 0x80000000 and saturates to 0x7FFFFFFF; 32 x (-128 * 127) on C = -2^31
    wraps to 2^31 - 520,192 and saturates to 0x80000000."""
    wrap = mmasim.MMA("A100", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
    sat = mmasim.MMA("A100", "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32")
    c = (1 << 31) - 1 - 516127
    assert int(wrap.dot([0x7F] * 32, [0x7F] * 32, c)) == 0x80000000
    assert int(sat.dot([0x7F] * 32, [0x7F] * 32, c)) == 0x7FFFFFFF
    assert int(sat.dot([0x7F] * 32, [0x7F] * 32, c - 1)) == 0x7FFFFFFF
    assert int(wrap.dot([0x80] * 32, [0x7F] * 32, 0x80000000)) == (1 << 31) - 520192
    assert int(sat.dot([0x80] * 32, [0x7F] * 32, 0x80000000)) == 0x80000000
    # u8 x u8: 32 x 255 x 255 = 2,080,800, from C = 0
    u = mmasim.MMA("A100", "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32")
    assert int(u.dot([0xFF] * 32, [0xFF] * 32, 0)) == 2080800
    # s4: 0x8 is -8, 0x7 is 7: 64 x (-8 * 7) = -3,584
    s4 = mmasim.MMA("A100", "mma.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32")
    assert int(s4.dot([0x8] * 64, [0x7] * 64, 0)) == (-3584) & 0xFFFFFFFF
    u4 = mmasim.MMA("A100", "mma.sync.aligned.m16n8k64.row.col.s32.u4.s4.s32")
    assert int(u4.dot([0xF] * 64, [0x8] * 64, 0)) == (64 * 15 * -8) & 0xFFFFFFFF


def _bits(x: int, k: int):
    return [(x >> j) & 1 for j in range(k)]


@pytest.mark.parametrize("op", ["and", "xor"])
@pytest.mark.parametrize("k,shape", [(128, "m8n8k128"), (128, "m16n8k128"), (256, "m16n8k256")])
def test_b1_is_c_plus_the_bit_count_of_and_or_xor(op, k, shape):
    """PTX: the k-bit row of A and column of B are combined by AND / XOR, the set bits are
    counted (popc) and added to C."""
    model = mmasim.MMA("A100", f"mma.sync.aligned.{shape}.row.col.s32.b1.b1.s32.{op}.popc")
    rng = np.random.default_rng(k + len(op))
    for _ in range(50):
        x, y = int(rng.integers(0, 1 << 62)) << 66 | int(rng.integers(0, 1 << 62)), \
            int(rng.integers(0, 1 << 62)) << 66 | int(rng.integers(0, 1 << 62))
        x, y = x & ((1 << k) - 1), y & ((1 << k) - 1)
        c = int(rng.integers(0, 1 << 32))
        count = bin(x & y if op == "and" else x ^ y).count("1")
        assert int(model.dot(_bits(x, k), _bits(y, k), c)) == (c + count) & 0xFFFFFFFF
    # all ones: AND counts k, XOR counts 0; ones against zeros: AND 0, XOR k; wrap at the top
    ones, zeros = [1] * k, [0] * k
    assert int(model.dot(ones, ones, 0)) == (k if op == "and" else 0)
    assert int(model.dot(ones, zeros, 0)) == (0 if op == "and" else k)
    assert int(model.dot(ones, zeros if op == "xor" else ones, 0xFFFFFFFF)) == k - 1


def test_b1_words_must_be_bits():
    model = mmasim.MMA("A100", "mma.sync.aligned.m16n8k128.row.col.s32.b1.b1.s32.xor.popc")
    with pytest.raises(mmasim.MMAError, match="1-bit"):
        model.dot([2] + [0] * 127, [0] * 128, 0)
    s4 = mmasim.MMA("A100", "mma.sync.aligned.m16n8k32.row.col.s32.s4.s4.s32")
    with pytest.raises(mmasim.MMAError, match="4-bit"):
        s4.dot([0x10] + [0] * 31, [0] * 32, 0)


# ------------------------------------------------------------------ matrix form, gemm, backends
FAMILY = [
    ("Ampere", "mma.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.s8.s32", "u8", "s8", True, None),
    ("Turing", "mma.sync.aligned.m8n8k32.row.col.s32.s4.u4.s32", "s4", "u4", False, None),
    ("Hopper", "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.and.popc", "b1", "b1", False, "and"),
    ("Turing", "mma.sync.aligned.m8n8k128.row.col.s32.b1.b1.s32.xor.popc", "b1", "b1", False, "xor"),
    ("H100", "wgmma.mma_async.sync.aligned.m64n16k32.satfinite.s32.s8.u8", "s8", "u8", True, None),
    ("MI100", "v_mfma_i32_16x16x16i8", "s8", "s8", False, None),
    ("MI300X", "v_mfma_i32_32x32x16_i8", "s8", "s8", False, None),
    ("B200", "tcgen05.mma.cta_group::2.kind::i8.m256n32k32.s32.s8.u8", "s8", "u8", False, None),
    ("B200", "tcgen05.mma.ws.kind::i8.m32n64k32.satfinite.s32.u8.u8", "u8", "u8", True, None),
]


def _shape(model):
    dp = model.datapath
    if model.shape is not None:
        return model.shape
    return dp.m[0], dp.n[0]


@pytest.mark.parametrize("case", FAMILY, ids=lambda c: f"{c[0]}:{c[1]}")
def test_matrix_form_and_gemm_equal_the_oracle(case):
    arch, spelling, a_fmt, b_fmt, sat, bitop = case
    model = mmasim.MMA(arch, spelling)
    M, N = _shape(model)
    K = model.k
    rng = np.random.default_rng(M * N + K)
    A = _random_words(rng, a_fmt, (M, K))
    B = _random_words(rng, b_fmt, (K, N))
    C = rng.integers(0, 1 << 32, size=(M, N), dtype=np.uint64)
    C[0, :] = 0x7FFFFFF0                                       # near the top: the first row may clamp
    D = model(A, B, C, backend="numpy")
    for i in range(M):
        for j in range(0, N, max(1, N // 8)):
            assert int(D[i, j]) == oracle(A[i], B[:, j], C[i, j], a_fmt, b_fmt, sat, bitop), (i, j)
    if sat:
        return      # gemm of a saturating instruction clamps per tile; the wrap form is exact
    A2 = _random_words(rng, a_fmt, (M, 3 * K))
    B2 = _random_words(rng, b_fmt, (3 * K, N))
    G = mmasim.gemm(A2, B2, C, model=model)
    for i in range(0, M, max(1, M // 4)):
        for j in range(0, N, max(1, N // 4)):
            assert int(G[i, j]) == oracle(A2[i], B2[:, j], C[i, j], a_fmt, b_fmt, False, bitop), (i, j)


@pytest.mark.parametrize("case", FAMILY, ids=lambda c: f"{c[0]}:{c[1]}")
def test_numpy_and_numba_backends_agree(case):
    arch, spelling, a_fmt, b_fmt, sat, bitop = case
    model = mmasim.MMA(arch, spelling)
    rng = np.random.default_rng(7)
    K = model.k
    A = _random_words(rng, a_fmt, (200, K))
    B = _random_words(rng, b_fmt, (200, K))
    C = rng.integers(0, 1 << 32, size=200, dtype=np.uint64)
    C[:20] = 0x7FFFFFFF
    C[20:40] = 0x80000000
    assert np.array_equal(model.dot(A, B, C, backend="numpy"), model.dot(A, B, C, backend="numba"))


@pytest.mark.parametrize("op", ["and", "xor"])
@pytest.mark.parametrize("shape", ["m8n8k128", "m16n8k128", "m16n8k256"])
def test_b1_popc_is_the_bit_count_on_both_backends(op, shape):
    """b1 .and.popc / .xor.popc: C + popc(a AND / XOR b), wrapped to 32 bits, on numpy and
    on the compiled kernel (which must compute it, not hand it to numpy)."""
    pytest.importorskip("numba")
    from mmasim import backends
    model = mmasim.MMA("A100", f"mma.sync.aligned.{shape}.row.col.s32.b1.b1.s32.{op}.popc")
    assert backends.kernel_coverage(model) == "compiled"
    k = model.k
    rng = np.random.default_rng(k + 3 * len(op))
    A = _random_words(rng, "b1", (100, k))
    B = _random_words(rng, "b1", (100, k))
    A[0], B[0] = 1, 0                               # XOR counts k, AND 0
    A[1], B[1] = 1, 1                               # AND counts k, XOR 0
    C = rng.integers(0, 1 << 32, size=100, dtype=np.uint64)
    C[:4] = 0xFFFFFFFF                              # -1 + count: wraps through 0
    want = [oracle(A[i], B[i], C[i], "b1", "b1", False, op) for i in range(100)]
    for backend in ("numpy", "numba"):
        assert [int(x) for x in model.dot(A, B, C, backend=backend)] == want, backend


def test_numba_compiles_every_integer_datapath():
    """No integer datapath (s8 / u8 / s4 / u4 / b1 AND and XOR, wrap and .satfinite, every
    architecture) falls back to numpy under the numba backend."""
    pytest.importorskip("numba")
    from mmasim import backends
    from mmasim.execution.model import Model
    from mmasim.registry.build import get_registry
    reg = get_registry()
    seen, uncovered = 0, []
    for arch in reg.architectures.values():
        for dp in arch.datapaths:
            if dp.accumulator != "integer":
                continue
            seen += 1
            model = Model(dp, reg)
            why = backends.kernel_coverage(model)
            if why != "compiled":
                uncovered.append(f"{arch.name} {model.instruction}: {why}")
    assert seen > 0 and not uncovered, uncovered


# ------------------------------------------------------------------ tcgen05 cta_group::2 / .ws
@pytest.mark.parametrize("kind,kw", [
    ("tf32", dict(a_type="tf32", b_type="tf32")),
    ("f16", dict(a_type="bf16", b_type="bf16", d_type="f32")),
    ("f8f6f4", dict(a_type="e4m3", b_type="e2m1", d_type="f32")),
    ("i8", dict(a_type="s8", b_type="u8")),
])
@pytest.mark.parametrize("qualifier", ["cta_group::2", "ws"])
def test_tcgen05_pair_and_ws_forms_compute_as_cta_group_1(kind, kw, qualifier):
    """Same per-element arithmetic as the measured cta_group::1 datapath (by analogy: assumed)."""
    plain = mmasim.MMA("B200", f"tcgen05.mma.cta_group::1.kind::{kind}", **kw)
    other = mmasim.MMA("B200", f"tcgen05.mma.{qualifier}.kind::{kind}", **kw)
    assert other.datapath.status.kind == "assumed"
    assert other.datapath.status.evidence == "same per-element arithmetic as cta_group::1 assumed; not measured"
    assert other.datapath.m == ((128, 256) if qualifier == "cta_group::2" else (32, 64, 128))
    rng = np.random.default_rng(3)
    A = rng.integers(0, 1 << plain.a_format.container_bits, size=(300, plain.k), dtype=np.uint64)
    B = rng.integers(0, 1 << plain.b_format.container_bits, size=(300, plain.k), dtype=np.uint64)
    C = rng.integers(0, 1 << plain.c_format.container_bits, size=300, dtype=np.uint64)
    assert np.array_equal(plain.dot(A, B, C, backend="numpy"), other.dot(A, B, C, backend="numpy"))


def test_tcgen05_pair_form_takes_its_own_shapes():
    pair = mmasim.MMA("B200", "tcgen05.mma.cta_group::2.kind::tf32.m256n64k8.f32.tf32.tf32")
    assert pair.shape == (256, 64)
    with pytest.raises(mmasim.MMAError):
        mmasim.MMA("B200", "tcgen05.mma.cta_group::2.kind::tf32.m64n64k8.f32.tf32.tf32")
    with pytest.raises(mmasim.MMAError):
        mmasim.MMA("B200", "tcgen05.mma.ws.kind::tf32.m128n8k8.f32.tf32.tf32")
    # the pair's accumulator spans both CTAs' Tensor Memory: 2 x 128 lanes, one row of D
    # per lane, N 32-bit columns (PTX ISA tcgen05 "Matrix fragments", layout A for M = 256)
    d = pair.layout("d")
    assert (d.lanes, d.elements) == (256, 64)
    assert len({d.coords(lane, 0)[0] for lane in range(256)}) == 256


def test_tcgen05_pair_and_ws_are_never_labelled_hardware():
    for arch in ("Blackwell", "Blackwell Ultra"):
        for dp in mmasim.datapaths(arch):
            if dp.qualifiers:
                assert dp.status.kind == "assumed", dp


# ------------------------------------------------------------------ CLI
def test_list_and_explain_show_the_integer_instructions(capsys):
    assert main(["list", "A100"]) == 0
    out = capsys.readouterr().out
    assert "mma.sync.m16n8k256.s32.b1.b1.and.popc" in out and "mma.sync.m16n8k32.s32.u8.s8.satfinite" in out
    assert main(["list", "MI300X"]) == 0
    assert "v_mfma.m16n16k32.s32.s8.s8" in capsys.readouterr().out
    assert main(["explain", "A100", "mma.sync.aligned.m16n8k256.row.col.s32.b1.b1.s32.xor.popc"]) == 0
    out = capsys.readouterr().out
    assert "b1" in out and "assumed" in out and "integer" in out
    assert main(["explain", "H100", "wgmma.mma_async.m64n8k32.satfinite.s32.s8.s8"]) == 0
    out = capsys.readouterr().out
    assert "s32-sat" in out
    assert main(["explain", "B200", "tcgen05.mma.cta_group::2.kind::tf32"]) == 0
    assert "same per-element arithmetic as cta_group::1" in capsys.readouterr().out


def test_tcgen05_pair_and_ws_shapes():
    """PTX tcgen05.mma shapes (Table 39): cta_group::2 M = 128 / 256 with N = 16..256 in steps
    of 16 (.kind::i8: 32..256 in steps of 32); .ws M = 32 / 64 / 128 with N = 64, 128, 256."""
    pair = mmasim.MMA("B200", "tcgen05.mma.cta_group::2.kind::f16", a_type="f16", b_type="f16", d_type="f32")
    assert pair.datapath.n == tuple(range(16, 257, 16))
    pair_i8 = mmasim.MMA("B200", "tcgen05.mma.cta_group::2.kind::i8.s32.s8.s8")
    assert pair_i8.datapath.n == tuple(range(32, 257, 32))
    ws = mmasim.MMA("B200", "tcgen05.mma.ws.kind::f16", a_type="f16", b_type="f16", d_type="f32")
    assert (ws.datapath.m, ws.datapath.n) == ((32, 64, 128), (64, 128, 256))
    with pytest.raises(mmasim.MMAError):
        mmasim.MMA("B200", "tcgen05.mma.cta_group::2.kind::tf32.m128n40k8.f32.tf32.tf32")
