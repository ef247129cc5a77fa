"""The ``--plot`` of ``mmasim compare``: a histogram of each datapath's error
against the exact result (matplotlib, an optional dependency)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from ..exact import exact_results, exact_values, ulp_of
from .inputs import IncompatibleDatapaths
from .search import Comparison, output_grid

#: image types ``plot`` writes (matplotlib's Agg backend)
PLOT_TYPES = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp")


def abs_errors(model, grid, exact, words) -> tuple:
    """``|D - exact|`` in ULPs of ``grid`` for each finite case, and how many
    cases had no finite exact value or a special D (left out)."""
    vals = exact_values(model.decode("d", words))
    out, skipped = [], 0
    for e, v in zip(exact, vals):
        if e is None or not isinstance(v, Fraction):
            skipped += 1
            continue
        out.append(float(abs(v - e) / ulp_of(grid, e)))
    return np.asarray(out, dtype=np.float64), skipped


def plot(results, path, max_points: int = 20000) -> None:
    """Histogram of each datapath's error against the exact result ``C + sum(a*b)``.

    ``results``: a :class:`Comparison` or a list of them against one reference
    (:func:`compare_many`).  The x axis is ``|D - exact|`` in ULPs of the output
    grid (:func:`output_grid`: the D format with the fraction bits the rounding
    keeps), on a log scale (bins of a factor of 2), the y axis the number of
    cases, log scale; exact results are counted in the legend.  The image type
    comes from the file name (:data:`PLOT_TYPES`).

    Needs matplotlib (optional dependency); raises :class:`ImportError` with
    an explanation when it is missing.
    """
    results = [results] if isinstance(results, Comparison) else list(results)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib (pip install matplotlib); it is an optional dependency") from exc
    first = results[0]
    ma = first.model_a
    if ma.d_format.integer:
        raise IncompatibleDatapaths("--plot draws float errors; the output format is an integer")
    grid = output_grid(ma, *(r.model_b for r in results))
    n = min(first.cases, max_points)
    sides = [(ma, first.da[:n], first.inputs)] + [(r.model_b, r.db[:n], r.inputs) for r in results]
    series = []
    for model, words, inputs in sides:
        sub = inputs.head(n)
        err, skipped = abs_errors(model, grid, exact_results(ma, sub.a, sub.b, sub.c, **sub.kwargs()), words)
        series.append((model, err, skipped))
    nonzero = np.concatenate([e[e > 0] for _, e, _ in series] + [np.zeros(0)])
    lo = np.floor(np.log2(nonzero.min())) if nonzero.size else -1.0
    hi = np.ceil(np.log2(nonzero.max())) if nonzero.size else 1.0
    bins = 2.0 ** np.arange(lo, max(hi, lo + 1) + 1)
    fig, ax = plt.subplots(figsize=(9, 5))
    differs = [None] + [r.count for r in results]
    for (model, err, skipped), count in zip(series, differs):
        label = f"{model.arch}: exact in {int((err == 0).sum()):,} of {len(err):,}"
        if skipped:
            label += f" ({skipped:,} inf/NaN left out)"
        if count is not None:
            label += f"; differs from {ma.arch} in {count:,} of {first.cases:,}"
        ax.hist(err[err > 0], bins=bins, label=label, histtype="step", linewidth=1.4)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(f"|D - exact result| in units of the last place (ULPs) of {grid.name}, log scale")
    ax.set_ylabel("number of cases (log scale)")
    ax.set_title(f"{ma.instruction}: error of each result against the exact C + sum(a*b)\n"
                 f"{n:,} generated cases (seed {first.seed}); bins of a factor of 2", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        fig.savefig(path)
    finally:
        plt.close(fig)
