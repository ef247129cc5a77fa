"""A toy third-party architecture plugin: its own TOML table and a new decoder."""

import types

import numpy as np
import pytest

import mmasim
from mmasim.decode import decode_float
from mmasim.formats import Format

TOY_TABLE = """
[architecture]
name = "Toy"
vendor = "Example"
description = "a toy architecture used by the plugin test"
aliases = ["toy-1", "sm_toy"]

[[datapath]]
op = "toy.mma"
kind = "neg8"
a = "neg8"
b = "neg8"
d = "f32"
k = 4
accumulator = "window"
params = { F = 25, zeros = "excluded" }
rounding = "rz-f32"
status = { kind = "assumed", evidence = "toy" }
"""


def decode_neg8(fmt, words):
    """A decoder quirk: the word's bits are inverted before an e4m3 reading."""
    return decode_float(fmt, (~np.asarray(words, dtype=np.uint64)) & np.uint64(0xFF))


def make_plugin():
    plugin = types.SimpleNamespace()

    @mmasim.hookimpl
    def mmasim_formats():
        return [Format(key="neg8", name="neg8", container_bits=8, exp_bits=4, man_bits=3, bias=7,
                       nan="max", decoder="neg8")]

    @mmasim.hookimpl
    def mmasim_decoders():
        return {"neg8": decode_neg8}

    @mmasim.hookimpl
    def mmasim_architectures():
        return [TOY_TABLE]

    plugin.mmasim_formats = mmasim_formats
    plugin.mmasim_decoders = mmasim_decoders
    plugin.mmasim_architectures = mmasim_architectures
    return plugin


@pytest.fixture
def toy():
    plugin = make_plugin()
    mmasim.register(plugin, name="toy")
    yield plugin
    mmasim.unregister(name="toy")


def test_toy_plugin_resolves_with_MMA_and_computes(toy):
    assert "Toy" in mmasim.architectures()
    m = mmasim.MMA("toy-1", "toy.mma.kind::neg8", a_type="neg8", b_type="neg8", d_type="f32")
    one = (~0x38) & 0xFF          # inverted e4m3 1.0
    two = (~0x40) & 0xFF          # inverted e4m3 2.0
    d = m.dot([one, two, 0xFF, 0xFF], [two, two, 0xFF, 0xFF], 0)   # 0xFF inverts to +0
    assert int(d) == 0x40C00000   # 1*2 + 2*2 = 6.0
    assert "toy" in m.describe()


def test_unregistering_removes_the_architecture(toy):
    mmasim.unregister(name="toy")
    assert "Toy" not in mmasim.architectures()
    with pytest.raises(mmasim.UnknownArchitecture):
        mmasim.MMA("Toy", "toy.mma.kind::neg8")
    mmasim.register(toy, name="toy")   # for the fixture's teardown


def test_builtins_are_registered_like_plugins():
    pm = mmasim.plugins.get_plugin_manager()
    names = {pm.get_name(p) for p in pm.get_plugins()}
    assert {"mmasim.builtins", "mmasim_plugins.blackwell"} <= names
