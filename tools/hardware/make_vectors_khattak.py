"""Write the words Khattak and Mikaitis measured on eight NVIDIA GPUs as vector files.

    python tools/hardware/make_vectors_khattak.py --repo PATH [--out vectors/hardware] [--check]

Source: F. A. Khattak and M. Mikaitis, "Accurate Models of NVIDIA Tensor Cores", ACM TACO
(doi 10.1145/3830409, arXiv 2512.07004); repository north-numerical-computing/MATLAB-tensor-core
(BSD-2-Clause), folder ``model_validation/`` at the commit below: 48 sets (GPU x input type x
f32 or f16 result) of 5,000 dot products each.  ``--repo`` is a clone or a bare git directory of
that repository; the files are read at ``COMMIT`` with ``git show``.

How the sets were made, from the repository's ``model_validation/CUDA/*.cu`` and
``Validate_TC_models.m``: each row of ``a_*.txt`` / ``b_*.txt`` holds the f32 words of the values
of one dot product's K elements (already representable in the input type); a kernel writes them
into row 0 of A and column 0 of B (everything else zero), C[0, 0] from ``c_*_fp32.txt`` (rounded
to f16 by ``__float2half`` for an f16 result), and ``d_*.txt`` holds D[0, 0] as 32 binary digits
(an f16 result through ``__half2float``).  fp16 / bf16 / tf32 ran through ``wmma`` (m16n16k16;
m16n16k8 for tf32), fp8 through inline ``mma.sync.m16n8k32``, except the H100 / H200 fp8 sets with
an f32 result: ``Validate_TC_models.m`` reads them with a zero C ("D = AB + D where D is zero for
fp8 with WGMMA"), and their words are those of wgmma's fp8 datapath, not of the mma.sync
lowering (docs/datapaths.md §3).  Which instruction each set exercised, from the SASS ptxas
emits (CUDA 13.5; docs/datapaths.md §3 and tests/test_fp8_mma_sync_lowering.py):

- ``wmma`` m16n16k16 f16 / bf16 on sm_80 and later: two HMMA.16816 (one per 8 columns), so one
  ``mma.sync.m16n8k16`` for D[0, 0]; the K elements past the file's are zero.
- ``wmma`` m16n16k8 tf32: HMMA.1684 twice per 8 columns: one ``mma.sync.m16n8k4`` holding the
  file's 4 elements, then a second step whose products are all zero.
- ``wmma`` on Volta: HMMA.884 steps, one ``mma.sync.m8n8k4`` holding the file's 4 elements, then
  steps whose products are all zero (no sm_70 disassembler installs here: not checked in SASS).

A step with only zero products returns its C unchanged (a representable C plus zeros, rounded,
is C), so each set is written as the one instruction that saw the products.  Nothing here calls
the simulator: the words are only converted (f32 words to the input type's container words,
exactly, and checked), padded with zeros to the instruction's K, and written with
``mmasim.vectors.files.save``.  ``--check`` regenerates in memory and compares with the committed files.
"""

from __future__ import annotations

import argparse
import pathlib
import subprocess
import sys

import ml_dtypes
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from mmasim.vectors import files as vectors  # noqa: E402  (the file format only)

COMMIT = "b12b5a700957655375a1b0c1d0c26e76065da015"
REPOSITORY = "north-numerical-computing/MATLAB-tensor-core"
GENERATOR = "tools/hardware/make_vectors_khattak.py"
CITATION = ("F. A. Khattak and M. Mikaitis, Accurate Models of NVIDIA Tensor Cores, ACM TACO, "
            "doi 10.1145/3830409 (arXiv 2512.07004); data: " + REPOSITORY + " model_validation/ at " + COMMIT)
LICENCE = ("Copyright (c) 2025, Faizan A. Khattak and Mantas Mikaitis. All rights reserved. BSD 2-Clause "
           "License: redistributions must retain this notice, the two conditions and the disclaimer; "
           "THIS DATA IS PROVIDED BY THE COPYRIGHT HOLDERS AND CONTRIBUTORS \"AS IS\" AND ANY EXPRESS OR "
           "IMPLIED WARRANTIES ARE DISCLAIMED (full text: LICENCE of the repository).")

# GPU folder -> (mmasim arch name, folder under vectors/hardware, device text, elements per row)
GPUS = {
    "V100": ("V100", "volta", "V100 (sm_70)", {"fp16": 4}),
    "A100": ("A100", "ampere", "A100 (sm_80)", {"fp16": 8, "bf16": 8, "tf32": 4}),
    "A2": ("A2", "ampere", "A2 (sm_86)", {"fp16": 8, "bf16": 8, "tf32": 4}),
    "Ada": ("Ada", "ada_lovelace", "an Ada Lovelace GPU (sm_89; the repository's folder 'Ada', product not named)",
            {"fp16": 8, "bf16": 8, "tf32": 4, "E5M2": 32, "E4M3": 32}),
    "L40S": ("L40S", "ada_lovelace", "L40S (sm_89)", {"fp16": 8, "bf16": 8, "tf32": 4, "E5M2": 32, "E4M3": 32}),
    "H100": ("H100", "hopper", "H100 (sm_90)", {"fp16": 16, "bf16": 16, "tf32": 4, "E5M2": 32, "E4M3": 32}),
    "H200": ("H200", "hopper", "H200 (sm_90)", {"fp16": 16, "bf16": 16, "tf32": 4, "E5M2": 32, "E4M3": 32}),
    "B200": ("B200", "blackwell", "B200 (sm_100)", {"fp16": 16, "bf16": 16, "tf32": 4, "E5M2": 32, "E4M3": 32}),
}
TYPES = {"fp16": ("f16", np.float16, np.uint16), "bf16": ("bf16", ml_dtypes.bfloat16, np.uint16),
         "tf32": ("tf32", None, None), "E4M3": ("e4m3", ml_dtypes.float8_e4m3fn, np.uint8),
         "E5M2": ("e5m2", ml_dtypes.float8_e5m2, np.uint8)}
OUTS = {"fp16": "f16", "fp32": "f32"}


def instruction(gpu: str, fmt: str, out: str) -> tuple:
    """(instruction string, its K, the kernel that ran, what the SASS says, zero C) of one set."""
    t, d = TYPES[fmt][0], OUTS[out]
    if gpu == "V100":
        return (f"mma.sync.m8n8k4.{d}.f16.f16.{d}", 4, "wmma m16n16k16",
                "HMMA.884 steps on Volta; the first saw the 4 products, the later ones only zero products", False)
    if fmt == "tf32":
        return ("mma.sync.m16n8k4.f32.tf32.tf32.f32", 4, "wmma m16n16k8 (tf32)",
                "HMMA.1684.F32.TF32 twice per 8 columns: the first saw the 4 products, the second only zero products",
                False)
    if fmt in ("fp16", "bf16"):
        return (f"mma.sync.m16n8k16.{d}.{t}.{t}.{d}", 16, "wmma m16n16k16",
                "HMMA.16816 once per 8 columns (one instruction for D[0, 0])", False)
    if gpu in ("H100", "H200") and out == "fp32":
        return (f"wgmma.mma_async.k32.f32.{t}.{t}", 32, "wgmma (per Validate_TC_models.m; the kernel is not in the repository)",
                "wgmma's fp8 datapath; not the SASS of the repository's mma.sync kernel", True)
    sass = ("QMMA.16832 (a native fp8 unit)" if gpu in ("Ada", "L40S") else
            "emulated by ptxas: two HMMA.16816 from zero on the K elements in runs of 2, then FADD / HADD2 adds C")
    return f"mma.sync.m16n8k32.{d}.{t}.{t}.{d}", 32, "inline mma.sync.aligned.m16n8k32.row.col", sass, False


def read(repo: pathlib.Path, path: str) -> str:
    """A file of the source repository at COMMIT (a bare git directory or a clone)."""
    git_dir = repo if (repo / "HEAD").is_file() and (repo / "objects").is_dir() else repo / ".git"
    r = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{COMMIT}:{path}"],
                       capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"{repo}: cannot read {path} at {COMMIT}: {r.stderr.strip()}")
    return r.stdout


def hex_rows(text: str) -> np.ndarray:
    return np.array([[int(t, 16) for t in line.split()] for line in text.splitlines() if line.strip()],
                    dtype=np.uint32)


def bin_words(text: str) -> np.ndarray:
    rows = [line.strip() for line in text.splitlines() if line.strip()]
    assert all(len(r) == 32 and set(r) <= {"0", "1"} for r in rows)
    return np.array([int(r, 2) for r in rows], dtype=np.uint32)


def container(words32: np.ndarray, fmt: str) -> np.ndarray:
    """f32 words -> the input type's container words; every value must be exact in that type."""
    _, dtype, word = TYPES[fmt]
    if dtype is None:                       # tf32: the f32 word as the kernel passed it
        return words32.astype(np.uint64)
    x = words32.view(np.float32)
    y = x.astype(dtype)
    if not np.array_equal(y.astype(np.float32), x):
        raise SystemExit(f"{fmt}: a value of the data is not representable")
    return y.view(word).astype(np.uint64)


def f16_word(words32: np.ndarray) -> np.ndarray:
    """f32 words -> f16 words by round to nearest even (``__float2half``; exact for ``__half2float`` results)."""
    return words32.view(np.float32).astype(np.float16).view(np.uint16).astype(np.uint64)


def sets(repo: pathlib.Path):
    for gpu, (arch, folder, device, ks) in GPUS.items():
        for fmt, k_file in ks.items():
            for out in ("fp16", "fp32"):
                base = f"model_validation/{gpu}/{fmt}/"
                try:
                    d_text = read(repo, f"{base}d_{gpu}_{out}.txt")
                except SystemExit:
                    continue
                yield gpu, fmt, out, k_file, d_text


def build(repo: pathlib.Path):
    """(relative path, save keyword arguments) of every set."""
    for gpu, fmt, out, k_file, d_text in sets(repo):
        arch, folder, device, _ = GPUS[gpu]
        base = f"model_validation/{gpu}/{fmt}/"
        ins, k, kernel, sass, zero_c = instruction(gpu, fmt, out)
        a = container(hex_rows(read(repo, f"{base}a_{gpu}_{fmt}.txt")), fmt)
        b = container(hex_rows(read(repo, f"{base}b_{gpu}_{fmt}.txt")), fmt)
        if a.shape != b.shape or a.shape[1] != k_file:
            raise SystemExit(f"{base}: expected {k_file} elements per row, got {a.shape} / {b.shape}")
        c32 = bin_words(read(repo, f"{base}c_{gpu}_fp32.txt"))
        d32 = bin_words(d_text)
        pad = ((0, 0), (0, k - k_file))
        a, b = np.pad(a, pad), np.pad(b, pad)
        if zero_c:
            c = np.zeros(len(d32), dtype=np.uint64)
        else:
            c = f16_word(c32) if out == "fp16" else c32.astype(np.uint64)
        d = f16_word(d32) if out == "fp16" else d32.astype(np.uint64)
        if out == "fp16" and not np.array_equal(d.astype(np.uint16).view(np.float16).astype(np.float32).view(np.uint32), d32):
            raise SystemExit(f"{base}: an f16 result word is not an f16 value")
        c_text = ("C = 0 (Validate_TC_models.m: zero D for these wgmma runs; the c file is not used)" if zero_c else
                  "C = the c file's f32 word" + (" rounded to f16 (__float2half, round to nearest even)" if out == "fp16" else ""))
        notes = (f"{device}, {TYPES[fmt][0]} inputs, {OUTS[out]} D: {len(d)} dot products measured by Khattak and "
                 f"Mikaitis ({kernel}; {sass}). The first {k_file} of the {k} K elements are the file's values "
                 f"(converted exactly), the rest zero; {c_text}. Generated by {GENERATOR}.")
        provenance = {
            "source": "hardware", "device": device, "tool": f"{REPOSITORY} model_validation/CUDA ({kernel})",
            "tool_version": COMMIT, "date": "2026-08-19", "seed": None, "generator": GENERATOR,
            "citation": CITATION + "; docs/datapaths.md §3", "licence": LICENCE,
            "nonzero_k": k_file, "c_source": c_text,
        }
        name = f"khattak-mikaitis.{gpu.lower()}.{ins}.hardware.npz"
        labels = [f"{gpu} {fmt} -> {out}: row {i + 1} of d_{gpu}_{out}.txt" for i in range(len(d))]
        yield f"{folder}/{name}", dict(arch=arch, instruction=ins, a=a, b=b, c=c, d=d, provenance=provenance,
                                       notes=notes, labels=labels)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", required=True, type=pathlib.Path,
                    help=f"a clone or bare git directory of {REPOSITORY} (commit {COMMIT[:7]})")
    ap.add_argument("--out", type=pathlib.Path, default=ROOT / "vectors" / "hardware")
    ap.add_argument("--check", action="store_true", help="compare with the committed files instead of writing")
    args = ap.parse_args(argv)
    bad = 0
    count = 0
    for rel, kw in build(args.repo):
        path = args.out / rel
        count += 1
        if args.check:
            have = vectors.load(path)
            same = (have.arch == kw["arch"] and have.instruction == kw["instruction"]
                    and all(np.array_equal(getattr(have, x), np.asarray(kw[x], dtype=np.uint64)) for x in "abcd")
                    and have.provenance == kw["provenance"] and have.labels is not None
                    and list(map(str, have.labels)) == kw["labels"])
            print(("same     " if same else "DIFFERENT"), rel)
            bad += not same
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            vectors.save(path, **kw)
            print("wrote", rel)
    print(f"{count} sets" + (f", {bad} differ" if args.check else ""))
    return 1 if bad or count != 48 else 0


if __name__ == "__main__":
    sys.exit(main())
