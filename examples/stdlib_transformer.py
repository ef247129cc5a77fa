"""A small decoder-only transformer trained on the standard library's source text, then
evaluated under every mmasim.torch preset (docs/torch.md).

    python examples/stdlib_transformer.py [--steps 600] [--out stdlib_transformer.png] [--json f.json]

The text is this Python's standard library (the ``*.py`` files at the top of
``sysconfig.get_paths()["stdlib"]``, in name order, read as bytes up to ``TEXT_BYTES``): no
download.  A byte-level model (256 classes): ``LAYERS`` pre-LayerNorm blocks, each multi-head
causal self-attention through ``torch.nn.functional.scaled_dot_product_attention`` and a GELU
MLP, trained in float32 by torch (AdamW).  Then :func:`mmasim.torch.evaluate` runs one held-out
batch in torch's arithmetic and under every preset, every GEMM emulated (the projections, the
MLP, the head, and attention's QK^T and PV), and prints the perplexity, KL and top-1 flips of
each and each module's SNR, and draws them.  Where mmasim offers a CUDA backend the GEMMs run
there (``MMASIM_BACKEND`` chooses otherwise).
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
import sysconfig
import time

import numpy as np

#: the settings docs/torch.md states (tests/test_torch_transformer_example.py checks both agree)
TEXT_BYTES = 1 << 20
CONTEXT = 64
WIDTH = 64
HEADS = 4
LAYERS = 4
MLP = 256
BATCH = 32
STEPS = 600
LR = 3e-3
EVAL_SEQUENCES = 8
SEED = 0


def text(limit: int = TEXT_BYTES) -> np.ndarray:
    """The standard library's top-level source files, in name order, as bytes (at most ``limit``)."""
    root = pathlib.Path(sysconfig.get_paths()["stdlib"])
    out, n = [], 0
    for path in sorted(root.glob("*.py")):
        data = path.read_bytes()
        out.append(data[:limit - n])
        n += len(out[-1])
        if n >= limit:
            break
    return np.frombuffer(b"".join(out), dtype=np.uint8)


def split(data: np.ndarray):
    """(training bytes, held-out bytes): the last tenth is held out."""
    cut = len(data) * 9 // 10
    return data[:cut], data[cut:]


def batch(data: np.ndarray, rng, sequences: int, context: int = CONTEXT):
    """``sequences`` random windows: (inputs, next bytes), int64 tensors ``(sequences, context)``."""
    import torch
    start = rng.integers(0, len(data) - context - 1, size=sequences)
    idx = start[:, None] + np.arange(context + 1)
    w = torch.from_numpy(data[idx].astype(np.int64))
    return w[:, :-1], w[:, 1:]


def model(width: int = WIDTH, heads: int = HEADS, layers: int = LAYERS, mlp: int = MLP, context: int = CONTEXT,
          seed: int = SEED):
    """The decoder-only transformer (float32)."""
    import torch
    from torch import nn
    F = nn.functional

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (y.view(b, t, heads, d // heads).transpose(1, 2) for y in self.qkv(x).split(d, -1))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(a.transpose(1, 2).reshape(b, t, d))

    class MLPBlock(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(width, mlp)
            self.fc2 = nn.Linear(mlp, width)

        def forward(self, x):
            return self.fc2(F.gelu(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.attn = nn.LayerNorm(width), Attention()
            self.ln2, self.mlp = nn.LayerNorm(width), MLPBlock()

        def forward(self, x):
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(256, width)
            self.position = nn.Embedding(context, width)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.ln = nn.LayerNorm(width)
            self.head = nn.Linear(width, 256, bias=False)

        def forward(self, idx):
            x = self.embed(idx) + self.position(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.head(self.ln(x))

    torch.manual_seed(seed)
    return Decoder()


def train(net, data: np.ndarray, steps: int = STEPS, sequences: int = BATCH, lr: float = LR, seed: int = SEED,
          context: int = CONTEXT, progress=None) -> list:
    """AdamW on random windows of ``data`` (float32, torch's own GEMMs); the loss of each step."""
    import torch
    opt = torch.optim.AdamW(net.parameters(), lr=lr)
    rng = np.random.default_rng(seed)
    losses = []
    net.train()
    for _ in range(steps):
        x, y = batch(data, rng, sequences, context)
        loss = torch.nn.functional.cross_entropy(net(x).reshape(-1, 256), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if progress is not None:
            progress.update(1)
    net.eval()
    return losses


def held_out(data: np.ndarray, sequences: int = EVAL_SEQUENCES, context: int = CONTEXT, seed: int = SEED):
    """The evaluation batch: ``sequences`` windows of the held-out bytes (inputs, targets)."""
    return batch(data, np.random.default_rng(seed + 1), sequences, context)


def evaluate(net, x, y, presets=None, progress=None):
    """:func:`mmasim.torch.evaluate` of ``net`` on ``(x, y)`` under ``presets`` (default: every preset)."""
    import mmasim.torch as mt
    return mt.evaluate(net, x, list(presets or mt.presets()), targets=y, progress=progress)


def use_cuda_backend() -> str:
    """``cuda`` where mmasim offers that backend and ``MMASIM_BACKEND`` is not set, else the backend set."""
    from mmasim import backends
    if "cuda" in backends.available() and not os.environ.get(backends.ENV):
        os.environ[backends.ENV] = "cuda"
    return os.environ.get(backends.ENV) or "auto"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--presets", default="", help="comma-separated mmasim.torch presets (default: every preset)")
    ap.add_argument("--out", default="stdlib_transformer.png", help="the figure (PNG)")
    ap.add_argument("--json", default=None, help="also write the mmasim.evaluate/1 document here")
    args = ap.parse_args(argv)
    import torch
    from tqdm import tqdm

    backend = use_cuda_backend()
    train_bytes, test_bytes = split(text())
    net = model()
    t0 = time.perf_counter()
    with tqdm(total=args.steps, desc="training (float32)", unit=" step", file=sys.stderr) as bar:
        losses = train(net, train_bytes, args.steps, progress=bar)
    trained = time.perf_counter() - t0
    x, y = held_out(test_bytes)
    t0 = time.perf_counter()
    presets = [p for p in args.presets.split(",") if p] or None
    ev = evaluate(net, x, y, presets, progress=True)
    print(f"{len(train_bytes):,} training bytes of the Python {sys.version.split()[0]} standard library, "
          f"{sum(p.numel() for p in net.parameters()):,} parameters, {args.steps} steps in {trained:.0f} s "
          f"(torch {torch.__version__}, {torch.get_num_threads()} threads); final training loss "
          f"{np.mean(losses[-50:]):.3f}; evaluated in {time.perf_counter() - t0:.0f} s (backend {backend})")
    print()
    print(ev.table())
    ev.plot(args.out)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(ev.to_json(), indent=1))
    print("figure:", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
