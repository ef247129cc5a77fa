"""Coverage: ``Model.warp`` runs EVERY instruction of every registered architecture and equals
the matrix form on random words, with a layout object for every operand.

Every datapath of the registry is enumerated (``mmasim.registry.build.get_registry()``, what
``mmasim list ARCH`` prints): one case per distinct instruction (op, kind, qualifiers, A / B / C
/ D types, K, scale, sparsity, shape of the single-shape instructions), at one legal shape; for
``tcgen05.mma`` the shape rotates through the legal M so that every (kind, qualifiers, sparsity,
M, A container) -- the data path layout, the metadata and A-in-Tensor-Memory layouts -- is run
with A in shared memory and with A in Tensor Memory.  The operands are built with the public API
only (``m.fragments``, the shared-memory images of ``mmasim.harness.nv_async.operand_image`` and
their descriptors, ``a_tmem_layout``); the expectation is the matrix form ``m(A, B, C, ...)``,
which neither registers nor images enter.

Nothing is refused: every case must run, on the numpy and the numba backend, and equal the
matrix form computed by the numpy reference.  ``python tests/test_warp_coverage.py`` prints
anything refused, grouped by reason.
"""

from __future__ import annotations

import collections
import re

import attrs
import numpy as np
import pytest

import mmasim
from mmasim.harness import nv_async as nv
from mmasim.placement import a_tmem_layout, compress
from mmasim.registry.build import datapath_identity, get_registry
from mmasim.operands.wordgen import sparse_metadata, words

OPS = ("mma.sync", "wgmma.mma_async", "tcgen05.mma", "v_mfma", "v_smfmac")


def _instruction(reg, dp, M, N):
    return attrs.evolve(dp, m=(M,), n=(N,)).canonical(reg.formats)


def cases():
    """``[(arch, instruction, a_in_tmem, datapath)]``: every distinct instruction once (wgmma with
    A in registers and in shared memory), and for tcgen05.mma every data path layout with A in
    shared memory and in Tensor Memory."""
    reg = get_registry()
    out, seen, layouts = [], set(), set()
    for arch, A in reg.architectures.items():
        for dp in A.datapaths:
            if dp.refuse:
                continue
            if dp.op != "tcgen05.mma":
                M, N = (dp.m[0] if dp.m else 16), (min(dp.n) if dp.n else 8)
                key = (datapath_identity(dp), M, N)
                if key not in seen:
                    seen.add(key)
                    for alt in (False, True) if dp.op == "wgmma.mma_async" else (False,):
                        out.append((arch, _instruction(reg, dp, M, N), alt, dp))
                continue
            ident = datapath_identity(dp)
            bits = reg.formats[dp.a].container_bits
            fresh = [M for M in dp.m if (dp.kind, dp.qualifiers, bool(dp.sparse), bool(dp.scale), M, bits)
                     not in layouts]
            for M in fresh:         # a data path layout not run yet: both A sources
                layouts.add((dp.kind, dp.qualifiers, bool(dp.sparse), bool(dp.scale), M, bits))
                for tmem in (False, True):
                    out.append((arch, _instruction(reg, dp, M, min(dp.n)), tmem, dp))
            if ident not in seen:
                seen.add(ident)
                if not fresh:       # the types: one shape, rotating through the legal M
                    M = dp.m[len(seen) % len(dp.m)]
                    out.append((arch, _instruction(reg, dp, M, min(dp.n)), len(seen) % 2 == 1, dp))
    return out


def _image(m, X, operand, target):
    fmt = m.a_format if operand == "a" else m.b_format
    pack = nv.packing(m.datapath.kind, fmt) if target == "tcgen05" else ("bytes", fmt.container_bits)
    img, lay = nv.operand_image(X, pack, fmt.field_shift)
    return img, lay.descriptor(0, target)


def run_case(arch, instruction, a_in_tmem=False, seed=0, backend="numpy"):
    """``(warp's D unfragmented, the matrix form's D)`` on random words; ``a_in_tmem``: A in
    Tensor Memory (tcgen05), in shared memory (wgmma; else its registers)."""
    m = mmasim.MMA(arch, instruction, backend=backend)
    dp, K = m.datapath, m.datapath.k
    rng = np.random.default_rng(seed)
    ld = m.layout("d")
    Mr, Nc = ld.rows, ld.cols
    registers = dp.op in ("mma.sync", "v_mfma", "v_smfmac")
    kb = m.layout("b").rows if registers else K          # the stacked K of multi-block layouts
    A = words(m.a_format, (Mr, K), rng, padding=False)
    B = words(m.b_format, (kb, Nc), rng, padding=False)
    C = words(m.c_format, (Mr, Nc), rng, padding=False)
    kw, ekw, Ause = {}, {}, A
    if dp.sparse:
        md = sparse_metadata(m.sparse_rule, K, Mr, rng).astype(np.uint32)
        Ause = compress(m.placement, A, md)
        kw["sparse_metadata"] = m.fragments("sparse_metadata", md)
        ekw["sparse_metadata"] = md
    if dp.scale:
        SA = words(m.scale_format, (Mr, dp.blocks), rng, "near_one", padding=False)
        SB = words(m.scale_format, (dp.blocks, Nc), rng, "near_one", padding=False)
        kw.update(scale_a=m.fragments("scale_a", SA), scale_b=m.fragments("scale_b", SB))
        ekw.update(scale_a=SA, scale_b=SB)
    blocks = ld.blocks
    if blocks == 1:
        expected = m(A, B, C, backend="numpy", **ekw)
    else:                   # independent matrices stacked along rows (Volta quad pairs, AMD blocks)
        mb, kbb = Mr // blocks, kb // blocks
        expected = np.concatenate([m(A[i * mb:(i + 1) * mb], B[i * kbb:(i + 1) * kbb], C[i * mb:(i + 1) * mb],
                                     backend="numpy")
                                   for i in range(blocks)])
    c = m.fragments("c", C)
    if registers:
        d = m.warp(m.fragments("a", Ause), m.fragments("b", B), c, **kw)
    elif dp.op == "wgmma.mma_async":
        b_img, bd = _image(m, B.T, "b", "wgmma")
        if a_in_tmem:           # wgmma: the other A source is shared memory (a_descriptor)
            a, kw["a_descriptor"] = _image(m, Ause, "a", "wgmma")
        else:
            a = m.fragments("a", Ause)
        d = m.warp(a, b_img, c, b_descriptor=bd, **kw)
    else:
        ncta = 2 if "cta_group::2" in dp.qualifiers else 1
        a_parts = [_image(m, Ause[i * Mr // ncta:(i + 1) * Mr // ncta], "a", "tcgen05") for i in range(ncta)]
        b_parts = [_image(m, B.T[i * Nc // ncta:(i + 1) * Nc // ncta], "b", "tcgen05") for i in range(ncta)]
        b = tuple(p[0] for p in b_parts) if ncta == 2 else b_parts[0][0]
        if a_in_tmem:
            a = a_tmem_layout(m.placement).pack(m.operand_words("a", Ause))
        else:
            a = tuple(p[0] for p in a_parts) if ncta == 2 else a_parts[0][0]
            kw["a_descriptor"] = a_parts[0][1]
        d = m.warp(a, b, c, b_descriptor=b_parts[0][1], **kw)
    assert d.shape == (ld.lanes, ld.registers)
    return m.unfragment("d", d), expected


def _reason(exc) -> str:
    text = re.sub(r"m\d+n\d+k\d+", "mMnNkK", f"{type(exc).__name__}: {exc}")
    return re.sub(r"(tcgen05\.mma|mma\.sync|wgmma\.mma_async|v_mfma|v_smfmac)[\w.:]*", r"\1...", text)[:300]


def survey(op=None):
    """``(ran, refused)``: the cases that ran and equalled the matrix form, and ``{reason: [case]}``."""
    ran, refused = [], collections.defaultdict(list)
    for arch, ins, tmem, dp in cases():
        if op is not None and dp.op != op:
            continue
        try:
            got, want = run_case(arch, ins, tmem)
        except Exception as exc:            # noqa: BLE001 - grouped and reported by the caller
            refused[_reason(exc)].append((arch, ins, tmem))
            continue
        if not np.array_equal(got, want):
            refused["warp() differs from the matrix form"].append((arch, ins, tmem))
        else:
            ran.append((arch, ins, tmem))
    return ran, refused


def test_enumeration_touches_every_distinct_instruction_of_every_architecture():
    reg = get_registry()
    want = {(datapath_identity(dp)) for A in reg.architectures.values() for dp in A.datapaths if not dp.refuse}
    got = {datapath_identity(dp) for *_, dp in cases()}
    assert got == want
    assert {dp.op for *_, dp in cases()} == set(OPS)
    # every tcgen05 data path (M, qualifiers, sparsity) with A in shared memory and in Tensor Memory
    lay = {(dp.qualifiers, bool(dp.sparse), int(re.search(r"\.m(\d+)n", ins).group(1)), tmem)
           for _, ins, tmem, dp in cases() if dp.op == "tcgen05.mma"}
    for q in ((), ("ws",), ("cta_group::2",)):
        for sp in (False, True):
            ms = {M for (qq, s, M, t) in lay if qq == q and s == sp}
            assert ms and all((q, sp, M, t) in lay for M in ms for t in (False, True))


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("op", OPS)
def test_warp_runs_every_instruction_and_equals_the_matrix_form(op, backend):
    """warp() on the backend under test equals the matrix form computed by the numpy reference."""
    if backend == "numba":
        pytest.importorskip("numba")
    failures = collections.defaultdict(list)
    count = 0
    for arch, ins, tmem, dp in cases():
        if dp.op != op:
            continue
        count += 1
        try:
            got, want = run_case(arch, ins, tmem, backend=backend)
        except Exception as exc:            # noqa: BLE001
            failures[_reason(exc)].append((arch, ins, tmem))
            continue
        if not np.array_equal(got, want):
            failures["warp() differs from the matrix form"].append((arch, ins, tmem))
    assert count
    assert not failures, "\n".join(f"{len(v)} x {k}\n    e.g. {v[0]}" for k, v in failures.items())


if __name__ == "__main__":     # the coverage list, grouped by reason
    ran, refused = survey()
    print(f"{len(ran)} cases run and equal the matrix form; refused:")
    for reason, items in sorted(refused.items(), key=lambda kv: -len(kv[1])):
        print(f"{len(items):5d}  {reason}\n       e.g. {items[0]}")
