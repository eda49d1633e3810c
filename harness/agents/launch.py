"""The agent launch contract: write agent.conf and workload.json, run the agent command.

Any agent, in any language, is run from a command template with `{config}`, `{workload}` and
`{log}` placeholders (docs/contracts.md); `{python}` names this interpreter.
"""

from __future__ import annotations

import configparser
import json
import os
import shlex
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import procs
from harness.contracts.msglog import LogFollower

REFERENCE_COMMAND = (
    "{python} -m agent_under_test.reference --config {config} --workload {workload} --log {log}"
)
SECRET_KEYS = ("mb.password",)


class AgentError(RuntimeError):
    pass


@dataclass
class AgentSpec:
    name: str
    conf: dict[str, str]  # agent.conf [agent] keys, e.g. mb.urls
    workload: dict[str, Any]  # workload.json without run/agent (filled in at launch)
    command: str = REFERENCE_COMMAND
    # subscribing agents start stage by stage (a fleet's controller subscriber before its agents)
    stage: int = 0
    # members per process when the harness's own agent runs packed (harness.agents.packed); 0: its own
    pack: int = 0

    def redacted(self) -> dict[str, Any]:
        conf = {k: ("***" if k in SECRET_KEYS and v else v) for k, v in self.conf.items()}
        return {"name": self.name, "command": self.command, "conf": conf, "workload": self.workload}


def workload(
    protocol: str = "mqtt",
    subscriptions: list[str] | None = None,
    publications: list[tuple[str, int, float]] | None = None,
    qos: int = 1,
    durable: bool = True,
    payload_bytes: int = 256,
) -> dict[str, Any]:
    """A workload body: subscription filters and (topic, count, rate_per_s) publications."""
    return {
        "protocol": protocol,
        "subscriptions": [{"topic": t, "qos": qos, "durable": durable} for t in (subscriptions or [])],
        "publications": [
            {"topic": t, "qos": qos, "count": n, "rate_per_s": r, "payload_bytes": payload_bytes}
            for t, n, r in (publications or [])
        ],
    }


def write_agent_conf(path: Path, conf: dict[str, str]) -> None:
    cp = configparser.ConfigParser(interpolation=None)
    cp.optionxform = str  # type: ignore[assignment,method-assign]  # keys are case-sensitive
    cp["agent"] = conf
    # holds mb.password: owner-only, like the brokers' configs (fchmod: an older file keeps its mode)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(fd, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        cp.write(f)


@dataclass
class AgentProcess:
    spec: AgentSpec
    dir: Path
    log_path: Path
    proc: procs.ManagedProcess
    counts: Counter[str] = field(default_factory=Counter)
    records: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._follower = LogFollower(self.log_path)

    def poll(self) -> list[dict[str, Any]]:
        """New log records since the last poll (also kept in `records`, counted by event)."""
        new = self._follower.new_records()
        for r in new:
            self.counts[str(r.get("event"))] += 1
        self.records.extend(new)
        return new

    def alive(self) -> bool:
        return self.proc.alive()

    def wait_for(
        self,
        predicate: Callable[[AgentProcess], bool],
        timeout: float,
        on_tick: Callable[[AgentProcess], None] | None = None,
    ) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.poll()
            if on_tick:
                on_tick(self)
            if predicate(self):
                return True
            if not self.alive():
                self.poll()
                return predicate(self)
            time.sleep(0.2)
        return False

    def publications_done(self) -> bool:
        total = sum(p["count"] for p in self.spec.workload.get("publications", []))
        return self.counts["sent"] + self.counts["dropped"] >= total

    def stop(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (the contract: flush and exit within 10 s), then SIGKILL."""
        code = self.proc.terminate(timeout)
        self.poll()
        return code

    def kill(self) -> None:
        self.proc.kill()
        self.poll()

    def stderr_tail(self) -> str:
        return self.proc.log_tail()


def write_inputs(spec: AgentSpec, run_dir: Path, run_id: str) -> tuple[Path, Path, Path]:
    """agents/<agent>/agent.conf and workload.json; returns them with the log's path."""
    adir = run_dir / "agents" / spec.name
    adir.mkdir(parents=True, exist_ok=True)
    config, wl, log = adir / "agent.conf", adir / "workload.json", adir / "messages.jsonl"
    write_agent_conf(config, spec.conf)
    wl.write_text(
        json.dumps({"run": run_id, "agent": spec.name, **spec.workload}, indent=2), encoding="utf-8"
    )
    return config, wl, log


#: in every agent's environment, its folder: what the agent started inherits it, so a process it
#: left running (a child that called setsid) is known for the agent's (harness/agentcheck/process.py)
AGENT_MARK = "BFH_AGENT_DIR"


def launch_agent(spec: AgentSpec, run_dir: Path, run_id: str) -> AgentProcess:
    config, wl, log = write_inputs(spec, run_dir, run_id)
    adir = log.parent
    values = {
        k: shlex.quote(str(v))
        for k, v in {"config": config, "workload": wl, "log": log, "python": sys.executable}.items()
    }
    try:
        argv = shlex.split(spec.command.format(**values))
    except (KeyError, ValueError, IndexError) as e:
        raise AgentError(f"bad agent command template {spec.command!r}: {e}") from None
    proc = procs.spawn(
        f"agent-{spec.name}",
        argv,
        adir / "agent.out",
        env={AGENT_MARK: str(adir)},
        cwd=Path.cwd(),
        pid_dir=run_dir / "pids",
    )
    return AgentProcess(spec, adir, log, proc)


PUBLISH_TOPIC = "instance/status/InstanceStartedEvent"
SUBSCRIPTIONS = ("instance/status/#", "instance/+/InstanceStartedEvent")


def agent_factory(
    *,
    group: str | None = None,
    protocol: str = "mqtt",
    qos: int = 1,
    durable: bool = True,
    count: int = 120,
    rate: float = 10.0,
    timeout_s: int = 900,
    command: str | None = None,
    subscriptions: tuple[str, ...] = SUBSCRIPTIONS,
    topic: str = PUBLISH_TOPIC,
    url_order: Callable[[list[str]], list[str]] | None = None,
    extra_conf: dict[str, str] | None = None,
    name: str = "agent-1",
    username: str = "",
    password: str = "",
    command_protocol: str | None = None,
) -> Callable[[Any], list[AgentSpec]]:
    """One agent that subscribes and publishes through `mb.urls` = the proxies of `group`.

    `command_protocol` (pytest --bfh-agent-protocol): the one protocol the command speaks; it
    overrides `protocol`, so the workload and mb.urls match what the agent can do.
    The returned callable takes the running Environment (it needs the proxy addresses).
    """

    def make(env: Any) -> list[AgentSpec]:
        proto = command_protocol or protocol
        urls = env.mb_urls(proto if proto in ("stomp", "openwire") else "mqtt", group)
        if url_order:
            urls = url_order(urls)
        conf = {
            "mb.urls": ",".join(urls),
            "mb.username": username,
            "mb.password": password,
            "mb.publisher.timeout": str(timeout_s),
            **(extra_conf or {}),
        }
        wl = workload(
            proto, list(subscriptions), [(topic, count, rate)] if count else [], qos=qos, durable=durable
        )
        return [AgentSpec(name, conf, wl, command or REFERENCE_COMMAND)]

    return make


def combine(*factories: Callable[[Any], list[AgentSpec]]) -> Callable[[Any], list[AgentSpec]]:
    """Several agents in one run (e.g. a publisher on one pair, a subscriber on another)."""

    def make(env: Any) -> list[AgentSpec]:
        return [spec for f in factories for spec in f(env)]

    return make
