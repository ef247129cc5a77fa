"""Generated hardware harness: CUDA / HIP sources, specs and build scripts for every
instruction mmasim models, and ``mmasim harness run`` on a device (docs/harness.md).

A tool: may import the core packages, the public API ``mmasim`` and the tools
``vectors`` and ``characterize``.
"""
