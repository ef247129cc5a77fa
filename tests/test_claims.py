"""Claims the evidence supports: labels never overstate what was
measured, `explain` carries the caveats, and the README's counts are the registry's."""

from __future__ import annotations

import collections
import pathlib
import re

import numpy as np

import mmasim
from mmasim.vectors import files as vectors
from mmasim.registry.build import get_registry

ROOT = pathlib.Path(__file__).resolve().parent.parent

F64_ONE = 0x3FF0000000000000
F64_NAN_WITH_PAYLOAD = 0x7FF8000000000123


def _datapaths(arch):
    return get_registry().architectures[arch].datapaths


def _model(arch, dp):
    reg = get_registry()
    return mmasim.MMA(arch, dp.canonical(reg.formats))


def _special_line(model) -> str:
    lines = [l for l in model.describe().splitlines() if l.startswith("  special values:")]
    assert len(lines) == 1, model.describe()
    return lines[0]


# ------------------------------------------------- RTX Blackwell mxf8f6f4 with e2m1
def test_rtx_blackwell_mxf8f6f4_with_e2m1_operands_is_assumed():
    """T2 measured the e2m1-as-e2m3-from-bits-5:0 reading for kind::f8f6f4 only; the
    block-scaled kind::mxf8f6f4 reuses it by analogy, and MMA-Sim drops bits 1:0."""
    scaled = [dp for dp in _datapaths("RTX Blackwell")
              if dp.kind == "mxf8f6f4" and "e2m1.sm120" in (dp.a, dp.b) and not dp.sparse]
    assert len(scaled) == 9  # e2m1 on A and/or B, the other operand one of five formats
    for dp in scaled:
        assert dp.status.kind == "assumed", (dp.a, dp.b, dp.status)
        assert "kind::f8f6f4 only" in dp.status.evidence
    others = [dp for dp in _datapaths("RTX Blackwell")
              if dp.kind == "mxf8f6f4" and "e2m1.sm120" not in (dp.a, dp.b) and not dp.sparse]
    assert others and all(dp.status.kind != "assumed" for dp in others)


def test_rtx_blackwell_f8f6f4_with_e2m1_operands_stays_hardware():
    """The measured kind itself keeps its T2 label (RTX 5070 Ti, 14.2 M results)."""
    unscaled = [dp for dp in _datapaths("RTX Blackwell")
                if dp.kind == "f8f6f4" and "e2m1.sm120" in (dp.a, dp.b) and not dp.sparse]
    assert len(unscaled) == 18  # T2: "all 18 kind::f8f6f4 instructions involving e2m1"
    for dp in unscaled:
        assert dp.status.kind == "hardware" and dp.status.device == "RTX 5070 Ti" and dp.status.source == "T2"


def test_rtx_blackwell_mxf8f6f4_with_e2m1_explain_says_assumed():
    m = mmasim.MMA("RTX 5070 Ti", "mma.sync.kind::mxf8f6f4", a_type="e2m1", b_type="e4m3")
    assert "validation: assumed" in m.describe()


# ------------------------------------------------------------- f64 DMMA NaN results
NVIDIA_F64 = ("Ampere", "Ada Lovelace", "Hopper", "Blackwell", "RTX Blackwell")


def _f64_datapaths(archs):
    out = []
    for arch in archs:
        out += [(arch, dp) for dp in _datapaths(arch) if dp.d == "f64" and not dp.refuse]
    return out


def test_f64_dmma_nan_rule_is_assumed_in_explain():
    """Neither the project's canonical NaN nor MMA-Sim's payload propagation was measured:
    `explain` says so on its special-values line, for every NVIDIA f64 datapath."""
    found = _f64_datapaths(NVIDIA_F64)
    assert len({arch for arch, _ in found}) == len(NVIDIA_F64)
    for arch, dp in found:
        line = _special_line(_model(arch, dp))
        assert "NaN result: canonical 0x7FF8000000000000 (assumed: not measured" in line, (arch, line)
        assert "MMA-Sim 2.1.1 propagates NaN payloads" in line


def test_f64_dmma_nan_caveat_matches_what_the_model_returns():
    """The caveat states the word mmasim returns: a NaN input with a payload gives the
    canonical 0x7FF8000000000000, not the payload."""
    for arch, dp in _f64_datapaths(NVIDIA_F64):
        m = _model(arch, dp)
        k = dp.k
        a = [F64_NAN_WITH_PAYLOAD] + [F64_ONE] * (k - 1)
        assert int(m.dot(a, [F64_ONE] * k, 0)) == 0x7FF8000000000000, (arch, dp)


def test_f64_dmma_finite_claim_keeps_its_label():
    """The caveat narrows the NaN rule only: the datapath stays peer (its finite results
    agree with MMA-Sim 2.1.1, vectors/peer/<arch>/*f64*)."""
    for arch, dp in _f64_datapaths(NVIDIA_F64):
        assert dp.status.kind == "peer", (arch, dp.status)
        assert "assumed" in dp.status.special_values
        assert "validation: peer" in _model(arch, dp).describe()


def test_f64_dmma_nan_rule_is_assumed_in_the_explain_command(capsys):
    from mmasim.cli.main import main

    assert main(["explain", "A100", "m8n8k4.f64.f64.f64.f64"]) == 0
    out = capsys.readouterr().out
    line = next(l for l in out.splitlines() if "special values:" in l)
    assert "NaN result: canonical 0x7FF8000000000000 (assumed: not measured" in line
    assert "validation: peer" in out


def test_ampere_m8n8k4_nan_rule_is_assumed_in_explain():
    """T2 measured finite f32-output results only (233,452 of them)."""
    for dp in _datapaths("Ampere"):
        if dp.accumulator == "mul_add_chain" and not dp.refuse:
            m = _model("Ampere", dp)
            assert dp.status.kind == "hardware"
            assert "NaN result: canonical 0x7FFFFFFF (assumed: only finite results were measured" in _special_line(m)


def test_amd_nan_rule_is_assumed_in_explain():
    """NaN payloads on AMD are not part of what the peer was validated on."""
    for arch in ("CDNA1", "CDNA2", "CDNA3"):
        for dp in _datapaths(arch):
            if dp.accumulator == "integer":
                continue        # integer D words have no NaN (v_smfmac_i32)
            line = _special_line(_model(arch, dp))
            if dp.accumulator == "integer":     # v_mfma_i32_*: integers have no NaN
                assert "no special values" in line, (arch, line)
                continue
            assert "NaN result:" in line and "(assumed:" in line, (arch, line)


def test_status_special_values_appear_in_the_status_text():
    st = mmasim.registry.datapath.Status("peer", evidence="e", special_values="NaN result: x (assumed: y)")
    assert st.describe() == "peer: e; special values: NaN result: x (assumed: y)"
    assert st.describe(special_values=False) == "peer: e"


# ------------------------------------------------------------------ docs/datapaths.md
DATAPATHS_DOC = ROOT / "docs" / "datapaths.md"

#: The section numbers other docs and the code cite ("docs/datapaths.md §N") and their topics.
SECTIONS = {
    1: ("words", "raw exponent"),
    2: ("output rounding",),
    3: ("t-fdpa",),
    4: ("scaled windows",),
    5: ("fma chains",),
    6: ("b200", "tcgen05"),
    7: ("rtx blackwell", "f8f6f4"),
    8: ("amd", "cdna"),
    9: ("validation status",),
    11: ("sparse", "mma.sp", "v_smfmac"),
}


def _doc() -> str:
    return DATAPATHS_DOC.read_text(encoding="utf-8")


def test_datapaths_doc_sections_have_the_cited_numbers_and_topics():
    headings = re.findall(r"^## (\d+)\. (.+)$", _doc(), re.M)
    numbered = {int(n): title.lower() for n, title in headings}
    assert sorted(numbered)[:9] == list(range(1, 10)), headings
    for n, words in SECTIONS.items():
        for word in words:
            assert word in numbered[n], (n, numbered[n], word)


def test_datapaths_doc_names_its_sources():
    text = _doc()
    assert "B200 `tcgen05` reverse-engineering write-up" in text and "**T1**" in text
    assert "RTX 2060 / RTX 5070 Ti / A100" in text and "**T2**" in text
    assert "2511.10909" in text and "MMA-Sim" in text
    assert "PTX ISA" in text and "docs.nvidia.com/cuda/parallel-thread-execution" in text
    assert "MI300 Instruction Set Architecture" in text


def test_datapaths_doc_states_the_precise_b200_fp4_rules():
    text = _doc()
    assert "only over the scale blocks holding at least one nonzero" in text
    assert "only if that RZ-F32 result is a **nonzero** f32 subnormal" in text


def test_datapaths_doc_worked_examples_give_the_stated_words():
    """The examples were derived by hand in the text (each derivation precedes its block);
    running them checks that mmasim returns the words the text derives."""
    blocks = re.findall(r"```python\n(.*?)```", _doc(), re.S)
    assert len(blocks) >= 7
    scope = {}
    for i, body in enumerate(blocks):
        assert "assert " in body, f"example {i} checks nothing"
        exec(compile(body, f"docs/datapaths.md example {i}", "exec"), scope)


def test_datapaths_doc_family_table_covers_every_builtin_architecture_and_accumulator():
    text = _doc()
    table = text[text.index("## Families at a glance"):]
    reg = get_registry()
    builtin = {"Volta", "Turing", "Ampere", "Ada Lovelace", "Hopper", "Blackwell", "RTX Blackwell",
               "CDNA1", "CDNA2", "CDNA3"}
    assert builtin <= set(reg.architectures)
    for arch in builtin - {"Ada Lovelace", "Blackwell"}:
        assert arch in table, arch
    assert "Ada" in table and "B200 `tcgen05.mma`" in table and "Blackwell `mma.sync`" in table
    accumulators = {dp.accumulator for name in builtin for dp in reg.architectures[name].datapaths}
    for acc in accumulators:
        assert f"`{acc}`" in table, acc


def test_datapaths_doc_does_not_cite_the_internal_spec():
    assert "REFERENCE" not in _doc()


# ------------------------------------------------------------------ README counts
README = ROOT / "README.md"


def _builtin_architectures():
    """Architectures whose tables ship in mmasim_archs (not third-party plugins)."""
    import mmasim_archs

    folder = pathlib.Path(mmasim_archs.__file__).resolve().parent
    reg = get_registry()
    out = [a for a in reg.architectures.values()
           if a.source and pathlib.Path(a.source).resolve().parent == folder]
    assert out, "no architecture comes from the mmasim_archs tables"
    return out


def _datapath_counts():
    kinds = collections.Counter()
    for arch in _builtin_architectures():
        for dp in arch.datapaths:
            if not dp.refuse:  # a refused datapath is no claim
                kinds[dp.status.kind] += 1
    return sum(kinds.values()), kinds["hardware"], kinds["peer"], kinds["assumed"]


def _vector_counts():
    cases, files = collections.Counter(), 0
    for path in vectors.find():
        v = vectors.load(path)
        cases[v.source] += len(v)
        if v.source == "peer":
            cases["octave" if v.provenance["tool"].startswith("Khattak & Mikaitis") else "mma-sim"] += len(v)
        files += 1
    return (sum(cases[s] for s in vectors.SOURCES), files, cases["hardware"], cases["hand-derived"], cases["peer"],
            cases["mma-sim"], cases["octave"])


def _num(text: str) -> int:
    return int(text.replace(",", ""))


def test_readme_states_the_datapath_counts_by_evidence():
    """The README's numbers are descriptive: they must be the registry's (re-run after any
    relabelling; the message gives the sentence to paste)."""
    text = " ".join(README.read_text(encoding="utf-8").split())
    m = re.search(r"Of the other \*\*([\d,]+)\*\* datapaths, \*\*([\d,]+)\*\* are `hardware`, "
                  r"\*\*([\d,]+)\*\* `peer` and \*\*([\d,]+)\*\* `assumed`", text)
    assert m, "README.md must state the datapath counts (Of the other **N** datapaths, **H** are `hardware`, ...)"
    stated = tuple(_num(x) for x in m.groups())
    total, hw, peer, assumed = _datapath_counts()
    assert total == hw + peer + assumed
    assert stated == (total, hw, peer, assumed), (
        f"README.md is stale: write 'Of the other **{total:,}** datapaths, **{hw:,}** are `hardware`, "
        f"**{peer:,}** `peer` and **{assumed:,}** `assumed`' (it says {stated})")


def test_readme_states_the_vector_case_counts_by_source():
    text = " ".join(README.read_text(encoding="utf-8").split())
    m = re.search(r"hold \*\*([\d,]+)\*\* cases in \*\*([\d,]+)\*\* files: \*\*([\d,]+)\*\* measured on "
                  r"hardware, \*\*([\d,]+)\*\* derived by hand from measured rules and \*\*([\d,]+)\*\* "
                  r"computed by the two peers \(\*\*([\d,]+)\*\* by MMA-Sim 2.1.1, \*\*([\d,]+)\*\* by Khattak and "
                  r"Mikaitis's models in GNU Octave\)", text)
    assert m, "README.md must state the bundled vector cases by source"
    stated = tuple(_num(x) for x in m.groups())
    counts = _vector_counts()
    total, files, hw, hand, peer, mma_sim, octave = counts
    assert total == hw + hand + peer and peer == mma_sim + octave
    assert stated == counts, (
        f"README.md is stale: write 'hold **{total:,}** cases in **{files:,}** files: **{hw:,}** measured on "
        f"hardware, **{hand:,}** derived by hand from measured rules and **{peer:,}** computed by the two peers "
        f"(**{mma_sim:,}** by MMA-Sim 2.1.1, **{octave:,}** by Khattak and Mikaitis's models in GNU Octave)' "
        f"(it says {stated})")


def test_readme_does_not_claim_hardware_equality_for_every_datapath():
    """'equals the hardware' is said of the hardware label only; assumed datapaths exist, and
    the README says they carry no such claim."""
    text = " ".join(README.read_text(encoding="utf-8").split())
    assert "output words equal the hardware's" not in text
    assert _datapath_counts()[3] > 0
    assumed = re.search(r"\*\*assumed\*\*: (.+?)(?: - |\. [A-Z]|$)", text)
    assert assumed and "not measured" in assumed.group(1)
    assert "No claim that these equal the hardware" in text
    for sentence in re.split(r"(?<=\.) ", text):
        if re.search(r"\bequals?\b", sentence, re.I) and "hardware" in sentence:
            assert "No claim" in sentence, f"README claims hardware equality: {sentence!r}"
