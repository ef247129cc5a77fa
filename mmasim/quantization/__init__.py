"""Float values to container words: casts into a number format (round to nearest even,
saturation, NaN policy) and the quantization recipes kernels run (OCP MX, NVFP4,
DeepSeek FP8) with their scales (docs/quantize.md).

May import the packages below it (``errors`` .. ``backends``).
"""
