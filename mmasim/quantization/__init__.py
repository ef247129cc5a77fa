"""mmasim.quantization."""
