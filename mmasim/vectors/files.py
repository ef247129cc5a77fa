"""Frozen test vectors: the ``mmasim-vectors`` v1 file format (docs/vectors.md).

A vector file is a compressed numpy ``.npz`` (read with ``allow_pickle=False``)
holding ``a`` (N, K), ``b`` (N, K), ``c`` (N,), ``d`` (N,) container words as
uint64, optional ``scale_a``/``scale_b`` (N, blocks) and ``sparse_metadata``
(N, words), and ``meta``: a JSON string with the architecture, the instruction,
qualifiers, the NaN comparison policy and the provenance of the expected words.
"""

from __future__ import annotations

import collections
import json
import math
import os
import pathlib
import stat
import zipfile
import zlib

import attrs
import numpy as np

from mmasim.arith.decode import NAN
from mmasim.operands.display import one_line
from mmasim.errors import MMAError

FORMAT = "mmasim-vectors"
VERSION = 1
SOURCES = ("hardware", "peer", "hand-derived", "simulated")
NAN_POLICIES = ("canonical", "any")
_REQUIRED = ("a", "b", "c", "d", "meta")
_OPTIONAL = ("scale_a", "scale_b", "sparse_metadata", "labels")
#: the most array data one vector file may hold (the sum over its arrays of
#: shape * itemsize, checked against each .npy header before that member's data is
#: read, and on the bytes read).  The largest bundled file holds well under 1 MiB.
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


#: the most bytes one member's ``.npy`` header may take (numpy writes well under 1 KiB)
MAX_HEADER = 1 << 16


class _Bounded:
    """A member of the zip read through a budget: a read past ``limit`` bytes from the start
    is refused with ``refusal`` (so neither a header nor a member's data can decompress more
    than allowed)."""

    def __init__(self, fp, limit: int, refusal: str):
        self.fp, self.limit, self.pos, self.refusal = fp, limit, 0, refusal

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0 or self.pos + n > self.limit:
            raise VectorFileError(self.refusal)
        data = self.fp.read(n)
        self.pos += len(data)
        return data


def _header(member: _Bounded, where: str):
    """``(shape, fortran_order, dtype)`` of the ``.npy`` header at the start of ``member``."""
    version = np.lib.format.read_magic(member)
    read = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    if version not in read:
        raise VectorFileError(f"{where}: not an .npy array of version 1.0 or 2.0 (version {version})")
    shape, fortran, dtype = read[version](member, max_header_size=MAX_HEADER)
    if any(int(dim) < 0 for dim in shape):
        raise VectorFileError(f"{where}: a negative dimension in its shape {shape}")
    if dtype.hasobject:
        raise VectorFileError(f"{where}: holds Python objects (a vector file holds words, labels and meta)")
    return shape, fortran, dtype


def _read_arrays(path: pathlib.Path, limit: int) -> dict:
    """Every array of the vector file ``path``, each member checked as it is read: a regular
    file, a zip of ``.npy`` members with distinct known names and no Python objects, whose
    headers declare at most ``limit`` bytes of array data in all (read before any data), and
    each of which holds exactly the bytes its header declares (a read past them is refused,
    so no more than ``limit`` bytes are ever decompressed)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise VectorFileError(f"{path}: no such vector file") from None
    except OSError as exc:
        raise VectorFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(st.st_mode):
        raise VectorFileError(f"{path}: not a regular file (a vector file is an .npz file)")
    budget = limit
    arrays: dict = {}
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
            names = [info.filename for info in infos]
            twice = sorted({n for n, count in collections.Counter(names).items() if count > 1})
            if twice:
                raise VectorFileError(f"{path}: members {twice} appear more than once (a vector file holds each "
                                      "array once)")
            declared = []        # first every header (nothing decompressed past them), then the data
            for info in infos:
                key = info.filename[:-4] if info.filename.endswith(".npy") else None
                if key not in _REQUIRED + _OPTIONAL:
                    raise VectorFileError(
                        f"{path}: not an npz vector file (member {info.filename!r} is not one of its arrays: "
                        f"{', '.join(k + '.npy' for k in _REQUIRED + _OPTIONAL)})")
                where = f"{path}: member {info.filename!r}"
                with zf.open(info) as raw:
                    shape, fortran, dtype = _header(_Bounded(raw, MAX_HEADER + 16, f"{where}: its .npy header is "
                                                             f"longer than {MAX_HEADER // 1024} KiB; refused"), where)
                count = math.prod(int(dim) for dim in shape)
                budget -= count * dtype.itemsize
                if budget < 0:
                    raise VectorFileError(f"{path}: its arrays declare more than {limit // (1 << 20)} MiB of data; "
                                          "refused (mmasim.vectors.files.MAX_BYTES)")
                declared.append((info, key, where, shape, fortran, dtype, count))
            for info, key, where, shape, fortran, dtype, count in declared:
                nbytes = count * dtype.itemsize
                with zf.open(info) as raw:
                    member = _Bounded(raw, MAX_HEADER + 16, f"{where}: changed while it was read")
                    _header(member, where)
                    # the data, and one byte more: a member that holds more than it declares is refused
                    member.limit = member.pos + nbytes + 1
                    member.refusal = f"{where}: holds more data than its header declares; refused"
                    data = bytearray(member.read(nbytes))
                    if len(data) != nbytes:
                        raise VectorFileError(f"{where}: truncated ({len(data)} of {nbytes} bytes)")
                    if member.read(1):
                        raise VectorFileError(member.refusal)
                arr = np.frombuffer(data, dtype=dtype, count=count) if count else np.zeros(0, dtype)
                arrays[key] = arr.reshape(shape[::-1]).transpose() if fortran else arr.reshape(shape)
    except VectorFileError:
        raise
    except zipfile.BadZipFile:
        raise VectorFileError(f"{path}: not an npz vector file (not a zip archive, or a truncated one)") from None
    except (OSError, ValueError, EOFError, zlib.error, RuntimeError, TypeError, KeyError, NotImplementedError,
            SyntaxError, MemoryError, OverflowError) as exc:
        # RuntimeError covers RecursionError (a deeply nested header)
        raise VectorFileError(f"{path}: not an npz vector file ({type(exc).__name__}: {one_line(exc)})") from None
    return arrays


def load(path, max_bytes: int | None = None) -> VectorFile:
    """Read and check one vector file; every problem is a :class:`VectorFileError` naming the file.

    Only regular files are opened; each member is checked as it is read
    (:func:`_read_arrays`), and a file holding more than ``max_bytes`` (default
    :data:`MAX_BYTES`) of array data is refused before the rest is decompressed.
    """
    path = pathlib.Path(path)
    arrays = _read_arrays(path, MAX_BYTES if max_bytes is None else max_bytes)
    missing = [k for k in _REQUIRED if k not in arrays]
    if missing:
        raise VectorFileError(f"{path}: missing arrays {missing} (an mmasim-vectors file has {list(_REQUIRED)})")
    if arrays["meta"].shape != () or arrays["meta"].dtype.kind != "U":
        raise VectorFileError(f"{path}: 'meta' must be one JSON string, not {arrays['meta'].dtype} "
                              f"of shape {arrays['meta'].shape}")
    try:
        meta = json.loads(str(arrays["meta"]))
    except (TypeError, ValueError, RecursionError) as exc:
        raise VectorFileError(f"{path}: 'meta' is not a JSON string ({type(exc).__name__}: {one_line(exc)})") from None
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
            if key == "labels" and (arrays[key].dtype.kind != "U" or arrays[key].ndim != 1):
                raise VectorFileError(f"{path}: array 'labels' must hold one string per case, shape (N,); "
                                      f"got {arrays[key].dtype} of shape {arrays[key].shape}")
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
    from mmasim.execution.model import Model

    unset = sorted(k for k, v in vf.qualifiers.items() if v is None)
    if unset:
        raise VectorFileError(f"{vf.path}: meta.qualifiers {', '.join(map(repr, unset))} null: a vector file gives "
                              "each qualifier it sets a value (leave a qualifier out for the default)")
    return Model.lookup_qualifiers(vf.arch, vf.instruction, vf.qualifiers)


def extra_operands(vf: VectorFile, model) -> dict:
    """The scale and sparse-metadata arrays of ``vf`` as keywords of ``model.dot``: exactly
    those the instruction takes (both scales of a block-scaled one, the metadata of a sparse
    one), else a :class:`VectorFileError`."""
    dp = model.datapath
    want = (("scale_a", "scale_b") if dp.scale else ()) + (("sparse_metadata",) if dp.sparse else ())
    have = tuple(k for k in ("scale_a", "scale_b", "sparse_metadata") if getattr(vf, k) is not None)
    if have != want:
        raise VectorFileError(f"{vf.path}: {model.instruction} takes {', '.join(want) or 'no scales or metadata'}; "
                              f"the file holds {', '.join(have) or 'none'}")
    return {k: getattr(vf, k) for k in want}


def expected_words(vf: VectorFile, model) -> np.ndarray:
    """``vf.d`` as uint64 D words of ``model``, each checked to fit D's word (never wrapped)."""
    bits = model.encoding.word_bits
    d = vf.d
    if d.size and (int(d.min()) < 0 or int(d.max()) >= 1 << bits):
        bad = int(np.flatnonzero((d < 0) | (d.astype(object) >= 1 << bits))[0])
        raise VectorFileError(f"{vf.path}: case {bad}: expected word {int(d[bad])} does not fit the "
                              f"{bits}-bit D word of {model.instruction} (0 .. 0x{(1 << bits) - 1:X})")
    return d.astype(np.uint64)


def run_vector_file(vf: VectorFile, model=None) -> Outcome:
    """Run a vector file through the simulator (``model``, default: the one its
    meta names) and compare every word."""
    if model is None:
        model = model_for(vf)
    expected = expected_words(vf, model)
    got = np.asarray(model.dot(vf.a, vf.b, vf.c, **extra_operands(vf, model))).astype(np.uint64)
    same = got == expected
    if vf.nan_policy == "any":
        same |= (model.decode("d", got).cls == NAN) & (model.decode("d", expected).cls == NAN)
    return Outcome(vf, got, np.flatnonzero(~same))
