"""Where the command line writes (docs/user-guide.md, "Command line"): every command, with
``--json`` or without, ends the same way when its output cannot be written.

* standard output on a full disk (``> /dev/full``, ENOSPC): exit status 1 and one line on
  stderr saying so (or, for a command that failed anyway, its own error line alone);
* standard output closed by its reader (``| head -c 10`` that has gone, EPIPE): exit status 1,
  nothing on stderr;
* standard error failing too: exit status 1, silently.

Never a traceback, never Python's ``Exception ignored ...`` at exit (status 120).  Run as real
processes: the interpreter's last flush is part of what is checked.
"""

import os
import subprocess
import sys

import pytest

FULL = "/dev/full"
pytestmark = pytest.mark.skipif(not os.path.exists(FULL), reason="needs /dev/full (Linux)")

ENV = {**os.environ, "MMASIM_BACKEND": "numpy"}
ENOSPC_LINE = "mmasim: error: cannot write the output: No space left on device"

#: commands that succeed, each printing more than a pipe buffer holds or less (both must fail alike)
SUCCEED = [
    ["list", "B200"],
    ["explain", "B200", "tcgen05.mma.kind::tf32"],
    ["run", "B200", "tcgen05.mma.kind::tf32", "--a", " ".join(["3F800000"] * 8), "--b",
     " ".join(["3F800000"] * 8), "--c", "0"],
    ["--help"],
    ["layout", "A100", "mma.sync.m16n8k16.f32.f16.f16"],
]
#: commands that fail (exit 1 or 2) whatever happens to their output
FAIL = [
    (["list", "NoSuchGPU"], 1, "mmasim: error: unknown architecture 'NoSuchGPU'"),
    (["validate", "--frob"], 2, "mmasim validate: error: unrecognized arguments: --frob"),
]


def _mmasim(argv, **streams):
    return subprocess.run([sys.executable, "-m", "mmasim", *argv], env=ENV, timeout=120, **streams)


def _with_json(argv):
    return argv if argv == ["--help"] else [*argv, "--json"]


def _closed_pipe(argv):
    """``argv`` with stdout a pipe whose reader has gone before anything was written."""
    p = subprocess.Popen([sys.executable, "-m", "mmasim", *argv], env=ENV, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    p.stdout.close()
    err = p.stderr.read().decode()
    p.stderr.close()
    return p.wait(timeout=120), err


@pytest.mark.parametrize("json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("argv", SUCCEED, ids=lambda a: " ".join(a[:2]))
def test_output_to_a_full_disk_is_one_error_line_and_status_1(argv, json):
    argv = _with_json(argv) if json else argv
    with open(FULL, "w") as full:
        r = _mmasim(argv, stdout=full, stderr=subprocess.PIPE, text=True)
    assert r.returncode == 1, (argv, r.stderr)
    assert r.stderr == ENOSPC_LINE + "\n", (argv, r.stderr)


@pytest.mark.parametrize("json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("argv", SUCCEED, ids=lambda a: " ".join(a[:2]))
def test_output_to_a_closed_pipe_ends_quietly_with_status_1(argv, json):
    argv = _with_json(argv) if json else argv
    rc, err = _closed_pipe(argv)
    assert (rc, err) == (1, ""), argv


@pytest.mark.parametrize("json", [False, True], ids=["text", "json"])
@pytest.mark.parametrize("argv, status, line", FAIL, ids=lambda x: " ".join(x) if isinstance(x, list) else "")
def test_a_failing_command_says_its_own_error_once_whatever_happens_to_stdout(argv, status, line, json):
    """The error line is on stderr alone; the error document (--json) that cannot be written
    adds nothing (the output that failed is not the error the user needs to read)."""
    argv = [*argv, "--json"] if json else argv
    with open(FULL, "w") as full:
        r = _mmasim(argv, stdout=full, stderr=subprocess.PIPE, text=True)
    assert r.returncode == status and r.stderr.startswith(line) and r.stderr.count("\n") == 1, r.stderr
    rc, err = _closed_pipe(argv)
    assert rc == status and err.startswith(line) and err.count("\n") == 1, err


@pytest.mark.parametrize("argv", [["list"], ["list", "NoSuchGPU"], ["validate", "--frob"], ["list", "--json"]])
def test_when_stderr_fails_too_the_command_exits_1_silently(argv):
    with open(FULL, "w") as full:
        r = _mmasim(argv, stdout=full, stderr=full)
    assert r.returncode == 1


def test_stderr_failing_alone_leaves_stdout_as_it_was():
    """A failure whose error line cannot be written exits 1 silently; a success is untouched."""
    with open(FULL, "w") as full:
        bad = _mmasim(["list", "NoSuchGPU"], stdout=subprocess.PIPE, stderr=full, text=True)
        good = _mmasim(["list", "B200"], stdout=subprocess.PIPE, stderr=full, text=True)
    assert (bad.returncode, bad.stdout) == (1, "")
    assert good.returncode == 0 and "tcgen05.mma.kind::tf32.f32.tf32.tf32" in good.stdout


def test_the_guard_restores_the_streams_and_passes_what_it_writes(capsys):
    from mmasim.cli.main import main

    before = sys.stdout, sys.stderr
    assert main(["list"]) == 0
    assert (sys.stdout, sys.stderr) == before
    assert "Blackwell" in capsys.readouterr().out
