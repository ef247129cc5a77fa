"""The harness of the tests that run ``backend="cuda"`` in numba-cuda's simulator
(``NUMBA_ENABLE_CUDASIM=1``), in a subprocess: the simulator replaces ``numba.cuda`` for the
whole process.  :data:`PRELUDE` opens each script: ``Stub``, a device operand as a foreign
library hands it over (``__cuda_array_interface__`` only), and ``copied(operands)``, how many
device -> host copies (the simulator's ``copy_to_host``, counted in ``copies``) read the memory
of one of ``operands``.  :func:`run` runs a script and returns what it printed last (JSON); :func:`fixture` makes it
the module's ``simulated`` fixture.  :data:`TORCH` (after :data:`PRELUDE`) stands in for CUDA torch
tensors, which cannot exist under the simulator.
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import textwrap

import pytest

from mmasim.backends.cuda import missing

#: opens every simulated script: each kernel launch recorded (its driver, body and argument
#: types, :func:`mmasim.backends.cuda.launch.launched`) and printed to stderr at exit, for
#: :func:`check_launches`
RECORDER = textwrap.dedent("""
    import atexit as _atexit, json as _json, sys as _sys
    from mmasim.backends.cuda import launch as _backend
    _launches = set()
    _launch = _backend.launch
    def _recorded(driver, fn, n, args):
        _launches.add(_json.dumps([driver.__name__, None if fn is None else fn.__name__,
                                   [_backend.launched(x) for x in args]]))
        return _launch(driver, fn, n, args)
    _backend.launch = _recorded
    _atexit.register(lambda: print("LAUNCHES " + _json.dumps(sorted(_launches)), file=_sys.stderr))
""")

PRELUDE = RECORDER + textwrap.dedent("""
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


TORCH = textwrap.dedent("""
    import os
    import torch
    from mmasim.backends.cuda import device

    escapes = []     # (op, elements) of every call that brings an OnDevice tensor's values to the host
    _HOST = {torch.Tensor.cpu, torch.Tensor.numpy, torch.Tensor.tolist, torch.Tensor.item, torch.Tensor.__array__,
             torch.Tensor.__float__, torch.Tensor.to}

    class OnDevice(torch.Tensor):
        '''A CUDA torch tensor as the simulator can hold one: torch ops run on it (their results
        OnDevice too), it exposes __cuda_array_interface__ over its memory (the simulator's device
        memory), and each call that would copy it to the host (cpu(), numpy(), to(a device),
        item() ...) is counted in ``escapes``.'''
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if func in _HOST and (func is not torch.Tensor.to or any(
                    isinstance(a, (str, torch.device)) for a in (*args[1:], *kwargs.values()))):
                escapes.append((func.__name__, int(args[0].numel())))
            return super().__torch_function__(func, types, args, kwargs)

        @property
        def __cuda_array_interface__(self):
            t = self.as_subclass(torch.Tensor)
            return {"shape": tuple(t.shape), "typestr": t.numpy().dtype.str, "data": (t.data_ptr(), False),
                    "strides": tuple(s * t.element_size() for s in t.stride()), "version": 3}

    OnDevice.__module__ = "torch.stand_in"      # read as a torch operand is (made contiguous on its device)

    _given = device.as_given_kind
    def _as_given_kind(d, first):
        '''D on first's device: an OnDevice for an OnDevice operand (torch.as_tensor gives a CPU tensor here).'''
        out = _given(d, first)
        return out.as_subclass(OnDevice) if isinstance(first, OnDevice) else out
    device.as_given_kind = _as_given_kind

    def on_device(t):
        return t.detach().clone().as_subclass(OnDevice)

    def plain(t):
        return t.as_subclass(torch.Tensor)

    def backend(name):
        os.environ["MMASIM_BACKEND"] = name
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
    check_launches(r.stderr)
    return json.loads(r.stdout.strip().splitlines()[-1])


@functools.lru_cache(maxsize=None)
def _known() -> dict:
    """``{kernel name: {argument descriptors}}`` of every kernel ``mmasim warmup --backend cuda
    --ptx`` writes (:func:`mmasim.backends.cuda.target.kernels`, whose PTX tests/test_cuda_ptx.py checks)."""
    from mmasim.backends.cuda import target

    known: dict = {}
    for k in target.kernels():
        known.setdefault(k.name.split(".")[0], set()).add(tuple(target.descriptor(t) for t in k.signature))
    return known


def check_launches(stderr: str) -> None:
    """Every kernel a simulated script launched (:data:`RECORDER`) is one of those whose PTX
    ``mmasim warmup --backend cuda --ptx`` writes and tests/test_cuda_ptx.py assembles, with the
    same argument types: what runs on a GPU is what CI compiled."""
    lines = [line for line in stderr.splitlines() if line.startswith("LAUNCHES ")]
    assert lines, "the simulated script recorded no launches (RECORDER missing?)"
    unknown = []
    for record in json.loads(lines[-1][len("LAUNCHES "):]):
        driver, fn, types = json.loads(record)
        name = fn.strip("_") if fn else driver[:-len("_cuda")]
        types = tuple(tuple(t) for t in types)
        if types not in _known().get(name, ()):
            unknown.append(f"{name} ({driver}) with argument types {types}")
    assert not unknown, "kernels launched that target.kernels() does not list: " + "; ".join(unknown)


def fixture(script: str, arg):
    """A module-scoped pytest fixture of :func:`run` ``(script, arg)`` (run once per module)."""
    return pytest.fixture(scope="module", name="simulated")(lambda: run(script, arg))
