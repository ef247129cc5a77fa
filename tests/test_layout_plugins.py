"""Layouts registered through the mmasim_layouts hook: a third-party architecture adds its own
(data, no code), an architecture's own rule beats a generic one for its own datapaths, and bad
rules fail loudly.  (A rule that would re-place another plugin's operands:
tests/test_plugin_collisions.py.)"""

import types

import numpy as np
import pytest

import mmasim
from mmasim.placement import FragmentRule

TABLE = """
[architecture]
name = "LaneToy"
vendor = "Example"
description = "a toy architecture with its own register layout"

[[datapath]]
op = "toy.mma"
a = "f16"
b = "f16"
c = "f32"
d = "f32"
m = [4]
n = [4]
k = 4
accumulator = "window"
params = { F = 25, zeros = "excluded" }
rounding = "rz-f32"
status = { kind = "assumed", evidence = "toy" }
"""

# 8 lanes; lane l holds row l // 2 of A, columns 2 * (l % 2) + i (one .f16x2 register)
TOY_RULES = [
    FragmentRule("toy.a", "toy.mma", "a", lanes=8, elements=2, row="lane // 2", col="2 * (lane % 2) + i",
                 arch=("LaneToy",), evidence="unverified: a toy"),
    FragmentRule("toy.b", "toy.mma", "b", lanes=8, elements=2, row="2 * (lane % 2) + i", col="lane // 2",
                 arch=("LaneToy",), evidence="unverified: a toy"),
    FragmentRule("toy.cd", "toy.mma", ("c", "d"), lanes=8, elements=2, row="lane // 2",
                 col="2 * (lane % 2) + i", arch=("LaneToy",), evidence="unverified: a toy"),
]
# a third-party architecture of mma.sync m16n8k8 (the generic built-in layouts match it) ...
SYNC_TABLE = """
[architecture]
name = "SyncToy"
vendor = "Example"

[[datapath]]
op = "mma.sync"
a = "f16"
b = "f16"
c = "f32"
d = "f32"
m = [16]
n = [8]
k = 8
accumulator = "window"
params = { F = 24, zeros = -132 }
rounding = "rz-f32"
status = { kind = "assumed", evidence = "toy" }
"""
# ... with its own B: b0 and b1 swapped (a made-up, still bijective layout)
SWAPPED = FragmentRule("synctoy.m16n8k8.b.swapped", "mma.sync", "b", m=16, n=8, k=8, bits=16, elements=2,
                       row="2 * t + 1 - i", col="g", arch=("SyncToy",),
                       evidence="unverified: made up for this test")


@pytest.fixture
def plugin():
    p = types.SimpleNamespace()

    @mmasim.hookimpl
    def mmasim_architectures():
        return [TABLE, SYNC_TABLE]

    @mmasim.hookimpl
    def mmasim_layouts():
        return TOY_RULES + [SWAPPED]

    p.mmasim_architectures = mmasim_architectures
    p.mmasim_layouts = mmasim_layouts
    mmasim.register(p, name="lane-toy")
    yield p
    mmasim.unregister(name="lane-toy")


def test_third_party_architecture_brings_its_own_layout(plugin):
    m = mmasim.MMA("LaneToy", "toy.mma.f32.f16.f16")
    L = m.layout("a")
    assert (L.lanes, L.registers, L.elements) == (8, 1, 2)
    assert L.owner(3, 3) == (7, 1)
    A = np.full((4, 4), 0x3C00, np.uint16)          # 1.0
    B = np.full((4, 4), 0x4000, np.uint16)          # 2.0
    C = np.zeros((4, 4), np.uint32)
    d = m.warp(m.fragments("a", A), m.fragments("b", B), m.fragments("c", C))
    assert (m.unfragment("d", d) == 0x41000000).all()     # 4 * 1 * 2 = 8.0
    assert "toy.a" in {x.name for x in mmasim.layouts("LaneToy")}


def test_architecture_rule_beats_the_generic_one(plugin):
    toy = mmasim.MMA("SyncToy", "mma.sync.m16n8k8.f32.f16.f16").layout("b")
    assert toy.name == "synctoy.m16n8k8.b.swapped" and toy.coords(0, 0) == (1, 0)
    # the generic rule still places the built-in instructions
    ampere = mmasim.MMA("A100", "mma.sync.m16n8k8.f32.f16.f16").layout("b")
    assert ampere.name == "mma.m16n8k8.b.16bit" and ampere.coords(0, 0) == (0, 0)
    # and the toy's own A and C / D: the generic rules match them too
    assert mmasim.MMA("SyncToy", "mma.sync.m16n8k8.f32.f16.f16").layout("a").name == \
        mmasim.MMA("A100", "mma.sync.m16n8k8.f32.f16.f16").layout("a").name


def test_architecture_is_gone_after_unregistering(plugin):
    mmasim.unregister(name="lane-toy")
    try:
        with pytest.raises(mmasim.UnknownArchitecture):
            mmasim.MMA("SyncToy", "mma.sync.m16n8k8.f32.f16.f16")
        assert "synctoy.m16n8k8.b.swapped" not in {x.name for x in mmasim.layouts()}
    finally:
        mmasim.register(plugin, name="lane-toy")


def test_formula_language_runs_no_code():
    """A table cannot run code: calls, attributes, subscripts and unknown names are TableErrors."""
    for bad in ("__import__('os').system('true')", "lane.real", "[1][0]", "x + 1", "lane / 2", "1.5"):
        with pytest.raises(mmasim.TableError, match="formula"):
            FragmentRule("bad", "mma.sync", "a", elements=1, row=bad, col="0", evidence="unverified: test")


def test_a_rule_that_is_not_a_bijection_is_rejected():
    rule = FragmentRule("twice", "mma.sync", "a", elements=2, row="lane % 4", col="0", evidence="unverified: test")
    with pytest.raises(mmasim.TableError, match="leaves|bijection"):
        rule.bind("a", 16, 8, 8, 16)
    rule = FragmentRule("holes", "mma.sync", "d", elements=1, row="lane // 8", col="lane % 8",
                        evidence="unverified: test")
    with pytest.raises(mmasim.TableError, match="bijection"):
        rule.bind("d", 8, 8, 4, 32)


def test_a_rule_must_state_its_evidence():
    """No default: a plugin's rule that does not say what its formulas rest on is refused
    (TypeError for a missing argument, TableError for an empty one), and the evidence
    travels to the bound layout."""
    with pytest.raises(TypeError, match="evidence"):
        FragmentRule("silent", "mma.sync", "a", elements=1, row="lane", col="0")
    for empty in ("", "   ", None):
        with pytest.raises(mmasim.TableError, match="evidence"):
            FragmentRule("empty", "mma.sync", "a", elements=1, row="lane", col="0", evidence=empty)
    assert SWAPPED.bind("b", 16, 8, 8, 16).evidence == "unverified: made up for this test"


def test_plugin_evidence_is_what_the_user_sees(plugin):
    L = mmasim.MMA("SyncToy", "mma.sync.m16n8k8.f32.f16.f16").layout("b")
    assert L.evidence == "unverified: made up for this test"
