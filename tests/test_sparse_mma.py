"""Sparse MMAs: mma.sp / mma.sp::ordered_metadata, wgmma.mma_async.sp and v_smfmac
(docs/datapaths.md §11).

The metadata semantics below are written from the ISA texts, not from mmasim.arith.sparse:

- PTX ISA, "Sparse matrix storage" (mma.sp and wgmma.mma_async.sp): a chunk of four
  elements keeps two, "their positions in the four-wide chunk ... are indicated by two
  2-bit indices in the metadata operand"; "Values 0b0000, 0b0101, 0b1010, 0b1111 are
  invalid values for metadata". tf32 (1:2): "0b1110 and 0b0100 are the only meaningful
  index values" (0b0100 = the first element, 0b1110 = the second: the indices name the
  16-bit halves, 0,1 or 2,3). e2m1 with kind::mxf4 / mxf4nvf4: "pair-wise structured
  sparse at a granularity of 4:8", the 2-bit indices naming two-wide sub-chunks; the
  same for .u4 / .s4 A and B ("matrix A is pair-wise structured sparse at a granularity
  of 4:8 ... positions of the two two-wide sub-chunks ... indicated by two 2-bit
  indices"), under the general invalid values for mma.sp.
- PTX ISA, mma.sp: "Instruction mma.sp::ordered_metadata requires the indices in the
  sparsity metadata to be sorted in an increasing order starting from LSB".
- AMD: in each chunk of four K positions two values are stored, two bits per stored
  value name its position, the first value's index in the low bits (AMD Matrix
  Instruction Calculator, CDNA3 SMFMAC compression index); "for each index pair,
  index0 < index1" (AMD hipSPARSELt, MI300 features).

The row's metadata words hold one 4-bit field per chunk of the logical K, chunk ``i``
in bits ``4i+3:4i`` of word ``i // 8`` (docs/datapaths.md §6, §11).

Arithmetic: the sparse result must equal the dense instruction of the same
architecture, kind and types at half the K on the selected elements, whatever the
unselected words hold (NaN and inf included).
"""

import itertools
import subprocess
import sys

import numpy as np
import pytest

import mmasim
from helpers import f16, f32, f32_value
from wordgen import seed, words

NEW_OPS = ("mma.sync", "wgmma.mma_async", "v_smfmac")


def _new_sparse():
    out = []
    for arch in mmasim.architectures():
        if arch == "Blackwell Ultra":
            continue            # inherits the Blackwell tables (tcgen05 only; its mma.sync is B200's)
        for dp, name in zip(mmasim.datapaths(arch), mmasim.instructions(arch)):
            if dp.sparse and dp.op in NEW_OPS:
                out.append((arch, name))
    return out


SPARSE = _new_sparse()
IDS = [f"{a}:{n}" for a, n in SPARSE]


# ------------------------------------------------------------ ISA semantics
def _family(model):
    """The ISA's metadata family of an instruction: (chunk, unit, legal nibbles -> positions)."""
    dp = model.datapath
    increasing = {s: (s & 3, s >> 2) for s in range(16) if (s & 3) < (s >> 2)}
    distinct = {s: (s & 3, s >> 2) for s in range(16) if (s & 3) != (s >> 2)}
    if model.a_format.name == "tf32":
        return 2, 1, {0b0100: (0,), 0b1110: (1,)}
    if dp.op == "v_smfmac":
        return 4, 1, increasing
    if dp.kind in ("mxf4", "mxf4nvf4"):
        return 8, 2, increasing          # only mma.sp::ordered_metadata spells them
    if model.a_format.name in ("s4", "u4"):
        # 4:8 pair-wise: each 2-bit index names a two-wide sub-chunk of a chunk of eight; the
        # general rule (the indices differ) for .sp, increasing for ::ordered_metadata
        return 8, 2, (increasing if "sp::ordered_metadata" in model.instruction else distinct)
    if "sp::ordered_metadata" in model.instruction:
        return 4, 1, increasing
    return 4, 1, distinct


def _positions(chunk, unit, legal, nibbles):
    out = []
    for i, s in enumerate(nibbles):
        for p in legal[s]:
            out += [i * chunk + p * unit + u for u in range(unit)]
    return out


def _pack(nibbles, nwords):
    md = 0
    for i, s in enumerate(nibbles):
        md |= int(s) << (4 * i)
    return [(md >> (32 * w)) & 0xFFFFFFFF for w in range(nwords)]


def _nwords(k, chunk):
    return -(-(k // chunk) // 8)


def _dense_twin(arch, model):
    """The dense instruction of ``model``'s architecture with the same op, kind, types and
    scaling at half the (logical) K, by its canonical name."""
    sp = model.datapath
    if sp.op == "mma.sync" and not sp.kind and sp.a in ("e4m3", "e5m2") and arch in ("Hopper", "Blackwell"):
        # the dense fp8 mma.sync there is ptxas's two-step lowering; the sparse form keeps a
        # one-window model (docs/datapaths.md section 3): Hopper's wgmma fp8, B200's F = 25 window
        if arch == "Hopper":
            return mmasim.MMA("H100", f"wgmma.mma_async.m64n8k32.f32.{sp.a}.{sp.b}")
        return mmasim.MMA("RTX 5090", f"mma.sync.m16n8k32.f32.{sp.a}.{sp.b}.f32")
    for dp, name in zip(mmasim.datapaths(arch), mmasim.instructions(arch)):
        if dp.sparse or dp.k * 2 != sp.k:
            continue
        op = "v_mfma" if sp.op == "v_smfmac" else sp.op
        same = (dp.op, dp.kind, dp.a, dp.b, dp.c, dp.d, dp.scale, dp.block, dp.scale_vec, dp.saturate) == \
               (op, sp.kind, sp.a, sp.b, sp.c, sp.d, sp.scale, sp.block, sp.scale_vec, sp.saturate)
        if same and (not dp.m or not sp.m or set(dp.m) & set(sp.m)) and \
                (not dp.n or not sp.n or set(dp.n) & set(sp.n)):
            return mmasim.MMA(arch, name)
    raise AssertionError(f"{arch}: no dense twin of {model.instruction}")


def _exact_integer(model, sel_a, sel_b, c):
    """The ISA's integer result: the exact sum of the selected products plus C, wrapped to
    32 bits, or clamped to the s32 range with .satfinite (PTX ISA, mma.sp)."""
    def value(w, fmt):
        w = int(w)
        bits = {"s8": 8, "s4": 4}.get(fmt.name)
        return w - (1 << bits) if bits and w >= 1 << (bits - 1) else w
    out = []
    for ra, rb, rc in zip(sel_a, sel_b, c):
        cv = int(rc) - 2**32 if int(rc) >= 2**31 else int(rc)
        total = cv + sum(value(x, model.a_format) * value(y, model.b_format) for x, y in zip(ra, rb))
        if model.datapath.saturate:
            total = max(-(2**31), min(2**31 - 1, total))
        out.append(total % 2**32)
    return np.array(out, dtype=np.uint64)


def _case(model, rows, rng, chunk, unit, legal):
    k = model.k
    nib = rng.choice(sorted(legal), size=(rows, k // chunk))
    pos = np.array([_positions(chunk, unit, legal, r) for r in nib])
    md = np.array([_pack(r, _nwords(k, chunk)) for r in nib], dtype=np.uint32)
    return nib, pos, md


# ------------------------------------------------------------ sparse == masked dense
@pytest.mark.parametrize("arch,name", SPARSE, ids=IDS)
def test_sparse_equals_dense_on_the_selected_elements_whatever_the_unselected_hold(arch, name):
    m = mmasim.MMA(arch, name, backend="numpy")
    integer = m.d_format.integer
    if not integer:
        dense = _dense_twin(arch, m)
        dense.backend = "numpy"
    chunk, unit, legal = _family(m)
    rng = np.random.default_rng(seed("masked" + arch + name))
    rows, k = 48, m.k
    _, pos, md = _case(m, rows, rng, chunk, unit, legal)
    a = words(m.a_format, (rows, k), rng, "mixed")
    b = words(m.b_format, (rows, k), rng, "mixed")
    c = words(m.c_format, (rows,), rng, "mixed")
    kw = {}
    if m.datapath.scale:
        blocks = m.datapath.blocks
        kw = dict(scale_a=words(m.scale_format, (rows, blocks), rng, "near_one"),
                  scale_b=words(m.scale_format, (rows, blocks), rng, "near_one"))
    sel_a = np.take_along_axis(a, pos, axis=1)
    sel_b = np.take_along_axis(b, pos, axis=1)
    want = _exact_integer(m, sel_a, sel_b, c) if integer else dense.dot(sel_a, sel_b, c, **kw)
    keep = np.zeros((rows, k), dtype=bool)
    np.put_along_axis(keep, pos, True, axis=1)
    for fill in ("edge", "uniform"):     # edge: zeros, max, inf and NaN where the format has them
        a2 = np.where(keep, a, words(m.a_format, (rows, k), rng, fill))
        b2 = np.where(keep, b, words(m.b_format, (rows, k), rng, fill))
        got = m.dot(a2, b2, c, sparse_metadata=md, **kw)
        assert np.array_equal(got.astype(np.uint64), want.astype(np.uint64)), (fill, np.flatnonzero(got != want)[:5])


@pytest.mark.parametrize("arch,name", SPARSE, ids=IDS)
def test_sparse_numpy_and_numba_backends_agree(arch, name):
    pytest.importorskip("numba")
    m = mmasim.MMA(arch, name)
    chunk, unit, legal = _family(m)
    rng = np.random.default_rng(seed("backends" + arch + name))
    rows = 8
    _, _, md = _case(m, rows, rng, chunk, unit, legal)
    a = words(m.a_format, (rows, m.k), rng, "mixed")
    b = words(m.b_format, (rows, m.k), rng, "mixed")
    c = words(m.c_format, (rows,), rng, "mixed")
    kw = {}
    if m.datapath.scale:
        kw = dict(scale_a=words(m.scale_format, (rows, m.datapath.blocks), rng, "near_one"),
                  scale_b=words(m.scale_format, (rows, m.datapath.blocks), rng, "near_one"))
    x = m.dot(a, b, c, sparse_metadata=md, backend="numpy", **kw)
    y = m.dot(a, b, c, sparse_metadata=md, backend="numba", **kw)
    assert np.array_equal(x, y)


# ------------------------------------------------------------ illegal metadata
@pytest.mark.parametrize("arch,name", SPARSE, ids=IDS)
def test_every_metadata_nibble_is_accepted_or_rejected_as_the_isa_says(arch, name):
    m = mmasim.MMA(arch, name, backend="numpy")
    chunk, unit, legal = _family(m)
    k = m.k
    chunks = k // chunk
    ok = sorted(legal)[0]
    a = words(m.a_format, (1, k), np.random.default_rng(1), "near_one")
    kw = {}
    if m.datapath.scale:
        one = words(m.scale_format, (1, m.datapath.blocks), np.random.default_rng(2), "near_one")
        kw = dict(scale_a=one, scale_b=one)
    bad_chunk = chunks - 1
    for s in range(16):
        nib = [ok] * chunks
        nib[bad_chunk] = s
        md = np.array([_pack(nib, _nwords(k, chunk))], dtype=np.uint32)
        if s in legal:
            m.dot(a, a, np.zeros(1, dtype=np.uint64), sparse_metadata=md, **kw)
        else:
            with pytest.raises(mmasim.SparseMetadataError, match=f"chunk {bad_chunk}"):
                m.dot(a, a, np.zeros(1, dtype=np.uint64), sparse_metadata=md, **kw)


# ------------------------------------------------------------ worked values
def test_f16_sp_and_ordered_pick_the_indexed_elements():
    sp = mmasim.MMA("A100", "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    od = mmasim.MMA("A100", "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    a = [f16(float(i + 1)) for i in range(16)]
    b = [f16(1.0)] * 16
    # chunks: 0b1000 -> elements 0, 2; 0b1101 -> 1, 3; 0b1110 -> 2, 3; 0b0100 -> 0, 1 (per chunk of 4)
    md = 0x8 | 0xD << 4 | 0xE << 8 | 0x4 << 12
    want = (1 + 3) + (6 + 8) + (11 + 12) + (13 + 14)
    assert f32_value(int(sp.dot(a, b, 0, sparse_metadata=[md]))) == want
    assert f32_value(int(od.dot(a, b, 0, sparse_metadata=[md]))) == want
    # 0b0001 (element 1, then element 0): legal for mma.sp, not for ordered_metadata
    md = 0x1 | 0x4 << 4 | 0x4 << 8 | 0x4 << 12
    assert f32_value(int(sp.dot(a, b, 0, sparse_metadata=[md]))) == (2 + 1) + (5 + 6) + (9 + 10) + (13 + 14)
    with pytest.raises(mmasim.SparseMetadataError, match="chunk 0"):
        od.dot(a, b, 0, sparse_metadata=[md])


def test_tf32_metadata_0100_keeps_the_first_and_1110_the_second_element():
    m = mmasim.MMA("H100", "mma.sp.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32")
    a = [f32(float(i + 1)) for i in range(8)]
    b = [f32(1.0)] * 8
    assert f32_value(int(m.dot(a, b, 0, sparse_metadata=[0x4444]))) == 1 + 3 + 5 + 7
    assert f32_value(int(m.dot(a, b, 0, sparse_metadata=[0xEEEE]))) == 2 + 4 + 6 + 8
    assert f32_value(int(m.dot(a, b, 0, sparse_metadata=[0xE4E4]))) == 1 + 4 + 5 + 8


def test_mxf4_pairwise_metadata_selects_two_wide_sub_chunks():
    m = mmasim.MMA("RTX 5090", "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4"
                               ".block_scale.f32.e2m1.e2m1.f32.ue8m0")
    assert m.datapath.blocks == 2           # scale_vec::2X: two scales over the 64 stored elements
    one, two = 0x2, 0x4                     # e2m1 1.0, 2.0
    a = np.array([two if (i % 8) in (2, 3, 6, 7) else one for i in range(128)], dtype=np.uint8)
    b = np.full(128, one, dtype=np.uint8)
    # 0b1101: sub-chunks 1 and 3 (elements 2,3 and 6,7) in every chunk of 8 -> all twos
    md = [0xDDDDDDDD, 0xDDDDDDDD]
    d = m.dot(a, b, 0, scale_a=[0x7F, 0x7F], scale_b=[0x7F, 0x7F], sparse_metadata=md)
    assert f32_value(int(d)) == 64 * 2.0
    md = [0x44444444, 0x44444444]           # sub-chunks 0 and 1 -> elements 0..3: 1, 1, 2, 2
    d = m.dot(a, b, 0, scale_a=[0x7F, 0x7F], scale_b=[0x7F, 0x7F], sparse_metadata=md)
    assert f32_value(int(d)) == 16 * (1 + 1 + 2 + 2)


def test_smfmac_index_pairs_select_positions_in_chunks_of_four():
    m = mmasim.MMA("MI300X", "v_smfmac_f32_16x16x32_f16")
    a = [f16(float(i + 1)) for i in range(32)]
    b = [f16(1.0)] * 32
    md = 0xEEEEEEEE                         # index0 = 2, index1 = 3 in every chunk
    assert f32_value(int(m.dot(a, b, 0, sparse_metadata=[md]))) == sum(4 * c + 3 + 4 * c + 4 for c in range(8))
    with pytest.raises(mmasim.SparseMetadataError, match="chunk 7"):
        m.dot(a, b, 0, sparse_metadata=[0x6EEEEEEE])   # index0 = 2 > index1 = 1


def test_integer_sparse_wraps_or_saturates_at_the_s32_edges():
    wrap = mmasim.MMA("A100", "mma.sp.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32")
    sat = mmasim.MMA("A100", "mma.sp.sync.aligned.m16n8k32.row.col.satfinite.s32.s8.s8.s32")
    a = np.full(32, 127)
    md = [0x44444444]                       # 16 selected products of 127 * 127 = 258064
    assert int(wrap.dot(a, a, 0x7FFFFFFF, sparse_metadata=md)) == (2**31 - 1 + 258064) % 2**32
    assert int(sat.dot(a, a, 0x7FFFFFFF, sparse_metadata=md)) == 0x7FFFFFFF
    neg = np.full(32, 0x81)                 # s8 -127
    assert int(sat.dot(neg, a, 0x80000000, sparse_metadata=md)) == 0x80000000
    assert int(wrap.dot(neg, a, 0x80000000, sparse_metadata=md)) == (-(2**31) - 258064) % 2**32
    amd = mmasim.MMA("MI300X", "v_smfmac_i32_16x16x64_i8")     # no saturation: wraps
    a64 = np.full(64, 127)
    assert int(amd.dot(a64, a64, 0x7FFFFFFF, sparse_metadata=[0x44444444, 0x44444444])) == \
        (2**31 - 1 + 32 * 127 * 127) % 2**32


def test_s4_pairwise_metadata_selects_two_wide_sub_chunks():
    """Hand-worked: A holds 0..7 in every chunk of eight (u4), B ones. 0b1101 names
    sub-chunks 1 and 3 (elements 2, 3 and 6, 7): 2 + 3 + 6 + 7 = 18 per chunk; 0b0100
    sub-chunks 0 and 1: 0 + 1 + 2 + 3 = 6; 0b0001 (sub-chunk 1, then 0) keeps the same
    elements for mma.sp and is refused by mma.sp::ordered_metadata."""
    sp = mmasim.MMA("A100", "mma.sp.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32")
    od = mmasim.MMA("A100", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.u4.u4.s32")
    a = [i % 8 for i in range(64)]
    b = [1] * 64
    for m in (sp, od):
        assert int(m.dot(a, b, 0, sparse_metadata=[0xDDDDDDDD])) == 8 * 18
        assert int(m.dot(a, b, 0, sparse_metadata=[0x44444444])) == 8 * 6
        assert int(m.dot(a, b, 5, sparse_metadata=[0x4444444D])) == 5 + 18 + 7 * 6
    assert int(sp.dot(a, b, 0, sparse_metadata=[0x11111111])) == 8 * 6
    with pytest.raises(mmasim.SparseMetadataError, match="chunk 0"):
        od.dot(a, b, 0, sparse_metadata=[0x44444441])
    with pytest.raises(mmasim.SparseMetadataError, match="chunk 7"):
        sp.dot(a, b, 0, sparse_metadata=[0xA4444444])      # 0b1010: both indices 2
    # s4 at the s32 edges: 32 selected products of (-8) * (-8) = 2048 on C = 2^31 - 1
    s4 = mmasim.MMA("A100", "mma.sp.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32")
    s4sat = mmasim.MMA("A100", "mma.sp.sync.aligned.m16n8k64.row.col.satfinite.s32.s4.s4.s32")
    eights = [0x8] * 64
    assert int(s4.dot(eights, eights, 0x7FFFFFFF, sparse_metadata=[0x44444444])) == (2**31 - 1 + 2048) % 2**32
    assert int(s4sat.dot(eights, eights, 0x7FFFFFFF, sparse_metadata=[0x44444444])) == 0x7FFFFFFF


# ------------------------------------------------------------ spellings
PTX_EXAMPLES = [
    # the PTX ISA's own mma.sp examples (sm_80+ / sm_89+ / sm_120a)
    ("A100", "mma.sp.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"),
    ("A100", "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"),
    ("A100", "mma.sp.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32"),
    ("A100", "mma.sp.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    ("A100", "mma.sp.sync.aligned.m16n8k32.row.col.f32.bf16.bf16.f32"),
    ("A100", "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
    ("L40S", "mma.sp.sync.aligned.m16n8k64.row.col.f32.e5m2.e4m3.f32"),
    ("H100", "mma.sp::ordered_metadata.sync.aligned.m16n8k32.row.col.f16.f16.f16.f16"),
    ("B200", "mma.sp.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32"),
    ("RTX 5090", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e3m2.e2m3.f32"),
    ("RTX 5090", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f16.e2m3.e2m1.f16"),
    ("RTX 5090", "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1"
                 ".f32.ue8m0"),
    ("RTX 5090", "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.kind::mxf4nvf4.block_scale"
                 ".scale_vec::4X.f32.e2m1.e2m1.f32.ue4m3"),
    ("RTX 5090", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::mxf8f6f4.block_scale"
                 ".scale_vec::1X.f32.e3m2.e2m1.f32.ue8m0"),
    ("H100", "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16"),
    ("H100", "wgmma.mma_async.sp.sync.aligned.m64n256k16.f32.tf32.tf32"),
    ("H100", "wgmma.mma_async.sp.sync.aligned.m64n128k64.f16.e4m3.e5m2"),
    ("A100", "mma.sp.sync.aligned.m16n8k32.row.col.satfinite.s32.u8.u8.s32"),
    ("A100", "mma.sp.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.s8.s32"),
    ("H100", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.satfinite.s32.s8.s8.s32"),
    ("H100", "wgmma.mma_async.sp.sync.aligned.m64n8k64.satfinite.s32.u8.s8"),
    ("A100", "mma.sp.sync.aligned.m16n8k64.row.col.s32.s4.s4.s32"),
    ("A100", "mma.sp.sync.aligned.m16n8k128.row.col.satfinite.s32.u4.s4.s32"),
    ("L40S", "mma.sp::ordered_metadata.sync.aligned.m16n8k128.row.col.s32.u4.u4.s32"),
    ("H100", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.satfinite.s32.s4.u4.s32"),
    ("B200", "mma.sp.sync.aligned.m16n8k128.row.col.s32.s4.s4.s32"),
    ("RTX 5090", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.s32.u4.s4.s32"),
    ("H100", "mma.sp.sync.aligned.m16n8k64.row.col.f32.e4m3.e5m2.f32"),
    ("H100", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e5m2.e5m2.f32"),
    ("B200", "mma.sp.sync.aligned.m16n8k64.row.col.f32.e5m2.e4m3.f32"),
    ("B200", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32"),
    ("MI300X", "v_smfmac_f32_16x16x32_f16"),
    ("MI300X", "V_SMFMAC_F32_32X32X16_BF16"),
    ("MI300X", "v_smfmac_i32_16x16x64_i8"),
    ("MI300X", "v_smfmac_f32_16x16x64_fp8_bf8"),
    ("MI300X", "V_SMFMAC_F32_32X32X32_BF8_FP8"),
]


@pytest.mark.parametrize("arch,spelling", PTX_EXAMPLES)
def test_isa_spellings_resolve_to_an_assumed_sparse_datapath(arch, spelling):
    m = mmasim.MMA(arch, spelling)
    assert m.datapath.sparse and m.status.kind == "assumed"
    assert "not measured" in m.status.evidence


def _ptx_spelling(arch, m):
    dp = m.datapath
    name = m.instruction
    variant = "sp::ordered_metadata" if "sp::ordered_metadata" in name else "sp"
    t = lambda f: f.name   # noqa: E731
    sat = ".satfinite" if dp.saturate else ""
    if dp.op == "wgmma.mma_async":
        return (f"wgmma.mma_async.sp.sync.aligned.m64n{dp.n[-1]}k{dp.k}{sat}.{t(m.d_format)}.{t(m.a_format)}"
                f".{t(m.b_format)}")
    kind = f".kind::{dp.kind}" if dp.kind else ""
    scale = f".block_scale.scale_vec::{dp.scale_vec}" if dp.scale else ""
    stype = f".{t(m.scale_format)}" if dp.scale else ""
    return (f"mma.{variant}.sync.aligned.m16n8k{dp.k}.row.col{sat}{kind}{scale}.{t(m.d_format)}.{t(m.a_format)}"
            f".{t(m.b_format)}.{t(m.c_format)}{stype}")


@pytest.mark.parametrize("arch,name", [c for c in SPARSE if not c[0].startswith("CDNA")], ids=lambda x: str(x))
def test_every_new_nvidia_sparse_instruction_resolves_by_its_ptx_spelling(arch, name):
    m = mmasim.MMA(arch, name)
    assert mmasim.MMA(arch, _ptx_spelling(arch, m)).datapath == m.datapath


def test_every_smfmac_resolves_by_its_amd_mnemonic_in_both_cases():
    smfmac = [(a, n) for a, n in SPARSE if a == "CDNA3"]
    assert len(smfmac) == 14      # f16, bf16, i8 x 2 shapes; fp8/bf8 pairs x 2 shapes (CDNA3 ISA)
    for arch, name in smfmac:
        dp = mmasim.MMA(arch, name).datapath
        low = [x for x in dp.names if x.startswith("v_smfmac_")]
        assert low and all(mmasim.MMA(arch, x).datapath == dp for x in (low[0], low[0].upper()))


@pytest.mark.parametrize("arch,spelling", [
    ("RTX 5090", "mma.sp.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e4m3.e4m3.f32"),   # ordered only
    ("RTX 5090", "mma.sp.sync.aligned.m16n8k128.row.col.kind::mxf4.block_scale.f32.e2m1.e2m1.f32.ue8m0"),
    ("B200", "tcgen05.mma.sp::ordered_metadata.kind::f16"),                 # tcgen05 has no such variant
    ("H100", "wgmma.mma_async.sp::ordered_metadata.sync.aligned.m64n8k32.f32.f16.f16"),
    ("RTX 2080", "mma.sp.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),   # mma.sp requires sm_80
    ("A100", "mma.sp.sync.aligned.m16n8k64.row.col.f32.e4m3.e4m3.f32"),     # fp8 requires sm_89
    ("L4", "mma.sp.sync.aligned.m16n8k64.row.col.f16.e4m3.e4m3.f16"),       # kind-less sparse fp8: f32 D only
])
def test_spellings_ptx_does_not_define_are_refused(arch, spelling):
    with pytest.raises(mmasim.MMAError):
        mmasim.MMA(arch, spelling)


# ------------------------------------------------------------ list / explain
def _cli(*args):
    return subprocess.run([sys.executable, "-m", "mmasim", *args], capture_output=True, text=True, check=True).stdout


def test_new_sparse_instructions_appear_in_list_and_explain():
    by_arch = {}
    for arch, name in SPARSE:
        by_arch.setdefault(arch, []).append(name)
    for arch, names in by_arch.items():
        listing = _cli("list", arch)
        for name in names:
            assert name in listing, (arch, name)
    for arch, name in [SPARSE[0], ("MI300X", "v_smfmac_f32_16x16x32_f16"),
                       ("H100", "wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16")]:
        text = _cli("explain", arch, name)
        assert "validation: assumed" in text and "sparsity: chunks of" in text and "logical" in text, text


# ------------------------------------------------------------ matrix form and gemm
FAMILIES = [
    ("A100", "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32"),
    ("RTX 5090", "mma.sp::ordered_metadata.sync.aligned.m16n8k16.row.col.f32.tf32.tf32.f32"),
    ("RTX 5090", "mma.sp::ordered_metadata.sync.aligned.m16n8k64.row.col.kind::f8f6f4.f32.e4m3.e2m1.f32"),
    ("H100", "wgmma.mma_async.sp.sync.aligned.m64n16k32.f32.bf16.bf16"),
    ("MI300X", "v_smfmac_f32_16x16x32_f16"),
]


@pytest.mark.parametrize("arch,spelling", FAMILIES)
def test_matrix_form_and_gemm_equal_the_row_dot_products(arch, spelling):
    m = mmasim.MMA(arch, spelling, backend="numpy")
    M, N = m.datapath.m[0], (m.datapath.n[0] if len(m.datapath.n) == 1 else 16)
    k = m.k
    chunk, unit, legal = _family(m)
    rng = np.random.default_rng(seed("matrix" + arch + spelling))
    tiles = 2
    A = words(m.a_format, (M, tiles * k), rng, "near_one")
    B = words(m.b_format, (tiles * k, N), rng, "near_one")
    C = words(m.c_format, (M, N), rng, "near_one")
    nw = _nwords(k, chunk)
    nib = rng.choice(sorted(legal), size=(M, tiles, k // chunk))
    md = np.array([[w for t in range(tiles) for w in _pack(nib[i, t], nw)] for i in range(M)], dtype=np.uint32)
    # one instruction: row i of A against column j of B, the row's metadata words
    D1 = m(A[:, :k], B[:k], C, sparse_metadata=md[:, :nw])
    for i, j in itertools.product(range(0, M, 5), range(0, N, 3)):
        assert D1[i, j] == m.dot(A[i, :k], B[:k, j], C[i, j], sparse_metadata=md[i, :nw])
    # gemm: the D of tile 0 is the C of tile 1, each tile with its own metadata words
    D = mmasim.gemm(A, B, C, model=m, sparse_metadata=md)
    want = m(A[:, k:], B[k:], D1, sparse_metadata=md[:, nw:])
    assert np.array_equal(D, want)
    with pytest.raises(mmasim.SparseMetadataError):
        mmasim.gemm(A, B, C, model=m)
    with pytest.raises(mmasim.SparseMetadataError):
        mmasim.gemm(A, B, C, model=m, sparse_metadata=md[:, :nw])
