"""Compare mmasim's MMA-Sim drop-in with the real MMA-Sim 2.1.1 on fresh random inputs.

The two cannot share one environment (both install the import package ``mmasim``),
so this runs in two steps, each in its own venv, exchanging an .npz of words:

    # 1. in the peer venv (torch + MMA-Sim 2.1.1, docs/peer-vectors.md), from /tmp:
    /work/peer/bin/python tools/peer/compare_dropin.py peer  --out /tmp/peer_out.npz
    # 2. in mmasim's venv (torch + mmasim-exact):
    python tools/peer/compare_dropin.py mmasim --peer /tmp/peer_out.npz

Step 1 draws the inputs (seeded), runs MMA-Sim's ``__call__`` on them and saves
inputs and outputs as words; step 2 runs the same calls through
``mmasim.nv_ptx.sim`` / ``mmasim.amd.sim`` and prints, per instruction, how many
D words agree (NaN = NaN where either side's D format has several NaN words)
and the cases that differ.  It is a comparison run, not a test: MMA-Sim is never
installed where the tests run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

#: (class, arch, instruction, M, N, K elements, operand kind)
CASES = [
    ("MMA", "Volta", "m8n8k4.f32.f16.f16.f32", 8, 8, 4, "f16"),
    ("MMA", "Turing", "m8n8k4.f16.f16.f16.f16", 8, 8, 4, "f16"),
    ("MMA", "Ampere", "m16n8k16.f32.f16.f16.f32", 16, 8, 16, "f16"),
    ("MMA", "Ampere", "m16n8k8.f32.tf32.tf32.f32", 16, 8, 8, "f32"),
    ("MMA", "Hopper", "m16n8k16.f32.bf16.bf16.f32", 16, 8, 16, "bf16"),
    ("MMA", "Ada Lovelace", "m16n8k32.f32.e4m3.e5m2.f32", 16, 8, 32, "fp8"),
    ("MMA", "RTX Blackwell", "m16n8k32.kind::f8f6f4.f32.e2m1.e4m3.f32", 16, 8, 32, "f8f6f4"),
    ("MMA", "Ampere", "m8n8k4.f64.f64.f64.f64", 8, 8, 4, "f64"),
    ("WGMMA", "Hopper", "m64n8k32.f32.e4m3.e4m3", 64, 8, 32, "fp8"),
    ("TCGen05MMA", "Blackwell", "m64n8k16.kind::f16.f16.f16.f16", 64, 8, 16, "f16"),
    ("TCGen05MMA", "Blackwell", "m64n8k8.kind::tf32.f32.tf32.tf32", 64, 8, 8, "f32"),
    ("MMABlockScale", "RTX Blackwell", "m16n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.f32.ue4m3", 16, 8, 64, "mxf4"),
    ("MMABlockScale", "RTX Blackwell", "m16n8k32.kind::mxf8f6f4.block32.f32.e4m3.e2m1.f32.ue8m0", 16, 8, 32, "mx"),
    ("TCGen05MMABlockScale", "Blackwell", "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3", 128, 8, 64, "mxf4"),
    ("MFMA", "CDNA3", "f32_16x16x16_f16", 16, 16, 16, "f16"),
    ("MFMA", "CDNA2", "f32_32x32x4bf16", 32, 32, 4, "bf16"),
    ("MFMA", "CDNA3", "f32_16x16x32_fp8_bf8", 16, 16, 32, "amdfp8"),
    ("MMA", "Turing", "m16n8k8.f32.f16.f16.f32", 16, 8, 8, "f16"),
    ("WGMMA", "Hopper", "m64n8k16.f16.f16.f16", 64, 8, 16, "f16"),
    ("TCGen05MMA", "Blackwell", "m128n8k32.kind::f8f6f4.f32.e4m3.e3m2", 128, 8, 32, "mx"),
    ("MFMA", "CDNA1", "f32_32x32x8f16", 32, 32, 8, "f16"),
    ("MFMA", "CDNA3", "f32_16x16x8_xf32", 16, 16, 8, "f32"),
    ("MFMA", "CDNA3", "f64_16x16x4_f64", 16, 16, 4, "f64"),
]
SEED = 20261201

#: single dot products where mmasim differs from MMA-Sim on purpose (docs/mma-sim.md):
#: (class, arch, instruction, a words, b words, c word, scale words or None, what)
_NV = [0x1, 0x9] + [0] * 14 + [1, 1, 1, 0, 1, 1, 1] + [0] * 41       # NVFP4 K = 4 grouping (docs/datapaths.md §6)
_NVB = [0x1, 0x1] + [0] * 14 + [1, 1, 1, 0, 1, 1, 1] + [0] * 41
EDGES = [
    ("TCGen05MMA", "Blackwell", "m64n8k16.kind::f16.f16.f16.f16", [0x0400, 0x0001] + [0] * 14,
     [0x1000, 0x0001] + [0] * 14, 0, None, "B200: zeros do not set the window (T1)"),
    ("MMA", "RTX Blackwell", "m16n8k32.kind::f8f6f4.f32.e2m1.e4m3.f32", [0x0B] + [0] * 31, [0x38] + [0] * 31, 0,
     None, "RTX Blackwell: e2m1 byte read as e2m3 from bits 5:0 (T2)"),
    ("TCGen05MMABlockScale", "Blackwell", "m128n8k64.kind::mxf4nvf4.block16.f32.e2m1.e2m1.ue4m3",
     [(_NV[2 * i] << 4) | _NV[2 * i + 1] for i in range(32)], [(_NVB[2 * i] << 4) | _NVB[2 * i + 1] for i in range(32)],
     0, [0x7E, 0x01, 0x38, 0x38], "B200 NVFP4: groups of 4 products (T1)"),
    ("MMA", "Ampere", "m8n8k4.f64.f64.f64.f64", [0x7FF8000000000123, 0, 0, 0], [0x3FF0000000000000] * 4, 0, None,
     "f64 NaN word: canonical (assumed) vs the input's payload"),
]


def _draw(torch, g, kind, shape, inst):
    """Random operands over the whole word range, biased to small exponents and zeros."""
    rows, cols = shape
    if kind in ("f16", "bf16"):
        w = torch.randint(0, 1 << 16, shape, generator=g, dtype=torch.int32)
        w = torch.where(torch.rand(shape, generator=g) < 0.7, (w & 0x83FF) | 0x3800, w)   # near 1
        w = torch.where(torch.rand(shape, generator=g) < 0.15, torch.zeros_like(w), w)
        return w.to(torch.int16).view(torch.float16 if kind == "f16" else torch.bfloat16)
    if kind in ("f32", "f64"):
        x = torch.randn(shape, generator=g, dtype=torch.float64) * torch.exp2(torch.randint(-20, 20, shape, generator=g)
                                                                              .double())
        x = torch.where(torch.rand(shape, generator=g) < 0.15, torch.zeros_like(x), x)
        return x if kind == "f64" else x.float()
    w = torch.randint(0, 256, shape, generator=g, dtype=torch.int32).to(torch.uint8)
    w = torch.where(torch.rand(shape, generator=g) < 0.2, torch.zeros_like(w), w)
    return w


def _tensor(torch, words, dtype):
    """Words as a 1-D tensor of ``dtype`` holding those bits."""
    import numpy as np

    size = torch.empty((), dtype=dtype).element_size()
    arr = np.array(words, dtype=np.uint64).astype(np.dtype(f"u{size}"))
    if dtype == torch.uint8:
        return torch.from_numpy(arr)
    return torch.from_numpy(arr.view(np.dtype(f"i{size}"))).view(dtype)


def _words(torch, t):
    import numpy as np

    size = t.element_size()
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    return t.contiguous().view(ints[size]).numpy().view(np.dtype(f"u{size}")).astype(np.uint64)


def peer(out: str):
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") not in (here, os.path.dirname(os.path.dirname(here)))]
    import numpy as np
    import torch
    import mmasim
    from mmasim.amd import sim as amd
    from mmasim.nv_ptx import sim as nv

    assert not hasattr(mmasim, "MMA"), "this step needs MMA-Sim's mmasim, not mmasim-exact"
    g = torch.Generator().manual_seed(SEED)
    arrays, meta = {}, []
    for i, (cls, arch, inst, M, N, K, kind) in enumerate(CASES):
        op = getattr(amd if cls == "MFMA" else nv, cls)(arch, inst)
        if kind in ("fp8", "mx", "amdfp8"):
            A = _draw(torch, g, "u8", (M, K), inst).view(op.a_type if op.a_type != torch.uint8 else torch.uint8)
            B = _draw(torch, g, "u8", (K, N), inst).view(op.b_type if op.b_type != torch.uint8 else torch.uint8)
            # e2m1 one per byte: code in bits 5:2, padding bits 1:0 zero (where the readings agree);
            # fp6 in bits 5:0 with random bits 7:6 (both ignore them)
            if getattr(op, "a_type_ptx", "") == "e2m1":
                A = A & 0x3C
            if getattr(op, "b_type_ptx", "") == "e2m1":
                B = B & 0x3C
        elif kind == "f8f6f4":     # e2m1 x e4m3, e2m1 with random padding bits 1:0 (T2: hardware reads them)
            A = _draw(torch, g, "u8", (M, K), inst) & 0x3F
            B = _draw(torch, g, "u8", (K, N), inst).view(torch.float8_e4m3fn)
        elif kind == "mxf4":
            A = _draw(torch, g, "u8", (M, K // 2), inst)
            B = _draw(torch, g, "u8", (K // 2, N), inst)
        else:
            A, B = _draw(torch, g, kind, (M, K), inst), _draw(torch, g, kind, (K, N), inst)
            if kind == "f32":
                A, B = A.float(), B.float()
        C = _draw(torch, g, "f32" if op.c_type != torch.float64 else "f64", (M, N), inst).to(op.c_type)
        if cls.endswith("BlockScale"):
            blocks = K // op.block_size
            if op.s_type == torch.float8_e8m0fnu:
                sa = torch.randint(120, 135, (M, blocks), generator=g, dtype=torch.int32).to(torch.uint8)
                sb = torch.randint(120, 135, (blocks, N), generator=g, dtype=torch.int32).to(torch.uint8)
            else:
                sa = torch.randint(0x20, 0x50, (M, blocks), generator=g, dtype=torch.int32).to(torch.uint8)
                sb = torch.randint(0x20, 0x50, (blocks, N), generator=g, dtype=torch.int32).to(torch.uint8)
            sa, sb = sa.view(op.s_type), sb.view(op.s_type)
            D = op(A, B, C, sa, sb)
            arrays[f"{i}_sa"], arrays[f"{i}_sb"] = _words(torch, sa), _words(torch, sb)
        else:
            D = op(A, B, C)
        for name, t in (("A", A), ("B", B), ("C", C), ("D", D)):
            arrays[f"{i}_{name}"] = _words(torch, t)
        meta.append({"a": str(A.dtype), "b": str(B.dtype), "c": str(C.dtype), "d": str(D.dtype),
                     "s": str(op.s_type) if cls.endswith("BlockScale") else None})
    for j, (cls, arch, inst, a, b, c, sc, _) in enumerate(EDGES):
        op = getattr(amd if cls == "MFMA" else nv, cls)(arch, inst)
        ta, tb = _tensor(torch, a, op.a_type), _tensor(torch, b, op.b_type)
        tc = _tensor(torch, [c], op.c_type)[0]
        d = op.dpa(ta, tb, tc, _tensor(torch, sc, op.s_type), _tensor(torch, sc, op.s_type)) if sc else op.dpa(ta, tb, tc)
        arrays[f"edge{j}"] = _words(torch, d.reshape(1))
    np.savez(out, meta=np.array(json.dumps(meta)), **arrays)
    print(f"MMA-Sim {getattr(mmasim, '__version__', '2.1.1')}, torch {torch.__version__}: {len(CASES)} calls -> {out}")


def ours(peer_file: str):
    import numpy as np
    import torch
    import mmasim
    from mmasim.amd import sim as amd
    from mmasim.arith.decode import NAN
    from mmasim.nv_ptx import sim as nv

    z = np.load(peer_file)
    meta = json.loads(str(z["meta"]))
    total_same = total = 0
    for i, ((cls, arch, inst, M, N, K, kind), m) in enumerate(zip(CASES, meta)):
        op = getattr(amd if cls == "MFMA" else nv, cls)(arch, inst)

        def t(name, dtype_name):
            w = z[f"{i}_{name}"]
            dt = getattr(torch, dtype_name.split(".")[1])
            size = torch.empty((), dtype=dt).element_size()
            ints = {1: (np.uint8, torch.uint8), 2: (np.int16, torch.int16), 4: (np.int32, torch.int32),
                    8: (np.int64, torch.int64)}[size]
            arr = w.astype(np.dtype(f"u{size}")).view(ints[0])
            return torch.from_numpy(arr.copy()).view(dt)

        A, B, C = t("A", m["a"]), t("B", m["b"]), t("C", m["c"])
        D = op(A, B, C, t("sa", m["s"]), t("sb", m["s"])) if m["s"] else op(A, B, C)
        got, want = _words(torch, D), z[f"{i}_D"]
        same = got == want
        dec = op.model.decode("d", got).cls == NAN
        same |= dec & (op.model.decode("d", want).cls == NAN)
        n_same = int(same.sum())
        total_same += n_same
        total += same.size
        line = f"{cls:22s} {arch:14s} {inst:58s} {n_same:5d}/{same.size:<5d} equal"
        if n_same != same.size:
            r, c = np.argwhere(~same)[0]
            line += f"; first difference D[{r},{c}]: mmasim {int(got[r, c]):#x}, MMA-Sim {int(want[r, c]):#x}"
        print(line)
    print("deliberate differences (single dot products):")
    for j, (cls, arch, inst, a, b, c, sc, what) in enumerate(EDGES):
        op = getattr(amd if cls == "MFMA" else nv, cls)(arch, inst)
        ta, tb = _tensor(torch, a, op.a_type), _tensor(torch, b, op.b_type)
        tc = _tensor(torch, [c], op.c_type)[0]
        d = op.dpa(ta, tb, tc, _tensor(torch, sc, op.s_type), _tensor(torch, sc, op.s_type)) if sc else op.dpa(ta, tb, tc)
        print(f"  {what}: mmasim {int(_words(torch, d.reshape(1))[0]):#x}, MMA-Sim {int(z[f'edge{j}'][0]):#x}")
    print(f"total: {total_same}/{total} D words equal (mmasim {mmasim.__version__}, torch {torch.__version__})")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("side", choices=("peer", "mmasim"))
    p.add_argument("--out", default="/tmp/mma_sim_compare.npz")
    p.add_argument("--peer", default="/tmp/mma_sim_compare.npz")
    args = p.parse_args()
    peer(args.out) if args.side == "peer" else ours(args.peer)


if __name__ == "__main__":
    main()
