"""examples/digits_mlp.py, shortened: emulated training is bit-reproducible and differs from
FP32 where the formats say it must (docs/torch.md)."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "digits_mlp.py"


def _example():
    spec = importlib.util.spec_from_file_location("digits_mlp", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("preset", ["A100-bf16", "H100-fp8-tensor"])
def test_emulated_training_is_bit_reproducible_and_differs_from_fp32(preset):
    ex = _example()
    fp32 = ex.train(None, epochs=1, steps=3)
    one = ex.train(preset, epochs=1, steps=3)
    two = ex.train(preset, epochs=1, steps=3)
    assert one[0] == two[0]                                        # the same losses, bit for bit
    assert all(torch.equal(p, q) for p, q in zip(one[2], two[2]))  # the same weights
    # bf16 / fp8 operands cannot hold the f32 inputs and weights: the runs must part
    assert one[0] != fp32[0]
    assert not all(torch.equal(p, q) for p, q in zip(one[2], fp32[2]))
