#!/usr/bin/env python3
"""Generate differential test vectors ("mmasim-vectors" v1) from the peer
simulator MMA-Sim 2.1.1 (PyPI package ``mmasim``, MIT, arXiv 2511.10909).

Run from the repository root with the *peer* virtual environment::

    /work/peer/venv/bin/python tools/peer/generate_vectors.py --out vectors/peer

IMPORTANT: our own package is also called ``mmasim``.  This script must import
the PEER's ``mmasim`` (installed in the peer venv), so it never puts the
repository root on ``sys.path`` (and refuses to run if the imported ``mmasim``
comes from this repository).  No MMA-Sim source is copied here; the peer is
only called.

See docs/peer-vectors.md for the file format and the filtering rules.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import math
import sys
from pathlib import Path

# Drop the script directory / repo root from sys.path so that `import mmasim`
# resolves to the peer package in site-packages, never to our own package.
_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parent.parent
sys.path[:] = [
    p
    for p in sys.path
    if p not in ("", ".")
    and Path(p).resolve() not in (_HERE, _REPO, _REPO / "src")
]

import numpy as np  # noqa: E402
import torch  # noqa: E402

import mmasim as peer  # noqa: E402

if Path(peer.__file__).resolve().is_relative_to(_REPO):
    sys.exit(f"refusing to run: imported our own mmasim ({peer.__file__}), not the peer")

from mmasim.nv_ptx import MMA, MMABlockScale, WGMMA, TCGen05MMA  # noqa: E402
from mmasim.nv_ptx import isa_mma, isa_wgmma, isa_tcgen05mma  # noqa: E402
from mmasim.amd import MFMA  # noqa: E402
from mmasim.amd import isa_mfma  # noqa: E402
from mmasim.arithmetic.fdpa import frexp_and_normalize  # noqa: E402
from mmasim.arithmetic.helper import (  # noqa: E402
    decode_uint8_to_fp6_fp4,
    truncate_fp32_to_tf32,
)

PEER_VERSION = "2.1.1"
GENERATOR = "tools/peer/generate_vectors.py"
CITATION = "MMA-Sim 2.1.1 (arXiv 2511.10909), validated by its authors on hardware"

# formats and word generators: peer_words.py beside this file, loaded by path (this folder is
# kept off sys.path so that `import mmasim` above is the peer's)
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location("peer_words", _HERE / "peer_words.py")
_words = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_words)
TORCH_OF = _words.TORCH_OF
container_bits = _words.container_bits
decode = _words.decode
encode_c = _words.encode_c
gen_near = _words.gen_near
gen_sparse = _words.gen_sparse
gen_uniform = _words.gen_uniform
perturb_ulps = _words.perturb_ulps


# ---------------------------------------------------------------------------
# Case mix
# ---------------------------------------------------------------------------
def split_counts(n):
    fr = [0.25, 0.35, 0.25]
    c = [int(round(n * f)) for f in fr]
    c.append(n - sum(c))
    return c


def gen_cases(spec, n, rng):
    """Return dict of uint64 word arrays a (n,K), b (n,K), c (n,), [scale_a, scale_b]."""
    K, fa, fb, fc = spec["K"], spec["a"], spec["b"], spec["c"]
    sf, nblk = spec.get("scale"), (K // spec["block"] if spec.get("scale") else 0)
    n_uni, n_near, n_canc, n_sparse = split_counts(n)
    A, B, C, SA, SB = [], [], [], [], []

    # (i) uniform random container words
    # 60% of these rows are restricted to finite words (NaN/inf redrawn)
    fin = rng.random(n_uni) < 0.6
    A.append(gen_uniform(fa, (n_uni, K), rng, fin))
    B.append(gen_uniform(fb, (n_uni, K), rng, fin))
    C.append(gen_uniform(fc, (n_uni,), rng, fin))
    if sf:
        # mostly sane scales so that the products are not all NaN/huge
        SA.append(np.where(rng.random((n_uni, nblk)) < 0.5, gen_uniform(sf, (n_uni, nblk), rng, fin),
                           gen_near(sf, (n_uni, nblk), rng, spread=6)))
        SB.append(np.where(rng.random((n_uni, nblk)) < 0.5, gen_uniform(sf, (n_uni, nblk), rng, fin),
                           gen_near(sf, (n_uni, nblk), rng, spread=6)))

    # (ii) near 1
    A.append(gen_near(fa, (n_near, K), rng))
    B.append(gen_near(fb, (n_near, K), rng))
    C.append(gen_near(fc, (n_near,), rng))
    if sf:
        SA.append(gen_near(sf, (n_near, nblk), rng, spread=3))
        SB.append(gen_near(sf, (n_near, nblk), rng, spread=3))

    # (iii) cancellation-heavy, exponents spread so truncation shows
    a = gen_near(fa, (n_canc, K), rng, spread=12)
    b = gen_near(fb, (n_canc, K), rng, spread=12)
    if sf:
        sa = gen_near(sf, (n_canc, nblk), rng, spread=2)
        sb = gen_near(sf, (n_canc, nblk), rng, spread=2)
    variant = rng.integers(0, 3, size=n_canc)
    # variant 1: pairs of products cancel (a[2j+1] = -a[2j], b[2j+1] = b[2j])
    for i in np.nonzero(variant == 1)[0]:
        for j in range(0, K - 1, 2):
            if rng.random() < 0.8:
                a[i, j + 1] = negate_word(fa, a[i, j], rng)
                b[i, j + 1] = b[i, j]
                if sf:  # keep both in one scale block (block >= 16 always)
                    pass
    # variant 2: one dominant product, the rest small (shows window truncation)
    for i in np.nonzero(variant == 2)[0]:
        a[i] = gen_near(fa, (K,), rng, spread=2, center=-6)
        a[i, 0] = gen_near(fa, (1,), rng, spread=0, center=3)[0]
    va, vb = decode(fa, a), decode(fb, b)
    prod = va * vb
    if sf:
        blk = spec["block"]
        scl = decode(sf, sa) * decode(sf, sb)
        prod = prod * np.repeat(scl, blk, axis=1)
    dots = np.array([math.fsum(r) if np.all(np.isfinite(r)) else 0.0 for r in prod])
    c = encode_c(fc, -dots)
    c = perturb_ulps(fc, c, rng)
    # variant 1 (pairs): C small random, sometimes zero
    v1 = variant == 1
    c[v1] = np.where(rng.random(v1.sum()) < 0.3, encode_c(fc, np.zeros(v1.sum())),
                     gen_near(fc, (int(v1.sum()),), rng, spread=8, center=-4))
    # C that overflowed its format (f16) -> replace with near-1
    bad = ~np.isfinite(decode(fc, c))
    c[bad] = gen_near(fc, (int(bad.sum()),), rng)
    A.append(a)
    B.append(b)
    C.append(c)
    if sf:
        SA.append(sa)
        SB.append(sb)

    # (iv) sparse / zero-heavy / tiny (subnormal)
    tiny = rng.random(n_sparse) < 0.5
    A.append(gen_sparse(fa, (n_sparse, K), rng, tiny_rows=tiny))
    B.append(gen_sparse(fb, (n_sparse, K), rng, tiny_rows=tiny))
    C.append(gen_sparse(fc, (n_sparse,), rng, p_zero=0.4, tiny_rows=tiny))
    if sf:
        SA.append(gen_sparse(sf, (n_sparse, nblk), rng, p_zero=0.1))
        SB.append(gen_sparse(sf, (n_sparse, nblk), rng, p_zero=0.1))

    out = {"a": np.concatenate(A), "b": np.concatenate(B), "c": np.concatenate(C)}
    if sf:
        out["scale_a"] = np.concatenate(SA)
        out["scale_b"] = np.concatenate(SB)
    return out


def negate_word(fmt, w, rng):
    if fmt in ("e3m2", "e2m3"):
        return np.uint64((int(w) ^ 0x20) & 0x3F | (int(rng.integers(0, 4)) << 6))
    if fmt == "e2m1":
        return np.uint64((int(w) ^ 0x20) & 0x3C | (int(rng.integers(0, 4)) << 6))
    if fmt == "e2m1x":
        return np.uint64(int(w) ^ 0x8)
    bits = container_bits(fmt)
    return np.uint64(int(w) ^ (1 << (bits - 1)))


# ---------------------------------------------------------------------------
# Words <-> peer tensors
# ---------------------------------------------------------------------------
def to_torch(fmt, words, torch_dtype):
    w = np.ascontiguousarray(words, np.uint64)
    if fmt == "f64":
        return torch.from_numpy(w.view(np.int64).copy()).view(torch.float64)
    if fmt in ("f32", "tf32", "xf32"):
        return torch.from_numpy(w.astype(np.uint32).view(np.int32)).view(torch.float32)
    if fmt in ("f16", "bf16"):
        return torch.from_numpy(w.astype(np.uint16).view(np.int16)).view(torch_dtype)
    t = torch.from_numpy(w.astype(np.uint8))
    return t if torch_dtype == torch.uint8 else t.view(torch_dtype)


def pack_fp4(words):
    """mxf4: one e2m1 code per entry -> peer's packed bytes (hi = 2i, lo = 2i+1)."""
    w = words.astype(np.uint8) & 0xF
    return (w[..., 0::2] << 4) | w[..., 1::2]


def from_torch(fmt, t):
    bits = container_bits(fmt)
    if bits == 64:
        return t.view(torch.int64).numpy().view(np.uint64).copy()
    if bits == 32:
        return t.view(torch.int32).numpy().view(np.uint32).astype(np.uint64)
    if bits == 16:
        return t.view(torch.int16).numpy().view(np.uint16).astype(np.uint64)
    raise ValueError(fmt)


# ---------------------------------------------------------------------------
# Instruction enumeration
# ---------------------------------------------------------------------------
def nv_fmt(op, which):
    ptx = getattr(op, f"{which}_type_ptx")
    return ptx


def build_spec(api, arch, instr):
    if api == "mma":
        op = MMA(arch, instr)
    elif api == "mma_block_scale":
        op = MMABlockScale(arch, instr)
    elif api == "wgmma":
        op = WGMMA(arch, instr)
    elif api == "tcgen05":
        op = TCGen05MMA(arch, instr)
    elif api == "mfma":
        op = MFMA(arch, instr)
    else:
        raise ValueError(api)
    spec = {"api": api, "arch": arch, "instruction": instr, "op": op, "K": op.k}
    if api == "mfma":
        fa = TORCH_OF[op.a_type]
        fb = TORCH_OF[op.b_type]
        if instr.endswith("xf32"):
            fa = fb = "xf32"
    else:
        fa, fb = op.a_type_ptx, op.b_type_ptx
    spec["c"] = TORCH_OF[op.c_type]
    spec["d"] = TORCH_OF[op.d_type]
    if api == "mma_block_scale":
        spec["scale"] = "ue4m3" if instr.endswith("ue4m3") else TORCH_OF[op.s_type]
        spec["block"] = op.block_size
        spec["packing"] = op.packing
        if op.packing == 2:
            assert fa == fb == "e2m1"
            fa = fb = "e2m1x"
    spec["a"], spec["b"] = fa, fb
    return spec


def shape_key(instr):
    """(kind/types/K key, m, n) for wgmma/tcgen05 dedup."""
    shape, rest = instr.split(".", 1)
    m, nk = shape[1:].split("n")
    n, k = nk.split("k")
    return f"k{k}.{rest}", int(m), int(n)


def smallest_shapes(instrs):
    best = {}
    for s in instrs:
        key, m, n = shape_key(s)
        if key not in best or (m, n) < best[key][0]:
            best[key] = ((m, n), s)
    return [v[1] for v in best.values()]


def enumerate_all():
    jobs = []
    for arch, lst in isa_mma.mma_shape_and_type.items():
        jobs += [("mma", arch, s) for s in lst]
    for arch, lst in isa_mma.mma_block_scale_shape_and_type.items():
        jobs += [("mma_block_scale", arch, s) for s in lst]
    for arch, lst in isa_wgmma.wgmma_shape_and_type.items():
        jobs += [("wgmma", arch, s) for s in smallest_shapes(lst)]
    for arch, lst in isa_tcgen05mma.tcgen05mma_shape_and_type.items():
        jobs += [("tcgen05", arch, s) for s in smallest_shapes(lst)]
    # tcgen05 block-scale: deliberately skipped (B200 hardware differs from peer)
    for arch, lst in isa_mfma.arch_mfma_suffix.items():
        jobs += [("mfma", arch, s) for s in lst]
    return jobs


def slug(s):
    return "".join(ch if (ch.isascii() and (ch.isalnum() or ch in "._-")) else "_" for ch in s)


def file_seed(base, api, arch, instr):
    h = hashlib.sha256(f"{api}|{arch}|{instr}".encode()).hexdigest()
    return (base + int(h[:8], 16)) % (1 << 32)


# ---------------------------------------------------------------------------
# Running the peer
# ---------------------------------------------------------------------------
def peer_inputs(spec, cases):
    op = spec["op"]
    a = cases["a"]
    b = cases["b"]
    if spec.get("packing") == 2:
        a_t = torch.from_numpy(pack_fp4(a))
        b_t = torch.from_numpy(pack_fp4(b))
    else:
        a_t = to_torch(spec["a"], a, op.a_type)
        b_t = to_torch(spec["b"], b, op.b_type)
    c_t = to_torch(spec["c"], cases["c"], op.c_type)
    extra = ()
    if "scale" in spec:
        st = op.s_type
        extra = (to_torch(spec["scale"], cases["scale_a"], st),
                 to_torch(spec["scale"], cases["scale_b"], st))
    return a_t, b_t, c_t, extra


def run_peer(spec, cases):
    a_t, b_t, c_t, extra = peer_inputs(spec, cases)
    d = spec["op"].dpa(a_t, b_t, c_t, *extra)
    assert d.dtype == spec["op"].d_type, (d.dtype, spec["op"].d_type)
    assert d.shape == c_t.shape
    return from_torch(spec["d"], d)


def tcgen05_drop_mask(spec, cases):
    """True for cases where a zero term's e_zero would exceed the max exponent of
    the nonzero finite terms (peer and B200 differ there), or all terms are zero.
    Uses the peer's own decoding and frexp_and_normalize (torch.frexp)."""
    op = spec["op"].arithmetic_op
    assert spec["K"] <= op.L_max  # single window: all K products + C together
    a_t, b_t, c_t, _ = peer_inputs(spec, cases)

    def prep(x, ptx):
        if x.dtype == torch.float32:
            return truncate_fp32_to_tf32(x)
        if x.dtype == torch.uint8:
            return decode_uint8_to_fp6_fp4(x, ptx)
        return x

    a = prep(a_t, op.a_type_ptx)
    b = prep(b_t, op.b_type_ptx)
    s_a, e_a = frexp_and_normalize(a, op.e_subnormal_a)
    s_b, e_b = frexp_and_normalize(b, op.e_subnormal_b)
    s_c, e_c = frexp_and_normalize(c_t)
    s = torch.cat([s_a * s_b, s_c.unsqueeze(-1)], dim=-1)
    e = torch.cat([e_a + e_b, e_c.unsqueeze(-1)], dim=-1)
    finite = torch.isfinite(s)
    zero = s == 0.0
    nz = finite & ~zero
    any_nonfinite = (~finite).any(-1)
    e_max = torch.where(nz, e, torch.full_like(e, -(1 << 20))).max(-1).values
    has_nz = nz.any(-1)
    has_zero = zero.any(-1)
    drop = (has_zero & has_nz & (op.e_zero > e_max)) | (zero.all(-1))
    # cases with an inf/NaN term give inf/NaN whatever the window: keep them
    drop &= ~any_nonfinite
    return drop.numpy()


# ---------------------------------------------------------------------------
def notes_for(spec, n_dropped, n_total):
    api, op = spec["api"], spec["op"]
    ar = getattr(op, "arithmetic_op", None)
    parts = []
    params = {k: getattr(ar, k) for k in ("F", "F2", "G", "rho", "L_max", "e_zero", "P") if hasattr(ar, k)}
    parts.append(f"peer arithmetic: {type(ar).__name__} {json.dumps(params)}")
    parts.append(f"formats: a={spec['a']} b={spec['b']} c={spec['c']} d={spec['d']}"
                 + (f" scale={spec['scale']} block={spec['block']}" if 'scale' in spec else ""))
    parts.append("one case = one dot product row: d = dpa(a_row, b_row, c) over the full K")
    parts.append("mix: 25% uniform random container words (30% biased to special exponents; 60% of these rows finite-only), "
                 "35% near 1, 25% cancellation-heavy (C ~ -dot, cancelling product pairs, one dominant product), "
                 "15% zero-heavy/tiny/subnormal")
    if api in ("wgmma", "tcgen05"):
        parts.append("smallest listed M/N shape; every other M/N of the same kind/types/K is arithmetic-identical in the peer")
    if api == "tcgen05":
        parts.append(f"dropped {n_dropped} of {n_total} generated cases: some zero term (zero product or zero C) "
                     f"had e_zero={ar.e_zero} above the max normalized exponent of the nonzero finite terms, or all terms "
                     "were zero (B200 excludes zero terms from the alignment window; the peer does not). "
                     "Cases containing an inf/NaN term were kept (result is inf/NaN regardless of the window).")
    if spec["a"] in ("tf32", "xf32"):
        parts.append("tf32/xf32 operands carry random low 13 bits in the f32 word; the peer truncates them")
    if "e2m1" in (spec["a"], spec["b"]):
        parts.append("e2m1 bytes: code in bits 5:2, bits 7:6 random padding, bits 1:0 kept zero")
    if spec["a"] in ("e3m2", "e2m3") or spec["b"] in ("e3m2", "e2m3"):
        parts.append("fp6 bytes: code in bits 5:0, bits 7:6 random padding")
    if spec["a"] == "e2m1x":
        parts.append("mxf4: one e2m1 element per array entry (bits 3:0); pairs packed for the peer as hi=2i, lo=2i+1")
    if spec.get("scale") == "ue4m3":
        parts.append("ue4m3 scale bytes have bit 7 = 0")
    if spec["d"] == "f64":
        parts.append("f64 path is the peer's host fma chain: NaN payloads propagate, so nan_policy is 'any'")
    return "; ".join(parts)


def nan_policy(spec):
    if spec["api"] == "mfma":
        return "any"
    if spec["d"] == "f64":
        return "any"  # host fma propagates NaN payloads, not canonical
    return "canonical"


def main(argv=None):
    np.seterr(invalid="ignore", over="ignore")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="vectors/peer")
    ap.add_argument("--cases", type=int, default=1024)
    ap.add_argument("--seed", type=int, default=20261130)
    ap.add_argument("--only", default=None, help="only instructions whose 'api:arch:instruction' contains this")
    ap.add_argument("--list", action="store_true", help="list the jobs and exit")
    args = ap.parse_args(argv)

    out = Path(args.out)
    jobs = enumerate_all()
    if args.only:
        jobs = [j for j in jobs if args.only in ":".join(j)]
    if args.list:
        for j in jobs:
            print(*j, sep="\t")
        return 0

    today = datetime.date.today().isoformat()
    manifest_path = out / "MANIFEST.json"
    manifest = {}
    if manifest_path.exists() and args.only:
        manifest = {e["path"]: e for e in json.loads(manifest_path.read_text())["files"]}
    seen = set()
    failures = []
    for idx, (api, arch, instr) in enumerate(jobs, 1):
        rel = f"{slug(arch.lower())}/{slug(instr)}.npz"
        assert rel not in seen, f"slug collision: {rel}"
        seen.add(rel)
        seed = file_seed(args.seed, api, arch, instr)
        rng = np.random.default_rng(seed)
        try:
            spec = build_spec(api, arch, instr)
            cases = gen_cases(spec, args.cases, rng)
            n_total = len(cases["c"])
            n_dropped = 0
            if api == "tcgen05":
                drop = tcgen05_drop_mask(spec, cases)
                n_dropped = int(drop.sum())
                cases = {k: v[~drop] for k, v in cases.items()}
            d = run_peer(spec, cases)
        except Exception as exc:  # record and go on
            failures.append((api, arch, instr, repr(exc)))
            print(f"[{idx}/{len(jobs)}] FAILED {api} {arch} {instr}: {exc!r}", flush=True)
            continue
        n = len(d)
        meta = {
            "format": "mmasim-vectors",
            "version": 1,
            "arch": arch,
            "instruction": instr,
            "api": api,
            "qualifiers": {},
            "nan_policy": nan_policy(spec),
            "provenance": {
                "source": "peer",
                "tool": "MMA-Sim",
                "tool_version": PEER_VERSION,
                "torch_version": torch.__version__,
                "date": today,
                "seed": seed,
                "generator": GENERATOR,
                "citation": CITATION,
            },
            "cases": n,
            "notes": notes_for(spec, n_dropped, n_total),
        }
        arrays = {k: np.ascontiguousarray(v, np.uint64) for k, v in cases.items()}
        arrays["d"] = d.astype(np.uint64)
        check_words(spec, arrays)
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez_compressed(path, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays)
        sha = hashlib.sha256(path.read_bytes()).hexdigest()
        manifest[rel] = {"path": rel, "arch": arch, "api": api, "instruction": instr,
                         "cases": n, "sha256": sha, "bytes": path.stat().st_size}
        extra = f" dropped={n_dropped}" if api == "tcgen05" else ""
        print(f"[{idx}/{len(jobs)}] {api:16s} {arch:14s} {instr:60s} cases={n}{extra} "
              f"{path.stat().st_size / 1024:.0f} KiB", flush=True)

    files = sorted(manifest.values(), key=lambda e: e["path"])
    manifest_path.parent.mkdir(parents=True, exist_ok=True)
    manifest_path.write_text(json.dumps({
        "format": "mmasim-vectors", "version": 1,
        "tool": "MMA-Sim", "tool_version": PEER_VERSION, "torch_version": torch.__version__,
        "generator": GENERATOR, "base_seed": args.seed,
        "skipped": ["tcgen05 block-scale (kind::mxf8f6f4/mxf4/mxf4nvf4): B200 block-scaled "
                    "arithmetic is known from hardware to differ from the peer"],
        "files": files,
    }, indent=1) + "\n")
    total = sum(e["bytes"] for e in files)
    print(f"{len(files)} files, {total / 1e6:.2f} MB, {len(failures)} failures")
    for f in failures:
        print("FAILED", *f)
    return 1 if failures else 0


def check_words(spec, arrays):
    """Container invariants (see docs/peer-vectors.md)."""
    for key, fmt in (("a", spec["a"]), ("b", spec["b"]), ("c", spec["c"]), ("d", spec["d"]),
                     ("scale_a", spec.get("scale")), ("scale_b", spec.get("scale"))):
        if key not in arrays:
            continue
        w = arrays[key]
        bits = container_bits(fmt)
        if bits < 64:
            assert (w >> np.uint64(bits) == 0).all(), (key, fmt)
        if fmt == "e2m1":
            assert (w & np.uint64(3) == 0).all(), key
        if fmt == "e2m1x":
            assert (w >> np.uint64(4) == 0).all(), key
        if fmt == "ue4m3":
            assert (w & np.uint64(0x80) == 0).all(), key


if __name__ == "__main__":
    sys.exit(main())
