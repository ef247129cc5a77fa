"""Running a datapath: :class:`~mmasim.execution.model.Model` (operand checks, shapes,
the matrix form and ``Model.tile``, its entry for operands already checked, ``describe()``,
``Model.warp``), the warp execution of register operands (:mod:`mmasim.execution.registers`;
the families with shared-memory / Tensor Memory operands are :mod:`mmasim.warp`, above, reached
through ``Model.family``), the thread pool over row chunks, and the progress bar of long runs.

May import the packages below it (``errors`` .. ``quantization``).
"""
