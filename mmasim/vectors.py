"""Frozen test vectors: the ``mmasim-vectors`` v1 file format (docs/vectors.md).

A vector file is a compressed numpy ``.npz`` (read with ``allow_pickle=False``)
holding ``a`` (N, K), ``b`` (N, K), ``c`` (N,), ``d`` (N,) container words as
uint64, optional ``scale_a``/``scale_b`` (N, blocks) and ``sparse_metadata``
(N, words), and ``meta``: a JSON string with the architecture, the instruction,
qualifiers, the NaN comparison policy and the provenance of the expected words.
"""

from __future__ import annotations

import json
import os
import pathlib
import stat
import zipfile
import zlib

import attrs
import numpy as np

from .decode import NAN
from .errors import MMAError

FORMAT = "mmasim-vectors"
VERSION = 1
SOURCES = ("hardware", "peer", "hand-derived", "simulated")
NAN_POLICIES = ("canonical", "any")
_REQUIRED = ("a", "b", "c", "d", "meta")
_OPTIONAL = ("scale_a", "scale_b", "sparse_metadata", "labels")
#: the most array data one vector file may declare (the sum over its arrays of
#: shape * itemsize, read from the .npy headers before anything is loaded).  The
#: largest bundled file declares well under 1 MiB.
MAX_BYTES = 256 * 1024 * 1024


class VectorFileError(MMAError):
    """A vector file is unreadable, corrupt, or not in the mmasim-vectors format."""


@attrs.frozen(eq=False)
class VectorFile:
    path: str
    meta: dict
    a: np.ndarray
    b: np.ndarray
    c: np.ndarray
    d: np.ndarray
    scale_a: np.ndarray | None = None
    scale_b: np.ndarray | None = None
    sparse_metadata: np.ndarray | None = None
    labels: np.ndarray | None = None

    @property
    def arch(self) -> str:
        return self.meta["arch"]

    @property
    def instruction(self) -> str:
        return self.meta["instruction"]

    @property
    def qualifiers(self) -> dict:
        return dict(self.meta.get("qualifiers") or {})

    @property
    def provenance(self) -> dict:
        return self.meta["provenance"]

    @property
    def source(self) -> str:
        return self.provenance["source"]

    @property
    def nan_policy(self) -> str:
        return self.meta.get("nan_policy", "canonical")

    def __len__(self) -> int:
        return int(self.d.shape[0])


def _declared_bytes(path: pathlib.Path, limit: int) -> None:
    """Check that ``path`` is a regular file holding a zip of .npy members whose
    headers declare at most ``limit`` bytes of array data in all (without
    decompressing any array)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise VectorFileError(f"{path}: no such vector file") from None
    except OSError as exc:
        raise VectorFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise VectorFileError(f"{path}: not a regular file (a vector file is an .npz file)")
    total = 0
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    raise VectorFileError(f"{path}: not an npz vector file (member {info.filename!r} is not an .npy array)")
                with zf.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    if version == (1, 0):
                        shape, _, dtype = np.lib.format.read_array_header_1_0(member)
                    elif version == (2, 0):
                        shape, _, dtype = np.lib.format.read_array_header_2_0(member)
                    else:
                        raise VectorFileError(f"{path}: not an npz vector file (.npy version {version})")
                if dtype.hasobject:
                    raise VectorFileError(f"{path}: not an npz vector file (array {info.filename!r} holds Python objects)")
                count = 1
                for dim in shape:
                    count *= int(dim)
                total += count * dtype.itemsize
                if total > limit:
                    raise VectorFileError(
                        f"{path}: its arrays declare more than {limit // (1 << 20)} MiB of data; refused "
                        f"(mmasim.vectors.MAX_BYTES)")
    except VectorFileError:
        raise
    except zipfile.BadZipFile:
        raise VectorFileError(f"{path}: not an npz vector file (not a zip archive, or a truncated one)") from None
    except (OSError, ValueError, EOFError, zlib.error, RuntimeError, TypeError, KeyError, NotImplementedError) as exc:
        raise VectorFileError(f"{path}: not an npz vector file ({type(exc).__name__}: {exc})") from None


def load(path, max_bytes: int | None = None) -> VectorFile:
    """Read and check one vector file; every problem is a :class:`VectorFileError` naming the file.

    Only regular files are opened, and a file whose .npy headers declare more
    than ``max_bytes`` (default :data:`MAX_BYTES`) of array data is refused
    before anything is decompressed.
    """
    path = pathlib.Path(path)
    _declared_bytes(path, MAX_BYTES if max_bytes is None else max_bytes)
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
    except FileNotFoundError:
        raise VectorFileError(f"{path}: no such vector file") from None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError, KeyError, zlib.error, RuntimeError) as exc:
        raise VectorFileError(f"{path}: not a readable mmasim-vectors .npz file ({exc})") from exc
    missing = [k for k in _REQUIRED if k not in arrays]
    if missing:
        raise VectorFileError(f"{path}: missing arrays {missing} (an mmasim-vectors file has {list(_REQUIRED)})")
    try:
        meta = json.loads(str(arrays["meta"]))
    except (TypeError, ValueError) as exc:
        raise VectorFileError(f"{path}: 'meta' is not a JSON string ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise VectorFileError(f"{path}: meta.format is not {FORMAT!r}")
    if meta.get("version") != VERSION:
        raise VectorFileError(f"{path}: unsupported mmasim-vectors version {meta.get('version')!r} (expected {VERSION})")
    for key in ("arch", "instruction", "provenance"):
        if key not in meta:
            raise VectorFileError(f"{path}: meta has no {key!r}")
    prov = meta["provenance"]
    if not isinstance(prov, dict) or prov.get("source") not in SOURCES:
        raise VectorFileError(f"{path}: provenance.source must be one of {SOURCES}")
    if not isinstance(meta["arch"], str) or not isinstance(meta["instruction"], str):
        raise VectorFileError(f"{path}: meta.arch and meta.instruction must be strings")
    if not isinstance(meta.get("qualifiers") or {}, dict):
        raise VectorFileError(f"{path}: meta.qualifiers must be an object (keyword qualifiers of mmasim.MMA)")
    if meta.get("nan_policy", "canonical") not in NAN_POLICIES:
        raise VectorFileError(f"{path}: nan_policy must be one of {NAN_POLICIES}")
    a, b, c, d = (arrays[k] for k in ("a", "b", "c", "d"))
    for name, arr in (("a", a), ("b", b), ("c", c), ("d", d)):
        if arr.dtype.kind not in "iu":
            raise VectorFileError(f"{path}: array {name!r} must hold integer words, not {arr.dtype}")
    n = d.shape[0] if d.ndim == 1 else -1
    if a.ndim != 2 or b.shape != a.shape or c.shape != (n,) or a.shape[0] != n:
        raise VectorFileError(
            f"{path}: inconsistent shapes a{a.shape} b{b.shape} c{c.shape} d{d.shape} (expected (N,K),(N,K),(N,),(N,))"
        )
    extra = {}
    for key in _OPTIONAL:
        if key in arrays:
            if arrays[key].shape[:1] != (n,):
                raise VectorFileError(f"{path}: array {key!r} must have N={n} rows, has shape {arrays[key].shape}")
            if key != "labels" and (arrays[key].dtype.kind not in "iu" or arrays[key].ndim != 2):
                raise VectorFileError(f"{path}: array {key!r} must hold integer words of shape (N, n)")
            extra[key] = arrays[key]
    return VectorFile(str(path), meta, a, b, c, d, **extra)


def save(path, *, arch: str, instruction: str, a, b, c, d, provenance: dict, qualifiers=None,
         nan_policy: str = "canonical", notes: str = "", scale_a=None, scale_b=None,
         sparse_metadata=None, labels=None) -> pathlib.Path:
    """Write a vector file (the inverse of :func:`load`)."""
    if provenance.get("source") not in SOURCES:
        raise VectorFileError(f"provenance.source must be one of {SOURCES}")
    meta = {
        "format": FORMAT, "version": VERSION, "arch": arch, "instruction": instruction,
        "qualifiers": qualifiers or {}, "nan_policy": nan_policy, "provenance": provenance,
        "cases": int(np.asarray(d).shape[0]), "notes": notes,
    }
    arrays = {
        "meta": np.array(json.dumps(meta, sort_keys=True)),
        "a": np.asarray(a, dtype=np.uint64), "b": np.asarray(b, dtype=np.uint64),
        "c": np.asarray(c, dtype=np.uint64), "d": np.asarray(d, dtype=np.uint64),
    }
    for key, value in (("scale_a", scale_a), ("scale_b", scale_b), ("sparse_metadata", sparse_metadata)):
        if value is not None:
            arrays[key] = np.asarray(value, dtype=np.uint64)
    if labels is not None:
        arrays["labels"] = np.asarray(labels, dtype=str)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(path, **arrays)
    return path


def find(paths=None) -> list:
    """Vector files under ``paths`` (files or directories); default: the bundled ``vectors/``."""
    if not paths:
        paths = [bundled_root()]
    out = []
    for p in map(pathlib.Path, paths):
        if p.is_dir():
            out += sorted(p.rglob("*.npz"))
        else:
            out.append(p)
    return out


def bundled_root() -> pathlib.Path:
    """The bundled vectors: the installed ``mmasim_vectors`` package data, or
    ``vectors/`` of a source checkout."""
    try:
        from importlib import resources

        root = pathlib.Path(str(resources.files("mmasim_vectors")))
        if root.is_dir():
            return root
    except (ImportError, TypeError):
        pass
    cand = pathlib.Path(__file__).resolve().parent.parent / "vectors"
    if cand.is_dir():
        return cand
    raise VectorFileError("no bundled vectors found (the mmasim_vectors package is not installed)")


@attrs.frozen(eq=False)
class Outcome:
    file: VectorFile
    got: np.ndarray
    mismatches: np.ndarray      # indices of mismatching cases


def model_for(vf: VectorFile):
    """The simulator model a vector file's meta names (may raise :class:`MMAError`)."""
    from . import MMA

    return MMA(vf.arch, vf.instruction, **vf.qualifiers)


def run(vf: VectorFile, model=None) -> Outcome:
    """Run a vector file through the simulator (``model``, default: the one its
    meta names) and compare every word."""
    if model is None:
        model = model_for(vf)
    kw = {}
    if vf.scale_a is not None:
        kw = {"scale_a": vf.scale_a, "scale_b": vf.scale_b}
    if vf.sparse_metadata is not None:
        kw["sparse_metadata"] = vf.sparse_metadata
    got = np.asarray(model.dot(vf.a, vf.b, vf.c, **kw)).astype(np.uint64)
    expected = vf.d.astype(np.uint64)
    same = got == expected
    if vf.nan_policy == "any":
        same |= (model.decode("d", got).cls == NAN) & (model.decode("d", expected).cls == NAN)
    return Outcome(vf, got, np.flatnonzero(~same))
