"""``emulate``: every matrix-multiplying torch op inside a block through emulated GEMMs.

A ``torch.overrides.TorchFunctionMode`` sees each torch function called in the block (the mode
is per thread, as torch's modes are).  A function of :data:`mmasim.torch.ops.HANDLERS` is
lowered to emulated GEMMs whose autograd Functions (:mod:`mmasim.torch.function`,
:mod:`mmasim.torch.conv`) emulate the backward GEMMs too, wherever the backward runs; one of
:data:`mmasim.torch.ops.NOT_EMULATED`, or an operand the emulation cannot read, runs in torch's
arithmetic and is reported (``on_unsupported``).  Every GEMM is a :class:`~mmasim.torch.trace.Call`
of the block's :class:`~mmasim.torch.trace.Trace`.  No module is changed: module names come from
global module hooks (a stack of the modules running in this thread), removed when the block ends.
"""

from __future__ import annotations

import collections.abc
import contextlib
import fnmatch
import reprlib
import threading
import warnings

from mmasim.errors import EmulationError, NotEmulated, NotEmulatedWarning
from mmasim.torch.attention import unguarded
from mmasim.torch.contract import NotAGemm
from mmasim.torch.conv import K_ORDERS
from mmasim.torch.emulation import Emulation, preset, presets
from mmasim.torch.function import torch_
from mmasim.torch.ops import COMPOSITES, HANDLERS, NOT_EMULATED, Op, op_name
from mmasim.torch.trace import Call, Trace

#: what ``on_unsupported`` takes
ON_UNSUPPORTED = ("warn", "raise", "fp32")


def label(em: Emulation) -> str:
    """A preset's name where ``em`` is one, else ``"arch instruction"``."""
    for name, p in presets().items():
        if p == em:
            return name
    return f"{em.arch} {em.instruction}"


def _setting(value, where: str):
    """``(Emulation, its label)`` of a preset name or an Emulation."""
    if isinstance(value, str):
        return preset(value), value
    if isinstance(value, Emulation):
        return value, label(value)
    raise EmulationError(f"emulate: {where} must be an mmasim.torch.Emulation or a preset name (mmasim presets)"
                         f"{' or None (float32, as asked)' if 'mapping' in where else ''}, not "
                         f"{reprlib.repr(value)} ({type(value).__name__})")


def _shapes(args, kwargs) -> tuple:
    torch = torch_()
    out = []
    for a in (*args, *kwargs.values()):
        for t in (a if isinstance(a, (list, tuple)) else (a,)):
            if isinstance(t, torch.Tensor):
                out.append(tuple(t.shape))
    return tuple(out)


def _meta(func, args, kwargs):
    """``func`` on meta copies of the tensors (their shapes, strides, dtypes and whether they
    require gradients): torch's result shape and dtype, and torch's own error for bad arguments."""
    torch = torch_()
    from torch.utils._pytree import tree_map

    def meta(x):
        if not isinstance(x, torch.Tensor):
            return x
        m = torch.empty_strided(tuple(x.shape), x.stride(), dtype=x.dtype, device="meta")
        if x.requires_grad:
            m.requires_grad_()
            if not x.is_leaf:
                m = m.clone()
        return m

    with torch._C.DisableTorchFunction():
        return func(*tree_map(meta, args), **tree_map(meta, kwargs))


class Session:
    """One ``emulate`` block: the model and its module names, the emulation of each module, the
    trace and what to do with an op that is not emulated."""

    def __init__(self, model, emulation, on_unsupported, conv_k_order):
        torch = torch_()
        if model is not None and not isinstance(model, torch.nn.Module):
            raise EmulationError(f"emulate needs a torch.nn.Module (the model whose ops to emulate) or None "
                                 f"(every op in the block), not {type(model).__name__}")
        if on_unsupported not in ON_UNSUPPORTED:
            raise EmulationError(f"emulate: on_unsupported must be one of {', '.join(map(repr, ON_UNSUPPORTED))}, "
                                 f"not {reprlib.repr(on_unsupported)}")
        if conv_k_order not in K_ORDERS:
            raise EmulationError(f"emulate: conv_k_order must be one of {', '.join(map(repr, K_ORDERS))} (the order "
                                 f"of K = R·S·C), not {reprlib.repr(conv_k_order)}")
        self.model, self.on_unsupported, self.order = model, on_unsupported, conv_k_order
        self.single = None
        self.patterns = []
        if isinstance(emulation, collections.abc.Mapping):
            if model is None:
                raise EmulationError("emulate: a mapping of module-name patterns needs a model (the names are "
                                     "those of model.named_modules())")
            for pattern, value in emulation.items():
                if not isinstance(pattern, str):
                    raise EmulationError(f"emulate: the mapping's keys are module-name patterns (fnmatch, such as "
                                         f"'layers.*.mlp.*'), not {reprlib.repr(pattern)}")
                em, name = (None, None) if value is None else _setting(value, f"the mapping's value for {pattern!r}")
                self.patterns.append((pattern, em, name))
        else:
            self.single = _setting(emulation, "emulation")
        self.trace = Trace()
        self.names = {}
        self._local = threading.local()
        self._warned = set()

    # ---------------------------------------------------------------- modules
    def _stack(self) -> list:
        return self._local.__dict__.setdefault("stack", [])

    def hooks(self) -> list:
        """The global module hooks that keep this thread's stack of running modules."""
        if self.model is None:
            return []
        torch = torch_()
        self.names = {m: n for n, m in self.model.named_modules()}

        def enter(module, args):
            self._stack().append(module)

        def leave(module, args, output):
            stack = self._stack()
            if stack and stack[-1] is module:
                stack.pop()

        mod = torch.nn.modules.module
        return [mod.register_module_forward_pre_hook(enter),
                mod.register_module_forward_hook(leave, always_call=True)]

    def locate(self):
        """``(name of the innermost running module of the model, inside the model)``."""
        if self.model is None:
            return None, True
        stack = self._stack()
        for module in reversed(stack):
            if module not in self.names:           # a module added to the model since the block began
                self.names = {m: n for n, m in self.model.named_modules()}
            name = self.names.get(module)
            if name is not None:
                return name, True
        return None, False

    def choose(self, module):
        """``(Emulation or None, its label, why none, whether none was asked for)`` for ``module``:
        the innermost module (the module, then its parents) a pattern matches decides, the first
        such pattern in the mapping's order."""
        if self.single is not None:
            return (*self.single, "", False)
        parts = module.split(".") if module else []
        for i in range(len(parts), -1, -1):
            name = ".".join(parts[:i])
            for pattern, em, lab in self.patterns:
                if fnmatch.fnmatchcase(name, pattern):
                    if em is None:
                        return None, None, f"float32 as the mapping asks ({pattern!r}: None)", True
                    return em, lab, "", False
        return None, None, f"no pattern of the emulation mapping matches module {module!r}", False

    # ---------------------------------------------------------------- calls
    def _not_emulated(self, name, module, shapes, reason, lab=None, report=True):
        self.trace.add(Call(name, module, "", "forward", shapes, None, None, None, None, None, None, lab, None,
                            False, reason))
        if not report or self.on_unsupported == "fp32":
            return
        where = "" if module is None else f" in module {module or '(the model)'!r}"
        text = (f"{name}{where} multiplies matrices but is not emulated: {reason}; it runs in torch's own "
                f"arithmetic")
        if self.on_unsupported == "raise":
            raise NotEmulated(text + " (emulate(..., on_unsupported='fp32') accepts that)")
        key = (name, module, reason)
        if key not in self._warned:
            self._warned.add(key)
            warnings.warn(text + " (on_unsupported='fp32' accepts it silently, 'raise' refuses it)",
                          NotEmulatedWarning, stacklevel=4)

    def recorder(self, name, module, shapes, em, lab):
        def record(part=""):
            def step(which, batch, m, n, k, k_order=None):
                self.trace.add(Call(name, module, part, which, shapes, batch, m, n, k, batch * m * n * k, k_order,
                                    lab, em.for_gemm(which).instruction, True, ""))
            return step
        return record

    def run(self, name, func, args, kwargs):
        shapes = _shapes(args, kwargs)
        handler = HANDLERS.get(name)
        reason = NOT_EMULATED.get(name)
        op = Op(name, func, args, kwargs)
        if handler is not None:
            try:
                compute = handler(op)
            except NotAGemm as no:
                if no.reason is None:       # it multiplies no matrices
                    return func(*args, **kwargs)
                reason = no.reason
        module, inside = self.locate()
        if not inside:
            self._not_emulated(name, None, shapes, "outside the model", report=False)
            return func(*args, **kwargs)
        if reason is not None:
            self._not_emulated(name, module, shapes, reason)
            return func(*args, **kwargs)
        em, lab, why, asked = self.choose(module)
        if em is None:
            self._not_emulated(name, module, shapes, why, report=not asked)
            return func(*args, **kwargs)
        try:
            op.like = _meta(func, args, kwargs)
        except Exception:                   # noqa: BLE001 - torch's own error, as torch gives it:
            result = func(*args, **kwargs)  # the call raises it again (from the real kernel)
            self._not_emulated(name, module, shapes, "torch's meta kernel refused a call its kernel takes")
            return result
        # state a recipe keeps per module (delayed scaling's amax histories): this module's own
        op.em, op.order, op.record = em.for_module(module), self.order, self.recorder(name, module, shapes, em, lab)
        return op.finish(compute())


def _mode_class():
    from torch.overrides import TorchFunctionMode

    class _Mode(TorchFunctionMode):
        def __init__(self, session):
            super().__init__()
            self.session = session

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            name = op_name(func)
            if name in COMPOSITES:
                with self:
                    return unguarded(func)(*args, **kwargs)
            if name in HANDLERS or name in NOT_EMULATED:
                return self.session.run(name, func, args, kwargs)
            return func(*args, **kwargs)

    return _Mode


_MODE: list = []


@contextlib.contextmanager
def emulate(model, emulation, *, on_unsupported="warn", conv_k_order="rsc"):
    """Within the block, every op that multiplies matrices (``linear``, ``matmul`` / ``@``, ``mm``,
    ``bmm``, ``addmm``, ``baddbmm``, ``einsum``, ``conv*d`` and their transposes,
    ``scaled_dot_product_attention``, ``nn.MultiheadAttention``) runs through emulated GEMMs,
    forward and backward; yields the block's :class:`~mmasim.torch.trace.Trace`.

    ``model``: a ``torch.nn.Module`` (its ops only, named by ``model.named_modules()``) or
    ``None`` (every op in the block).  ``emulation``: a preset name, an
    :class:`~mmasim.torch.Emulation`, or (with a model) a mapping from module-name patterns
    (``fnmatch``) to either or to ``None`` (float32, as asked).  ``on_unsupported``: what an op that
    multiplies matrices but is not emulated does: ``"warn"`` (a
    :class:`~mmasim.errors.NotEmulatedWarning`, once per op, module and reason), ``"raise"``
    (:class:`~mmasim.errors.NotEmulated`) or ``"fp32"`` (nothing: it is in the trace only).
    ``conv_k_order``: ``"rsc"`` (K = (r, s, c), NHWC implicit GEMM) or ``"crs"``.
    """
    session = Session(model, emulation, on_unsupported, conv_k_order)
    if not _MODE:
        _MODE.append(_mode_class())
    handles = session.hooks()
    try:
        with _MODE[0](session):
            yield session.trace
    finally:
        for h in handles:
            h.remove()
