"""Bad input never gives a numpy traceback or a silent wrong answer: each is a specific MMAError."""

import numpy as np
import pytest

import mmasim
from mmasim import errors


def tf32():
    return mmasim.MMA("B200", "tcgen05.mma.kind::tf32")


def test_all_errors_derive_from_mmaerror():
    for name in ("UnknownArchitecture", "UnknownInstruction", "AmbiguousInstruction", "OperandError",
                 "ShapeError", "DtypeError", "WordRangeError", "ScaleError", "SparseMetadataError",
                 "UnsupportedDatapath", "TableError"):
        assert issubclass(getattr(mmasim, name), mmasim.MMAError)


def test_unknown_architecture_suggests_close_names():
    with pytest.raises(mmasim.UnknownArchitecture, match="B200"):
        mmasim.MMA("B2000", "tcgen05.mma.kind::tf32")


def test_unknown_instruction_lists_close_matches():
    with pytest.raises(mmasim.UnknownInstruction, match="Close matches") as e:
        mmasim.MMA("B200", "tcgen05.mma.kind::f16.f32.f16.e4m3")
    assert "kind::f16" in str(e.value)
    with pytest.raises(mmasim.UnknownInstruction, match="cannot read"):
        mmasim.MMA("B200", "tcgen05.mma.kind::tf32.bogus")


@pytest.mark.parametrize("arch, instruction, have", [
    ("A100", "wgmma", "Hopper has it"),
    ("A100", "wgmma.mma_async.k32.f32.e4m3.e4m3", "Hopper has it"),
    ("A100", "mma.sync.m16n8k32.f32.e4m3.e4m3.f32",
     "Ada Lovelace, Blackwell, Blackwell Ultra, Hopper and RTX Blackwell have it"),
    ("H100", "tcgen05.mma.kind::tf32", "Blackwell and Blackwell Ultra have it"),
    ("A100", "v_mfma_f32_32x32x8_f16", "CDNA3 has it"),
])
def test_an_instruction_of_other_architectures_names_them_not_close_matches(arch, instruction, have):
    # wgmma is sm_90a's (PTX ISA 9.0 wgmma Target ISA Notes); fp8 mma.sync needs sm_89 or later
    with pytest.raises(mmasim.UnknownInstruction) as e:
        mmasim.MMA(arch, instruction)
    msg = str(e.value)
    assert have in msg and "Close matches" not in msg and "s32" not in msg, msg


def test_an_instruction_no_architecture_has_still_gets_close_matches():
    with pytest.raises(mmasim.UnknownInstruction, match="Close matches") as e:
        mmasim.MMA("A100", "mma.sync.m16n8k99.f32.f16.f16.f32")
    assert " has it" not in str(e.value) and " have it" not in str(e.value)


def test_ambiguous_lookup_lists_the_candidates():
    with pytest.raises(mmasim.AmbiguousInstruction) as e:
        mmasim.MMA("B200", "tcgen05.mma.kind::f16")
    assert set(e.value.candidates) == {
        "tcgen05.mma.kind::f16.f32.f16.f16", "tcgen05.mma.kind::f16.f32.bf16.bf16", "tcgen05.mma.kind::f16.f16.f16.f16"}
    assert "d_type" in str(e.value)


def test_unknown_qualifier_and_contradiction():
    with pytest.raises(TypeError, match="unknown qualifier"):
        mmasim.MMA("B200", "tcgen05.mma.kind::tf32", atype="tf32")
    with pytest.raises(mmasim.UnknownInstruction, match="contradicts"):
        mmasim.MMA("B200", "tcgen05.mma.kind::f16.f32.f16.f16", a_type="bf16")


def test_illegal_shape_is_unknown():
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA("B200", "m128n12k16.kind::f16.f32.bf16.bf16")       # N not a multiple of 8
    with pytest.raises(mmasim.UnknownInstruction):
        mmasim.MMA("B200", "m128n8k32.kind::f16.f32.bf16.bf16")        # wrong K


def test_wrong_k():
    with pytest.raises(mmasim.ShapeError, match=r"\(\.\.\., 8\)"):
        tf32().dot(np.zeros(7, np.uint32), np.zeros(7, np.uint32), 0)


def test_batch_shapes_that_do_not_broadcast():
    with pytest.raises(mmasim.ShapeError, match="broadcast"):
        tf32().dot(np.zeros((3, 8), np.uint32), np.zeros((2, 8), np.uint32), 0)


def test_wrong_dtype():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::f16.f32.f16.f16")
    with pytest.raises(mmasim.DtypeError):
        m.dot(np.zeros(16, dtype=np.float32) + 0.1, np.zeros(16, np.uint16), 0)   # 0.1 is not an f16 value
    with pytest.raises(mmasim.DtypeError):
        m.dot(np.array(["x"] * 16), np.zeros(16, np.uint16), 0)
    with pytest.raises(mmasim.DtypeError):
        m.dot(np.zeros(16, dtype=bool), np.zeros(16, np.uint16), 0)


def test_word_out_of_the_containers_range():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::f16.f32.f16.f16")
    with pytest.raises(mmasim.WordRangeError, match="16-bit container"):
        m.dot(np.full(16, 0x10000), np.zeros(16, np.uint16), 0)
    with pytest.raises(mmasim.WordRangeError, match="non-negative"):
        m.dot(np.full(16, -1), np.zeros(16, np.uint16), 0)
    fp4 = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    with pytest.raises(mmasim.WordRangeError, match="4-bit container"):
        fp4.dot(np.full(64, 0x10), np.zeros(64, np.uint8), 0, scale_a=[0x38] * 4, scale_b=[0x38] * 4)


def test_scale_count_mismatch_and_missing_scales():
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    z = np.zeros(64, np.uint8)
    with pytest.raises(mmasim.ScaleError, match=r"\(\.\.\., 4\)"):
        m.dot(z, z, 0, scale_a=[0x38] * 2, scale_b=[0x38] * 4)
    with pytest.raises(mmasim.ScaleError, match="needs scale_a"):
        m.dot(z, z, 0)
    with pytest.raises(mmasim.ScaleError, match="not block-scaled"):
        tf32().dot(np.zeros(8, np.uint32), np.zeros(8, np.uint32), 0, scale_a=[1], scale_b=[1])


def test_sparse_metadata_errors():
    m = mmasim.MMA("B200", "tcgen05.mma.sp.kind::tf32")
    z = np.zeros(16, np.uint32)
    with pytest.raises(mmasim.SparseMetadataError, match="pass sparse_metadata"):
        m.dot(z, z, 0)
    with pytest.raises(mmasim.SparseMetadataError, match="shape"):
        m.dot(z, z, 0, sparse_metadata=[0x44444444, 0])
    with pytest.raises(mmasim.SparseMetadataError, match="illegal"):
        m.dot(z, z, 0, sparse_metadata=[0x44444445])
    with pytest.raises(mmasim.SparseMetadataError, match="32-bit"):
        m.dot(z, z, 0, sparse_metadata=[0x144444444])
    with pytest.raises(mmasim.SparseMetadataError, match="dense"):
        tf32().dot(np.zeros(8, np.uint32), np.zeros(8, np.uint32), 0, sparse_metadata=[0])


def test_matrix_form_shape_errors():
    m = tf32()
    with pytest.raises(mmasim.ShapeError, match="do not fit"):
        m(np.zeros((64, 8), np.uint32), np.zeros((7, 8), np.uint32), np.zeros((64, 8), np.uint32))
    with pytest.raises(mmasim.ShapeError, match="do not fit"):
        m(np.zeros((64, 8), np.uint32), np.zeros((8, 8), np.uint32), np.zeros((8, 64), np.uint32))
    with pytest.raises(mmasim.ShapeError, match="2-D"):
        m(np.zeros(8, np.uint32), np.zeros((8, 8), np.uint32), np.zeros((1, 8), np.uint32))


def test_bad_tables_are_table_errors():
    from mmasim.registry.tables import build_architecture, load_table

    with pytest.raises(errors.TableError, match="invalid TOML"):
        load_table("[architecture\nname=")
    with pytest.raises(errors.TableError, match="missing"):
        build_architecture({"datapath": []})
    with pytest.raises(errors.TableError, match="unknown keys"):
        build_architecture({"architecture": {"name": "X"}, "datapath": [{"op": "x", "bogus": 1}]})
    with pytest.raises(errors.TableError, match="missing key"):
        build_architecture({"architecture": {"name": "X"}, "datapath": [{"op": "x"}]})
