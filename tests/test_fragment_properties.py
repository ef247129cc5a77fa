"""Generic properties of every register / TMEM layout of every instruction mmasim knows:
coords is a bijection onto the operand matrix, owner inverts coords, fragments and
unfragment are inverse, and warp() on fragments equals the matrix form.  Block-scale
factors and sparse metadata are operands too; sparse instructions are sampled (one per
shape, element size and metadata rule), which keeps the cold suite cheap."""

import numpy as np
import pytest

import mmasim
from wordgen import seed, words

OPERANDS = ("a", "b", "c", "d", "scale_a", "scale_b", "sparse_metadata")


def _cases():
    out, seen = [], set()
    for arch in mmasim.architectures():
        for ins in mmasim.instructions(arch):
            try:
                m = mmasim.MMA(arch, ins)
            except mmasim.MMAError:
                continue        # a lookup a default does not fill (covered by the lookup tests)
            dp = m.datapath
            if dp.op in ("wgmma.mma_async", "tcgen05.mma"):
                continue        # shapes named per case: test_wgmma_and_tcgen05_layouts_round_trip
            if dp.sparse:       # one per shape, A element size, metadata rule and scaling
                key = ("sp", dp.op, dp.k, m.a_format.container_bits, m.sparse_rule.name, dp.scale, dp.scale_vec)
            else:
                key = (dp.op, dp.m, dp.n, dp.k, dp.a, dp.b, dp.c, dp.d, dp.kind, dp.scale, arch.startswith("CDNA"))
            if key in seen:
                continue
            seen.add(key)
            out.append((arch, ins))
    return out


CASES = _cases()


def _layouts(m):
    out = {}
    for o in OPERANDS:
        try:
            out[o] = m.layout(o)
        except mmasim.UnsupportedDatapath:
            pass
    return out


def _expected(m):
    """The operands the instruction has: A, B, C, D, and the scales / metadata where it takes them."""
    dp = m.datapath
    return set("abcd") | ({"scale_a", "scale_b"} if dp.scale else set()) \
        | ({"sparse_metadata"} if dp.sparse else set())


def _fmt(m, o):
    return m.format_of("scale" if o.startswith("scale") else o)


def _metadata(m, rows, rng):
    """Matrix-form metadata words (rows, words) of random legal chunk selectors."""
    rule = m.sparse_rule
    nib = rng.choice(sorted(rule.selectors), size=(rows, rule.chunks(m.datapath.k)))
    return mmasim.placement.metadata_words(nib)


def test_every_instruction_has_c_and_d_layouts():
    """Every datapath's C and D has a register (or TMEM) layout, except the documented gaps."""
    gaps = []
    for arch, ins in CASES:
        m = mmasim.MMA(arch, ins)
        lay = _layouts(m)
        if "d" not in lay or "c" not in lay:
            gaps.append(f"{arch}: {ins}")
    assert not gaps, gaps


@pytest.mark.parametrize("arch,ins", CASES, ids=lambda x: str(x))
def test_coords_bijection_owner_inverse_and_round_trip(arch, ins):
    m = mmasim.MMA(arch, ins)
    lay = _layouts(m)
    assert set(lay) == _expected(m), (ins, set(lay))
    rng = np.random.default_rng(seed(arch + ins))
    for o, L in lay.items():
        seen = {}
        valid = L.table()[2]      # scale factors and metadata: only the selected lanes / bytes hold one
        for lane in range(L.lanes):
            for i in range(L.elements):
                if not valid[lane, i]:
                    with pytest.raises(mmasim.ShapeError, match="holds no element"):
                        L.coords(lane, i)
                    continue
                rc = L.coords(lane, i)
                assert rc not in seen, (o, lane, i, rc, seen.get(rc))
                seen[rc] = (lane, i)
                assert L.owner(*rc) == (lane, i)
        assert set(seen) == {(r, c) for r in range(L.rows) for c in range(L.cols)}
        if o == "sparse_metadata":      # fragments / unfragment take the matrix form's words
            X = _metadata(m, L.rows, rng)
            regs = m.fragments(o, X)
            assert regs.dtype == np.uint32 and regs.shape == (L.lanes, L.registers) and L.registers == 1
            assert np.array_equal(m.unfragment(o, regs), X)
            continue
        fmt = _fmt(m, o)
        X = words(fmt, (L.rows, L.cols), rng, "uniform")
        regs = m.fragments(o, X)
        assert regs.dtype == np.uint32 and regs.shape == (L.lanes, L.registers)
        assert L.registers * 32 >= L.elements * fmt.container_bits
        assert np.array_equal(m.unfragment(o, regs).astype(np.uint64), X)


@pytest.mark.parametrize("arch,ins", CASES, ids=lambda x: str(x))
def test_warp_equals_matrix_form_on_random_words(arch, ins):
    m = mmasim.MMA(arch, ins, backend="numpy")
    lay = _layouts(m)
    assert set(lay) == _expected(m)
    rng = np.random.default_rng(seed("warp" + arch + ins))
    La, Lb, Lc = lay["a"], lay["b"], lay["c"]
    dp = m.datapath
    A = words(m.a_format, (La.rows, dp.k), rng, "mixed")      # the logical A (sparse: K, not K/2)
    B = words(m.b_format, Lb.shape, rng, "mixed")
    C = words(m.c_format, Lc.shape, rng, "mixed")
    kw, regs = {}, {}
    if dp.scale:    # the matrix form takes M x V / V x N scales, warp() the registers holding them
        kw = dict(scale_a=words(m.scale_format, (La.rows, dp.blocks), rng, "near_one"),
                  scale_b=words(m.scale_format, (dp.blocks, Lb.cols), rng, "near_one"))
        regs = {o: m.fragments(o, kw[o]) for o in ("scale_a", "scale_b")}
    a = A
    if dp.sparse:   # the compressed A in registers, the metadata words in registers
        kw["sparse_metadata"] = _metadata(m, La.rows, rng)
        regs["sparse_metadata"] = m.fragments("sparse_metadata", kw["sparse_metadata"])
        a = mmasim.placement.compress(m.placement, A, kw["sparse_metadata"])
    d_regs = m.warp(m.fragments("a", a), m.fragments("b", B), m.fragments("c", C), **regs)
    D = m.unfragment("d", d_regs)
    nb = La.blocks
    Mb, Kb = La.rows // nb, Lb.rows // nb
    want = np.concatenate([m(A[b * Mb:(b + 1) * Mb], B[b * Kb:(b + 1) * Kb], C[b * Mb:(b + 1) * Mb], **kw)
                           for b in range(nb)])
    assert np.array_equal(D, want)


def test_warp_equals_matrix_form_numba_backend():
    """One check on the compiled backend: the same D registers as the numpy backend."""
    pytest.importorskip("numba")
    m = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.bf16.bf16", backend="numba")
    rng = np.random.default_rng(7)
    A = words(m.a_format, (16, 16), rng, "mixed")
    B = words(m.b_format, (16, 8), rng, "mixed")
    C = words(m.c_format, (16, 8), rng, "mixed")
    regs = m.warp(m.fragments("a", A), m.fragments("b", B), m.fragments("c", C))
    assert np.array_equal(m.unfragment("d", regs), m(A, B, C, backend="numba"))
    assert np.array_equal(regs, m.warp(m.fragments("a", A), m.fragments("b", B), m.fragments("c", C),
                                       backend="numpy"))


def test_wgmma_and_tcgen05_layouts_round_trip():
    for arch, ins in [("H100", "wgmma.mma_async.m64n24k16.f32.bf16.bf16"),
                      ("H100", "wgmma.mma_async.m64n16k32.f16.e4m3.e5m2"),
                      ("H100", "wgmma.mma_async.m64n8k8.f32.tf32.tf32"),
                      ("B200", "tcgen05.mma.kind::f16.m128n16k16.f32.bf16.bf16"),
                      ("B200", "tcgen05.mma.kind::tf32.m64n24k8.f32.tf32.tf32")]:
        m = mmasim.MMA(arch, ins)
        rng = np.random.default_rng(seed(ins))
        for o, L in _layouts(m).items():
            X = words(_fmt(m, o), L.shape, rng, "uniform")
            assert np.array_equal(m.unfragment(o, m.fragments(o, X)).astype(np.uint64), X)
            rows, cols, valid = L.table()
            assert sorted(zip(rows[valid], cols[valid])) == [(r, c) for r in range(L.rows) for c in range(L.cols)]
        with pytest.raises(mmasim.UnsupportedDatapath, match="shared memory"):
            m.layout("b")
        # B is a shared-memory image read through its descriptor (tests/test_wgmma_warp.py)
        with pytest.raises(mmasim.OperandError, match="b_descriptor"):
            m.warp(np.zeros(1), np.zeros(1), np.zeros(1))


def test_bad_calls_raise_specific_errors():
    m = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16")
    with pytest.raises(mmasim.OperandError, match="operand must be one of"):
        m.layout("e")
    L = m.layout("a")
    with pytest.raises(mmasim.ShapeError, match="lane 32 is out of range"):
        L.coords(32, 0)
    with pytest.raises(mmasim.ShapeError, match="element 8 is out of range"):
        L.coords(0, 8)
    with pytest.raises(mmasim.ShapeError, match="must be 16x16"):
        m.fragments("a", np.zeros((16, 8), np.uint16))
    with pytest.raises(mmasim.ShapeError, match=r"\(32, 4\)"):
        m.unfragment("a", np.zeros((32, 3), np.uint32))
    with pytest.raises(mmasim.ShapeError, match="32-bit words"):
        m.unfragment("a", np.full((32, 4), 1 << 33, np.int64))
    with pytest.raises(mmasim.ShapeError, match="name it in the instruction"):
        mmasim.MMA("H100", "wgmma.mma_async.k16.f32.f16.f16").layout("d")
    with pytest.raises(mmasim.OperandError, match="alayout"):
        m.layout("a", alayout="diag")
