"""Error messages name the problem in the user's terms.

- an illegal sparse selector is named by its case in the batch the caller passed (not by its
  row within the chunk a thread computed), by its row in the matrix form, and by its row and
  K tile in ``gemm``;
- a bad ``MMASIM_THREADS`` under ``mmasim validate`` is one error about ``MMASIM_THREADS``;
- a selector operand's error lists the values allowed (PTX ISA 9.0 Table 37 for the scale
  factors' byte-id: 0-3 for ``scale_vec::1X``, 0 or 2 for ``2X``, 0 for ``4X``), not the
  table's formula;
- a negative word of an unsigned format suggests no two's complement dtype.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import mmasim
from mmasim.execution import threads
from mmasim.vectors import files as vectors
from mmasim.cli.main import main

SPARSE = ("A100", "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
LEGAL, ILLEGAL = 0x4444, 0x4440     # PTX: selector 0b0100 keeps elements 0 and 1; 0b0000 is invalid


def _sparse():
    return mmasim.MMA(*SPARSE)


def test_an_illegal_selector_is_named_by_its_case_in_the_whole_batch():
    m = _sparse()
    rows = 3 * (m.CHUNK_ELEMENTS // m.k)          # three chunks of rows
    md = np.full((rows, 1), LEGAL, np.uint32)
    bad = rows - 5                                  # in the third chunk
    md[bad, 0] = ILLEGAL
    z = np.zeros((rows, 16), np.uint16)
    with pytest.raises(mmasim.SparseMetadataError, match=rf"selector 0x0 for chunk 0 of sparse_metadata\[{bad}\] "):
        m.dot(z, z, np.zeros(rows, np.uint32), sparse_metadata=md)


def test_an_illegal_selector_in_a_2d_batch_is_named_by_both_indices():
    m = _sparse()
    md = np.full((3, 5000, 1), LEGAL, np.uint32)
    md[2, 4321, 0] = 0x4404                         # chunk 1 (bits 7:4) of that case
    z = np.zeros((3, 5000, 16), np.uint16)
    with pytest.raises(mmasim.SparseMetadataError, match=r"for chunk 1 of sparse_metadata\[2, 4321\] "):
        m.dot(z, z, 0, sparse_metadata=md)


def test_an_illegal_selector_in_the_matrix_form_is_named_by_its_row():
    m = _sparse()
    md = np.full((16, 1), LEGAL, np.uint32)
    md[11, 0] = ILLEGAL
    with pytest.raises(mmasim.SparseMetadataError, match="for chunk 0 of row 11 of sparse_metadata"):
        m(np.zeros((16, 16), np.uint16), np.zeros((16, 8), np.uint16), np.zeros((16, 8), np.uint32),
          sparse_metadata=md)


def test_an_illegal_selector_in_gemm_is_named_by_its_row_and_k_tile():
    m = _sparse()
    md = np.full((32, 3), LEGAL, np.uint32)         # one word per row and K tile
    md[20, 1] = ILLEGAL
    with pytest.raises(mmasim.SparseMetadataError, match="row 20, K tile 1 of sparse_metadata"):
        mmasim.gemm(np.zeros((32, 48), np.uint16), np.zeros((48, 8), np.uint16), np.zeros((32, 8), np.uint32),
                    model=m, sparse_metadata=md)


def test_validate_with_a_bad_mmasim_threads_says_so_once(monkeypatch, capsys):
    monkeypatch.setenv("MMASIM_THREADS", "abc")
    files = sorted(vectors.bundled_root().rglob("*.npz"))[:2]
    assert main(["validate", *map(str, files)]) == 1
    out = capsys.readouterr()
    assert out.err.strip().splitlines() == [
        "mmasim: error: environment variable MMASIM_THREADS must be a positive integer (the threads to compute "
        f"on), not 'abc'; unset it to use every core ({threads.default_threads()})"]
    assert "no vectors found" not in out.out + out.err


def _scaled(vec: str):
    names = [i for i in mmasim.instructions("RTX 5090") if f"scale_vec::{vec}" in i and "m16n8k" in i]
    return mmasim.MMA("RTX 5090", names[0])


@pytest.mark.parametrize("vec,bad,allowed", [("1X", 4, "byte_id is 0, 1, 2 or 3"), ("2X", 1, "byte_id is 0 or 2"),
                                             ("4X", 2, "byte_id is 0,")])
def test_scale_selector_errors_list_the_ptx_table_37_values(vec, bad, allowed):
    with pytest.raises(mmasim.OperandError) as e:
        _scaled(vec).layout("scale_a", byte_id=bad)
    text = str(e.value)
    assert allowed in text
    assert not re.search(r"<=|==| if | else |\bV\b", text), text     # no formula of the table


def test_sparsity_selector_error_lists_the_values_in_words():
    with pytest.raises(mmasim.OperandError) as e:
        _sparse().layout("sparse_metadata", selector=7)
    assert "selector is 0" in str(e.value) and not re.search(r"<=|==", str(e.value))


def test_tcgen05_lane_alignment_values_read_as_0_or_16():
    # PTX ISA 9.0 §9.7.16.10.5: the half-data-path layouts start at lane 0 or 16 of a sub-partition
    rules = [r for r in mmasim.layouts() if "lane_alignment" in getattr(r, "selectors", ())]
    assert rules and all(r.legal_values().endswith("lane_alignment is 0 or 16") for r in rules)


def test_an_unsigned_operand_error_suggests_no_twos_complement():
    u8 = mmasim.MMA("A100", "mma.sync.m16n8k32.s32.u8.u8")
    with pytest.raises(mmasim.WordRangeError) as e:
        u8.dot(np.full(32, -1, np.int8), np.zeros(32, np.uint8), 0)
    assert "two's complement" not in str(e.value) and "non-negative" in str(e.value)
    s8 = mmasim.MMA("A100", "mma.sync.m16n8k32.s32.s8.s8")
    with pytest.raises(mmasim.WordRangeError, match="pass int8 for two's complement"):
        s8.dot(np.full(32, -1, np.int16), np.zeros(32, np.uint8), 0)
