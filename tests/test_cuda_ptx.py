"""numba-cuda compiles every per-row body (mmasim/backends/cuda) and the sparse selection to
PTX for sm_80, sm_90a and sm_100a with no GPU and no driver, NVIDIA's ptxas assembles each
without a spill or local memory, fixed-point kernels have no fused multiply-add and the IEEE
chains exactly those of their rule, and a body specialised for its plan uses far fewer
registers.  Skipped, with the reason, where numba-cuda is not installed
(``pip install '.[cuda]'``); the ptxas checks where no ptxas knows the target
(``pip install nvidia-cuda-nvcc nvidia-cuda-nvcc-cu12``).

Expectations: the PTX ISA manual (the first PTX ISA of each target: sm_80 7.0, sm_90a 8.0,
sm_100a 8.6), the families' rules (docs/datapaths.md §5: an FMA chain rounds once per product,
a multiply-then-add chain twice), and ptxas's / cuobjdump's own reports.
"""

from __future__ import annotations

import functools
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

import mmasim
from mmasim.backends.cuda import missing

pytestmark = [pytest.mark.skipif(bool(missing()), reason=missing() or "numba-cuda installed"),
              pytest.mark.xdist_group("cuda_ptx")]

if not missing():
    import numba
    from numba import cuda

    from mmasim.backends.cuda import rows, target
    from mmasim.backends.cuda.driver import cuda_driver
    from mmasim.backends.numba import primitives

#: the kernels of device operands (copies, checks, binary32 operations, quantization bodies)
DEVICE_OPERANDS = {"gather", "range", "add_row", "mul_row", "fma_row", "values_row", "words_row",
                   "cast_body", "mx_floor_body", "mx_rceil_body", "nvfp4_body", "deepseek_body", "amax_body",
                   "values_body", "recontainer_body", "bits_body", "bf16_words_body", "bf16_round_body", "bf16_values_body",
                   "add_c_body"}
FIRST_ISA = {"sm_80": "7.0", "sm_90a": "8.0", "sm_100a": "8.6"}
#: the bodies of IEEE chains: the precision of their one fma.rn per product (none: no FMA)
IEEE = {"fma_f32_body": "f32", "fma_f64_body": "f64", "mul_add_f32_body": None, "mul_add_f64_body": None,
        "ftz_mul_add_body": None}
#: a datapath of each body (the body specialised for it: its constants compiled in)
SPECIALISED = [("A100", "mma.sync.m16n8k16.f32.f16.f16.f32"), ("H100", "wgmma.mma_async.m64n8k32.f32.e4m3.e4m3"),
               ("B200", "tcgen05.kind::mxf4nvf4.4X"), ("B200", "tcgen05.mma.kind::mxf4.block_scale.scale_vec::2X"),
               ("RTX Blackwell", "mma.sync.kind::mxf4.block_scale.scale_vec::2X.block32.m16n8k64.f32.e2m1.e2m1.ue8m0"),
               ("CDNA3", "v_mfma.m32n32k4.f32.xf32.xf32"), ("CDNA1", "v_mfma.m32n32k8.f32.f16.f16"),
               ("A100", "mma.sync.m16n8k32.s32.s8.s8"), ("A100", "mma.sync.m8n8k128.s32.b1.b1.xor.popc"),
               ("A100", "mma.sync.m8n8k4.f64.f64.f64.f64"), ("CDNA1", "v_mfma.m32n32k2.f32.f32.f32"),
               ("Ampere", "mma.sync.m8n8k4.f32.f16.f16"), ("CDNA2", "v_mfma.kind::1k.m32n32k8.f32.bf16.bf16")]


@pytest.fixture(scope="module")
def warmup_run(tmp_path_factory):
    """``(JSON document, folder)`` of ``mmasim warmup --backend cuda --ptx DIR --json``: the PTX
    of every CUDA kernel the registered datapaths use, for every target."""
    import contextlib
    import io
    import json

    from mmasim.cli.main import main

    folder = tmp_path_factory.mktemp("ptx")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(["warmup", "--backend", "cuda", "--ptx", str(folder), "-q", "--json"])
    assert status == 0, out.getvalue()
    return json.loads(out.getvalue()), folder


@pytest.fixture(scope="module")
def kernel_ptx(warmup_run):
    """``[(kernel name, arch, path)]`` of the files ``mmasim warmup --backend cuda`` wrote."""
    return [(*path.name[:-len(".ptx")].rsplit(".", 1), path) for path in sorted(warmup_run[1].glob("*.ptx"))]


def test_warmup_writes_the_ptx_of_every_cuda_kernel(warmup_run):
    """One record per kernel, three PTX files each (sm_80, sm_90a, sm_100a), named
    ``KERNEL.ARCH.ptx``; the folder is the document's ``cache``."""
    doc, folder = warmup_run
    assert doc["schema"] == "mmasim.warmup/1" and doc["cache"] == str(folder)
    assert len(doc["kernels"]) == len(target.kernels())
    assert all(k["compiled"] == 3 and k["loaded"] == 0 for k in doc["kernels"])
    names = {k["kernel"].split(" ")[0] for k in doc["kernels"]}
    assert {p.name for p in folder.iterdir()} == {f"{n}.{arch}.ptx" for n in names for arch in target.ARCHS}


@pytest.mark.parametrize("argv", [["--backend", "cuda"], ["--ptx", "x"], ["--specialised"],
                                  ["--backend", "numba", "--ptx", "x"]])
def test_warmup_cuda_options_go_together(argv, capsys):
    from mmasim.cli.main import main

    assert main(["warmup", "-q", *argv]) == 2
    assert "--backend cuda writes the PTX" in capsys.readouterr().err


@pytest.fixture(scope="module")
def specialised_ptx(tmp_path_factory):
    """``[(name, arch, path)]``: the PTX of the bodies specialised for :data:`SPECIALISED`."""
    folder, out = tmp_path_factory.mktemp("specialised"), []
    for arch, instruction in SPECIALISED:
        plan = mmasim.MMA(arch, instruction).plan
        body, arrays = rows.body_for(plan, specialise=True)
        for sm, ptx in target.compile_ptxs(cuda_driver(body), target.signature(plan, arrays)).items():
            path = folder / f"{body.py_func.__name__}.{sm}.ptx"
            path.write_text(ptx)
            out.append((body.py_func.__name__, sm, path))
    return out


def _tool(name: str, arch: str = "") -> tuple:
    """Every distinct ``name`` (ptxas, cuobjdump) here (the wheels' of CUDA 12 and 13, PATH's);
    with ``arch``, those whose help names it."""
    cands = [shutil.which(name)]
    for entry in sys.path:
        cands += sorted(str(p) for p in pathlib.Path(entry or ".").glob(f"nvidia/*/bin/{name}"))
    found, seen = [], set()
    for path in cands:
        if not path or not pathlib.Path(path).is_file() or pathlib.Path(path).resolve() in seen:
            continue
        seen.add(pathlib.Path(path).resolve())
        r = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
        if arch in r.stdout:
            found.append(path)
    return tuple(found)


_ptxases = functools.lru_cache(maxsize=None)(lambda arch: _tool("ptxas", arch))


def _assemble(ptxas, path, arch) -> str:
    """ptxas -v's report on ``path``; fails the test where ptxas fails or finds a stack frame,
    a spill or local memory."""
    r = subprocess.run([ptxas, "-v", f"-arch={arch}", str(path), "-o", str(path) + ".cubin"],
                       capture_output=True, text=True, timeout=300)
    report = r.stdout + r.stderr
    assert r.returncode == 0, (ptxas, path.name, report[-2000:])
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, (ptxas, path.name, report)
    assert "lmem" not in report, (ptxas, path.name, report)
    return report


def test_every_body_and_the_sparse_selection_has_a_cuda_kernel(kernel_ptx):
    """Every body some built-in datapath takes (no built-in datapath multiplies then adds in
    binary64), and the selection of the sparse datapaths, for each target."""
    names = {name.split(".")[0] for name, _, _ in kernel_ptx}
    assert names == (set(rows.ALL_BODIES) - {"mul_add_f64_body"}) | {"select_row"} | DEVICE_OPERANDS
    per_kernel = {}
    for name, arch, _ in kernel_ptx:
        per_kernel.setdefault(name, set()).add(arch)
    assert all(archs == set(target.ARCHS) for archs in per_kernel.values())


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_ptx_names_its_target_and_the_first_ptx_isa_that_knows_it(kernel_ptx, arch):
    for _, sm, path in kernel_ptx:
        if sm == arch:
            ptx = path.read_text()
            assert re.search(rf"^\.target {arch}$", ptx, re.M), path.name
            assert re.search(rf"^\.version {re.escape(FIRST_ISA[arch])}$", ptx, re.M), path.name
            assert ptx.count(".entry") == 1 and ".local" not in ptx, path.name


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_ptxas_assembles_every_kernel_without_spills_or_local_memory(kernel_ptx, specialised_ptx, arch):
    """Each ptxas here that knows the target (CUDA 12.9, 13.0, 13.5): every kernel, generic
    and specialised."""
    ptxases = _ptxases(arch)
    if not ptxases:
        pytest.skip(f"no ptxas knows {arch} (pip install nvidia-cuda-nvcc nvidia-cuda-nvcc-cu12)")
    paths = [path for _, sm, path in kernel_ptx + specialised_ptx if sm == arch]
    for ptxas in ptxases:
        for path in paths:
            _assemble(ptxas, path, arch)


def _registers(report: str) -> int:
    return int(re.search(r"Used (\d+) registers", report).group(1))


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a", "sm_100a"])
def test_specialised_bodies_use_far_fewer_registers(kernel_ptx, specialised_ptx, arch):
    """A body with its plan's constants compiled in keeps no decode specs, record or encoding
    in registers, and its format / parameter branches fold away: fewer registers than the
    generic kernel of the same body, and at most 96 (the generic window bodies use 253-255)."""
    ptxases = _ptxases(arch)
    if not ptxases:
        pytest.skip(f"no ptxas knows {arch}")
    generic = {}
    for name, sm, path in kernel_ptx:
        if sm == arch:
            name = name.split(".")[0]
            generic[name] = max(generic.get(name, 0), _registers(_assemble(ptxases[-1], path, arch)))
    for name, sm, path in specialised_ptx:
        if sm == arch:
            body = name.rsplit("_", 1)[0]
            used = _registers(_assemble(ptxases[-1], path, arch))
            assert used <= 96 and used < generic[body], (name, used, generic[body])


def _sass(path, arch) -> str:
    cuobjdump = _tool("cuobjdump")
    if not cuobjdump or not _ptxases(arch):
        pytest.skip("no ptxas / cuobjdump here (pip install nvidia-cuda-nvcc)")
    _assemble(_ptxases(arch)[-1], path, arch)
    r = subprocess.run([cuobjdump[0], "-sass", str(path) + ".cubin"], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_fixed_point_kernels_have_no_fused_multiply_add(kernel_ptx, specialised_ptx):
    """No fma.rn in the PTX of a fixed-point body (or the selection, or a kernel of device
    operands: copies, checks, quantization, binary32 add and multiply), and no FFMA / DFMA /
    HFMA2 in its SASS (sm_90a): the exact int64 rules alone; the binary32 FFMA of promotion
    (``fma_row``) is the one fused operation outside the IEEE chains."""
    for name, sm, path in kernel_ptx + specialised_ptx:
        if name.split(".")[0].rsplit("_", 1)[0] in IEEE or name.split(".")[0] in IEEE:
            continue
        if name.split(".")[0] == "fma_row":
            assert re.findall(r"fma\.rn\.(f\d+)", path.read_text()) == ["f32"], path.name
            continue
        assert "fma.rn" not in path.read_text(), path.name
        if sm == "sm_90a" and name.split(".")[0] in DEVICE_OPERANDS:
            continue        # SASS: ptxas expands an IEEE division (div.rn, a quantization's quotient) with FFMA
        if sm == "sm_90a":
            # HFMA2.MMA Rd, -RZ, RZ, c, c is how ptxas moves a constant into a register (-0 * 0 + c),
            # not arithmetic on data: it is left out
            sass = re.sub(r"HFMA2(\.MMA)? R\d+, -RZ, RZ, ", "", _sass(path, sm))
            assert not re.search(r"\b(FFMA|DFMA|HFMA2)\b", sass), path.name


def test_ieee_chains_have_exactly_the_fused_multiply_adds_of_their_rule(kernel_ptx):
    """The FMA chains: one fma.rn per product in D's precision (one in the loop over K), and
    one FFMA / DFMA in the SASS; the multiply-then-add chains and FTZ mul-add: none (each
    product rounded, then each sum)."""
    for name, sm, path in kernel_ptx:
        body = name.split(".")[0]
        if body not in IEEE:
            continue
        ptx = path.read_text()
        fmas = re.findall(r"fma\.rn\.(f\d+)", ptx)
        want = IEEE[body]
        assert fmas == ([want] if want else []), (path.name, fmas)
        if sm == "sm_90a":
            sass = _sass(path, sm)
            assert len(re.findall(r"\bFFMA\b", sass)) == (want == "f32"), path.name
            assert len(re.findall(r"\bDFMA\b", sass)) == (want == "f64"), path.name


def _mul_add(x, y, z, out):
    out[0] = x * y + z


def test_ieee_multiply_then_add_stays_two_roundings():
    """NVVM contracts ``x * y + z`` into one ``fma.rn`` unless told ``-fma=0``: numba-cuda's
    own options contract it, :func:`target.compile_ptx` does not (IEEE chains round twice)."""
    sig = (numba.float64, numba.float64, numba.float64, numba.float64[::1])
    ours = target.compile_ptx(_mul_add, sig, "sm_90a")
    assert "fma.rn" not in ours and "mul.rn.f64" in ours and "add.rn.f64" in ours
    theirs, _ = cuda.compile_ptx(_mul_add, sig, cc=(9, 0))
    assert "fma.rn.f64" in theirs


def _intrinsics(x, y, i, out, bits):
    out[0] = primitives._ftrunc(x)
    out[1] = primitives._fma(x, y, x)
    out[2] = primitives._bitcast(i)
    bits[0] = primitives._bitlen(i)
    bits[1] = primitives._f32_word(y)
    bits[2] = primitives._bitcast(x)


def test_target_neutral_intrinsics_compile_for_cuda():
    """The CPU intrinsics of the primitives, typed by numba-cuda through their CUDA twins:
    ``_ftrunc`` is ``cvt.rzi`` (NVVM has no ``llvm.trunc.f64``), ``_bitlen`` a ``clz``, an
    explicit ``_fma`` stays one ``fma.rn``."""
    sig = (numba.float64, numba.float64, numba.int64, numba.float64[::1], numba.int64[::1])
    ptx = target.compile_ptx(_intrinsics, sig, "sm_80")
    for op in ("cvt.rzi.f64.f64", "fma.rn.f64", "clz.b64", "cvt.rn.f32.f64"):
        assert op in ptx, op


def test_a_foreign_cpu_intrinsic_is_still_refused_by_numba_cuda():
    """Only the target-neutral intrinsics get a CUDA twin: numba's ``leading_zeros`` (whose
    place ``_ctlz`` took) stays untyped for CUDA."""
    from numba.cpython.unsafe.numbers import leading_zeros

    def kernel(i, out):
        out[0] = leading_zeros(i)

    with pytest.raises(Exception, match="leading_zeros|Untyped global"):
        target.compile_ptx(kernel, (numba.int64, numba.int64[::1]), "sm_80")
