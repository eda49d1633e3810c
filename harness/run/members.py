"""Fleet members handed to a backend that runs them itself (`SupportsMembers`: `--backend swarm`).

The run loop launches a batch through `launch()`: on such a backend the fleet's members
(harness.agents.fleet.is_member) become the replicas of its member service, everything else (the
controller's subscriber and publisher) is launched here as on the local backend. Each member keeps
the agent contract: agents/<name>/agent.conf, workload.json and messages.jsonl in the run folder
(bind-mounted into the replica at the same path), and an AgentProcess whose process is a
`RemoteMember`: alive while its task runs, signalled through the backend, its exit code the one
the replica wrote (exit.json).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness import procs
from harness.agents.fleet import is_member
from harness.agents.launch import AgentError, AgentProcess, AgentSpec, write_inputs
from harness.backends import SupportsMembers

Launcher = Callable[[list[AgentSpec], Path, str], list[AgentProcess]]
#: `member=FAKETIME,...`: members whose clock is shifted on purpose (libfaketime), e.g.
#: `fleet-pair-002=+20` (the clock-offset test; docs/fleet.md)
FAKETIME_ENV = "BFH_SWARM_FAKETIME"
MEMBER_PYTHON = "python3"  # the member image's interpreter


class _Exit:
    """What procs.terminate_all reads of a Popen: the exit code, once known."""

    returncode: int | None = None


class RemoteMember(procs.ManagedProcess):
    """A member replica seen as a process (the backend's task state; signals through the backend)."""

    def __init__(self, name: str, backend: SupportsMembers, slot: int, adir: Path) -> None:
        self.name, self.backend, self.slot, self.dir = name, backend, slot, adir
        self.popen = _Exit()  # type: ignore[assignment]
        self.pid, self.pidfile, self.log_path = 0, None, adir / "agent.out"

    def _exit_code(self) -> int | None:
        try:
            code = json.loads((self.dir / "exit.json").read_text(encoding="utf-8")).get("code")
        except (OSError, ValueError):
            return None
        return code if isinstance(code, int) else None

    def alive(self) -> bool:
        if self.popen.returncode is not None:
            return False
        code = self._exit_code()
        state, task_code = self.backend.member_state(self.slot)
        if code is None and state != "done":
            return True
        self.popen.returncode = code if code is not None else (task_code if task_code is not None else -9)
        return False

    def signal(self, sig: int) -> None:
        if sig != signal.SIGCONT:
            self.backend.signal_member(self.slot, sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.wait(10)

    def terminate(self, timeout: float = 10.0) -> int | None:
        if self.alive():
            self.signal(signal.SIGTERM)
            if self.wait(timeout) is None:
                self.kill()
        return self.popen.returncode

    def wait(self, timeout: float | None = None) -> int | None:
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.alive():
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.2)
        return self.popen.returncode

    def _forget(self) -> None:
        pass


def faked_clocks() -> dict[str, str]:
    raw = os.environ.get(FAKETIME_ENV, "")
    return {k.strip(): v.strip() for k, _, v in (p.partition("=") for p in raw.split(",") if "=" in p)}


def member_argv(spec: AgentSpec, config: Path, wl: Path, log: Path) -> list[str]:
    """The agent's command line inside the member image (`{python}` is the image's python3)."""
    if not spec.command.startswith("{python} -m agent_under_test") and not os.environ.get("BFH_MEMBER_IMAGE"):
        raise AgentError(
            f"a swarm member runs the harness's own agents (the member image holds them), not "
            f"{spec.command!r}: build an image with yours and set BFH_MEMBER_IMAGE"
        )
    values = {"config": config, "workload": wl, "log": log, "python": MEMBER_PYTHON}
    return shlex.split(spec.command.format(**{k: shlex.quote(str(v)) for k, v in values.items()}))


def launch_remote(
    backend: SupportsMembers, specs: list[AgentSpec], run_dir: Path, run_id: str
) -> list[AgentProcess]:
    """Every member of `specs` as one replica of the backend's member service."""
    fake = faked_clocks()
    members, out = [], []
    for slot, spec in enumerate(specs, start=1):
        config, wl, log = write_inputs(spec, run_dir, run_id)
        entry = {"name": spec.name, "dir": str(log.parent), "argv": member_argv(spec, config, wl, log)}
        if spec.name in fake:
            entry["faketime"] = fake[spec.name]
        members.append(entry)
        out.append(AgentProcess(spec, log.parent, log, RemoteMember(spec.name, backend, slot, log.parent)))
    host, port = backend.clock_endpoint()
    mfile = run_dir / "swarm" / "members.json"
    mfile.parent.mkdir(parents=True, exist_ok=True)
    doc: dict[str, Any] = {"cwd": "/opt/bfh", "clock": {"host": host, "port": port}, "members": members}
    mfile.write_text(json.dumps(doc, indent=1), encoding="utf-8")
    backend.run_members(mfile, members)
    return out


def launch(env: Any, specs: list[AgentSpec], local: Launcher) -> list[AgentProcess]:
    """The batch launched at once, in its order: fleet members on the backend's member service
    when it has one, the rest through `local`."""
    be = env.backend
    remote = [s for s in specs if isinstance(be, SupportsMembers) and is_member(s.name)]
    if not remote:
        return local(specs, env.run_dir, env.run_id)
    rest = [s for s in specs if s not in remote]
    started = {a.spec.name: a for a in local(rest, env.run_dir, env.run_id)} if rest else {}
    started |= {a.spec.name: a for a in launch_remote(be, remote, env.run_dir, env.run_id)}
    return [started[s.name] for s in specs]
