"""Lane and register layouts of CDNA3 v_smfmac (the compressed A, B, D and the compression
index) and of the four-block v_mfma_f64_4x4x4_4b_f64, from the AMD Matrix Instruction
Calculator (ROCm/amd_matrix_instruction_calculator 1.3.2, --architecture cdna3 --detail-instruction,
"Matrix element to register mapping with no modifiers"), whose lines are quoted per case.
The calculator indexes the sparse A by the logical K: A[i][k] is the register that holds
the stored elements of k's four-wide chunk; mmasim's A is the compressed A (M x K/2), whose
column 2c + j is the j-th stored element of chunk c."""

import numpy as np
import pytest

import mmasim
from mmasim.placement import compress, metadata_words
from wordgen import words


@pytest.mark.parametrize("ins,M,a,b,d,k", [
    # v_smfmac_f32_16x16x32_f16: A[i][k] GPR (floor(k / 4) % 2), Lane 16 * floor(k / 8) + i;
    # compression[i][k] GPR 0.[4*(floor(k / 4) % 2)+3 : 4*(floor(k / 4) % 2)], Lane 16 * floor(k / 8) + i;
    # B k: 8 * floor(lane / 16) + 2 * GPR_num + floor(GPR_bits / 16), B j: lane % 16;
    # D[i][j] GPR (i % 4), Lane 16 * floor(i / 4) + j
    ("v_smfmac.sp.m16n16k32.f32.f16.f16", 16,
     lambda i, k: (16 * (k // 8) + i, (k // 4) % 2),
     lambda lane, gpr, bit: (8 * (lane // 16) + 2 * gpr + bit // 16, lane % 16),
     lambda i, j: (16 * (i // 4) + j, i % 4),
     lambda i, k: (16 * (k // 8) + i, 4 * ((k // 4) % 2))),
    # v_smfmac_f32_32x32x16_bf16: A[i][k] GPR (floor(k / 4) % 2), Lane 32 * floor(k / 8) + i; compression
    # Lane 32 * floor(k / 8) + i, bits 4*(floor(k / 4) % 2); B k: 8 * floor(lane / 32) + 2 * GPR_num +
    # floor(GPR_bits / 16); D[i][j] GPR 4 * floor(i / 8) + (i % 4), Lane (32 * floor(i / 4)) % 64 + j
    ("v_smfmac.sp.m32n32k16.f32.bf16.bf16", 32,
     lambda i, k: (32 * (k // 8) + i, (k // 4) % 2),
     lambda lane, gpr, bit: (8 * (lane // 32) + 2 * gpr + bit // 16, lane % 32),
     lambda i, j: ((32 * (i // 4)) % 64 + j, 4 * (i // 8) + i % 4),
     lambda i, k: (32 * (k // 8) + i, 4 * ((k // 4) % 2))),
    # v_smfmac_i32_16x16x64_i8: A[i][k] GPR (floor(k / 8) % 2).[16*(floor(k / 4) % 2)+15 : ...],
    # Lane 16 * floor(k / 16) + i; compression 0.[4*(floor(k / 4) % 4)+3 : ...], Lane 16 * floor(k / 16) + i;
    # B k: 16 * floor(lane / 16) + 4 * GPR_num + floor(GPR_bits / 8); D as 16x16
    ("v_smfmac.sp.m16n16k64.s32.s8.s8", 16,
     lambda i, k: (16 * (k // 16) + i, (k // 8) % 2, 16 * ((k // 4) % 2)),
     lambda lane, gpr, bit: (16 * (lane // 16) + 4 * gpr + bit // 8, lane % 16),
     lambda i, j: (16 * (i // 4) + j, i % 4),
     lambda i, k: (16 * (k // 16) + i, 4 * ((k // 4) % 4))),
    # v_smfmac_f32_32x32x32_fp8_bf8: A Lane 32 * floor(k / 16) + i, GPR (floor(k / 8) % 2), half
    # 16*(floor(k / 4) % 2); compression Lane 32 * floor(k / 16) + i, bits 4*(floor(k / 4) % 4);
    # B k: 16 * floor(lane / 32) + 4 * GPR_num + floor(GPR_bits / 8); D as 32x32
    ("v_smfmac.sp.m32n32k32.f32.e4m3fnuz.e5m2fnuz", 32,
     lambda i, k: (32 * (k // 16) + i, (k // 8) % 2, 16 * ((k // 4) % 2)),
     lambda lane, gpr, bit: (16 * (lane // 32) + 4 * gpr + bit // 8, lane % 32),
     lambda i, j: ((32 * (i // 4)) % 64 + j, 4 * (i // 8) + i % 4),
     lambda i, k: (32 * (k // 16) + i, 4 * ((k // 4) % 4))),
])
def test_amd_calculator_smfmac_mappings(ins, M, a, b, d, k):
    """Every element of A (both stored elements of each chunk), B, D and the compression index
    (ABID 0) sits where the calculator's mapping says."""
    m = mmasim.MMA("MI300X", ins)
    La, Lb, Ld, Lk = m.layout("a"), m.layout("b"), m.layout("d"), m.layout("sparse_metadata")
    K = m.datapath.k
    assert (La.rows, La.cols, Lk.cols) == (M, K // 2, K // 4)
    for i in range(M):
        for kk in range(K):
            want = a(i, kk)
            for j in range(2):                       # the chunk's two stored elements
                lane, e = La.owner(i, 2 * (kk // 4) + j)
                reg, bit = La.register(e)
                assert (lane, reg) == want[:2], (i, kk, j)
                if len(want) == 3:                   # 8-bit: the 16-bit half of the register
                    assert want[2] <= bit < want[2] + 16
            lane, e = Lk.owner(i, kk // 4)
            assert (lane, Lk.register(e)) == (k(i, kk)[0], (0, k(i, kk)[1]))
        for j in range(M):
            lane, e = Ld.owner(i, j)
            assert (lane, Ld.register(e)[0]) == d(i, j)
    for lane in range(64):
        for e in range(Lb.elements):
            reg, bit = Lb.register(e)
            assert Lb.coords(lane, e) == b(lane, reg, bit)


@pytest.mark.parametrize("ins,sets,shift", [("v_smfmac.sp.m16n16k32.f32.f16.f16", 4, 8),
                                           ("v_smfmac.sp.m32n32k32.s32.s8.s8", 2, 16)])
def test_amd_smfmac_abid_picks_the_compression_index_set(ins, sets, shift):
    """Calculator (CDNA3): "For sparse matrices on 16b values, a non-zero CBSZ[1:0] causes ABID[1:0] to
    choose the compression index set. For 8b sparse matrices ... ABID[0]"; with CBSZ 0 the set
    ABID starts at bit 8 * ABID (16-bit, four sets) or 16 * ABID (8-bit, two sets), e.g.
    v_smfmac_f32_16x16x32_f16 --abid 1: K[3][12] = v0{19}.[15:12].  mmasim's selector is ABID."""
    m = mmasim.MMA("MI300X", ins)
    base = m.layout("sparse_metadata")
    for s in range(sets):
        L = m.layout("sparse_metadata", selector=s)
        for r in range(L.rows):
            for c in range(L.cols):
                lane, e = L.owner(r, c)
                lane0, e0 = base.owner(r, c)
                assert lane == lane0 and L.register(e)[1] == base.register(e0)[1] + shift * s
    with pytest.raises(mmasim.OperandError, match="not a valid selector value"):
        m.layout("sparse_metadata", selector=sets)
    L = mmasim.MMA("MI300X", "v_smfmac.sp.m16n16k32.f32.f16.f16").layout("sparse_metadata", selector=1)
    assert L.owner(3, 12 // 4) == (19, 3) and L.register(3) == (0, 12)


def test_amd_calculator_f64_4x4x4_four_blocks():
    """v_mfma_f64_4x4x4_4b_f64: A[i][k].block Lane 4 * block + 16 * k + i, B[k][j].block Lane
    4 * block + 16 * k + j, C or D[i][j].block Lane 16 * (i % 4) + 4 * block + j; GPR [1:0]
    (one 64-bit register pair) each.  mmasim stacks the blocks along rows."""
    m = mmasim.MMA("MI300X", "v_mfma.m4n4k4.f64.f64.f64")
    La, Lb, Ld = m.layout("a"), m.layout("b"), m.layout("d")
    assert La.blocks == Lb.blocks == Ld.blocks == 4 and La.registers == 2
    for blk in range(4):
        for i in range(4):
            for k in range(4):
                assert La.owner(4 * blk + i, k) == (4 * blk + 16 * k + i, 0)
                assert Lb.owner(4 * blk + k, i) == (4 * blk + 16 * k + i, 0)
                assert Ld.owner(4 * blk + i, k) == (16 * (i % 4) + 4 * blk + k, 0)


@pytest.mark.parametrize("ins", ["v_smfmac.sp.m32n32k16.f32.f16.f16", "v_smfmac.sp.m16n16k64.f32.e5m2fnuz.e4m3fnuz"])
def test_smfmac_warp_equals_matrix_form_on_both_backends(ins):
    """warp() on the compressed A, B, C and the compression index (ABID 1) equals the matrix form."""
    pytest.importorskip("numba")
    m = mmasim.MMA("MI300X", ins)
    rng = np.random.default_rng(9)
    M, K = m.legal_m[0], m.datapath.k
    A = words(m.a_format, (M, K), rng, "mixed")
    B = words(m.b_format, (K, M), rng, "mixed")
    C = words(m.c_format, (M, M), rng, "mixed")
    rule = m.sparse_rule
    md = metadata_words(rng.choice(sorted(rule.selectors), size=(M, rule.chunks(K))))
    regs = (m.fragments("a", compress(m.placement, A, md)), m.fragments("b", B), m.fragments("c", C))
    e = m.fragments("sparse_metadata", md, selector=1)
    for backend in ("numpy", "numba"):
        d = m.warp(*regs, sparse_metadata=e, sparsity_selector=1, backend=backend)
        assert np.array_equal(m.unfragment("d", d), m(A, B, C, sparse_metadata=md, backend=backend)), backend
