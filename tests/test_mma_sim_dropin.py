"""The MMA-Sim drop-in (mmasim.nv_ptx.sim, mmasim.amd.sim; docs/mma-sim.md).

Expectations come from the frozen MMA-Sim 2.1.1 vectors (vectors/peer, made by
MMA-Sim itself), from MMA-Sim's published call conventions (its README and its
classes' signatures: ``op(A, B, C)`` on ``(M, K) x (K, N) + (M, N)``,
``op.dpa(a, b, c)`` on ``(..., K)``, alpha ``(M, K / block)`` and beta
``(K / block, N)``, fp4 packed two per uint8 high nibble first in kind::mxf4*),
and from the hardware facts where mmasim deliberately differs (docs/datapaths.md
§3, §7).  These tests need torch (the ``[torch]`` extra, installed by .ci/run).
"""

from __future__ import annotations

import json
import re
import pathlib
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mmasim  # noqa: E402
from mmasim.vectors import files as vectors  # noqa: E402
from mmasim.amd.sim import MFMA  # noqa: E402
from mmasim.arith.decode import NAN  # noqa: E402
from mmasim.nv_ptx.sim import MMA, WGMMA, MMABlockScale, TCGen05MMA, TCGen05MMABlockScale  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent / "vectors" / "peer"
PACKAGE_ROOT = pathlib.Path(mmasim.__file__).resolve().parent
MANIFEST = {f["path"]: f for f in json.loads((ROOT / "MANIFEST.json").read_text())["files"]}
# MMA-Sim's files are those its MANIFEST lists (the other peer's files, khattak-octave.*, are not
# MMA-Sim's words: tests/test_khattak_octave_vectors.py)
FILES = sorted(p for p in ROOT.rglob("*.npz") if str(p.relative_to(ROOT)) in MANIFEST)
CLASSES = {"mma": MMA, "mma_block_scale": MMABlockScale, "wgmma": WGMMA, "tcgen05": TCGen05MMA, "mfma": MFMA}

#: the torch dtype MMA-Sim 2.1.1 takes for each operand format (its nv_torch_dtype /
#: amd_torch_dtype tables; fp6 and fp4 are uint8, one element per byte)
TORCH = {"f64": torch.float64, "f32": torch.float32, "tf32": torch.float32, "xf32": torch.float32,
         "f16": torch.float16, "bf16": torch.bfloat16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2,
         "ue8m0": torch.float8_e8m0fnu, "ue4m3": torch.float8_e4m3fn, "e3m2": torch.uint8, "e2m3": torch.uint8,
         "e2m1": torch.uint8, "e4m3fnuz": torch.float8_e4m3fnuz, "e5m2fnuz": torch.float8_e5m2fnuz}
_INT = {1: (np.int8, torch.int8), 2: (np.int16, torch.int16), 4: (np.int32, torch.int32), 8: (np.int64, torch.int64)}


def tensor_of(words, dtype):
    """Container words as a tensor of ``dtype`` holding exactly those bits."""
    words = np.asarray(words, dtype=np.uint64)
    if dtype == torch.uint8:
        return torch.from_numpy(words.astype(np.uint8))
    size = torch.empty((), dtype=dtype).element_size()
    return torch.from_numpy(words.astype(np.dtype(f"u{size}")).view(_INT[size][0])).view(dtype)


def bits_of(t):
    """The bits of a result tensor as uint64 words."""
    size = t.element_size()
    return t.view(_INT[size][1]).numpy().view(np.dtype(f"u{size}")).astype(np.uint64)


def pack_high_first(codes):
    """Two e2m1 codes per byte, element 2i in the high nibble (MMA-Sim's kind::mxf4 packing)."""
    codes = np.asarray(codes, dtype=np.uint8)
    return torch.from_numpy((codes[..., 0::2] << 4) | codes[..., 1::2])


def _is_nan(model, words):
    return model.decode("d", words).cls == NAN


# ------------------------------------------------------------ the frozen peer vectors, MMA-Sim style
def test_every_peer_vector_file_is_run_through_the_dropin():
    assert len(FILES) >= 290 and {MANIFEST[str(p.relative_to(ROOT))]["api"] for p in FILES} == set(CLASSES)


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(ROOT)) for p in FILES])
def test_dropin_dpa_agrees_with_mma_sim_2_1_1_on_its_vectors(path):
    """Each frozen vector through MMA-Sim's own API: the class its api names, MMA-Sim's
    (arch, instruction) strings, torch tensors in MMA-Sim's dtypes, ``.dpa``.  The frozen
    vectors avoid the documented deliberate differences (docs/peer-vectors.md: no tcgen05 case
    where a zero term would set the window, e2m1 padding bits 1:0 zero, f64 and AMD NaNs
    compared as "any NaN"), so every word must agree."""
    vf = vectors.load(path)
    op = CLASSES[MANIFEST[str(path.relative_to(ROOT))]["api"]](vf.arch, vf.instruction)
    m = op.model
    if op.packing == 2:
        a, b = pack_high_first(vf.a), pack_high_first(vf.b)
    else:
        a, b = tensor_of(vf.a, TORCH[m.a_format.name]), tensor_of(vf.b, TORCH[m.b_format.name])
    c = tensor_of(vf.c, TORCH[m.c_format.name])
    if vf.scale_a is not None:
        s = TORCH[m.scale_format.name]
        d = op.dpa(a, b, c, tensor_of(vf.scale_a, s), tensor_of(vf.scale_b, s))
    else:
        d = op.dpa(a, b, c)
    assert d.dtype == TORCH[m.d_format.name] and tuple(d.shape) == (len(vf),)
    got = bits_of(d)
    same = got == vf.d
    if vf.nan_policy == "any":
        same |= _is_nan(m, got) & _is_nan(m, vf.d)
    bad = np.flatnonzero(~same)
    assert not len(bad), f"{len(bad)}/{len(vf)} mismatches; first case {bad[0]}: got {int(got[bad[0]]):#x}, " \
                         f"MMA-Sim {int(vf.d[bad[0]]):#x}"


# ------------------------------------------------------------ MMA-Sim's README example
def test_mma_sim_readme_example_runs_unchanged():
    """The usage example of MMA-Sim 2.1.1's README, as published (an A100 mma.sync against an
    MI300 v_mfma on random f16 matrices), run against the drop-in."""
    example = '''
import torch
from mmasim.nv_ptx.sim import MMA  # for "mma.sync" instructions
from mmasim.amd.sim import MFMA  # for "v_mfma" instructions

# mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (PTX)
# or HMMA.16816.F32 (SASS)
mma_a100 = MMA("Ampere", "m16n8k16.f32.f16.f16.f32")

# v_mfma_f32_16x16x16_f16
mfma_mi300 = MFMA("CDNA3", "f32_16x16x16_f16")

A = torch.randn([16, 16], dtype=torch.float16)
B = torch.randn([16, 16], dtype=torch.float16)
C = torch.zeros([16, 16], dtype=torch.float32)
D_a100 = torch.cat([mma_a100(A, B[:, :8], C[:, :8]), mma_a100(A, B[:, 8:], C[:, 8:])], dim=1)
D_mi300 = mfma_mi300(A, B, C)
print(D_a100 - D_mi300)  # non-zero values indicate numerical discrepancies
'''
    torch.manual_seed(20261201)
    scope = {}
    exec(compile(example, "MMA-Sim README", "exec"), scope)
    A, B, D_a100, D_mi300 = scope["A"], scope["B"], scope["D_a100"], scope["D_mi300"]
    assert D_a100.dtype == D_mi300.dtype == torch.float32 and D_a100.shape == D_mi300.shape == (16, 16)
    # both are A @ B to within a few f32 ulps of the exact sum (random N(0,1) f16 inputs, K = 16)
    exact = A.double() @ B.double()
    for D in (D_a100, D_mi300):
        assert torch.allclose(D.double(), exact, rtol=0, atol=1e-5)
    # the A100 side is mmasim's A100 model (the T2 hardware-validated datapath), word for word
    ref = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    words = np.concatenate([ref(A.view(torch.int16).numpy().view(np.uint16), B[:, i:i + 8].contiguous().view(
        torch.int16).numpy().view(np.uint16), np.zeros((16, 8), np.uint32)) for i in (0, 8)], axis=1)
    assert (bits_of(D_a100).reshape(16, 16) == words).all()


# ------------------------------------------------------------ shapes and dtypes, as MMA-Sim's
def test_call_takes_matrices_and_returns_c_shape_in_d_dtype():
    op = MMA("Ampere", "m16n8k16.f16.f16.f16.f16")
    D = op(torch.ones(16, 16, dtype=torch.float16), torch.ones(16, 8, dtype=torch.float16),
           torch.zeros(16, 8, dtype=torch.float16))
    assert D.dtype == torch.float16 and D.shape == (16, 8) and (D == 16).all()
    assert (op.m, op.n, op.k) == (16, 8, 16)
    assert (op.a_type, op.b_type, op.c_type, op.d_type) == (torch.float16,) * 4


def test_dpa_takes_batched_vectors_and_returns_the_batch_shape():
    op = WGMMA("Hopper", "m64n8k16.f32.bf16.bf16")
    a = torch.ones(3, 5, 16, dtype=torch.bfloat16)
    d = op.dpa(a, a, torch.full((3, 5), 2.0))
    assert d.dtype == torch.float32 and d.shape == (3, 5) and (d == 18).all()


def test_mfma_call_and_dpa_shapes():
    op = MFMA("CDNA3", "f32_32x32x8_f16")
    assert (op.m, op.n, op.k, op.suffix) == (32, 32, 8, "f32_32x32x8_f16")
    D = op(torch.ones(32, 8, dtype=torch.float16), torch.ones(8, 32, dtype=torch.float16), torch.ones(32, 32))
    assert D.shape == (32, 32) and (D == 9).all()


def test_block_scale_call_takes_alpha_m_by_blocks_and_beta_blocks_by_n():
    """mxf8f6f4, K = 32, one ue8m0 scale per 32: alpha (M, 1), beta (1, N); 2^1 * 2^-1 * 32 = 32."""
    op = MMABlockScale("RTX Blackwell", "m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.f32.ue8m0")
    A = torch.ones(16, 32, dtype=torch.float8_e4m3fn)
    B = torch.ones(32, 8, dtype=torch.float8_e4m3fn)
    alpha = tensor_of(np.full((16, 1), 0x80), torch.float8_e8m0fnu)      # 2^1
    beta = tensor_of(np.full((1, 8), 0x7E), torch.float8_e8m0fnu)        # 2^-1
    D = op(A, B, torch.zeros(16, 8), alpha, beta)
    assert D.dtype == torch.float32 and D.shape == (16, 8) and (D == 32).all()
    assert op.block_size == 32 and op.s_type == torch.float8_e8m0fnu


def test_mxf4_operands_are_two_e2m1_per_byte_high_nibble_first():
    """kind::mxf4nvf4 block16 (NVFP4), K = 64: A (M, 32) and B (32, N) uint8, element 2i in the
    high nibble.  A row = [1.0, 0, 0, ...] (byte 0 = 0x20), B column = [1.0, 4.0, 0, ...]
    (byte 0 = 0x26): the dot product is 1.0 with the high-nibble-first reading, 4.0 with the
    other."""
    op = MMABlockScale("RTX Blackwell", "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3")
    assert op.packing == 2 and op.k == 64
    A = torch.zeros(16, 32, dtype=torch.uint8)
    A[:, 0] = 0x20
    B = torch.zeros(32, 8, dtype=torch.uint8)
    B[0, :] = 0x26
    alpha = tensor_of(np.full((16, 4), 0x38), torch.float8_e4m3fn)           # ue4m3 1.0
    beta = tensor_of(np.full((4, 8), 0x38), torch.float8_e4m3fn)
    D = op(A, B, torch.zeros(16, 8), alpha, beta)
    assert D.shape == (16, 8) and (D == 1.0).all()


def test_dpa_chains_a_longer_k_instruction_after_instruction():
    """K = 32 on a K = 16 instruction: D of the first 16 is C of the next (MMA-Sim chains its
    L-element chunks the same way).  Ampere f16 D: 2048 + 16 * 1 = 2064, then + 16 * 1 = 2080."""
    op = MMA("Ampere", "m16n8k16.f16.f16.f16.f16")
    d = op.dpa(torch.ones(32, dtype=torch.float16), torch.ones(32, dtype=torch.float16),
               torch.tensor(2048.0, dtype=torch.float16))
    assert d.shape == () and float(d) == 2080.0


def test_k_not_a_multiple_of_the_instructions_k_is_a_shape_error():
    with pytest.raises(mmasim.ShapeError, match="multiple of the instruction's K = 16"):
        MMA("Ampere", "m16n8k16.f32.f16.f16.f32").dpa(torch.ones(8, dtype=torch.float16),
                                                        torch.ones(8, dtype=torch.float16), torch.zeros(()))


def test_wrong_class_for_a_block_scaled_string_is_an_unknown_instruction():
    with pytest.raises(mmasim.UnknownInstruction, match="MMABlockScale"):
        MMA("RTX Blackwell", "m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.f32.ue8m0")
    with pytest.raises(mmasim.UnknownInstruction):
        MMA("Ampere", "m16n8k99.f32.f16.f16.f32")


def test_float_tensor_of_another_dtype_is_read_as_values_exactly():
    """MMA-Sim reads values; a float32 tensor of f16-representable values gives the same D as f16."""
    op = MMA("Ampere", "m16n8k16.f32.f16.f16.f32")
    d = op.dpa(torch.full((16,), 0.5), torch.full((16,), 3.0), torch.zeros(()))
    assert float(d) == 24.0
    with pytest.raises(mmasim.DtypeError):
        op.dpa(torch.full((16,), 0.1), torch.full((16,), 3.0), torch.zeros(()))


# ------------------------------------------------------------ where mmasim deliberately differs
def test_tcgen05_zeros_do_not_set_the_window_unlike_mma_sims_e_zero():
    """docs/datapaths.md §3 (T1, B200): f16 D, products 2^-25 and 2^-48, the rest zero.  MMA-Sim
    counts zeros at e_zero = -21 and drops 2^-48 (0x0000, as Hopper); the B200 excludes zeros:
    0x0001."""
    a = tensor_of([0x0400, 0x0001] + [0] * 14, torch.float16)
    b = tensor_of([0x1000, 0x0001] + [0] * 14, torch.float16)
    c = torch.zeros((), dtype=torch.float16)
    assert int(bits_of(TCGen05MMA("Blackwell", "m64n8k16.kind::f16.f16.f16.f16").dpa(a, b, c))) == 0x0001
    assert int(bits_of(WGMMA("Hopper", "m64n8k16.f16.f16.f16").dpa(a, b, c))) == 0x0000


def test_rtx_blackwell_e2m1_byte_reads_bits_1_0_unlike_mma_sim():
    """docs/datapaths.md §7 (T2, RTX 5070 Ti): the byte 0x0B as e2m1 is read as e2m3 1.375
    (0x3FB00000); MMA-Sim drops bits 1:0 and reads 1.0."""
    op = MMA("RTX Blackwell", "m16n8k32.kind::f8f6f4.f32.e2m1.e4m3.f32")
    a = torch.tensor([0x0B] + [0] * 31, dtype=torch.uint8)
    b = tensor_of([0x38] + [0] * 31, torch.float8_e4m3fn)
    assert int(bits_of(op.dpa(a, b, torch.zeros(())))) == 0x3FB00000


def test_tcgen05_block_scale_runs_the_b200_rules():
    """docs/datapaths.md §6 (T1): NVFP4, block 0 scale 448 holding 0.5*0.5 - 0.5*0.5, block 1 scale
    2^-9 with six products of 2^-20 summed in groups of 4: 0x36800000."""
    codes = np.zeros(64, dtype=np.uint8)
    codes[[0, 1]] = [0x1, 0x9]
    codes[[16, 17, 18, 20, 21, 22]] = 0x1
    bcodes = np.zeros(64, dtype=np.uint8)
    bcodes[[0, 1, 16, 17, 18, 20, 21, 22]] = 0x1
    s = tensor_of([0x7E, 0x01, 0x38, 0x38], torch.float8_e4m3fn)
    op = TCGen05MMABlockScale("Blackwell", "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3")
    d = op.dpa(pack_high_first(codes), pack_high_first(bcodes), torch.zeros(()), s, s)
    assert int(bits_of(d)) == 0x36800000


# ------------------------------------------------------------ torch stays optional
def test_mmasim_and_the_dropin_import_without_torch():
    code = ("import sys, mmasim, mmasim.nv_ptx.sim, mmasim.amd.sim\n"
            "op = mmasim.nv_ptx.sim.MMA('Ampere', 'm16n8k16.f32.f16.f16.f32')\n"
            "import numpy as np\n"
            "d = op.dpa(np.ones(16, np.float16), np.ones(16, np.float16), np.float32(1))\n"
            "assert d.dtype == np.float32 and float(d) == 17.0\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_mma_sim_import_paths_are_aliases_of_the_compat_modules():
    # mmasim.nv_ptx.sim / mmasim.amd.sim are the modules of mmasim/mma_sim_compat/ themselves (no
    # folders of their own); mmasim.nv_ptx / mmasim.amd hold their names as MMA-Sim's packages do
    import importlib

    import mmasim.amd.sim
    import mmasim.nv_ptx.sim
    from mmasim.mma_sim_compat import amd, nv_ptx
    from mmasim.nv_ptx import WGMMA as package_wgmma

    assert mmasim.nv_ptx.sim is nv_ptx and mmasim.amd.sim is amd
    assert package_wgmma is nv_ptx.WGMMA and mmasim.amd.MFMA is amd.MFMA
    assert nv_ptx.__spec__.name == "mmasim.mma_sim_compat.nv_ptx"       # the home module untouched
    assert not (PACKAGE_ROOT / "nv_ptx").exists() and not (PACKAGE_ROOT / "amd").exists()
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("mmasim.nv_ptx.isa_mma")                 # MMA-Sim's ISA lists: not ours


def test_mma_sim_doc_examples_run():
    text = (ROOT.parent.parent / "docs" / "mma-sim.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert blocks
    for i, body in enumerate(blocks):
        exec(compile(body, f"docs/mma-sim.md block {i}", "exec"), {})
