"""mmasim characterize: fixed probe ladders and parameter inference (docs/characterize.md).

The round trip: for every registered window-family datapath (deduplicated by accumulator,
parameters, step, formats and rounding), the probe words the simulated datapath returns must be
read back as that datapath's table parameters, or as a set of values that contains them when the
formats cannot express the rung that would decide (each such case is named by the finding).  The
expectations are the tables themselves; the inference never reads them.
"""

from __future__ import annotations

import json

import attrs
import numpy as np
import pytest

import mmasim
from mmasim.vectors import files as vectors
from mmasim.characterize import candidate_model, characterize, infer, probe_cases, probe_words
from mmasim.cli.main import main
from mmasim.execution.model import Model

WINDOW_FAMILIES = ("window", "two_stage_window", "group_scaled_window")

def _distinct():
    reg = mmasim.get_registry()
    seen = {}
    for arch in mmasim.architectures():
        for dp in mmasim.datapaths(arch):
            # a composed datapath (steps in interleaved runs, C added after them) is not one window
            if dp.accumulator in WINDOW_FAMILIES and not dp.interleave and not dp.c_add:
                key = (dp.accumulator, dp.params, dp.step, dp.a, dp.b, dp.c, dp.d, dp.rounding, dp.scale, dp.block)
                seen.setdefault(key, dp)
    return reg, list(seen.values())


def _table_params(reg, dp) -> dict:
    """The table's parameters with the accumulator's declared defaults filled in, plus step and rounding."""
    P = reg.accumulators[dp.accumulator].Params
    out = {f.name: f.default for f in attrs.fields(P) if f.default is not attrs.NOTHING}
    out.update(dp.parameters)
    out["step"] = dp.step
    out["rounding"] = dp.rounding
    return out


def test_round_trip_recovers_every_window_datapath_table_parameters():
    reg, dps = _distinct()
    assert len(dps) > 150                       # every distinct parameter set, not a sample
    assert any(dict(dp.params).get("subnormal_redo") for dp in dps)   # the B200 grouped rules included
    checked = 0
    problems = []
    for dp in dps:
        table = _table_params(reg, dp)
        model = Model(dp, reg)
        prop = characterize(model)
        where = f"{dp.arch}: {model.instruction}"
        if not prop.consistent:
            problems.append(f"{where}: family {prop.family}, mismatches {prop.mismatches[:3]}")
            continue
        # where the probes cannot separate two families, the table's must be among those reported
        prop = next((p for p in (prop, *prop.alternatives) if p.family == dp.accumulator), None)
        if prop is None:
            problems.append(f"{where}: {dp.accumulator} not among the families that reproduce the probes")
            continue
        for name, finding in prop.findings.items():
            if not finding.admits(table.get(name)):
                problems.append(f"{where}: {name} = {table.get(name)!r} but {finding.describe()}")
        for name, value in table.items():
            if name not in prop.findings and not (name == "group" and value == 1) and value is not None:
                problems.append(f"{where}: {name} not characterized")
        # F and the rounding are decided wherever the formats reach far enough below the anchor
        for name in ("rounding", "step"):
            if not prop.findings[name].determined and dp.a not in ("e2m1", "e2m1x", "e2m3", "e3m2"):
                problems.append(f"{where}: {name} undetermined: {prop.findings[name].describe()}")
        checked += 1
    assert not problems, "\n".join(problems[:20])
    assert checked > 150


@pytest.mark.parametrize("arch, instruction, kw, facts", [
    # docs/datapaths.md §3: Ampere F = 24, L = 8 f16 elements, e_zero -132 (bf16 reaches below it)
    ("A100", "m16n8k16.f32.bf16.bf16.f32", {}, {"F": 24, "step": 8, "zeros": -132, "rounding": "rz-f32"}),
    # Hopper f16 D: F = 25, one step of 16, e_zero -21 seen through the RNE tie (the §3 example)
    ("H100", "m16n8k16.f16.f16.f16.f16", {}, {"F": 25, "step": 16, "zeros": -21, "rounding": "rne-f16"}),
    # Ada fp8: F = 13 and RZ-E8M13 (§3)
    ("Ada", "m16n8k32.f32.e4m3.e4m3.f32", {}, {"F": 13, "rounding": "rz-e8m13"}),
    # Turing m8n8k4: F = 23, L = 4 (T2)
    ("RTX 2060", "m8n8k4.f32.f16.f16.f32", {}, {"F": 23, "step": 4}),
    # CDNA3 TR-FDPA (§8): F = 24, F2 = 31, one window, RNE
    ("MI300X", "v_mfma_f32_32x32x8_f16", {}, {"F": 24, "F2": 31, "even_odd": False, "drop_c": False}),
    # RTX Blackwell GST-FDPA (§4): F = 35, group 16, e_zero -139
    ("RTX 5070 Ti", "mma.sync.kind::mxf4.block_scale.scale_vec::2X.m16n8k64.f32.e2m1.e2m1.ue8m0", {},
     {"F": 35, "group": 16, "zeros": -139}),
    # B200 NVFP4 (§6, T1): groups of 4, scale floor 35, C-dominant F = 35 over groups of 16
    ("B200", "tcgen05.kind::mxf4nvf4.4X", {},
     {"group": 4, "scale_floor": 35, "c_dominant": {"F": 35, "group": 16}}),
    # B200 ue8m0 MXF4 (§6, T1): groups of 16, scale floor 35, C-relative 35
    ("B200", "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X", {},
     {"group": 16, "scale_floor": 35, "c_dominant": {"F": 35, "group": 16}, "c_relative": 35}),
])
def test_documented_parameters_are_determined(arch, instruction, kw, facts):
    m = mmasim.MMA(arch, instruction, **kw)
    prop = characterize(m)
    assert prop.consistent
    prop = next(p for p in (prop, *prop.alternatives) if p.family == m.datapath.accumulator)
    for name, value in facts.items():
        f = prop.findings[name]
        assert f.determined and f.value == value, f.describe()


def test_cdna3_fp8_even_odd_and_dropped_c_are_read():
    """GTR-FDPA (docs/datapaths.md §8): even/odd product windows and C dropped when too small."""
    prop = characterize(mmasim.MMA("MI300X", "v_mfma_f32_32x32x16_bf8_bf8"))
    assert prop.family == "two_stage_window" and prop.consistent
    assert prop.findings["even_odd"].value is True and prop.findings["drop_c"].value is True


def test_b200_tcgen05_zeros_excluded_is_consistent_and_e_zero_is_bounded():
    """T1: the B200 excludes zeros; a bf16 datapath reaches far enough to rule out any e_zero above 2^-148."""
    prop = characterize(mmasim.MMA("B200", "tcgen05.mma.kind::f16", a_type="bf16", d_type="f32"))
    z = prop.findings["zeros"]
    assert z.admits("excluded") and not z.admits(-133) and not z.admits(-21)


def test_a_different_datapath_is_characterized_as_different():
    ampere = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    for change, name, value in ((dict(params={"F": 23, "zeros": -132}), "F", 23),
                                (dict(chunk=4), "step", 4),
                                (dict(chunk=None), "step", 16)):
        other = Model(attrs.evolve(ampere.datapath, **change), ampere.registry)
        cases = probe_cases(ampere)              # the same shape: the same probes
        prop = infer(ampere, cases, probe_words(other, cases))
        assert prop.consistent
        assert prop.findings[name].determined and prop.findings[name].value == value
        # and the words are not the table's datapath's
        assert not np.array_equal(probe_words(other, cases), probe_words(ampere, cases))


def test_probe_cases_are_fixed_and_built_from_the_shape_only():
    a = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    b = Model(attrs.evolve(a.datapath, params={"F": 30, "zeros": "excluded"}, chunk=None, rounding="rne-f32"), a.registry)
    ca, cb = probe_cases(a), probe_cases(b)
    for key in ("a", "b", "c", "labels"):
        assert np.array_equal(ca[key], cb[key])
    assert ca["a"].dtype == np.uint64 and ca["a"].shape == (len(ca["labels"]), 16)
    assert ca["c"].shape == (len(ca["labels"]),)
    assert len(set(ca["labels"].tolist())) == len(ca["labels"])


def test_block_scaled_and_sparse_probes_carry_their_operands():
    m = mmasim.MMA("RTX 5070 Ti", "mma.sync.kind::mxf4.block_scale.scale_vec::2X.m16n8k64.f32.e2m1.e2m1.ue8m0")
    cases = probe_cases(m)
    assert cases["scale_a"].shape == (len(cases["labels"]), 2) and cases["scale_b"].shape == cases["scale_a"].shape
    sp = mmasim.MMA("A100", "mma.sp.sync.aligned.m16n8k32.row.col.f32.f16.f16.f32")
    cases = probe_cases(sp)
    assert cases["a"].shape[1] == 32 and "sparse_metadata" in cases
    prop = characterize(sp)
    assert prop.consistent and prop.findings["F"].value == 24 and prop.findings["step"].value == 8


def _device_file(tmp_path, model, device):
    cases = probe_cases(model)
    path = tmp_path / "probes.npz"
    vectors.save(path, arch=model.arch, instruction=model.instruction, a=cases["a"], b=cases["b"], c=cases["c"],
                 d=probe_words(device, cases), labels=cases["labels"],
                 provenance={"source": "hardware", "device": "test double", "tool": "tests", "tool_version": "1",
                             "date": "2026-12-01", "seed": None, "generator": "tests/test_characterize.py",
                             "citation": "docs/characterize.md"})
    return path


def test_cli_from_vectors_reads_the_device_words(tmp_path, capsys):
    ampere = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    device = Model(attrs.evolve(ampere.datapath, params={"F": 23, "zeros": -132}), ampere.registry)
    path = _device_file(tmp_path, ampere, device)
    assert main(["characterize", "A100", "m16n8k16.f32.f16.f16.f32", "--from-vectors", str(path)]) == 0
    out = capsys.readouterr().out
    assert "params = { F = 23," in out and "chunk = 8" in out
    assert main(["characterize", "A100", "m16n8k16.f32.f16.f16.f32", "--from-vectors", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["schema"] == "mmasim.characterize/1" and doc["entry"]["params"]["F"] == 23


def test_cli_from_vectors_refuses_another_instruction_and_files_without_probes(tmp_path, capsys):
    ampere = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    path = _device_file(tmp_path, ampere, ampere)
    assert main(["characterize", "H100", "m16n8k16.f32.f16.f16.f32", "--from-vectors", str(path)]) == 1
    assert "not Hopper" in capsys.readouterr().err
    plain = tmp_path / "plain.npz"
    vectors.save(plain, arch="A100", instruction="m16n8k16.f32.f16.f16.f32", a=[[0] * 16], b=[[0] * 16], c=[0],
                 d=[0], labels=["zero"], provenance={"source": "hand-derived", "device": "none", "tool": "t",
                                                     "tool_version": "1", "date": "2026-12-01", "seed": None,
                                                     "generator": "t", "citation": "t"})
    assert main(["characterize", "A100", "m16n8k16.f32.f16.f16.f32", "--from-vectors", str(plain)]) == 1
    assert "none of its cases is a probe" in capsys.readouterr().err


def test_cli_characterize_an_fma_chain_is_not_a_window(capsys):
    assert main(["characterize", "A100", "m8n8k4.f64.f64.f64.f64"]) == 1
    assert "NOT reproduced" in capsys.readouterr().out


def test_candidate_model_uses_only_the_proposal():
    ampere = mmasim.MMA("A100", "m16n8k16.f32.f16.f16.f32")
    m = candidate_model(ampere, {"accumulator": "window", "params": {"F": 20, "zeros": "excluded"},
                                 "rounding": "rz-f32", "chunk": 4})
    assert m.datapath.parameters == {"F": 20, "zeros": "excluded"} and m.datapath.step == 4


def test_docs_worked_example_is_the_cli_output(capsys):
    """docs/characterize.md's worked example is what the command prints (the page cannot go stale)."""
    import pathlib
    import re
    text = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "characterize.md").read_text(encoding="utf-8")
    block = re.search(r"```\n\$ mmasim characterize (\S+) (\S+)\n(.*?)```", text, re.S)
    assert block, "the worked example block"
    assert main(["characterize", block.group(1), block.group(2)]) == 0
    assert capsys.readouterr().out == block.group(3)


def test_integer_instructions_are_refused_with_one_line(capsys):
    assert main(["characterize", "A100", "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("mmasim: error:") and "integer" in err and "internal" not in err
    with pytest.raises(mmasim.errors.CharacterizeError):
        probe_cases(mmasim.MMA("B200", "tcgen05.mma.kind::i8", a_type="s8", b_type="s8"))


@pytest.mark.parametrize("instruction, grid", [
    ("m16n8k16.f32.bf16.bf16.f32", dict(F=(24, 30, 33), zeros=("excluded", -10, -100, -140), chunk=(4, None),
                                        rounding=("rz-f32", "rne-f32"))),
    ("m16n8k16.f16.f16.f16.f16", dict(F=(13, 25, 33), zeros=("excluded", -10, -30), chunk=(8, None),
                                      rounding=("rne-f16",))),
])
def test_window_parameters_off_the_tables_are_recovered(instruction, grid):
    """Datapaths no table has (the A100's shapes with other F, e_zero, step and rounding) are read back
    as what they are: the inference does not lean on the values the tables happen to use."""
    import itertools
    base = mmasim.MMA("A100", instruction)
    cases = probe_cases(base)
    problems = []
    for F, zeros, chunk, rounding in itertools.product(*grid.values()):
        dp = attrs.evolve(base.datapath, params={"F": F, "zeros": zeros}, chunk=chunk, rounding=rounding)
        prop = infer(base, cases, probe_words(Model(dp, base.registry), cases))
        truth = {"F": F, "zeros": zeros, "step": dp.step, "rounding": rounding}
        if not prop.consistent:
            problems.append(f"{truth}: not reproduced {prop.mismatches[:3]}")
            continue
        for name, value in truth.items():
            f = prop.findings[name]
            if not f.admits(value) or (name != "zeros" and not f.determined):
                problems.append(f"{truth}: {f.describe()}")
    assert not problems, "\n".join(problems[:10])
