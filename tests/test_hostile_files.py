"""Vector files built to exhaust memory or to be read twice are refused before they can
(docs/vectors.md, "Errors"): every member of the zip has a known name and appears once, its
.npy header is short and declares no negative dimension, the headers declare at most
``max_bytes`` in all, and each member holds exactly the bytes its header declares, checked
while it is read (so no more than the limit is ever decompressed, whatever the headers say).

Files are written by hand here, member by member (``zipfile`` and a raw .npy header), so
that they can say what ``np.savez`` never would.
"""

import io
import json
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mmasim.vectors import files as vectors
from mmasim.vectors.files import VectorFileError

KNOWN = ("a", "b", "c", "d", "meta", "scale_a", "scale_b", "sparse_metadata", "labels")


def npy(shape, descr="<u8", body: bytes | None = None, header: str | None = None) -> bytes:
    """A .npy member: a version 1.0 header declaring ``shape`` of ``descr`` (or the raw header
    text ``header``), then ``body`` (default: exactly the declared bytes, zeros)."""
    if header is None:
        header = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)})
    text = header.encode("latin1")
    pad = 64 - (10 + len(text) + 1) % 64
    head = b"\x93NUMPY\x01\x00" + (len(text) + pad + 1).to_bytes(2, "little") + text + b" " * pad + b"\n"
    if body is None:
        count = 1
        for dim in shape:
            count *= dim
        body = bytes(max(count, 0) * np.dtype(descr).itemsize)
    return head + body


def write_zip(path, members):
    """``members``: ``[(name, bytes)]`` in order, deflated; duplicate names allowed."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # zipfile warns about duplicate names
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
            for name, data in members:
                zf.writestr(name, data)
    return path


def valid_members(n=2, k=4):
    meta = json.dumps({"format": "mmasim-vectors", "version": 1, "arch": "A100",
                       "instruction": "mma.sync.m16n8k8.f32.f16.f16", "provenance": {"source": "hand-derived"}})
    out = []
    for name, arr in (("a", np.zeros((n, k), np.uint64)), ("b", np.zeros((n, k), np.uint64)),
                      ("c", np.zeros(n, np.uint64)), ("d", np.zeros(n, np.uint64)), ("meta", np.array(meta))):
        buf = io.BytesIO()
        np.lib.format.write_array(buf, arr, allow_pickle=False)
        out.append((name + ".npy", buf.getvalue()))
    return out


class CountingReads:
    """Counts the bytes every zip member read returns (what was decompressed)."""

    def __init__(self, monkeypatch):
        self.total = 0
        original = zipfile.ZipExtFile.read

        def read(member, n=-1):
            data = original(member, n)
            self.total += len(data)
            return data

        monkeypatch.setattr(zipfile.ZipExtFile, "read", read)


def test_a_file_of_valid_members_loads(tmp_path):
    vf = vectors.load(write_zip(tmp_path / "ok.npz", valid_members()))
    assert vf.a.shape == (2, 4) and vf.a.flags.writeable and len(vf) == 2


def test_duplicate_member_that_hides_a_negative_declaration_is_refused(tmp_path, monkeypatch):
    # the first a.npy declares -2^20 elements (cancelling the second's 2^21 in a plain sum);
    # the second, 16 MiB of zeros in a few KiB, is what np.load would read for "a"
    reads = CountingReads(monkeypatch)
    path = write_zip(tmp_path / "twice.npz", [("a.npy", npy((-(1 << 20),), body=b"")),
                                              ("a.npy", npy((1 << 21,)))] + valid_members()[1:])
    assert path.stat().st_size < 64 * 1024
    with pytest.raises(VectorFileError, match=r"members \['a.npy'\] appear more than once"):
        vectors.load(path, max_bytes=1 << 20)
    assert reads.total == 0


def test_negative_dimension_is_refused(tmp_path):
    path = write_zip(tmp_path / "neg.npz", [("a.npy", npy((-4, -4), body=b""))] + valid_members()[1:])
    with pytest.raises(VectorFileError, match="negative dimension"):
        vectors.load(path)


def test_member_holding_more_than_its_header_declares_is_refused_while_read(tmp_path, monkeypatch):
    # 8 bytes declared, 32 MiB of zeros behind them: refused after reading one byte more
    reads = CountingReads(monkeypatch)
    path = write_zip(tmp_path / "more.npz", [("a.npy", npy((1,), body=bytes(32 << 20)))] + valid_members()[1:])
    with pytest.raises(VectorFileError, match="'a.npy': holds more data than its header declares"):
        vectors.load(path, max_bytes=1 << 20)
    assert reads.total < 1 << 20


def test_truncated_member_is_refused(tmp_path):
    path = write_zip(tmp_path / "short.npz", [("a.npy", npy((8, 4), body=bytes(16)))] + valid_members()[1:])
    with pytest.raises(VectorFileError, match="truncated"):
        vectors.load(path)


def test_header_longer_than_the_bound_is_refused_before_it_is_read(tmp_path, monkeypatch):
    reads = CountingReads(monkeypatch)
    header = "{'descr': '<u8', 'fortran_order': False, 'shape': (1,)" + " " * (1 << 20) + "}"
    text = header.encode()
    raw = b"\x93NUMPY\x02\x00" + (len(text) + 1).to_bytes(4, "little") + text + b"\n"
    path = write_zip(tmp_path / "header.npz", [("a.npy", raw)] + valid_members()[1:])
    with pytest.raises(VectorFileError, match="header is longer than 64 KiB"):
        vectors.load(path)
    assert reads.total < 128 * 1024


def test_deeply_nested_header_is_refused(tmp_path):
    path = write_zip(tmp_path / "deep.npz", [("a.npy", npy((), header="(" * 20000 + ")" * 20000))]
                     + valid_members()[1:])
    with pytest.raises(VectorFileError):
        vectors.load(path)


def test_member_of_an_unknown_name_is_refused(tmp_path):
    path = write_zip(tmp_path / "extra.npz", valid_members() + [("scales_a.npy", npy((2, 1)))])
    with pytest.raises(VectorFileError, match="'scales_a.npy' is not one of its arrays: a.npy"):
        vectors.load(path)


def test_declared_total_over_the_bound_is_refused_before_any_data_is_read(tmp_path, monkeypatch):
    reads = CountingReads(monkeypatch)
    members = valid_members()
    members[0] = ("a.npy", npy((1 << 17, 1)))           # 1 MiB declared, and held
    path = write_zip(tmp_path / "big.npz", members)
    with pytest.raises(VectorFileError, match="declare more than 0 MiB"):
        vectors.load(path, max_bytes=(1 << 20) - 1)
    assert reads.total < 4096                           # headers only
    with pytest.raises(VectorFileError, match="inconsistent shapes a"):     # read, within a larger bound
        vectors.load(path, max_bytes=1 << 21)


# ------------------------------------------------------------------ any member list
LIMIT = 4096
#: what load says of a member list that is not unique, known, exact and bounded
STRUCTURAL = ("more than once", "negative dimension", "declare more than", "holds more data", "truncated",
              "is not one of its arrays")

member = st.tuples(
    st.sampled_from(KNOWN + ("x", "a.npy.npy", "../a")),            # name (".npy" added)
    st.integers(min_value=-3, max_value=700),                        # declared elements (uint64)
    st.integers(min_value=-8, max_value=8),                          # bytes held minus bytes declared
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(members=st.lists(member, min_size=1, max_size=6))
def test_any_member_list_loads_only_when_every_member_is_unique_known_exact_and_bounded(tmp_path, members):
    raw, exact = [], True
    for name, count, extra in members:
        held = max(0, max(count, 0) * 8 + extra)
        exact = exact and count >= 0 and held == count * 8
        raw.append((name + ".npy", npy((count,), body=bytes(held))))
    path = write_zip(tmp_path / "any.npz", raw)
    names = [name for name, _, _ in members]
    honest = (len(set(names)) == len(names) and all(n in KNOWN for n in names) and exact
              and sum(count for _, count, _ in members) * 8 <= LIMIT)
    try:
        vf = vectors.load(path, max_bytes=LIMIT)
    except VectorFileError as exc:
        text = str(exc)
        assert str(path) in text
        structural = any(why in text for why in STRUCTURAL)
        assert structural != honest, text      # refused for its members exactly when they are not honest
        if len(set(names)) != len(names):
            assert "more than once" in text
        return
    assert honest and isinstance(vf, vectors.VectorFile)


def test_a_null_qualifier_in_a_vector_file_is_refused_not_taken_as_the_default(tmp_path):
    from mmasim.vectors import files as vectors
    path = tmp_path / "null.npz"
    vectors.save(path, arch="A100", instruction="mma.sync.m16n8k32.s32.s8.s8", a=[[0] * 32], b=[[0] * 32],
                 c=[0], d=[0], qualifiers={"saturate": None},
                 provenance={"source": "hand-derived", "device": "none", "tool": "tests"})
    vf = vectors.load(path)
    with pytest.raises(vectors.VectorFileError, match="saturate"):
        vectors.model_for(vf)
