"""Frozen test vectors: the ``mmasim-vectors`` file format, running one file, and
``mmasim validate`` over every file (docs/vectors.md).

A tool: may import the core packages and the public API ``mmasim``.
"""
