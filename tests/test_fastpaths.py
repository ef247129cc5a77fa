"""Which fast path takes a datapath, and its bound proofs, decided in one module per family.

``mmasim/backends/fastpaths/`` decides for the numpy lean paths, the numba kernels and the CUDA
bodies, a module per accumulator family.  Here its decisions on chosen datapaths are checked against values worked by hand from the tables'
parameters and the formats' fields (docs/datapaths.md §1: a binary format of M fraction bits
has significands of M + 1 bits and r - q = M), a constructed datapath is refused by the
binary64-lane proof with the numbers worked out, and the backends' modules are scanned for
decisions or bound checks of their own.
"""

import ast
import pathlib

import attrs
import pytest

import mmasim
from mmasim.backends import fastpaths
from mmasim.backends.fastpaths import ieee_chains, shared, window
from mmasim.backends.fastpaths.shared import TileLayout
from mmasim.execution.model import Model
from mmasim.registry.build import get_registry

ROOT = pathlib.Path(__file__).resolve().parents[1]
AMPERE_F16 = ("A100", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
# the tile kernels' layout as docs/performance.md gives it: r + 2048 in the 12 low bits of a
# tabled element; 2**-quantum built for |quantum| <= 1000; joint q -1000 for a zero factor
LAYOUT = TileLayout(tcode=12, rbias=2048, neg_f=1000, dead=-1000)
F32_KIND = 2    # tiles._c_kind of binary32 decoded arithmetically


def _ampere_f16(F):
    """The A100's f16 datapath with F replaced (a datapath made in code)."""
    base = mmasim.MMA(*AMPERE_F16)
    return Model(attrs.evolve(base.datapath, params={"F": F, "zeros": -132}), base.registry)


def test_ampere_f16_lean_window_bound_worked_by_hand():
    m = mmasim.MMA(*AMPERE_F16)
    F, step = m.plan.parameters["F"], m.plan.step
    assert (F, step) == (24, 8)     # archs/ampere.toml: F = 24, chunk = 8
    d = window.lean_window(m.plan)
    assert d and d.roff == 10 + 10                   # f16: r - q = M = 10, per factor
    v = d.bound.values
    assert v["bits"] == 11 + 11                      # two 11-bit significands
    assert v["S"] == F - 20 == 4                     # the largest left shift of a truncation
    assert v["shifted_bits"] == 22 + 4 <= 62
    assert v["total_bits"] == F + 2 + 4              # two factors, bits(8) = 4


def test_lane_proof_refuses_F_plus_bits_past_53():
    # f16 x f16 into f32, steps of 8: a truncated product is below 2**(F + 2), the step's sum
    # below 8 * 2**(F + 2) = 2**(F + 5): exact in binary64 for F + 2 + bits(8) <= 53
    ok, past = _ampere_f16(47), _ampere_f16(48)
    d = window.lane_tiles(ok.plan, LAYOUT, F32_KIND, F32_KIND)
    assert d, d.reason
    assert d.bound.values["total_bits"] == 47 + 2 + 4 == 53
    assert d.bound.values["product_bits"] == 22
    # |r| <= 15 per f16 factor, 129 for f32 (2**8 - 127): 129 + F + 64 < 1000
    assert d.bound.values["exponent_reach"] == 129 + 47 + 64
    no = window.lane_tiles(past.plan, LAYOUT, F32_KIND, F32_KIND)
    assert not no and "binary64 lane bound" in no.reason and "total_bits 54" in no.reason
    # the int64 lean numpy window still takes it: 22 bits shifted by 48 - 20 = 28 fit 62
    lean = window.lean_window(past.plan)
    assert lean and lean.bound.values["shifted_bits"] == 22 + 28


def test_the_numba_builder_follows_the_lane_proof():
    pytest.importorskip("numba")
    from mmasim.backends import kernel_for
    from mmasim.backends.numba import kernels

    assert kernels.LAYOUT == LAYOUT         # the layout worked with above is the kernels'
    assert kernel_for(_ampere_f16(47)).fn.__name__.startswith("window_lean_kernel")
    assert kernel_for(_ampere_f16(48)).fn.__name__ == "window_kernel"    # the general kernel


def test_nvfp4_grouped_budget_worked_by_hand():
    m = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    p = m.plan.parameters
    assert (p["F"], p["c_dominant"]["F"], p["c_dominant"]["group"], p["group"]) == (39, 35, 16, 4)
    assert not window.one_product_window(m.plan) and "group 4" in window.one_product_window(m.plan).reason
    d = window.lean_grouped(m.plan)
    assert d and d.cd == (35, 16)
    # e2m1 (M 1, bias 1): values m * 2**q with q >= -1; the largest, 6 = 3 * 2**1, aligned to
    # q = -1 is 12: the largest joint entry 12 * 12, sixteen of them in a C-dominant group
    j = d.joint
    assert (j.roff, j.q0, j.bshift) == (1 + 1, -1 - 1, 4)
    assert int(abs(j.P).max()) == 144
    v = d.bound.values
    assert v["group_sum"] == 144 * 16 < 1 << 31
    assert v["scale_off"] == 3                       # ue4m3: r - q = M = 3
    # max(F, Fc) + 4 factors + bits(16) + bits(step 64) + 1
    assert v["total_bits"] == 39 + 4 + 5 + 7 + 1 == 56
    assert window.grouped_tiles(m.plan, LAYOUT)
    assert not window.grouped_tiles(m.plan, LAYOUT._replace(dead=-999))


def test_sparse_goes_to_the_reference_in_numpy_and_to_the_tiles_in_numba():
    reg = get_registry()
    sparse = next(Model(dp, reg) for dp in reg.architectures["Ampere"].datapaths
                  if dp.sparse and dp.a == "f16" and dp.d == "f32")
    no = window.lean_window(sparse.plan)
    assert not no and "sparse" in no.reason
    assert window.lane_tiles(sparse.plan, LAYOUT, F32_KIND, F32_KIND)   # rows arrive compacted


def test_fma_product_bound_by_hand():
    f = get_registry().formats
    b = ieee_chains.fma_product_bound(f["f32"], f["f32"])
    assert b and b.values["product_bits"] == 23 + 23 + 2
    b = ieee_chains.fma_product_bound(f["f64"], f["f64"])
    assert not b and b.values["product_bits"] == 52 + 52 + 2


def test_mul_add_into_f16_is_refused_with_its_reason():
    # Ampere m8n8k4 with an f16 D: rounded into f16, which the IEEE chain kernels do not
    reg = get_registry()
    dp = next(dp for dp in reg.architectures["Ampere"].datapaths
              if dp.accumulator == "mul_add_chain" and dp.d == "f16")
    d = ieee_chains.numba_mul_add(Model(dp, reg).plan)
    assert not d and d.reason == "rounding into f16 (f32 or f64 only)"


def test_packed_bound_of_e4m3_by_hand():
    fmt = get_registry().formats["e4m3"]
    b = shared.packed_bound(fmt, get_registry().decoders[fmt.decoder])
    assert b and b.values["m_max"] == 0b1111          # 1.875 * 2**k: m = 15 (M = 3)


# -------------------------------------------------------------- the structure
#: what the backends' modules decided or proved for themselves before this module owned it
MOVED = {"word_tables", "code_tables", "one_product_window", "GROUP_RULES", "_narrow", "_scale_bounds",
         "_per_format", "_is_builtin", "_ieee_ok", "CODE_BITS"}
#: a bound check compares with one of these bit budgets (or with a power of two of 9 bits or more)
BUDGETS = {31, 52, 53, 62}
#: where kernels.py keeps the decode specs' layout (the word fields a spec can hold)
SPEC_LAYOUT = {"_format_specs", "format_spec", "format_records", "encoding_record", "Kernel"}


def _budget(node) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value in BUDGETS
    return (isinstance(node, ast.BinOp) and isinstance(node.op, ast.LShift) and isinstance(node.right, ast.Constant)
            and isinstance(node.right.value, int) and node.right.value >= 9)


def _own_checks(source, path):
    """``(defined moved names, bound comparisons, bit counts)`` of a module's source, outside SPEC_LAYOUT."""
    tree = ast.parse(source)
    defined, compares, counts = set(), [], []
    for top in tree.body:
        names = {t.id for t in getattr(top, "targets", []) if isinstance(t, ast.Name)}
        names |= {top.name} if isinstance(top, (ast.FunctionDef, ast.ClassDef)) else set()
        defined |= names & MOVED
        if names & SPEC_LAYOUT:
            continue
        for node in ast.walk(top):
            if isinstance(node, ast.Compare) and any(_budget(x) for n in [node.left, *node.comparators]
                                                     for x in ast.walk(n)):
                compares.append(f"{path}:{node.lineno}")
            if isinstance(node, ast.Call) and "bit_length" in ast.unparse(node.func):
                counts.append(f"{path}:{node.lineno}")
    return defined, compares, counts


@pytest.mark.parametrize("path", ["mmasim/backends/numpy/lean.py", "mmasim/backends/numba/kernels.py"])
def test_the_backends_prove_no_bounds_of_their_own(path):
    defined, compares, counts = _own_checks((ROOT / path).read_text(encoding="utf-8"), path)
    assert not defined, f"{path} defines what mmasim/backends/fastpaths/ owns: {sorted(defined)}"
    assert not compares, f"bound checks outside mmasim/backends/fastpaths/: {compares}"
    assert not counts, f"bit budgets counted outside mmasim/backends/fastpaths/: {counts}"


def test_the_scan_sees_a_bound_check():
    # the scan itself: a builder with its own budget is caught, a decode spec's layout is not
    source = ("def _build(plan):\n    if plan.F + 2 > 53:\n        return None\n"
              "    return (1).bit_length() <= 1 << 9\n\n\ndef _format_specs(plan):\n    return plan.E > 62\n")
    _, compares, counts = _own_checks(source, "probe.py")
    assert compares == ["probe.py:2", "probe.py:4"] and counts == ["probe.py:4"]


def test_every_builder_asks_its_familys_kernel_decision():
    from mmasim.backends.numba import BUILDERS

    assert set(fastpaths.KERNELS) == set(BUILDERS)
    tree = ast.parse((ROOT / "mmasim/backends/numba/kernels.py").read_text(encoding="utf-8"))
    funcs = {f.name: f for f in tree.body if isinstance(f, ast.FunctionDef)}
    for family, name in BUILDERS.items():
        calls = [ast.unparse(c.func) for c in ast.walk(funcs[name]) if isinstance(c, ast.Call)]
        asked = [c.split(".") for c in calls if c.startswith("fastpaths.")]
        decisions = [getattr(getattr(fastpaths, mod), fn) for _, mod, fn in asked]
        assert fastpaths.KERNELS[family] in decisions, f"{name} ({family}) does not ask fastpaths.KERNELS[{family!r}]"
    lean = ast.parse((ROOT / "mmasim/backends/numpy/lean.py").read_text(encoding="utf-8"))
    inits = {c.name: {ast.unparse(x.func) for x in ast.walk(c) if isinstance(x, ast.Call)}
             for c in lean.body if isinstance(c, ast.ClassDef)}
    assert "lean_window" in inits["LeanWindow"] and "lean_grouped" in inits["LeanGrouped"]


def test_the_cuda_bodies_take_the_plans_the_cpu_kernels_take():
    pytest.importorskip("numba")
    from mmasim.backends.cuda.rows import BODIES

    assert set(BODIES) == set(fastpaths.KERNELS)
    for family, bodies in BODIES.items():
        # the family's last body takes what the CPU kernel takes; any before it a part of that
        assert bodies[-1].decision is fastpaths.KERNELS[family], family
    assert [b.decision for b in BODIES["window"]] == [window.one_product_window, window.numba_window]
    reg = get_registry()
    for arch in reg.architectures.values():
        for dp in arch.datapaths:
            if dp.accumulator == "window":
                plan = Model(dp, reg).plan
                assert not window.one_product_window(plan) or window.numba_window(plan), (arch.name, dp)

