"""Warp-level execution of the families whose operands are not all registers, above the model:
each function takes a :class:`~mmasim.execution.model.Model`, reads its operands from
shared-memory and Tensor Memory images (:mod:`mmasim.placement`, through ``Model.placement``)
and computes with the model's matrix form.  ``Model.warp`` reaches them through the family
record, ``Model.family.warp`` (``mmasim_plugins.families`` names them); nothing below this
package imports it.

* :func:`mmasim.warp.warpgroup.wgmma_mma_async`: B (and A, with its descriptor) in shared memory;
* :func:`mmasim.warp.tensor_memory.tcgen05_mma`: every form of ``tcgen05.mma``.

May import the packages below it (``errors`` .. ``execution``).
"""
