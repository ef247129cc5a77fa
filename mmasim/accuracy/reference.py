"""The exact result of a GEMM, in integers: ``C + sum_k a_ik * b_kj`` (times any scales)
with nothing rounded.

Every operand element is an integer significand times a power of two (:class:`Terms`: decoded
words, a block scale folded into its element).  :func:`matmul` multiplies two operands exactly
through binary64 matrix products of integer *planes* (:func:`planes`, :func:`limb_bits`), exact
whatever order BLAS adds in; :func:`exact_gemm` adds C and the promotion scales (one per K block of
A's rows and B's blocks), again in integers, and gives an :class:`Exact`.  Refuses inf and
NaN (no exact result) and a scaled significand past 62 bits (:class:`~mmasim.AccuracyError`).
"""

from __future__ import annotations

from fractions import Fraction

import attrs
import numpy as np

from mmasim.arith import ieee
from mmasim.arith.decode import INF, NAN, ZERO
from mmasim.errors import AccuracyError
from mmasim.arith.intmath import bit_length


@attrs.frozen(eq=False)
class Terms:
    """Exact elements ``sig * 2**exp`` (int64 arrays of one shape; ``sig`` signed)."""

    sig: np.ndarray
    exp: np.ndarray

    @classmethod
    def of(cls, decoded, what: str = "operand") -> "Terms":
        if np.isin(decoded.cls, (INF, NAN)).any():
            raise AccuracyError(f"accuracy: {what} holds inf or NaN; the exact result is not a number")
        sig = np.where(decoded.cls == ZERO, 0, decoded.signed_m())
        return cls(sig.astype(np.int64), np.where(sig == 0, 0, decoded.q).astype(np.int64))

    @classmethod
    def of_values(cls, x) -> "Terms":
        """Terms of finite binary64 values (exact), significands without trailing zero bits."""
        t = cls.of(ieee.decompose(np.asarray(x, dtype=np.float64).reshape(-1)), "a scale")._reshaped(np.shape(x))
        sig, exp = t.sig.copy(), t.exp.copy()
        for shift in (32, 16, 8, 4, 2, 1):
            even = (sig != 0) & (sig % (1 << shift) == 0)
            sig = np.where(even, sig >> shift, sig)
            exp = np.where(even, exp + shift, exp)
        return cls(sig, exp)

    def _reshaped(self, shape) -> "Terms":
        return Terms(self.sig.reshape(shape), self.exp.reshape(shape))

    def scaled(self, other: "Terms") -> "Terms":
        """Element-wise product with ``other`` (broadcast); significands must stay in int64."""
        if int(bit_length(np.abs(self.sig)).max(initial=0)) + int(bit_length(np.abs(other.sig)).max(initial=0)) > 62:
            raise AccuracyError("accuracy: a scaled significand does not fit 62 bits")
        sig = self.sig * other.sig
        return Terms(sig, np.where(sig == 0, 0, self.exp + other.exp))


def limb_bits(K: int) -> int:
    """``L``: plane entries below ``2**L`` keep every sum of ``K`` products of two entries below 2**53."""
    return (53 - max(1, int(K - 1).bit_length())) // 2


def planes(t: Terms, L: int) -> list:
    """``[(Z, base), ...]`` with ``Z`` float64 integer matrices, ``|Z| < 2**L``, and the
    operand equal to ``sum(Z * 2**base)`` exactly: significands wider than ``L / 2`` bits are
    first cut into limbs; elements whose exponents lie within ``L - limb`` of a plane's base
    share it."""
    mag = np.abs(t.sig)
    p = int(bit_length(mag).max(initial=0))
    if p == 0:
        return []
    limb = min(p, max(1, L // 2))
    width = L - limb
    out = []
    for j in range(-(-p // limb)):
        part = (mag >> (j * limb)) & ((1 << limb) - 1)
        signed = np.where(t.sig < 0, -part, part)
        e = t.exp + j * limb
        nz = part != 0
        exps = np.unique(e[nz])
        i = 0
        while i < len(exps):
            base = int(exps[i])
            members = nz & (e >= base) & (e <= base + width)
            shift = np.where(members, e - base, 0)
            out.append((np.where(members, signed << shift, 0).astype(np.float64), base))
            i = int(np.searchsorted(exps, base + width, side="right"))
    return out


def _add(total, exp, part, part_exp):
    """``total * 2**exp + part * 2**part_exp`` as ``(object array, exponent)``."""
    if total is None:
        return part, part_exp
    if part_exp >= exp:
        return total + (part << (part_exp - exp)), exp
    return (total << (exp - part_exp)) + part, part_exp


def matmul(a: Terms, b: Terms):
    """The exact ``a @ b`` of ``(M, K)`` and ``(K, N)`` terms: ``(object array of ints, exponent)``.

    With ``L = floor((53 - ceil(log2 K)) / 2)`` (:func:`limb_bits`) every sum in ``Za @ Zb`` is
    an integer below ``2**53``, so the binary64 matrix product of two planes is exact, whatever
    order BLAS adds in; the plane products are then summed as Python integers, shifted to one
    common exponent."""
    M, N = a.sig.shape[0], b.sig.shape[1]
    L = limb_bits(a.sig.shape[1])
    pa, pb = planes(a, L), planes(b, L)
    total, exp = np.zeros((M, N), dtype=object), 0
    first = True
    for za, ea in pa:
        for zb, eb in pb:
            part = (za @ zb).astype(np.int64).astype(object)
            if first:
                total, exp, first = part, ea + eb, False
            else:
                total, exp = _add(total, exp, part, ea + eb)
    return total, exp


@attrs.frozen(eq=False)
class Exact:
    """Exact results ``numer * 2**exp`` (an object array of Python ints and one exponent)."""

    numer: np.ndarray
    exp: int

    def fractions(self) -> list:
        scale = Fraction(2) ** self.exp
        return [Fraction(int(v)) * scale for v in self.numer.ravel()]


def exact_gemm(a: Terms, b: Terms, c: Terms | None = None, promotion=None, tensor_scale=None) -> Exact:
    """The exact ``C + A @ B``.  ``promotion``: ``(sa, sb, bk, bn)`` with ``sa`` ``(M, K / bk)``
    and ``sb`` ``(K / bk, N / bn)`` terms: each K block's sum times ``sa[i, kb] * sb[kb, j // bn]``.
    ``tensor_scale``: terms of one value multiplying ``A @ B``."""
    M, N = a.sig.shape[0], b.sig.shape[1]
    if promotion is None:
        total, exp = matmul(a, b)
    else:
        sa, sb, bk, bn = promotion
        cols = np.arange(N) // bn
        total = exp = None
        for kb in range(a.sig.shape[1] // bk):
            cut = slice(kb * bk, (kb + 1) * bk)
            part, pe = matmul(Terms(a.sig[:, cut], a.exp[:, cut]), Terms(b.sig[cut], b.exp[cut]))
            s = Terms(sa.sig[:, kb][:, None], sa.exp[:, kb][:, None]).scaled(
                Terms(sb.sig[kb, cols][None, :], sb.exp[kb, cols][None, :]))
            low = int(s.exp.min())
            scale = s.sig.astype(object) << (s.exp - low).astype(object)
            total, exp = _add(total, exp, part * scale, pe + low)
    if tensor_scale is not None:
        total = total * int(tensor_scale.sig.reshape(-1)[0])
        exp += int(tensor_scale.exp.reshape(-1)[0])
    if c is not None:
        low = int(c.exp.min())
        total, exp = _add(total, exp, c.sig.astype(object) << (c.exp - low).astype(object), low)
    return Exact(numer=np.asarray(total, dtype=object).reshape(M, N), exp=int(exp))


__all__ = ["Terms", "Exact", "exact_gemm", "matmul", "planes", "limb_bits"]
