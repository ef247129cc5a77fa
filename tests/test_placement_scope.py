"""``mmasim/placement/`` knows where operands live and nothing else: it imports nothing of the
model or of warp execution, takes no model (its functions take a ``Placement``,
``Model.placement``) and calls none; warp execution is ``Model.warp``, which runs the
family's function (``mmasim.warp``, reached through ``Model.family``) or the register form."""

from __future__ import annotations

import ast
import pathlib

import numpy as np

import mmasim

ROOT = pathlib.Path(__file__).resolve().parents[1]


def reaches_the_model(source: str) -> list:
    """``(line, what)`` of every import of ``mmasim.execution`` / ``mmasim.warp``, every
    parameter called ``model`` and every use of the name ``Model`` in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(("mmasim.execution", "mmasim.warp")):
            found.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if a.name.startswith(("mmasim.execution", "mmasim.warp"))]
        elif isinstance(node, ast.arg) and node.arg == "model":
            found.append((node.lineno, "a parameter called model"))
        elif isinstance(node, ast.Name) and node.id == "Model":
            found.append((node.lineno, "Model"))
    return found


def test_placement_takes_no_model_and_imports_no_execution():
    found = [f"{p.relative_to(ROOT)}:{line}: {what}" for p in sorted((ROOT / "mmasim" / "placement").rglob("*.py"))
             for line, what in reaches_the_model(p.read_text(encoding="utf-8"))]
    assert not found, "mmasim/placement/ reaches the model:\n" + "\n".join(found)


def test_the_scope_scan_sees_a_model_in_placement():
    source = ("from mmasim.execution.model import Model\n"
              "import mmasim.warp.tensor_memory\n"
              "def layout(model, operand):\n"
              "    return model(1, 2, 3)\n")
    assert [what for _, what in reaches_the_model(source)] == [
        "from mmasim.execution.model import ...", "import mmasim.warp.tensor_memory", "a parameter called model"]


def test_placement_functions_take_the_models_placement_record():
    m = mmasim.MMA("A100", "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32")
    p = m.placement
    assert isinstance(p, mmasim.placement.Placement) and p is m.placement     # built once
    assert (p.instruction, p.shape, p.datapath) == (m.instruction, m.shape, m.datapath)
    assert p.family is m.family and p.rules is m.registry.layouts
    # the functions of mmasim.placement and the model's methods are one rule
    assert mmasim.placement.layout(p, "a").name == m.layout("a").name == "mma.m16n8k16.a.16bit"
    A = np.arange(256, dtype=np.uint16).reshape(16, 16) % 7 + 0x3C00
    assert np.array_equal(mmasim.placement.fragments(p, "a", A), m.fragments("a", A))


def test_the_families_name_their_warp_execution_above_the_model():
    from mmasim.warp.tensor_memory import tcgen05_mma
    from mmasim.warp.warpgroup import wgmma_mma_async

    families = mmasim.get_registry().families
    assert families["tcgen05.mma"].warp is tcgen05_mma
    assert families["wgmma.mma_async"].warp is wgmma_mma_async
    assert families["mma.sync"].warp is None and families["v_mfma"].warp is None     # the register form
