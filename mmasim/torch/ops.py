"""Which torch functions multiply matrices, and how each is emulated.

:data:`HANDLERS` maps a torch function (by ``torch.overrides.resolve_name``'s name) to its
lowering: a handler reads the call's arguments, checks its operands and returns the computation
(a function of nothing, run once the emulation is chosen) or raises
:class:`~mmasim.torch.contract.NotAGemm`.  :data:`NOT_EMULATED` names the functions that
multiply matrices but are not emulated, each with the reason a trace and a warning give.
"""

from __future__ import annotations

from mmasim.errors import EmulationError
from mmasim.torch.attention import sdpa, sdpa_args
from mmasim.torch.contract import (NotAGemm, contract, einsum_call, einsum_labels, inner_labels, linear,
                                   matmul, matmul_labels, tensordot_labels)
from mmasim.torch.conv import Spec, conv, geometry
from mmasim.torch.function import torch_

#: float dtypes whose values the emulation reads exactly (as float32, or float64 values)
FLOATS = ("float16", "bfloat16", "float32", "float64")


def problem(t):
    """Why the tensor ``t`` cannot be a GEMM operand here, or ``None``."""
    torch = torch_()
    if not isinstance(t, torch.Tensor):
        return None
    if t.layout != torch.strided:
        return f"a sparse operand ({str(t.layout).removeprefix('torch.')})"
    if t.is_nested:
        return "a nested-tensor operand"
    if t.device.type == "meta":
        return "a meta-tensor operand (it holds no values)"
    if str(t.dtype).removeprefix("torch.") not in FLOATS:
        kind = "complex" if t.is_complex() else "float8" if t.is_floating_point() else "integer"
        return f"a {kind} operand ({str(t.dtype).removeprefix('torch.')}; emulated: {', '.join(FLOATS)})"
    if type(t) is not torch.Tensor and not isinstance(t, torch.nn.Parameter):
        return f"a tensor subclass operand ({type(t).__name__})"
    return None


class Op:
    """One intercepted call, as a handler sees it: ``name``, ``func``, ``args``, ``kwargs``; after
    the handler, the session sets ``em`` (the :class:`~mmasim.torch.Emulation`), ``like`` (torch's
    result on meta tensors: its shape and dtype), ``order`` (the convolutions' K order) and
    ``record`` (``record(part)``: the callable a GEMM calls per step it runs)."""

    def __init__(self, name, func, args, kwargs):
        self.name, self.func, self.args, self.kwargs = name, func, args, kwargs
        self.em = self.like = self.order = None
        self.record = None

    def bind(self, signature):
        """The arguments as ``signature`` (a function with torch's parameters) names them; a call
        torch would refuse is left to torch (:class:`NotAGemm`)."""
        try:
            return signature(*self.args, **self.kwargs)
        except TypeError:
            raise NotAGemm() from None

    @staticmethod
    def check(*tensors):
        for t in tensors:
            why = problem(t)
            if why:
                raise NotAGemm(why)

    def finish(self, result):
        """``result`` (float32) as torch returns it: its dtype, into ``out=`` or ``self`` for
        in-place methods."""
        like = self.like
        if tuple(result.shape) != tuple(like.shape):
            raise EmulationError(f"mmasim.torch: {self.name} gave shape {tuple(result.shape)} where torch gives "
                                 f"{tuple(like.shape)} (a bug in its lowering: please report it)")
        result = result.to(like.dtype)
        method = self.name.rpartition(".")[2]
        if method.endswith("_") and not method.startswith("__"):       # in place: self holds the result
            return self.args[0].copy_(result)
        out = self.kwargs.get("out")
        if out is not None:
            out.resize_(result.shape)
            return out.copy_(result)
        return result


def _pair(input, other, *, out=None):
    return input, other


def _rpair(self, other):
    return other, self


def _addmm(input, mat1, mat2, *, beta=1, alpha=1, out=None):
    return input, mat1, mat2, beta, alpha


def _linear_args(input, weight, bias=None):
    return input, weight, bias


def _tensordot_args(a, b, dims=2, out=None):
    return a, b, dims


def epilogue(d, c=None, alpha=1, beta=1, empty=False):
    """``alpha * d + beta * c`` in float32 by torch, the GEMM's epilogue (``c`` ``None``: no
    addend).  With no product (``empty``: K = 0) torch returns ``beta * c`` itself, -0 kept, where
    ``+0 + c`` would give +0; ``torch.where`` keeps ``d`` in the graph for its empty gradients."""
    torch = torch_()
    f32 = torch.float32
    if empty:
        base = torch.zeros_like(d) if c is None or beta == 0 else (c.to(f32) * beta if beta != 1 else c.to(f32))
        return torch.where(torch.ones((), dtype=torch.bool, device=d.device), base.expand(d.shape), d)
    r = d if alpha == 1 else d * alpha
    if c is not None and beta != 0:
        r = r + (c.to(f32) if beta == 1 else c.to(f32) * beta)
    return r


def _matmul(op):
    a, b = op.bind(_pair)
    op.check(a, b)
    return lambda: matmul(a, b, op.em, op.record())


def _rmatmul(op):
    a, b = op.bind(_rpair)
    op.check(a, b)
    return lambda: matmul(a, b, op.em, op.record())


def _inner(op):
    a, b = op.bind(_pair)
    op.check(a, b)
    labels = inner_labels(a.dim(), b.dim())
    return lambda: contract(a, b, *labels, op.em, op.record())


def _tensordot(op):
    a, b, dims = op.bind(_tensordot_args)
    op.check(a, b)
    labels = tensordot_labels(a.dim(), b.dim(), dims)
    return lambda: contract(a, b, *labels, op.em, op.record())


def _einsum(op):
    equation, operands = einsum_call(op.args)
    if len(operands) == 2:
        op.check(*operands)
    labels = einsum_labels(equation, [t.dim() for t in operands])
    return lambda: contract(operands[0], operands[1], *labels, op.em, op.record())


def _linear(op):
    x, w, bias = op.bind(_linear_args)
    op.check(x, w)
    return lambda: epilogue(linear(x, w, op.em, op.record()), bias, empty=x.shape[-1] == 0)


def _added(labels):
    """``addmm``-like: ``beta * input + alpha * (the contraction of the two others)``."""
    def handler(op):
        c, a, b, beta, alpha = op.bind(_addmm)
        op.check(c, a, b)
        la, lb, lo = labels(a.dim(), b.dim())
        empty = any(a.shape[la.index(x)] == 0 for x in la if x in lb and x not in lo)
        return lambda: epilogue(contract(a, b, la, lb, lo, op.em, op.record()), c, alpha, beta, empty)
    return handler


def _addbmm_labels(da, db):
    return ["x", "m", "k"], ["x", "k", "n"], ["m", "n"]


def _conv_args(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return input, weight, bias, stride, padding, dilation, groups


def _conv_transpose_args(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    return input, weight, bias, stride, padding, dilation, groups


def _conv(nd: int, transposed: bool):
    def handler(op):
        x, w, bias, stride, padding, dilation, groups = op.bind(_conv_transpose_args if transposed else _conv_args)
        op.check(x, w)

        def compute():
            batched = x.dim() == nd + 2
            xb = x if batched else x.unsqueeze(0)
            geo = geometry(nd, w.shape[2:], stride, padding, dilation, groups)
            size = tuple(op.like.shape[-nd:])
            y = conv(xb, w, Spec(geo, transposed, size, op.em, op.order, op.record()))
            if bias is not None:
                y = y + bias.to(torch_().float32).reshape(-1, *(1,) * nd)
            return y if batched else y.squeeze(0)
        return compute
    return handler


def _sdpa(op):
    q, k, v, mask, dropout_p, is_causal, scale, gqa = op.bind(sdpa_args)
    op.check(q, k, v)
    return lambda: sdpa(q, k, v, mask, dropout_p, is_causal, scale, gqa, op.em, op.record("QK^T"), op.record("PV"))


_MATMULS = ("torch.matmul", "torch.Tensor.matmul", "torch.Tensor.__matmul__", "torch.linalg.matmul",
            "torch.mm", "torch.Tensor.mm", "torch.bmm", "torch.Tensor.bmm", "torch.mv", "torch.Tensor.mv",
            "torch.dot", "torch.Tensor.dot", "torch.vdot", "torch.Tensor.vdot")

#: torch function name -> handler
HANDLERS = {
    **{name: _matmul for name in _MATMULS},
    "torch.Tensor.__rmatmul__": _rmatmul,
    "torch.inner": _inner, "torch.Tensor.inner": _inner,
    "torch.functional.tensordot": _tensordot,
    "torch.functional.einsum": _einsum,
    "torch.nn.functional.linear": _linear,
    **{f"{ns}.{op}{inplace}": _added(matmul_labels) for ns in ("torch", "torch.Tensor") for op in ("addmm", "addmv",
                                                                                                   "baddbmm")
       for inplace in ("", "_") if ns == "torch.Tensor" or not inplace},
    **{f"{ns}.addbmm{inplace}": _added(_addbmm_labels) for ns, inplace in
       (("torch", ""), ("torch.Tensor", ""), ("torch.Tensor", "_"))},
    **{f"torch.nn.functional.conv{nd}d": _conv(nd, False) for nd in (1, 2, 3)},
    **{f"torch.nn.functional.conv_transpose{nd}d": _conv(nd, True) for nd in (1, 2, 3)},
    "torch.nn.functional.scaled_dot_product_attention": _sdpa,
}

#: run as torch wrote it, each torch call inside it seen (:func:`mmasim.torch.attention.unguarded`)
COMPOSITES = ("torch.nn.functional.multi_head_attention_forward",)

_RNN = "a recurrent layer fused in ATen (its gate GEMMs are not seen one by one)"
_SPARSE = "a sparse matrix product"
_LOW_CONV = "a backend convolution entry point (emulated: torch.nn.functional.conv*)"

#: torch function name -> why it is not emulated though it multiplies matrices
NOT_EMULATED = {
    "torch._scaled_mm": "an FP8 GEMM whose operands the caller quantized (torch._scaled_mm)",
    "torch._scaled_mm_v2": "an FP8 GEMM whose operands the caller quantized (torch._scaled_mm_v2)",
    "torch._scaled_grouped_mm": "a grouped FP8 GEMM whose operands the caller quantized",
    "torch._grouped_mm": "a grouped GEMM",
    "torch._int_mm": "an integer GEMM",
    "torch.nn.functional.bilinear": "a bilinear form (x1^T A x2)",
    "torch.nn.functional.linear_cross_entropy": "linear and cross entropy fused, in chunks",
    "torch.functional.chain_matmul": "a chain of GEMMs in an order torch chooses",
    "torch.linalg.multi_dot": "a chain of GEMMs in an order torch chooses",
    "torch.functional.cdist": "distances computed through a GEMM",
    "torch.matrix_power": "repeated GEMMs", "torch.Tensor.matrix_power": "repeated GEMMs",
    "torch.linalg.matrix_power": "repeated GEMMs",
    "torch.matrix_exp": "GEMMs of a matrix exponential", "torch.Tensor.matrix_exp": "GEMMs of a matrix exponential",
    "torch.linalg.matrix_exp": "GEMMs of a matrix exponential",
    **{f"torch.{n}": _RNN for n in ("lstm", "gru", "rnn_tanh", "rnn_relu", "lstm_cell", "gru_cell", "rnn_tanh_cell",
                                    "rnn_relu_cell", "quantized_lstm_cell", "quantized_gru_cell",
                                    "quantized_rnn_relu_cell", "quantized_rnn_tanh_cell", "miopen_rnn")},
    "torch._native_multi_head_attention": "attention fused in ATen",
    "torch._transformer_encoder_layer_fwd": "a transformer layer fused in ATen",
    **{f"torch.{n}": _SPARSE for n in ("_sparse_mm", "smm", "hspmm", "sspaddmm", "Tensor.smm", "Tensor.sspaddmm")},
    **{f"torch.{n}": _LOW_CONV for n in ("convolution", "_convolution", "nn.functional.conv_tbc",
                                         "miopen_convolution", "miopen_convolution_transpose",
                                         "miopen_depthwise_convolution", "miopen_convolution_add_relu",
                                         "miopen_convolution_relu", "cudnn_convolution",
                                         "cudnn_convolution_transpose", "mkldnn_convolution")},
    **{f"torch.{n}": "an fbgemm quantized linear layer" for n in (
        "fbgemm_linear_fp16_weight", "fbgemm_linear_fp16_weight_fp32_activation", "fbgemm_linear_int8_weight",
        "fbgemm_linear_int8_weight_fp32_activation")},
}


def op_name(func):
    """``func``'s name as ``torch.overrides.resolve_name`` gives it (``torch.NAME`` for the
    private functions it does not know and for an alias it names otherwise: ``torch.mm``, not
    ``torch.spmm``), ``None`` for what is no torch function."""
    name = _NAMES.get(func, False)
    if name is False:
        from torch.overrides import resolve_name
        try:
            name = resolve_name(func)
        except Exception:            # pragma: no cover - an object resolve_name cannot read
            name = None
        if getattr(func, "__qualname__", "").startswith("_VariableFunctionsClass.") and (
                name is None or name.rpartition(".")[2] != func.__name__):
            name = "torch." + func.__name__          # torch.mm, which resolve_name calls torch.spmm
        try:
            _NAMES[func] = name
        except TypeError:            # pragma: no cover - unhashable
            pass
    return name


_NAMES: dict = {}
