"""Generated hardware harness: CUDA / HIP sources for every instruction mmasim models."""
