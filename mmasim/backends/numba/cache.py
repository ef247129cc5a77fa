"""Where the compiled kernels are kept between processes, and which of them may be used.

Every kernel is compiled with :func:`jit`: a numba dispatcher whose on-disk cache is
:class:`KernelCache`, in ``$MMASIM_CACHE_DIR`` or else the user cache folder for ``mmasim``
(``~/.cache/mmasim`` on Linux), under ``numba/<digest>/``: :func:`sources_digest`, a SHA-256
of every source file of this backend, of the codes it shares with the spec
(``mmasim/arith/codes.py``) and of the CUDA backend's bodies (``mmasim/backends/cuda/``, compiled
here by their CPU drivers), since the kernels inline primitives from several of them and
freeze the codes (a changed file changes the folder and the stamp numba checks).  Cells of
a closure are keyed by what they are (:func:`_cell_key`), not by numba's pickle of them, which gives a
dispatcher a random id.  Nothing is written on import, only when a kernel is compiled; a
folder that cannot be used (one that cannot be made or written, a ``~user`` of no home
folder) leaves the kernels compiled per process, with one warning.

Each kernel folder mmasim makes holds a stamp (:data:`STAMP`, naming the folder's full
digest): :func:`prune` deletes only folders it can prove are its own (:func:`own_files`),
never anything else under ``numba/``.  A damaged index or data file of numba's (truncated,
garbage) is discarded, that file only, and its kernel compiled again (:class:`KernelFile`).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import warnings
from pathlib import Path

from numba.core.caching import CompileResultCacheImpl, FunctionCache, IndexDataCacheFile, _CacheLocator
from numba.core.dispatcher import Dispatcher
from numba.misc.appdirs import AppDirs

ENV = "MMASIM_CACHE_DIR"
#: sibling source digests kept when a new one is first written (other installs, recent edits)
KEEP_DIGESTS = 4
#: the file that marks a kernel folder as mmasim's: its text is ``STAMP_TEXT`` of the full digest
STAMP = "mmasim-kernels.stamp"
STAMP_TEXT = "mmasim kernel cache, sources {digest}\n"
_STAMP_TEXT = re.compile(re.escape(STAMP_TEXT).replace(re.escape("{digest}"), "([0-9a-f]{64})"))
#: the other files mmasim writes into a kernel folder: the warm-up's mark (mmasim.cli.warmup.MARK)
OWN_FILES = ("warmed.json",)
#: the name of a kernel folder: the first FOLDER_DIGITS hex digits of a source digest
FOLDER_DIGITS = 20
_FOLDER_NAME = re.compile(f"[0-9a-f]{{{FOLDER_DIGITS}}}")
#: the files numba's cache writes for a kernel here (:class:`KernelLocator` disambiguates them
#: with "mmasim"): ``<module>.<function>-mmasim.py<version>.nbi``, ``... .<n>.nbc``, and
#: the temporary file of each that an interrupted write leaves (``... .tmp.<16 hex digits>``)
_NUMBA_FILE = re.compile(r"[\w.]+-mmasim\.py\d+\w*\.(?:nbi|\d+\.nbc)(?:\.tmp\.[0-9a-f]{16})?")

_HERE = Path(__file__).parent
#: the source outside this backend whose constants the kernels freeze: the shared codes and sentinels
SHARED_CODES = _HERE.parents[1] / "arith" / "codes.py"
#: the target-neutral bodies of the CUDA backend, which their CPU drivers compile here (a driver
#: defined in one of its files inlines bodies and rules from the others)
CUDA_BODIES = _HERE.parent / "cuda"
_file_digests: dict = {}


def sources_digest(folder: Path = _HERE) -> str:
    """SHA-256 (hex) of the name and bytes of every ``.py`` file of ``folder``, of
    :data:`SHARED_CODES` and of :data:`CUDA_BODIES`."""
    digest = hashlib.sha256()
    for f in [*sorted(Path(folder).glob("*.py")), SHARED_CODES, *sorted(CUDA_BODIES.glob("*.py"))]:
        digest.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()


DIGEST = sources_digest()


def cache_root() -> Path:
    """The mmasim cache folder: ``$MMASIM_CACHE_DIR`` (unless empty) or the user cache
    folder, ``~`` expanded where it names a home folder (:func:`unusable`)."""
    env = os.environ.get(ENV)
    return Path(os.path.expanduser(env or AppDirs(appname="mmasim", appauthor=False).user_cache_dir))


def unusable() -> str:
    """Why :func:`cache_root` cannot be used before any file is tried, or ``""``: a leading
    ``~`` or ``~user`` that names no home folder (never read as a folder of that name)."""
    root = str(cache_root())
    if not root.startswith("~"):
        return ""
    given = f" ({ENV}={os.environ[ENV]!r})" if os.environ.get(ENV) else ""
    return f"{root.split(os.sep)[0]!r} names no home folder{given}"


def kernel_dir() -> Path:
    """The folder of the kernels compiled from these sources."""
    return cache_root() / "numba" / DIGEST[:FOLDER_DIGITS]


def _file_digest(path: str) -> str:
    if path not in _file_digests:
        try:
            _file_digests[path] = hashlib.sha256(Path(path).read_bytes()).hexdigest()
        except OSError:
            _file_digests[path] = "unreadable"
    return _file_digests[path]


def stamp(folder) -> None:
    """Write the stamp (:data:`STAMP`) of this digest into ``folder``, the kernel folder a
    kernel is saved in, unless something of that name is there (never through a link)."""
    path = os.path.join(folder, STAMP)
    if not os.path.lexists(path):
        try:
            with open(path, "x", encoding="ascii") as f:
                f.write(STAMP_TEXT.format(digest=DIGEST))
        except FileExistsError:     # another process stamped it first
            pass


def _stamped(folder: str, name: str) -> bool:
    """Whether ``folder`` (named ``name``) holds mmasim's stamp of a digest starting with ``name``:
    a regular file (never a link followed) of exactly that text."""
    try:
        fd = os.open(os.path.join(folder, STAMP), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        text = os.read(fd, 200).decode("ascii") if stat.S_ISREG(os.fstat(fd).st_mode) else ""
    except (OSError, UnicodeDecodeError):
        return False
    finally:
        os.close(fd)
    m = _STAMP_TEXT.fullmatch(text)
    return m is not None and m.group(1).startswith(name)


def own_files(entry) -> list | None:
    """The files of ``entry`` (an ``os.DirEntry`` under ``numba/``) if it is a kernel folder
    mmasim made, else ``None``: a real folder (not a link) named as a digest's folder, holding
    the stamp of that digest and nothing but regular files of the names mmasim and numba's
    cache write there.  Anything else is not mmasim's to delete, whatever its name."""
    if not _FOLDER_NAME.fullmatch(entry.name):
        return None
    try:
        if not entry.is_dir(follow_symlinks=False):
            return None
        with os.scandir(entry.path) as it:
            files = list(it)
        if not all(f.is_file(follow_symlinks=False) for f in files):
            return None
    except OSError:
        return None
    names = [f.name for f in files]
    if not all(n in (STAMP, *OWN_FILES) or _NUMBA_FILE.fullmatch(n) for n in names):
        return None
    return names if STAMP in names and _stamped(entry.path, entry.name) else None


def prune(keep: int = KEEP_DIGESTS) -> list:
    """Delete mmasim's kernel folders (:func:`own_files`) of other source digests but the
    ``keep`` most recently written; returns the folders deleted.  Nothing else under
    ``numba/`` is touched: not a folder of another name or with a file mmasim did not write
    there, not a link (nor what it points to)."""
    if unusable():
        return []
    here = kernel_dir()
    try:
        with os.scandir(here.parent) as it:
            entries = [e for e in it if e.name != here.name]
    except OSError:
        return []
    own = []
    for e in entries:
        files = own_files(e)
        if files is not None:
            try:
                own.append((e.stat(follow_symlinks=False).st_mtime, e.path, files))
            except OSError:
                pass
    own.sort(reverse=True)
    gone = []
    for _, path, files in own[keep:]:
        try:        # the stamp last: a folder left half deleted is still provably mmasim's
            for name in sorted(files, key=lambda n: n == STAMP):
                os.unlink(os.path.join(path, name))
            os.rmdir(path)      # fails if anything has appeared since: then it stays
            gone.append(Path(path))
        except OSError:
            pass
    return gone


class KernelLocator(_CacheLocator):
    """numba cache locator: :func:`kernel_dir`, stamped with the source digest (and the
    digest of the file that defines the function, for kernels defined elsewhere)."""

    def __init__(self, py_func, py_file):
        self._path = str(kernel_dir())
        self._stamp = (DIGEST, _file_digest(py_file))
        #: why the folder cannot be used at all (:func:`unusable`), or ""
        self.unusable = unusable()

    def ensure_cache_path(self):
        if self.unusable:
            raise OSError(self.unusable)
        new = not os.path.isdir(self._path)
        super().ensure_cache_path()
        stamp(self._path)
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


def _discard(path: str) -> None:
    """Delete ``path``, a damaged file of numba's cache, if it is a regular file."""
    try:
        if stat.S_ISREG(os.lstat(path).st_mode):
            os.unlink(path)
    except OSError:
        pass


class KernelFile(IndexDataCacheFile):
    """numba's index (``.nbi``) and data (``.nbc``) files of one kernel, where a damaged file
    (truncated, garbage: anything numba's loader raises on but a file that cannot be read) is
    discarded, that file only, and reads as a miss: the kernel is compiled and saved again."""

    def _load_index(self):
        try:
            overloads = super()._load_index()
        except OSError:
            raise
        except Exception:       # noqa: BLE001 - whatever unpickling garbage raises
            overloads = None
        if isinstance(overloads, dict):
            return overloads
        _discard(self._index_path)
        return {}

    def _load_data(self, name):
        try:
            return super()._load_data(name)
        except OSError:
            raise
        except Exception:       # noqa: BLE001
            self.discard_data(name)
            return None

    def discard_data(self, name) -> None:
        """Delete the data file ``name`` (the index still names it: a later save rewrites it)."""
        _discard(self._data_path(name))


class KernelCache(FunctionCache):
    """numba's function cache in :func:`kernel_dir`, keyed the same in every process; its
    files are :class:`KernelFile`."""

    _impl_class = _KernelCacheImpl
    _unwritable_warned = False

    def __init__(self, py_func):
        super().__init__(py_func)
        self._cache_file = KernelFile(cache_path=self._cache_path, filename_base=self._impl.filename_base,
                                      source_stamp=self._impl.locator.get_source_stamp())

    def _index_key(self, sig, codegen):
        f = self._py_func
        cells = "\0".join(_cell_key(c.cell_contents) for c in (f.__closure__ or ()))
        h = lambda b: hashlib.sha256(b).hexdigest()  # noqa: E731
        return sig, codegen.magic_tuple(), (h(f.__code__.co_code), h(cells.encode()))

    def load_overload(self, sig, target_context):
        if self._impl.locator.unusable:
            return None
        try:
            return super().load_overload(sig, target_context)
        except OSError:         # a folder that cannot be read (or is not one): compile
            return None

    def _load_overload(self, sig, target_context):
        if not self._enabled:
            return None
        key = self._index_key(sig, target_context.codegen())
        data = self._cache_file.load(key)
        if data is None:
            return None
        try:
            return self._impl.rebuild(target_context, data)
        except Exception:       # noqa: BLE001 - data that unpickles but is no compiled kernel
            name = self._cache_file._load_index().get(key)
            if name is not None:
                self._cache_file.discard_data(name)
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
