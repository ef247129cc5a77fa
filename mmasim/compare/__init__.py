"""``mmasim compare``: inputs on which two datapaths with the same operand formats disagree.

:mod:`.inputs` draws the rows, :func:`compare` (:mod:`.search`) finds and shrinks
differences, :mod:`.report` shows them with the exact result, :mod:`.plot` draws them.
Nothing here knows an architecture: the generators read the models' formats.

A tool: may import the core packages.
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
    output_words,
    shrink,
    size_bins,
)

__all__ = ["KINDS", "SHARE", "STRATEGIES", "IncompatibleDatapaths", "Inputs", "Kind", "check_compatible", "generate",
           "PLOT_TYPES", "abs_errors", "check_plottable", "plot", "plot_steps", "pyplot", "example_heading", "example_table", "report",
           "to_json", "STEPS", "Comparison", "Example", "OutputGrid", "bin_counts", "compare", "compare_many",
           "ordered", "output_grid", "output_words", "shrink", "size_bins", "encode_exact", "exact_results", "ulp_distance",
           "ulp_of", "MAX_WORDS", "CaseCountError", "max_cases"]
