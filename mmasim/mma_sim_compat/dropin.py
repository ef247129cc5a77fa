"""The MMA-Sim drop-in: MMA-Sim 2.1.1's classes and call conventions over :class:`mmasim.Model`.

``mmasim.nv_ptx.sim`` and ``mmasim.amd.sim`` take MMA-Sim's architecture names, instruction
strings and calls: ``op(A, B, C)`` on matrices, ``op.dpa(a, b, c)`` on batched vectors,
block-scaled ones with ``alpha`` / ``beta`` scale tensors laid out as MMA-Sim lays them out.
Every result word comes from the mmasim model; this module only converts tensors and shapes.
Operands are read as MMA-Sim takes them (its dtype per format read bit for bit, fp6 / fp4 as
``uint8``; the table is in docs/mma-sim.md, with where mmasim's words differ from MMA-Sim's);
results are tensors of D's dtype on ``A``'s device, numpy for numpy operands.  torch is
imported only when a tensor result is made.
"""

from __future__ import annotations

import numpy as np

from mmasim.errors import ScaleError, ShapeError, UnknownInstruction
from mmasim.execution.model import Model
from mmasim.operands.tensors import dtype_name, host_bits, is_tensor, plain_array, to_numpy

#: the torch dtype MMA-Sim 2.1.1 uses for each format ("uint8": one byte per fp6 / fp4 element)
MMA_SIM_DTYPE = {
    "f64": "float64", "f32": "float32", "tf32": "float32", "xf32": "float32", "f16": "float16",
    "bf16": "bfloat16", "e4m3": "float8_e4m3fn", "e5m2": "float8_e5m2", "ue8m0": "float8_e8m0fnu",
    "ue4m3": "float8_e4m3fn", "e3m2": "uint8", "e2m3": "uint8", "e2m1": "uint8",
    "e4m3fnuz": "float8_e4m3fnuz", "e5m2fnuz": "float8_e5m2fnuz",
    "s8": "int8", "u8": "uint8", "s32": "int32",
}
_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_SIGNED = {1: np.int8, 2: np.int16, 4: np.int32, 8: np.int64}


class Operation:
    """One MMA-Sim-style instruction: ``op(A, B, C)`` and ``op.dpa(a, b, c)``."""

    #: the mmasim spelling of the instruction family, put before MMA-Sim's string
    prefix = ""
    #: block-scaled (``alpha``, ``beta`` operands)
    scaled = False

    def __init__(self, arch: str, shape_and_type: str):
        if not isinstance(arch, str) or not isinstance(shape_and_type, str):
            raise UnknownInstruction(f"{type(self).__name__}(arch, shape_and_type) takes two strings, "
                                     f"got {arch!r}, {shape_and_type!r}")
        self.arch = arch
        self.shape_and_type = shape_and_type
        #: the mmasim model every word comes from
        self.model = model = Model.lookup(arch, self.prefix + shape_and_type)
        dp = model.datapath
        if bool(dp.scale) != self.scaled:
            other = {True: "MMABlockScale or TCGen05MMABlockScale", False: "MMA, WGMMA or TCGen05MMA"}[bool(dp.scale)]
            raise UnknownInstruction(
                f"{type(self).__name__}({arch!r}, {shape_and_type!r}): {model.instruction} is "
                f"{'' if dp.scale else 'not '}block-scaled; use {other}")
        shape = model.shape
        self.m = shape[0] if shape else (model.legal_m[0] if len(model.legal_m) == 1 else None)
        self.n = shape[1] if shape else (model.legal_n[0] if len(model.legal_n) == 1 else None)
        self.k = model.k
        #: fp4 elements per byte of the operand tensors (2 for kind::mxf4 / mxf4nvf4)
        self.packing = 2 if model.a_format.container_bits == 4 and not model.a_format.integer else 1
        self.a_type_ptx = model.a_format.name
        self.b_type_ptx = model.b_format.name
        if self.scaled:
            self.block_size = dp.block

    # MMA-Sim exposes the operand dtypes as torch dtypes (torch imported on use)
    def _torch_dtype(self, fmt):
        import torch

        name = MMA_SIM_DTYPE.get(fmt.name)
        return getattr(torch, name) if name else None

    a_type = property(lambda self: self._torch_dtype(self.model.a_format))
    b_type = property(lambda self: self._torch_dtype(self.model.b_format))
    c_type = property(lambda self: self._torch_dtype(self.model.c_format))
    d_type = property(lambda self: self._torch_dtype(self.model.d_format))

    @property
    def s_type(self):
        return self._torch_dtype(self.model.scale_format) if self.scaled else None

    def __repr__(self) -> str:
        return f"<{type(self).__module__}.{type(self).__name__} {self.arch} {self.shape_and_type}: {self.model!r}>"

    # ------------------------------------------------------------ operands
    def _words(self, x, operand: str, packed: bool = False, what: str | None = None):
        """Container words (a uint64 numpy array) of operand ``x`` ("a", "b", "c" or "scale",
        named ``what`` in messages) as MMA-Sim passes it."""
        fmt = self.model.format_of(operand)
        what = what or operand
        if is_tensor(x):
            name = dtype_name(x)
            if packed and name == "uint8":
                return _unpack_high_first(host_bits(x, what))
            if name == MMA_SIM_DTYPE.get(fmt.name) and x.is_floating_point():
                return host_bits(x, what).astype(np.uint64)      # MMA-Sim's own dtype: its bits are the word
            x = to_numpy(x, what)
        else:
            x = plain_array(x, operand)
            if packed and x.dtype == np.uint8:
                return _unpack_high_first(x)
        return np.asarray(self.model.operand_words(operand, x, what=what)).astype(np.uint64)

    def _result(self, words, like):
        """D words as MMA-Sim returns D: its dtype, on ``like``'s device (numpy for numpy in)."""
        fmt = self.model.d_format
        size = fmt.container_bits // 8
        words = np.asarray(words).astype(_UNSIGNED[size])
        if not is_tensor(like):
            return words.view(_SIGNED[size]) if fmt.integer else words.view(np.dtype(fmt.typed))
        import torch

        out = torch.from_numpy(words.view(_SIGNED[size])).view(getattr(torch, MMA_SIM_DTYPE[fmt.name]))
        return out if like.device.type == "cpu" else out.to(like.device)

    def _run(self, a, b, c, alpha=None, beta=None):
        m = self.model
        packed = self.packing == 2
        wa = self._words(a, "a", packed)
        wb = self._words(b, "b", packed)
        wc = self._words(c, "c")
        K, k = wa.shape[-1] if wa.ndim else 0, m.k
        if wa.ndim == 0 or wb.ndim == 0 or wb.shape[-1] != K or K == 0 or K % k:
            raise ShapeError(
                f"{type(self).__name__} {self.shape_and_type}: a and b must be (..., K) with K a multiple of the "
                f"instruction's K = {k}" + (" (two e2m1 elements per uint8 byte)" if packed else "")
                + f"; got {wa.shape} and {wb.shape} elements")
        if self.scaled:
            ws = [self._words(s, "scale", what=name) for s, name in ((alpha, "alpha"), (beta, "beta"))]
            blocks = m.datapath.blocks
            for s, name in zip(ws, ("alpha", "beta")):
                if s.ndim == 0 or s.shape[-1] != K // k * blocks:
                    raise ScaleError(
                        f"{type(self).__name__} {self.shape_and_type}: {name} must be (..., K / {m.datapath.block}) "
                        f"= (..., {K // k * blocks}) scales for K = {K}; got {s.shape}")
        d = wc
        for t in range(K // k):       # a K longer than the instruction's: D of one tile is C of the next
            kw = {}
            if self.scaled:
                kw = {"scale_a": ws[0][..., t * blocks:(t + 1) * blocks],
                      "scale_b": ws[1][..., t * blocks:(t + 1) * blocks]}
            d = m.dot(wa[..., t * k:(t + 1) * k], wb[..., t * k:(t + 1) * k], d, **kw)
        return d


def _unpack_high_first(packed):
    """Two e2m1 codes per byte, element ``2i`` in the high nibble (MMA-Sim's packing)."""
    packed = np.asarray(packed).astype(np.uint8)
    return np.stack([packed >> 4, packed & 0xF], axis=-1).reshape(*packed.shape[:-1], -1).astype(np.uint64)


def _vectors(A, B, names=("A (M, K)", "B (K, N)"), error=ShapeError):
    """``A[:, None, :]`` and ``B.T[None, :, :]``: each D element's row and column (broadcast)."""
    if getattr(A, "ndim", None) != 2 or getattr(B, "ndim", None) != 2:
        raise error(f"the matrix form takes 2-D {names[0]} and {names[1]} (arrays or tensors); "
                    f"got {_shape(A)} and {_shape(B)}")
    return A[:, None, :], B.T[None, :, :]


def _shape(x):
    return tuple(getattr(x, "shape", np.shape(x)))


def _matrix_check(A, B, C):
    for name, x in (("A", A), ("B", B), ("C", C)):
        if not hasattr(x, "ndim"):
            raise ShapeError(f"the matrix form takes arrays or tensors; {name} is {type(x).__name__}")
    if C.ndim != 2 or A.ndim != 2 or B.ndim != 2 or A.shape[0] != C.shape[0] or B.shape[1] != C.shape[1] \
            or A.shape[1] != B.shape[0]:
        raise ShapeError(f"the matrix form takes A (M, K), B (K, N) and C (M, N); got {_shape(A)}, {_shape(B)}, "
                         f"{_shape(C)}")


class MMAOperation(Operation):
    """An unscaled instruction: ``op(A, B, C)``, ``op.dpa(a, b, c)``."""

    def dpa(self, a, b, c):
        """``c + a . b`` over the last axis: ``a``, ``b`` ``(..., K)``, ``c`` ``(...)``."""
        return self._result(self._run(a, b, c), a)

    def __call__(self, A, B, C):
        """``A @ B + C``: ``A`` ``(M, K)``, ``B`` ``(K, N)``, ``C`` ``(M, N)``."""
        _matrix_check(A, B, C)
        a, b = _vectors(A, B)
        return self._result(self._run(a, b, C), A)


class MMABlockScaleOperation(Operation):
    """A block-scaled instruction: ``op(A, B, C, alpha, beta)``, ``op.dpa(a, b, c, alpha, beta)``."""

    scaled = True

    def dpa(self, a, b, c, alpha, beta):
        """``c + sum(a * b * alpha * beta)``: ``alpha``, ``beta`` ``(..., K / block)``."""
        return self._result(self._run(a, b, c, alpha, beta), a)

    def __call__(self, A, B, C, alpha, beta):
        """``A @ B + C`` with ``alpha`` ``(M, K / block)`` and ``beta`` ``(K / block, N)``."""
        _matrix_check(A, B, C)
        a, b = _vectors(A, B)
        sa, sb = _vectors(alpha, beta, ("alpha (M, K / block)", "beta (K / block, N)"), ScaleError)
        return self._result(self._run(a, b, C, sa, sb), A)
