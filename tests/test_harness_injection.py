"""No text reaches a generated harness source or build script unless it is printable ASCII on
one line without a C string's ``"`` or ``\\`` (``mmasim.harness.spec.source_text``): user
instruction strings are checked before anything is written, every ``KernelSpec`` checks its own
texts (arch, instruction, target, name, assembly, qualifiers), ``build.sh`` quotes its words and
writes each skipped instruction's reason as one escaped comment line."""

import contextlib
import io
import shutil
import subprocess

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_layout_plugins import SYNC_TABLE

import mmasim
import mmasim.cli.main as cli
from mmasim.errors import HarnessError
from mmasim.harness.generate import generate, specs_for
from mmasim.harness.spec import KernelSpec, source_text

AMPERE = "mma.sync.m16n8k16.f32.f16.f16.f32"


def _allowed(text: str) -> bool:
    return all(" " <= ch <= "~" and ch not in '"\\' for ch in text)


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=40))
def test_source_text_passes_exactly_the_printable_one_line_texts(text):
    if _allowed(text):
        assert source_text(text, "instruction") == text
    else:
        with pytest.raises(HarnessError, match="printable ASCII on one line") as info:
            source_text(text, "instruction")
        assert "\n" not in str(info.value) and "\x1b" not in str(info.value)


@pytest.fixture(scope="module")
def ampere_spec():
    (pair,), _ = specs_for("Ampere", [AMPERE])
    return pair[1]


@settings(max_examples=60, deadline=None)
@given(field=st.sampled_from(("arch", "instruction", "target", "name", "assembly")),
       evil=st.sampled_from(("\n", "\r", '"', "\\", "\x00", "\u2028", "\x1b", "é")),
       at=st.integers(min_value=0, max_value=20))
def test_kernel_spec_refuses_a_text_that_would_break_out_of_its_source(ampere_spec, field, evil, at):
    value = getattr(ampere_spec, field)
    with pytest.raises(HarnessError, match=f"kernel spec {field}"):
        attrs.evolve(ampere_spec, **{field: value[:at] + evil + value[at:]})
    with pytest.raises(HarnessError, match="qualifier"):
        attrs.evolve(ampere_spec, qualifiers={"saturate": evil})


def test_spec_json_from_disk_is_checked_like_a_new_spec(ampere_spec):
    text = ampere_spec.to_json().replace(ampere_spec.assembly, ampere_spec.assembly + '\\"); system(\\"x')
    with pytest.raises(HarnessError, match="assembly"):
        KernelSpec.from_json(text)


def test_instruction_with_a_newline_is_refused_before_anything_is_written(tmp_path):
    out = tmp_path / "out"
    with pytest.raises(HarnessError, match="instruction"):
        generate("Ampere", [AMPERE + "\necho pwned"], out)
    assert not out.exists()
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = cli.main(["harness", "generate", "A100", AMPERE + "\necho pwned", "--out", str(out)])
    assert rc != 0 and "mmasim: error:" in err.getvalue() and "\\x0a" in err.getvalue()
    assert "internal error" not in err.getvalue() and not out.exists()


def test_build_script_is_one_command_or_one_comment_per_line(tmp_path):
    # a refused instruction is skipped with its reason (an UnsupportedDatapath: Ampere's m8n8k4
    # .f16 D is refused), written as one comment line
    res = generate("Ampere", [AMPERE, "mma.sync.m8n8k4.f16.f16.f16.f16"], tmp_path)
    script = (tmp_path / "build.sh").read_text()
    lines = script.splitlines()
    assert len(res.kernels) == 1 and [ins for ins, _ in res.skipped] == ["mma.sync.m8n8k4.f16.f16.f16.f16"]
    assert [line for line in lines if line.startswith("# mma.sync.m8n8k4")]
    for line in lines[5:]:
        assert line.startswith('"${NVCC:-nvcc}" ') or line.startswith("# "), line
        assert _allowed(line.replace('"', "").replace("\\", "")), line
    if shutil.which("sh"):
        assert subprocess.run(["sh", "-n", str(tmp_path / "build.sh")]).returncode == 0


def test_plugin_architecture_whose_name_would_break_a_source_is_refused(tmp_path):
    table = SYNC_TABLE.replace('name = "SyncToy"', "name = 'Quote\"Arch'")
    assert "Quote" in table

    class Plugin:
        @mmasim.hookimpl
        def mmasim_architectures(self):
            return [table]

    mmasim.register(Plugin(), name="quote-arch")
    try:
        with pytest.raises(HarnessError, match="architecture"):
            generate('Quote"Arch', None, tmp_path / "q")
        assert not (tmp_path / "q").exists()
    finally:
        mmasim.unregister(name="quote-arch")
