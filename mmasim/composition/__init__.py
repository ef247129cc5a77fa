"""Whole GEMMs from single instructions: K tiles chained (D of one is C of the next),
promotion, split-K and the binary32 epilogue a kernel runs, and the same on dask
arrays.  The operands are checked once per GEMM (:func:`mmasim.composition.operands.check`);
each K tile is ``Model.tile`` on those words, combined by the binary32 operations of
:mod:`mmasim.arith.binary32`; no rule of its own.

May import the packages below it (``errors`` .. ``execution``).
"""
