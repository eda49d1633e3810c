"""`bfh compare OLD NEW`: is this agent release worse at failing over than the last one?
(issue 43, docs/compare.md)

    compare(old, new, tolerances=None) -> Comparison   each side a Scorecard, its dict, or a path
    Comparison.exit_code / .regressions / .to_dict()   0 no regression, 1 a regression, 2 cannot say
    render_text(comparison) -> str                     the terminal table as plain text
    tolerance.load() -> Tolerances                     the defaults and [tool.bfh.compare.tolerance]
"""

from __future__ import annotations

from harness.compare.comparison import compare
from harness.compare.inputs import CompareError
from harness.compare.render import render_text
from harness.compare.results import BETTER, FEW, SAME, WORSE, Comparison, MeasureRow, PromiseRow
from harness.compare.tolerance import Tolerance, ToleranceError, Tolerances

__all__ = [
    "BETTER",
    "FEW",
    "SAME",
    "WORSE",
    "CompareError",
    "Comparison",
    "MeasureRow",
    "PromiseRow",
    "Tolerance",
    "ToleranceError",
    "Tolerances",
    "compare",
    "render_text",
]
