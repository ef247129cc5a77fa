"""Train a small MLP on scikit-learn's digits with every GEMM emulated (docs/torch.md).

    python examples/digits_mlp.py [--epochs 8] [--presets A100-bf16,H100-fp8-tensor,...] [--out digits.png]

One FP32 run (torch's own GEMMs) and one run per preset, from the same initial weights and
the same batches, SGD with momentum (``LR``, ``MOMENTUM``, batches of ``BATCH``): each preset's
forward, input-gradient and weight-gradient GEMMs go through ``mmasim.torch.emulate``.  Writes
the loss and test-accuracy curves of every run as one figure, and prints the final numbers and
the seconds each run took.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

#: the training settings docs/torch.md states (tests/test_torch_example.py checks both agree)
EPOCHS = 8
BATCH = 128
LR = 0.1
MOMENTUM = 0.9
HIDDEN = 64
DEFAULT_PRESETS = ("A100-bf16", "H100-fp8-tensor", "H100-fp8-deepseek", "B200-mxfp8", "B200-nvfp4")


def data(seed: int = 0):
    """Digits (1,797 8x8 images, 10 classes) scaled to [0, 1], split 1,437 / 360."""
    from sklearn.datasets import load_digits
    x, y = load_digits(return_X_y=True)
    x = (x / 16.0).astype(np.float32)
    order = np.random.default_rng(seed).permutation(len(x))
    x, y = x[order], y[order]
    return (x[:1437], y[:1437]), (x[1437:], y[1437:])


def model(seed: int = 0, hidden: int = HIDDEN):
    import torch
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(64, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 10))


def train(emulation, epochs: int, batch: int = BATCH, seed: int = 0, steps: int | None = None, progress=None):
    """(losses per step, test accuracy per epoch, final parameters) of one run; ``emulation``
    ``None`` is the FP32 baseline."""
    import contextlib

    import torch

    import mmasim.torch as mt

    (xtr, ytr), (xte, yte) = data(seed)
    net = model(seed)
    opt = torch.optim.SGD(net.parameters(), lr=LR, momentum=MOMENTUM)
    rng = np.random.default_rng(seed)
    losses, accs = [], []
    xte_t, yte_t = torch.from_numpy(xte), torch.from_numpy(yte)
    ctx = contextlib.nullcontext() if emulation is None else mt.emulate(net, emulation)
    done = 0
    with ctx:
        for _ in range(epochs):
            order = rng.permutation(len(xtr))
            for s in range(0, len(order), batch):
                idx = order[s:s + batch]
                xb, yb = torch.from_numpy(xtr[idx]), torch.from_numpy(ytr[idx])
                loss = torch.nn.functional.cross_entropy(net(xb), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
                losses.append(loss.item())
                done += 1
                if progress is not None:
                    progress.update(1)
                if steps is not None and done >= steps:
                    break
            with torch.no_grad():
                accs.append(float((net(xte_t).argmax(1) == yte_t).float().mean()))
            if steps is not None and done >= steps:
                break
    params = [p.detach().clone() for p in net.parameters()]
    return losses, accs, params


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=EPOCHS)
    ap.add_argument("--presets", default=",".join(DEFAULT_PRESETS), help="comma-separated mmasim.torch presets")
    ap.add_argument("--out", default="digits_mlp.png", help="the figure (PNG)")
    args = ap.parse_args(argv)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from tqdm import tqdm

    names = [p for p in args.presets.split(",") if p]
    runs = {}
    steps_per_run = args.epochs * -(-1437 // BATCH)
    with tqdm(total=steps_per_run * (len(names) + 1), desc="training", unit=" step", file=sys.stderr) as bar:
        for name in [None] + names:
            t0 = time.perf_counter()
            losses, accs, _ = train(name, args.epochs, progress=bar)
            runs[name or "FP32 (torch)"] = (losses, accs, time.perf_counter() - t0)
    fig, (ax1, ax3, ax2) = plt.subplots(1, 3, figsize=(15, 4.4))
    base = np.array(runs["FP32 (torch)"][0])
    for i, (label, (losses, accs, _)) in enumerate(runs.items()):
        color = f"C{i}"
        steps = np.arange(1, len(losses) + 1)
        ax1.plot(steps, losses, label=label, lw=1.2, color=color)
        if i:
            ax3.plot(steps, np.maximum(np.abs(np.array(losses) - base), 1e-9), label=label, lw=1.0, color=color)
        ax2.plot(np.arange(1, len(accs) + 1), np.array(accs) * 100, marker="o", label=label, lw=1.2, color=color)
    ax1.set(xlabel="step", ylabel="training loss (cross-entropy)", yscale="log", title="Loss")
    ax3.set(xlabel="step", ylabel="|loss - FP32 loss|", yscale="log", title="How far each run is from FP32")
    ax2.set(xlabel="epoch", ylabel="test accuracy (%)", title="Accuracy (360 held-out digits)")
    for ax in (ax1, ax2, ax3):
        ax.grid(alpha=0.3)
    ax2.legend(fontsize=8, loc="lower right")
    fig.suptitle(f"MLP 64-{HIDDEN}-10 on scikit-learn digits, SGD (lr {LR}, momentum {MOMENTUM}, batches of {BATCH}): "
                 "every GEMM emulated bit for bit by mmasim")
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    for label, (losses, accs, secs) in runs.items():
        print(f"{label:20s} final loss {losses[-1]:.4f}  test accuracy {accs[-1] * 100:.1f} %  ({secs:.0f} s)")
    print("figure:", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
