"""The session table (rich) and report: every scenario's JUnit properties, as the controller sees
them; `reports/session-<time>.html` links each run's report.html and `--bfh-rounds` writes
`reports/rounds-<time>.json`.

The rows belong to the session: a SessionTable kept in config.stash and registered as a plugin
(pytest_runtest_logreport gets no config to find them otherwise), not a module global.
"""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path
from typing import Any

import pytest

from harness.pytest_plugin.options import settings

COLUMNS: tuple[str, ...] = (
    "test",
    "verdict",
    "broken",
    "expected",
    "ok",
    "lost",
    "duplicated",
    "unexpected",
    "time",
    "run_dir",
)


class SessionTable:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: list[dict[str, Any]] = []
        self.unknown = {"inconclusive": 0, "inconclusive_skipped": 0, "reruns": 0}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Properties travel with the report, so this also works under pytest-xdist's controller.
        if report.when == "call":
            props = dict(report.user_properties)
            if "verdict" in props:
                self.results.append({"test": report.nodeid.split("::")[-1], **props})
            for k in self.unknown:
                self.unknown[k] += int(str(props.get(k) or 0))

    def unknown_line(self) -> str:
        """e.g. "inconclusive: 2 (1 skipped by --bfh-unknown=skip); 3 re-run(s) of an unknown verdict"."""
        n, skipped, reruns = self.unknown.values()
        if not n and not reruns:
            return ""
        how = f"{skipped} skipped by --bfh-unknown=skip" if skipped else "each a failure"
        return f"inconclusive: {n} ({how}); {reruns} re-run(s) of an unknown verdict"

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if os.environ.get("PYTEST_XDIST_WORKER"):
            return
        if line := self.unknown_line():
            terminalreporter.write_line(line, yellow=True, bold=True)
        self._table(terminalreporter)

    def _table(self, terminalreporter: Any) -> None:
        if not self.results or os.environ.get("PYTEST_XDIST_WORKER"):  # the controller writes the index
            return
        root = Path(settings(self.config).reports).resolve()
        cols = COLUMNS
        if any("rounds" in r for r in self.results):  # --bfh-rounds: failures of N, 95 % bound
            cols = (*cols[:3], "rounds", "failures", "failure_p_upper95", *cols[3:])
            write_rounds(root, self.results)
        terminalreporter.write(table(self.results, cols))
        index = session_index(root, self.results)
        if index is not None:
            terminalreporter.write_line(f"scenario reports: {index}")


TABLE = pytest.StashKey[SessionTable]()


def pytest_configure(config: pytest.Config) -> None:
    config.stash[TABLE] = SessionTable(config)
    config.pluginmanager.register(config.stash[TABLE], "bfh-session-table")


def table(results: list[dict[str, Any]], cols: tuple[str, ...]) -> str:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    t = Table(
        title="scenario runs",
        caption="time (s): brokers_up subscribe traffic faults_heal settle agents_stop teardown "
        "reconcile judge report",
    )
    for col in cols:
        t.add_column(col)
    for r in results:  # escaped: "test_scenario[masterslave]" is not rich markup
        t.add_row(*(escape(str(r.get(c, ""))) for c in cols))
    console = Console(file=io.StringIO(), width=220, force_terminal=False, emoji=False)
    console.print(t)
    return console.file.getvalue()  # type: ignore[attr-defined]


def write_rounds(root: Path, results: list[dict[str, Any]]) -> None:
    """reports/rounds-<time>.json: per scenario, the rounds, failures and the 95 % bound."""
    import json
    import time

    keys = ("rounds", "failures", "failure_p_upper95", "first_failing_run", "replay", "run_dir")
    rows = [{"test": r["test"], **{k: r[k] for k in keys if k in r}} for r in results if "rounds" in r]
    with contextlib.suppress(OSError):
        root.mkdir(parents=True, exist_ok=True)
        (root / f"rounds-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(json.dumps(rows, indent=2) + "\n")


def session_index(root: Path, results: list[dict[str, Any]]) -> Path | None:
    """reports/session-<time>.html linking every scenario's report.html (harness.report.html)."""
    import time

    from harness.report.html import headline, render_index
    from harness.verdict.judge import judged_summary

    entries = []
    for r in results:
        summary_path = Path(str(r.get("run_dir"))) / "analysis" / "summary.json"
        summary = judged_summary(summary_path.parent.parent) if summary_path.exists() else {}
        entries.append(
            {
                "name": r["test"],
                "run_dir": r.get("run_dir"),
                "broken": summary.get("broken"),
                **headline(summary),
            }
        )
    try:
        out = root / f"session-{time.strftime('%Y%m%d-%H%M%S')}.html"
        return render_index(entries, out, "pytest session")
    except OSError:
        return None
