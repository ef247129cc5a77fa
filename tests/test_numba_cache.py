"""The numba backend's on-disk cache is dropped when any source of the backend changes
(mmasim/backends/numba/primitives.py, ``invalidate_stale_cache``): numba itself keys a cached
kernel by the stamp of the one file that defines it, and the kernels inline primitives from
other files, so an edited primitive would otherwise be served as old machine code."""

import pytest

pytest.importorskip("numba")

from mmasim.backends.numba.primitives import invalidate_stale_cache  # noqa: E402


def _cache(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("y = 2\n")
    cache = tmp_path / "__pycache__"
    cache.mkdir()
    for name in ("a.k-1.py311.nbi", "a.k-1.py311.1.nbc", "other.cpython-311.pyc"):
        (cache / name).write_bytes(b"compiled")
    return cache


def test_cached_kernels_without_a_stamp_are_dropped_and_the_pyc_files_kept(tmp_path):
    cache = _cache(tmp_path)
    assert invalidate_stale_cache(tmp_path) is True
    assert sorted(p.name for p in cache.iterdir()) == ["mmasim-numba-sources.sha256", "other.cpython-311.pyc"]


def test_cached_kernels_of_unchanged_sources_are_kept(tmp_path):
    cache = _cache(tmp_path)
    invalidate_stale_cache(tmp_path)
    (cache / "a.k-1.py311.nbi").write_bytes(b"compiled again")
    assert invalidate_stale_cache(tmp_path) is False
    assert (cache / "a.k-1.py311.nbi").exists()


def test_an_edit_to_any_source_drops_every_cached_kernel(tmp_path):
    cache = _cache(tmp_path)
    invalidate_stale_cache(tmp_path)
    (cache / "a.k-1.py311.nbi").write_bytes(b"compiled from the old b.py")
    (tmp_path / "b.py").write_text("y = 3\n")           # a primitive the kernel of a.py inlines
    assert invalidate_stale_cache(tmp_path) is True
    assert not (cache / "a.k-1.py311.nbi").exists()
