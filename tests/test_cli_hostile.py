"""Every subcommand driven with hostile arguments (hypothesis): the exit status is
0, 1 or 2, and nothing ever prints a traceback or an internal error.

Runs ``mmasim.cli.main(argv)`` in-process (fast).  ``validate`` without a path
would run every bundled file, so the bundled root is pointed at a folder with
one small vector file, next to hostile ones (a FIFO, a text file named .npz,
a zero-case file, a file whose headers declare gigabytes, a crafted meta).
"""

import contextlib
import io
import os
import pathlib
import tempfile
from unittest import mock

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mmasim.cli.main as cli
from mmasim.vectors import files as vectors

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOOD = ROOT / "vectors" / "hardware" / "blackwell" / "tf32-probe-ladder.hardware.npz"
PROV = {"source": "hand-derived", "device": "none", "tool": "tests", "tool_version": "1",
        "date": "2026-05-01", "seed": None, "generator": "tests/test_cli_hostile.py", "citation": "by hand"}

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


def _hostile_folder() -> pathlib.Path:
    root = pathlib.Path(tempfile.mkdtemp(prefix="mmasim-hostile-"))
    bundled = root / "bundled"
    bundled.mkdir()
    (bundled / "good.npz").write_bytes(GOOD.read_bytes())
    hostile = root / "hostile"
    hostile.mkdir()
    os.mkfifo(hostile / "fifo.npz")
    (hostile / "text.npz").write_text("not a vector file\n")
    (hostile / "empty").mkdir()
    vectors.save(hostile / "zero.npz", arch="B200", instruction="tcgen05.mma.kind::tf32", a=np.zeros((0, 8)),
                 b=np.zeros((0, 8)), c=np.zeros(0), d=np.zeros(0), provenance=PROV)
    vectors.save(hostile / "evil.npz", arch="\x1b[2J\nOK: evil", instruction="\x07", a=[[0] * 8], b=[[0] * 8],
                 c=[0], d=[0], provenance=PROV, labels=["\x1b[31m"])
    import zipfile

    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<u8", "fortran_order": False, "shape": (2 ** 31,)})
    with zipfile.ZipFile(hostile / "huge.npz", "w") as zf:
        zf.writestr("a.npy", buf.getvalue())
    return root


@pytest.fixture(scope="module")
def folder():
    return _hostile_folder()


def _run(argv, folder):
    """``main(argv)`` in ``folder`` (a relative path such as "" or "." must not reach the bundled vectors)."""
    out, err = io.StringIO(), io.StringIO()
    cwd = os.getcwd()
    os.chdir(folder / "bundled")
    try:
        with mock.patch.object(vectors, "bundled_root", lambda: folder / "bundled"), \
                contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = cli.main(argv)
    finally:
        os.chdir(cwd)
    return rc, out.getvalue(), err.getvalue()


def _check(argv, folder):
    rc, out, err = _run(argv, folder)
    assert rc in (0, 1, 2), (argv, rc, err)
    assert "Traceback" not in err and "Traceback" not in out, (argv, err)
    assert "internal error" not in err, (argv, err)
    if rc == 2:
        lines = err.strip().splitlines()
        assert len(lines) == 1 and ": error: " in lines[0] and lines[0].startswith("mmasim"), (argv, err)
    assert "\x1b" not in out + err and "\x07" not in out + err, (argv, out, err)
    return rc, out, err


# ------------------------------------------------------------------ strategies
junk = st.text(min_size=0, max_size=12)
control = st.sampled_from(["\x1b[2J", "\x07", "\n", "\r", "\u202e", "\x00", "\x7f", "\x9b"])
numberish = st.sampled_from(["0", "-5", "-1", "1", "2", "0x10", "1e3", "", " ", "nan", "99999999999999999999", "-0",
                             "1_024", "+128", "\u0661\u0662", "1000000000"])
ARCHS = ["B200", "A100", "H100", "Hopper", "sm_90", "MI300X", "Volta", "RTX 5090", "B9000", "", "blackwell"]
INSTRS = ["tcgen05.mma.kind::tf32", "m16n8k16.f32.f16.f16.f32", "tcgen05.mma.kind::f16", "mma", "v_mfma",
          "tcgen05.kind::mxf4nvf4.4X", "mma.sync.m16n8k8.f32.tf32.tf32", "", ".", "::", "kind::",
          "tcgen05.mma.kind::f16.kind::tf32", "m16n8k16.f32.bf16.bf16.f32.banana"]
arch = st.one_of(st.sampled_from(ARCHS), junk, st.builds(lambda a, c: a + c, st.sampled_from(ARCHS), control))
instr = st.one_of(st.sampled_from(INSTRS), junk, st.builds(lambda a, c: a + c, st.sampled_from(INSTRS), control))
word = st.one_of(st.sampled_from(["0", "3F800000", "0x3F800000", "FFFFFFFF", "FFFFFFFFFFFFFFFFFFFF", "-1", "zz",
                                  "0b101", "0o7", "0x", "38", "2"]), junk)
words = st.one_of(st.lists(word, max_size=10).map(" ".join),
                  st.lists(st.sampled_from(["0", "3F800000", "7F800000", "7FC00001", "80000000", "1", "FF800000"]),
                           min_size=8, max_size=8).map(" ".join),
                  st.sampled_from([" ".join(["3F800000"] * 8), " ".join(["2"] * 64), ",,,"]))
qualifier_flags = st.lists(st.tuples(st.sampled_from(["--a-type", "--b-type", "--c-type", "--d-type", "--scale-type"]),
                                     st.sampled_from(["e4m3", "e2m1", "f16", "f32", "bf16", "ue4m3", "x", ""]) | junk)
                           .map(list), max_size=2).map(lambda xs: sum(xs, []))
stray = st.lists(st.sampled_from(["--json", "--saturate", "-v", "--help", "--nope", "-", "--", "-q"]) | junk,
                 max_size=2)


def _maybe(strategy):
    """Often nothing (so that the other arguments get a chance to be valid), else ``strategy``."""
    return st.one_of(st.just([]), st.just([]), strategy)


@SETTINGS
@given(st.lists(st.one_of(arch, st.sampled_from(["--json", "--nope", "-h"])), max_size=3))
def test_hostile_list(folder, argv):
    _check(["list", *argv], folder)


@SETTINGS
@given(arch, instr, qualifier_flags, stray)
def test_hostile_explain(folder, a, i, q, extra):
    _check(["explain", a, i, *q, *extra], folder)


@SETTINGS
@given(st.one_of(st.just("B200"), arch), st.one_of(st.just("tcgen05.mma.kind::tf32"), instr), words, words, word,
       _maybe(qualifier_flags),
       st.lists(st.tuples(st.sampled_from(["--scale-a", "--scale-b", "--sparse-metadata"]), words).map(list),
                max_size=2).map(lambda xs: sum(xs, [])), _maybe(stray))
def test_hostile_run(folder, a, i, wa, wb, wc, q, extra, more):
    _check(["run", a, i, "--a", wa, "--b", wb, "--c", wc, *q, *extra, *more], folder)


@SETTINGS
@given(st.one_of(st.lists(st.sampled_from(["A100", "H100", "L40S", "RTX 5090"]), min_size=1, max_size=3),
                 st.lists(arch, min_size=0, max_size=4)),
       st.one_of(st.just("m16n8k16.f32.f16.f16.f32"), instr),
       _maybe(st.lists(st.tuples(st.sampled_from(["--seed", "--instruction-b", "--plot"]),
                                 numberish | instr | st.sampled_from(["{tmp}/d.png", "{tmp}/nope/d.png",
                                                                      "{tmp}/d.xyz", "{tmp}", "{tmp}/d"])).map(list),
                       min_size=1, max_size=2).map(lambda xs: sum(xs, []))),
       st.one_of(st.sampled_from(["1", "2", "7"]), numberish),
       _maybe(qualifier_flags), _maybe(st.lists(st.sampled_from(["--json", "--nope"]) | junk, min_size=1, max_size=1)))
def test_hostile_compare(folder, archs, i, opts, cases, q, extra):
    tmp = str(folder / "plots")
    os.makedirs(tmp, exist_ok=True)
    opts = [o.replace("{tmp}", tmp) for o in opts]
    # --cases comes last, and a valid count stays small (this test must take seconds)
    if cases.strip().isdigit() and int(cases) > 50:
        cases = "3"
    _check(["compare", *archs, i, *opts, *q, *extra, "--cases", cases], folder)


@SETTINGS
@given(st.lists(st.sampled_from(["hostile", "hostile/fifo.npz", "hostile/text.npz", "hostile/empty",
                                 "hostile/zero.npz", "hostile/evil.npz", "hostile/huge.npz", "bundled",
                                 "nope.npz", "", "\x1b[2J.npz"]), max_size=3),
       st.lists(st.sampled_from(["--json", "--show", "-1", "0", "2", "--failures-only", "-q", "--nope"]) | junk,
                max_size=3))
def test_hostile_validate(folder, paths, flags):
    argv = ["validate", *[str(folder / p) if p and "\x1b" not in p else p for p in paths], *flags]
    rc, out, err = _check(argv, folder)
    if rc == 0:
        assert "no vectors found" not in out + err


def test_validate_never_ok_on_hostile_files(folder):
    for name in ("fifo.npz", "text.npz", "empty", "zero.npz", "evil.npz", "huge.npz"):
        rc, out, err = _check(["validate", "-q", str(folder / "hostile" / name)], folder)
        assert rc == 1, name
        assert not [line for line in out.splitlines() if line.startswith("OK")], name


@SETTINGS
@given(stray)
def test_hostile_plugins(folder, extra):
    _check(["plugins", *extra], folder)


special_word = st.sampled_from(["0", "80000000", "3F800000", "7F800000", "FF800000", "7FC00001", "7F7FFFFF", "1",
                                "80000001", "FFFFFFFF", "00001FFF"])


@SETTINGS
@given(st.sampled_from([("B200", "tcgen05.mma.kind::tf32", 8), ("A100", "mma.sync.m16n8k4.f32.tf32.tf32", 4),
                        ("H100", "wgmma.mma_async.k8.f32.tf32.tf32", 8)]),
       st.lists(special_word, min_size=8, max_size=8), st.lists(special_word, min_size=8, max_size=8), special_word,
       st.sampled_from([[], ["--json"], ["-v"]]))
def test_hostile_run_special_words(folder, dp, a, b, c, flags):
    arch, instruction, k = dp
    rc, out, err = _check(["run", arch, instruction, "--a", " ".join(a[:k]), "--b", ",".join(b[:k]), "--c", c,
                           *flags], folder)
    assert rc == 0, err


ACCURACY_INSTRS = ["wgmma.mma_async.k32.f32.e4m3.e4m3", "tcgen05.mma.kind::f8f6f4.f32.e4m3.e4m3",
                   "m16n8k16.f32.f16.f16.f32", "tcgen05.kind::mxf4nvf4.4X", "m8n8k4.f64.f64.f64.f64",
                   "m16n8k32.s32.s8.s8.s32", "m16n8k8.f32.tf32.tf32.f32"]


@SETTINGS
@given(st.lists(st.one_of(st.sampled_from(["H100", "B200", "A100"]), st.sampled_from(ACCURACY_INSTRS), arch, instr),
                max_size=4),
       _maybe(st.lists(st.tuples(st.sampled_from(["--promote-every", "--split-k", "--split-reduce", "--dist",
                                                  "--scheme", "--seed", "--plot", "--m"]),
                                 numberish | st.sampled_from(["none,32", "32", "48", "tree", "normal", "cauchy",
                                                              "{tmp}/a.png", "{tmp}/nope/a.png", "{tmp}/a"]))
                       .map(list), min_size=1, max_size=2).map(lambda xs: sum(xs, []))),
       st.sampled_from(["32", "64", "0", "x", "32,64", "", "-32", "32,,", "1000000000", "1_024", "+32", "1e9"]),
       _maybe(qualifier_flags), _maybe(stray))
def test_hostile_accuracy(folder, pairs, opts, k, q, extra):
    tmp = str(folder / "plots")
    os.makedirs(tmp, exist_ok=True)
    opts = [o.replace("{tmp}", tmp) for o in opts]
    for i, o in enumerate(opts[:-1]):       # a valid --m stays small (this test must take seconds) or is
        if o == "--m" and opts[i + 1].isdigit() and 128 < int(opts[i + 1]) < 10 ** 12:   # past any memory
            opts[i + 1] = "64"
    with mock.patch.dict(os.environ, {"MMASIM_BACKEND": "numpy"}):
        _check(["accuracy", *pairs, *opts, *q, *extra, "--n", "8", "-q", "--k", k], folder)


@SETTINGS
@given(st.sampled_from(["Volta", "Turing", "CDNA1", "B9000", "", "\x1b[2J"]),
       st.lists(st.sampled_from(["mma.sync.m8n8k4.f32.f16.f16.f32", "nope", "", "v_mfma_f32_32x32x2f32"]) | junk,
                max_size=2),
       st.sampled_from(["", "{tmp}/out", "{tmp}/file", "{tmp}/nope/deeper", "/dev/null/x", "{tmp}/out/"]),
       _maybe(stray))
def test_hostile_harness_generate(folder, arch, instructions, out, extra):
    tmp = folder / "generated"
    tmp.mkdir(exist_ok=True)
    (tmp / "file").write_text("a file, not a folder\n")
    before = sorted(os.listdir(folder / "bundled"))
    _check(["harness", "generate", arch, *instructions, "--out", out.format(tmp=tmp), *extra], folder)
    assert sorted(os.listdir(folder / "bundled")) == before       # never the working folder


@SETTINGS
@given(st.sampled_from(["characterize", "layout"]), st.sampled_from(["A100", "B200", "nope"]),
       st.sampled_from(["m16n8k16.f32.f16.f16.f32", "tcgen05.mma.kind::tf32", "x"]),
       st.lists(st.tuples(st.sampled_from(["--from-vectors", "--out", "--operand", "--selector", "--byte-id"]),
                          st.sampled_from(["", "{tmp}", "{tmp}/x.png", "{tmp}/x.npz", "/dev/null/x.png", "b", "scale_a",
                                           "1_0", "+1", "7", "99999999999999999999"])).map(list),
                max_size=2).map(lambda xs: sum(xs, [])),
       _maybe(stray))
def test_hostile_characterize_and_layout(folder, command, arch, instruction, opts, extra):
    tmp = folder / "paths"
    tmp.mkdir(exist_ok=True)
    (tmp / "x.npz").write_text("not a vector file\n")
    opts = [o.replace("{tmp}", str(tmp)) for o in opts]
    with mock.patch.dict(os.environ, {"MMASIM_BACKEND": "numpy"}):
        _check([command, arch, instruction, *opts, *extra], folder)
