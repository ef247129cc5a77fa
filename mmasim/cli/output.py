"""Where the command line writes: standard output and standard error, both through one
guard (:func:`guard`) for the whole of a command, whoever prints (a command, argparse's
``--help``, a progress bar).

A write that fails ends the command, the same way whichever command it was:

* standard output closed by its reader (``mmasim list | head -1``, EPIPE): exit status 1,
  nothing more printed;
* standard output failing otherwise (a full disk, ``> /dev/full``: ENOSPC, EIO, ...): one line
  on standard error, ``mmasim: error: cannot write the output: No space left on device``,
  exit status 1;
* standard error failing: exit status 1, silently (there is nowhere left to say it).

Either way the failed stream is then pointed at the null device, so that the interpreter's
last flush at exit has nothing to complain about (no ``Exception ignored ...`` and no
status 120).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import sys



def dump(doc) -> None:
    """Print ``doc`` as one JSON document on standard output (``--json``)."""
    print(json.dumps(doc, indent=2, default=str))

class OutputLost(Exception):
    """A write to standard output or standard error failed (``error``: the ``OSError``)."""

    def __init__(self, name: str, stream, error: OSError):
        super().__init__(f"cannot write the {name}: {error.strerror or error}")
        self.name, self.stream, self.error = name, stream, error


class _Guarded:
    """A text stream whose failed write or flush raises :class:`OutputLost`."""

    def __init__(self, stream, name: str):
        self._stream, self._name = stream, name

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as exc:
            raise OutputLost(self._name, self._stream, exc) from None

    def flush(self):
        try:
            self._stream.flush()
        except OSError as exc:
            raise OutputLost(self._name, self._stream, exc) from None

    def __getattr__(self, attr):            # isatty, fileno, encoding, ... of the stream itself
        return getattr(self._stream, attr)


@contextlib.contextmanager
def guard():
    """Standard output and standard error guarded for the ``with`` block, and flushed at its
    end (a write that only fails then fails inside the block)."""
    saved = sys.stdout, sys.stderr
    sys.stdout = None if saved[0] is None else _Guarded(saved[0], "output")
    sys.stderr = None if saved[1] is None else _Guarded(saved[1], "error output")
    try:
        yield
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    finally:
        sys.stdout, sys.stderr = saved


def lost(exc: OutputLost, say: bool = True) -> int:
    """Say (where ``say``, there is something to say and somewhere to say it) that the output
    was lost; the exit status, 1."""
    _silence(exc.stream)
    if say and exc.stream is not sys.stderr and exc.error.errno != errno.EPIPE and sys.stderr is not None:
        try:
            print(f"mmasim: error: {exc}", file=sys.stderr, flush=True)
        except OSError:
            _silence(sys.stderr)
    return 1


def _silence(stream) -> None:
    """Point ``stream``'s file descriptor at the null device (nothing pending can fail again)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):     # an in-memory stream: nothing to redirect
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)


__all__ = ["OutputLost", "guard", "lost", "dump"]
