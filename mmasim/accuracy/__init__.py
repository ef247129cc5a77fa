"""Accuracy answers: how far a GEMM as a kernel runs it (:func:`mmasim.gemm`, with its
promotion and split-K) lands from the exact result, per K (docs/accuracy.md).

For each K: random ``A`` and ``B`` from a stated distribution (:mod:`.inputs`), the
simulated D, and the exact result of the operands the instruction reads
(:mod:`.reference`, integers); the error is the accumulation's alone.  :class:`KStats`
defines the statistics.

A tool: may import the core packages.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction

import attrs
import numpy as np

from mmasim.arith import binary32
from mmasim.errors import AccuracyError
from mmasim.arith.exact import ulp_of
from mmasim.composition.gemm import gemm, progress_bar
from mmasim.composition.operands import operand, promotion_blocks
from mmasim.execution.model import Model
from mmasim.registry.build import get_registry
from mmasim.accuracy import inputs, reference

#: the K values of a study unless told
DEFAULT_K = (256, 1024, 4096, 16384)
#: at least this many rows and columns of outputs (rounded up to the instruction's M and N)
DEFAULT_EXTENT = 64
#: seeds are below this (``numpy.random.default_rng([seed, K])`` reads 128 bits of it)
SEED_LIMIT = 2 ** 128

#: the share of this machine's physical memory one K of a study may plan to use (:func:`memory_limit`)
MEMORY_FRACTION = 0.5
#: the limit where the machine's memory cannot be read (no ``os.sysconf``)
FALLBACK_MEMORY_LIMIT = 8 * 2 ** 30
#: bytes one element of A or B costs at most, measured with margin: the float32 draw, the words,
#: the decoded and exact terms and the binary64 planes of the exact product (up to about 110 for f64)
OPERAND_BYTES = 128
#: bytes one output costs at most, measured with margin (the exact result and its Fraction, the
#: simulated D), plus :data:`PRODUCT_BYTES` for each product of one instruction's K that the chain
#: holds for it at once
OUTPUT_BYTES = 512
PRODUCT_BYTES = 32


@attrs.frozen
class KStats:
    """The error statistics of one K, ``X`` the exact result and ``p`` the output format's
    significand bits (24 for f32):

    * ``max_rel_error``, ``median_rel_error``: of ``|D - X| / |X|`` over outputs with ``X != 0``;
    * ``max_ulps``, ``median_ulps``: ``|D - X|`` in ULPs of the output format at ``X``;
    * ``fraction_exact``: the share of outputs with ``D == X``;
    * ``effective_bits``: ``min(p, -log2(median_rel_error))``, ``p`` when the median is 0;
    * ``nonfinite``: outputs that are inf or NaN (left out of the statistics).
    """

    k: int
    cases: int
    max_rel_error: float | None
    median_rel_error: float | None
    max_ulps: float | None
    median_ulps: float | None
    fraction_exact: float
    effective_bits: float | None
    nonfinite: int
    zero_results: int

    def to_json(self) -> dict:
        return attrs.asdict(self)


@attrs.frozen
class Accuracy:
    """One setting's study: the instruction, how the GEMM ran, the inputs, one :class:`KStats` per K."""

    arch: str
    instruction: str
    status: str
    promote_every: int | None
    split_k: int | None
    split_reduce: str
    scheme: str | None
    dist: str
    seed: int
    m: int
    n: int
    output: str
    rows: tuple

    @property
    def label(self) -> str:
        """``ARCH INSTRUCTION`` and how it ran, for tables and legends."""
        parts = [f"{self.arch} {self.instruction}"]
        if self.scheme:
            parts.append(f"scheme {self.scheme}")
        parts.append(f"promote every {self.promote_every}" if self.promote_every else "no promotion")
        if self.split_k and self.split_k > 1:
            parts.append(f"split-K {self.split_k} ({self.split_reduce})")
        return ", ".join(parts)

    def to_json(self) -> dict:
        doc = attrs.asdict(self, recurse=False)
        doc["rows"] = [r.to_json() for r in self.rows]
        return doc

    def table(self) -> str:
        """The statistics as a text table, one line per K."""
        head = (f"{self.label} [{self.status}]\n"
                f"  {self.m} x {self.n} outputs per K; inputs {inputs.DISTRIBUTIONS.get(self.dist, self.dist)}, "
                f"seed {self.seed}; errors in {self.output} against the exact result\n")
        cols = f"  {'K':>7s} {'max rel':>10s} {'median rel':>10s} {'max ulps':>10s} {'median ulps':>11s} " \
               f"{'exact':>7s} {'eff. bits':>9s}"
        lines = [head + cols]
        for r in self.rows:
            lines.append(f"  {r.k:7d} {_g(r.max_rel_error):>10s} {_g(r.median_rel_error):>10s} "
                         f"{_g(r.max_ulps):>10s} {_g(r.median_ulps):>11s} {100 * r.fraction_exact:6.1f}% "
                         f"{_g(r.effective_bits, '.1f'):>9s}"
                         + (f"  ({r.nonfinite} inf/NaN left out)" if r.nonfinite else ""))
        return "\n".join(lines)


def _g(x, spec: str = ".3g") -> str:
    return "-" if x is None else format(x, spec)


def statistics(k: int, got: list, exact: list, fmt) -> KStats:
    """:class:`KStats` of simulated values ``got`` (``Fraction``, or ``None`` for inf / NaN)
    against the exact values ``exact`` (``Fraction``), errors in ULPs of ``fmt``."""
    rel, ulps, same, nonfinite, zeros = [], [], 0, 0, 0
    for d, x in zip(got, exact):
        if d is None:
            nonfinite += 1
            continue
        diff = abs(d - x)
        same += diff == 0
        ulps.append(float(diff / ulp_of(fmt, x)))
        if x == 0:
            zeros += 1
        else:
            rel.append(float(diff / abs(x)))
    p = fmt.man_bits + 1
    med = float(np.median(rel)) if rel else None
    bits = None if med is None else (float(p) if med == 0 else min(float(p), -math.log2(med)))
    return KStats(k=k, cases=len(exact), max_rel_error=max(rel) if rel else None, median_rel_error=med,
                  max_ulps=max(ulps) if ulps else None, median_ulps=float(np.median(ulps)) if ulps else None,
                  fraction_exact=same / len(exact) if exact else 0.0, effective_bits=bits, nonfinite=nonfinite,
                  zero_results=zeros)


def _extent(model, legal, given, what: str) -> int:
    """``m`` or ``n`` (``what``) of a study on ``model``: ``given``, or at least
    :data:`DEFAULT_EXTENT` in whole instruction tiles."""
    if given is None:
        t = min(legal) if legal else 1
        return t * -(-DEFAULT_EXTENT // t)
    if legal and not any(given % t == 0 for t in legal):
        listing = ", ".join(map(str, legal[:8])) + (", ..." if len(legal) > 8 else "")
        raise AccuracyError(f"accuracy: {what} = {given} is not a multiple of an {what.upper()} of "
                            f"{model.instruction} ({listing}): the GEMM is whole instruction tiles")
    return given


def _count(value, what: str, minimum: int = 1, limit: int | None = None, takes: str = "a positive integer"):
    """``value`` as an int, or :class:`~mmasim.AccuracyError` naming ``what`` and what it takes:
    an ``int`` (a numpy integer too; not a bool, a float or a string) from ``minimum`` up to,
    not including, ``limit``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) \
            or value < minimum or (limit is not None and value >= limit):
        raise AccuracyError(f"accuracy: {what} must be {takes}, not {value!r}")
    return int(value)


def memory_limit() -> int:
    """Bytes one K of a study may plan to use: :data:`MEMORY_FRACTION` of this machine's
    physical memory (``os.sysconf``), else :data:`FALLBACK_MEMORY_LIMIT`."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return FALLBACK_MEMORY_LIMIT
    return int(total * MEMORY_FRACTION) if total > 0 else FALLBACK_MEMORY_LIMIT


def memory_estimate(model, M: int, K: int, N: int) -> int:
    """Bytes a study of ``M x N`` outputs at ``K`` needs at most (:data:`OPERAND_BYTES` per element of
    A and B, :data:`OUTPUT_BYTES` and :data:`PRODUCT_BYTES` per instruction K per output)."""
    return OPERAND_BYTES * (M + N) * K + M * N * (OUTPUT_BYTES + PRODUCT_BYTES * model.datapath.k)


def _gib(n: int) -> str:
    return f"{n / 2 ** 30:,.1f} GiB" if n < 2 ** 40 * 1024 else f"{n / 2 ** 50:,.3g} PiB"


def _check_memory(model, M: int, ks: tuple, N: int) -> None:
    """Refuse, before anything runs, a study whose largest K would need more than :func:`memory_limit`."""
    K = max(ks)
    need, limit = memory_estimate(model, M, K, N), memory_limit()
    if need > limit:
        raise AccuracyError(
            f"accuracy: K = {K} with {M} x {N} outputs would need about {_gib(need)} of memory (an estimate, "
            f"mmasim.accuracy.memory_estimate), more than the limit of {_gib(limit)} "
            f"({MEMORY_FRACTION:.0%} of this machine's memory, docs/accuracy.md); use a smaller k, m or n")


def _terms(model, q, operand_name: str, axis: int):
    """Exact terms of one operand: its words times its instruction scales."""
    t = reference.Terms.of(model.decode(operand_name, q.words), operand_name.upper())
    if q.scales is not None:
        s = reference.Terms.of(model.decode("scale", q.scales), f"{operand_name.upper()}'s scales")
        blk = model.datapath.block
        t = t.scaled(reference.Terms(np.repeat(s.sig, blk, axis=axis), np.repeat(s.exp, blk, axis=axis)))
    return t


def exact_result(model, A, B) -> reference.Exact:
    """The exact ``A @ B`` of two gemm operands (words, values or quantized tensors)."""
    qa, qb = operand(model, A, "A", model.a_format), operand(model, B, "B", model.b_format)
    ta, tb = _terms(model, qa, "a", 1), _terms(model, qb, "b", 0)
    promotion = None
    if qa.promotion is not None or qb.promotion is not None:
        M, K, N = qa.words.shape[0], qa.words.shape[1], qb.words.shape[1]
        bk, bn = promotion_blocks(qa.promotion, qb.promotion, M, K, N)
        promotion = (reference.Terms.of_values(qa.promotion), reference.Terms.of_values(qb.promotion), bk, bn)
    ts = [q.tensor_scale for q in (qa, qb) if q.tensor_scale is not None]
    tensor = None
    if ts:
        tensor = reference.Terms.of_values(np.array([ts[0]]))
        for extra in ts[1:]:
            tensor = tensor.scaled(reference.Terms.of_values(np.array([extra])))
    return reference.exact_gemm(ta, tb, promotion=promotion, tensor_scale=tensor)


def _setting(model, k, M, N, dist, seed, promote_every, split_k, split_reduce, scheme, backend, threads, bar):
    composed = promote_every is not None or split_k is not None or scheme is not None
    fmt = get_registry().formats["f32"] if composed else model.d_format
    rows = []
    for K in k:
        A, B = inputs.operands(model, dist, seed, M, K, N, scheme)
        kw = dict(promote_every=promote_every, split_k=split_k) if composed else {}
        if split_reduce != "sequential":
            kw["split_reduce"] = split_reduce
        d = gemm(A, B, None, model=model, backend=backend, threads=threads, progress=False, words=True, **kw)
        vals = binary32.values(fmt, np.asarray(d, dtype=_UINT[fmt.container_bits])).ravel()
        got = [Fraction(float(v)) if math.isfinite(v) else None for v in vals]
        rows.append(statistics(K, got, exact_result(model, A, B).fractions(), fmt))
        if bar is not None:
            bar.update(K)
    return Accuracy(arch=model.arch, instruction=model.instruction, status=model.status.kind,
                    promote_every=promote_every, split_k=split_k, split_reduce=split_reduce, scheme=scheme,
                    dist=dist if isinstance(dist, str) else getattr(dist, "__name__", "custom"), seed=seed,
                    m=M, n=N, output=fmt.name, rows=tuple(rows))


_UINT = {16: np.uint16, 32: np.uint32, 64: np.uint64}


def _ks(k) -> tuple:
    if isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
        ks = (k,)
    else:
        try:
            ks = tuple(k)
        except TypeError:
            ks = None
        if isinstance(k, (str, bytes)) or not ks:
            raise AccuracyError(f"accuracy: k must be a positive integer or a non-empty sequence of them, not {k!r}")
    return tuple(_count(x, "k", takes="positive integers (a K or a sequence of K values)") for x in ks)


def studies(settings, k=DEFAULT_K, *, m=None, n=None, dist="uniform", seed=0, backend=None, threads=None,
            progress=None) -> list:
    """:class:`Accuracy` of each setting, on the same inputs (one seed), with one progress bar.
    ``settings``: dicts of :func:`accuracy`'s arguments ``arch``, ``instruction`` (or
    ``model``), ``promote_every``, ``split_k``, ``split_reduce``, ``scheme`` and qualifiers.
    Every argument is checked, and the memory of each setting estimated, before anything runs."""
    ks = _ks(k)
    m = None if m is None else _count(m, "m", takes="a positive integer (rows of outputs) or None")
    n = None if n is None else _count(n, "n", takes="a positive integer (columns of outputs) or None")
    seed = _count(seed, "seed", minimum=0, limit=SEED_LIMIT, takes="an integer from 0 to 2**128 - 1")
    prepared = []
    for s in settings:
        s = dict(s)
        model = s.pop("model", None)
        arch, instruction = s.pop("arch", None), s.pop("instruction", None)
        options = {key: s.pop(key, None) for key in ("promote_every", "split_k", "scheme")}
        options["split_reduce"] = s.pop("split_reduce", "sequential")
        if model is None:
            if arch is None or instruction is None:
                raise AccuracyError("accuracy needs arch= and instruction= (or model=)")
            model = Model.lookup(arch, instruction, backend, **s)
        elif s:
            raise AccuracyError(f"accuracy: qualifiers {sorted(s)} come with arch= and instruction=, not model=")
        if model.d_format.integer:
            raise AccuracyError(f"accuracy: {model.instruction} has an integer D; its sums are exact")
        if model.datapath.sparse:
            raise AccuracyError(f"accuracy: {model.instruction} is sparse; a study runs dense GEMMs (name the "
                                "dense instruction)")
        for K in ks:
            if K % model.datapath.k:
                raise AccuracyError(f"accuracy: k = {K} is not a multiple of the K of {model.instruction} "
                                    f"({model.datapath.k}): the GEMM chains whole instructions")
        M, N = _extent(model, model.legal_m, m, "m"), _extent(model, model.legal_n, n, "n")
        _check_memory(model, M, ks, N)
        prepared.append((model, M, N, options))
    if dist not in inputs.DISTRIBUTIONS and not callable(dist):
        inputs.draw(dist, None, (0,))           # raises, naming the distributions
    bar = progress_bar(progress, sum(ks) * len(prepared), "mmasim accuracy", unit=" K")
    try:
        return [_setting(model, ks, M, N, dist, seed, backend=backend, threads=threads, bar=bar, **options)
                for model, M, N, options in prepared]
    finally:
        if bar is not None:
            bar.close()


def accuracy(arch=None, instruction=None, k=DEFAULT_K, *, m=None, n=None, dist="uniform", seed=0,
             promote_every=None, split_k=None, split_reduce="sequential", scheme=None, model=None, backend=None,
             threads=None, progress=None, **qualifiers) -> Accuracy:
    """The error of ``instruction`` on ``arch`` against the exact result, for each K in ``k``.

    ``m``, ``n``: outputs per K (default: at least 64, in whole instruction tiles).
    ``dist``: ``"uniform"`` ([0, 1)), ``"signed-uniform"`` ([-1, 1)), ``"normal"``, or a
    callable ``dist(rng, shape)`` returning float32 values; inputs are cast RNE
    (saturating) to the instruction's formats, or quantized by ``scheme``
    (:mod:`mmasim.quantize`).  ``promote_every``, ``split_k``, ``split_reduce``: as
    :func:`mmasim.gemm` takes them (then the errors are those of the binary32
    accumulator).  ``seed``: the inputs of each K come from ``numpy.random.default_rng([seed, K])``.
    Returns an :class:`Accuracy` (``.rows``: one :class:`KStats` per K; ``.table()``,
    ``.to_json()``).
    """
    setting = dict(arch=arch, instruction=instruction, model=model, promote_every=promote_every, split_k=split_k,
                   split_reduce=split_reduce, scheme=scheme, **qualifiers)
    return studies([setting], k, m=m, n=n, dist=dist, seed=seed, backend=backend, threads=threads,
                   progress=progress)[0]


__all__ = ["accuracy", "studies", "Accuracy", "KStats", "statistics", "exact_result", "memory_estimate", "memory_limit",
           "DEFAULT_K", "MEMORY_FRACTION"]
