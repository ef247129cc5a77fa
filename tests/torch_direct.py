"""Shared pieces of the mmasim.torch tests: GEMMs by ``mmasim.quantize`` + ``mmasim.gemm``
called directly (the expectations of every emulated op are compositions of these single steps,
never the feature under test; docs/torch.md says what each op's GEMMs are), seeded tensors,
word-for-word comparison, and the examples loaded as modules."""

from __future__ import annotations

import importlib.util
import pathlib

import numpy as np

import mmasim
from mmasim.arith import binary32

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: A100 bf16 HMMA.16816 (the A100-bf16 preset): operands cast to bf16, tiles M 16, N 8, K 16
A100 = ("A100", "mma.sync.m16n8k16.f32.bf16.bf16.f32")
A100_TILE = (16, 8, 16)
#: H100 wgmma fp8 (the H100-fp8-tensor preset): tiles M 64, N 8, K 32
H100_E4M3 = ("H100", "wgmma.mma_async.k32.f32.e4m3.e4m3")
H100_E5M2 = ("H100", "wgmma.mma_async.k32.f32.e5m2.e4m3")
H100_TILE = (64, 8, 32)
#: the largest finite e4m3 and e5m2 values (OCP 8-bit floating point)
FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}


def _pad(x, rows, cols):
    out = np.zeros((rows, cols), np.float32)
    out[:x.shape[0], :x.shape[1]] = x
    return out


def _up(n, t):
    return -(-max(n, 1) // t) * t


def _values(d):
    d = np.asarray(d)
    return d.view(np.float32) if d.dtype == np.uint32 else d.astype(np.float32)


def direct(a, b, instruction=A100, tile=A100_TILE):
    """``a @ b`` (float32 ``(M, K)`` by ``(K, N)``) with each element cast (RNE) to the
    instruction's A / B format, zero-padded to whole tiles, one mmasim.gemm from a zero start."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    m = mmasim.Model.lookup(*instruction)
    (M, K), N = a.shape, b.shape[1]
    Mp, Np, Kp = _up(M, tile[0]), _up(N, tile[1]), _up(K, tile[2])
    qa = mmasim.quantize(_pad(a, Mp, Kp), m.a_format.key).words
    qb = mmasim.quantize(_pad(b, Kp, Np), m.b_format.key).words
    return _values(mmasim.gemm(qa, qb, None, model=m))[:M, :N]


def direct_tensor_scaled(a, b, instruction=H100_E4M3, tile=H100_TILE):
    """``a @ b`` under per-tensor FP8 scaling: each operand times RN(max / amax), cast, padded
    with +0; D times RN(RN(1/sa) * RN(1/sb)) in binary32."""
    m = mmasim.Model.lookup(*instruction)
    words, inv = [], []
    for x, fmt, shape in ((a, m.a_format, (tile[0], tile[2])), (b, m.b_format, (tile[2], tile[1]))):
        x = np.asarray(x, np.float32)
        s = np.float32(np.float32(FP8_MAX[fmt.key]) / np.float32(np.abs(x).max()))
        w = mmasim.quantize((x * s).astype(np.float32), fmt.key, saturate=True).words
        words.append(np.pad(w, [(0, _up(n, t) - n) for n, t in zip(x.shape, shape)]))
        inv.append(np.float32(np.float32(1) / s))
    d = _values(mmasim.gemm(words[0], words[1], None, model=m))[:a.shape[0], :b.shape[1]]
    return (d * np.float32(inv[0] * inv[1])).astype(np.float32)


def rand(shape, seed, grad=False):
    """A float32 tensor of standard normal values (seeded), requiring gradients with ``grad``."""
    import torch
    t = torch.from_numpy(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))
    return t.requires_grad_() if grad else t


def host(t):
    """A tensor's values as a numpy array."""
    return t.detach().numpy()


def batched(f, a, b, **kw):
    """``f(a[i], b[i])`` stacked."""
    return np.stack([f(x, y, **kw) for x, y in zip(a, b)])


def bits(x):
    """The float32 words of a tensor or array (for word-for-word comparisons, -0 included)."""
    x = x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)
    return np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)


def same(x, y) -> bool:
    """``x`` and ``y`` hold the same float32 words, of the same shape."""
    bx, by = bits(x), bits(y)
    return bx.shape == by.shape and np.array_equal(bx, by)


def example(name: str):
    """``examples/NAME.py`` loaded as a module."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def torch_md() -> str:
    """docs/torch.md with its whitespace runs made single spaces (for sentences that wrap)."""
    return " ".join((ROOT / "docs" / "torch.md").read_text(encoding="utf-8").split())


def tree_sum(x, axis):
    """A float32 sum along ``axis`` in pairwise halves (zeros to a power of two; element i plus element
    i + n/2), the order docs/torch.md fixes for the kernels' sums."""
    x = np.moveaxis(np.asarray(x, np.float32), axis, -1)
    n = 1 << (x.shape[-1] - 1).bit_length()
    x = np.concatenate([x, np.zeros((*x.shape[:-1], n - x.shape[-1]), np.float32)], -1)
    while x.shape[-1] > 1:
        x = (x[..., :x.shape[-1] // 2] + x[..., x.shape[-1] // 2:]).astype(np.float32)
    return x[..., 0]


def ffma(a, b, c):
    """FFMA: a * b + c rounded once to binary32 (mmasim.arith.binary32.fma)."""
    a, b, c = np.broadcast_arrays(*(np.asarray(t, np.float32).astype(np.float64) for t in (a, b, c)))
    return binary32.fma(a, b, c).astype(np.float32)
