"""The ``--plot`` of ``mmasim compare`` (matplotlib, the ``[plot]`` extra): how far the
datapaths' results are apart, and how far each is from the exact result, as bar charts
over the same size bins as the text report (every difference below one ULP in one bin)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from mmasim.arith.exact import exact_results, exact_values, ulp_of
from mmasim.execution.progress import doing, done
from mmasim.compare.inputs import IncompatibleDatapaths
from mmasim.compare.search import Comparison, bin_counts, output_grid, size_bins

#: image types ``plot`` writes (matplotlib's Agg backend)
PLOT_TYPES = ("png", "pdf", "svg", "svgz", "eps", "ps", "jpg", "jpeg", "tif", "tiff", "webp")


def pyplot():
    """matplotlib's pyplot on the Agg backend; :class:`ImportError` naming the extra when
    matplotlib is missing (``mmasim compare`` asks before it runs anything)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib: pip install 'mmasim-exact[plot]'") from exc
    return plt


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


def plot_steps(pairs: int) -> int:
    """The progress steps :func:`plot` of ``pairs`` comparisons takes: the exact results, one
    per datapath, the image."""
    return pairs + 3


def check_plottable(model) -> None:
    """:class:`IncompatibleDatapaths` when ``model``'s results cannot be drawn (an integer
    output has no ULPs); ``mmasim compare`` asks before it runs anything."""
    if model.d_format.integer:
        raise IncompatibleDatapaths("--plot draws float errors; the output format is an integer")


def _bars(ax, categories, series, title, ylabel):
    """Grouped bars, one group per category, one bar per series ``(label, counts, color)``,
    side by side; log count axis, each nonzero bar labelled with its count."""
    keep = [j for j in range(len(categories)) if j == 0 or any(counts[j] for _, counts, _ in series)]
    x = np.arange(len(keep))
    width = 0.8 / len(series)
    for i, (label, counts, color) in enumerate(series):
        heights = [counts[j] for j in keep]
        pos = x - 0.4 + width * (i + 0.5)
        ax.bar(pos, heights, width, label=label, color=color)
        for px, h in zip(pos, heights):
            if h:
                ax.annotate(f"{h:,}", (px, h), ha="center", va="bottom", fontsize=7 if len(series) < 3 else 6, xytext=(0, 1),
                            textcoords="offset points")
    ax.set_xticks(x, [categories[j] for j in keep])
    ax.set_yscale("log")
    ax.set_ylim(0.8, max(max(c) for _, c, _ in series) * 3)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10, loc="left")
    ax.legend(fontsize=8, loc="upper right")


def plot(results, path, max_points: int = 20000, bar=None) -> None:
    """Two bar charts of ``results`` (a :class:`Comparison` or a list of them against one
    reference, :func:`compare_many`), in ULPs of the output grid (:func:`output_grid`):

    - how far each other datapath's D is from the reference's, over every case: equal, then
      the size bins of the text report (:func:`size_bins`; every difference below one ULP
      in the first), then the cases where a special value (inf, NaN) differs;
    - how far each datapath's D is from the exact ``C + sum(a*b)``, over the first
      ``max_points`` cases: exact, then the same bins; cases with an inf or NaN left out.

    Bars of one bin stand side by side, the count axis is logarithmic and each bar shows
    its count.  The image type comes from the file name (:data:`PLOT_TYPES`).  ``bar``: a
    progress bar advanced by :func:`plot_steps` steps.  Needs matplotlib (:func:`pyplot`).
    """
    results = [results] if isinstance(results, Comparison) else list(results)
    plt = pyplot()
    first = results[0]
    ma = first.model_a
    check_plottable(ma)
    grid = output_grid(ma, *(r.model_b for r in results))
    names = size_bins(grid)[1]
    n = min(first.cases, max_points)

    between = []
    for i, r in enumerate(results, start=1):          # one color per datapath in both charts
        label = f"{r.model_b.arch} vs {ma.arch}: differ in {r.count:,} of {r.cases:,}"
        if r.grid != grid:
            label += f" (ULPs of {r.grid.name})"
        between.append((label, [r.cases - r.count] + bin_counts(r.ulps[r.differ], r.grid)
                        + [r.special_differences], f"C{i}"))

    doing(bar, "exact results")
    sub = first.inputs.head(n)
    exact = exact_results(ma, sub.a, sub.b, sub.c, **sub.kwargs())
    done(bar)
    against_exact = []
    sides = [(ma, first.da[:n])] + [(r.model_b, r.db[:n]) for r in results]
    for i, (model, words) in enumerate(sides):
        doing(bar, f"{model.arch}: errors against the exact results")
        err, skipped = abs_errors(model, grid, exact, words)
        label = f"{model.arch}: exact in {int((err == 0).sum()):,} of {len(err):,}"
        if skipped:
            label += f" ({skipped:,} with inf/NaN left out)"
        against_exact.append((label, [int((err == 0).sum())] + bin_counts(err[err > 0], grid), f"C{i}"))
        done(bar)

    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 8))
    others = ", ".join(r.model_b.arch for r in results)
    _bars(top, ["equal"] + names + ["inf/NaN differs"], between,
          f"|D({others}) - D({ma.arch})|, in ULPs of {grid.name}: {first.cases:,} generated cases",
          "number of cases (log scale)")
    _bars(bottom, ["exact"] + names, against_exact,
          f"|D - exact C + sum(a*b)|, in ULPs of {grid.name}: the first {n:,} cases",
          "number of cases (log scale)")
    bottom.set_xlabel(f"difference in units of the last place (ULPs) of {grid.name}; "
                      f"every difference below 1 ULP is in the bin <1")
    fig.suptitle(f"{ma.instruction} (seed {first.seed})", fontsize=11)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    finally:
        plt.close(fig)
    done(bar)
