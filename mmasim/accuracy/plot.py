"""The ``--plot`` of ``mmasim accuracy``: relative error against K, one line per setting
(matplotlib, an optional dependency)."""

from __future__ import annotations

import numpy as np

from mmasim.accuracy.inputs import DISTRIBUTIONS


def plot(results, path) -> None:
    """Median (solid, dots) and largest (dashed) relative error of each setting against K,
    both axes logarithmic; a K whose median error is 0 is drawn at the floor of the axis and
    marked "exact".  A dotted line marks binary32's unit roundoff 2**-24.  The image type
    comes from the file name (``.png``, ``.pdf``, ``.svg``, ...).  Raises :class:`ImportError`
    with an explanation when matplotlib is missing."""
    results = list(results)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError as exc:
        raise ImportError("--plot needs matplotlib (pip install matplotlib); it is an optional dependency") from exc
    ks = sorted({r.k for res in results for r in res.rows})
    positive = [v for res in results for r in res.rows for v in (r.median_rel_error, r.max_rel_error) if v]
    floor = min(positive + [2.0 ** -24]) / 2.0 ** (3 + len(results))     # where a zero error is drawn
    fig, ax = plt.subplots(figsize=(9, 6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    markers = "osD^vP*X"
    for i, res in enumerate(results):
        color, marker = colors[i % len(colors)], markers[i % len(markers)]
        size = max(4.0, 9.0 - 1.5 * i)        # later settings smaller, so that equal lines stay visible
        x = [r.k for r in res.rows]
        med = [r.median_rel_error if r.median_rel_error else floor for r in res.rows]
        mx = [r.max_rel_error if r.max_rel_error else floor for r in res.rows]
        ax.plot(x, med, "-", marker=marker, markersize=size, color=color, linewidth=1.8, label=res.label)
        ax.plot(x, mx, "--", marker=marker, markersize=size * 0.6, fillstyle="none", color=color, linewidth=1.0,
                alpha=0.8)
        for r, y in zip(res.rows, med):
            if not r.median_rel_error:
                ax.annotate("exact", (r.k, y), textcoords="offset points", xytext=(0, 7 + 9 * i), ha="center",
                            fontsize=7, color=color)
    ax.axhline(2.0 ** -24, color="gray", linestyle=":", linewidth=1)
    ax.annotate("binary32 unit roundoff 2^-24", (ks[-1], 2.0 ** -24), textcoords="offset points", xytext=(-4, -10),
                ha="right", fontsize=7, color="gray")
    ax.plot([], [], "-", color="black", label="solid: median relative error")
    ax.plot([], [], "--", color="black", linewidth=1.0, label="dashed: largest relative error")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(ks)
    ax.set_xticklabels([str(k) for k in ks])
    ax.set_ylim(bottom=floor / 2)
    ax.set_xlabel("K (length of each dot product)")
    ax.set_ylabel("relative error |D - exact| / |exact| (log scale)")
    right = ax.secondary_yaxis("right", functions=(lambda y: -np.log2(np.maximum(y, 1e-300)),
                                                   lambda b: 2.0 ** -np.asarray(b)))
    right.set_ylabel("correct bits, -log2(relative error)")
    low, high = ax.get_ylim()
    right.set_yticks([b for b in range(0, 64, 4) if low <= 2.0 ** -b <= high])
    right.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%d"))
    right.yaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    first = results[0]
    ax.set_title(f"GEMM error against the exact result: {first.m} x {first.n} outputs per K,\n"
                 f"inputs {DISTRIBUTIONS.get(first.dist, first.dist)} (seed {first.seed}); "
                 "'exact': median error 0, drawn at the bottom", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1, frameon=False)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110, bbox_inches="tight")
    finally:
        plt.close(fig)


__all__ = ["plot"]
