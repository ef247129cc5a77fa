"""torch tensors in and out of mmasim's own API (the [torch] extra; mmasim/operands/tensors.py).

The rule (docs/user-guide.md, "Typed arrays"): integer tensors are container words, float
tensors are values, read bit for bit; the result is a tensor on the operand's device.
Expected words come from the datapaths' documented facts (docs/datapaths.md) and from the
IEEE encodings of small exact values.
"""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
ml_dtypes = pytest.importorskip("ml_dtypes")

import mmasim  # noqa: E402


def test_importing_mmasim_does_not_import_torch():
    r = subprocess.run([sys.executable, "-c", "import sys, mmasim; mmasim.MMA('A100', 'm16n8k16.f32.f16.f16.f32')"
                        ".dot([0x3C00] * 16, [0x3C00] * 16, 0); assert 'torch' not in sys.modules"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_word_tensors_give_word_tensors():
    """f16 1.0 = 0x3C00; 16 products of 1 plus C = 1.0 is 17.0 = 0x41880000 in f32."""
    m = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    ones = torch.full((16,), 0x3C00, dtype=torch.uint16)
    d = m.dot(ones, ones, torch.tensor(0x3F800000, dtype=torch.uint32))
    assert isinstance(d, torch.Tensor) and d.dtype == torch.uint32 and d.shape == ()
    assert int(d) == 0x41880000


def test_int64_word_tensors_are_words():
    m = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    d = m.dot(torch.full((2, 16), 0x3C00), torch.full((2, 16), 0x3C00), torch.zeros(2, dtype=torch.int64))
    assert d.dtype == torch.uint32 and d.tolist() == [0x41800000, 0x41800000]


def test_value_tensors_give_value_tensors_of_d():
    """The user guide's example with tensors: 16 * 1.5 * 2 + 0.25 = 48.25."""
    h = mmasim.MMA("B200", "tcgen05.mma.kind::f16", a_type="f16", d_type="f32")
    r = h.dot(torch.full((16,), 1.5, dtype=torch.float16), torch.full((16,), 2.0, dtype=torch.float16),
              torch.tensor(0.25))
    assert r.dtype == torch.float32 and float(r) == 48.25


def test_bfloat16_matrix_form_returns_float32():
    m = mmasim.MMA("Blackwell", "m128n8k16.kind::f16.f32.bf16.bf16")
    D = m(torch.ones(128, 16, dtype=torch.bfloat16), torch.ones(16, 8, dtype=torch.bfloat16), torch.zeros(128, 8))
    assert D.dtype == torch.float32 and D.shape == (128, 8) and (D == 16).all()


def test_f16_d_comes_back_as_float16():
    m = mmasim.MMA("A100", "m16n8k16.f16.f16.f16.f16")
    d = m.dot(torch.full((16,), 0.5, dtype=torch.float16), torch.full((16,), 0.5, dtype=torch.float16),
              torch.tensor(1.0, dtype=torch.float16))
    assert d.dtype == torch.float16 and float(d) == 5.0


def test_float8_tensors_are_values_read_bit_for_bit():
    """docs/datapaths.md §3 (Ada fp8, F = 13): e4m3 1*1 + 2^-9*2^-4 + 2^-9*2^-5 -> 0x3F800400."""
    a = torch.tensor([0x38, 0x01, 0x01] + [0] * 29, dtype=torch.uint8).view(torch.float8_e4m3fn)
    b = torch.tensor([0x38, 0x18, 0x10] + [0] * 29, dtype=torch.uint8).view(torch.float8_e4m3fn)
    d = mmasim.MMA("Ada", "m16n8k32.f32.e4m3.e4m3.f32").dot(a, b, torch.tensor(0.0))
    assert d.dtype == torch.float32 and int(d.view(torch.int32)) == 0x3F800400


def test_float4_x2_tensor_is_two_values_per_byte_low_nibble_first():
    """B200 NVFP4 (tcgen05.kind::mxf4nvf4.4X): A as torch.float4_e2m1fn_x2 with byte 0 = 0x02
    (element 0 = e2m1 0x2 = 1.0 in the low nibble, element 1 = 0), B as ml_dtypes values
    [1.0, 4.0, 0, ...], unit scales: the dot is 1.0 with the low-nibble-first reading (4.0 with
    the other)."""
    a = torch.zeros(32, dtype=torch.uint8)
    a[0] = 0x02
    b = np.zeros(64, dtype=ml_dtypes.float4_e2m1fn)
    b[0], b[1] = 1.0, 4.0
    s = np.ones(4, dtype=ml_dtypes.float8_e4m3fn)
    d = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X").dot(a.view(torch.float4_e2m1fn_x2), b, np.float32(0),
                                                            scale_a=s, scale_b=s)
    assert isinstance(d, torch.Tensor) and float(d) == 1.0


def test_e8m0_scale_tensor_is_read_bit_for_bit():
    """ue8m0 0x80 = 2: mxf4 on the B200, 64 products of 1.0 * 1.0 with both scales 2 -> 256."""
    m = mmasim.MMA("B200", "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X")
    one = torch.full((64,), 0x2, dtype=torch.uint8)
    s = torch.full((2,), 0x80, dtype=torch.uint8)
    d = m.dot(one, one, torch.tensor(0, dtype=torch.uint32), scale_a=s, scale_b=s)
    assert int(d) == 0x43800000
    sv = s.view(torch.float8_e8m0fnu)
    d = m.dot(torch.ones(64), torch.ones(64), torch.tensor(0.0), scale_a=sv, scale_b=sv)
    assert float(d) == 256.0


def test_gemm_takes_and_returns_tensors():
    """The README's GEMM with tensors: 64 products of 1.0 -> 64.0."""
    D = mmasim.gemm(torch.ones(16, 64, dtype=torch.float16), torch.ones(64, 8, dtype=torch.float16),
                    torch.zeros(16, 8), arch="A100", instruction="m16n8k16.f32.f16.f16.f32")
    assert isinstance(D, torch.Tensor) and D.dtype == torch.float32 and (D == 64).all()


def test_fragments_and_warp_take_tensors():
    m = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16")
    A = torch.full((16, 16), 0x3C00, dtype=torch.uint16)
    B = torch.full((16, 8), 0x3C00, dtype=torch.uint16)
    C = torch.zeros((16, 8), dtype=torch.uint32)
    regs = m.warp(m.fragments("a", A), m.fragments("b", B), m.fragments("c", C))
    assert isinstance(regs, torch.Tensor) and regs.dtype == torch.uint32
    D = m.unfragment("d", regs)
    assert (D == 0x41800000).all()


def test_inexact_value_tensor_is_a_dtype_error():
    with pytest.raises(mmasim.DtypeError, match="not exactly representable"):
        mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32").dot(torch.full((16,), 0.1), torch.ones(16), torch.tensor(0.0))


def test_bool_and_complex_tensors_are_dtype_errors():
    m = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    for bad in (torch.ones(16, dtype=torch.bool), torch.ones(16, dtype=torch.complex64)):
        with pytest.raises(mmasim.DtypeError):
            m.dot(bad, torch.ones(16, dtype=torch.float16), torch.tensor(0.0))


def test_mixed_word_and_value_tensors_are_a_dtype_error():
    with pytest.raises(mmasim.DtypeError, match="mix"):
        mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32").dot(torch.ones(16, dtype=torch.float16),
                                                           torch.full((16,), 0x3C00), torch.tensor(0.0))


def test_non_contiguous_tensor_views_are_read_as_they_look():
    """A transposed view: B.T of a (8, 16) tensor whose row 0 holds 2.0 gives column 0 = 2.0."""
    m = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    Bt = torch.ones(8, 16, dtype=torch.float16)
    Bt[0] = 2.0
    D = m(torch.ones(16, 16, dtype=torch.float16), Bt.T, torch.zeros(16, 8))
    assert (D[:, 0] == 32).all() and (D[:, 1:] == 16).all()
