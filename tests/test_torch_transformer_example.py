"""examples/stdlib_transformer.py: a shrunken run trains on the standard library's text and
every GEMM of the evaluated model (projections, MLP, head, attention's QK^T and PV) is emulated;
docs/torch.md states the example's settings (docs/torch.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from torch_direct import example, torch_md  # noqa: E402

pytestmark = pytest.mark.filterwarnings("error")


def _example():
    return example("stdlib_transformer")


def test_shrunken_example_trains_and_emulates_every_gemm_of_the_transformer():
    ex = _example()
    train, test = ex.split(ex.text(1 << 16))
    assert len(train) == (1 << 16) * 9 // 10
    net = ex.model(width=16, heads=2, layers=4, mlp=32, context=16)
    losses = ex.train(net, train, steps=40, sequences=8, context=16)
    assert np.mean(losses[-10:]) < np.mean(losses[:10]) - 0.5, losses
    x, y = ex.held_out(test, sequences=2, context=16)
    ev = ex.evaluate(net, x, y, ["A100-bf16", "B200-nvfp4"], progress=False)
    assert math.isfinite(ev.reference_perplexity)
    for stats in ev.logits:
        assert math.isfinite(stats.perplexity) and stats.kl >= 0 and stats.not_emulated == 0
    for trace in ev.traces.values():
        calls = trace.calls
        assert calls and all(c.emulated for c in calls)
        parts = {(c.module, c.part) for c in calls}
        assert {(f"blocks.{i}.attn", p) for i in range(4) for p in ("QK^T", "PV")} <= parts
        assert ("head", "") in parts


def test_docs_state_the_examples_settings():
    ex = _example()
    sentence = (f"{ex.LAYERS} blocks of width {ex.WIDTH} with {ex.HEADS} heads, an MLP of {ex.MLP}, a context of "
                f"{ex.CONTEXT} bytes) for {ex.STEPS} steps of AdamW (learning rate {ex.LR}, batches of {ex.BATCH})")
    doc = torch_md()
    assert sentence in doc, "docs/torch.md no longer states the transformer example's settings"
    assert "python examples/stdlib_transformer.py --out docs/stdlib_transformer.png" in doc
