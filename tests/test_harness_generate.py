"""``mmasim harness generate`` with no instruction covers every instruction mmasim knows for the
architecture: every instruction mmasim accepts gets at least one kernel, and an instruction the
table refuses (:class:`mmasim.UnsupportedDatapath`) is reported with the table's reason, never
dropped."""
import pytest

import mmasim
from mmasim import UnsupportedDatapath
import mmasim.cli.main as cli
from mmasim.harness import generate as gen


def _refused(arch):
    """The instructions of ``arch`` that mmasim lists but refuses, with the refusal's message."""
    out = {}
    for ins in mmasim.instructions(arch):
        try:
            mmasim.MMA(arch, str(ins))
        except UnsupportedDatapath as e:
            out[str(ins)] = str(e)
    return out


@pytest.mark.parametrize("arch", mmasim.architectures())
def test_generate_without_instructions_covers_every_accepted_instruction_and_reports_the_refused(arch):
    pairs, skipped = gen.specs_for(arch)
    names = [str(i) for i in mmasim.instructions(arch)]
    refused = _refused(arch)
    generated = {m.instruction for m, _ in pairs}
    assert generated == {mmasim.MMA(arch, n).instruction for n in names if n not in refused}
    # the only instructions not generated are the refused ones, each with the table's reason
    assert dict(skipped) == {n: f"not generated: {why}" for n, why in refused.items()}


def test_cli_generate_prints_every_refused_instruction(tmp_path, capsys):
    # Blackwell Ultra refuses tcgen05 .kind::i8 (PTX ISA 9.0: sm_100a / sm_101a only)
    refused = _refused("Blackwell Ultra")
    assert refused
    assert cli.main(["harness", "generate", "Blackwell Ultra", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for ins in refused:
        assert f"  {ins}: not generated: " in out
    script = (tmp_path / "build.sh").read_text()
    assert all(f"# {ins}: not generated: " in script for ins in refused)
