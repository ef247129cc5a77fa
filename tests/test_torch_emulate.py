"""mmasim.torch.emulate as a block: ops intercepted, not modules patched (deepcopy, no_grad,
nested blocks, exceptions), the trace, ops that are not emulated (warned, raised, or accepted
only when asked), per-module emulations (docs/torch.md)."""

from __future__ import annotations

import copy
import json
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

import mmasim  # noqa: E402
import mmasim.torch as mt  # noqa: E402
from torch_direct import H100_TILE, direct, direct_tensor_scaled, host, rand, same  # noqa: E402


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(16, 12, bias=False), torch.nn.ReLU(), torch.nn.Linear(12, 4, bias=False))


def _mlp_direct(net, x, f=direct):
    h = np.maximum(f(x, host(net[0].weight).T), 0)
    return f(h, host(net[2].weight).T)


def _hooks():
    m = torch.nn.modules.module
    return len(m._global_forward_pre_hooks) + len(m._global_forward_hooks)


def test_without_a_model_every_op_in_the_block_is_emulated():
    a, b = rand((5, 20), 1), rand((20, 3), 2)
    with mt.emulate(None, "A100-bf16") as trace:
        y = a @ b                                     # no module at all
    assert same(y, direct(host(a), host(b)))
    assert [(c.op, c.module, c.emulated) for c in trace.calls] == [("torch.Tensor.matmul", None, True)]


def test_emulate_changes_no_module_and_leaves_no_hook():
    net = _mlp()
    x = rand((8, 16), 3)
    before = {id(m): dict(m.__dict__) for m in net.modules()}
    with mt.emulate(net, "A100-bf16") as trace, torch.no_grad():
        inside = net(x)
        assert all(m.__dict__.keys() == before[id(m)].keys() for m in net.modules())
    assert _hooks() == 0
    assert same(inside, _mlp_direct(net, host(x)))
    assert torch.equal(net(x), _mlp()(x))                       # torch's float32 again
    assert [c.module for c in trace.calls] == ["0", "2"]


def test_a_deepcopy_made_in_the_block_computes_with_its_own_weights():
    net = _mlp()
    x = rand((8, 16), 4)
    with mt.emulate(net, "A100-bf16") as trace, torch.no_grad():
        twin = copy.deepcopy(net)
        twin[0].weight.mul_(2)
        theirs = twin(x)                              # not the model: torch's float32, its own weights
        ours = net(x)
    assert torch.equal(theirs, F.linear(F.relu(F.linear(x, twin[0].weight)), twin[2].weight))
    assert same(ours, _mlp_direct(net, host(x)))
    assert [c.reason for c in trace.calls if not c.emulated] == ["outside the model"] * 2
    assert _hooks() == 0 and "forward" not in twin[0].__dict__
    with mt.emulate(None, "A100-bf16"), torch.no_grad():
        twin2 = copy.deepcopy(net)
        twin2[0].weight.mul_(2)
        y = twin2(x)                                  # no model: every op, the copy's too
    assert same(y, _mlp_direct(twin2, host(x)))
    assert torch.equal(twin2(x), F.linear(F.relu(F.linear(x, twin2[0].weight)), twin2[2].weight))


def test_no_grad_gives_the_same_words_and_no_graph():
    net = _mlp()
    x = rand((8, 16), 5)
    with mt.emulate(net, "A100-bf16"):
        with torch.no_grad():
            y0 = net(x)
        y1 = net(x)
    assert y0.grad_fn is None and y1.grad_fn is not None
    assert torch.equal(y0, y1)


def test_the_backward_of_an_op_run_in_the_block_is_emulated_after_the_block_too():
    a, b = rand((6, 16), 6, grad=True), rand((16, 8), 7, grad=True)
    with mt.emulate(None, "A100-bf16") as trace:
        y = a @ b
    dy = rand((6, 8), 8)
    y.backward(dy)
    assert same(a.grad, direct(host(dy), host(b).T)) and same(b.grad, direct(host(dy).T, host(a)).T)
    assert [c.step for c in trace.calls] == ["forward", "dgrad", "wgrad"]


def test_nested_blocks_the_inner_emulation_applies_inside_it_only():
    a, b = rand((64, 32), 9), rand((32, 8), 10)
    with mt.emulate(None, "A100-bf16") as outer:
        first = a @ b
        with mt.emulate(None, "H100-fp8-tensor") as inner:
            second = a @ b
        third = a @ b
    assert same(first, direct(host(a), host(b))) and same(third, first)
    assert same(second, direct_tensor_scaled(host(a), host(b), tile=H100_TILE))
    assert [c.emulation for c in outer.calls] == ["A100-bf16", "A100-bf16"]
    assert [c.emulation for c in inner.calls] == ["H100-fp8-tensor"]


def test_an_exception_in_the_block_ends_it_cleanly():
    net = _mlp()
    x = rand((4, 16), 11)
    with pytest.raises(ZeroDivisionError):
        with mt.emulate(net, "A100-bf16"):
            net(x)
            1 / 0
    assert _hooks() == 0
    assert torch.equal(net(x), _mlp()(x))
    with pytest.raises(RuntimeError):                 # raised inside a module: its stack entry goes too
        with mt.emulate(net, "A100-bf16"):
            net(rand((4, 5), 12))
    assert _hooks() == 0 and not torch.overrides._is_torch_function_mode_enabled()


def test_torch_checks_the_arguments_first_with_its_own_error():
    with mt.emulate(None, "A100-bf16"):
        with pytest.raises(RuntimeError, match="cannot be multiplied"):    # the CPU kernel's words
            torch.mm(torch.ones(2, 3), torch.ones(4, 5))


NOT_EMULATED = {
    "bilinear": (lambda: F.bilinear(rand((2, 3), 1), rand((2, 4), 2), rand((5, 3, 4), 3)),
                 "torch.nn.functional.bilinear", "bilinear form"),
    "complex": (lambda: rand((2, 3), 1).to(torch.complex64) @ rand((3, 2), 2).to(torch.complex64),
                "torch.Tensor.matmul", "complex operand"),
    "integer": (lambda: torch.ones(2, 3, dtype=torch.int64) @ torch.ones(3, 2, dtype=torch.int64),
                "torch.Tensor.matmul", "integer operand"),
    "sparse": (lambda: torch.mm(rand((3, 3), 1).to_sparse(), rand((3, 2), 2)), "torch.mm", "sparse operand"),
    "float8": (lambda: rand((2, 3), 1).to(torch.float8_e4m3fn) @ rand((3, 2), 2).to(torch.float8_e4m3fn),
               "torch.Tensor.matmul", "float8 operand"),
    "lstm": (lambda: torch.nn.LSTM(3, 4)(rand((2, 1, 3), 1)), "torch.lstm", "recurrent layer"),
    "einsum of three": (lambda: torch.einsum("ij,jk,kl->il", rand((2, 3), 1), rand((3, 4), 2), rand((4, 2), 3)),
                        "torch.functional.einsum", "3 operands"),
}


@pytest.mark.parametrize("case", sorted(NOT_EMULATED))
def test_an_op_not_emulated_warns_by_name_by_default(case):
    fn, name, why = NOT_EMULATED[case]
    want = fn()
    with pytest.warns(mt.NotEmulatedWarning, match=f"{name}.*not emulated: .*{why}") as caught:
        with mt.emulate(None, "A100-bf16") as trace:
            got = fn()
            fn()                                       # warned once per op, module and reason
    assert len([w for w in caught if w.category is mt.NotEmulatedWarning]) == 1
    assert torch.equal(got[0] if isinstance(got, tuple) else got, want[0] if isinstance(want, tuple) else want) \
        or case == "lstm"
    [call, _] = [c for c in trace.calls if c.op == name]
    assert not call.emulated and why in call.reason


@pytest.mark.parametrize("case", sorted(NOT_EMULATED))
def test_an_op_not_emulated_raises_when_asked(case):
    fn, name, why = NOT_EMULATED[case]
    with pytest.raises(mt.NotEmulated, match=f"{name}.*{why}") as e:
        with mt.emulate(None, "A100-bf16", on_unsupported="raise"):
            fn()
    assert isinstance(e.value, mmasim.MMAError) and isinstance(e.value, mmasim.NotEmulated)


def test_an_op_not_emulated_is_silent_only_when_asked_and_still_traced():
    fn, name, why = NOT_EMULATED["bilinear"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with mt.emulate(None, "A100-bf16", on_unsupported="fp32") as trace:
            fn()
    assert [(c.op, c.emulated) for c in trace.calls] == [(name, False)]


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = torch.nn.Linear(16, 16, bias=False)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(16, 16, bias=False), torch.nn.ReLU())
        self.head = torch.nn.Linear(16, 8, bias=False)

    def forward(self, x):
        return self.head(self.mlp(self.attn(x)))


def test_per_module_emulations_by_name_pattern():
    torch.manual_seed(0)
    net = _Block()
    x = rand((64, 16), 13)
    mapping = {"attn": "A100-bf16", "mlp.*": mt.preset("H100-fp8-tensor"), "head": None}
    with mt.emulate(net, mapping) as trace, torch.no_grad():
        y = net(x)
    h = direct(host(x), host(net.attn.weight).T)
    h = np.maximum(direct_tensor_scaled(h, host(net.mlp[0].weight).T), 0)
    assert same(y, host(F.linear(torch.from_numpy(h), net.head.weight)))      # head: float32, as asked
    assert [(c.module, c.emulation, c.emulated) for c in trace.calls] == [
        ("attn", "A100-bf16", True), ("mlp.0", "H100-fp8-tensor", True), ("head", None, False)]
    assert "as the mapping asks" in trace.calls[2].reason


def test_the_innermost_module_a_pattern_matches_decides():
    torch.manual_seed(0)
    net = _Block()
    x = rand((4, 16), 14)
    with mt.emulate(net, {"mlp": "H100-fp8-tensor", "*": "A100-bf16"}) as trace, torch.no_grad():
        net(x)
    assert [c.emulation for c in trace.calls] == ["A100-bf16", "A100-bf16", "A100-bf16"]   # '*' matches mlp.0
    with mt.emulate(net, {"mlp*": "H100-fp8-tensor", "*": "A100-bf16"}) as trace, torch.no_grad():
        net(x)
    assert [c.emulation for c in trace.calls] == ["A100-bf16", "H100-fp8-tensor", "A100-bf16"]


def test_a_module_no_pattern_matches_warns():
    net = _Block()
    with pytest.warns(mt.NotEmulatedWarning, match="no pattern .* matches module 'head'"):
        with mt.emulate(net, {"attn": "A100-bf16", "mlp*": "A100-bf16"}), torch.no_grad():
            net(rand((4, 16), 15))


def test_bad_emulate_arguments_are_emulation_errors():
    net = _mlp()
    for kwargs, match in [({"on_unsupported": "ignore"}, "on_unsupported must be one of 'warn', 'raise', 'fp32'"),
                          ({"conv_k_order": "nhwc"}, "conv_k_order must be one of 'rsc', 'crs'")]:
        with pytest.raises(mt.EmulationError, match=match):
            with mt.emulate(net, "A100-bf16", **kwargs):
                pass
    with pytest.raises(mt.EmulationError, match="mapping of module-name patterns needs a model"):
        with mt.emulate(None, {"*": "A100-bf16"}):
            pass
    with pytest.raises(mt.EmulationError, match="the mapping's value for 'x' must be"):
        with mt.emulate(net, {"x": 3}):
            pass
    with pytest.raises(mt.EmulationError, match="keys are module-name patterns"):
        with mt.emulate(net, {3: "A100-bf16"}):
            pass
    assert _hooks() == 0
    with pytest.raises(mt.EmulationError, match="'forward', 'dgrad' or 'wgrad', not 'backward'"):
        mt.preset("A100-bf16").for_gemm("backward")


def test_trace_table_and_json():
    net = _mlp()
    x = rand((8, 16), 16, grad=True)
    with mt.emulate(net, "A100-bf16") as trace:
        net(x).sum().backward()
        F.bilinear(rand((2, 3), 1), rand((2, 4), 2), rand((5, 3, 4), 3))          # outside the model
    doc = json.loads(json.dumps(trace.to_json()))
    assert doc["schema"] == "mmasim.trace/1"
    assert doc["summary"] == {"calls": 7, "emulated": 6, "not_emulated": 1,
                              "products_emulated": 3 * (8 * 12 * 16 + 8 * 4 * 12)}
    first = doc["calls"][0]
    assert first == {"op": "torch.nn.functional.linear", "module": "0", "part": "", "step": "forward",
                     "shapes": [[8, 16], [12, 16]], "batch": 1, "m": 8, "n": 12, "k": 16, "products": 1536,
                     "k_order": None, "emulation": "A100-bf16", "instruction": "mma.sync.m16n8k16.f32.bf16.bf16.f32",
                     "emulated": True, "reason": ""}
    table = trace.table()
    rows = [line.split() for line in table.splitlines()]
    assert ["nn.functional.linear", "0", "forward", "1", "1", "x", "8", "x", "12", "x", "16", "1,536", "A100-bf16",
            "yes"] in rows
    assert ["nn.functional.bilinear", "-", "forward", "1", "-", "-", "-", "no:", "outside", "the", "model"] in rows
    assert "7 GEMM calls, 6 emulated, 1 not emulated" in table


def test_every_op_name_is_the_name_the_mode_gives_that_function():
    from mmasim.torch.ops import COMPOSITES, HANDLERS, NOT_EMULATED, op_name
    for name in [*HANDLERS, *COMPOSITES, *NOT_EMULATED]:
        obj = torch
        for part in name.split(".")[1:]:
            obj = getattr(obj, part, None)
        if name in NOT_EMULATED and obj is None:
            continue                                   # a private function this torch has not
        assert obj is not None and op_name(obj) == name, name


def test_the_example_at_the_top_of_docs_torch_md_runs_and_emulates_every_gemm(capsys):
    import pathlib
    import re
    doc = (pathlib.Path(__file__).resolve().parent.parent / "docs" / "torch.md").read_text(encoding="utf-8")
    scope = {}
    exec(re.search(r"```python\n(.*?)```", doc, re.S).group(1), scope)
    assert scope["trace"].calls and all(c.emulated for c in scope["trace"].calls)
    assert "5 GEMM calls, 5 emulated, 0 not emulated" in capsys.readouterr().out
