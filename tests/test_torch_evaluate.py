"""mmasim.torch.evaluate: per-module output error, the logits' KL divergence, top-1 flips and
perplexity of each emulation against torch's arithmetic, on inputs whose emulated values are
worked by hand (bf16 rounds 1 + 2^-10 to 1, and holds small integers exactly)."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import mmasim.torch as mt  # noqa: E402


def _identity_head():
    """Linear(2, 2) with W = I, no bias: the logits are the input."""
    net = torch.nn.Sequential(torch.nn.Linear(2, 2, bias=False))
    with torch.no_grad():
        net[0].weight.copy_(torch.eye(2))
    return net


def _log_softmax(z):
    z = np.asarray(z, np.float64)
    return z - z.max(-1, keepdims=True) - np.log(np.exp(z - z.max(-1, keepdims=True)).sum(-1, keepdims=True))


def test_logits_kl_flips_and_perplexity_worked_by_hand():
    e = 2.0 ** -10
    x = torch.tensor([[1.0, 1.0 + e], [2.0, 0.0], [0.0, 3.0], [1.0 + e, 1.0]])
    targets = torch.tensor([1, 0, 1, 1])
    ev = mt.evaluate(_identity_head(), x, "A100-bf16", targets=targets, progress=False)
    ref = x.double().numpy()
    emu = np.array([[1, 1], [2, 0], [0, 3], [1, 1]], np.float64)    # bf16(1 + 2^-10) = 1
    lp, lq = _log_softmax(ref), _log_softmax(emu)
    [stats] = ev.logits
    assert stats.kl == pytest.approx(float((np.exp(lp) * (lp - lq)).sum(-1).mean()), rel=1e-12)
    assert (stats.flips, stats.rows) == (1, 4)       # row 0: class 1 -> a tie, argmax 0; row 3 keeps 0
    t = targets.numpy()
    assert ev.reference_perplexity == pytest.approx(math.exp(-lp[np.arange(4), t].mean()), rel=1e-12)
    assert stats.perplexity == pytest.approx(math.exp(-lq[np.arange(4), t].mean()), rel=1e-12)
    assert stats.not_emulated == 0


def test_layer_errors_are_relative_frobenius_and_snr_of_every_module():
    e = 2.0 ** -10
    net = torch.nn.Sequential(torch.nn.Linear(32, 4, bias=False), torch.nn.ReLU())
    with torch.no_grad():
        net[0].weight.fill_(1.0)
    x = torch.full((16, 32), 1.0 + e)
    ev = mt.evaluate(net, x, ["A100-bf16"], progress=False)
    assert ev.modules == ("0", "1", "")                         # in the order they returned
    ref, got = 32 * (1 + e), 32.0
    rel = abs(got - ref) / ref
    for err in ev.layers:
        assert err.rel_fro == pytest.approx(rel, rel=1e-9)
        assert err.snr_db == pytest.approx(20 * math.log10(ref / abs(got - ref)), rel=1e-9)


def test_an_exact_emulation_has_infinite_snr_and_json_gives_null_for_it(tmp_path):
    x = torch.tensor([[1.0, 2.0], [3.0, -1.0]])
    ev = mt.evaluate(_identity_head(), x, {"bf16": "A100-bf16", "fp8": mt.preset("H100-fp8-tensor")},
                     progress=False)
    assert ev.emulations == ("bf16", "fp8")
    bf16 = [e for e in ev.layers if e.emulation == "bf16"]
    assert all(e.snr_db == math.inf and e.rel_fro == 0 for e in bf16)
    doc = json.loads(json.dumps(ev.to_json(), allow_nan=False))
    assert doc["schema"] == "mmasim.evaluate/1" and doc["reference_perplexity"] is None
    assert {d["snr_db"] for d in doc["layers"] if d["emulation"] == "bf16"} == {None}
    assert [d["emulation"] for d in doc["logits"]] == ["bf16", "fp8"]
    table = ev.table()
    assert "reference (torch)" in table and "module (SNR dB)" in table and "inf" in table
    path = tmp_path / "eval.png"
    ev.plot(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(ev.traces) == {"bf16", "fp8"} and all(c.emulated for c in ev.traces["fp8"].calls)


def test_bad_evaluate_arguments_are_emulation_errors():
    net = _identity_head()
    x = torch.ones(1, 2)
    for bad, match in [((torch.ones(2), x, "A100-bf16"), "needs a torch.nn.Module"),
                       ((net, x, 5), "emulations must be"),
                       ((net, x, [5]), "emulations are preset names"),
                       ((net, x, []), "no emulation given")]:
        with pytest.raises(mt.EmulationError, match=match):
            mt.evaluate(*bad, progress=False)
    with pytest.raises(mt.UnknownPreset):
        mt.evaluate(net, x, "A100-bf61", progress=False)
