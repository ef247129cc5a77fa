"""The steps the attention models share (mmasim/torch/attention_steps.py): the fixed order of the
float32 sums, FFMA rounded once, and the gradients of the exact rules.  Expectations worked by hand."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from mmasim.torch import attention_steps as steps  # noqa: E402


def _bits(t):
    return [v & 0xFFFFFFFF for v in t.float().view(torch.int32).tolist()]


def test_tree_sum_adds_in_pairwise_halves_whatever_torch_would_do():
    # [2^-24, 1, 2^-24] padded to [2^-24, 1, 2^-24, 0]: (2^-24 + 2^-24) + (1 + 0) = 1 + 2^-23, exactly;
    # left to right, 2^-24 + 1 ties to 1 and so does 1 + 2^-24: 1
    x = torch.tensor([[2.0 ** -24, 1.0, 2.0 ** -24]])
    assert steps.tree_sum(x).tolist() == [1 + 2.0 ** -23]
    assert steps.tree_sum(x.T, 0).tolist() == [1 + 2.0 ** -23]
    # eight: ((x0 + x4) + (x2 + x6)) + ((x1 + x5) + (x3 + x7)): x0 + x4 = 1 + 2^-24 ties to 1, and
    # 1 + (x2 + x6) = 1 + 2^-24 again (summed from the left, 2^-24 + 2^-24 would make 1 + 2^-23)
    y = torch.tensor([1.0, 0, 0, 0, 2.0 ** -24, 0, 2.0 ** -24, 0])
    assert steps.tree_sum(y).item() == 1.0
    assert steps.tree_sum(torch.zeros(2, 0)).tolist() == [0.0, 0.0]


def test_ffma_rounds_once_where_binary64_then_binary32_would_round_twice():
    # (1 + 2^-12)^2 + 2^-70 = 1 + 2^-11 + 2^-24 + 2^-70: just above the binary32 midpoint 1 + 2^-11 + 2^-24,
    # so FFMA gives 1 + 2^-11 + 2^-23 (0x3F801001); through binary64 the 2^-70 is lost and the tie
    # goes to even: 1 + 2^-11 (0x3F801000)
    a = torch.tensor([1 + 2.0 ** -12, -(1 + 2.0 ** -12), 3.0, 2.0 ** 100])
    b = torch.tensor([1 + 2.0 ** -12, 1 + 2.0 ** -12, 0.5, 2.0 ** 100])
    c = torch.tensor([2.0 ** -70, -(2.0 ** -70), -1.5, 1.0])
    assert _bits(steps.ffma(a, b, c)) == [0x3F801001, 0xBF801001, 0x00000000, 0x7F800000]
    twice = (a.double() * b.double() + c.double()).float()
    assert _bits(twice)[0] == 0x3F801000


def test_ex2_and_ffma_are_differentiable_as_2_to_the_x_and_a_times_b_plus_c():
    x = torch.tensor([0.5, -3.0, 2.0], requires_grad=True)
    steps.ex2(x).sum().backward()
    assert torch.allclose(x.grad, torch.exp2(x.detach()) * np.log(2.0))
    a, b = torch.tensor([2.0, 3.0], requires_grad=True), torch.tensor([5.0, 7.0])
    c = torch.tensor([1.0, 1.0], requires_grad=True)
    steps.ffma(a, b, c).sum().backward()
    assert a.grad.tolist() == [5.0, 7.0] and c.grad.tolist() == [1.0, 1.0]


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_binary32_of_sum_breaks_a_subnormal_tie_by_the_error_word(kind):
    # s = 3 * 2^-150: the midpoint of the subnormals 2^-149 (word 1) and 2^-148 (word 2); s + e above it
    # rounds to word 2, below it to word 1, e = 0 ties to even (word 2); a normal midpoint likewise:
    # 1 + 2^-24 between words 0x3F800000 and 0x3F800001
    from mmasim.arith.ex2 import binary32_of_sum
    s = np.array([3 * 2.0 ** -150] * 3 + [1 + 2.0 ** -24] * 3 + [np.inf, np.nan])
    e = np.array([2.0 ** -210, -2.0 ** -210, 0.0, 2.0 ** -80, -2.0 ** -80, 0.0, np.nan, np.nan])
    if kind == "torch":
        s, e = torch.from_numpy(s), torch.from_numpy(e)
    out = binary32_of_sum(s, e)
    words = np.asarray(out).view(np.uint32).tolist()
    assert words[:7] == [2, 1, 2, 0x3F800001, 0x3F800000, 0x3F800000, 0x7F800000]
    assert np.isnan(np.asarray(out)[7])


_MACHINE = """
import json, sys
import numpy as np
import torch
import torch.nn.functional as F
import attrs
import mmasim.torch as mt

rng = np.random.default_rng(7)
q, k, v = (torch.from_numpy(rng.standard_normal(s).astype(np.float32)) for s in
           ((1, 2, 64, 32), (1, 2, 300, 32), (1, 2, 300, 16)))
out = {}
for name, em in (("sage3-nvfp4", mt.preset("RTX5090-nvfp4-sage3")), ("fa3-fp8", mt.preset("H100-fp8-fa3")),
                 ("fa3-fp8-flash", attrs.evolve(mt.preset("H100-fp8-fa3"), attention="fa3-fp8-flash"))):
    with torch.no_grad(), mt.emulate(None, em):
        y = F.scaled_dot_product_attention(q, k, v)
    out[name] = y.contiguous().view(torch.int32).reshape(-1).tolist()
x = torch.linspace(-20, 20, 400001)
out["control torch"] = int(torch.exp2(x).view(torch.int32).sum())
out["control numpy"] = int(np.exp2(x.numpy()).view(np.uint32).sum())
print(json.dumps(out))
"""


def test_the_kernels_attention_words_do_not_depend_on_the_cpus_simd_level():
    """The FA3 and SageAttention3 modes (ex2, the sums, FFMA: mmasim's rules) give the same words
    with numpy's and torch's SIMD kernels for this CPU and with their baseline ones, where torch's
    and numpy's own exp2 change (the control)."""
    import json
    import os
    import subprocess
    import sys

    try:
        from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__
    except ImportError:                 # numpy 1.x
        from numpy.core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    lowered = dict(os.environ, ATEN_CPU_CAPABILITY="default",
                   NPY_DISABLE_CPU_FEATURES=" ".join(f for f in __cpu_dispatch__ if __cpu_features__.get(f)))
    runs = []
    for env in (dict(os.environ), lowered):
        env.pop("MMASIM_BACKEND", None)
        r = subprocess.run([sys.executable, "-c", _MACHINE], capture_output=True, text=True, env=env, timeout=600)
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    if runs[0]["control torch"] == runs[1]["control torch"] and runs[0]["control numpy"] == runs[1]["control numpy"]:
        pytest.skip("this CPU's SIMD kernels and the baseline ones give the same exp2: nothing to compare")
    for mode in ("sage3-nvfp4", "fa3-fp8", "fa3-fp8-flash"):
        assert runs[0][mode] == runs[1][mode], mode


def test_fa3_fp8s_backward_runs_through_the_exact_steps():
    """``"fa3-fp8"`` has a backward (docs/torch.md): its ex2 and FFMA steps pass gradients on."""
    import mmasim.torch as mt

    g = torch.Generator().manual_seed(11)
    q, k, v = (torch.randn(1, 1, 8, 16, generator=g).requires_grad_() for _ in range(3))
    with mt.emulate(None, "H100-fp8-fa3"):
        y = torch.nn.functional.scaled_dot_product_attention(q, k, v)
    y.square().sum().backward()
    for t in (q, k, v):
        assert t.grad is not None and bool(torch.isfinite(t.grad).all()) and float(t.grad.abs().max()) > 0
