"""The verdict: one owner. `judge(run_dir)` runs every checker of `checks.PROMISES` over a
reconciled run folder and writes the table into its own analysis/verdict.json."""

from harness.verdict.checks import PROMISES, Check
from harness.verdict.judge import DEFAULT_GATES, Verdict, judge, refuse_unjudgeable
from harness.verdict.view import RunView, VerdictError

__all__ = [
    "DEFAULT_GATES",
    "PROMISES",
    "Check",
    "RunView",
    "Verdict",
    "VerdictError",
    "judge",
    "refuse_unjudgeable",
]
