"""The built-in quantization schemes, a built-in plugin (``mmasim_schemes``) registered like a
third-party one: OCP MX v1.0 (:func:`~mmasim.quantization.quantize._mx`), NVFP4 as NVIDIA
Transformer Engine computes it (:func:`~mmasim.quantization.quantize._nvfp4`) and DeepSeek
fine-grained FP8 as DeepGEMM computes it (:func:`~mmasim.quantization.quantize._deepseek`).
Each record says what its callers may ask of it (:class:`mmasim.registry.scheme.Scheme`);
docs/quantize.md gives each rule and source.
"""

from __future__ import annotations

from mmasim.quantization.quantize import _deepseek, _mx, _nvfp4
from mmasim.quantization.rounding import SCALE_ROUNDINGS
from mmasim.registry.hookspecs import hookimpl
from mmasim.registry.scheme import ANY_TILE, Scheme


def _mx_scheme(name: str, element: str) -> Scheme:
    return Scheme(name, element, "ue8m0", 32, "instruction", _mx, scale_roundings=SCALE_ROUNDINGS,
                  source="OCP MX v1.0 (FLOOR); RCEIL as Transformer Engine and cuBLAS")


#: the recipes (the plain casts are the element formats' keys)
BUILTIN_SCHEMES = (
    _mx_scheme("mxfp8_e4m3", "e4m3"),
    _mx_scheme("mxfp8_e5m2", "e5m2"),
    _mx_scheme("mxfp6_e3m2", "e3m2"),
    _mx_scheme("mxfp6_e2m3", "e2m3"),
    _mx_scheme("mxfp4", "e2m1x"),
    Scheme("nvfp4", "e2m1x", "ue4m3", 16, "instruction", _nvfp4, tiles=((16, 16),), hadamard="bf16",
           source="Transformer Engine's NVFP4"),
    Scheme("deepseek_fp8", "e4m3", "f32", None, "promotion", _deepseek, tiles=ANY_TILE, stochastic=False,
           pad=(1, 128, 128), source="DeepGEMM"),
)


@hookimpl
def mmasim_schemes():
    return BUILTIN_SCHEMES
