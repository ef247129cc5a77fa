"""Run Khattak & Mikaitis's MATLAB tensor-core and matrix-core models in GNU Octave and freeze
their outputs, where they agree with mmasim, as peer vector files.

    python tools/peer/khattak_octave.py --km-repo PATH --cpfloat-repo PATH [--out vectors/peer]
        [--cases 512] [--seed 20261201] [--only SUBSTRING] [--list] [--report FILE]
        [--hardware-check N] [--work DIR]

Source: F. A. Khattak and M. Mikaitis, "Accurate Models of NVIDIA Tensor Cores", ACM TACO,
doi 10.1145/3830409 (arXiv 2512.07004); models in north-numerical-computing/MATLAB-tensor-core
(BSD-2-Clause) at ``KM_COMMIT``, run with CPFloat (north-numerical-computing/cpfloat,
LGPL-2.1) at ``CPFLOAT_COMMIT``.  ``--km-repo`` and ``--cpfloat-repo`` are clones or bare git
directories; neither project's code is copied into this repository: the tool extracts the
models with ``git archive`` into a temporary directory, builds CPFloat's Octave MEX there with
``mkoctfile`` (``mex/cpfloat_compile.m``, without PCG: no stochastic rounding is used), and
runs ``tools/peer/khattak/km_run.m``, which calls a model on each case exactly as their
``model_validation/Validate_TC_models.m`` does (a row vector a, a column vector b, scalar c,
all doubles).  Needs GNU Octave with ``mkoctfile`` (Debian: ``octave liboctave-dev``).

The inputs are fresh words from tools/peer/khattak_cases.py (numpy only: random, wide,
cancelling, underflowing, special).  Each model's output value is written as a D word of the
instruction and compared with mmasim (MMASIM_BACKEND=numpy).  Only the cases where both agree
are frozen (``vectors/peer/<arch>/khattak-octave.<instruction>.npz``); every other case is
written to the report with its inputs and both answers.  Nothing here changes mmasim, and
mmasim's answer is never written into a file: the frozen D words are the model's.

Which datapath each model is (``JOBS``): V100TC -> Volta ``mma.sync.m8n8k4``; A100TC (also
A2TC, A30TC) -> Ampere ``mma.sync``; AdaTC (L40STC has the same parameters) -> Ada
``mma.sync``; H100TC (also H200TC) -> Hopper ``mma.sync`` f16 / bf16 / tf32 and ``wgmma``
(their fp8 f32 words were wgmma's: the fp8 model is wgmma's window); B200TC -> Blackwell
``mma.sync`` (their B200 words were all ``wmma`` / ``mma.sync``); RTXPRO6000TC (B200TC's
parameters) -> RTX Blackwell ``mma.sync``; MI100MC -> CDNA1, MI250MC (MI210MC's parameters:
one pairwise tree of 4 for f16 and bf16) -> CDNA2 f16 and ``bf16_1k``; MI300XMC -> CDNA3.

Left out, and why (docs/peer-vectors.md):

- **fp8 with an f16 D.** Their Ada / Hopper fp8 models narrow the result with ``neab = -10``
  subtracted from the D format's fraction bits: for f16 that leaves 0 fraction bits, so every
  result is a power of two.  B200TC / RTXPRO6000TC overwrite an f16 D with f32 for fp8.  No
  fp8 job has an f16 D.
- **bf16 subnormal inputs.** CPFloat's ``bfloat16`` preset flushes them (``subnormal``
  defaults to round-to-normal-or-zero for bf16) before the model runs: never generated.
- **B200TCRN** is B200TC with round-to-nearest final rounding, a what-if used in their error
  experiments (``experiments/matmul_test.m``), not a GPU's datapath: mmasim has none like it.
- **Cases a model fails on** (an Octave error), e.g. MI300 on a block with no non-zero
  product: left out, counted per message in the report and the file's notes.
- **The sign of a zero result on NVIDIA.** Their models return -0 where the exact sum is a
  negative value rounded to zero (an f16 D); the rule mmasim follows is +0 (docs/datapaths.md
  §2), and their validation compared values, so it could not see a sign.  A zero value of an
  NVIDIA model is frozen as +0 (counted in the notes).  On AMD the sign is kept.

Worked around (``tools/peer/khattak/compat``, on Octave's path before the models): Octave 7 has
no ``fma`` (a correctly rounded single-precision stand-in, used by MI250MC) and no ``string``
(a cell array of rows, used by MI100MC's exact accumulation), and its ``bitshift`` rejects
empty operands and takes an integer shift count modulo the width (``bitshift(uint64(2^24), -140)``
is 4096 in Octave 7, 0 in MATLAB; MI300MC's late partial sum shifts by up to 532): a shadow
gives MATLAB's answers (the empty array; 0 once the count reaches the width).  ``MI300XMC.m`` calls
``MI300MC.m``, which is deleted at ``KM_COMMIT``: it is taken from ``MI300_COMMIT``, its last
version before the deletion.

What the comparison finds beyond these classes (docs/peer-vectors.md): an overflowing sum comes
back from the models as a finite double outside the D format, and CDNA2 / CDNA3 products past
2^128 give +inf whatever their sign; those cases are reported, not frozen.

``--work DIR`` keeps the build, the run files and every run's comparison (``rows.json``): the
report then covers all jobs run with that directory (``--missing`` runs only the jobs whose file
is not written yet).  ``--hardware-check N`` also runs each model on the first N cases of each of their measured sets
(vectors/hardware/*/khattak-mikaitis.*) and reports how many words it reproduces: where the
model and mmasim disagree, those words decide.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from typing import NamedTuple

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(ROOT), str(HERE), str(ROOT / "tools" / "hardware")]
os.environ.setdefault("MMASIM_BACKEND", "numpy")
import khattak_cases as kc  # noqa: E402
import make_vectors_khattak as km_hw  # noqa: E402  (the pinned repository and commit)
import mmasim  # noqa: E402  (only to compare: nothing it computes is written into a file)
from mmasim.vectors import files as vectors  # noqa: E402

KM_REPOSITORY, KM_COMMIT = km_hw.REPOSITORY, km_hw.COMMIT  # the commit their measured words come from
MI300_COMMIT = "b4bf135325e3d6ac811db245dd44650383eb0dd3"   # last MI300MC.m, deleted by d12a5b3
CPFLOAT_REPOSITORY = "north-numerical-computing/cpfloat"
CPFLOAT_COMMIT = "3583976741eb4d0e99b57d6d157ab6a7bbdb037f"
CPFLOAT_VERSION = "0.6.0"
GENERATOR = "tools/peer/khattak_octave.py"
PREFIX = "khattak-octave."
CITATION = km_hw.CITATION.replace("; data: ", "; models: ").replace(" model_validation/ at ", " models/ at ")
LICENCE = ("MATLAB-tensor-core: Copyright (c) 2025, Faizan A. Khattak and Mantas Mikaitis. All rights "
           "reserved. BSD 2-Clause License: redistributions must retain this notice, the two conditions "
           "and the disclaimer; THE SOFTWARE IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS \"AS IS\" "
           "AND ANY EXPRESS OR IMPLIED WARRANTIES ARE DISCLAIMED (full text: LICENCE of the repository). "
           "No code of it is in this file: only the outputs of its models.")
COMPAT = ("Octave 7 stand-ins from tools/peer/khattak/compat: fma (single, correctly rounded), "
          "string (cell array of rows), bitshift (empty operands; 0 for a count reaching the width, as in MATLAB)")


class Job(NamedTuple):
    arch: str            # the name written into the file (mmasim resolves it)
    folder: str          # vectors/peer/<folder>
    instruction: str
    model: str           # the MATLAB function
    form: int            # km_run.m's call form: 1 V100TC, 2 NVIDIA, 3 AMD
    informat: str        # the model's input-format argument
    outformat: str       # the model's output-format argument
    vendor: str          # "nvidia" or "amd" (the zero-sign rule)
    compare_only: str = ""   # why the job is compared and reported but never frozen


def _nv(arch, folder, model, ins, informat, outformat):
    return Job(arch, folder, ins, model, 1 if model == "V100TC" else 2, informat, outformat, "nvidia")


def _mma_sync(arch, folder, model):
    """The f16 / bf16 / tf32 mma.sync shapes every sm_80+ model covers."""
    return [_nv(arch, folder, model, f"mma.sync.m16n8k{k}.{d}.f16.f16", "fp16", "fp" + d[1:])
            for k in (8, 16) for d in ("f32", "f16")] + \
           [_nv(arch, folder, model, f"mma.sync.m16n8k{k}.f32.bf16.bf16", "bf16", "fp32") for k in (8, 16)] + \
           [_nv(arch, folder, model, f"mma.sync.m16n8k{k}.f32.tf32.tf32", "tf32", "fp32") for k in (4, 8)]


def _fp8(arch, folder, model, shapes, compare_only=""):
    return [_nv(arch, folder, model, f"{s}.f32.{t}.{t}", t, "fp32")._replace(compare_only=compare_only)
            for s in shapes for t in ("e4m3", "e5m2")]


B200_FP8 = ("B200TC's fp8 model (one window of 32 products, F = 25, RZ) does not reproduce all of their "
            "own B200 mma.sync e4m3 / e5m2 f32 words (--hardware-check: their measured sets, below), which mmasim "
            "reproduces all of (ptxas's two-step lowering, docs/datapaths.md section 3): the hardware decides, "
            "so nothing is frozen")


def _amd(arch, folder, model, names):
    return [Job(arch, folder, ins, model, 3, fmt, "fp32", "amd") for ins, fmt in names]


JOBS = (
    [_nv("V100", "volta", "V100TC", "mma.sync.m8n8k4.f32.f16.f16", "fp16", "fp32"),
     _nv("V100", "volta", "V100TC", "mma.sync.m8n8k4.f16.f16.f16", "fp16", "fp16")]
    + _mma_sync("A100", "ampere", "A100TC")
    + _mma_sync("Ada", "ada_lovelace", "AdaTC")
    + _fp8("Ada", "ada_lovelace", "AdaTC", ("mma.sync.m16n8k16", "mma.sync.m16n8k32"))
    + _mma_sync("H100", "hopper", "H100TC")
    + [_nv("H100", "hopper", "H100TC", "wgmma.mma_async.k16.f32.f16.f16", "fp16", "fp32"),
       _nv("H100", "hopper", "H100TC", "wgmma.mma_async.k16.f16.f16.f16", "fp16", "fp16"),
       _nv("H100", "hopper", "H100TC", "wgmma.mma_async.k16.f32.bf16.bf16", "bf16", "fp32"),
       _nv("H100", "hopper", "H100TC", "wgmma.mma_async.k8.f32.tf32.tf32", "tf32", "fp32")]
    + _fp8("H100", "hopper", "H100TC", ("wgmma.mma_async.k32",))
    + _mma_sync("B200", "blackwell", "B200TC")
    + _fp8("B200", "blackwell", "B200TC", ("mma.sync.m16n8k32",), compare_only=B200_FP8)
    + _mma_sync("RTX PRO 6000", "rtx_blackwell", "RTXPRO6000TC")
    + _fp8("RTX PRO 6000", "rtx_blackwell", "RTXPRO6000TC",
           ("mma.sync.m16n8k16", "mma.sync.m16n8k32", "mma.sync.kind::f8f6f4.m16n8k32"))
    + _amd("MI100", "cdna1", "MI100MC", [(f"f32_{s}f16", "fp16") for s in ("4x4x4", "16x16x4", "32x32x4", "32x32x8", "16x16x16")]
           + [(f"f32_{s}bf16", "bf16") for s in ("4x4x2", "16x16x2", "32x32x2", "32x32x4", "16x16x8")])
    + _amd("MI250X", "cdna2", "MI250MC", [(f"f32_{s}f16", "fp16") for s in ("4x4x4", "16x16x4", "32x32x4", "32x32x8", "16x16x16")]
           + [(f"f32_{s}bf16_1k", "bf16") for s in ("4x4x4", "16x16x4", "32x32x4", "32x32x8", "16x16x16")])
    + _amd("MI300X", "cdna3", "MI300XMC", [
        (f"f32_{s}_{t}", f) for t, f in (("f16", "fp16"), ("bf16", "bf16"))
        for s in ("4x4x4_16b", "16x16x4_4b", "32x32x4_2b", "32x32x8", "16x16x16")] + [
        ("f32_32x32x4_xf32", "tf32"), ("f32_16x16x8_xf32", "tf32"),
        ("f32_32x32x16_fp8_fp8", "fp8-e4m3"), ("f32_16x16x32_fp8_fp8", "fp8-e4m3"),
        ("f32_32x32x16_bf8_bf8", "fp8-e5m2"), ("f32_16x16x32_bf8_bf8", "fp8-e5m2")])
)

#: left out on purpose (the reasons are in the docstring and docs/peer-vectors.md)
LEFT_OUT = [
    "fp8 (e4m3 / e5m2) with an f16 D, every model: neab = -10 leaves an f16 D 0 fraction bits (Ada, "
    "Hopper), and B200TC / RTXPRO6000TC compute an f16 D as f32",
    "bf16 subnormal inputs: CPFloat's bfloat16 preset flushes them before the model runs",
    "B200TCRN: B200TC with round-to-nearest final rounding, a what-if of their error experiments, no GPU's datapath",
    "mixed e4m3 x e5m2 and the CDNA2 plain-bf16 (P = 2) instructions: the models take one input format and "
    "have no such variant",
]


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", text)


def job_path(out: pathlib.Path, job: Job) -> pathlib.Path:
    return out / job.folder / f"{PREFIX}{slug(job.instruction)}.npz"


def job_seed(base: int, job: Job) -> int:
    return (base + int(hashlib.sha256(f"{job.arch}|{job.instruction}".encode()).hexdigest()[:8], 16)) % 2 ** 32


def call_text(job: Job) -> str:
    tail = {1: f"'{job.outformat}'", 2: f"'{job.informat}', '{job.outformat}'", 3: f"'{job.informat}'"}[job.form]
    return f"{job.model}(1, a, b, 1, c, {tail})"


# ------------------------------------------------------------------ Octave, CPFloat, the models
def _git_dir(repo: pathlib.Path) -> pathlib.Path:
    return repo if (repo / "HEAD").is_file() and (repo / "objects").is_dir() else repo / ".git"


def _extract(repo: pathlib.Path, commit: str, dest: pathlib.Path, *paths: str) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    arc = subprocess.run(["git", "--git-dir", str(_git_dir(repo)), "archive", commit, *paths],
                         capture_output=True, check=False)
    if arc.returncode:
        raise SystemExit(f"{repo}: git archive {commit[:7]} failed: {arc.stderr.decode().strip()}")
    subprocess.run(["tar", "x", "-C", str(dest)], input=arc.stdout, check=True)


def octave_version() -> str:
    try:
        out = subprocess.run(["octave", "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise SystemExit(f"GNU Octave is needed (Debian: apt-get install octave liboctave-dev): {e}")
    return re.search(r"version (\S+)", out).group(1)


def _octave(code: str, cwd: pathlib.Path, log: pathlib.Path) -> None:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with open(log, "ab") as f:
        r = subprocess.run(["octave", "--no-gui", "--norc", "--no-window-system", "-q", "--eval", code],
                           cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=f)
    if r.returncode:
        raise SystemExit(f"octave failed (exit {r.returncode}); see {log}")


def prepare(work: pathlib.Path, km_repo: pathlib.Path, cpfloat_repo: pathlib.Path) -> list:
    """Extract the models and CPFloat into ``work``, build the MEX; the Octave path to use."""
    km, cpf = work / "km", work / "cpfloat"
    if not (km / "models" / "MI300MC.m").is_file():
        _extract(km_repo, KM_COMMIT, km, "models", "LICENCE")
        _extract(km_repo, MI300_COMMIT, work / "mi300", "models/MI300MC.m")
        shutil.copy(work / "mi300" / "models" / "MI300MC.m", km / "models" / "MI300MC.m")
    if not (cpf / "mex" / "cpfloat.mex").is_file():
        _extract(cpfloat_repo, CPFLOAT_COMMIT, cpf, "src", "mex", "LICENSE.md")
        _octave(f"retval = cpfloat_compile('cpfloatdir', '{cpf / 'src'}');", cpf / "mex", work / "build.log")
        if not (cpf / "mex" / "cpfloat.mex").is_file():
            raise SystemExit(f"CPFloat's MEX did not build; see {work / 'build.log'}")
    return [cpf / "mex", km / "models", km / "models" / "tools", HERE / "khattak", HERE / "khattak" / "compat"]


def run_model(path: list, work: pathlib.Path, job: Job, a, b, c):
    """The model's values (float64, sign kept) and a per-case error message ('' if none)."""
    n, k = a.shape
    tag = slug(f"{job.arch}.{job.instruction}")
    inp, out = work / f"{tag}.in", work / f"{tag}.out"
    np.concatenate([a.T, b.T, c[None, :]]).T.astype("<f8").tofile(inp)
    adds = "".join(f"addpath('{p}');" for p in path)
    _octave(f"warning('off', 'all'); {adds} km_run('{job.model}', '{job.informat}', '{job.outformat}', "
            f"{job.form}, {k}, {n}, '{inp}', '{out}');", work, work / "octave.log")
    res = np.fromfile(out, dtype="<f8").reshape(n, 2)
    errors = [""] * n
    for line in pathlib.Path(f"{out}.err").read_text().splitlines():
        i, msg = line.split("\t", 1)
        errors[int(i) - 1] = msg.strip() or "error"
    return res[:, 0], errors


# ------------------------------------------------------------------ words, comparison
def model_of(job: Job):
    return mmasim.MMA(job.arch, job.instruction)


def d_words(job: Job, d_fmt: str, values: np.ndarray):
    """(words, why-not per case, count of -0 frozen as +0) of the model's values."""
    vals = values.copy()
    negzero = 0
    if job.vendor == "nvidia":
        z = vals == 0
        negzero = int(np.count_nonzero(z & np.signbit(vals)))
        vals[z] = 0.0
    words = np.zeros(len(vals), dtype=np.uint64)
    why = [""] * len(vals)
    for i, v in enumerate(vals):
        try:
            words[i] = kc.encode(d_fmt, [v])[0]
        except RuntimeError:
            why[i] = f"the model returned {v!r}, not an {d_fmt} value"
    return words, why, negzero


def same(m, got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Word equality, any NaN matching any NaN (the models return a NaN value, not a word)."""
    nan_g = np.isnan(kc.decode(m.d_format.name, got))
    nan_w = np.isnan(kc.decode(m.d_format.name, want))
    return (got == want) | (nan_g & nan_w)


def hexes(words) -> str:
    return "[" + " ".join(f"{int(w):x}" for w in words) + "]"


def do_job(job: Job, args, path, work, report: list) -> dict:
    m = model_of(job)
    a_fmt, c_fmt, d_fmt = m.a_format.name, m.c_format.name, m.d_format.name
    seed = job_seed(args.seed, job)
    gen = kc.Words(a_fmt, d_fmt, m.k, np.random.default_rng(seed))
    a, b, c, labels = gen.cases(args.cases)
    if a_fmt == "bf16" and kc.has_subnormal("bf16", np.concatenate([a, b], axis=1)).any():
        raise SystemExit("the generator produced a bf16 subnormal")
    vals, errors = run_model(path, work, job, kc.decode(a_fmt, a), kc.decode(a_fmt, b), kc.decode(c_fmt, c))
    words, why, negzero = d_words(job, d_fmt, vals)
    ours = np.asarray(m.dot(a, b, c), dtype=np.uint64)
    agree = same(m, ours, words)
    left = collections.Counter()
    keep = np.zeros(len(vals), dtype=bool)
    bad = []
    failed = []
    for i in range(len(vals)):
        if errors[i]:
            left[f"the model raised an error: {errors[i]}"] += 1
            failed.append(i)
        elif agree[i] and not why[i]:
            keep[i] = True
        else:
            bad.append(i)
    frozen = 0 if (job.compare_only or args.dry_run) else int(keep.sum())
    report.append({"job": job, "cases": len(vals), "agree": int(keep.sum()), "frozen": frozen, "left": dict(left),
                   "negzero": negzero, "disagree": [
                       {"label": str(labels[i]), "a": hexes(a[i]), "b": hexes(b[i]), "c": f"{int(c[i]):x}",
                        "model": why[i] or f"{int(words[i]):x}", "model_value": repr(float(vals[i])),
                        "mmasim": f"{int(ours[i]):x}"} for i in bad],
                   "errors": [{"label": str(labels[i]), "a": hexes(a[i]), "b": hexes(b[i]), "c": f"{int(c[i]):x}",
                               "error": errors[i], "mmasim": f"{int(ours[i]):x}"} for i in failed]})
    if job.compare_only:
        report[-1]["not_frozen"] = job.compare_only
    if not keep.any() or args.dry_run or job.compare_only:
        return report[-1]
    zero_text = ("A zero result is written +0 (the NVIDIA rule; the models give -0 where the exact sum is a "
                 f"negative value rounded to zero: {negzero} of the generated cases) and "
                 if job.vendor == "nvidia" else "")
    notes = (f"{int(keep.sum())} of {len(vals)} generated dot products ({a_fmt} inputs, {d_fmt} D): "
             f"Khattak & Mikaitis's {job.model} run in GNU Octave {args.octave} with CPFloat "
             f"{CPFLOAT_VERSION} as {call_text(job)}, each value written as a {d_fmt} word; only cases "
             f"where mmasim gives the same word are kept. Left out: {len(bad)} where it does not "
             f"(listed by the generator's report){''.join(f'; {v} where {k}' for k, v in left.items())}. "
             f"{zero_text}NaN results are compared as any NaN (the models return a value, not a NaN word). Never in "
             f"these files, by construction: fp8 with an f16 D, bf16 subnormal inputs (CPFloat's bf16 "
             f"preset flushes them). Generated by {GENERATOR} (tools/peer/khattak_cases.py).")
    provenance = {
        "source": "peer", "device": "none",
        "tool": f"Khattak & Mikaitis MATLAB models in GNU Octave {args.octave} with CPFloat {CPFLOAT_VERSION}",
        "tool_version": f"{KM_REPOSITORY}@{KM_COMMIT} (MI300MC.m @{MI300_COMMIT}); "
                        f"{CPFLOAT_REPOSITORY}@{CPFLOAT_COMMIT}",
        "km_commit": KM_COMMIT, "cpfloat_commit": CPFLOAT_COMMIT, "octave_version": args.octave,
        "model": call_text(job), "compat": COMPAT, "date": args.date, "seed": seed,
        "generator": GENERATOR, "citation": CITATION + "; docs/peer-vectors.md", "licence": LICENCE,
    }
    if job.model == "MI300XMC":
        provenance["mi300_commit"] = MI300_COMMIT
    vectors.save(job_path(args.out, job), arch=job.arch, instruction=job.instruction, a=a[keep], b=b[keep],
                 c=c[keep], d=words[keep], labels=labels[keep], provenance=provenance, notes=notes,
                 nan_policy="any")
    return report[-1]


# ------------------------------------------------------------------ their measured sets
HW_MODELS = {"v100": ("V100TC", 1), "a100": ("A100TC", 2), "a2": ("A100TC", 2), "ada": ("AdaTC", 2),
             "l40s": ("L40STC", 2), "h100": ("H100TC", 2), "h200": ("H100TC", 2), "b200": ("B200TC", 2)}
KM_FMT = {"f16": "fp16", "bf16": "bf16", "tf32": "tf32", "e4m3": "e4m3", "e5m2": "e5m2", "f32": "fp32"}


def hardware_check(n: int, path, work) -> list:
    """Each of their measured sets through its model: how many words the model reproduces."""
    rows = []
    for f in sorted((ROOT / "vectors" / "hardware").rglob("khattak-mikaitis.*.npz")):
        vf = vectors.load(f)
        gpu = f.name.split(".")[1]
        model, form = HW_MODELS[gpu]
        m = mmasim.MMA(vf.arch, vf.instruction)
        job = Job(vf.arch, "", vf.instruction, model, form, KM_FMT[m.a_format.name],
                  KM_FMT[m.d_format.name], "nvidia")
        nz = int(vf.meta["provenance"].get("nonzero_k", vf.a.shape[1]))
        a, b, c, d = vf.a[:n, :nz], vf.b[:n, :nz], vf.c[:n], vf.d[:n]
        vals, errors = run_model(path, work, job, kc.decode(m.a_format.name, a),
                                 kc.decode(m.a_format.name, b), kc.decode(m.c_format.name, c))
        words, why, _ = d_words(job, m.d_format.name, vals)
        ok = same(m, words, d) & np.array([not e and not w for e, w in zip(errors, why)])
        first = int(np.flatnonzero(~ok)[0]) if (~ok).any() else None
        rows.append({"file": f.name, "model": call_text(job), "cases": len(d), "match": int(ok.sum()),
                     "first": None if first is None else {
                         "a": hexes(a[first]), "b": hexes(b[first]), "c": f"{int(c[first]):x}",
                         "hardware": f"{int(d[first]):x}", "model": why[first] or f"{int(words[first]):x}"}})
        print(f"  {f.name}: {ok.sum()}/{len(d)}", flush=True)
    return rows


def write_report(path: pathlib.Path, args, rows: list, hw: list) -> None:
    lines = [f"# Khattak & Mikaitis's models in GNU Octave {args.octave} against mmasim", "",
             f"Generated by `{GENERATOR}` (seed {args.seed}, {args.cases} cases per datapath, {args.date}); "
             f"models at {KM_COMMIT[:12]} (MI300MC.m at {MI300_COMMIT[:12]}), CPFloat {CPFLOAT_VERSION} at "
             f"{CPFLOAT_COMMIT[:12]}. What the classes mean and what decides them: docs/peer-vectors.md.", ""]
    total = collections.Counter()
    for r in rows:
        total["cases"] += r["cases"]
        total["frozen"] += r["frozen"]
        total["files"] += bool(r["frozen"])
        total["errors"] += sum(r["left"].values())
        for x in r["disagree"]:
            total["not frozen (compared only)" if r["job"].compare_only else
                  "range" if x["model"].startswith("the model returned") else "word"] += 1
    lines += [f"- {total['cases']:,} cases on {len(rows)} datapaths; {total['frozen']:,} frozen in "
              f"{total['files']} files.",
              f"- the model's value is not a D-format value (an overflowing sum returned as a finite double): "
              f"{total['range']:,}",
              f"- a different D word, on a frozen datapath: {total['word']:,}",
              f"- on the datapaths compared but not frozen: {total['not frozen (compared only)']:,}",
              f"- the model raised an error: {total['errors']:,}", "",
              "| arch | instruction | model | cases | agree | disagree | model error | frozen |",
              "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        j = r["job"]
        left = "; ".join(f"{v}: {k}" for k, v in r["left"].items()) or "-"
        lines.append(f"| {j.arch} | `{j.instruction}` | `{call_text(j)}` | {r['cases']} | {r['agree']} | "
                     f"{len(r['disagree'])} | {left} | {r['frozen']} |")
    lines += ["", "Never run (left out on purpose):", ""] + [f"- {x}" for x in LEFT_OUT]
    lines += [f"- {r['job'].arch} `{r['job'].instruction}`: compared, not frozen: {r['not_frozen']}"
              for r in rows if r.get("not_frozen")]
    for r in rows:
        if not r["disagree"]:
            continue
        j = r["job"]
        by = collections.Counter(x["label"] for x in r["disagree"])
        lines += ["", f"## {j.arch} `{j.instruction}`: {len(r['disagree'])} disagreements "
                  f"({', '.join(f'{k} {v}' for k, v in sorted(by.items()))})", "",
                  "| group | a | b | c | model | model value | mmasim |", "|---|---|---|---|---|---|---|"]
        for x in r["disagree"][:args.show]:
            lines.append(f"| {x['label']} | `{x['a']}` | `{x['b']}` | `{x['c']}` | `{x['model']}` | "
                         f"{x['model_value']} | `{x['mmasim']}` |")
    errs = [(r["job"], x) for r in rows for x in r.get("errors", [])]
    if errs:
        lines += ["", "## Cases the models failed on (left out)", "",
                  "| arch | instruction | group | a | b | c | error | mmasim |", "|---|---|---|---|---|---|---|---|"]
        lines += [f"| {j.arch} | `{j.instruction}` | {x['label']} | `{x['a']}` | `{x['b']}` | `{x['c']}` | "
                  f"{x['error']} | `{x['mmasim']}` |" for j, x in errs]
    if hw:
        lines += ["", "## Their measured sets through their models", "",
                  "| set | model | cases | model = hardware | first miss (a / b / c / hardware / model) |",
                  "|---|---|---|---|---|"]
        for h in hw:
            f = h["first"]
            miss = "-" if f is None else f"`{f['a']}` / `{f['b']}` / `{f['c']}` / `{f['hardware']}` / `{f['model']}`"
            lines.append(f"| {h['file']} | `{h['model']}` | {h['cases']} | {h['match']} | {miss} |")
    path.write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--km-repo", type=pathlib.Path, help=f"clone or bare git directory of {KM_REPOSITORY}")
    ap.add_argument("--cpfloat-repo", type=pathlib.Path, help=f"clone or bare git directory of {CPFLOAT_REPOSITORY}")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "vectors" / "peer")
    ap.add_argument("--cases", type=int, default=512)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--only", default="", help="run the jobs whose 'arch:instruction' contains this")
    ap.add_argument("--list", action="store_true", help="list the jobs and what is left out")
    ap.add_argument("--dry-run", action="store_true", help="compare and report, write no vector file")
    ap.add_argument("--missing", action="store_true", help="run only the jobs whose file is not there yet")
    ap.add_argument("--report", type=pathlib.Path, default=None, help="write the comparison as Markdown")
    ap.add_argument("--show", type=int, default=25, help="disagreeing cases listed per datapath")
    ap.add_argument("--hardware-check", type=int, default=0, metavar="N")
    ap.add_argument("--work", type=pathlib.Path, default=None, help="keep the build and run files here")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    args = ap.parse_args(argv)
    jobs = [j for j in JOBS if args.only in f"{j.arch}:{j.instruction}"]
    if args.list:
        for j in jobs:
            print(f"{j.arch:14} {j.instruction:44} {call_text(j)}")
        print("left out:\n  " + "\n  ".join(LEFT_OUT))
        return 0
    if not (args.km_repo and args.cpfloat_repo):
        ap.error("--km-repo and --cpfloat-repo are required")
    args.octave = octave_version()
    tmp = None if args.work else tempfile.TemporaryDirectory(prefix="km-octave-")
    work = args.work or pathlib.Path(tmp.name)
    work.mkdir(parents=True, exist_ok=True)
    path = prepare(work, args.km_repo, args.cpfloat_repo)
    if args.missing:
        jobs = [j for j in jobs if not j.compare_only and not job_path(args.out, j).is_file()]
    rows = []
    for j in jobs:
        r = do_job(j, args, path, work, rows)
        print(f"{j.arch:14} {j.instruction:44} agree {r['agree']:4}/{r['cases']} frozen {r['frozen']:4} disagree "
              f"{len(r['disagree']):4} left {sum(r['left'].values())}", flush=True)
    hw = hardware_check(args.hardware_check, path, work) if args.hardware_check else []
    if args.report:
        rows, hw = remember(work, rows, hw) if args.work else (rows, hw)
        write_report(args.report, args, rows, hw)
    return 0


def remember(work: pathlib.Path, rows: list, hw: list):
    """This run's rows merged into those kept in ``work`` by earlier runs (a job run again
    replaces its row); the report then covers every job run with that work directory."""
    store = work / "rows.json"
    old = json.loads(store.read_text()) if store.is_file() else {"rows": [], "hw": []}
    mine = {(r["job"].arch, r["job"].instruction) for r in rows}
    kept = [dict(r, job=Job(**r["job"])) for r in old["rows"] if (r["job"]["arch"], r["job"]["instruction"]) not in mine]
    merged = sorted(kept + rows, key=lambda r: JOBS.index(r["job"]) if r["job"] in JOBS else len(JOBS))
    hw = hw or old["hw"]
    store.write_text(json.dumps({"rows": [dict(r, job=r["job"]._asdict()) for r in merged], "hw": hw}))
    return merged, hw


if __name__ == "__main__":
    raise SystemExit(main())
