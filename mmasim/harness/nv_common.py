"""What the asynchronous NVIDIA harness kernels share (:mod:`mmasim.harness.nv_async`,
:mod:`mmasim.harness.nv_tcgen05`): the 128-thread CTA, the shared-memory operand images
(K-major, no swizzle, whole containers or tcgen05's packed / padded 4- and 6-bit codes) and
small CUDA-source helpers.
"""

from __future__ import annotations

import re

import numpy as np

from mmasim.errors import MMAError, ShapeError, UnsupportedDatapath
from mmasim.placement import SmemLayout
from mmasim.placement.smem_packed import packed_image, packed_words
from mmasim.placement.smem_packed import smem_packing as packing     # the one rule of sub-byte packing

THREADS = 128


def smem_layout(rows: int, kbytes: int) -> SmemLayout:
    """The K-major, no-swizzle canonical layout of a ``rows x kbytes`` operand, dense: the
    16-byte K chunks of one 8-row group first (LBO = 128 bytes), then the next 8 rows
    (SBO = 128 * kbytes / 16)."""
    if rows % 8 or kbytes % 16:
        raise ShapeError(f"a shared-memory operand needs rows % 8 == 0 and 16-byte K chunks; got {rows} x {kbytes}B")
    return SmemLayout(f"harness.K.noswizzle.{rows}x{kbytes}B", major="K", swizzle=0, lbo=128,
                      sbo=128 * (kbytes // 16), element_bits=8,
                      description="K-major, no swizzle, LBO 128 bytes, SBO 128 * K-bytes / 16",
                      evidence="chosen by the harness (mmasim.harness.nv_common.smem_layout)")


def operand_image(words, pack=("bytes", 8), field_shift: int = 0):
    """``(rows, K)`` operand words -> (flat uint32 shared-memory image, the SmemLayout used).

    ``pack``: from :func:`packing` (:func:`mmasim.placement.smem_packed.smem_packing`; packed and
    padded codes as :func:`mmasim.placement.smem_packed.packed_image` places them); ``field_shift``:
    where the code sits in the element's container (``Format.field_shift``)."""
    w = np.asarray(words, dtype=np.uint64)
    if w.ndim != 2:
        raise ShapeError(f"expected a (rows, K) operand; got {w.shape}")
    rows, K = w.shape
    mode, bits = pack
    if mode == "pair":
        lay = smem_layout(rows, K // 2)
        img = packed_image(lay, w, pack, field_shift=field_shift)
    elif mode == "padded":
        lay = smem_layout(rows, K)
        img = packed_image(lay, w, pack, field_shift=field_shift)
    else:
        nb = bits // 8
        by = np.zeros((rows, K * nb), dtype=np.uint8)
        for j in range(nb):
            by[:, j::nb] = ((w >> np.uint64(8 * j)) & np.uint64(0xFF)).astype(np.uint8)
        lay = smem_layout(rows, K * nb)
        img = lay.to_image(by)
    img = np.ascontiguousarray(img, dtype=np.uint8)
    return img.view("<u4").copy(), lay


def image_operand(image, rows: int, K: int, pack=("bytes", 8), field_shift: int = 0) -> np.ndarray:
    """The inverse of :func:`operand_image`: ``(rows, K)`` words (uint64) from a flat uint32 image."""
    by = np.ascontiguousarray(image, dtype="<u4").view(np.uint8)
    mode, bits = pack
    if mode in ("pair", "padded"):
        return packed_words(smem_layout(rows, K // 2 if mode == "pair" else K), by, rows, K, pack,
                            field_shift=field_shift)
    nb = bits // 8
    b = smem_layout(rows, K * nb).from_image(by, rows, K * nb).astype(np.uint64)
    out = np.zeros((rows, K), dtype=np.uint64)
    for j in range(nb):
        out |= b[:, j::nb] << np.uint64(8 * j)
    return out


def _cname(text: str) -> str:
    return re.sub(r"_+", "_", re.sub(r"[^A-Za-z0-9]", "_", text)).strip("_")


def _fmt(fmt) -> str:
    return fmt.name


def _missing(model, what: str):
    raise UnsupportedDatapath(f"{model.arch}: {model.instruction}: {what} is not in mmasim.placement yet; "
                              "the harness kernel is generated and compiles, but its operands cannot be placed")


def _fragments(model, operand, X):
    """``model.fragments(operand, X)``, or :class:`UnsupportedDatapath` naming the missing layout."""
    try:
        return np.asarray(model.fragments(operand, X), dtype=np.uint32)
    except UnsupportedDatapath:
        raise
    except MMAError as exc:    # an operand the placement package does not know yet
        _missing(model, f"the register layout of {operand} ({exc})")


def _regs_loop(var, src, count, conv=""):
    return (f"  for (unsigned int i = 0; i < {count}; ++i) {var}[i] = {conv}({src}[i]);\n")


def _copy_smem(var, idx, words):
    return (f"  for (unsigned int i = threadIdx.x; i < {words}u; i += {THREADS}u) "
            f"{var}[i] = in[{idx}][blk * {words}u + i];\n")


def _smem_addr(var):
    return f"(uint32_t)__cvta_generic_to_shared({var})"


def _resolve_n(model, n):
    legal = tuple(model.legal_n)
    if n in ("min", "max"):
        return min(legal) if n == "min" else max(legal)
    if n not in legal:
        raise ShapeError(f"{model.instruction}: N = {n!r} is not a legal N ({', '.join(map(str, legal))})")
    return n

