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


def packing(kind, fmt) -> tuple:
    """How elements of format ``fmt`` sit in shared memory for a tcgen05 ``kind`` (``None``:
    wgmma): ``("bytes", container_bits)`` (whole 8 / 16 / 32-bit containers), ``("pair", 4)``
    (4-bit codes two per byte, lower K in the low nibble, no padding: PTX 9.0
    §9.7.16.10.4.6, .kind::mxf4 / .kind::mxf4nvf4) or ``("padded", field_bits)`` (the 4- or
    6-bit codes of .kind::f8f6f4 / .kind::mxf8f6f4 packed 16 to a 16-byte chunk, then 64 / 32
    bits of padding: the ``.b4x16_p64`` / ``.b6x16_p32`` forms of PTX §5.5.1.1.1 that
    §9.7.16.10.4.4 draws for these kinds; assumed for .kind::f8f6f4 as well)."""
    if fmt.container_bits == 4:
        return ("pair", 4)
    if kind in ("f8f6f4", "mxf8f6f4") and fmt.field_bits < 8 and not fmt.integer:
        return ("padded", fmt.field_bits)
    return ("bytes", fmt.container_bits)


def operand_image(words, pack=("bytes", 8), field_shift: int = 0):
    """``(rows, K)`` operand words -> (flat uint32 shared-memory image, the SmemLayout used).

    ``pack``: from :func:`packing`; ``field_shift``: where the code sits in a padded
    element's container (``Format.field_shift``)."""
    w = np.asarray(words, dtype=np.uint64)
    if w.ndim != 2:
        raise ShapeError(f"expected a (rows, K) operand; got {w.shape}")
    rows, K = w.shape
    mode, bits = pack
    if mode == "pair":
        by = ((w[:, 0::2] & np.uint64(0xF)) | (w[:, 1::2] & np.uint64(0xF)) << np.uint64(4)).astype(np.uint8)
        lay = smem_layout(rows, K // 2)
        img = lay.to_image(by)
    elif mode == "padded":
        lay = smem_layout(rows, K)
        codes = (w >> np.uint64(field_shift)) & np.uint64((1 << bits) - 1)
        chunks = lay.to_image(codes.astype(np.uint8)).reshape(-1, 16).astype(np.uint64)
        bitsarr = ((chunks[:, :, None] >> np.arange(bits, dtype=np.uint64)) & np.uint64(1)).astype(np.uint8)
        flat = np.zeros((chunks.shape[0], 128), dtype=np.uint8)
        flat[:, : 16 * bits] = bitsarr.reshape(chunks.shape[0], 16 * bits)
        img = np.packbits(flat, axis=1, bitorder="little").reshape(-1)
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
    if mode == "pair":
        b = smem_layout(rows, K // 2).from_image(by, rows, K // 2).astype(np.uint64)
        out = np.zeros((rows, K), dtype=np.uint64)
        out[:, 0::2], out[:, 1::2] = b & np.uint64(0xF), b >> np.uint64(4)
        return out
    if mode == "padded":
        flat = np.unpackbits(by.reshape(-1, 16), axis=1, bitorder="little")[:, : 16 * bits]
        codes = (flat.reshape(-1, 16, bits).astype(np.uint64) << np.arange(bits, dtype=np.uint64)).sum(axis=2)
        b = smem_layout(rows, K).from_image(codes.reshape(-1).astype(np.uint8), rows, K).astype(np.uint64)
        return b << np.uint64(field_shift)
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

