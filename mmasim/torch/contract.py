"""Tensor contractions as batched GEMMs: ``matmul``, ``mm``, ``bmm``, ``mv``, ``dot``, ``inner``,
``tensordot``, ``einsum`` and ``linear`` become one :func:`mmasim.torch.function.bmm`.

A contraction is given by a label per dimension of each operand and of the output (einsum's
letters).  A label in both operands and the output is a batch dimension (each index one GEMM),
one in A and the output an M dimension, one in B and the output an N dimension, one in both
operands but not the output a K dimension (summed by the GEMM); a label in one operand only and
not in the output is summed out of that operand first, in float32, as ``torch.einsum`` does.
Dimensions of size 1 broadcast.  Several M (N, K) labels are flattened into one, in the order
they appear in the output (in A for K): ``matmul`` of ``(B, T, K)`` by ``(K, N)`` is one GEMM of
``M = B * T`` rows, as torch folds it.
"""

from __future__ import annotations

import math

from mmasim.torch.function import bmm


class NotAGemm(Exception):
    """The call multiplies no matrices (no label is summed); ``reason``: ``None``, or why an
    op that does multiply matrices cannot be lowered here (then it is not emulated)."""

    def __init__(self, reason=None):
        super().__init__(reason)
        self.reason = reason


def contract(a, b, la, lb, lo, em, record=None):
    """``a`` and ``b`` contracted as labels ``la``, ``lb`` -> ``lo`` say (see the module), through
    one emulated batched GEMM: float32, shaped as ``lo``."""
    la, lb, lo = list(la), list(lb), list(lo)
    for name, lab, other in (("a", la, lb), ("b", lb, la)):
        gone = [i for i, x in enumerate(lab) if x not in other and x not in lo]
        if gone:
            t = a if name == "a" else b
            t = t.sum(dim=gone)
            kept = [x for i, x in enumerate(lab) if i not in gone]
            if name == "a":
                a, la = t, kept
            else:
                b, lb = t, kept
    size = {}
    for t, lab in ((a, la), (b, lb)):
        for x, s in zip(lab, t.shape):
            size[x] = s if size.get(x, 1) == 1 else size[x]
    batch = [x for x in lo if x in la and x in lb]
    ms = [x for x in lo if x in la and x not in lb]
    ns = [x for x in lo if x in lb and x not in la]
    ks = [x for x in la if x in lb and x not in lo]
    nb, m, n, k = (math.prod(size[x] for x in g) for g in (batch, ms, ns, ks))

    def operand(t, lab, order, rows, cols):
        t = t.permute([lab.index(x) for x in order]).expand([size[x] for x in order])
        return t.reshape(nb, rows, cols)

    d = bmm(operand(a, la, batch + ms + ks, m, k), operand(b, lb, batch + ks + ns, k, n), em, record)
    order = batch + ms + ns
    return d.reshape([size[x] for x in order]).permute([order.index(x) for x in lo])


def matmul_labels(da: int, db: int):
    """Labels of ``torch.matmul`` for operands of ``da`` and ``db`` dimensions: 1-D operands as
    torch promotes them, batch dimensions broadcast; an operand with no batch dimensions folds the
    other's into M (or N), as torch's matmul does.  Both with batch dimensions: the caller gives
    them the same number (``same_rank``)."""
    if da == 1 and db == 1:
        return ["k"], ["k"], []
    if db == 1:
        bl = [f"a{i}" for i in range(da - 2)]
        return bl + ["m", "k"], ["k"], bl + ["m"]
    if da == 1:
        bl = [f"b{i}" for i in range(db - 2)]
        return ["k"], bl + ["k", "n"], bl + ["n"]
    if da == 2 or db == 2:
        ba = [f"a{i}" for i in range(da - 2)]
        bb = [f"b{i}" for i in range(db - 2)]
        return ba + ["m", "k"], bb + ["k", "n"], ba + bb + ["m", "n"]
    bl = [f"x{i}" for i in range(max(da, db) - 2)]
    return bl[len(bl) - (da - 2):] + ["m", "k"], bl[len(bl) - (db - 2):] + ["k", "n"], bl + ["m", "n"]


def same_rank(a, b):
    """``a`` and ``b`` (both with batch dimensions) with leading 1's to the same number of dimensions."""
    r = max(a.dim(), b.dim())
    return a.reshape((1,) * (r - a.dim()) + tuple(a.shape)), b.reshape((1,) * (r - b.dim()) + tuple(b.shape))


def matmul(a, b, em, record=None):
    """``torch.matmul(a, b)`` through the emulated GEMM (float32)."""
    if a.dim() >= 3 and b.dim() >= 3:
        a, b = same_rank(a, b)
    return contract(a, b, *matmul_labels(a.dim(), b.dim()), em, record)


def linear(x, weight, em, record=None):
    """``x @ weight.T`` (``torch.nn.functional.linear`` without its bias): every leading dimension
    of ``x`` folded into M (float32)."""
    lead = [f"x{i}" for i in range(x.dim() - 1)]
    lw = ["n", "k"] if weight.dim() == 2 else ["k"]
    return contract(x, weight, lead + ["k"], lw, lead + lw[:-1], em, record)


def tensordot_labels(da: int, db: int, dims):
    """Labels of ``torch.tensordot(a, b, dims)``: ``dims`` an int (the last ``dims`` of ``a`` with
    the first of ``b``) or two sequences of dimensions."""
    if hasattr(dims, "tolist"):     # a tensor of dimensions
        dims = dims.tolist()
    if isinstance(dims, int):
        pa, pb = list(range(da - dims, da)), list(range(dims))
    else:
        pa, pb = ([int(x)] if isinstance(x, int) else [int(d) for d in x] for x in dims)
    pa = [p % da for p in pa]
    pb = [p % db for p in pb]
    la = [f"a{i}" for i in range(da)]
    lb = [f"b{i}" for i in range(db)]
    for j, (i, i2) in enumerate(zip(pa, pb)):
        la[i] = lb[i2] = f"k{j}"
    return la, lb, [x for x in la if x[0] == "a"] + [x for x in lb if x[0] == "b"]


def inner_labels(da: int, db: int):
    """Labels of ``torch.inner``: the last dimensions contracted (a 0-d operand multiplies no matrices)."""
    if da == 0 or db == 0:
        raise NotAGemm()
    return tensordot_labels(da, db, [[-1], [-1]])


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _sublist_equation(args):
    """einsum's sublist form ``(op, [0, 1], op, [1, 2], [0, 2])`` as an equation and its operands."""
    ops, subs = list(args[0::2]), list(args[1::2])
    out = None
    if len(ops) > len(subs):
        raise NotAGemm("einsum: an operand without its sublist")
    if len(subs) > len(ops):
        out = subs.pop()

    def text(sub):
        return "".join("..." if s is Ellipsis else _LETTERS[int(s)] for s in sub)

    eq = ",".join(text(s) for s in subs) + ("" if out is None else "->" + text(out))
    return eq, ops


def einsum_call(args):
    """``(equation, operands)`` of a ``torch.einsum`` call (equation and operands, equation and a
    list of operands, or the sublist form)."""
    if args and isinstance(args[0], str):
        ops = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
        return args[0], ops
    return _sublist_equation(args)


def einsum_labels(equation: str, dims):
    """Labels of a two-operand ``einsum`` (``dims``: the operands' numbers of dimensions).
    :class:`NotAGemm` where it multiplies no matrices (one operand, nothing summed) or cannot be
    one batched GEMM (three or more operands, a label twice in one operand: a diagonal)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(dims):
        raise NotAGemm("einsum: the equation's operands and the tensors given differ in number")
    if len(terms) == 1:
        raise NotAGemm()
    if len(terms) > 2:
        raise NotAGemm(f"einsum of {len(terms)} operands (emulated: two; contract them pairwise)")
    width = [d - (len(t) - 3 if "..." in t else len(t)) for t, d in zip(terms, dims)]
    ell = max([w for t, w in zip(terms, width) if "..." in t], default=0)
    labels = []
    for t, w in zip(terms, width):
        head, _, tail = t.partition("...")
        lab = list(head) + ([f"E{i}" for i in range(ell - w, ell)] if "..." in t else []) + list(tail)
        if len(set(lab)) != len(lab):
            raise NotAGemm(f"einsum {equation!r}: a label twice in one operand (a diagonal)")
        labels.append(lab)
    if arrow:
        head, _, tail = rhs.partition("...")
        out = list(head) + ([f"E{i}" for i in range(ell)] if "..." in rhs else []) + list(tail)
    else:
        letters = [x for lab in labels for x in lab if not x.startswith("E")]
        out = [f"E{i}" for i in range(ell)] + sorted(x for x in set(letters) if letters.count(x) == 1)
    la, lb = labels
    if not any(x in lb and x not in out for x in la):
        raise NotAGemm()            # nothing summed across the operands: elementwise or outer products
    return la, lb, out
