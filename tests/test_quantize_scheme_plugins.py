"""A plugin adds a quantization recipe through ``mmasim_schemes`` (docs/plugins.md, "Quantization
schemes"): ``mmasim.quantize`` and ``mmasim.torch.Emulation(scheme=...)`` resolve it through the
registry like the built-in ones; a scheme name has one owner.

The plugin's recipe, ``pow2_ceil_e4m3``: blocks of 32 along the axis, the e8m0 scale
``2**ceil(log2(amax / 448))`` (1 for an all-zero block), the elements ``x / scale`` rounded to
nearest even into e4m3.  Worked by hand for the block ``[480, 1 x 31]``: 480 / 448 = 1.07, so
the scale is 2**1 (word 127 + 1 = 128); 480 / 2 = 240 = 1.875 * 2**7 is e4m3 0x77 (exponent field
7 + 7 = 14, fraction 111), 1 / 2 = 2**-1 is 0x30 (exponent field 6).  OCP MX's FLOOR scale of the
same block is 2**(8 - 8) = 1 (word 127), and 480 saturates to 448 (0x7E).
"""

import numpy as np
import pytest
from test_plugin_isolation import make_plugin, registered  # noqa: F401

import mmasim
from mmasim.errors import PluginConflict, UnknownScheme
from mmasim.registry.scheme import Scheme

MXF8 = "tcgen05.mma.kind::mxf8f6f4.block_scale.f32.e4m3.e4m3.ue8m0"


def _pow2_ceil(s, x, fmt, axis, nan, tile, opts):
    xb = np.moveaxis(x, axis, -1)
    xb = xb.reshape(*xb.shape[:-1], -1, 32)
    amax = np.max(np.abs(xb), axis=-1)
    e = np.where(amax > 0, np.ceil(np.log2(np.where(amax > 0, amax, 1) / 448)), 0).astype(np.int64)
    words = mmasim.quantize(np.ldexp(xb, -e[..., None]), fmt.key, saturate=True).words
    words = np.moveaxis(words.reshape(*words.shape[:-2], -1), -1, axis)
    return mmasim.Quantized(words, np.moveaxis((e + 127).astype(np.uint8), -1, axis), fmt.name, fmt.key, "ue8m0",
                            32, axis % x.ndim, None, s.name, "instruction")


POW2_CEIL = Scheme("pow2_ceil_e4m3", "e4m3", "ue8m0", 32, "instruction", _pow2_ceil, stochastic=False)
BLOCK = np.array([480.0] + [1.0] * 31, dtype=np.float32)


@pytest.fixture
def pow2_ceil(registered):  # noqa: F811
    registered(make_plugin(mmasim_schemes=[POW2_CEIL]), "pow2-ceil")
    return POW2_CEIL


def test_a_plugins_scheme_quantizes_through_mmasim_quantize(pow2_ceil):
    assert "pow2_ceil_e4m3" in mmasim.quantize_schemes()
    q = mmasim.quantize(BLOCK, "pow2_ceil_e4m3")
    assert q.scales.tolist() == [128]
    assert q.words.tolist() == [0x77] + [0x30] * 31
    assert q.dequantize().tolist() == BLOCK.tolist()
    floor = mmasim.quantize(BLOCK, "mxfp8_e4m3")          # the built-in recipe still gives its own words
    assert floor.scales.tolist() == [127] and floor.words[0] == 0x7E


def test_a_plugins_scheme_quantizes_the_operands_of_an_emulation(pow2_ceil):
    torch = pytest.importorskip("torch")
    import mmasim.torch as mt
    x = torch.from_numpy(BLOCK.reshape(1, 32))
    w = torch.ones(1, 32)
    ours = mt.linear(x, w, emulation=mt.Emulation("B200", MXF8, scaling="scheme", scheme="pow2_ceil_e4m3"))
    # x: 240 * 2 + 31 * (0.5 * 2); w: ones, 1 / 448 -> scale 2**-8, elements 256 = 0x78: each 1
    assert ours.tolist() == [[480.0 + 31.0]]
    floor = mt.linear(x, w, emulation=mt.Emulation("B200", MXF8, scaling="scheme", scheme="mxfp8_e4m3"))
    assert floor.tolist() == [[448.0 + 31.0]]                 # FLOOR saturates 480 to 448


def test_a_plugins_scheme_says_what_it_refuses(pow2_ceil):
    import mmasim.torch as mt
    with pytest.raises(mmasim.QuantizeError, match="pow2_ceil_e4m3: .*rounding='stochastic' is for"):
        mmasim.quantize(BLOCK, "pow2_ceil_e4m3", rounding="stochastic", seed=0)
    with pytest.raises(mmasim.QuantizeError, match="pow2_ceil_e4m3: tile= is for nvfp4, deepseek_fp8"):
        mmasim.quantize(BLOCK.reshape(1, 32), "pow2_ceil_e4m3", tile=(1, 32))
    with pytest.raises(mmasim.EmulationError, match="a_rounding='stochastic'.*'pow2_ceil_e4m3'"):
        mt.Emulation("B200", MXF8, scaling="scheme", scheme="pow2_ceil_e4m3", a_rounding="stochastic")


def test_an_unregistered_scheme_is_unknown_with_close_matches(pow2_ceil):
    with pytest.raises(UnknownScheme, match="'pow2_ceil_e4m4' \\(did you mean 'pow2_ceil_e4m3'"):
        mmasim.quantize(BLOCK, "pow2_ceil_e4m4")
    mmasim.unregister(name="pow2-ceil")
    try:
        with pytest.raises(UnknownScheme, match="unknown quantization scheme 'pow2_ceil_e4m3'; schemes: mxfp8"):
            mmasim.quantize(BLOCK, "pow2_ceil_e4m3")
    finally:
        mmasim.register(make_plugin(mmasim_schemes=[POW2_CEIL]), name="pow2-ceil")     # for the teardown


@pytest.mark.parametrize("name, owner", [("mxfp4", "mmasim.quantization.schemes"), ("e4m3", "format 'e4m3'")])
def test_a_scheme_name_that_is_taken_is_a_plugin_conflict(registered, name, owner):  # noqa: F811
    import attrs
    with pytest.raises(PluginConflict, match=f"'{name}'.*{owner}"):
        registered(make_plugin(mmasim_schemes=[attrs.evolve(POW2_CEIL, name=name)]), "taker")
    assert mmasim.quantize(np.ones(32), "mxfp4").scales.tolist() == [127 - 2]    # the built-in, unchanged


def test_the_same_scheme_name_from_two_plugins_is_a_plugin_conflict(pow2_ceil, registered):  # noqa: F811
    import attrs
    with pytest.raises(PluginConflict, match="pow2_ceil_e4m3.*pow2-ceil"):
        registered(make_plugin(mmasim_schemes=[attrs.evolve(POW2_CEIL, block=16)]), "second")


def test_builtin_recipes_are_registered_through_the_hook():
    reg = mmasim.get_registry()
    assert {"mxfp8_e4m3", "mxfp4", "nvfp4", "deepseek_fp8"} <= set(reg.schemes)
    from mmasim.quantization import schemes
    assert set(schemes.BUILTIN_SCHEMES) == {reg.schemes[s.name] for s in schemes.BUILTIN_SCHEMES}
