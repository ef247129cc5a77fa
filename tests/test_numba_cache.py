"""The numba backend's kernel cache (mmasim/backends/numba/cache.py): kernels are kept in the user
cache folder (``MMASIM_CACHE_DIR``), a fresh process loads them instead of compiling, nothing is
written into the package or on import, and a kernel compiled from one version of the backend's
sources is never loaded by another (numba itself keys a cached function by the stamp of the one
file that defines it, and the kernels inline primitives from other files)."""

import hashlib
import json
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytest.importorskip("numba")

from mmasim.backends.numba import cache  # noqa: E402

PACKAGE = Path(cache.__file__).parent


def _python(code, cache_dir, *args, cwd=None, env=()):
    """Run ``code`` in a fresh interpreter with the kernel cache in ``cache_dir`` (and ``env``),
    in ``cwd``; its last stdout line, parsed as JSON."""
    env = dict(os.environ, MMASIM_CACHE_DIR=str(cache_dir), **dict(env))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], env=env, cwd=cwd,
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


# a row kernel (integer: a closure over its step function, which numba's own key made
# different in every process) and a closure over constants (the f64 FMA chain), each on
# 64 rows of K = 4 ones (s8 word 0x01, f64 word 0x3FF0000000000000) and C = 0
_DOT = """
    import json, numpy as np, mmasim
    from mmasim import backends
    out = {}
    for arch, ins, one in (("CDNA1", "v_mfma.m4n4k4.s32.s8.s8", 1),
                           ("CDNA3", "v_mfma.m16n16k4.f64.f64.f64", 0x3FF0000000000000)):
        m = mmasim.MMA(arch, ins, backend="numba")
        a = np.full((64, m.k), one, np.uint64); c = np.zeros(64, np.uint64)
        d = m.dot(a, a, c)
        st = backends.kernel_for(m).fn.stats
        out[arch] = {"word": int(d[0]), "hits": sum(st.cache_hits.values()), "misses": sum(st.cache_misses.values()),
                     "path": st.cache_path}
    print(json.dumps(out))
"""


def _kernel_files(folder):
    return {p for p in Path(folder).rglob("*") if p.suffix in (".nbi", ".nbc")}


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """The same dots in two fresh processes sharing one empty cache folder."""
    folder = tmp_path_factory.mktemp("kernels")
    before = _kernel_files(PACKAGE)
    first = _python(_DOT, folder)
    second = _python(_DOT, folder)
    return folder, first, second, _kernel_files(PACKAGE) - before


def test_the_first_process_compiles_and_a_fresh_one_loads_the_kernels(two_runs):
    folder, first, second, _ = two_runs
    for arch in first:
        assert (first[arch]["hits"], first[arch]["misses"]) == (0, 1), arch
        assert (second[arch]["hits"], second[arch]["misses"]) == (1, 0), arch
        assert first[arch]["word"] == second[arch]["word"]
    assert first["CDNA1"]["word"] == 4                      # 4 * (1 * 1), s32
    assert first["CDNA3"]["word"] == 0x4010000000000000     # 4 * (1.0 * 1.0) = 4.0, f64


def test_kernels_live_in_the_cache_folder_under_the_source_digest_not_in_the_package(two_runs):
    folder, first, _, new_in_package = two_runs
    where = Path(first["CDNA1"]["path"])
    assert where == folder / "numba" / cache.DIGEST[:20]
    assert _kernel_files(where)
    assert new_in_package == set()


def test_importing_the_backend_writes_nothing(tmp_path):
    folder = tmp_path / "never"
    _python("""
        import json, mmasim
        from mmasim.backends.numba import kernels
        mmasim.MMA("CDNA1", "v_mfma.m4n4k4.s32.s8.s8", backend="numba")
        print(json.dumps(0))
    """, folder)
    assert not folder.exists()


def test_the_cache_key_of_a_closure_over_a_dispatcher_is_the_same_in_every_process(tmp_path):
    code = """
        import json
        from numba.core import types
        from numba.core.registry import cpu_target
        from mmasim.backends.numba import families, window
        sig = (types.int64,)
        cg = cpu_target.target_context.codegen()
        print(json.dumps([str(k.__dict__["_cache"]._index_key(sig, cg))
                          for k in (window.window_kernel, families.integer_kernel, families.two_stage_kernel)]))
    """
    first, second = _python(code, tmp_path), _python(code, tmp_path)
    assert first == second
    assert len(set(first)) == 3


# a jitted function of its own file, with the kernel cache: the digest rule on a small scale
_OWN = """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    from mmasim.backends.numba import cache
    if len(sys.argv) > 2:
        cache.DIGEST = sys.argv[2]          # as if a source of the backend had changed
    import kmod
    v = kmod.f(1)
    st = kmod.f.stats
    print(json.dumps([v, sum(st.cache_hits.values()), sum(st.cache_misses.values())]))
"""


def _own_module(folder, body):
    (folder / "kmod.py").write_text("from mmasim.backends.numba.cache import jit\n\n\n@jit\ndef f(x):\n"
                                    f"    return {body}\n")


def test_an_unchanged_source_is_loaded_and_an_edited_one_compiled_again(tmp_path):
    src, kernels = tmp_path / "src", tmp_path / "kernels"
    src.mkdir()
    _own_module(src, "x + 1")
    assert _python(_OWN, kernels, src) == [2, 0, 1]
    assert _python(_OWN, kernels, src) == [2, 1, 0]
    _own_module(src, "x + 2")           # the same bytecode length and line: numba's own stamp would differ
    assert _python(_OWN, kernels, src) == [3, 0, 1]


def test_a_kernel_compiled_from_other_backend_sources_is_never_loaded(tmp_path):
    src, kernels = tmp_path / "src", tmp_path / "kernels"
    src.mkdir()
    _own_module(src, "x + 1")
    assert _python(_OWN, kernels, src) == [2, 0, 1]
    assert _python(_OWN, kernels, src, "0" * 64) == [2, 0, 1]
    assert _python(_OWN, kernels, src) == [2, 1, 0]     # the first digest's kernel is still there


def _sources(folder):
    (folder / "a.py").write_text("x = 1\n")
    (folder / "b.py").write_text("y = 2\n")


def test_the_digest_covers_every_source_of_the_backend(tmp_path):
    _sources(tmp_path)
    d0 = cache.sources_digest(tmp_path)
    assert cache.sources_digest(tmp_path) == d0
    (tmp_path / "b.py").write_text("y = 3\n")           # a primitive the kernels of a.py inline
    d1 = cache.sources_digest(tmp_path)
    (tmp_path / "c.py").write_text("")
    assert len({d0, d1, cache.sources_digest(tmp_path)}) == 3
    assert cache.DIGEST == cache.sources_digest(PACKAGE)


def test_the_digest_covers_the_codes_the_kernels_freeze(tmp_path, monkeypatch):
    # the kernels freeze NEG_INF_EXP, GROUP_DEAD and the class codes of mmasim/arith/codes.py
    import mmasim.arith.codes
    assert cache.SHARED_CODES.resolve() == Path(mmasim.arith.codes.__file__).resolve()
    _sources(tmp_path)
    codes = tmp_path / "shared" / "codes.py"
    codes.parent.mkdir()
    codes.write_text("NEG_INF_EXP = -(1 << 40)\n")
    monkeypatch.setattr(cache, "SHARED_CODES", codes)
    d0 = cache.sources_digest(tmp_path)
    codes.write_text("NEG_INF_EXP = -(1 << 50)\n")
    assert cache.sources_digest(tmp_path) != d0


def test_the_digest_covers_the_cuda_bodies_their_cpu_drivers_inline(tmp_path, monkeypatch):
    # quantize.py's CPU driver inlines the bodies of pcg64.py and hadamard.py: an edit of one of
    # them alone must not leave the driver's old compile in use
    import mmasim.backends.cuda.pcg64
    assert Path(mmasim.backends.cuda.pcg64.__file__).resolve().parent == cache.CUDA_BODIES.resolve()
    _sources(tmp_path)
    bodies = tmp_path / "cuda"
    bodies.mkdir()
    (bodies / "pcg64.py").write_text("STEP = 1\n")
    monkeypatch.setattr(cache, "CUDA_BODIES", bodies)
    d0 = cache.sources_digest(tmp_path)
    (bodies / "pcg64.py").write_text("STEP = 0\n")
    assert cache.sources_digest(tmp_path) != d0


def test_the_cache_folder_is_the_environment_variable_else_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("MMASIM_CACHE_DIR", str(tmp_path))
    assert cache.kernel_dir() == tmp_path / "numba" / cache.DIGEST[:20]
    monkeypatch.delenv("MMASIM_CACHE_DIR")
    root = cache.cache_root()
    assert root.name.lower() in ("mmasim", "cache") and PACKAGE not in root.parents


# ------------------------------------------------------------ what prune may delete
_PY = f"py{sys.version_info[0]}{sys.version_info[1]}"


def _digest(i: int) -> str:
    return hashlib.sha256(f"sources {i}".encode()).hexdigest()


def _make_own(parent, digest, mtime, extra=()):
    """A kernel folder as mmasim and numba's cache leave it: the stamp of ``digest``, an index,
    two data files (and ``extra`` files), its mtime ``mtime``."""
    folder = parent / digest[:cache.FOLDER_DIGITS]
    folder.mkdir(parents=True)
    (folder / cache.STAMP).write_text(cache.STAMP_TEXT.format(digest=digest))
    for name in (f"primitives.integer_kernel-mmasim.{_PY}.nbi", f"primitives.integer_kernel-mmasim.{_PY}.1.nbc",
                 f"window.window_kernel-mmasim.{_PY}.2.nbc", *extra):
        (folder / name).write_bytes(b"\x80\x04" + name.encode())
    os.utime(folder, (mtime, mtime))
    return folder


def _snapshot(path):
    """Everything at and under ``path`` as it is: folders, file bytes, link targets; no link followed."""
    out = {}
    for root, dirs, files in os.walk(path):
        for name in dirs + files:
            p = os.path.join(root, name)
            out[p] = ("link", os.readlink(p)) if os.path.islink(p) else \
                ("dir",) if os.path.isdir(p) else ("file", Path(p).read_bytes())
    return out


# the foreign things a cache parent may hold next to mmasim's own folders: each is built in
# ``parent`` under ``name`` (outside: a folder outside the parent, for what links point to)
def _foreign_folder(parent, name, outside, data):
    (parent / name).mkdir()
    (parent / name / "notes.txt").write_bytes(data)


def _unstamped_digest_folder(parent, name, outside, data):
    d = parent / _digest(len(data))[:20]
    d.mkdir(exist_ok=True)
    (d / f"primitives.f-mmasim.{_PY}.nbi").write_bytes(data)


def _stamped_with_a_foreign_file(parent, name, outside, data):
    _make_own(parent, _digest(1000 + len(data)), 1000, extra=()).joinpath(name + ".txt").write_bytes(data)


def _stamped_with_a_subfolder(parent, name, outside, data):
    f = _make_own(parent, _digest(2000 + len(data)), 1000)
    (f / name).mkdir()
    (f / name / f"x-mmasim.{_PY}.nbi").write_bytes(data)


def _stamped_for_another_digest(parent, name, outside, data):
    f = _make_own(parent, _digest(3000 + len(data)), 1000)
    (f / cache.STAMP).write_text(cache.STAMP_TEXT.format(digest=_digest(1)))


def _stamp_is_a_link(parent, name, outside, data):
    digest = _digest(4000 + len(data))
    f = _make_own(parent, digest, 1000)
    (outside / name).write_text(cache.STAMP_TEXT.format(digest=digest))
    (f / cache.STAMP).unlink()
    (f / cache.STAMP).symlink_to(outside / name)


def _kernel_file_is_a_link(parent, name, outside, data):
    f = _make_own(parent, _digest(5000 + len(data)), 1000)
    (outside / name).write_bytes(data)
    (f / f"primitives.g-mmasim.{_PY}.nbi").symlink_to(outside / name)


def _link_to_a_kernel_folder(parent, name, outside, data):
    digest = _digest(6000 + len(data))
    _make_own(outside, digest, 1000)
    (parent / digest[:20]).symlink_to(outside / digest[:20], target_is_directory=True)


def _file_named_as_a_digest(parent, name, outside, data):
    (parent / _digest(7000 + len(data))[:20]).write_bytes(data)


def _kernel_folder_of_another_name(parent, name, outside, data):
    _make_own(parent, _digest(8000 + len(data)), 1000).rename(parent / ("x" + name))


def _dangling_link(parent, name, outside, data):
    (parent / _digest(9000 + len(data))[:20]).symlink_to(outside / "nowhere" / name)


FOREIGN = [_foreign_folder, _unstamped_digest_folder, _stamped_with_a_foreign_file, _stamped_with_a_subfolder,
           _stamped_for_another_digest, _stamp_is_a_link, _kernel_file_is_a_link, _link_to_a_kernel_folder,
           _file_named_as_a_digest, _kernel_folder_of_another_name, _dangling_link]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(own=st.lists(st.integers(0, 10**6), max_size=7, unique=True),
       foreign=st.lists(st.tuples(st.sampled_from(FOREIGN), st.from_regex(r"[a-z0-9_]{1,12}", fullmatch=True),
                                  st.binary(max_size=64)), max_size=8,
                        unique_by=lambda t: (t[0], t[1], len(t[2]))),
       keep=st.integers(0, 5))
def test_prune_deletes_only_mmasims_own_kernel_folders_beyond_the_newest_few(monkeypatch, tmp_path_factory, own,
                                                                             foreign, keep):
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("MMASIM_CACHE_DIR", str(root))
    parent, outside = root / "numba", root / "outside"
    parent.mkdir()
    outside.mkdir()
    for build, name, data in foreign:
        try:
            build(parent, name, outside, data)
        except FileExistsError:     # two draws naming the same thing: one of them is there
            pass
    foreign_before = _snapshot(root)
    # mmasim's own folders: the current digest's, and others written at times `own`
    _make_own(parent, cache.DIGEST, 0)
    mine = {_make_own(parent, _digest(10**7 + i), 2000 + t).name: 2000 + t for i, t in enumerate(own)}
    newest = sorted(mine, key=mine.get, reverse=True)[:keep]
    gone = cache.prune(keep)
    assert sorted(p.name for p in gone) == sorted(set(mine) - set(newest))
    left = _snapshot(root)
    assert {p: v for p, v in left.items() if p in foreign_before} == foreign_before     # every foreign thing intact
    assert set(foreign_before) <= set(left)
    assert (cache.kernel_dir() / cache.STAMP).is_file()
    assert sorted(p.name for p in parent.iterdir() if p.name in mine) == sorted(newest)


def test_a_folder_mmasim_made_for_a_kernel_is_stamped_as_its_own(tmp_path):
    src, kernels = tmp_path / "src", tmp_path / "kernels"
    src.mkdir()
    _own_module(src, "x + 1")
    assert _python(_OWN, kernels, src) == [2, 0, 1]
    folder = kernels / "numba" / cache.DIGEST[:cache.FOLDER_DIGITS]
    assert (folder / cache.STAMP).read_text() == cache.STAMP_TEXT.format(digest=cache.DIGEST)
    entry = next(e for e in os.scandir(folder.parent) if e.name == folder.name)
    assert sorted(cache.own_files(entry)) == sorted(p.name for p in folder.iterdir())


def test_the_warmup_mark_is_a_file_a_kernel_folder_of_mmasims_may_hold():
    from mmasim.cli import warmup

    assert warmup.MARK in cache.OWN_FILES


# ------------------------------------------------------------ damaged cache files
def _other(x):
    return x + 1


@pytest.fixture(scope="module")
def kernel_in_a_fresh_cache(tmp_path_factory):
    """The CDNA1 s8 integer kernel (a real mmasim kernel, small) and a jitted function of this
    module, both kept in a fresh MMASIM_CACHE_DIR, each entry written once."""
    import numpy as np

    import mmasim
    from mmasim import backends

    mp = pytest.MonkeyPatch()
    m = mmasim.MMA("CDNA1", "v_mfma.m4n4k4.s32.s8.s8", backend="numba")
    disp = backends.kernel_for(m).fn
    with pytest.MonkeyPatch.context() as env:   # a cache made now keeps its folder
        env.setenv("MMASIM_CACHE_DIR", str(tmp_path_factory.mktemp("damage")))
        mp.setattr(disp, "_cache", cache.KernelCache(disp.py_func))    # this dispatcher's cache: the fresh folder
        other = cache.jit(_other)
        folder = cache.kernel_dir()
    disp._reset_overloads()
    assert other(1) == 2
    rng = np.random.default_rng(34)
    a, b = (rng.integers(0, 256, (16, m.k), dtype=np.uint8) for _ in range(2))
    c = rng.integers(0, 2**32, 16, dtype=np.uint32)
    words = (a, b, c)
    m.dot(*words)
    yield m, disp, words, folder
    mp.undo()
    disp._reset_overloads()             # loaded again from the session's cache when next used


def _counts(disp):
    return sum(disp.stats.cache_hits.values()), sum(disp.stats.cache_misses.values())


_DAMAGE = st.one_of(
    st.tuples(st.just("truncate"), st.floats(0, 1, exclude_max=True)),       # at any length short of whole
    st.tuples(st.just("random bytes"), st.binary(min_size=1, max_size=4096)),
    st.tuples(st.just("empty"), st.just(b"")),
)


# each example compiles the kernel again (seconds): a few, and each kind of damage once for certain
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(suffix=st.sampled_from([".nbi", ".nbc"]), damage=_DAMAGE)
@example(suffix=".nbi", damage=("empty", b""))
@example(suffix=".nbc", damage=("truncate", 0.5))
@example(suffix=".nbi", damage=("random bytes", bytes(range(256))))
@example(suffix=".nbc", damage=("garbage that unpickles", pickle.dumps(("no", "kernel"))))
def test_a_damaged_kernel_file_is_discarded_and_the_kernel_compiled_again(kernel_in_a_fresh_cache, suffix, damage):
    m, disp, words, folder = kernel_in_a_fresh_cache
    entry = "primitives.integer_kernel-"     # this kernel's index and data files: the entry damaged
    (target,) = [p for p in folder.iterdir() if p.name.startswith(entry) and p.suffix == suffix]
    how, arg = damage
    whole = target.read_bytes()
    target.write_bytes(whole[:int(arg * len(whole))] if how == "truncate" else arg)
    others = {p: p.read_bytes() for p in folder.iterdir() if not p.name.startswith(entry)}
    assert len(others) >= 3             # the stamp, the other function's index and data
    hits, misses = _counts(disp)
    disp._reset_overloads()             # as a fresh process: the next call looks in the cache
    got = m.dot(*words)
    assert (got == m.dot(*words, backend="numpy")).all()
    assert _counts(disp) == (hits, misses + 1)          # compiled, not loaded
    assert {p: p.read_bytes() for p in folder.iterdir() if not p.name.startswith(entry)} == others  # nothing else
    disp._reset_overloads()
    assert (m.dot(*words) == got).all() and _counts(disp) == (hits + 1, misses + 1)  # saved again, whole


def _warmup_cli(*args):
    out = subprocess.run([sys.executable, "-m", "mmasim", "warmup", *args], capture_output=True, text=True,
                         timeout=900)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_mmasim_warmup_compiles_an_architectures_kernels_once_and_later_loads_them():
    # the session's kernel cache (the conftest warm-up fills it under xdist); MI100 is CDNA1:
    # the exact-sum, FMA f32 and integer kernels
    _warmup_cli("MI100", "--jobs", "1", "--json", "-q")
    doc = _warmup_cli("MI100", "--jobs", "1", "--json", "-q")
    assert doc["schema"] == "mmasim.warmup/1"
    assert doc["cache"] == str(cache.kernel_dir())
    kernels = {k["kernel"].split(" ")[0]: k for k in doc["kernels"]}
    assert sorted(kernels) == ["exact_sum_kernel", "fma_f32_kernel", "integer_kernel"]
    assert all((k["compiled"], k["loaded"]) == (0, 1) for k in kernels.values()), kernels


def test_mmasim_warmup_of_an_unknown_architecture_names_the_known_ones():
    out = subprocess.run([sys.executable, "-m", "mmasim", "warmup", "NoSuchGPU"], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 1
    assert "unknown architecture 'NoSuchGPU'" in out.stderr and "CDNA1" in out.stderr


def test_only_a_warmup_of_every_architecture_marks_the_cache_warm(monkeypatch, tmp_path):
    from mmasim.cli import warmup

    monkeypatch.setenv("MMASIM_CACHE_DIR", str(tmp_path))
    cache.kernel_dir().mkdir(parents=True)
    assert not warmup.warmed()
    monkeypatch.setattr(warmup, "signatures", lambda archs=None: [])     # nothing to compile
    warmup.warmup(jobs=1, progress=False, archs=["MI100"])
    assert not warmup.warmed()
    warmup.warmup(jobs=1, progress=False)
    assert warmup.warmed()


# a kernel of its own module in a fresh process: its values, the RuntimeWarnings it gave, and
# whether its two signatures were loaded or compiled
_UNUSABLE = """
    import json, sys, warnings
    sys.path.insert(0, sys.argv[1])
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        import kmod
        v = kmod.f(1), kmod.f(2.5)      # two signatures, two saves
    st = kmod.f.stats
    print(json.dumps([v, [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)],
                      sum(st.cache_hits.values()), sum(st.cache_misses.values())]))
"""


def _a_file_in_the_way(tmp_path):
    (tmp_path / "a-file").write_text("")       # the kernel folder would have to be inside a file
    return str(tmp_path / "a-file")


def _a_file_where_the_numba_folder_goes(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "numba").write_text("")
    return str(tmp_path / "root")


def _no_permission(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    # as root a folder's mode does not stop a write; /sys does (its folders are the kernel's)
    for where in (locked, Path("/sys")):
        try:
            (where / "probe").mkdir()
            (where / "probe").rmdir()
        except PermissionError:
            return str(where / "cache")
        except OSError:
            pass
    pytest.skip("no folder here that this user may not write")


def _unknown_user(tmp_path):
    return "~nosuchuser-of-mmasim/x"


@pytest.mark.parametrize("cache_dir", [_a_file_in_the_way, _a_file_where_the_numba_folder_goes, _no_permission,
                                       _unknown_user])
def test_a_cache_folder_that_cannot_be_used_leaves_the_kernel_compiled_with_one_warning(tmp_path, cache_dir):
    src, cwd = tmp_path / "src", tmp_path / "cwd"
    src.mkdir()
    cwd.mkdir()
    _own_module(src, "x + 1")
    folder = cache_dir(tmp_path)
    for _ in range(2):                  # nothing kept: every process compiles (and reads nothing)
        values, warned, hits, misses = _python(_UNUSABLE, folder, src, cwd=cwd)
        assert values == [2, 3.5] and (hits, misses) == (0, 2)
        assert len(warned) == 1 and "cannot be kept" in warned[0] and "MMASIM_CACHE_DIR" in warned[0], warned
    assert list(cwd.iterdir()) == []    # a ~user of no home folder is not a folder of the working directory
    if cache_dir is _unknown_user:
        assert "'~nosuchuser-of-mmasim' names no home folder" in warned[0]


def test_an_unknown_users_cache_folder_leaves_model_dot_computing(tmp_path):
    out = _python("""
        import json, warnings, numpy as np, mmasim
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            m = mmasim.MMA("CDNA1", "v_mfma.m4n4k4.s32.s8.s8", backend="numba")
            d = m.dot(np.full((4, m.k), 2, np.uint8), np.full((4, m.k), 3, np.uint8), np.zeros(4, np.uint32))
        print(json.dumps([d.tolist(), [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]]))
    """, "~nosuchuser-of-mmasim/x", cwd=tmp_path)
    assert out[0] == [4 * 2 * 3] * 4    # K = 4 products 2 * 3, s32
    assert len(out[1]) == 1 and "names no home folder" in out[1][0]
    assert list(tmp_path.iterdir()) == []


def test_an_empty_cache_folder_variable_means_the_user_cache_folder(tmp_path):
    src, cwd, home = tmp_path / "src", tmp_path / "cwd", tmp_path / "home"
    for d in (src, cwd, home):
        d.mkdir()
    _own_module(src, "x + 1")
    env = {"HOME": str(home), "XDG_CACHE_HOME": str(home / ".cache")}
    first = _python(_UNUSABLE, "", src, cwd=cwd, env=env)
    second = _python(_UNUSABLE, "", src, cwd=cwd, env=env)
    assert first == [[2, 3.5], [], 0, 2] and second == [[2, 3.5], [], 2, 0]     # kept, then loaded
    assert list(cwd.iterdir()) == []
    assert list(home.rglob("*.nbi"))
