"""``mmasim layout``: the text table lists every element once; the picture renders (one
instruction per family)."""

import json
import re

import numpy as np
import pytest

import mmasim
from mmasim.cli.main import main

FAMILIES = [
    ("A100", "mma.sync.m16n8k16.f32.f16.f16", "a"),
    ("V100", "mma.sync.m8n8k4.f32.f16.f16", "d"),
    ("H100", "wgmma.mma_async.m64n16k16.f32.f16.f16", "d"),
    ("B200", "tcgen05.mma.kind::f16.m64n8k16.f32.bf16.bf16", "d"),
    ("MI300X", "v_mfma.m32n32k1.f32.f32.f32", "d"),
    ("MI300X", "v_smfmac.sp.m16n16k32.f32.f16.f16", "a"),
    ("A100", "mma.sp.m16n8k32.f32.f16.f16", "sparse_metadata"),
    ("B200", "tcgen05.mma.sp.kind::f16.m128n16k32.f32.f16.f16", "sparse_metadata"),
    ("B200", "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X.m128n16k64.f32.e2m1.e2m1.ue8m0", "scale_a"),
]


@pytest.mark.parametrize("arch,ins,op", FAMILIES)
def test_text_table_lists_every_element_once(arch, ins, op, capsys):
    assert main(["layout", arch, ins, "--operand", op]) == 0
    out = capsys.readouterr().out
    L = mmasim.MMA(arch, ins).layout(op)
    cells = re.findall(r"\b(T\d+:\d+|L\d+:c\d+(?:[hbn]\d+)?)\b", out)
    assert len(cells) == L.rows * L.cols == len(set(cells))
    lane, i = L.owner(L.rows - 1, L.cols - 1)
    if L.storage == "tmem":      # lane, 32-bit column and, for sub-word elements, the unit within it
        column, bit = L.register(i)
        unit = {16: "h", 8: "b", 4: "n"}.get(L.bits, "")
        last = f"L{lane}:c{column}" + (f"{unit}{bit // L.bits}" if L.bits < 32 else "")
    else:
        last = f"T{lane}:{i}"
    assert out.rstrip().endswith(last)


@pytest.mark.parametrize("arch,ins,op", FAMILIES)
def test_picture_renders(arch, ins, op, tmp_path, capsys):
    image = pytest.importorskip("matplotlib.image")
    path = tmp_path / "fig.png"
    assert main(["layout", arch, ins, "--operand", op, "--out", str(path)]) == 0
    assert "layout written to" in capsys.readouterr().out
    img = image.imread(str(path))
    assert img.ndim == 3 and img.shape[0] > 100 and img.shape[1] > 100
    assert np.ptp(img[..., :3]) > 0.2           # not a blank canvas


def test_svg_output(tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "fig.svg"
    assert main(["layout", "A100", "mma.sync.m16n8k8.f32.tf32.tf32", "--operand", "b", "--out", str(path)]) == 0
    text = path.read_text()
    assert text.lstrip().startswith("<?xml") and "T31:1" in text


def test_json_lists_entries(capsys):
    assert main(["layout", "A100", "mma.sync.m16n8k16.f32.f16.f16", "--operand", "d", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "mmasim.layout/1" and doc["registers"] == 4 and len(doc["entries"]) == 128
    e = [x for x in doc["entries"] if (x["row"], x["col"]) == (9, 3)][0]
    assert (e["lane"], e["element"], e["register"], e["bit"]) == (5, 3, 3, 0)


def test_layout_errors_are_one_line(capsys):
    assert main(["layout", "B200", "tcgen05.mma.kind::f16.m128n8k16.f32.bf16.bf16", "--operand", "b"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mmasim: error: ") and "shared memory" in err and err.count("\n") == 1
    assert main(["layout", "A100", "mma.sync.m16n8k16.f32.f16.f16", "--out", "fig.bmpx"]) == 2
    assert "cannot tell the image type" in capsys.readouterr().err


def test_text_table_states_the_evidence(capsys):
    """The second line of the text table says what the layout's formulas were checked against."""
    assert main(["layout", "A100", "mma.sync.m16n8k16.f32.f16.f16", "--operand", "a"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1] == "evidence: checked: PTX ISA 9.0 §9.7.14.5.8 (.f16 / .bf16 A)"
    assert main(["layout", "H100", "wgmma.mma_async.m64n16k16.f32.f16.f16", "--operand", "d"]) == 0
    assert capsys.readouterr().out.splitlines()[1].startswith("evidence: partly checked: ")


def test_json_carries_the_evidence(capsys):
    assert main(["layout", "MI300X", "v_mfma.m16n16k4.f64.f64.f64", "--operand", "d", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["evidence"].startswith("checked: AMD Matrix Instruction Calculator")
    assert doc["evidence"] == mmasim.MMA("MI300X", "v_mfma.m16n16k4.f64.f64.f64").layout("d").evidence


@pytest.mark.parametrize("arch,ins,op,flags,cells", [
    ("RTX Blackwell", "mma.sync.kind::mxf4.block_scale.scale_vec::2X.m16n8k64.f32.e2m1.e2m1.ue8m0", "scale_a",
     ["--byte-id", "2", "--thread-id", "1"], 32),
    ("RTX Blackwell", "mma.sync.kind::mxf8f6f4.block_scale.scale_vec::1X.m16n8k32.f32.e4m3.e4m3.ue8m0", "scale_b",
     ["--thread-id", "3"], 8),
    ("A100", "mma.sync.sp.m16n8k32.f32.f16.f16", "sparse_metadata", ["--selector", "1"], 128),
])
def test_scale_and_metadata_tables_and_json(arch, ins, op, flags, cells, capsys):
    """The scale-factor and metadata maps print every element once and carry the selectors in JSON."""
    assert main(["layout", arch, ins, "--operand", op, *flags]) == 0
    labels = re.findall(r"T\d+:\d+", capsys.readouterr().out)
    assert len(labels) == len(set(labels)) == cells
    assert main(["layout", arch, ins, "--operand", op, *flags, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["entries"]) == cells and doc["selectors"]
    assert main(["layout", arch, ins, "--operand", op, "--selector" if op != "sparse_metadata" else "--byte-id",
                 "1"]) == 1
    assert "take no such selector" in capsys.readouterr().err
