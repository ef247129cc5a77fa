"""`mmasim validate` and the vector-file format: every bundled file passes, and
every broken file is reported as an error row, never a traceback."""

import json
import pathlib
import shutil
import time

import numpy as np
import pytest

import mmasim.cli.main as cli
from mmasim.vectors import files as vectors
from mmasim.vectors import validate as v

ROOT = pathlib.Path(__file__).resolve().parent.parent
GOOD = ROOT / "vectors" / "hardware" / "blackwell" / "tf32-probe-ladder.hardware.npz"
ONE = 0x3F800000
PROV = {"source": "hand-derived", "device": "none", "tool": "tests", "tool_version": "1",
        "date": "2026-05-01", "seed": None, "generator": "tests/test_validate.py", "citation": "by hand"}


def _save(path, d, **kw):
    args = dict(arch="B200", instruction="tcgen05.mma.kind::tf32", a=[[ONE] + [0] * 7],
                b=[[ONE] + [0] * 7], c=[ONE], d=[d], provenance=PROV, labels=["1*1 + 1"])
    args.update(kw)
    return vectors.save(path, **args)


def test_every_bundled_file_validates_quickly(capsys):
    t0 = time.perf_counter()
    rc = cli.main(["validate"])
    elapsed = time.perf_counter() - t0
    out, err = capsys.readouterr()
    assert rc == 0, out[-3000:]
    assert "OK:" in out and " 0 mismatches in 0 files, 0 errors" in out
    assert err == ""                         # no progress bar off a terminal (tests/test_cli_progress.py)
    assert elapsed < 60
    assert len(vectors.find()) >= 300


def test_no_bundled_file_cites_a_folder_users_do_not_have():
    # a provenance citation names a public source (docs/datapaths.md, sources), never an internal file
    offenders = []
    for path in vectors.find():
        with np.load(path, allow_pickle=False) as z:
            meta = str(z["meta"])
        offenders += [f"{path.relative_to(ROOT)}: {word}" for word in ("shared/", "seeds/") if word in meta]
    assert len(vectors.find()) >= 300
    assert not offenders, offenders


def test_table_per_architecture_and_datapath(capsys):
    rc = cli.main(["validate", "-q", str(GOOD)])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("Blackwell: 1 files")
    assert "tcgen05.mma.kind::tf32.f32.tf32.tf32" in out
    assert "hardware/blackwell/tf32-probe-ladder.hardware.npz" in out
    for col in ("datapath", "file", "cases", "mismatches", "source"):
        assert col in out


def test_mismatch_exits_nonzero_and_shows_decoded_words(tmp_path, capsys):
    # 1*1 + 1 = 2 (0x40000000); the file claims 0x40000001
    _save(tmp_path / "wrong.npz", 0x40000001)
    rc = cli.main(["validate", "-q", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "MISMATCH" in out and "1 of 1 cases differ" in out
    assert "[1*1 + 1]" in out
    assert "expected = 0x40000001 (2.000000238418579 (= 8388609*2^-22))" in out
    assert "actual   = 0x40000000 (2.0 (= 1*2^1))" in out
    assert "a        = 0x3F800000 (1.0 (= 1))" in out
    assert "FAILED" in out


def test_json_output(tmp_path, capsys):
    _save(tmp_path / "right.npz", 0x40000000)
    _save(tmp_path / "wrong.npz", 0x3F800000)
    rc = cli.main(["validate", "--json", "-q", str(tmp_path)])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    assert data["summary"]["files"] == 2 and data["summary"]["mismatches"] == 1
    wrong = [f for f in data["files"] if f["path"].endswith("wrong.npz")][0]
    assert wrong["mismatches"] == 1 and wrong["ok"] is False
    assert wrong["first"][0]["expected"]["word"] == "0x3F800000"
    assert wrong["first"][0]["actual"]["word"] == "0x40000000"


def _broken_files(tmp_path):
    files = {}
    trunc = tmp_path / "truncated.npz"
    data = GOOD.read_bytes()
    trunc.write_bytes(data[: len(data) // 2])
    files["truncated"] = trunc
    notzip = tmp_path / "notzip.npz"
    notzip.write_text("this is not a vector file\n")
    files["notzip"] = notzip
    flipped = tmp_path / "flipped.npz"
    raw = bytearray(data)
    for i in range(200, 400):
        raw[i] ^= 0x5A
    flipped.write_bytes(bytes(raw))
    files["flipped"] = flipped
    with np.load(GOOD, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["meta"]))

    def variant(name, **changes):
        arr = dict(arrays)
        m = dict(meta)
        for k, val in changes.items():
            if k.startswith("meta_"):
                m[k[5:]] = val
            elif val is None:
                arr.pop(k)
            else:
                arr[k] = val
        arr["meta"] = np.array(json.dumps(m))
        p = tmp_path / f"{name}.npz"
        np.savez_compressed(p, **arr)
        files[name] = p

    variant("wrong-format", meta_format="something-else")
    variant("wrong-version", meta_version=7)
    variant("bad-source", meta_provenance={"source": "rumour"})
    variant("no-d", d=None)
    variant("float-words", a=arrays["a"].astype(np.float64))
    variant("bad-shapes", c=arrays["c"][:3])
    variant("meta-not-json", meta=None)
    p = tmp_path / "meta-not-json.npz"
    arr = dict(arrays)
    arr["meta"] = np.array("{not json")
    np.savez_compressed(p, **arr)
    variant("unknown-arch", meta_arch="Zeta9000")
    variant("unknown-instruction", meta_instruction="tcgen05.mma.kind::f128")
    variant("bad-qualifier", meta_qualifiers={"colour": "blue"})
    return files


def test_every_broken_file_is_an_error_row_naming_the_file(tmp_path, capsys):
    files = _broken_files(tmp_path)
    results = {pathlib.Path(r.path).stem: r for r in v.validate([tmp_path])}
    assert set(results) == set(files)
    for name, r in results.items():
        assert r.error, name
        assert not r.ok
    for name in ("truncated", "notzip", "flipped", "wrong-format", "wrong-version", "bad-source",
                 "no-d", "float-words", "bad-shapes", "meta-not-json"):
        assert results[name].error.startswith("corrupt vector file: ")
        assert str(files[name]) in results[name].error
    assert "Zeta9000" in results["unknown-arch"].error
    assert "UnknownArchitecture" in results["unknown-arch"].error
    assert "UnknownInstruction" in results["unknown-instruction"].error
    rc = cli.main(["validate", "-q", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 1
    assert "Traceback" not in out + err
    assert out.count("ERROR ") >= len(files)


def test_good_and_broken_files_together(tmp_path, capsys):
    shutil.copy(GOOD, tmp_path / "good.npz")
    (tmp_path / "bad.npz").write_bytes(b"PK\x03\x04 truncated")
    rc = cli.main(["validate", "-q", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 1
    assert "ok" in out and "ERROR" in out
    assert "1 errors" in out


def test_missing_path_is_an_error(tmp_path, capsys):
    rc = cli.main(["validate", "-q", str(tmp_path / "nope.npz")])
    out, err = capsys.readouterr()
    assert rc == 1 and out == "" and "no such file" in err and err.count("\n") == 1


def test_load_errors_name_the_file(tmp_path):
    p = tmp_path / "x.npz"
    p.write_text("garbage")
    with pytest.raises(vectors.VectorFileError, match=str(p)):
        vectors.load(p)


def test_save_then_load_round_trip(tmp_path):
    p = _save(tmp_path / "rt.npz", 0x40000000, sparse_metadata=None)
    vf = vectors.load(p)
    assert vf.arch == "B200" and vf.source == "hand-derived" and len(vf) == 1
    assert list(vf.labels) == ["1*1 + 1"]
    assert vf.meta["format"] == "mmasim-vectors" and vf.meta["version"] == 1
    assert vectors.run_vector_file(vf).mismatches.size == 0


# ------------------------------------------------ never "OK" on nothing
PEER = ROOT / "vectors" / "peer" / "volta" / "m8n8k4.f32.f16.f16.f16.npz"


def _validate(capsys, *argv):
    rc = cli.main(["validate", "-q", *map(str, argv)])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return rc, out, err


def test_no_vectors_found_in_an_empty_folder(tmp_path, capsys):
    rc, out, err = _validate(capsys, tmp_path)
    assert rc == 1 and "FAILED: no vectors found" in out and "OK" not in out
    assert err.strip() == f"mmasim: error: no vectors found in {tmp_path}"


def test_no_vectors_found_in_a_folder_without_vector_files(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("nothing here")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "data.npy").write_bytes(b"\x93NUMPY")
    rc, out, err = _validate(capsys, tmp_path)
    assert rc == 1 and "no vectors found" in out and "no vectors found" in err


def test_no_vectors_found_in_a_file_with_zero_cases(tmp_path, capsys):
    p = vectors.save(tmp_path / "empty.npz", arch="B200", instruction="tcgen05.mma.kind::tf32", a=np.zeros((0, 8)),
                     b=np.zeros((0, 8)), c=np.zeros(0), d=np.zeros(0), provenance=PROV)
    assert len(vectors.load(p)) == 0
    rc, out, err = _validate(capsys, p)
    assert rc == 1 and "no vectors found: the file holds 0 cases" in out
    assert "FAILED: no vectors found" in out and "no vectors found" in err
    doc = json.loads(_json(capsys, p))
    assert doc["summary"]["ok"] is False and doc["summary"]["no_vectors"] is True


def _json(capsys, *paths):
    cli.main(["validate", "-q", "--json", *map(str, paths)])
    return capsys.readouterr().out


def test_a_fifo_named_npz_is_not_opened(tmp_path, capsys):
    import os
    import threading

    fifo = tmp_path / "x.npz"
    os.mkfifo(fifo)
    box = {}
    worker = threading.Thread(target=lambda: box.update(rc=cli.main(["validate", "-q", str(tmp_path)])), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "validate hung on a FIFO"
    out = capsys.readouterr().out
    assert box["rc"] == 1 and "not a regular file" in out
    with pytest.raises(vectors.VectorFileError, match="not a regular file"):
        vectors.load(fifo)


def _npz_declaring(path, shapes):
    """A zip of .npy members whose headers declare ``shapes`` (uint64) but hold almost no data."""
    import io
    import zipfile

    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, shape in shapes.items():
            buf = io.BytesIO()
            np.lib.format.write_array_header_1_0(buf, {"descr": "<u8", "fortran_order": False, "shape": shape})
            buf.write(b"\0" * 64)
            zf.writestr(name + ".npy", buf.getvalue())
    return path


def test_header_declared_arrays_beyond_the_size_limit_are_refused(tmp_path, capsys):
    # 465 MB declared in a file of a few hundred bytes: refused before anything is decompressed
    big = _npz_declaring(tmp_path / "big.npz", {"a": (58_125_000, 1), "meta": ()})
    assert big.stat().st_size < 4096
    with pytest.raises(vectors.VectorFileError, match="MiB"):
        vectors.load(big)
    # the limit is on the sum over the arrays of one file: 2 x 160 MiB > 256 MiB
    two = _npz_declaring(tmp_path / "two.npz", {"a": (20 * 2 ** 20, 1), "b": (20 * 2 ** 20, 1)})
    with pytest.raises(vectors.VectorFileError, match="more than 256 MiB"):
        vectors.load(two)
    assert vectors.MAX_BYTES == 256 * 2 ** 20
    rc, out, _ = _validate(capsys, big)
    assert rc == 1 and "refused" in out
    # every bundled file is far below it
    vectors.load(GOOD, max_bytes=2 ** 20)


def test_a_text_file_named_npz_is_not_an_npz_vector_file(tmp_path, capsys):
    p = tmp_path / "readme.npz"
    p.write_text("these are not the vectors you are looking for\n")
    with pytest.raises(vectors.VectorFileError, match="not an npz vector file") as info:
        vectors.load(p)
    assert "pickle" not in str(info.value)
    rc, out, _ = _validate(capsys, p)
    assert rc == 1 and "not an npz vector file" in out and "pickle" not in out


def test_control_characters_from_vector_files_are_escaped(tmp_path, capsys):
    evil = "\x1b[2J\x1b[H\nOK: 300 files, 1,000,000 cases, 0 mismatches in 0 files, 0 errors\n"
    _save(tmp_path / "evil.npz", 0x40000000, arch=evil, labels=["\x1b[31mred"])
    _save(tmp_path / "label.npz", 0x40000001, labels=["\x07\x1b[31mred\u202e"])
    rc, out, err = _validate(capsys, tmp_path)
    assert rc == 1
    assert "\x1b" not in out + err and "\x07" not in out and "\u202e" not in out
    assert not [line for line in out.splitlines() if line.startswith("OK")]
    assert "\\x1b[2J\\x1b[H\\x0aOK: 300 files" in out
    assert "[\\x07\\x1b[31mred\\u202e]" in out
    assert out.rstrip().splitlines()[-1].startswith("FAILED")


def test_cases_by_evidence_source(tmp_path, capsys):
    shutil.copy(GOOD, tmp_path / "hw.npz")                       # 33 hardware cases
    shutil.copy(PEER, tmp_path / "peer.npz")                     # 512 peer cases
    _save(tmp_path / "hand.npz", 0x40000000)                     # 1 hand-derived case
    rc, out, _ = _validate(capsys, tmp_path)
    assert rc == 0
    table = out[out.index("cases by evidence source:"):].splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in table[3:7]}
    assert rows == {"hardware": ["1", "33", "0"], "hand-derived": ["1", "1", "0"], "peer": ["1", "512", "0"],
                    "total": ["3", "546", "0"]}
    # strongest evidence first
    assert [line.split()[0] for line in table[3:6]] == ["hardware", "hand-derived", "peer"]
    doc = json.loads(_json(capsys, tmp_path))
    assert doc["schema"] == "mmasim.validate/1"
    assert doc["summary"]["by_source"] == {
        "hardware": {"files": 1, "cases": 33, "mismatches": 0},
        "hand-derived": {"files": 1, "cases": 1, "mismatches": 0},
        "peer": {"files": 1, "cases": 512, "mismatches": 0},
    }
