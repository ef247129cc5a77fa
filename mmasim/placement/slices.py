"""Result slices: the (thread, register) words of a load that carry the results, in order
(e.g. the B200 TMEM loads of T1).  Plugins register them through ``mmasim_layouts``."""

from __future__ import annotations

import attrs
import numpy as np

from mmasim.errors import ShapeError
from mmasim.operands.tensors import plain_array
from mmasim.placement.base import Layout


@attrs.frozen
class ResultSlice(Layout):
    name: str
    arch: str
    description: str
    pairs: tuple = attrs.field(converter=tuple)    # ((thread, register), ...)
    evidence: str = ""
    kind: str = "result-slice"

    @property
    def size(self) -> int:
        return len(self.pairs)

    def fragment(self, threads: int = 32, registers: int | None = None):
        """This slice as a :class:`~mmasim.placement.fragment.Fragment`: result word ``j`` is
        element ``(0, j)`` of a ``(1, size)`` matrix, held by ``pairs[j]``."""
        from mmasim.placement.fragment import Fragment

        regs = registers or max(r for _, r in self.pairs) + 1
        return Fragment.from_pairs(self.name, self.pairs, threads, regs, self.description, self.evidence,
                                   evidence=self.evidence or "unverified: a result slice with no stated evidence")

    def extract(self, image) -> np.ndarray:
        """The result words, in slice order, from an image indexed ``[thread, register]``."""
        img = plain_array(image, "image")
        threads = max(t for t, _ in self.pairs) + 1
        regs = max(r for _, r in self.pairs) + 1
        if img.ndim < 2 or img.shape[0] < threads or img.shape[1] < regs:
            raise ShapeError(f"{self.name}: image must be at least ({threads}, {regs}) [thread, register]; got {img.shape}")
        t, r = zip(*self.pairs)
        return img[list(t), list(r)]

    def place(self, values, threads: int = 32, registers: int | None = None, fill=0) -> np.ndarray:
        """An image ``[thread, register]`` holding ``values`` at the slice's words."""
        vals = plain_array(values, "values")
        if vals.shape[:1] != (self.size,):
            raise ShapeError(f"{self.name}: expected {self.size} values, got {vals.shape}")
        regs = registers or max(r for _, r in self.pairs) + 1
        img = np.full((threads, regs) + vals.shape[1:], fill, dtype=vals.dtype)
        t, r = zip(*self.pairs)
        img[list(t), list(r)] = vals
        return img
