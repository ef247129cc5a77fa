"""The harness of the tests that run ``backend="cuda"`` in numba-cuda's simulator
(``NUMBA_ENABLE_CUDASIM=1``), in a subprocess: the simulator replaces ``numba.cuda`` for the
whole process.  :data:`PRELUDE` opens each script: ``Stub``, a device operand as a foreign
library hands it over (``__cuda_array_interface__`` only), and ``copied(operands)``, how many
device -> host copies (the simulator's ``copy_to_host``, counted in ``copies``) read the memory
of one of ``operands``.  :func:`run` runs a script and returns what it printed last (JSON); :func:`fixture` makes it
the module's ``simulated`` fixture.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from mmasim.backends.cuda import missing

PRELUDE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import mmasim
    from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray

    class Stub:
        '''A device operand as a foreign library hands it over: __cuda_array_interface__ only.'''
        def __init__(self, a):
            self.a = np.ascontiguousarray(a)
        @property
        def __cuda_array_interface__(self):
            a = self.a
            return {"shape": a.shape, "typestr": a.dtype.str, "data": (a.ctypes.data, False), "strides": None,
                    "version": 3}

    copies = []     # the host buffers of every device -> host copy
    _copy = FakeCUDAArray.copy_to_host
    def counted(self, *args, **kwargs):
        copies.append(self._ary)
        return _copy(self, *args, **kwargs)
    FakeCUDAArray.copy_to_host = counted

    def copied(operands):
        return sum(any(np.shares_memory(x, o) for o in operands) for x in copies)
""")


def run(script: str, arg) -> dict:
    """The JSON the simulated ``PRELUDE + script`` prints last, ``arg`` (JSON) its ``sys.argv[1]``;
    skipped where numba-cuda is missing."""
    if missing():
        pytest.skip(missing())
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    env.pop("MMASIM_BACKEND", None)
    r = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(script), json.dumps(arg)],
                       capture_output=True, text=True, env=env, timeout=1500)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def fixture(script: str, arg):
    """A module-scoped pytest fixture of :func:`run` ``(script, arg)`` (run once per module)."""
    return pytest.fixture(scope="module", name="simulated")(lambda: run(script, arg))
