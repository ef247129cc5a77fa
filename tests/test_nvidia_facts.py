"""NVIDIA mma.sync / wgmma facts (docs/datapaths.md sections 3, 4, 5, 7).

One test per fact, named for it.  Expected words come from the hardware
measurements of T2 (docs/datapaths.md, sources), from MMA-Sim 2.1.1's published parameters (P),
or from the arithmetic worked by hand in the comments -- never from running
mmasim.
"""

import pytest

import mmasim
from helpers import f16, f32

ONE16 = f16(1.0)
E4M3_ONE = 0x38
UE8M0_ONE = 0x7F


def pad(xs, k, fill=0):
    return list(xs) + [fill] * (k - len(xs))


# ------------------------------------------------------------ section 3, T2
def test_turing_m8n8k4_uses_volta_F23_minimal_case():
    # T2: a = (-2^13, -0.5, -0.25, -0.125), b = (2^10, 1, 1, 1), c = 2^23.
    # Window E = 23; F = 23 gives quantum 2^0 and drops every small product: +0.
    # (F = 24 keeps -0.5: 0xbf000000, MMA-Sim's old Turing answer.)
    a = [f16(-(2.0**13)), f16(-0.5), f16(-0.25), f16(-0.125)]
    b = [f16(2.0**10), ONE16, ONE16, ONE16]
    m = mmasim.MMA("RTX 2060", "m8n8k4.f32.f16.f16.f32")
    assert int(m.dot(a, b, f32(2.0**23))) == 0x00000000


@pytest.mark.parametrize("instruction,c,minus", [
    ("m8n8k4.f32.f16.f16.f32", f32(2.0**15), 0xBB000000),
    ("m8n8k4.f32.f16.f16.f16", f16(2.0**15), 0xBB000000),
    ("m8n8k4.f16.f16.f16.f16", f16(2.0**15), 0x9800),
])
def test_turing_m8n8k4_all_three_variants_use_F23(instruction, c, minus):
    # p0 = -2^5 * 2^10 = -2^15 cancels c = 2^15; p1 = -2^-9 = -2^(15-24).
    # F = 23: quantum 2^-8, p1 truncates to 0 -> +0.  F = 24 would keep -2^-9 (`minus`).
    a = [f16(-(2.0**5)), f16(-(2.0**-9)), 0, 0]
    b = [f16(2.0**10), ONE16, 0, 0]
    for arch in ("Turing", "Volta"):
        d = int(mmasim.MMA(arch, instruction).dot(a, b, c))
        assert d == 0 and d != minus
    params = mmasim.MMA("T4", instruction).datapath
    assert params.parameters["F"] == 23 and params.chunk == 4


def test_turing_m16n8k8_keeps_turing_F24():
    # T2: Turing's own m16n8k8 matches MMA-Sim (F = 24): the same cancellation keeps -2^-9.
    a = pad([f16(-(2.0**5)), f16(-(2.0**-9))], 8)
    b = pad([f16(2.0**10), ONE16], 8)
    assert int(mmasim.MMA("RTX 2060", "m16n8k8.f32.f16.f16.f32").dot(a, b, f32(2.0**15))) == 0xBB000000
    assert int(mmasim.MMA("RTX 2060", "m16n8k8.f16.f16.f16.f16").dot(a, b, f16(2.0**15))) == 0x9800


@pytest.mark.parametrize("e", range(-14, -29, -1))
def test_turing_m8n8k4_zero_f16_c_keeps_every_product_bit(e):
    # T2 probe: a single product 2047*1025 * 2^(e-20) with C = +0 (f16) loses no bit.
    eb = -14 if e < -14 else 0
    ea = e - eb
    a = [((ea + 15) << 10) | 0x3FF, 0, 0, 0]
    b = [((eb + 15) << 10) | 0x001, 0, 0, 0]
    exact = 2047 * 1025 * 2.0 ** (e - 20)          # 22 significant bits: exact in f32
    assert int(mmasim.MMA("Turing", "m8n8k4.f32.f16.f16.f16").dot(a, b, 0)) == f32(exact)


def test_ampere_f16_mma_chains_two_steps_of_8():
    # Ampere L = 16 bytes: m16n8k16 f16 is two T-FDPA steps of 8, D rounded (RZ) in between.
    # step 1: 1 + 2^-24 -> 1.0; step 2: 1.0 + 2^-24 -> 1.0.  One window would give 1 + 2^-23.
    a = pad([ONE16, f16(2.0**-24)], 16)
    a[8] = f16(2.0**-24)
    b = [ONE16] * 16
    assert int(mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32").dot(a, b, 0)) == f32(1.0)
    # Hopper L = 32 bytes: one step of 16, F = 25 keeps both: 1 + 2^-23
    assert int(mmasim.MMA("H100", "m16n8k16.f32.f16.f16.f32").dot(a, b, 0)) == f32(1 + 2.0**-23)


@pytest.mark.parametrize("arch,instruction,b_one", [
    ("L40S", "m16n8k32.f32.e4m3.e4m3.f32", E4M3_ONE),
    ("L4", "m16n8k16.f32.e4m3.e5m2.f32", 0x3C),              # e5m2 1.0
    ("H100", "wgmma.mma_async.m64n8k32.f32.e4m3.e4m3", E4M3_ONE),
])
def test_ada_and_hopper_wgmma_fp8_use_F13_and_rz_e8m13(arch, instruction, b_one):
    m = mmasim.MMA(arch, instruction)
    k = m.k
    a = pad([E4M3_ONE], k)
    b = [b_one] * k
    # 1 + 2^-13 survives F = 13 and E8M13; 2^-14 is below the window: 1.0
    assert int(m.dot(a, b, f32(2.0**-13))) == f32(1 + 2.0**-13)
    assert int(m.dot(a, b, f32(2.0**-14))) == f32(1.0)
    # E8M13 truncates the f32 significand: 1 + 2^-13 + 2^-14 needs F >= 14
    assert m.datapath.rounding == "rz-e8m13"


def test_rtx_blackwell_fp8_without_kind_keeps_F25():
    # MMA-Sim applies F = 13 only on Ada; RTX Blackwell's fp8 mma.sync is F = 25, RZ-F32.
    m = mmasim.MMA("RTX 5090", "m16n8k32.f32.e4m3.e4m3.f32")
    a = pad([E4M3_ONE], 32)
    assert int(m.dot(a, [E4M3_ONE] * 32, f32(2.0**-14))) == f32(1 + 2.0**-14)


def test_zero_terms_count_with_e_zero_in_mma_sync():
    # P: zero products and a zero C count with e_zero (-133 for f32 D on Hopper).
    # bf16: p0 = 2^-70 * 2^-70 = 2^-140, p1 = -2^-80 * 2^-80 = -2^-160, the rest zero.
    # E = max(-140, -160, -133) = -133, quantum 2^-158: p1 truncates to 0 -> 2^-140 (0x200).
    # Zeros left out of the window (E = -140) would keep p1: RZ(2^-140 - 2^-160) = 0x1FF.
    m = mmasim.MMA("H100", "m16n8k16.f32.bf16.bf16.f32")
    a = pad([0x1C80, 0x9780], 16)
    b = pad([0x1C80, 0x1780], 16)
    assert int(m.dot(a, b, 0)) == 0x200
    # f16 D, e_zero = -21: p0 = 2^-11 * 2^-14 = 2^-25, p1 = 2^-24 * 2^-24 = 2^-48.
    # E = -21, quantum 2^-46: p1 is cut, 2^-25 is an exact tie -> even -> +0
    # (without e_zero, 2^-25 + 2^-48 would round up to 0x0001).
    h = mmasim.MMA("H100", "m16n8k16.f16.f16.f16.f16")
    assert int(h.dot(pad([f16(2.0**-11), 0x0001], 16), pad([f16(2.0**-14), 0x0001], 16), 0)) == 0x0000


# ------------------------------------------------------------ section 5, T2
def test_ampere_m8n8k4_is_fmul_fadd_chain():
    # T2 (A100): ((((p0 + p1) + p2) + p3) + c) in f32 RNE.  p0 = 2^24, p1 = p2 = 1:
    # 2^24 + 1 is a tie -> 2^24 (even), twice.  A fused window would give 2^24 + 2.
    big = f16(4096.0)
    a = [big, ONE16, ONE16, 0]
    m = mmasim.MMA("A100", "m8n8k4.f32.f16.f16.f32")
    assert int(m.dot(a, a, 0)) == f32(2.0**24)
    # 2^24 + 3 is a tie between 2^24 + 2 (odd significand) and 2^24 + 4 (even): rounds up
    assert int(m.dot([big, f16(3.0), 0, 0], [big, ONE16, 0, 0], 0)) == f32(2.0**24 + 4)


def test_ampere_m8n8k4_adds_c_last():
    # (2^24 + 1) rounds to 2^24 before c = 1 is added: 2^24 again (c first would also tie).
    big = f16(4096.0)
    m = mmasim.MMA("Ampere", "m8n8k4.f32.f16.f16.f32")
    assert int(m.dot([big, ONE16, 0, 0], [big, ONE16, 0, 0], f32(1.0))) == f32(2.0**24)
    # c = -2^24 last cancels exactly the rounded sum: (2^24 + 1 -> 2^24) - 2^24 = 0
    assert int(m.dot([big, ONE16, 0, 0], [big, ONE16, 0, 0], f32(-(2.0**24)))) == 0


def test_ampere_m8n8k4_f16_c_is_the_same_chain():
    big = f16(4096.0)
    m = mmasim.MMA("A100", "m8n8k4.f32.f16.f16.f16")
    assert int(m.dot([big, ONE16, ONE16, 0], [big, ONE16, ONE16, 0], 0)) == f32(2.0**24)
    assert m.status.kind == "hardware" and m.status.device == "A100"


def test_ampere_m8n8k4_keeps_ieee_signed_zero():
    # IEEE: (-0) + (-0) = -0; products -0 * 1 and C = -0 give -0 (a fixed-point window gives +0)
    m = mmasim.MMA("A100", "m8n8k4.f32.f16.f16.f32")
    assert int(m.dot([0x8000] * 4, [ONE16] * 4, 0x80000000)) == 0x80000000


def test_ampere_m8n8k4_f16_d_refused():
    with pytest.raises(mmasim.UnsupportedDatapath, match="not measured"):
        mmasim.MMA("A100", "m8n8k4.f16.f16.f16.f16")


@pytest.mark.parametrize("arch", ["Ada Lovelace", "Hopper", "Blackwell", "RTX Blackwell"])
def test_m8n8k4_f16_is_a_tensor_core_instruction_only_on_volta_and_turing(arch):
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA(arch, "m8n8k4.f32.f16.f16.f32")


@pytest.mark.parametrize("arch,instruction", [
    ("A100", "m8n8k4.f64.f64.f64.f64"),
    ("H100", "m16n8k16.f64.f64.f64.f64"),
    ("RTX 5090", "m8n8k4.f64.f64.f64.f64"),
])
def test_f64_mma_is_an_exact_fma_chain(arch, instruction):
    # fma(1 + 2^-30, 1 - 2^-30, -1) = -2^-60 exactly; a rounded product (1.0) would give 0.
    m = mmasim.MMA(arch, instruction)
    hi, lo = 0x3FF0000000000000 | (1 << 22), 0x3FEFFFFFFFFFFFFF ^ ((1 << 23) - 1)
    assert m.datapath.accumulator == "fma"
    d = int(m.dot(pad([hi], m.k), pad([lo], m.k), 0xBFF0000000000000))
    assert d == 0xBC30000000000000                  # -2^-60


# ------------------------------------------------------------ section 7, T2
def f8f6f4(d="f32", a="e2m1", b="e4m3"):
    return mmasim.MMA("RTX 5070 Ti", f"m16n8k32.kind::f8f6f4.{d}.{a}.{b}.{d}")


def test_rtx_blackwell_e2m1_low_padding_bits_are_mantissa():
    # byte 0x07: bits 5:2 = 0001 (e2m1 0.5), bits 5:0 = 000111 (e2m3 7/8).  T2: 7/8.
    one = [E4M3_ONE] * 32
    assert int(f8f6f4().dot(pad([0x07], 32), one, 0)) == f32(0.875)
    assert int(f8f6f4("f16").dot(pad([0x07], 32), one, 0)) == f16(0.875)
    # 0x1B: bits 5:2 = 0110 (e2m1 4.0); as e2m3 011011 = 2^(3-1) * 1.375 = 5.5
    assert int(f8f6f4(b="e2m1", a="e4m3").dot(one, pad([0x1B], 32), 0)) == f32(5.5)


def test_rtx_blackwell_e2m1_bits_7_6_ignored():
    one = [E4M3_ONE] * 32
    m = f8f6f4()
    for hi in (0x00, 0x40, 0x80, 0xC0):
        assert int(m.dot(pad([hi | 0x24], 32), one, 0)) == f32(-0.5)   # 100100: -(4/8)


def test_rtx_blackwell_e2m1_zero_padding_agrees_with_the_ptx_reading():
    # With bits 1:0 = 0 the e2m3 reading is the e2m1 value of bits 5:2 (what MMA-Sim decodes).
    values = [0, 0.5, 1, 1.5, 2, 3, 4, 6]
    m = f8f6f4()
    for code, v in enumerate(values):
        assert int(m.dot(pad([code << 2], 32), [E4M3_ONE] * 32, 0)) == f32(v)


@pytest.mark.parametrize("fmt,code,expected", [("e3m2", 0x3C, -16.0), ("e2m3", 0x2F, -1.875)])
def test_rtx_blackwell_fp6_bits_7_6_ignored(fmt, code, expected):
    # e3m2 0x3C = 1.111.00: -(1.0) * 2^(7-3) = -16; e2m3 0x2F = 1.01.111: -(1 + 7/8) * 2^0
    m = mmasim.MMA("RTX PRO 6000", f"m16n8k32.kind::f8f6f4.f32.{fmt}.e4m3.f32")
    for hi in (0x00, 0x40, 0x80, 0xC0):
        assert int(m.dot(pad([hi | code], 32), [E4M3_ONE] * 32, 0)) == f32(expected)


def test_b200_tcgen05_keeps_the_ptx_e2m1_container():
    # The RTX Blackwell container rule is the rtx_blackwell plugin's: B200 reads bits 5:2.
    m = mmasim.MMA("B200", "tcgen05.mma.kind::f8f6f4", a_type="e2m1", b_type="e4m3", d_type="f32")
    assert int(m.dot(pad([0x07], 32), [E4M3_ONE] * 32, 0)) == f32(0.5)


def test_rtx_blackwell_f8f6f4_statuses_follow_T2():
    dps = [dp for dp in mmasim.datapaths("RTX Blackwell") if dp.kind == "f8f6f4" and not dp.sparse]  # dense (T2)
    assert len(dps) == 50
    for dp in dps:
        names = {dp.a.split(".")[0], dp.b.split(".")[0]}
        if "e2m1" in names:
            assert (dp.status.kind, dp.status.device, dp.status.cases) == ("hardware", "RTX 5070 Ti", 14200000)
        elif names & {"e3m2", "e2m3"}:
            assert (dp.status.kind, dp.status.cases) == ("hardware", 18900000)
        else:
            assert dp.status.kind == "peer"
    assert sum(dp.status.cases == 14200000 for dp in dps) == 18
    assert sum(dp.status.cases == 18900000 for dp in dps) == 24


# --------------------------------------------------- section 4 (P): scaled
def mxf4(kind="mxf4", scale="ue8m0", block=32):
    return mmasim.MMA("RTX 5090", f"m16n8k64.kind::{kind}.block{block}.f32.e2m1.e2m1.f32.{scale}")


def test_rtx_blackwell_mxf4_sums_each_group_of_16_exactly_before_truncating():
    # scale 2^40 on block 0: group 0 = 1 * 2^40, cancelled by C = -2^40.  Window E = 40,
    # F = 35: quantum 2^5.  Group 2 (block 1, scale 1) = 16 * 3.0 = 48 -> truncated to 32.
    # Truncating each product (3 < 32) would give +0.
    a = [0] * 64
    b = [0] * 64
    a[0], b[0] = 0x2, 0x2                          # 1.0 * 1.0
    for k in range(32, 48):
        a[k], b[k] = 0x5, 0x2                      # 3.0 * 1.0
    d = mxf4().dot(a, b, f32(-(2.0**40)), scale_a=[127 + 40, 127], scale_b=[127, 127])
    assert int(d) == f32(32.0)


def test_rtx_blackwell_mxf4_window_anchors_at_scale_exponents():
    # Groups 0 and 1 hold +0.25 and -0.25 (0.5 * 0.5) at scale 2^0: E = 0 (the scale's
    # exponent, not the products' -2), quantum 2^-35: C = 2^-36 is cut to 0 -> +0.
    a = [0] * 64
    a[0], a[16] = 0x1, 0x9
    b = [0] * 64
    b[0], b[16] = 0x1, 0x1
    assert int(mxf4().dot(a, b, f32(2.0**-36), scale_a=[UE8M0_ONE] * 2, scale_b=[UE8M0_ONE] * 2)) == 0


@pytest.mark.parametrize("kind,scale,block", [("mxf4", "ue8m0", 32), ("mxf4nvf4", "ue8m0", 16),
                                              ("mxf4nvf4", "ue4m3", 16)])
def test_rtx_blackwell_mxf4_all_zero_groups_count_with_e_zero_minus_139(kind, scale, block):
    # Every group all-zero: E = max(-139, r_c = -100) = -100, quantum 2^-135: C exact.
    one = UE8M0_ONE if scale == "ue8m0" else 0x38
    m = mxf4(kind, scale, block)
    n = 64 // block
    c = f32(2.0**-100)
    assert int(m.dot([0] * 64, [0] * 64, c, scale_a=[one] * n, scale_b=[one] * n)) == c


def test_rtx_blackwell_nvf4_zero_scale_product_counts_with_e_zero():
    # ue4m3 0x00 is a zero scale: the group counts with -139 and contributes 0; C survives.
    m = mxf4("mxf4nvf4", "ue4m3", 16)
    c = f32(2.0**-100)
    d = m.dot([0x2] * 64, [0x2] * 64, c, scale_a=[0x00] * 4, scale_b=[0x38] * 4)
    assert int(d) == c


def test_rtx_blackwell_mxf4_nan_scale_gives_canonical_nan():
    m = mxf4()
    assert int(m.dot([0] * 64, [0] * 64, 0, scale_a=[0xFF, UE8M0_ONE], scale_b=[UE8M0_ONE] * 2)) == 0x7FFFFFFF


def test_rtx_blackwell_mxf8f6f4_zero_products_count_with_e_zero():
    # ST-FDPA (P): with every product zero (e_zero = -133), C = 2^-120 sets E = -120 and
    # survives; so does the subnormal C = 2^-140 (r_c = -126, quantum 2^-151).
    m = mmasim.MMA("RTX 5090", "m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.f32.ue8m0")
    for c in (f32(2.0**-120), 1 << 9):
        assert int(m.dot([0] * 32, [0] * 32, c, scale_a=[UE8M0_ONE], scale_b=[UE8M0_ONE])) == c
    # products are scaled: 1 * 1 * 2^3 * 2^-1 = 4
    assert int(m.dot(pad([E4M3_ONE], 32), [E4M3_ONE] * 32, 0, scale_a=[130], scale_b=[126])) == f32(4.0)
