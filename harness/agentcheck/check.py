"""`bfh agent check CMD`: the agent on a healthy pair, through one kill -9 of the master and one
link cut, in the one run loop (harness/run/runner.py `execute`), its log then checked record by
record against the contract (logcheck), against the broker's side of its acks (tap, acks), and
its exit; the verdict's broken promises are the behaviour findings.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agentcheck.acks import check_wire
from harness.agentcheck.findings import BEHAVIOUR, Finding
from harness.agentcheck.inputs import PASSWORD, check_malformed, leaks
from harness.agentcheck.logcheck import Context, check_log, read_lines
from harness.agentcheck.process import check_exit, end_leftovers, subreaper
from harness.agentcheck.tap import Tap
from harness.agents.launch import AgentSpec, agent_factory
from harness.contracts import runrecord
from harness.faults.schedule import Schedule, Step
from harness.run.env import Environment
from harness.run.runner import CATALOG_POLICY, RunError, execute
from harness.topology import builtin_topology

AGENT = "agent-1"
KILL_AT_S, CUT_AT_S, CUT_GAP_S = 4.0, 12.0, 3.0
# 25 s of publishing: the publisher ends well after the last cut (independent_connections counts
# a `publications_complete` within 2.5 s of a cut as a second disturbed role)
COUNT, RATE = 250, 10.0
#: promises about the harness, not the agent: when they fail, the check did not run as meant
HARNESS_PROMISES = ("faults_applied", "evidence")
#: the protocols whose acks the tap reads (OpenWire's are not parsed: C-13 and C-15 unmeasured)
TAPPED = ("mqtt", "stomp")


@dataclass
class CheckResult:
    command: str
    protocol: str
    run_dir: Path | None = None
    contract: list[Finding] = field(default_factory=list)
    behaviour: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the check could not run (exit 2)
    wall_s: float = 0.0
    verdict: str | None = None

    @property
    def exit_code(self) -> int:
        """1 when the log broke the contract (even in a run that went wrong: those are real), else 2
        when the check could not run as meant, else 0."""
        return 1 if self.contract else 2 if self.error else 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "protocol": self.protocol,
            "run_dir": str(self.run_dir) if self.run_dir else None,
            "exit": self.exit_code,
            "error": self.error,
            "wall_s": round(self.wall_s, 1),
            "verdict": self.verdict,
            "contract": [f.to_dict() for f in self.contract],
            "behaviour": [f.to_dict() for f in self.behaviour],
            "notes": self.notes,
        }


def preflight(command: str) -> str | None:
    """Why the command cannot be started (before any broker starts), or None."""
    values = {k: shlex.quote(f"/x/{k}") for k in ("config", "workload", "log")} | {"python": sys.executable}
    try:
        argv = shlex.split(command.format(**values))
    except (KeyError, ValueError, IndexError) as e:
        return f"bad agent command template {command!r}: {e}"
    if not argv:
        return "empty agent command"
    if "{log}" not in command:
        return "the agent command has no {log}: the agent cannot know where to write its message log"
    if shutil.which(argv[0]) is None and not Path(argv[0]).is_file():
        return f"agent command: {argv[0]!r} is not an executable on PATH nor a file"
    return None


def schedule(group: str, seed: int = 1) -> Schedule:
    steps = [
        Step(at=KILL_AT_S, fault="kill", target=f"master:{group}"),
        Step(at=CUT_AT_S, fault="sever", target=f"master:{group}", params={"gap_s": CUT_GAP_S}),
    ]
    return Schedule(seed=seed, steps=steps, settle_s=5.0)


class _Agents:
    """The agent factory of the run: one agent on the pair, its MQTT links tapped."""

    def __init__(self, command: str, protocol: str) -> None:
        self.command, self.protocol = command, protocol
        self.tap: Tap | None = None
        self.run_dir: Path | None = None
        self.spec: AgentSpec | None = None

    def __call__(self, env: Environment) -> list[AgentSpec]:
        self.run_dir = env.run_dir
        group = next(g.name for g in env.plan.topology.groups if g.size > 1)
        if self.protocol in TAPPED:
            self.tap = Tap(env.run_dir / "agents" / AGENT / "messages.jsonl")
            for member in env.plan.members(group):
                link = env.plan.client_link(member.name, self.protocol)
                relay = self.tap.relay(link.listen, link.upstream, self.protocol)
                env.proxy.update_proxy(link.name, upstream=relay)
        make = agent_factory(
            group=group,
            protocol=self.protocol,
            count=COUNT,
            rate=RATE,
            command=self.command,
            name=AGENT,
            username="bfh-check",
            password=PASSWORD,  # C-5: looked for in everything the agent wrote
        )
        (self.spec,) = make(env)
        return [self.spec]


def check_agent(
    command: str,
    *,
    reports: Path = Path("reports"),
    protocol: str = "mqtt",
    behaviour: bool = True,
    seed: int = 1,
) -> CheckResult:
    """Run the agent once through the check's schedule and judge its log against the contract."""
    out = CheckResult(command, protocol)
    t0 = time.monotonic()
    out.error = preflight(command)
    if out.error:
        return out
    agents = _Agents(command, protocol)
    topology = builtin_topology("pair")
    group = next(g.name for g in topology.groups if g.size > 1)
    record = {
        "name": "agent-check",
        "what": "bfh agent check: a healthy pair, one kill -9 of the master, one link cut",
        "params": {"expect_cuts": 1, "expect_takeovers": 1},
    }
    with subreaper():  # the agent's orphans are re-parented here, to be found and killed
        _run(out, agents, topology, record, group, reports, behaviour, seed)
    out.wall_s = time.monotonic() - t0
    return out


def _run(
    out: CheckResult,
    agents: _Agents,
    topology: Any,
    record: dict[str, Any],
    group: str,
    reports: Path,
    behaviour: bool,
    seed: int,
) -> None:
    result = None
    try:
        result = execute(
            topology,
            agents,
            schedule(group, seed),
            label="agent-check",
            reports=reports,
            reconcile=behaviour,
            show_progress=False,
            policy=CATALOG_POLICY,
            scenario=record,
            subscribe_wait_s=30.0,
            wait_traffic=True,
        )
    except (RunError, OSError) as e:
        out.error = " ".join(str(e).split())
    except Exception as e:  # noqa: BLE001 - brokers, proxy, Spark: the check could not run
        out.error = " ".join(f"{type(e).__name__}: {e}".split())[:400]
    finally:
        if agents.tap is not None:
            agents.tap.stop()
            if agents.run_dir is not None:
                agents.tap.write(agents.run_dir / "agentcheck" / "wire.jsonl")
    out.run_dir = agents.run_dir
    if result is not None and agents.spec is not None:
        _judge_log(out, agents, result.agent_exit.get(AGENT, None))
        if result.verdict is not None:
            _behaviour(out, result.verdict)
    if agents.run_dir is not None:  # the agent (and the malformed probe) ended: nothing of theirs runs
        out.contract += end_leftovers(agents.run_dir)


def _judge_log(out: CheckResult, agents: _Agents, exit_code: int | None) -> None:
    assert agents.run_dir is not None and agents.spec is not None
    run = runrecord.read_or_none(agents.run_dir) or {}
    obs = run.get("observations") or {}
    launched = (obs.get("agents_launched_ts") or {}).get(AGENT)
    stopped = (obs.get("agents_stopped_ts") or {}).get(AGENT)
    log = agents.run_dir / "agents" / AGENT / "messages.jsonl"
    ctx = Context(
        run=str(run.get("run") or agents.run_dir.name),
        agent=AGENT,
        urls=tuple(u.strip() for u in agents.spec.conf["mb.urls"].split(",") if u.strip()),
        filters=tuple(s["topic"] for s in agents.spec.workload.get("subscriptions", [])),
        label=str(log),
        window=(launched - 60, stopped + 60) if launched and stopped else None,
        stopped_ts=stopped,
    )
    lines = read_lines(log)
    early = AGENT in (obs.get("agents_exited_early") or [])
    out.contract += check_log(lines, ctx, sigterm=not early)
    last = max(
        (float(ln.record["ts"]) for ln in lines if ln.record and _number(ln.record.get("ts"))), default=None
    )
    if stopped and last is not None and not early:
        out.notes.append(
            f"SIGTERM: exit status {exit_code}; the last record {last - stopped:+.1f} s after it"
        )
    agent_out = agents.run_dir / "agents" / AGENT / "agent.out"
    out.contract += check_exit(exit_code, early, agent_out)
    out.contract += leaks([agent_out, log])
    out.contract += check_malformed(out.command, agents.run_dir / "agentcheck" / "malformed")
    if agents.tap is not None:
        events = list(agents.tap.events)
        out.contract += check_wire(lines, events, ctx)
        acks = sum(1 for e in events if e["kind"] in ("delivery_acked", "publish_acked"))
        out.notes.append(f"acks seen at the brokers' side (the {out.protocol} tap): {acks}")
    else:
        out.notes.append(
            f"not measured over {out.protocol}: C-15 received-before-ack, C-13 sent-after-ack (the tap "
            "reads MQTT and STOMP; the broker witness records no acks)"
        )


def _behaviour(out: CheckResult, verdict: Any) -> None:
    out.verdict = verdict.verdict
    for c in verdict.checks:
        if c.status == "fail" and c.promise in HARNESS_PROMISES and c.promise in verdict.gates:
            first = c.evidence[0].get("what") if c.evidence else c.detail
            out.error = f"the check's run did not do what it needs ({c.promise}: {first})"
        elif c.status == "fail":
            ev = c.evidence[0] if c.evidence else {}
            where = ", ".join(
                f"{k}={ev[k]}" for k in ("agent", "role", "broker", "msg_id", "fault") if ev.get(k)
            )
            gated = "" if c.promise in verdict.gates else " (reported, not gated)"
            what = f"{c.detail or ''}{gated}: {ev.get('what', '')}".strip(": ")
            out.behaviour.append(Finding(c.promise, what, where or None, kind=BEHAVIOUR))
        elif c.status == "n/a" and c.promise == "applicable":
            out.error = f"the agent took nothing of the run: {c.detail}"


def _number(x: object) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)
