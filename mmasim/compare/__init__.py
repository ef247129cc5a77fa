"""Searching for inputs on which two datapaths disagree (``mmasim compare``).

Two models (two architectures, or two datapaths of one architecture) whose
operands have the same formats are run on the same generated inputs
(:mod:`.inputs`: uniform random words, values near one, cancellation-heavy
rows and adversarial rows).  :func:`compare` (:mod:`.search`) reports how
often the output words differ, the largest difference in ULPs of the output
grid, and the smallest differing example it can find (greedily shrunk by
zeroing terms); :mod:`.report` shows it with every operand decoded and the
exact rational result (:mod:`mmasim.arith.exact`) for reference, :mod:`.plot`
draws how far the results are apart and how far each is from the exact result.

Nothing here knows an architecture: the generators read the formats of the
models.
"""

from __future__ import annotations

from mmasim.arith.exact import encode_exact, exact_results, ulp_distance, ulp_of
from mmasim.compare.inputs import (
    KINDS,
    SHARE,
    STRATEGIES,
    IncompatibleDatapaths,
    Inputs,
    Kind,
    check_compatible,
    generate,
)
from mmasim.compare.plot import PLOT_TYPES, abs_errors, check_plottable, plot, plot_steps, pyplot
from mmasim.compare.report import example_heading, example_table, report, to_json
from mmasim.compare.search import (
    MAX_WORDS,
    STEPS,
    CaseCountError,
    Comparison,
    Example,
    OutputGrid,
    bin_counts,
    compare,
    compare_many,
    max_cases,
    ordered,
    output_grid,
    run,
    shrink,
    size_bins,
)

__all__ = ["KINDS", "SHARE", "STRATEGIES", "IncompatibleDatapaths", "Inputs", "Kind", "check_compatible", "generate",
           "PLOT_TYPES", "abs_errors", "check_plottable", "plot", "plot_steps", "pyplot", "example_heading", "example_table", "report",
           "to_json", "STEPS", "Comparison", "Example", "OutputGrid", "bin_counts", "compare", "compare_many",
           "ordered", "output_grid", "run", "shrink", "size_bins", "encode_exact", "exact_results", "ulp_distance",
           "ulp_of", "MAX_WORDS", "CaseCountError", "max_cases"]
