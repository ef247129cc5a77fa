"""The public API contract of DESIGN.md: lookup, dot, matrix form, typed arrays, describe."""

import ml_dtypes
import numpy as np
import pytest

import mmasim
from helpers import bf16, f16, f32, f32_value


def test_design_card_lookup_nvfp4():
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    assert m.datapath.scale == "ue4m3" and m.datapath.block == 16 and m.datapath.kind == "mxf4nvf4"


def test_mmasim_2_1_1_names_work_as_written():
    m = mmasim.MMA("Blackwell", "m128n8k16.kind::f16.f32.bf16.bf16")
    assert (m.datapath.a, m.datapath.b, m.datapath.d, m.datapath.k) == ("bf16", "bf16", "f32", 16)
    m = mmasim.MMA("Blackwell", "m128n256k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3")
    assert m.datapath.scale == "ue4m3"
    m = mmasim.MMA("Blackwell", "m128n64k32.kind::mxf8f6f4.block32.f32.e5m2.e2m1.ue8m0")
    assert (m.datapath.a, m.datapath.b) == ("e5m2", "e2m1")


def test_keyword_qualifiers_pick_among_datapaths():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::f8f6f4", a_type="e4m3", b_type="e2m1", d_type="f16")
    assert (m.datapath.a, m.datapath.b, m.datapath.d, m.datapath.c) == ("e4m3", "e2m1", "f16", "f16")
    assert m.encoding.key == "rne-f16"


@pytest.mark.parametrize("name", ["B200", "Blackwell", "sm_100a", "blackwell", "SM_100A", "GB200"])
def test_architecture_names(name):
    assert mmasim.MMA(name, "tcgen05.mma.kind::tf32").arch == "Blackwell"


def test_architectures_and_instructions():
    assert "Blackwell" in mmasim.architectures()
    names = mmasim.instructions("B200")
    assert "tcgen05.mma.kind::tf32.f32.tf32.tf32" in names
    # 25 type pairs x 2 D formats, and 2 x 2 types x wrap / satfinite, each as cta_group::1,
    # cta_group::2 and .ws
    one = [n for n in names if "cta_group::2" not in n and ".ws." not in n]
    assert len([n for n in one if "kind::f8f6f4" in n and ".sp." not in n]) == 50
    assert len([n for n in one if "kind::i8" in n and ".sp." not in n]) == 8
    assert len([n for n in names if "kind::f8f6f4" in n and ".sp." not in n]) == 3 * 50
    assert len([n for n in names if "kind::i8" in n and ".sp." not in n]) == 3 * 8


def test_every_listed_instruction_resolves_to_itself():
    for dp in mmasim.datapaths("B200"):
        name = dp.canonical(mmasim.get_registry().formats)
        assert mmasim.MMA("B200", name).datapath == dp


def test_dot_broadcasts_batches():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::f16.f32.f16.f16")
    a = np.full((3, 1, 16), f16(1.0))
    b = np.full((1, 4, 16), f16(2.0))
    c = np.array([f32(0.5)] * 4)
    d = m.dot(a, b, c)
    assert d.shape == (3, 4) and d.dtype == np.uint32
    assert np.all(d == f32(32.5))


def test_result_word_dtypes():
    assert mmasim.MMA("B200", "tcgen05.mma.kind::f16.f16.f16.f16").dot([0] * 16, [0] * 16, 0).dtype == np.uint16
    assert mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.s8").dot([0] * 32, [0] * 32, 0).dtype == np.uint32


def test_matrix_form_equals_dot_per_element():
    rng = np.random.default_rng(3)
    m = mmasim.MMA("B200", "m128n8k16.kind::f16.f32.bf16.bf16")
    A = rng.integers(0, 1 << 16, (128, 16))
    B = rng.integers(0, 1 << 16, (16, 8))
    C = rng.integers(0, 1 << 32, (128, 8))
    D = m(A, B, C)
    for i in (0, 1, 77, 127):
        for j in range(8):
            assert D[i, j] == m.dot(A[i], B[:, j], C[i, j])


def test_matrix_form_block_scaled_and_sparse():
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    A = np.full((128, 64), 0x2)         # 1.0 (kind::mxf4nvf4 is M = 128 only)
    B = np.full((64, 8), 0x2)
    sa = np.full((128, 4), 0x38)
    sb = np.full((4, 8), 0x40)          # 2.0
    D = m(A, B, np.zeros((128, 8), dtype=np.uint32), scale_a=sa, scale_b=sb)
    assert np.all(D == f32(128.0))
    s = mmasim.MMA("B200", "tcgen05.mma.sp.kind::tf32")
    A = np.full((64, 16), f32(1.0))
    B = np.full((16, 8), f32(1.0))
    D = s(A, B, np.zeros((64, 8), dtype=np.uint32), sparse_metadata=np.full((64, 1), 0x44444444))
    assert np.all(D == f32(8.0))


def test_typed_arrays_in_typed_out():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::f16.f32.f16.f16")
    a = np.full(16, 1.5, dtype=np.float16)
    b = np.full(16, 2.0, dtype=np.float16)
    d = m.dot(a, b, np.float32(1.0))
    assert d.dtype == np.float32 and float(d) == 49.0
    h = mmasim.MMA("B200", "tcgen05.mma.kind::f16.f16.f16.f16")
    assert h.dot(a, b, np.float16(1.0)).dtype == np.float16
    bf = mmasim.MMA("B200", "tcgen05.mma.kind::f16.f32.bf16.bf16")
    x = np.full(16, 3.0, dtype=ml_dtypes.bfloat16)
    assert float(bf.dot(x, x, np.float32(0))) == 144.0
    assert int(bf.dot(np.full(16, bf16(3.0)), np.full(16, bf16(3.0)), 0)) == f32(144.0)


def test_typed_ml_dtypes_fp8_fp6_fp4():
    for fmt, dtype in (("e4m3", ml_dtypes.float8_e4m3fn), ("e5m2", ml_dtypes.float8_e5m2),
                       ("e3m2", ml_dtypes.float6_e3m2fn), ("e2m3", ml_dtypes.float6_e2m3fn),
                       ("e2m1", ml_dtypes.float4_e2m1fn)):
        m = mmasim.MMA("B200", f"tcgen05.mma.kind::f8f6f4.f32.{fmt}.{fmt}")
        a = np.full(32, 1.5, dtype=dtype)
        d = m.dot(a, a, np.float32(0.25))
        assert d.dtype == np.float32 and float(d) == 32 * 2.25 + 0.25, fmt


def test_typed_integers():
    # int8 / int32 arrays are the s8 / s32 containers read as two's complement; D is s32 words
    m = mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.s8")
    a = np.full(32, -3, dtype=np.int8)
    d = m.dot(a, a, np.int32(-300))
    assert d.dtype == np.uint32 and int(d) == (32 * 9 - 300) % 2**32


def test_exactly_representable_floats_of_another_dtype_are_accepted():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::tf32")
    d = m.dot(np.ones(8), np.ones(8), 0.5)        # float64 values, exact in tf32 / f32
    assert float(d) == 8.5


def test_describe_names_composition_parameters_and_status():
    text = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X").describe()
    for needle in ("ue4m3", "e2m1", "window", "F=39", "scale_floor=35", "rz-f32", "hardware", "B200", "K: 64"):
        assert needle in text, needle
    assumed = mmasim.MMA("B200", "tcgen05.mma.sp.kind::f8f6f4.f16.e5m2.e3m2").describe()
    assert assumed.split("validation:")[1].strip().startswith("assumed")


def test_validation_status_of_the_46_t1_datapaths():
    """T1 lists 46 validated datapaths; two NVFP4 runners share one datapath and the
    sparse 'hybrid' equals the sparse NVFP4 one, so they are 44 distinct datapaths here."""
    hw = [dp for dp in mmasim.datapaths("B200") if dp.status.kind == "hardware" and dp.op == "tcgen05.mma"]
    assert len(hw) == 44
    assert all(dp.status.device == "B200" for dp in hw)
    sparse_i8 = [dp for dp in mmasim.datapaths("B200") if dp.kind == "i8" and dp.sparse]
    assert sparse_i8 and all(dp.status.kind == "assumed" for dp in sparse_i8)
    peer = [dp for dp in mmasim.datapaths("B200") if dp.op == "tcgen05.mma" and dp.status.kind == "peer"]
    # dense unscaled datapaths MMA-Sim models that T1 did not measure: kind::f16 f16 -> f16, and the 50
    # kind::f8f6f4 pairs less the 5 same-format f32 ones and the 2 mixed representatives T1 measured
    assert len(peer) == 1 + 50 - 5 - 2
    assert all(not dp.sparse and dp.kind in ("tf32", "f16", "f8f6f4") for dp in peer)
    assert mmasim.MMA("B200", "tcgen05.mma.kind::f16.f16.f16.f16").status.kind == "peer"


def test_result_value_sanity():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::tf32")
    assert f32_value(int(m.dot([f32(1.5)] * 8, [f32(2.0)] * 8, f32(-1.0)))) == 23.0
