"""MMA-Sim 2.1.1's classes and call conventions over mmasim models (the drop-in,
docs/mma-sim.md); ``mmasim.nv_ptx`` and ``mmasim.amd`` re-export them where MMA-Sim's
users import them.

May import the packages below it (``errors`` .. ``composition``).
"""
