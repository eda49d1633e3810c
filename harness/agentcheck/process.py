"""The process rules: how the agent ended (harness/run/runner.py records its exit status; the
harness sends SIGTERM, then SIGKILL after 10 s)."""

from __future__ import annotations

import signal
from pathlib import Path

from harness.agentcheck.findings import Finding


def _tail(agent_out: Path) -> str:
    try:
        lines = agent_out.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return f" (agent.out: {lines[-1][:200]})" if lines else ""


def check_exit(code: int | None, exited_early: bool, agent_out: Path) -> list[Finding]:
    where = str(agent_out)
    if exited_early:
        what = f"exited with status {code} before the harness sent SIGTERM{_tail(agent_out)}"
        return [Finding("C-21", what, where)]
    if code is None or code == -signal.SIGKILL:
        return [Finding("C-21", "still running 10 s after SIGTERM: the harness killed it (SIGKILL)", where)]
    if code != 0:
        return [Finding("C-21", f"exit status {code} on SIGTERM, not 0{_tail(agent_out)}", where)]
    return []
