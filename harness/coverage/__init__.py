"""Topology coverage, the ops validation: every delivery path of a topology (harness/topology/paths.py)
under every fault it can suffer (rows.py), run with traffic on all paths (workload.py, validate.py),
and the coverage matrix that says what passed, what failed and what was not exercised (matrix.py).

`validate_topology()` is the one way in (`bfh validate`, the pytest plugin's `--bfh-topology`).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harness.coverage import matrix
from harness.coverage.rows import FAULTS, Row
from harness.coverage.validate import Coverage, RowResult, RunOptions, plan_rows, run_coverage, run_row
from harness.coverage.workload import CoverageError
from harness.topology import Topology

__all__ = [
    "FAULTS",
    "Coverage",
    "CoverageError",
    "Outputs",
    "Row",
    "RowResult",
    "RunOptions",
    "failure_message",
    "parse_budget",
    "plan_rows",
    "run_row",
    "validate_topology",
]


def failure_message(r: RowResult) -> str:
    """A row's broken flows (path x family), one line each with counts and what the prediction
    says blocks them, then its other broken promises."""
    from harness.verdict.checks.paths import blocked, label

    lines = [f"{r.row.key}: {r.row.what}: {r.verdict.upper()}  run folder {r.run_dir}"]
    for c in r.cells:
        if not c.get("ok"):
            why = blocked(c)
            lines.append(
                f"  path {label(c)} ({c['must']}): {c['state']}, expected {c['expected']}, "
                f"delivered {c['delivered']}, lost {c['lost']}" + (f"; predicted: {why}" if why else "")
            )
    lines += [f"  {x}" for x in r.reasons if not x.startswith(("paths", "BROKEN paths"))]
    return "\n".join(lines)


@dataclass
class Outputs:
    matrix: dict[str, Any]
    index: Path
    json: Path
    junit: Path | None

    @property
    def exit_code(self) -> int:
        return int(self.matrix["exit_code"])


def parse_budget(text: str | None) -> float | None:
    """`10m`, `90s`, `1h`, `600` (seconds) -> seconds."""
    if text is None or text == "":
        return None
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smh]?)\s*", text)
    if not m or float(m.group(1)) <= 0:
        raise CoverageError(f"bad budget {text!r}: use e.g. 600, 90s, 10m or 1h")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def validate_topology(
    topology: Topology,
    opts: RunOptions | None = None,
    *,
    faults: list[str] | None = None,
    groups: list[str] | None = None,
    budget_s: float | None = None,
    parallel: int | None = None,
    junitxml: Path | None = None,
) -> Outputs:
    """Run the topology's coverage rows and write the matrix: the index page (HTML, matrix on
    top), its JSON beside it and, when asked, a JUnit file with one test case per cell."""
    from harness.report.html import headline, render_index

    opts = opts or RunOptions()
    rows = plan_rows(topology, faults, groups)
    cov = run_coverage(topology, rows, opts, budget_s=budget_s, parallel=parallel)
    m = matrix.build(cov)
    stem = Path(opts.reports) / f"validate-{time.strftime('%Y%m%d-%H%M%S')}-{topology.name}"
    index = stem.with_suffix(".html")
    entries = []
    for r in cov.results:
        if r.run_dir is None:
            continue
        summary_file = r.run_dir / "analysis" / "summary.json"
        summary = {**_read(summary_file), **_read(r.run_dir / "analysis" / "verdict.json")}  # + the judge's
        entries.append(
            {"name": r.row.key, **headline(summary), "broken": r.broken, "run_dir": str(r.run_dir)}
        )
    render_index(entries, index, f"bfh validate {topology.name}", matrix.html_matrix(m, index))
    out_json = matrix.write_json(m, stem.with_suffix(".json"))
    junit = matrix.write_junit(m, junitxml) if junitxml else None
    return Outputs(m, index, out_json, junit)


def _read(path: Path) -> dict[str, Any]:
    import json

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}
