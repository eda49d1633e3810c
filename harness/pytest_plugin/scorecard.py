"""The session's scorecard (`--bfh-scorecard`, default <bfh_reports>/scorecard.json) and the
baseline comparison (`--bfh-baseline OLD.json`).

Every catalog entry's item (and `--bfh-topology` row) records its run folders, one a round, as the
JUnit property `run_dirs` (a JSON list); properties travel with the reports, so under xdist the
controller sees them all. A team's own tests on the fixtures (`bfh_env`) are not catalog entries
and stay out of it (a test may record `run_dirs` itself to be in it). At the session's end the
controller builds one scorecard from those folders (harness.verdict.scorecard: run.json and
verdict.json only, milliseconds a run, so the gate's wall time does not grow) and writes it. With
`--bfh-baseline`, it compares the baseline with it (harness.compare, `bfh compare`'s statistics)
and a regression fails the session: exit status 1 and a "bfh compare" section in the terminal
summary; 2 when it could not compare (different entries or seeds, too few rounds).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from harness.pytest_plugin.options import settings

#: the JUnit property holding an item's run folders, one a round (a JSON list)
RUN_DIRS = "run_dirs"


class SessionScorecard:
    """The run folders of the session's reports, and what became of them (a plugin object kept in
    config.stash: pytest_runtest_logreport gets no config)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.run_dirs: list[str] = []
        self.written: Path | None = None
        self.lines: list[str] = []  # the terminal section
        self.error = ""
        self.failed = False  # the baseline comparison failed the session
        self.baseline: Any = None  # --bfh-baseline's Scorecard, read at configure
        self.tolerances: Any = None  # the project's (harness.compare.tolerance), read at configure

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        props = dict(report.user_properties)
        try:
            dirs = [str(d) for d in json.loads(str(props.get(RUN_DIRS) or "[]")) if d]
        except ValueError:
            dirs = []
        self.run_dirs += [d for d in dirs if d not in self.run_dirs]

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        s = settings(self.config)
        if hasattr(self.config, "workerinput") or not (s.scorecard or s.baseline):
            return  # the controller writes it, from every worker's reports
        if not self.run_dirs:
            if s.baseline:
                self.lines.append("no run folder in this session: nothing to compare with the baseline")
                self._fail(session, pytest.ExitCode.INTERRUPTED)
            return
        from harness.contracts.scorecard import ScorecardError, save
        from harness.verdict.scorecard import scorecard_from_runs

        dirs = [Path(d) for d in self.run_dirs if (Path(d) / "run.json").is_file()]
        try:
            card = scorecard_from_runs(dirs, "pytest", s.agent_version)
            if s.scorecard:
                self.written = save(card, s.scorecard)
                self.lines.append(f"scorecard: {self.written} ({os.path.getsize(self.written)} bytes)")
        except (OSError, ScorecardError) as e:
            self.error = f"scorecard not written: {e}"
            return
        if s.baseline:
            text, code = compare_with(self.baseline, card, self.tolerances)
            self.lines.append(text)
            if code:  # 1: a regression (pytest's TESTS_FAILED); 2: could not compare (INTERRUPTED)
                self._fail(session, code)

    def _fail(self, session: pytest.Session, code: int) -> None:
        self.failed = True
        if session.exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED):
            session.exitstatus = code

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.error:
            terminalreporter.write_sep("-", "bfh scorecard", yellow=True)
            terminalreporter.write_line(self.error)
        if self.lines:
            title = "bfh compare (--bfh-baseline)" if settings(self.config).baseline else "bfh scorecard"
            terminalreporter.write_sep("=", title, red=self.failed, green=not self.failed)
            for line in self.lines:
                terminalreporter.write_line(line)


def compare_with(old: Any, new: Any, tolerances: Any = None) -> tuple[str, int]:
    """The baseline comparison: (its text, exit code: 0 none, 1 a regression, 2 could not compare).
    The statistics are harness.compare's (`bfh compare`), the tolerances the project's pyproject
    [tool.bfh.compare.tolerance] (docs/compare.md) or the defaults."""
    from harness.compare import CompareError, compare, render_text

    try:
        result = compare(old, new, tolerances)
    except CompareError as e:
        return f"could not compare: {e}", 2
    return render_text(result), int(result.exit_code)


STATE = pytest.StashKey[SessionScorecard]()


def pytest_configure(config: pytest.Config) -> None:
    """The baseline is read first: a missing or invalid one is a usage error before any run."""
    from harness.compare.inputs import read_scorecard
    from harness.contracts.scorecard import ScorecardError
    from harness.topology.files import InputFileError

    config.stash[STATE] = SessionScorecard(config)
    baseline = settings(config).baseline
    if baseline:
        from harness.compare import ToleranceError, tolerance

        try:
            config.stash[STATE].baseline = read_scorecard(baseline)  # a FIFO is refused, not read
            config.stash[STATE].tolerances = tolerance.load(Path(str(config.rootpath)))
        except (ScorecardError, ToleranceError, InputFileError) as e:
            raise pytest.UsageError(f"--bfh-baseline: {e}") from None
    config.pluginmanager.register(config.stash[STATE], "bfh-scorecard")
