"""`mmasim compare`: input generation, the difference search, the report."""

import re
from fractions import Fraction

import numpy as np
import pytest

import mmasim
import mmasim.cli.main as cli
from mmasim import compare as cmp
from mmasim.arith import exact
from mmasim.operands import wordgen

TOY_TABLE_24 = {
    "architecture": {"name": "ToyF24", "vendor": "Example", "aliases": ["toy-f24"]},
    "datapath": [{"op": "mma.sync", "a": "f16", "b": "f16", "d": "f32", "k": 16, "chunk": 8,
                  "accumulator": "window", "params": {"F": 24, "zeros": -132}, "rounding": "rz-f32",
                  "m": [16], "n": [8]}],
}
TOY_TABLE_25 = {
    "architecture": {"name": "ToyF25", "vendor": "Example", "aliases": ["toy-f25"]},
    "datapath": [{"op": "mma.sync", "a": "f16", "b": "f16", "d": "f32", "k": 16,
                  "accumulator": "window", "params": {"F": 25, "zeros": -133}, "rounding": "rz-f32",
                  "m": [16], "n": [8]}],
}


class _ToyPlugin:
    @mmasim.hookimpl
    def mmasim_architectures(self):
        return [TOY_TABLE_24, TOY_TABLE_25]


@pytest.fixture
def toys():
    plugin = _ToyPlugin()
    mmasim.register(plugin, name="compare-toys")
    try:
        yield mmasim.MMA("ToyF24", "m16n8k16.f32.f16.f16.f32"), mmasim.MMA("ToyF25", "m16n8k16.f32.f16.f16.f32")
    finally:
        mmasim.unregister(name="compare-toys")


def test_window_f24_vs_f25_differ_and_the_example_is_shrunk(toys):
    ma, mb = toys
    res = cmp.compare(ma, mb, cases=2000, seed=1)
    assert res.count > 0
    ex = res.example
    assert ex.da != ex.db
    # the example is what both models compute on it
    row = ex.inputs
    assert int(ma.dot(row.a, row.b, row.c)[0]) == ex.da
    assert int(mb.dot(row.a, row.b, row.c)[0]) == ex.db
    # shrunk: removing any remaining term makes the difference vanish or keeps it (greedy),
    # and it has few nonzero terms
    assert ex.support <= 6
    text = cmp.report(res)
    assert "F: 24 vs 25" in text and "elements per step (L): 8 vs 16" in text
    assert "exact c + sum(a*b)" in text


def test_a_shrunk_example_names_its_case_and_says_it_is_not_counted(toys):
    ma, mb = toys
    res = cmp.compare(ma, mb, cases=2000, seed=1)
    ex = res.example
    # the case it started from is one of the counted ones, and differs there
    original = res.inputs.row(ex.origin)
    assert res.differ[ex.origin]
    assert int(ma.dot(original.a, original.b, original.c)[0]) != int(mb.dot(original.a, original.b, original.c)[0])
    assert ex.shrunk and not np.array_equal(original.a, ex.inputs.a)
    text = cmp.report(res)
    assert f"example, shrunk from generated case {ex.origin} ({res.inputs.kind[ex.origin]})" in text
    assert "the shrunk case is not one of the 2,000 counted cases" in text
    doc = cmp.to_json([res], 2000, 1)["pairs"][0]["example"]
    assert doc["from_case"] == ex.origin and doc["shrunk"] is True
    # without shrinking, the example is the generated case itself, and says nothing of the kind
    plain = cmp.compare(ma, mb, cases=2000, seed=1, shrink_example=False)
    assert not plain.example.shrunk and np.array_equal(plain.example.inputs.a, res.inputs.row(plain.example.origin).a)
    assert "not one of" not in cmp.report(plain) and f"example, generated case {plain.example.origin}" in cmp.report(plain)


def test_every_ulp_difference_reads_in_one_form(toys):
    """The error against the exact result and the difference between the results are both
    integers or fixed-point numbers, never one in exponent form beside the other."""
    from mmasim.operands.display import number_text

    assert number_text(-40960.0, signed=True) == "-40960" and number_text(40960) == "40960"
    assert number_text(-0.75, signed=True) == "-0.75" and number_text(1, signed=True) == "+1"
    assert number_text(-40960.5) == "-40960.5" and number_text(0.3333333) == "0.3333"
    ma, mb = toys
    text = cmp.report(cmp.compare(ma, mb, cases=2000, seed=1))
    assert not re.search(r"\de[+-]\d+ ulp", text), text


def test_identical_datapaths_never_differ():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::tf32")
    res = cmp.compare(m, m, cases=500, seed=3)
    assert res.count == 0 and res.example is None
    assert "no difference found" in cmp.report(res)


def test_same_seed_same_inputs(toys):
    ma, mb = toys
    a = cmp.generate(ma, mb, 300, seed=7)
    b = cmp.generate(ma, mb, 300, seed=7)
    assert (a.a == b.a).all() and (a.b == b.b).all() and (a.c == b.c).all()
    c = cmp.generate(ma, mb, 300, seed=8)
    assert (a.a != c.a).any()


def test_rows_are_split_over_the_named_kinds_by_their_shares():
    # 300 rows: 25 % random, 30 % near-one (plus what rounding leaves), 25 % cancellation, 20 % adversarial
    m = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    x = cmp.generate(m, m, 300, seed=0)
    names, counts = np.unique(x.kind, return_counts=True)
    assert dict(zip(names, counts)) == {"random": 75, "near-one": 90, "cancellation": 75, "adversarial": 60}
    assert list(x.kind[:75]) == ["random"] * 75 and x.kind[-1] == "adversarial"
    assert cmp.KINDS == ("random", "near-one", "cancellation", "adversarial")
    assert set(cmp.STRATEGIES) == set(cmp.Kind)
    # 7 rows: int(7 * share) = 1, 2, 1, 1; the two left over go to near-one
    assert list(cmp.generate(m, m, 7, seed=0).kind) == ["random"] + ["near-one"] * 4 + ["cancellation", "adversarial"]


def test_generated_words_respect_the_formats():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::f8f6f4", a_type="e2m1", b_type="e3m2", d_type="f32")
    x = cmp.generate(m, m, 400, seed=0)
    assert int(x.a.max()) < 256 and int(x.b.max()) < 256 and int(x.c.max()) < 2 ** 32
    m.dot(x.a, x.b, x.c)                 # no OperandError
    nv = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    x = cmp.generate(nv, nv, 200, seed=0)
    assert int(x.a.max()) < 16 and x.scale_a.shape == (200, 4)
    assert (x.scale_a & 0x80 == 0).all() or True
    nv.dot(x.a, x.b, x.c, scale_a=x.scale_a, scale_b=x.scale_b)
    sp = mmasim.MMA("B200", "tcgen05.mma.sp.kind::f16.f32.f16.f16")
    x = cmp.generate(sp, sp, 200, seed=0)
    sp.dot(x.a, x.b, x.c, sparse_metadata=x.sparse_metadata)   # every selector legal


def test_padding_stays_zero_when_containers_differ():
    # e2m1 of kind::f8f6f4 sits in bits 5:2: with two identical formats the
    # padding is random, and any compare between two readings of it keeps it zero
    m = mmasim.MMA("B200", "tcgen05.mma.kind::f8f6f4", a_type="e2m1", b_type="e2m1", d_type="f32")
    gen = wordgen.WordGen(m.a_format, padding=False)
    w = gen.uniform(np.random.default_rng(0), (1000,))
    assert (w & 0xC3 == 0).all()
    gen = wordgen.WordGen(m.a_format, padding=True)
    w = gen.uniform(np.random.default_rng(0), (1000,))
    assert (w & 0xC3 != 0).any()


def test_refuses_different_operand_formats(capsys):
    ma = mmasim.MMA("B200", "tcgen05.mma.kind::f16.f32.f16.f16")
    mb = mmasim.MMA("B200", "tcgen05.mma.kind::tf32")
    with pytest.raises(cmp.IncompatibleDatapaths, match="operand A: f16 .16-bit. vs tf32 .32-bit."):
        cmp.compare(ma, mb, cases=10)
    rc = cli.main(["compare", "B200", "B200", "tcgen05.mma.kind::f16.f32.f16.f16",
                   "--instruction-b", "tcgen05.mma.kind::tf32"])
    err = capsys.readouterr().err
    assert rc == 1 and "cannot compare" in err and "Traceback" not in err and err.count("\n") == 1


def test_integer_wrap_vs_saturate_differ_in_units():
    ma = mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.s8")
    mb = mmasim.MMA("B200", "tcgen05.mma.kind::i8.s32.s8.s8.satfinite")
    res = cmp.compare(ma, mb, cases=800, seed=0)
    assert res.count > 0
    ex = res.example
    # one of them is a saturated bound
    assert ex.db in (0x7FFFFFFF, 0x80000000)
    assert "units" in cmp.report(res)


def test_encode_exact():
    f32 = mmasim.MMA("B200", "tcgen05.mma.kind::tf32").c_format
    assert cmp.encode_exact(f32, Fraction(1)) == 0x3F800000
    assert cmp.encode_exact(f32, Fraction(-3, 2)) == 0xBFC00000
    assert cmp.encode_exact(f32, Fraction(1, 3)) is None
    assert cmp.encode_exact(f32, Fraction(2) ** -149) == 1
    assert cmp.encode_exact(f32, Fraction(2) ** 128) is None


def test_ulp_distance():
    f32 = mmasim.MMA("B200", "tcgen05.mma.kind::tf32").d_format
    assert cmp.ulp_distance(f32, Fraction(1), Fraction(1) + Fraction(2) ** -23) == 1.0
    assert cmp.ulp_distance(f32, Fraction(1), Fraction(1) - Fraction(2) ** -24) == 1.0
    assert cmp.ulp_distance(f32, Fraction(1), float("inf")) == float("inf")


def test_a100_vs_h100_f16_finds_and_explains_a_difference(capsys):
    rc = cli.main(["compare", "A100", "H100", "m16n8k16.f32.f16.f16.f32", "--cases", "2000", "--seed", "0"])
    out = capsys.readouterr().out
    assert rc == 0
    # Ampere: F=24 in two chained steps of 8; Hopper: F=25 over all 16 (docs/datapaths.md section 3)
    assert "F: 24 vs 25" in out
    assert "results differ in 0 " not in out
    assert "example, shrunk from generated case" in out
    assert "A: Ampere" in out and "B: Hopper" in out
    ma = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    mb = mmasim.MMA("H100", "m16n8k16.f32.f16.f16.f32")
    res = cmp.compare(ma, mb, cases=2000, seed=0)
    assert res.count > 0 and res.max_ulps >= 1


def test_plot_without_matplotlib_is_a_clear_message(toys, tmp_path, monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    def never(*a, **kw):
        raise AssertionError("the comparison ran before matplotlib was found missing")

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.setattr(cmp, "compare_many", never)       # asked before anything runs
    rc = cli.main(["compare", "ToyF24", "ToyF25", "m16n8k16.f32.f16.f16.f32", "--cases", "200",
                   "--plot", str(tmp_path / "d.png")])
    err = capsys.readouterr().err
    assert rc == 1 and "needs matplotlib" in err and err.startswith("mmasim: error: ")
    assert "mmasim-exact[plot]" in err and "nothing was run" in err
    assert not (tmp_path / "d.png").exists()


def test_plot_writes_a_png(toys, tmp_path):
    pytest.importorskip("matplotlib")
    ma, mb = toys
    res = cmp.compare(ma, mb, cases=300, seed=0)
    cmp.plot(res, tmp_path / "d.png")
    assert (tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG"


def test_ulp_of_the_output_grid_hand_computed():
    f32 = mmasim.MMA("B200", "tcgen05.mma.kind::tf32")
    fp8 = mmasim.MMA("Ada", "m16n8k32.f32.e4m3.e4m3")          # rz-e8m13: 13 fraction bits in an f32 word
    g32, g13 = cmp.output_grid(f32), cmp.output_grid(fp8)
    assert (g32.name, g32.man_bits, g32.bias) == ("f32", 23, 127)
    assert (g13.name, g13.man_bits, g13.bias) == ("E8M13", 13, 127)
    # one ULP at 1.0: 2^-23 for f32, 2^-13 for E8M13; at 3.0 (binade [2, 4)): 2^-22, 2^-12
    assert cmp.ulp_of(g32, Fraction(1)) == Fraction(1, 2 ** 23)
    assert cmp.ulp_of(g13, Fraction(1)) == Fraction(1, 2 ** 13)
    assert cmp.ulp_of(g13, Fraction(-3)) == Fraction(1, 2 ** 12)
    # below the normal range the ULP stays at 2^(1-127-13)
    assert cmp.ulp_of(g13, Fraction(1, 2 ** 140)) == Fraction(1, 2 ** 139)
    assert cmp.ulp_of(g13, Fraction(0)) == Fraction(1, 2 ** 139)
    # 1 and the next E8M13 value are 1 ULP apart; 1 and the next f32 value are 2^-10 of it
    assert cmp.ulp_distance(g13, Fraction(1), 1 + Fraction(1, 2 ** 13)) == 1.0
    assert cmp.ulp_distance(g13, Fraction(1), 1 + Fraction(1, 2 ** 23)) == 2.0 ** -10
    assert cmp.ulp_distance(g13, Fraction(2), Fraction(2) - Fraction(1, 2 ** 13)) == 1.0   # across 2: at 2 - u
    # the coarser grid of the two counts
    assert cmp.output_grid(f32, fp8) == g13
    f16 = cmp.output_grid(mmasim.MMA("A100", "m16n8k16.f16.f16.f16.f16"))
    assert (f16.name, f16.man_bits) == ("f16", 10)
    assert cmp.ulp_of(f16, Fraction(1, 2 ** 20)) == Fraction(1, 2 ** 24)                   # f16 subnormal ULP


def test_fp8_differences_are_counted_in_ulps_of_e8m13():
    # Ada's fp8 mma rounds to E8M13 (rz-e8m13), RTX Blackwell's keeps f32 (docs/datapaths.md §2)
    ada = mmasim.MMA("Ada", "m16n8k32.f32.e4m3.e4m3")
    rtx = mmasim.MMA("RTX 5090", "mma.sync.m16n8k32.f32.e4m3.e4m3")
    res = cmp.compare(ada, rtx, cases=400, seed=0)
    assert res.grid.name == "E8M13" and res.unit == "ULPs of E8M13"
    assert "ULPs of E8M13" in cmp.report(res)


def test_plot_shows_how_far_the_results_are_apart_and_from_exact_in_size_bins(tmp_path):
    """Two bar charts over the text report's size bins (every sub-ULP difference in one bin,
    so no axis runs down to 2^-97): the other datapaths against the reference over every case,
    and each datapath against the exact result; one color per datapath in both."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ada = mmasim.MMA("Ada", "m16n8k32.f32.e4m3.e4m3")
    rtx = mmasim.MMA("RTX 5090", "mma.sync.m16n8k32.f32.e4m3.e4m3")
    hop = mmasim.MMA("H100", "wgmma.mma_async.k32.f32.e4m3.e4m3")
    results = cmp.compare_many([ada, rtx, hop], cases=300, seed=0)
    seen = []
    real_savefig = matplotlib.figure.Figure.savefig

    def spy(fig, path, *a, **kw):
        seen.append([{"ticks": [t.get_text() for t in ax.get_xticklabels()], "yscale": ax.get_yscale(),
                      "xlabel": ax.get_xlabel(), "title": ax.get_title(loc="left"),
                      "bars": [([round(r.get_height()) for r in c], c.patches[0].get_facecolor(), c.get_label())
                               for c in ax.containers]} for ax in fig.axes])
        return real_savefig(fig, path, *a, **kw)

    matplotlib.figure.Figure.savefig = spy
    try:
        cmp.plot(results, tmp_path / "fp8.png")
        cmp.plot(results[0], tmp_path / "fp8.svg")
    finally:
        matplotlib.figure.Figure.savefig = real_savefig
    assert (tmp_path / "fp8.png").read_bytes()[:4] == b"\x89PNG"
    assert b"<svg" in (tmp_path / "fp8.svg").read_bytes()[:400]
    plt.close("all")
    top, bottom = seen[0]
    names = cmp.size_bins(results[0].grid)[1]
    assert top["ticks"][0] == "equal" and set(top["ticks"][1:]) <= set(names) | {"inf/NaN differs"}
    assert bottom["ticks"][0] == "exact" and set(bottom["ticks"][1:]) <= set(names)
    assert "<1" in top["ticks"] and top["yscale"] == bottom["yscale"] == "log"
    assert "E8M13" in top["title"] and "below 1 ULP" in bottom["xlabel"]
    for (heights, _, label), r in zip(top["bars"], results):
        assert sum(heights) == r.cases and heights[0] == r.cases - r.count      # every case in one bin
        assert label.startswith(f"{r.model_b.arch} vs Ada Lovelace: differ in {r.count:,} of 300")
    # RTX Blackwell keeps f32, Ada rounds to E8M13 (docs/datapaths.md section 2): sub-ULP differences
    assert top["bars"][0][0][top["ticks"].index("<1")] > 0
    assert [label.split(":")[0] for _, _, label in bottom["bars"]] == ["Ada Lovelace", "RTX Blackwell", "Hopper"]
    assert [c for _, c, _ in top["bars"]] == [c for _, c, _ in bottom["bars"][1:]]   # one color per datapath
    assert len(seen[1]) == 2 and len(seen[1][0]["bars"]) == 1


# ------------------------------------------------------------------ the word generator (mmasim.operands.wordgen)
F16 = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32").a_format


def _f16_values(w):
    return np.asarray(w, dtype=np.uint16).view(np.float16).astype(np.float64)


def test_f16_edge_words_are_the_encoding_corners():
    # IEEE binary16: 0x0000 zero, 0x0001 smallest subnormal, 0x03FF largest subnormal, 0x0400 smallest
    # normal, 0x3C00 one, 0x7BFF largest finite, 0x7C00 inf, 0x7C01 and 0x7FFF NaNs; each also negative
    corners = {0x0000, 0x0001, 0x03FF, 0x0400, 0x3C00, 0x7BFF, 0x7C00, 0x7C01, 0x7FFF}
    corners |= {w | 0x8000 for w in corners}
    assert set(wordgen.edge_fields(F16).tolist()) == corners
    w = wordgen.words(F16, (4000,), np.random.default_rng(0), "edge")
    assert set(w.tolist()) == corners


def test_word_kinds_keep_to_their_binades():
    rng = np.random.default_rng(5)
    near = _f16_values(wordgen.words(F16, (5000,), rng, wordgen.WordKind.NEAR_ONE))
    assert np.isfinite(near).all() and (np.abs(near) >= 2.0 ** -3).all() and (np.abs(near) < 2.0 ** 4).all()
    tiny = _f16_values(wordgen.words(F16, (5000,), rng, "subnormal"))
    assert (np.abs(tiny) < 2.0 ** -12).all() and ((tiny != 0) & (np.abs(tiny) < 2.0 ** -14)).any()  # subnormals
    huge = _f16_values(wordgen.words(F16, (5000,), rng, "huge"))
    assert np.isfinite(huge).all() and (np.abs(huge) >= 2.0 ** 14).all()
    finite = _f16_values(wordgen.words(F16, (5000,), rng, "finite"))
    assert np.isfinite(finite).all() and (np.abs(finite) < 2.0 ** -14).any() and (np.abs(finite) >= 2.0 ** 15).any()
    uniform = _f16_values(wordgen.words(F16, (5000,), rng, "uniform"))
    assert np.isnan(uniform).any() and (np.abs(uniform) < 2.0 ** -14).any() and (uniform < 0).any()
    with pytest.raises(ValueError, match="bogus"):
        wordgen.words(F16, (3,), rng, "bogus")


def test_word_generator_is_seeded_by_the_generator_passed_in():
    model = mmasim.MMA("B200", "tcgen05.kind::mxf4nvf4.4X")
    one = wordgen.operands(model, 50, np.random.default_rng(3), "mixed")
    two = wordgen.operands(model, 50, np.random.default_rng(3), "mixed")
    assert all((x == y).all() for x, y in zip(one[:3], two[:3]))
    assert (one[3]["scale_a"] == two[3]["scale_a"]).all() and one[0].shape == (50, model.k)
    model.dot(one[0], one[1], one[2], **one[3])      # words the datapath accepts


# ------------------------------------------------------------------ exact arithmetic (mmasim.arith.exact)
def test_exact_results_hand_computed():
    m = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    a = np.zeros((2, 16), dtype=np.uint64)
    b = np.zeros((2, 16), dtype=np.uint64)
    a[0, :2] = [0x3E00, 0xC000]       # 1.5, -2
    b[0, :2] = [0x3555, 0x0001]       # 0x3555 = 1365/4096 (f16 1.0101010101 * 2^-2), 2^-24
    a[1, 0], b[1, 0] = 0x7C00, 0x3C00  # inf * 1
    c = np.array([0x3E800000, 0], dtype=np.uint64)   # 0.25 (f32)
    got = exact.exact_results(m, a, b, c)
    assert got[0] == Fraction(1, 4) + Fraction(3, 2) * Fraction(1365, 4096) - 2 * Fraction(1, 2 ** 24)
    assert got[1] is None


def test_dyadic_parts_of_exact_values():
    assert exact.dyadic(Fraction(-3, 8)) == (3, -3)
    assert exact.dyadic(Fraction(12)) == (3, 2)
    assert exact.dyadic(Fraction(1, 3)) is None and exact.dyadic(Fraction(0)) is None
    assert exact.binade(Fraction(1)) == 0 and exact.binade(Fraction(-3, 8)) == -2 and exact.binade(Fraction(255, 256)) == -1



def test_plot_of_an_integer_output_is_refused_before_anything_runs(tmp_path, monkeypatch, capsys):
    def never(*a, **kw):
        raise AssertionError("the comparison ran before the plot was refused")

    monkeypatch.setattr(cmp, "compare_many", never)
    rc = cli.main(["compare", "A100", "H100", "mma.sync.m16n8k32.s32.s8.s8", "--plot", str(tmp_path / "i.png")])
    err = capsys.readouterr().err
    assert rc == 1 and "output format is an integer" in err and not (tmp_path / "i.png").exists()


def _f32(word: int) -> Fraction:
    """The value of a finite f32 word, by hand: sign, biased exponent, fraction."""
    sign, exp, frac = word >> 31, (word >> 23) & 0xFF, word & 0x7FFFFF
    mag = Fraction(frac, 2 ** 23) * Fraction(2) ** -126 if exp == 0 else \
        (1 + Fraction(frac, 2 ** 23)) * Fraction(2) ** (exp - 127)
    return -mag if sign else mag


def _ulps_apart(x: int, y: int) -> Fraction:
    """|x - y| in f32 ULPs at the smaller nonzero magnitude (docs/user-guide.md), by hand."""
    vx, vy = _f32(x), _f32(y)
    small = min(abs(v) for v in (vx, vy) if v != 0)
    e = 0                                   # 2**e <= small < 2**(e + 1)
    while Fraction(2) ** e > small:
        e -= 1
    while Fraction(2) ** (e + 1) <= small:
        e += 1
    return abs(vx - vy) / Fraction(2) ** (max(e, -126) - 23)


def test_the_largest_difference_is_shown_with_its_case_text_and_json(toys):
    ma, mb = toys
    res = cmp.compare(ma, mb, cases=2000, seed=1)
    big = res.largest
    # it is a counted case, as generated, and both models compute its words
    row = res.inputs.row(big.origin)
    assert not big.shrunk and np.array_equal(big.inputs.a, row.a) and res.differ[big.origin]
    assert int(ma.dot(row.a, row.b, row.c)[0]) == big.da and int(mb.dot(row.a, row.b, row.c)[0]) == big.db
    # its two results are the headline's largest difference apart, and no counted case is further
    assert _ulps_apart(big.da, big.db) == res.max_ulps
    assert all(_ulps_apart(int(x), int(y)) <= res.max_ulps for x, y in zip(res.da[res.differ], res.db[res.differ]))
    text = cmp.report(res)
    assert f"largest difference: {res.max_ulps:g} ULPs of f32" in text
    assert f"largest difference, generated case {big.origin} ({res.inputs.kind[big.origin]})" in text
    assert f"D = 0x{big.da:08X}" in text and f"D = 0x{big.db:08X}" in text
    doc = cmp.to_json([res], 2000, 1)["pairs"][0]
    assert doc["largest_example"]["from_case"] == big.origin and doc["largest_example"]["shrunk"] is False
    assert doc["largest_example"]["d_reference"] == f"0x{big.da:08X}"
    assert doc["example"]["from_case"] == res.example.origin


def test_no_difference_has_no_largest_example():
    m = mmasim.MMA("B200", "tcgen05.mma.kind::tf32")
    res = cmp.compare(m, m, cases=50, seed=3)
    assert res.largest is None and cmp.to_json([res], 50, 3)["pairs"][0]["largest_example"] is None
