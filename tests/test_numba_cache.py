"""The numba backend's kernel cache (mmasim/backends/numba/cache.py): kernels are kept in the user
cache folder (``MMASIM_CACHE_DIR``), a fresh process loads them instead of compiling, nothing is
written into the package or on import, and a kernel compiled from one version of the backend's
sources is never loaded by another (numba itself keys a cached function by the stamp of the one
file that defines it, and the kernels inline primitives from other files)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("numba")

from mmasim.backends.numba import cache  # noqa: E402

PACKAGE = Path(cache.__file__).parent


def _python(code, cache_dir, *args):
    """Run ``code`` in a fresh interpreter with the kernel cache in ``cache_dir``; its last
    stdout line, parsed as JSON."""
    env = dict(os.environ, MMASIM_CACHE_DIR=str(cache_dir))
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code), *map(str, args)], env=env,
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


def test_the_cache_folder_is_the_environment_variable_else_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("MMASIM_CACHE_DIR", str(tmp_path))
    assert cache.kernel_dir() == tmp_path / "numba" / cache.DIGEST[:20]
    monkeypatch.delenv("MMASIM_CACHE_DIR")
    root = cache.cache_root()
    assert root.name.lower() in ("mmasim", "cache") and PACKAGE not in root.parents


def test_other_digests_beyond_the_newest_few_are_pruned(monkeypatch, tmp_path):
    monkeypatch.setenv("MMASIM_CACHE_DIR", str(tmp_path))
    parent = tmp_path / "numba"
    for i in range(cache.KEEP_DIGESTS + 2):
        d = parent / f"old{i}"
        d.mkdir(parents=True)
        (d / "k.nbi").write_bytes(b"")
        os.utime(d, (1000 + i, 1000 + i))
    gone = cache.prune()
    assert sorted(p.name for p in gone) == ["old0", "old1"]
    assert sorted(p.name for p in parent.iterdir()) == [f"old{i}" for i in range(2, cache.KEEP_DIGESTS + 2)]


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


def test_a_cache_folder_that_cannot_be_written_leaves_the_kernel_compiled_with_one_warning(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _own_module(src, "x + 1")
    blocked = tmp_path / "a-file"
    blocked.write_text("")              # the kernel folder would have to be inside a file
    code = """
        import json, sys, warnings
        sys.path.insert(0, sys.argv[1])
        import kmod
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            v = kmod.f(1), kmod.f(2.5)      # two signatures, two saves refused
        print(json.dumps([v, [str(w.message) for w in seen if issubclass(w.category, RuntimeWarning)]]))
    """
    values, warned = _python(code, blocked, src)
    assert values == [2, 3.5]
    assert len(warned) == 1 and "cannot be kept" in warned[0] and "MMASIM_CACHE_DIR" in warned[0]
