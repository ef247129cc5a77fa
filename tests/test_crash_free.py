"""Hostile input to the API and the CLI is a named ``MMAError``, never a crash: drop-in scale
tensors of any dtype, tensors without plain elements (meta, sparse, quantized), unknown operand
names and misspelt keywords, huge broadcast batches and case counts, and vector files that
``validate`` turns into ERROR rows given to ``characterize --from-vectors``.

Expected words are hand-derived: e4m3 1.0 is 0x38 (exponent field 7 = bias), so 32 products
1 x 1 sum to 32.0 (0x42000000); a ue8m0 scale word w scales by 2^(w - 127) (docs/datapaths.md
section 1), so 127 is 1.0 and 128 is 2.0.
"""

import contextlib
import io
import json

import ml_dtypes
import numpy as np
import pytest

import mmasim
from mmasim import characterize as char
import mmasim.cli.main as cli
from mmasim.compare import CaseCountError, MAX_WORDS, compare
from mmasim.errors import DtypeError, OperandError, ShapeError, UnknownOption, WordRangeError
from mmasim.execution.model import Model
from mmasim.nv_ptx.sim import MMABlockScale, TCGen05MMABlockScale

E4M3_ONE = 0x38
RTX_MXF8 = "m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.f32.ue8m0"
B200_MXF8 = "m128n8k32.kind::mxf8f6f4.block32.f32.e4m3.e4m3.ue8m0"
AMPERE = "mma.sync.m16n8k16.f32.f16.f16.f32"


def run_cli(*argv):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(list(argv))
    return rc, out.getvalue(), err.getvalue()


def assert_named_error(rc, out, err):
    assert rc != 0 and "mmasim: error:" in err
    assert "internal error" not in err + out and "Traceback" not in err + out


# ------------------------------------------------------------------ drop-in block-scale tensors
def _scales(kind, value, M, N):
    """alpha (M, 1) and beta (1, N) holding ``value`` as ``kind`` (words, or values of a dtype)."""
    if kind == "uint8 words":
        return np.full((M, 1), value, np.uint8), np.full((1, N), 127, np.uint8)
    v = 2.0 ** (value - 127)
    dtype = {"float8_e8m0fnu": ml_dtypes.float8_e8m0fnu, "float32": np.float32, "float16": np.float16,
             "bfloat16": ml_dtypes.bfloat16, "float64": np.float64}[kind]
    return np.full((M, 1), v, dtype), np.ones((1, N), dtype)


@pytest.mark.parametrize("op, string, M", [(MMABlockScale("RTX Blackwell", RTX_MXF8), RTX_MXF8, 16),
                                           (TCGen05MMABlockScale("Blackwell", B200_MXF8), B200_MXF8, 128)])
@pytest.mark.parametrize("kind", ["uint8 words", "float8_e8m0fnu", "float32", "float16", "bfloat16", "float64"])
def test_dropin_block_scale_takes_numpy_and_ml_dtypes_scales_that_are_exact(op, string, M, kind):
    A = np.full((M, 32), E4M3_ONE, np.uint8)
    B = np.full((32, 8), E4M3_ONE, np.uint8)
    C = np.zeros((M, 8), np.float32)
    for word, want in ((127, 32.0), (128, 64.0)):        # 2^0 and 2^1 on A's scale
        alpha, beta = _scales(kind, word, M, 8)
        D = op(A, B, C, alpha, beta)
        assert D.dtype == np.float32 and (D == want).all(), (kind, word)
        d = op.dpa(A[:2], B.T[:2], C[:2, 0], alpha[:2], np.ones((2, 1), alpha.dtype) if kind != "uint8 words"
                   else np.full((2, 1), 127, np.uint8))
        assert (d == want).all()


def test_dropin_block_scale_refuses_inexact_scales_naming_alpha_or_beta():
    op = MMABlockScale("RTX Blackwell", RTX_MXF8)
    A, B, C = np.full((16, 32), E4M3_ONE, np.uint8), np.full((32, 8), E4M3_ONE, np.uint8), np.zeros((16, 8), np.float32)
    with pytest.raises(DtypeError, match="alpha.*3.0.*ue8m0"):
        op(A, B, C, np.full((16, 1), 3.0, np.float32), np.ones((1, 8), np.float32))
    with pytest.raises(WordRangeError, match="beta"):
        op(A, B, C, np.full((16, 1), 127, np.uint16), np.full((1, 8), 256, np.uint16))
    with pytest.raises(DtypeError, match="alpha"):
        op(A, B, C, np.full((16, 1), 1 + 1j), np.ones((1, 8), np.float32))
    with pytest.raises(mmasim.ScaleError, match="alpha"):
        op(A, B, C, [[127]] * 16, [[127] * 8])


def test_dropin_block_scale_takes_torch_scales_of_other_dtypes():
    torch = pytest.importorskip("torch")
    op = MMABlockScale("RTX Blackwell", RTX_MXF8)
    A = torch.full((16, 32), 1.0).to(torch.float8_e4m3fn)
    B = torch.full((32, 8), 1.0).to(torch.float8_e4m3fn)
    C = torch.zeros(16, 8)
    for alpha, beta in ((torch.full((16, 1), 128, dtype=torch.uint8), torch.full((1, 8), 127, dtype=torch.uint8)),
                        (torch.full((16, 1), 2.0), torch.ones(1, 8)),
                        (torch.full((16, 1), 2.0, dtype=torch.bfloat16), torch.ones(1, 8, dtype=torch.bfloat16))):
        assert (op(A, B, C, alpha, beta) == 64.0).all()


# ------------------------------------------------------------------ tensors without plain elements
@pytest.mark.filterwarnings("ignore:torch.quantize_per_tensor")
def test_meta_sparse_and_quantized_tensors_are_refused_naming_the_operand():
    torch = pytest.importorskip("torch")
    m = mmasim.MMA("A100", AMPERE)
    b, c = torch.zeros(4, 16, dtype=torch.float16), torch.zeros(4)
    with pytest.raises(OperandError, match="operand a: a meta tensor"):
        m.dot(torch.zeros(4, 16, dtype=torch.float16, device="meta"), b, c)
    with pytest.raises(OperandError, match="operand a: a sparse_coo tensor.*to_dense"):
        m.dot(torch.zeros(4, 16, dtype=torch.float16).to_sparse(), b, c)
    with pytest.raises(OperandError, match="operand A: a meta tensor"):
        m(torch.zeros(16, 16, dtype=torch.float16, device="meta"), torch.zeros(16, 8, dtype=torch.float16),
          torch.zeros(16, 8))
    with pytest.raises(OperandError, match="meta tensor"):
        m.fragments("a", torch.zeros(16, 16, dtype=torch.float16, device="meta"))
    with pytest.raises(OperandError, match="meta tensor"):
        m.operand_words("a", torch.zeros(16, dtype=torch.float16, device="meta"))
    with pytest.raises(DtypeError, match="quantized"):
        m.dot(torch.quantize_per_tensor(torch.zeros(4, 16), 0.5, 0, torch.qint8), b, c)


# ------------------------------------------------------------------ names and keywords
@pytest.mark.parametrize("bad", ["x", "A", "scale", "", 3, None, ("a",)])
def test_unknown_operand_names_are_operand_errors_listing_the_known(bad):
    m = mmasim.MMA("A100", AMPERE)
    for call in (lambda: m.format_of(bad), lambda: m.decode(bad, [0]), lambda: m.operand_words(bad, [0]),
                 lambda: m.layout(bad), lambda: m.fragments(bad, np.zeros((16, 16), np.uint16)),
                 lambda: m.unfragment(bad, np.zeros((32, 4), np.uint32))):
        with pytest.raises(OperandError, match="'a'|a, b"):
            call()


def test_misspelt_keyword_is_one_unknown_option_error_in_every_layout_call():
    m = mmasim.MMA("A100", AMPERE)
    A, B, C = np.zeros((16, 16), np.uint16), np.zeros((16, 8), np.uint16), np.zeros((16, 8), np.uint32)
    regs = (m.fragments("a", A), m.fragments("b", B), m.fragments("c", C))
    calls = {"layout": lambda: m.layout("a", alyout="row"),
             "fragments": lambda: m.fragments("a", A, alyout="row"),
             "unfragment": lambda: m.unfragment("a", regs[0], alyout="row"),
             "warp": lambda: m.warp(*regs, alyout="row")}
    for name, call in calls.items():
        with pytest.raises(UnknownOption, match="'alyout'.*alayout") as info:
            call()
        assert isinstance(info.value, TypeError) and isinstance(info.value, OperandError), name
    with pytest.raises(UnknownOption, match="byte_id_a"):       # warp names its own keywords too
        m.warp(*regs, byte_ida=0)


# ------------------------------------------------------------------ sizes
def test_broadcast_batch_beyond_the_row_bound_is_a_shape_error():
    m = mmasim.MMA("A100", AMPERE)
    a = np.broadcast_to(np.zeros(16, np.uint16), (2 ** 45, 16))
    with pytest.raises(ShapeError, match="35,184,372,088,832 dot products.*MAX_ROWS.*split the batch"):
        m.dot(a, np.zeros(16, np.uint16), np.uint32(0))


def test_batch_the_machine_cannot_hold_is_a_shape_error(monkeypatch):
    monkeypatch.setattr(Model, "MAX_ROWS", 1 << 62)
    m = mmasim.MMA("A100", AMPERE)
    a = np.broadcast_to(np.zeros(16, np.uint16), (2 ** 55, 16))      # 128 PiB of D words
    with pytest.raises(ShapeError, match="more than this machine can allocate"):
        m.dot(a, np.zeros(16, np.uint16), np.uint32(0))


@pytest.mark.parametrize("cases", [0, -1, True, 1.5, 10 ** 12])
def test_compare_case_counts_outside_the_bound_are_case_count_errors(cases):
    a, b = mmasim.MMA("A100", AMPERE), mmasim.MMA("H100", AMPERE)
    with pytest.raises(CaseCountError, match=f"from 1 to {MAX_WORDS // 32:,} for K = 16"):
        compare(a, b, cases=cases)


def test_cli_compare_with_a_trillion_cases_is_a_named_error():
    rc, out, err = run_cli("compare", "A100", "H100", AMPERE, "--cases", "1000000000000")
    assert_named_error(rc, out, err)
    assert "cases must be an integer from 1 to" in err


# ------------------------------------------------------------------ characterize --from-vectors
@pytest.fixture(scope="module")
def probe_file_parts():
    m = mmasim.MMA("A100", AMPERE, backend="numpy")
    cases = char.probe_cases(m)
    return {"a": cases["a"], "b": cases["b"], "c": cases["c"], "d": char.probe_words(m, cases),
            "labels": np.asarray(cases["labels"])}


def _meta(**changes):
    meta = {"format": "mmasim-vectors", "version": 1, "arch": "A100", "instruction": AMPERE,
            "provenance": {"source": "hardware", "device": "A100"}}
    meta.update(changes)
    return json.dumps(meta)


#: corruptions that make a vector file of n cases an ERROR row of validate
CORRUPT = {
    "meta nested past the recursion limit": lambda n: {"meta": "[" * 100_000 + "]" * 100_000},
    "a qualifier named like an argument of MMA": lambda n: {"meta": _meta(qualifiers={"arch": "B200"})},
    "a qualifier named cls": lambda n: {"meta": _meta(qualifiers={"cls": 1})},
    "the backend as a qualifier": lambda n: {"meta": _meta(qualifiers={"backend": "numpy"})},
    "negative D words": lambda n: {"d": -np.ones(n, dtype=np.int64)},
    "D words wider than D": lambda n: {"d": np.full(n, 1 << 40, dtype=np.uint64)},
    "integer labels": lambda n: {"labels": np.arange(n)},
    "byte-string labels": lambda n: {"labels": np.array([b"x"] * n)},
    "scales for an unscaled instruction": lambda n: {"scale_a": np.zeros((n, 1), np.uint64),
                                                     "scale_b": np.zeros((n, 1), np.uint64)},
    "sparse metadata for a dense instruction": lambda n: {"sparse_metadata": np.zeros((n, 1), np.uint64)},
    "meta that is not a string": lambda n: {"meta": np.zeros(3)},
}


@pytest.mark.parametrize("what", sorted(CORRUPT))
def test_characterize_from_vectors_names_what_validate_calls_an_error(tmp_path, probe_file_parts, what):
    arrays = dict(probe_file_parts, meta=_meta())
    arrays.update(CORRUPT[what](len(arrays["d"])))
    path = tmp_path / "corrupt.npz"
    np.savez_compressed(path, **{k: np.asarray(v) for k, v in arrays.items()})
    rc, out, err = run_cli("validate", str(path))
    assert rc == 1 and "ERROR" in out
    assert_named_error(*run_cli("characterize", "A100", AMPERE, "--from-vectors", str(path)))


def test_characterize_from_vectors_reads_the_uncorrupted_file(tmp_path, probe_file_parts):
    path = tmp_path / "good.npz"
    np.savez_compressed(path, meta=_meta(), **probe_file_parts)
    rc, out, _ = run_cli("characterize", "A100", AMPERE, "--from-vectors", str(path))
    # the simulated words of Ampere's table: its own F = 24 window read back
    assert rc == 0 and "F = 24" in out


def test_harness_run_bounds_the_tiles_it_draws(tmp_path):
    from mmasim.harness import measure as hrun
    from mmasim.errors import HarnessError
    for bad in (0, hrun.MAX_TILES + 1, 10 ** 12, 2.5, True):
        with pytest.raises(HarnessError, match="cases"):
            hrun.measure("Ampere", tmp_path, cases=bad, device=hrun.SimulatedDevice("simulated GPU", "8.0"))
