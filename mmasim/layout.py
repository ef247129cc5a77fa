"""Layouts: where logical matrix elements live in hardware register / memory images.

Two kinds are built in:

* :class:`ResultSlice`: the (thread, register) words of a load that carry the
  results, in order (e.g. B200 TMEM loads).
* :class:`CoreMatrixLayout`: the PTX shared-memory descriptor rule
  ``offset(i, k) = (i % T) * T + (i // T) * SBO + (k % T) + (k // T) * LBO``
  in elements, mapping a logical (rows, K) operand to a flat image and back.

Architecture plugins register instances through the ``mmasim_layouts`` hook.
"""

from __future__ import annotations

import attrs
import numpy as np

from .errors import ShapeError


@attrs.frozen
class ResultSlice:
    name: str
    arch: str
    description: str
    pairs: tuple = attrs.field(converter=tuple)    # ((thread, register), ...)
    evidence: str = ""
    kind: str = "result-slice"

    @property
    def size(self) -> int:
        return len(self.pairs)

    def extract(self, image) -> np.ndarray:
        """The result words, in slice order, from an image indexed ``[thread, register]``."""
        img = np.asarray(image)
        threads = max(t for t, _ in self.pairs) + 1
        regs = max(r for _, r in self.pairs) + 1
        if img.ndim < 2 or img.shape[0] < threads or img.shape[1] < regs:
            raise ShapeError(f"{self.name}: image must be at least ({threads}, {regs}) [thread, register]; got {img.shape}")
        t, r = zip(*self.pairs)
        return img[list(t), list(r)]

    def place(self, values, threads: int = 32, registers: int | None = None, fill=0) -> np.ndarray:
        """An image ``[thread, register]`` holding ``values`` at the slice's words."""
        vals = np.asarray(values)
        if vals.shape[:1] != (self.size,):
            raise ShapeError(f"{self.name}: expected {self.size} values, got {vals.shape}")
        regs = registers or max(r for _, r in self.pairs) + 1
        img = np.full((threads, regs) + vals.shape[1:], fill, dtype=vals.dtype)
        t, r = zip(*self.pairs)
        img[list(t), list(r)] = vals
        return img


@attrs.frozen
class CoreMatrixLayout:
    name: str
    arch: str
    description: str
    T: int
    SBO: int
    LBO: int
    evidence: str = ""
    kind: str = "operand-smem"

    def offset(self, i, k):
        """Element offset of logical element (row or column ``i``, ``k``)."""
        i = np.asarray(i)
        k = np.asarray(k)
        return (i % self.T) * self.T + (i // self.T) * self.SBO + (k % self.T) + (k // self.T) * self.LBO

    def _offsets(self, rows: int, depth: int) -> np.ndarray:
        if rows % self.T or depth % self.T:
            raise ShapeError(f"{self.name}: rows and K must be multiples of {self.T}; got ({rows}, {depth})")
        i, k = np.meshgrid(np.arange(rows), np.arange(depth), indexing="ij")
        off = self.offset(i, k)
        if np.unique(off).size != off.size:
            raise ShapeError(
                f"{self.name}: a ({rows}, {depth}) operand does not fit this layout "
                f"(distinct elements would share a slot; SBO={self.SBO}, LBO={self.LBO})"
            )
        return off

    def to_image(self, matrix, fill=0) -> np.ndarray:
        """Flat shared-memory image (in elements) of a logical ``(rows, K)`` operand."""
        mat = np.asarray(matrix)
        if mat.ndim != 2:
            raise ShapeError(f"{self.name}: expected a 2-D (rows, K) operand, got {mat.shape}")
        off = self._offsets(*mat.shape)
        img = np.full(int(off.max()) + 1, fill, dtype=mat.dtype)
        img[off] = mat
        return img

    def from_image(self, image, rows: int, depth: int) -> np.ndarray:
        """The logical ``(rows, K)`` operand read back from a flat image."""
        img = np.asarray(image)
        off = self._offsets(rows, depth)
        if img.ndim != 1 or img.size <= int(off.max()):
            raise ShapeError(f"{self.name}: image needs at least {int(off.max()) + 1} elements, got {img.shape}")
        return img[off]
