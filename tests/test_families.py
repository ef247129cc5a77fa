"""Instruction families as records: a plugin registers a family (its syntax, warp execution,
compile target) and the core asks the record; a family name has one owner; the harness keeps its
own table of emitters and device classes, which a plugin's family adds to through hooks; and no
core module tests an op string."""

import ast
import pathlib
import re
import types

import attrs
import pytest

import mmasim
from mmasim.errors import PluginConflict, UnknownInstruction
from mmasim.registry.family import AliasTarget, Family, Syntax
from test_plugin_isolation import make_plugin, registered  # noqa: F401 - the fixture undoes each register

ROOT = pathlib.Path(__file__).resolve().parents[1]

#: a toy architecture whose one datapath is of the toy family (a parsed table)
TOY_TABLE = {
    "architecture": {"name": "FamToy", "vendor": "Example", "aliases": ["famtoy-1", "sm_77q"],
                     "description": "a toy architecture of a toy instruction family"},
    "datapath": [{"op": "famtoy.mma", "a": "f16", "b": "f16", "d": "f32", "k": 4, "accumulator": "window",
                  "params": {"F": 25, "zeros": "excluded"}, "rounding": "rz-f32",
                  "status": {"kind": "assumed", "evidence": "toy"}}],
}

CALLS = []


def toy_warp(model, a, b, c, **keywords):
    CALLS.append((model.instruction, a, b, c, keywords))
    return "ran by the family's warp"


TOY_FAMILY = Family("famtoy.mma", Syntax(lead=("famtoy", "mma"), fixed=("sync",)), warp=toy_warp,
                    target=AliasTarget(r"sm_[0-9]+q"))


def plugin(*families, table=True):
    """A plugin of ``families`` (and, with ``table``, the toy architecture)."""
    return make_plugin(mmasim_families=list(families), **({"mmasim_architectures": [TOY_TABLE]} if table else {}))


def test_a_plugins_family_gives_its_datapaths_their_syntax_warp_and_target(registered):
    # without a record the op is read as its dot-separated name: "sync" belongs to other families
    registered(plugin(), "famtoy-table")
    with pytest.raises(UnknownInstruction):
        mmasim.MMA("FamToy", "famtoy.mma.sync.k4.f32.f16.f16")
    mmasim.unregister(name="famtoy-table")
    registered(plugin(TOY_FAMILY), "famtoy")
    m = mmasim.MMA("FamToy", "famtoy.mma.sync.k4.f32.f16.f16")
    assert m.family is mmasim.get_registry().families["famtoy.mma"] == TOY_FAMILY
    assert m.family.compile_target(mmasim.aliases("FamToy")) == "sm_77q"
    CALLS.clear()
    assert m.warp("A", "B", "C", b_descriptor=7) == "ran by the family's warp"
    (ins, a, b, c, kw), = CALLS
    assert (a, b, c, kw["b_descriptor"], kw["sparsity_selector"]) == ("A", "B", "C", 7, 0)


def test_a_family_without_an_emitter_is_listed_as_not_generated(registered):
    from mmasim.harness import generate as gen
    registered(plugin(TOY_FAMILY), "famtoy")
    with pytest.raises(gen.NotGenerated, match="no harness emitter for famtoy.mma instructions"):
        gen.emitter(mmasim.MMA("FamToy", "famtoy.mma.k4.f32.f16.f16"))


def test_a_plugins_family_brings_its_emitter_through_a_hook(registered):
    from mmasim.harness import generate as gen
    toy_emitter = types.SimpleNamespace(specs=lambda model: [f"a toy kernel of {model.instruction}"])
    registered(make_plugin(mmasim_families=[TOY_FAMILY], mmasim_architectures=[TOY_TABLE],
                           mmasim_harness_emitters={"famtoy.mma": toy_emitter}), "famtoy")
    m = mmasim.MMA("FamToy", "famtoy.mma.k4.f32.f16.f16")
    assert gen.emitter(m) is toy_emitter
    assert gen.model_specs(m) == [f"a toy kernel of {m.instruction}"]
    # an emitter given by name that is not installed: listed as not generated, with the name
    mmasim.unregister(name="famtoy")
    registered(make_plugin(mmasim_families=[TOY_FAMILY], mmasim_architectures=[TOY_TABLE],
                           mmasim_harness_emitters={"famtoy.mma": "famtoy_not_installed"}), "famtoy")
    with pytest.raises(gen.NotGenerated, match="the famtoy.mma emitter famtoy_not_installed is not available"):
        gen.emitter(mmasim.MMA("FamToy", "famtoy.mma.k4.f32.f16.f16"))


def test_a_family_has_one_harness_emitter_and_device(registered):
    from mmasim.harness import generate as gen
    from mmasim.harness import measure as hrun
    m = mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16")
    # the harness's own entry, given again by a plugin, is no conflict
    registered(make_plugin(mmasim_harness_devices={"mma.sync": hrun.CudaDevice}), "same-device")
    assert hrun.device_class(m) is hrun.CudaDevice
    registered(make_plugin(mmasim_harness_emitters={"mma.sync": __name__}), "rival-emitter")
    with pytest.raises(PluginConflict) as info:
        gen.emitter(m)
    text = str(info.value)
    assert "'rival-emitter'" in text and f"emitter {__name__}" in text and "mmasim.harness.nv_sync" in text


def test_a_plugins_harness_hook_of_the_wrong_type_is_a_plugin_error(registered):
    from mmasim.errors import PluginError
    from mmasim.harness import measure as hrun
    registered(make_plugin(mmasim_harness_devices={"famtoy.mma": "not a class".split()}), "bad-devices")
    with pytest.raises(PluginError, match=r"'bad-devices'.*mmasim_harness_devices\(\) must map family names"):
        hrun.device_class(mmasim.MMA("A100", "mma.sync.m16n8k16.f32.f16.f16"))


class ToyDevice:
    """A plugin's device class: it reports a target as ``toy-<target>``."""

    reports = "toy level"

    @staticmethod
    def expected(target):
        return f"toy-{target}"


def test_harness_run_takes_a_plugin_familys_device_class_from_its_hook(registered):
    from mmasim.errors import HarnessError
    from mmasim.harness import measure as hrun
    registered(make_plugin(mmasim_families=[TOY_FAMILY], mmasim_architectures=[TOY_TABLE],
                           mmasim_harness_devices={"famtoy.mma": f"{__name__}.ToyDevice"}), "famtoy")
    m = mmasim.MMA("FamToy", "famtoy.mma.k4.f32.f16.f16")
    kind = hrun.device_class(m)
    assert kind.__qualname__ == "ToyDevice" and isinstance(hrun.default_device(m), kind)
    info = hrun.check_device(hrun.SimulatedDevice("toy GPU", "toy-sm_77q"), "FamToy", "sm_77q", kind)
    assert info["name"] == "toy GPU"
    with pytest.raises(HarnessError, match=r"has toy level 9\.0, but FamToy kernels \(sm_77q\) need toy-sm_77q"):
        hrun.check_device(hrun.SimulatedDevice("toy GPU", "9.0"), "FamToy", "sm_77q", kind)
    mmasim.unregister(name="famtoy")
    registered(plugin(TOY_FAMILY), "famtoy")
    with pytest.raises(HarnessError, match="no harness device for famtoy.mma instructions"):
        hrun.device_class(mmasim.MMA("FamToy", "famtoy.mma.k4.f32.f16.f16"))


def test_the_harness_table_gives_every_builtin_family_its_emitter_and_device_class():
    from mmasim.harness import amd, nv_async, nv_sync, nv_tcgen05, table
    from mmasim.harness import generate as gen
    from mmasim.harness import measure as hrun
    nvidia = {"mma.sync": ("A100", "mma.sync.m16n8k16.f32.f16.f16"),
              "wgmma.mma_async": ("H100", "wgmma.mma_async.m64n8k16.f32.f16.f16"),
              "tcgen05.mma": ("B200", "tcgen05.mma.kind::tf32")}
    amd_ = {"v_mfma": ("CDNA3", "v_mfma_f32_16x16x16_f16"), "v_smfmac": ("CDNA3", "v_smfmac_f32_16x16x32_f16")}
    assert set(nvidia) | set(amd_) == set(mmasim.get_registry().families) == set(table.EMITTERS) == set(table.DEVICES)
    emitters = {"mma.sync": nv_sync, "wgmma.mma_async": nv_async, "tcgen05.mma": nv_tcgen05, "v_mfma": amd,
                "v_smfmac": amd}
    for family, (arch, name) in {**nvidia, **amd_}.items():
        assert gen.emitter(mmasim.MMA(arch, name)) is emitters[family], family
    for table, kind in ((nvidia, hrun.CudaDevice), (amd_, amd.HipDevice)):
        for family, (arch, name) in table.items():
            model = mmasim.MMA(arch, name)
            assert model.family.name == family and hrun.device_class(model) is kind, family
    assert (hrun.CudaDevice.expected("sm_90a"), hrun.CudaDevice.expected("sm_120a")) == ("9.0", "12.0")
    assert amd.HipDevice.expected("gfx942") == "gfx942"


def test_a_family_name_has_one_owner(registered):
    registered(plugin(TOY_FAMILY), "famtoy")
    other = attrs.evolve(TOY_FAMILY, syntax=Syntax(lead=("famtoy", "mma")))
    with pytest.raises(PluginConflict) as info:
        mmasim.register(plugin(other, table=False), name="famtoy-rival")
    text = str(info.value)
    assert "instruction family 'famtoy.mma'" in text and "'famtoy-rival'" in text and "'famtoy'" in text
    assert "famtoy-rival" not in {s.name for s in mmasim.registry.registration.status()}
    # the built-in records have their owner too
    builtin = mmasim.get_registry().families["mma.sync"]
    with pytest.raises(PluginConflict, match="instruction family 'mma.sync'.*mmasim_plugins.families"):
        mmasim.register(plugin(attrs.evolve(builtin, target=None), table=False), name="mma-rival")
    # the same record again is no conflict
    registered(plugin(TOY_FAMILY, table=False), "famtoy-again")


def test_a_family_record_refuses_storage_outside_its_spaces():
    with pytest.raises(ValueError, match="storage must name spaces"):
        Family("x.mma", Syntax(lead=("x",)), storage={"b": ("global",)})


# ------------------------------------------------------------------ no op strings in the core
#: the modules that implement a family's rules, named by its record, and why each may spell ops
ALLOWED = {
    "mmasim/harness/table.py": "the harness's table: each built-in family's emitter and device class, by name",
    "mmasim/harness/nv_sync.py": "emitter of mma.sync (the harness's table)",
    "mmasim/harness/nv_async.py": "emitter of wgmma.mma_async",
    "mmasim/harness/nv_tcgen05.py": "emitter of tcgen05.mma",
    "mmasim/harness/nv_common.py": "what the NVIDIA emitters share",
    "mmasim/harness/amd.py": "emitter of v_mfma / v_smfmac",
    "mmasim/placement/smem.py": "the shared-memory descriptor formats (Family.descriptor)",
    "mmasim/placement/smem_packed.py": "tcgen05's sub-byte packing (Family.smem_packing)",
    "mmasim/placement/tmem.py": "tcgen05's Tensor Memory layouts and tcgen05.ld shapes",
    "mmasim/warp/tensor_memory.py": "tcgen05's warp execution (Family.warp)",
    "mmasim/warp/warpgroup.py": "wgmma's warp execution (Family.warp)",
    "mmasim/mma_sim_compat/nv_ptx.py": "MMA-Sim's per-family classes keep MMA-Sim's spellings",
    "mmasim/mma_sim_compat/amd.py": "MMA-Sim's per-family classes keep MMA-Sim's spellings",
    "mmasim/torch/emulation.py": "recipes name the instruction each runs, as a user writes it",
    "mmasim/quantization/hadamard.py": "TE's Hadamard transform names the MMA its kernel runs, as a user writes it",
}


def op_pattern() -> re.Pattern:
    """A string that spells an op: a registered family's name or first lead token (or PTX's
    ``mma.sp``), whole or followed by '.', ':' or '_'."""
    names = {"mma.sp"}
    for f in mmasim.get_registry().families.values():
        names |= {f.name, f.syntax.lead[0]}
    alts = "|".join(sorted(map(re.escape, names), key=len, reverse=True))
    return re.compile(rf"(?:{alts})(?:$|[.:_])")


def op_strings(source: str, pattern: re.Pattern) -> list:
    """``(line, text)`` of every string constant in ``source`` that spells an op: docstrings,
    text with spaces (messages, help) and the names in ``__all__`` are not op strings."""
    tree = ast.parse(source)
    skip = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant):
            skip.add(id(body[0].value))
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            skip |= {id(n) for n in ast.walk(node.value)}
    hits = [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and id(n) not in skip and not re.search(r"\s", n.value) and pattern.match(n.value)]
    return [(n.lineno, n.value) for n in sorted(hits, key=lambda n: (n.lineno, n.col_offset))]


def test_the_scan_finds_op_strings_and_passes_prose():
    pattern = op_pattern()
    found = op_strings('"""A docstring about tcgen05.mma."""\n'
                       'def f(dp):\n'
                       '    """mma.sync only."""\n'
                       '    if dp.op == "tcgen05.mma" or dp.op.startswith("v_mfma_"):\n'
                       '        raise ValueError("A of tcgen05.mma is read from shared memory")\n'
                       '    return {"wgmma": 1}, "mma", "mma.sp", "harmless"\n'
                       '__all__ = ["tcgen05_ld"]\n', pattern)
    assert [text for _, text in found] == ["tcgen05.mma", "v_mfma_", "wgmma", "mma", "mma.sp"]


def test_no_core_module_tests_an_op_string():
    pattern = op_pattern()
    found = []
    for path in sorted((ROOT / "mmasim").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel in ALLOWED:
            continue
        found += [f"{rel}:{line}: {text!r}" for line, text in op_strings(path.read_text(encoding="utf-8"), pattern)]
    assert not found, "op strings outside the family modules (ask the family record):\n" + "\n".join(found)
    assert all((ROOT / rel).is_file() for rel in ALLOWED), "an allowed module is gone: drop it from ALLOWED"


def harness_names(source: str) -> list:
    """``(line, text)`` of every string constant in ``source`` that names a harness module."""
    return [(n.lineno, n.value) for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and re.search(r"\bmmasim\.harness\.\w", n.value)]


def test_the_registry_and_the_family_records_name_no_harness_module():
    assert harness_names('DEVICE = "mmasim.harness.measure.CudaDevice"\nx = "a harness"\n') == [
        (1, "mmasim.harness.measure.CudaDevice")]
    found = [f"{path.relative_to(ROOT).as_posix()}:{line}: {text!r}"
             for path in sorted([*(ROOT / "mmasim" / "registry").rglob("*.py"), *(ROOT / "plugins").glob("*.py")])
             for line, text in harness_names(path.read_text(encoding="utf-8"))]
    assert not found, "the harness keeps its emitters and devices (mmasim/harness/table.py):\n" + "\n".join(found)


def test_placement_imports_no_registry_module():
    from test_architecture import graph

    edges = graph()
    wrong = {m: sorted(t for t in targets if t.startswith("mmasim.registry"))
             for m, targets in edges.items() if m.startswith("mmasim.placement")}
    assert not {m: t for m, t in wrong.items() if t}, "placement asks the model's family, not the registry"
