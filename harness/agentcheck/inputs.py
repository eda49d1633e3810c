"""The input rules, the agent alone (no broker): a malformed workload.json must end it with a
non-zero exit and one line on stderr (C-2), and the password of its agent.conf must appear in
nothing it writes (C-5: checked here and over the run's own outputs)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

from harness import procs
from harness.agentcheck.findings import PASSWORD, Finding
from harness.agents.launch import AGENT_MARK, write_agent_conf

PROBE_TIMEOUT_S = 15.0
__all__ = ["PASSWORD", "check_malformed", "leaks"]  # PASSWORD: findings.py owns it (redacts it)


def _argv(command: str, folder: Path) -> list[str]:
    paths = {
        "config": folder / "agent.conf",
        "workload": folder / "workload.json",
        "log": folder / "messages.jsonl",
    }
    values = {k: shlex.quote(str(v)) for k, v in {**paths, "python": sys.executable}.items()}
    return shlex.split(command.format(**values))


def check_malformed(command: str, folder: Path) -> list[Finding]:
    """Start the agent on a workload.json that is not JSON; it must exit non-zero, saying why."""
    folder.mkdir(parents=True, exist_ok=True)
    write_agent_conf(
        folder / "agent.conf",
        {
            "mb.urls": "127.0.0.1:1",
            "mb.username": "bfh",
            "mb.password": PASSWORD,
            "mb.publisher.timeout": "5",
        },
    )
    (folder / "workload.json").write_text('{"run": "probe", "agent": "probe", "protocol": ', encoding="utf-8")
    out = folder / "agent.out"
    argv = _argv(command, folder)
    proc = procs.spawn("agentcheck-malformed", argv, out, env={AGENT_MARK: str(folder)}, cwd=Path.cwd())
    code = proc.wait(PROBE_TIMEOUT_S)
    where = str(out)
    found = []
    if code is None:
        proc.kill()
        what = f"still running {PROBE_TIMEOUT_S:g} s after it was given a workload.json that is not JSON"
        found.append(Finding("C-2", what, where))
    else:
        proc.terminate(0)  # exited: only forgotten
        text = out.read_text(encoding="utf-8", errors="replace").strip() if out.exists() else ""
        if code == 0:
            found.append(Finding("C-2", "exit 0 on a workload.json that is not JSON", where))
        elif not text:
            found.append(
                Finding("C-2", f"exit {code} on a malformed workload.json, with nothing on stderr", where)
            )
    return found + leaks([out])


def leaks(files: list[Path]) -> list[Finding]:
    """C-5: a file the agent wrote holds the password of its agent.conf."""
    out = []
    for f in files:
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for no, line in enumerate(text.splitlines(), 1):
            if PASSWORD in line:
                out.append(Finding("C-5", "mb.password written out", f"{f}:{no}"))
                break
    return out
