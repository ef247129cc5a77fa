"""Operands in and results out: container words or values, torch tensors, numbers written
as text, words shown to people, and the random word generator of compare, the tests
and the benchmarks.

Imports ``mmasim.errors`` and ``mmasim.arith``.
"""
