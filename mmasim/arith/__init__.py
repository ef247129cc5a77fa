"""The arithmetic of the core: number formats and their containers, decoding words to
exact integers, the output roundings, special values, structured sparsity, exact
integer and IEEE binary64 helpers, and the binary32 operations of the CUDA cores.

The lowest layer above ``mmasim.errors``, its only import (docs/architecture.md); it
knows no instruction and no architecture.
"""
