"""The random Hadamard transform NVIDIA's NVFP4 training recipe applies before quantizing the
inputs of the wgrad GEMM, as Transformer Engine computes it: each group of 16 consecutive
bf16 elements ``x`` becomes ``x @ (diag(s) H / 4)``, H the 16 x 16 Sylvester Hadamard matrix
(``H[k, n] = (-1)**popcount(k & n)``) and s a fixed sign vector, on the tensor cores
(``wmma.mma.sync.aligned.row.row.m16n16k16.f32.bf16.bf16.f32`` with a zero accumulator, then
``cvt.rn.bf16x2.f32``): ``transformer_engine/common/hadamard_transform/hadamard_transform.cu``
and ``hadamard_transform_utils.cuh`` (``get_hadamard_matrix_fragment``,
``mma_m16_n16_k16_b16_b16_b16_noacc``); the fused cast kernel
(``row_cast_col_hadamard_transform_cast_fusion.cu``) rounds its accumulator to bf16 the same
way "for bit-wise compatibility with unfused kernels".

Gives :class:`Hadamard` (the sign vector and the MMA datapath the 16-term sums run on),
:func:`instruction_plan` (that datapath, checked) and :func:`transform` (its device form, on a
matrix on a CUDA device: :func:`mmasim.quantization.on_device.hadamard`).  The sums are computed by mmasim's own model of that datapath (B200
``mma.sync.m16n8k16.f32.bf16.bf16`` by default: the instruction wmma m16n16k16 runs as), so
their truncation is the hardware's, not binary32's.
"""

from __future__ import annotations

import attrs
import numpy as np

from mmasim import backends
from mmasim.backends.plan import Plan, Rows, compute
from mmasim.errors import BlockShapeError, DtypeError, QuantizeError
from mmasim.quantization import casts
from mmasim.registry.build import get_registry
from mmasim.registry.lookup import lookup_instruction

#: Transformer Engine's sign vector (``transformer_engine/pytorch/tensor/nvfp4_tensor.py``,
#: ``get_wgrad_sign_vector``), shared by every layer for the whole of training
TE_SIGNS = (1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1)
SIZE = 16
#: rows per backend call: bounded temporaries
_CHUNK = 1 << 16


def sign_mask(signs) -> int:
    """The 16-bit mask of a sign vector: bit i set where ``signs[i]`` is -1 (TE's
    ``get_sign_from_vector``, the ``random_sign_mask`` its kernels take)."""
    return sum(1 << i for i, v in enumerate(signs) if v == -1)


@attrs.frozen
class Hadamard:
    """A random Hadamard transform: ``mask`` (bit i set: input i of each group has its sign
    flipped; default TE's :data:`TE_SIGNS`, 0xD7E8; 0 is TE's ``with_random_sign_mask=False``)
    and the MMA datapath its sums run on (``arch``, ``instruction``)."""

    mask: int = sign_mask(TE_SIGNS)
    arch: str = "B200"
    instruction: str = "mma.sync.m16n8k16.f32.bf16.bf16"

    @classmethod
    def of(cls, spec) -> "Hadamard | None":
        """``hadamard=`` of :func:`mmasim.quantize`: ``None`` / ``False`` (none), ``True`` (TE's
        signs), a 16-bit mask, 16 signs (+1 / -1) or a :class:`Hadamard`."""
        if spec is None or spec is False:
            return None
        if spec is True:
            return cls()
        if isinstance(spec, cls):
            return spec
        if isinstance(spec, (int, np.integer)) and not isinstance(spec, (bool, np.bool_)) and 0 <= spec < 1 << SIZE:
            return cls(mask=int(spec))
        try:
            signs = [float(v) for v in spec]
        except (TypeError, ValueError):
            signs = []
        if len(signs) == SIZE and all(v in (1.0, -1.0) for v in signs):
            return cls(mask=sign_mask(signs))
        raise QuantizeError(f"hadamard must be True, a 16-bit sign mask (0 .. 0xFFFF), 16 signs (+1 / -1) or a "
                            f"mmasim.quantization.hadamard.Hadamard, not {spec!r}")

    def matrix(self) -> np.ndarray:
        """``diag(s) H / 4`` (float64, entries +-0.25): row k multiplies input k of a group."""
        k = np.arange(SIZE)
        parity = np.vectorize(lambda v: bin(int(v)).count("1") & 1)(k[:, None] & k[None, :])
        flip = (self.mask >> k) & 1
        return np.where((parity ^ flip[:, None]) == 1, -0.25, 0.25)


def instruction_plan(spec: Hadamard, what: str) -> Plan:
    """The plan of ``spec``'s instruction, which must be bf16 x bf16 -> f32 of K = 16."""
    reg = get_registry()
    found = lookup_instruction(reg, spec.arch, spec.instruction, {})
    plan = Plan.build(found.datapath, reg)
    if (plan.a_format.key, plan.b_format.key, plan.d_format.key, found.datapath.k) != ("bf16", "bf16", "f32", SIZE):
        raise QuantizeError(f"{what}: the Hadamard transform runs on a bf16 x bf16 -> f32 instruction of K = 16, not "
                            f"{spec.arch} {spec.instruction}")
    return plan


def transform(x, axis: int, spec: Hadamard, what: str) -> np.ndarray:
    """``x`` (bf16 values) with each group of 16 consecutive elements along ``axis`` replaced by
    its transform: the D words of ``spec``'s instruction on the group and each column of
    :meth:`Hadamard.matrix`, C = +0, rounded to nearest even into bf16.  float32, x's shape."""
    reg = get_registry()
    bf16, f32 = reg.formats["bf16"], reg.formats["f32"]
    x = np.asarray(x, dtype=np.float64)
    words = casts.cast(bf16, x, nan="propagate", what=what)
    back = casts.values(bf16, words)
    lost = ~((back == x) | np.isnan(x))
    if lost.any():
        at = casts._at(lost)
        raise DtypeError(f"{what}: the Hadamard transform takes bf16 values (Transformer Engine's kernels read bf16); "
                         f"{float(x[at])!r} at index {at} is not one: pass a bf16 tensor or x.astype(ml_dtypes.bfloat16)")
    if x.ndim == 0 or x.shape[axis] % SIZE:
        raise BlockShapeError(f"{what}: the Hadamard transform runs over groups of {SIZE} along axis {axis}; "
                              f"x has shape {x.shape}")
    plan = instruction_plan(spec, what)
    groups = np.moveaxis(words, axis, -1).reshape(-1, SIZE)
    cols = casts.cast(bf16, spec.matrix().T, what=what)          # row n: column n of diag(s) H / 4
    n = groups.shape[0]
    be = backends.get(None, plan, n * SIZE * SIZE)
    out = np.empty((n, SIZE), dtype=np.uint32)
    zero = casts.cast(f32, 0.0, what=what)
    for s in range(0, n, _CHUNK):
        g = groups[s:s + _CHUNK]
        rows = Rows.batch([g[:, None, :], cols[None, :, :], np.full((len(g), SIZE), zero)], (len(g), SIZE), 0,
                          len(g) * SIZE)
        out[s:s + len(g)] = compute(be, plan, rows).reshape(len(g), SIZE)
    sums = casts.values(f32, out)
    rounded = casts.values(bf16, casts.cast(bf16, sums, nan="propagate", what=what))
    shape = np.moveaxis(x, axis, -1).shape
    return np.moveaxis(rounded.reshape(shape), -1, axis).astype(np.float32)


__all__ = ["TE_SIGNS", "Hadamard", "sign_mask", "instruction_plan", "transform"]
