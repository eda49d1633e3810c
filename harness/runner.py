"""One run: environment up, agents launched, schedule executed, healed, settled, reconciled.

`execute()` is the one way in for the demo, the CLI's `bfh run` and the conformance suite.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.agents import AgentError, AgentProcess, AgentSpec, launch_agent
from harness.env import REPORTS, Environment, new_run_dir
from harness.nemesis import Nemesis
from harness.schedule import Schedule
from harness.topology import Topology

console = Console(stderr=True)
AgentFactory = Callable[[Environment], list[AgentSpec]]


class RunError(RuntimeError):
    """The run could not be carried out (not a verdict: the system under test was not judged)."""


@dataclass
class RunResult:
    run_id: str
    run_dir: Path
    summary: dict[str, Any] | None = None
    wall_s: float = 0.0
    reconcile_s: float = 0.0
    takeovers_s: list[float] = field(default_factory=list)
    nemesis_errors: list[str] = field(default_factory=list)
    agent_exit: dict[str, int | None] = field(default_factory=dict)
    stalled: bool = False  # the agents stopped making progress (a verdict-relevant observation)


def _total(agent: AgentProcess) -> int:
    return sum(int(p["count"]) for p in agent.spec.workload.get("publications", []))


def _subscribed_filters(agent: AgentProcess) -> int:
    return len({r.get("topic") for r in agent.records if r.get("event") == "subscribed"})


def _has_subscribed(agent: AgentProcess, want: int) -> bool:
    return _subscribed_filters(agent) >= want


def _wait_subscribed(agents: list[AgentProcess], timeout: float) -> None:
    for a in agents:
        want = len(a.spec.workload.get("subscriptions", []))
        if not a.wait_for(partial(_has_subscribed, want=want), timeout):
            raise RunError(
                f"agent {a.spec.name} did not subscribe within {timeout:.0f}s "
                f"(alive={a.alive()}); its output:\n{a.stderr_tail()}"
            )


def _drive(
    agents: list[AgentProcess], timeout: float, show: bool, faults_over: Callable[[], bool], stall_s: float
) -> bool:
    """Follow publishing until done; False when it stalled (no progress for `stall_s` after the faults)."""
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        disable=not show,
        transient=False,
    ) as progress:
        tasks = {a.spec.name: progress.add_task(a.spec.name, total=_total(a)) for a in agents}
        deadline = time.monotonic() + timeout
        last, last_change = -1, time.monotonic()
        while time.monotonic() < deadline:
            for a in agents:
                a.poll()
                progress.update(
                    tasks[a.spec.name],
                    completed=a.counts["sent"] + a.counts["dropped"],
                    description=f"{a.spec.name} sent={a.counts['sent']} dropped={a.counts['dropped']} "
                    f"received={a.counts['received']}",
                )
            if all(a.publications_done() or not a.alive() for a in agents):
                return True
            done = sum(a.counts["sent"] + a.counts["dropped"] for a in agents)
            if done != last or not faults_over():
                last, last_change = done, time.monotonic()
            elif time.monotonic() - last_change > stall_s:
                console.log(f"[yellow]publishing stalled: no message sent or dropped for {stall_s:.0f}s[/]")
                return False
            time.sleep(0.25)
    console.log(f"[yellow]publications did not finish within {timeout:.0f}s[/]")
    return False


def _settle(agents: list[AgentProcess], min_s: float, quiet_s: float, cap_s: float) -> None:
    """Wait at least `min_s`, then until no agent has received anything new for `quiet_s` (at most
    `cap_s`). The floor matters: a bridge or client in reconnect backoff delivers nothing for
    several seconds after the heal, and quiet during that gap does not mean the run is over."""
    start = time.monotonic()
    last_change = start
    while time.monotonic() < start + cap_s:
        now = time.monotonic()
        if any(r.get("event") == "received" for a in agents for r in a.poll()):
            last_change = now
        elif now - start >= min_s and now - last_change >= quiet_s:
            return
        time.sleep(0.2)


def execute(
    topology: Topology,
    agents: AgentFactory,
    schedule: Schedule,
    *,
    label: str = "run",
    reports: Path = REPORTS,
    backend: str = "local",
    reconcile: bool = True,
    show_progress: bool = True,
    policy: Any = None,
    stall_s: float = 45.0,
    warmup_s: float = 0.0,
) -> RunResult:
    t_start = time.monotonic()
    run_id, run_dir = new_run_dir(reports, label)
    result = RunResult(run_id, run_dir)
    console.log(f"run {run_id}: folder {run_dir}")
    with Environment.up(topology, run_dir, run_id, seed=schedule.seed, backend=backend) as env:
        specs = agents(env)
        env.record(agents=[s.redacted() for s in specs], schedule=schedule.model_dump(mode="json"))
        procs: list[AgentProcess] = []
        try:
            # Subscribing agents first; agents that only publish start once every subscription
            # exists (and, across a network, once demand had `warmup_s` to reach the bridges).
            subscribers = [s for s in specs if s.workload.get("subscriptions")]
            procs = [launch_agent(s, run_dir, run_id) for s in subscribers]
            _wait_subscribed(procs, timeout=60)
            if len(subscribers) < len(specs):
                time.sleep(warmup_s)
                procs += [launch_agent(s, run_dir, run_id) for s in specs if s not in subscribers]
            nemesis = Nemesis(env.faults, schedule)
            nemesis.start()
            budget = max(
                (
                    _total(a)
                    / max(min((p["rate_per_s"] for p in a.spec.workload["publications"]), default=1.0), 0.1)
                    for a in procs
                    if _total(a)
                ),
                default=0.0,
            )
            longest = max((s.ends_at for s in schedule.steps), default=0.0)
            timeout_pub = max(float(a.spec.conf.get("mb.publisher.timeout", 900)) for a in procs)
            finished = _drive(
                procs,
                timeout=budget + longest + min(timeout_pub, 600) + 90,
                show=show_progress,
                faults_over=nemesis.done,
                stall_s=stall_s,
            )
            result.stalled = not finished
            nemesis.wait(timeout=longest + 120)
            nemesis.heal_everything()
            result.nemesis_errors = nemesis.errors()
            # The settle floor counts from the last heal, so quiet publishing after it is not waited twice.
            healed = nemesis.last_step_end or time.monotonic()
            _settle(
                procs,
                min_s=max(0.0, healed + schedule.settle_s - time.monotonic()),
                quiet_s=min(3.0, schedule.settle_s),
                cap_s=schedule.settle_s + 30,
            )
        except AgentError as e:
            raise RunError(str(e)) from None
        finally:
            for a in procs:
                result.agent_exit[a.spec.name] = a.stop()
        result.takeovers_s = _takeovers(run_dir)
    result.wall_s = time.monotonic() - t_start
    if reconcile:
        from spark_analysis.reconcile import reconcile as run_reconcile

        t0 = time.monotonic()
        result.summary = run_reconcile([run_dir], policy=policy)[0]
        result.reconcile_s = time.monotonic() - t0
        from harness.reporting import ReportError, render_report

        try:  # every reconciled run gets RUN_DIR/report.html and summary.md
            render_report(run_dir)
        except (ReportError, OSError) as e:
            console.log(f"[yellow]report not rendered: {e}[/]")
    return result


def _takeovers(run_dir: Path) -> list[float]:
    from harness.msglog import iter_records

    path = run_dir / "faults.jsonl"
    if not path.exists():
        return []
    return [
        float(r["params"]["takeover_s"])
        for r in iter_records(path)
        if r.get("event") == "fault_end" and "takeover_s" in r.get("params", {})
    ]
