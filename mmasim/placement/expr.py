"""A small formula language for layouts: integer expressions of the lane and the element index.

The PTX ISA and AMD's matrix-instruction documentation give most register layouts as formulas
(``groupID = %laneid >> 2``, ``row = groupID + 8 * ...``); tables and plugins write them as
Python-syntax strings, e.g. ``row = "g + 8 * ((i >> 1) & 1)"``.  Gives :func:`compile_expr`
(check once), :func:`evaluate` and :func:`environment` (the names, :data:`NAMES`).  Operators:
``+ - * // % << >> & | ^``, unary ``-``, comparisons, ``and`` / ``or`` / ``not`` and
``a if cond else b``.  Refuses everything else (calls, attributes, subscripts, unknown names),
a :class:`~mmasim.errors.TableError`: a table cannot run code.
"""

from __future__ import annotations

import ast
import operator

import numpy as np

from mmasim.errors import TableError

_BIN = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_,
    ast.BitXor: operator.xor,
}
_CMP = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}
#: the names a formula may use: ``lane`` (thread of the warp / warpgroup / wavefront, or TMEM lane),
#: ``i`` (element of that lane's fragment, PTX's a0, a1, ... order), ``g`` (``(lane % 32) >> 2``,
#: PTX's groupID), ``t`` (``lane % 4``, PTX's threadID_in_group), ``w`` (``lane >> 5``, the warp of a
#: warpgroup), ``M``, ``N``, ``K`` (the shape), ``E`` (elements per lane), ``V`` (scale factors per
#: row of A / column of B: ``.scale_vec::1X/2X/4X``) and the selector operands (:data:`SELECTORS`:
#: ``byte_id`` / ``thread_id`` of block scaling, ``selector`` of ``mma.sp``)
NAMES = ("lane", "i", "g", "t", "w", "M", "N", "K", "E", "V", "byte_id", "thread_id", "selector", "lane_alignment")
#: the selector operands a layout may depend on (bound per call, default 0); ``lane_alignment``:
#: the TMEM lane (0 or 16 within each 32-lane sub-partition) where a half-data-path tcgen05
#: operand (layouts C and F) starts, the lane field of its Tensor Memory address
SELECTORS = ("byte_id", "thread_id", "selector", "lane_alignment")


def compile_expr(text: str, where: str = "layout"):
    """Parse ``text``; raise :class:`~mmasim.TableError` naming ``where`` on anything
    outside the language.  Returns a checked AST to pass to :func:`evaluate` (shared by every
    caller of the same text: :func:`evaluate` does not change it)."""
    if not isinstance(text, (str, int)):
        raise TableError(f"{where}: a formula must be a string or an integer, got {type(text).__name__}")
    key = (type(text), text)
    if key not in _COMPILED:
        _COMPILED[key] = _compile(text, where)
    return _COMPILED[key]


#: checked formulas by their text (a formula that fails is not kept: it raises, naming its place, each time)
_COMPILED: dict = {}


def _compile(text, where: str):
    try:
        tree = ast.parse(str(text), mode="eval")
    except SyntaxError as exc:
        raise TableError(f"{where}: formula {text!r} does not parse: {exc.msg}") from None
    for node in ast.walk(tree):
        ok = isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp,
                               ast.Name, ast.Load, ast.USub, ast.UAdd, ast.Not, ast.And, ast.Or,
                               *_BIN, *_CMP))
        if isinstance(node, ast.Constant):
            ok = type(node.value) is int
        if isinstance(node, ast.Name) and node.id not in NAMES:
            raise TableError(f"{where}: formula {text!r}: unknown name {node.id!r} (known: {', '.join(NAMES)})")
        if not ok:
            raise TableError(f"{where}: formula {text!r}: {type(node).__name__} is not part of the layout "
                             "formula language (integers, names, + - * // % << >> & | ^, comparisons, "
                             "and/or/not, a if c else b)")
    return tree.body


def evaluate(node, env: dict):
    """Value of a compiled formula over integer numpy arrays / ints in ``env``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _BIN[type(node.op)](evaluate(node.left, env), evaluate(node.right, env))
    if isinstance(node, ast.UnaryOp):
        v = evaluate(node.operand, env)
        if isinstance(node.op, ast.Not):
            return np.logical_not(v)
        return -v if isinstance(node.op, ast.USub) else v
    if isinstance(node, ast.Compare):
        left = evaluate(node.left, env)
        out = True
        for op, right in zip(node.ops, node.comparators):
            r = evaluate(right, env)
            out = np.logical_and(out, _CMP[type(op)](left, r))
            left = r
        return out
    if isinstance(node, ast.BoolOp):
        vals = [evaluate(v, env) for v in node.values]
        fn = np.logical_and if isinstance(node.op, ast.And) else np.logical_or
        out = vals[0]
        for v in vals[1:]:
            out = fn(out, v)
        return out
    if isinstance(node, ast.IfExp):
        return np.where(evaluate(node.test, env), evaluate(node.body, env), evaluate(node.orelse, env))
    raise TableError(f"unexpected node {type(node).__name__} in a layout formula")   # pragma: no cover


def environment(lanes: int, elements: int, M: int, N: int, K: int, V: int = 0, **selectors) -> dict:
    """The names of the language over a ``(lanes, elements)`` grid (selectors default to 0).

    ``lane`` (thread within the warp / warpgroup / wavefront, or TMEM lane), ``i`` (element index
    within that lane's fragment, PTX's a0, a1, ... order), ``g`` (``(lane % 32) >> 2``, PTX's
    groupID within the warp), ``t`` (``lane % 4``, PTX's threadID_in_group), ``w``
    (``lane >> 5``, the warp of a warpgroup), ``M``, ``N``, ``K`` (the shape), ``E`` (elements
    per lane), ``V`` (scale factors per row of A / column of B of a block-scaled instruction:
    PTX's ``.scale_vec::1X/2X/4X``) and the instruction's selector operands (:data:`SELECTORS`):
    ``byte_id``, ``thread_id`` (PTX's ``{byte-id-a, thread-id-a}`` / ``{byte-id-b, thread-id-b}``
    of block scaling), ``selector`` (the sparsity selector of ``mma.sp``) and
    ``lane_alignment``."""
    lane, i = np.meshgrid(np.arange(lanes, dtype=np.int64), np.arange(elements, dtype=np.int64), indexing="ij")
    env = {"lane": lane, "i": i, "g": (lane & 31) >> 2, "t": lane & 3, "w": lane >> 5,
           "M": M, "N": N, "K": K, "E": elements, "V": V}
    env.update({name: int(selectors.get(name, 0)) for name in SELECTORS})
    return env
