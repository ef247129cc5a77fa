"""Where the compiled kernels are kept between processes, and which of them may be used.

Every kernel is compiled with :func:`jit`: a numba dispatcher whose on-disk cache is
:class:`KernelCache`, in ``$MMASIM_CACHE_DIR`` or else the user cache folder for ``mmasim``
(``~/.cache/mmasim`` on Linux), under ``numba/<digest>/``: :func:`sources_digest`, a SHA-256
of every source file of this backend, since the kernels inline primitives from several of
them (a changed file changes the folder and the stamp numba checks).  Cells of a closure are
keyed by what they are (:func:`_cell_key`), not by numba's pickle of them, which gives a
dispatcher a random id.  Nothing is written on import, only when a kernel is compiled; a
folder that cannot be written leaves the kernels compiled per process.
"""

from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path

from numba.core.caching import CompileResultCacheImpl, FunctionCache, _CacheLocator
from numba.core.dispatcher import Dispatcher
from numba.misc.appdirs import AppDirs

ENV = "MMASIM_CACHE_DIR"
#: sibling source digests kept when a new one is first written (other installs, recent edits)
KEEP_DIGESTS = 4

_HERE = Path(__file__).parent
_file_digests: dict = {}


def sources_digest(folder: Path = _HERE) -> str:
    """SHA-256 (hex) of the name and bytes of every ``.py`` file of ``folder``."""
    digest = hashlib.sha256()
    for f in sorted(Path(folder).glob("*.py")):
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


DIGEST = sources_digest()


def cache_root() -> Path:
    """The mmasim cache folder: ``$MMASIM_CACHE_DIR`` or the user cache folder."""
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    return Path(AppDirs(appname="mmasim", appauthor=False).user_cache_dir)


def kernel_dir() -> Path:
    """The folder of the kernels compiled from these sources."""
    return cache_root() / "numba" / DIGEST[:20]


def _file_digest(path: str) -> str:
    if path not in _file_digests:
        try:
            _file_digests[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            _file_digests[path] = "unreadable"
    return _file_digests[path]


def prune(keep: int = KEEP_DIGESTS) -> list:
    """Delete the kernel folders of other source digests but the ``keep`` most recently
    written; returns the folders deleted."""
    parent = kernel_dir().parent
    try:
        others = [p for p in parent.iterdir() if p.is_dir() and p.name != kernel_dir().name]
    except OSError:
        return []
    others.sort(key=lambda p: p.stat().st_mtime, reverse=True)
    gone = []
    for p in others[keep:]:
        for f in p.iterdir():
            f.unlink(missing_ok=True)
        try:
            p.rmdir()
            gone.append(p)
        except OSError:
            pass
    return gone


class KernelLocator(_CacheLocator):
    """numba cache locator: :func:`kernel_dir`, stamped with the source digest (and the
    digest of the file that defines the function, for kernels defined elsewhere)."""

    def __init__(self, py_func, py_file):
        self._path = str(kernel_dir())
        self._stamp = (DIGEST, _file_digest(py_file))

    def ensure_cache_path(self):
        new = not os.path.isdir(self._path)
        super().ensure_cache_path()
        if new:
            prune()

    def get_cache_path(self):
        return self._path

    def get_source_stamp(self):
        return self._stamp

    def get_disambiguator(self):
        return "mmasim"

    @classmethod
    def from_function(cls, py_func, py_file):
        return cls(py_func, py_file)


class _KernelCacheImpl(CompileResultCacheImpl):
    _locator_classes = [KernelLocator]


def _cell_key(value) -> str:
    """A closure cell's part of the cache key, the same in every process: a dispatcher by
    its function's module and name (its source is in the digest), anything else by repr."""
    if isinstance(value, Dispatcher):
        return f"dispatcher {value.py_func.__module__}.{value.py_func.__qualname__}"
    return f"{type(value).__module__}.{type(value).__qualname__} {value!r}"


class KernelCache(FunctionCache):
    """numba's function cache in :func:`kernel_dir`, keyed the same in every process."""

    _impl_class = _KernelCacheImpl
    _unwritable_warned = False

    def _index_key(self, sig, codegen):
        f = self._py_func
        cells = "\0".join(_cell_key(c.cell_contents) for c in (f.__closure__ or ()))
        h = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731
        return sig, codegen.magic_tuple(), (h(f.__code__.co_code), h(cells.encode()))

    def load_overload(self, sig, target_context):
        try:
            return super().load_overload(sig, target_context)
        except OSError:         # a folder that cannot be read (or is not one): compile
            return None

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except OSError as exc:
            if not KernelCache._unwritable_warned:
                KernelCache._unwritable_warned = True
                warnings.warn(f"mmasim: compiled kernels cannot be kept in {self.cache_path} ({exc}); "
                              f"they are compiled again in every process (set {ENV} to a writable folder)",
                              RuntimeWarning, stacklevel=2)


def jit(fn=None, **options):
    """``numba.njit(nogil=True, **options)`` with the kernel cache (:class:`KernelCache`)."""
    import numba

    def wrap(f):
        disp = numba.njit(nogil=True, **options)(f)
        disp._cache = KernelCache(disp.py_func)
        return disp

    return wrap if fn is None else wrap(fn)
