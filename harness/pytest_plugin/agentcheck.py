"""`pytest --bfh-agent-check CMD`: the agent contract check (harness/agentcheck/) before the suite.

Contract errors stop the session before any test runs (exit 1), a check that could not run too
(exit 2); a passing check lets the suite run, and is the session's outcome when nothing else was
collected (exit 0, not pytest's "no tests ran").
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

_RESULT = pytest.StashKey[int]()


def pytest_sessionstart(session: pytest.Session) -> None:
    from harness.pytest_plugin.options import settings

    config = session.config
    s = settings(config)
    if not s.agent_check or hasattr(config, "workerinput"):  # once, by the controller
        return
    from rich.console import Console

    from harness.agentcheck.check import check_agent
    from harness.agentcheck.report import print_report

    tr = config.pluginmanager.getplugin("terminalreporter")
    if tr is not None:
        tr.write_line("bfh agent check: a healthy pair, a kill -9 of the master, a link cut (about a minute)")
    result = check_agent(s.agent_check, reports=Path(s.reports), protocol=s.agent_protocol or "mqtt")
    buf = io.StringIO()
    print_report(result, Console(file=buf, width=tr._tw.fullwidth if tr is not None else 120, emoji=False))
    if tr is not None:
        tr.write(buf.getvalue())
    config.stash[_RESULT] = result.exit_code
    if result.exit_code:
        what = "could not run" if result.exit_code == 2 else f"{len(result.contract)} contract error(s)"
        pytest.exit(f"bfh agent check: {what}; the suite did not run", returncode=result.exit_code)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if session.config.stash.get(_RESULT, None) == 0 and exitstatus == pytest.ExitCode.NO_TESTS_COLLECTED:
        session.exitstatus = pytest.ExitCode.OK
