"""MMA-Sim 2.1.1 compatibility: MMA-Sim's classes, call conventions and import paths over mmasim
models (the drop-in, docs/mma-sim.md).  Not a vendor core: every word comes from
:class:`mmasim.Model`.

- ``dropin.py``: the calls (``op(A, B, C)``, ``op.dpa``, block scales), converting tensors and shapes;
- ``nv_ptx.py``: MMA-Sim's NVIDIA class names (``MMA``, ``WGMMA``, ``TCGen05MMA``, ...);
- ``amd.py``: MMA-Sim's AMD class name (``MFMA``);
- ``paths.py``: MMA-Sim's import paths, ``mmasim.nv_ptx`` / ``mmasim.nv_ptx.sim`` and
  ``mmasim.amd`` / ``mmasim.amd.sim``, as aliases of the two modules above (installed by
  ``mmasim/__init__.py``).

May import the packages below it (``errors`` .. ``composition``).
"""
