"""`mmasim validate` and the vector-file format: every bundled file passes, and
every broken file is reported as an error row, never a traceback."""

import json
import pathlib
import shutil
import time

import numpy as np
import pytest

from mmasim import cli, vectors
from mmasim import validate as v

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
    assert "[1/" in err                      # progress on stderr
    assert elapsed < 60
    assert len(vectors.find()) >= 300


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
    out = capsys.readouterr().out
    assert rc == 1 and "no such" in out


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
    assert vectors.run(vf).mismatches.size == 0
