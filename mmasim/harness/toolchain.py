"""Finding NVIDIA's compiler and compiling harness sources in batches, cached by content hash.

``nvcc`` is looked for in this order: the environment variable ``MMASIM_NVCC`` (a path), the
PyPI wheel ``nvidia-cuda-nvcc`` (``nvidia-cuda-nvcc-cu12`` for CUDA 12) installed next to the
running Python, then ``PATH``.  Volta's ``sm_70`` is gone from CUDA 13, so a target is compiled
with the first toolchain found that knows it (``MMASIM_NVCC_CU12`` names a CUDA 12 ``nvcc``
explicitly).  Compiled objects are cached under ``$MMASIM_HARNESS_CACHE`` (default
``~/.cache/mmasim-harness``) by the SHA-256 of the source, the target, the flags and the
compiler's version, so an unchanged batch is not compiled twice.
"""
from __future__ import annotations

import functools
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sysconfig
import uuid

import attrs

from mmasim.errors import ToolchainError


@attrs.frozen
class Nvcc:
    path: str
    version: str          # "13.0" ...
    origin: str           # "MMASIM_NVCC", "pip nvidia-cuda-nvcc", "PATH", ...
    targets: tuple        # compute capabilities it knows: ("75", "80", ...)

    def knows(self, target: str) -> bool:
        return _cc(target) in self.targets


def _cc(target: str) -> str:
    """``sm_90a`` -> ``90``."""
    return target.split("_", 1)[1].rstrip("af")


def _probe(path: str, origin: str):
    if not path or not os.path.isfile(path) or not os.access(path, os.X_OK):
        return None
    env = _env_for(path)
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60, env=env).stdout
        arch = subprocess.run([path, "--list-gpu-arch"], capture_output=True, text=True, timeout=60, env=env).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    ver = ""
    for tok in out.replace(",", " ").split():
        if tok.startswith("V") and tok[1:2].isdigit():
            ver = ".".join(tok[1:].split(".")[:2])
    targets = tuple(sorted({a.split("_", 1)[1] for a in arch.split() if a.startswith("compute_")}))
    return Nvcc(path=str(path), version=ver, origin=origin, targets=targets)


def _env_for(path: str) -> dict:
    """The environment for a wheel's nvcc: its ``bin`` (ptxas, cicc live beside it) on PATH."""
    env = dict(os.environ)
    env["PATH"] = str(pathlib.Path(path).parent) + os.pathsep + env.get("PATH", "")
    return env


def _wheel_candidates():
    roots = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    for root in roots:
        base = pathlib.Path(root) / "nvidia"
        # nvidia-cuda-nvcc (CUDA 13: nvidia/cu13/bin/nvcc) and the -cu12 wheel (nvidia/cuda_nvcc/bin/nvcc)
        for rel, origin in (("cu13/bin/nvcc", "pip nvidia-cuda-nvcc"), ("cuda_nvcc/bin/nvcc", "pip nvidia-cuda-nvcc-cu12")):
            p = base / rel
            if p.exists():
                yield str(p), origin
        if base.is_dir():
            for p in sorted(base.glob("*/bin/nvcc")):
                yield str(p), "pip " + p.parent.parent.name


@functools.lru_cache(maxsize=None)
def compilers() -> tuple:
    """Every nvcc found, in the order of preference."""
    seen, found = set(), []
    cands = [(os.environ.get("MMASIM_NVCC", ""), "MMASIM_NVCC"),
             (os.environ.get("MMASIM_NVCC_CU12", ""), "MMASIM_NVCC_CU12")]
    cands += list(_wheel_candidates())
    cands.append((shutil.which("nvcc") or "", "PATH"))
    for path, origin in cands:
        if not path:
            continue
        real = os.path.realpath(path)
        if real in seen:
            continue
        seen.add(real)
        n = _probe(path, origin)
        if n is not None:
            found.append(n)
    return tuple(found)


def find_nvcc(target: str | None = None) -> Nvcc:
    """The preferred nvcc (that knows ``target``, where given); :class:`ToolchainError` if none."""
    found = compilers()
    if not found:
        raise ToolchainError("no nvcc found: set MMASIM_NVCC, pip install nvidia-cuda-nvcc, or put nvcc on PATH")
    if target is None:
        return found[0]
    for n in found:
        if n.knows(target):
            return n
    have = ", ".join(f"{n.path} (CUDA {n.version})" for n in found)
    hint = " (CUDA 13 dropped sm_70: pip install nvidia-cuda-nvcc-cu12)" if _cc(target) == "70" else ""
    raise ToolchainError(f"no nvcc found that knows {target}{hint}; found {have}")


#: targets no CUDA 13 nvcc knows, assembled instead by retargeting PTX: nvcc (any) writes the
#: PTX for ``compute_75``, its ``.version`` / ``.target`` lines are rewritten and a CUDA 12
#: ``ptxas`` (pip ``nvidia-cuda-nvcc-cu12`` ships ptxas without nvcc) assembles it for the target.
RETARGET = {"sm_70": ("compute_75", "sm_75", "7.0")}


@functools.lru_cache(maxsize=None)
def find_ptxas(target: str):
    """A ``ptxas`` that assembles for ``target`` (``MMASIM_PTXAS``, a CUDA 12 wheel, beside an nvcc)."""
    cands = [os.environ.get("MMASIM_PTXAS", "")]
    for root in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        cands += [str(p) for p in sorted((pathlib.Path(root) / "nvidia").glob("*/bin/ptxas"))]
    cands += [str(pathlib.Path(n.path).parent / "ptxas") for n in compilers()]
    for path in cands:
        if not path or not os.path.isfile(path):
            continue
        try:
            r = subprocess.run([path, f"-arch={target}", "--version"], capture_output=True, text=True, timeout=60)
            help_ = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        if r.returncode == 0 and target in help_:
            return path
    return None


def _scratch(path: pathlib.Path, suffix: str) -> pathlib.Path:
    """A file name beside ``path`` that no other process uses: concurrent compiles of the same
    cache entry (pytest-xdist workers, two tools) each write their own files, and the product
    appears by an atomic rename (the last of identical products wins)."""
    return path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}{suffix}")


def _retarget_compile(source: str, target: str, product: pathlib.Path, d: pathlib.Path, key: str):
    compute, old, version = RETARGET[target]
    nvcc = find_nvcc(old)
    ptxas = find_ptxas(target)
    if ptxas is None:
        raise ToolchainError(f"no nvcc and no ptxas found that know {target} (CUDA 13 dropped it): "
                             "pip install nvidia-cuda-nvcc-cu12 (its ptxas) or set MMASIM_PTXAS")
    src, ptx = _scratch(d / key, ".cu"), _scratch(d / key, ".ptx")
    tmp = _scratch(product, ".tmp")
    src.write_text(source)
    r = subprocess.run([nvcc.path, f"-arch={compute}", "-std=c++17", "-ptx", "-o", str(ptx), str(src)],
                       capture_output=True, text=True, env=_env_for(nvcc.path))
    if r.returncode != 0:
        src.unlink(missing_ok=True)
        raise ToolchainError(f"nvcc -ptx ({compute}, for {target}) failed (exit {r.returncode}):\n{r.stderr.strip()}")
    text = ptx.read_text()
    text = re.sub(r"^\.version .*$", f".version {version}", text, count=1, flags=re.M)
    text = re.sub(rf"^\.target {old}\b", f".target {target}", text, count=1, flags=re.M)
    ptx.write_text(text)
    r = subprocess.run([ptxas, f"-arch={target}", "-O0", "-o", str(tmp), str(ptx)],
                       capture_output=True, text=True)
    src.unlink(missing_ok=True)
    ptx.unlink(missing_ok=True)
    if r.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise ToolchainError(f"ptxas {target} failed (exit {r.returncode}):\n{r.stderr.strip()}")
    os.replace(tmp, product)


def cache_dir() -> pathlib.Path:
    """The harness cache: ``$MMASIM_HARNESS_CACHE``, default ``~/.cache/mmasim-harness``."""
    root = os.environ.get("MMASIM_HARNESS_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "mmasim-harness")
    return pathlib.Path(root)


def cache_key(*parts) -> str:
    """The SHA-256 (hex) of ``parts`` (strings), each followed by a NUL: the content hash every
    cached product of the harness (nvcc, hipcc, llvm-mc, clang) is stored under."""
    h = hashlib.sha256()
    for part in parts:
        h.update(str(part).encode())
        h.update(b"\0")
    return h.hexdigest()


def cache_path(key: str, suffix: str) -> pathlib.Path:
    """Where the product of ``key`` (:func:`cache_key`) lives: ``cache_dir()/key[:2]/key+suffix``
    (the folder is not created here)."""
    return cache_dir() / key[:2] / (key + suffix)


def _key(source: str, target: str, flags, nvcc: Nvcc) -> str:
    return cache_key(source, target, " ".join(flags), nvcc.version, nvcc.path)


def arch_flag(target: str) -> list:
    """``-gencode`` for SASS of ``target`` (``sm_90a`` -> ``compute_90a`` / ``sm_90a``: the
    arch-specific features, ``wgmma``, ``tcgen05``, ``kind::f8f6f4``, need the ``a`` PTX target)."""
    return ["-gencode", f"arch=compute_{target[3:]},code={target}"]


def compile_many(jobs, workers: int | None = None) -> list:
    """Compile several ``(source, target, options)`` jobs (options: keywords of
    :func:`compile_source`) in parallel, one nvcc process per CPU; returns, per job, the product's
    path or the :class:`ToolchainError` it raised."""
    from concurrent.futures import ThreadPoolExecutor

    def one(job):
        source, target, options = job
        try:
            return compile_source(source, target, **options)
        except ToolchainError as e:
            return e

    jobs = list(jobs)
    workers = workers or max(1, min(len(jobs), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, jobs))


def compile_source(source: str, target: str, *, link: bool = False, device_only: bool = False, flags=(),
                   out: str | os.PathLike | None = None, cache: bool = True) -> pathlib.Path:
    """Compile CUDA ``source`` for ``target``: an object (``-c``), with ``device_only`` a cubin
    (``-cubin``: the device code alone, faster; what the compile checks use), or with ``link``
    an executable.

    Returns the path of the product (in the cache, or ``out`` when given: copied there).
    Raises :class:`ToolchainError` with the compiler's messages when it fails.  A target of
    :data:`RETARGET` that no nvcc knows is assembled by retargeting PTX (device code only: an
    object, no executable).
    """
    try:
        nvcc = find_nvcc(target)
    except ToolchainError:
        if target not in RETARGET or link:
            raise
        key = _key(source, target, list(flags) + ["retarget"], find_nvcc(RETARGET[target][1]))
        product = cache_path(key, ".cubin")
        if not (cache and product.exists()):
            product.parent.mkdir(parents=True, exist_ok=True)
            _retarget_compile(source, target, product, product.parent, key)
        return product
    flags = list(flags)
    mode = "exe" if link else "cubin" if device_only else "obj"
    key = _key(source, target, flags + [mode], nvcc)
    product = cache_path(key, {"exe": ".bin", "cubin": ".cubin", "obj": ".o"}[mode])
    if not (cache and product.exists()):
        product.parent.mkdir(parents=True, exist_ok=True)
        src, tmp = _scratch(product.with_suffix(""), ".cu"), _scratch(product, ".tmp")
        src.write_text(source)
        cmd = [nvcc.path, *arch_flag(target), "-std=c++17", *flags]
        # a device-only check does not need optimised code: cicc -O0 passes the inline PTX through
        # unchanged and ptxas -O0 still parses and checks every instruction for the target
        cmd += {"exe": [], "cubin": ["-cubin", "-Xcicc", "-O0", "-Xptxas", "-O0"], "obj": ["-c"]}[mode]
        cmd += ["-o", str(tmp), str(src)]
        r = subprocess.run(cmd, capture_output=True, text=True, env=_env_for(nvcc.path))
        src.unlink(missing_ok=True)
        if r.returncode != 0:
            tmp.unlink(missing_ok=True)
            raise ToolchainError(f"nvcc {target} failed (exit {r.returncode}):\n{r.stderr.strip()}")
        os.replace(tmp, product)
    if out is not None:
        out = pathlib.Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(product, out)
        out.chmod(0o755 if link else 0o644)
        return out
    return product


__all__ = ["Nvcc", "ToolchainError", "compilers", "find_nvcc", "find_ptxas", "cache_dir", "cache_key", "cache_path",
           "compile_source",
           "compile_many", "arch_flag"]
