"""The device path of ``mmasim characterize``, end to end without a GPU: ``mmasim harness run
--probes`` places the probe ladders of :func:`mmasim.characterize.probe_cases` into tiles, runs
them on a device (here :class:`mmasim.harness.measure.SimulatedDevice`, which computes D from the
placed registers with the simulator) and writes vector files; ``mmasim characterize ARCH INS
--from-vectors FILE`` reads the probe cases back by label and must reproduce every probe word
and recover the table's window parameters (a round trip: the simulated device is the table's
datapath).  Integer instructions have no probe ladders: they run without probes, and the
output says so."""
import re

import numpy as np
import pytest

import mmasim
import mmasim.cli.main as cli
from mmasim.vectors import files as vectors
from mmasim.characterize import probe_cases
from mmasim.harness import measure as hrun

#: (arch, compute capability, instruction): plain, 2:4 sparse (sparse_metadata) and block-scaled
#: (scale_a / scale_b) float instructions
FLOAT = [
    ("Ampere", "8.0", "mma.sync.m16n8k16.f32.f16.f16"),
    ("RTX Blackwell", "12.0", "mma.sync.sp.m16n8k16.f32.f16.f16"),
    ("RTX Blackwell", "12.0",
     "mma.sync.kind::mxf8f6f4.block_scale.scale_vec::1X.block32.m16n8k32.f32.e4m3.e4m3.ue8m0"),
]
INTEGER = ("Ampere", "8.0", "mma.sync.m16n8k32.s32.s8.s8.satfinite")


def _simulated(cc, monkeypatch):
    # the CLI's default device (the family's CudaDevice) replaced by the simulator of the placed registers
    monkeypatch.setattr(hrun, "default_device", lambda model: hrun.SimulatedDevice("simulated GPU", cc))


@pytest.mark.parametrize("arch, cc, name", FLOAT, ids=[f[2].split(".m16")[0] for f in FLOAT])
def test_harness_run_probes_then_characterize_from_vectors_recovers_the_table(tmp_path, capsys, monkeypatch,
                                                                            arch, cc, name):
    _simulated(cc, monkeypatch)
    out = tmp_path / "vectors"
    assert cli.main(["harness", "run", arch, name, "--out", str(out), "--cases", "1", "--probes", "-q"]) == 0
    capsys.readouterr()
    (path,) = out.glob("*.npz")
    model = mmasim.MMA(arch, name)
    probes = probe_cases(model)
    v = vectors.load(path)
    assert v.provenance["probe_cases"] == len(probes["labels"]) > 0
    # every probe is in the file under its own label, with its operands (row i of A, column i of B)
    labels = list(v.labels)
    for p, lab in enumerate(probes["labels"]):
        k = labels.index(lab)
        assert np.array_equal(v.a[k], probes["a"][p]) and np.array_equal(v.b[k], probes["b"][p])
        assert int(v.c[k]) == int(probes["c"][p])
        for key in ("scale_a", "scale_b", "sparse_metadata"):
            if key in probes:
                assert np.array_equal(getattr(v, key)[k], probes[key][p]), key
    assert cli.main(["characterize", arch, name, "--from-vectors", str(path)]) == 0
    text = capsys.readouterr().out
    n = len(probes["labels"])
    assert f"reproduces {n} of {n} probe words" in text
    assert re.search(rf"params = \{{ F = {dict(model.datapath.params)['F']}\b", text)


def test_harness_run_probes_runs_an_integer_instruction_without_probes_and_says_so(tmp_path, capsys, monkeypatch):
    arch, cc, name = INTEGER
    _simulated(cc, monkeypatch)
    out = tmp_path / "vectors"
    assert cli.main(["harness", "run", arch, name, "--out", str(out), "--cases", "1", "--probes", "-q"]) == 0
    text = capsys.readouterr().out
    assert re.search(rf"{re.escape(name)}: run without probes: .*integer", text)
    (path,) = out.glob("*.npz")
    v = vectors.load(path)
    assert v.provenance["probe_cases"] == 0 and v.provenance["probes"].startswith("none: ")
    assert len(v) == 16 * 8 and set(v.labels) <= set(hrun.KINDS)       # the random tile only


class _Zeros:
    """A device whose every output word is 0 (only the file bookkeeping is under test)."""

    def info(self):
        return {"name": "zeros", "compute_capability": "9.0"}

    def run(self, spec, model, inputs, cases):
        from mmasim.harness import host
        return np.zeros(cases * host.words_per_case(spec, spec.output), dtype=np.uint32)


def test_an_instruction_with_several_kernels_writes_one_file_per_kernel(tmp_path):
    # wgmma: one kernel per N (smallest, largest) and A source (smem, registers); none may
    # overwrite another's vector file
    name = "wgmma.mma_async.k32.s32.s8.s8"
    res = hrun.measure("Hopper", tmp_path, cases=1, instructions=[name], device=_Zeros(), progress=False)
    kernels = [s.name for _, s in hrun.gen.specs_for("Hopper", [name])[0]]
    assert not res["skipped"] and len(kernels) == 4
    assert len(set(res["written"])) == len(res["written"]) == 4
    assert sorted(vectors.load(p).provenance["kernel"] for p in res["written"]) == sorted(kernels)
