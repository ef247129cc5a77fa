"""Running a datapath: :class:`~mmasim.execution.model.Model` (operand checks, shapes,
the matrix form, ``describe()``, warp execution), the thread pool over row chunks,
and the progress bar of long runs.

May import the packages below it (``errors`` .. ``quantization``).
"""
