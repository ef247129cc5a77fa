"""Whole GEMMs from single instructions: K tiles chained (D of one is C of the next),
promotion, split-K and the binary32 epilogue a kernel runs, and the same on dask
arrays.  Each result is composed of :class:`~mmasim.execution.model.Model` calls
and the binary32 operations of :mod:`mmasim.arith.binary32`; no rule of its own.

May import the packages below it (``errors`` .. ``execution``).
"""
