"""`bfh agent check` ends every process the agent started (issue 59): a tiny agent whose child
calls setsid and sleeps outlives the agent's process group; the check, a child subreaper, finds it
by its mark, kills it and names it (C-21). Real processes, no broker."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import psutil
import pytest

from harness import procs
from harness.agentcheck.process import end_leftovers, subreaper
from harness.agents.launch import AGENT_MARK

# the agent: a child that leaves the agent's session (setsid) and sleeps; the agent then waits
AGENT = """
import os, sys, time
pid = os.fork()
if pid == 0:
    os.setsid()
    if os.fork():  # and a grandchild, so the setsid'ed one is an orphan twice over
        os._exit(0)
    open(sys.argv[1], "w").write(str(os.getpid()))
    time.sleep(600)
    os._exit(0)
time.sleep(600)
"""


def _wait_for(path: Path) -> int:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if path.exists() and path.read_text():
            return int(path.read_text())
        time.sleep(0.05)
    raise AssertionError("the agent's child never started")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's")
def test_a_child_that_called_setsid_is_killed_and_named(tmp_path: Path) -> None:
    run = tmp_path / "run"
    folder = run / "agents" / "agent-1"
    script, pidfile = tmp_path / "agent.py", tmp_path / "child.pid"
    script.write_text(AGENT)
    with subreaper() as adopted:
        assert adopted
        agent = procs.spawn(
            "agent-x",
            [sys.executable, str(script), str(pidfile)],
            folder / "agent.out",
            env={AGENT_MARK: str(folder)},
        )
        child = _wait_for(pidfile)
        assert os.getsid(child) != os.getsid(agent.pid)  # out of the agent's group and session
        agent.terminate(5)  # what the harness does: its process group, SIGTERM then SIGKILL
        assert psutil.pid_exists(child) and psutil.Process(child).ppid() == os.getpid()  # adopted
        found = end_leftovers(run)
    assert [f.rule for f in found] == ["C-21"]
    assert f"pid {child} (" in found[0].what and "agent.py" in found[0].what and "orphan" in found[0].what
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_nothing_left_is_no_finding(tmp_path: Path) -> None:
    with subreaper():
        agent = procs.spawn(
            "agent-y",
            [sys.executable, "-c", "pass"],
            tmp_path / "a" / "agent.out",
            env={AGENT_MARK: str(tmp_path / "a")},
        )
        agent.wait(20)
        assert end_leftovers(tmp_path) == []
