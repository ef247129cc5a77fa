"""Every generated NVIDIA kernel is real PTX that NVIDIA's compiler assembles for its target.

All kernels ``mmasim harness generate`` emits for an architecture are compiled by ``nvcc``
(so ``ptxas`` assembles each inline-PTX instruction) in one translation unit per target, and
one complete source with the host ``main()`` per target is compiled too (``-c``).  Objects are
cached by content hash (``$MMASIM_HARNESS_CACHE``), so an unchanged table compiles once.
Skipped, with the reason, only where no ``nvcc`` that knows the target is installed
(``.ci/run`` installs the PyPI wheel ``nvidia-cuda-nvcc``).
"""
import functools
import re

import pytest

import mmasim
from mmasim.errors import ToolchainError
from mmasim.harness import generate as gen
from mmasim.harness import host, nv_sync, toolchain

NVIDIA = [a for a in nv_sync.TARGETS if a in mmasim.architectures()]

#: opcodes a recent ptxas accepts that older ones do not (mma.sync kind::mxf4nvf4 with
#: scale_vec::4X and .ue8m0 scales: rejected by the ptxas of CUDA 13.0, accepted by 13.5)
NEWER = {(13, 5): re.compile(r"kind::mxf4nvf4\.block_scale\.scale_vec::4X\..*\.ue8m0$")}


def _version(nvcc):
    return tuple(int(x) for x in nvcc.version.split(".")[:2]) if nvcc.version else (0, 0)


@functools.lru_cache(maxsize=None)
def _specs(arch):
    pairs, _ = gen.specs_for(arch)
    return [s for _, s in pairs if s.target.startswith("sm_")]


def _compiler(target):
    try:
        return toolchain.find_nvcc(target)
    except ToolchainError as e:
        if target in toolchain.RETARGET and toolchain.find_ptxas(target):
            return toolchain.find_nvcc(toolchain.RETARGET[target][1])     # PTX from it, ptxas for target
        pytest.skip(f"{target}: {e}; and no ptxas that knows it (pip install nvidia-cuda-nvcc-cu12)")


def _rejected(specs, target):
    """The kernels ptxas rejects, one compile each (only run when the batch failed)."""
    bad = []
    for s in specs:
        try:
            toolchain.compile_source(host.device_batch([s]), target, device_only=True)
        except ToolchainError as e:
            bad.append(f"{s.instruction} ({s.assembly}): {str(e).splitlines()[-1]}")
    return bad


@pytest.mark.parametrize("arch", NVIDIA)
def test_every_generated_kernel_assembles_for_its_target(arch):
    specs = _specs(arch)
    assert specs, f"{arch}: generate emitted no NVIDIA kernel"
    by_target = {}
    for s in specs:
        by_target.setdefault(s.target, []).append(s)
    for target, group in by_target.items():
        nvcc = _compiler(target)
        group = [s for s in group
                 if not any(_version(nvcc) < v and rx.search(s.assembly) for v, rx in NEWER.items())]
        try:
            toolchain.compile_source(host.device_batch(group), target, device_only=True)
        except ToolchainError:
            bad = _rejected(group, target)
            assert not bad, f"ptxas ({nvcc.path}, CUDA {nvcc.version}) rejects:\n" + "\n".join(bad)
            raise


@pytest.mark.parametrize("arch", NVIDIA)
def test_a_complete_generated_source_with_host_main_compiles(arch):
    specs = _specs(arch)
    spec = max(specs, key=lambda s: len(s.inputs))       # the one with the most buffers
    _compiler(spec.target)
    toolchain.compile_source(host.cuda_source(spec), spec.target)
