"""The process rules: how the agent ended (harness/run/runner.py records its exit status; the
harness sends SIGTERM, then SIGKILL after 10 s), and that nothing it started outlived it.

The harness kills the agent's process group; a child that called setsid is in none of it. While
the check runs, this process is a child subreaper (Linux PR_SET_CHILD_SUBREAPER): an orphan of
any descendant is re-parented here rather than to init, so the agent's leftovers are found among
this process's descendants by the mark in their environment (harness.agents.launch.AGENT_MARK),
killed, and each named as a finding: in production it would be an orphan."""

from __future__ import annotations

import contextlib
import ctypes
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil

from harness.agentcheck.findings import Finding
from harness.agents.launch import AGENT_MARK

_PR_SET_CHILD_SUBREAPER = 36


@contextlib.contextmanager
def subreaper() -> Iterator[bool]:
    """This process adopts the orphans of its descendants while inside (False: it could not)."""
    libc = ctypes.CDLL(None, use_errno=True)
    ok = libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    try:
        yield ok
    finally:
        if ok:
            libc.prctl(_PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


def _marked(p: psutil.Process, folder: str) -> bool:
    try:
        mark = p.environ().get(AGENT_MARK, "")
    except (psutil.Error, OSError):
        return False
    return mark == folder or mark.startswith(folder.rstrip("/") + "/")


def end_leftovers(folder: Path) -> list[Finding]:
    """Kill every descendant of this process that an agent of `folder` (a run folder or an agent's
    own) started and that still runs; a C-21 finding names each."""
    left = [p for p in psutil.Process().children(recursive=True) if _marked(p, str(folder))]
    found = []
    for p in left:
        try:
            what = " ".join(p.cmdline())[:160] or p.name()
            p.kill()
        except psutil.Error:
            continue  # ended meanwhile
        found.append(
            Finding(
                "C-21",
                f"pid {p.pid} ({what}) still ran after the agent ended (outside its process group: "
                "setsid?): the check killed it; in production it would be an orphan",
                str(folder),
            )
        )
    psutil.wait_procs(left, timeout=5)  # reaped: they are this process's children now
    return found


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
