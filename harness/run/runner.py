"""One run: environment up, agents launched, schedule executed, healed, settled, reconciled.

`execute()` is the one way in for the demo, the CLI's `bfh run` and the conformance suite.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from harness.agents.launch import AgentError, AgentProcess, AgentSpec, launch_agent
from harness.contracts import manifest
from harness.faults.nemesis import Nemesis
from harness.faults.schedule import Schedule
from harness.run.env import REPORTS, Environment, new_run_dir
from harness.topology import Topology
from harness.verdict import Verdict
from spark_analysis.policy import Policy

console = Console(stderr=True)
AgentFactory = Callable[[Environment], list[AgentSpec]]
# At-least-once allows duplicates (a broker redelivers what was in flight across a failover):
# reported, not limited; resending what the broker acknowledged is its own promise.
CATALOG_POLICY = Policy(max_duplicates=None)


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
    verdict: Verdict | None = None  # harness.verdict's judgement of the reconciled run
    phases_s: dict[str, float] = field(default_factory=dict)  # where the wall time went

    def verdict_summary(self) -> dict[str, Any]:
        from harness.verdict.judge import judged_summary

        return judged_summary(self.run_dir)


class _Phases:
    """Wall time per phase of a run (session table, JUnit properties, run.json)."""

    def __init__(self, out: dict[str, float]) -> None:
        self.out, self.t = out, time.monotonic()

    def mark(self, name: str) -> None:
        now = time.monotonic()
        self.out[name] = round(self.out.get(name, 0.0) + now - self.t, 2)
        self.t = now


def _total(agent: AgentProcess) -> int:
    return sum(int(p["count"]) for p in agent.spec.workload.get("publications", []))


def _subscribed_filters(agent: AgentProcess) -> int:
    return len({r.get("topic") for r in agent.records if r.get("event") == "subscribed"})


def _has_subscribed(agent: AgentProcess, want: int) -> bool:
    return _subscribed_filters(agent) >= want


def _wait_subscribed(agents: list[AgentProcess], timeout: float) -> list[str]:
    """Wait for every subscription's first `subscribed`, one shared wait for all the agents (a
    fleet starts together); return the agents that did not get there (an observation for the
    verdict, not an error: an agent stuck on a black hole is a finding)."""
    deadline = time.monotonic() + timeout
    waiting = {a.spec.name: a for a in agents}
    dead: set[str] = set()
    while waiting and time.monotonic() < deadline:
        for name, a in list(waiting.items()):
            alive = a.alive()
            a.poll()
            if _has_subscribed(a, len(a.spec.workload.get("subscriptions", []))):
                del waiting[name]
            elif not alive:
                dead.add(name)
                del waiting[name]
        if waiting:
            time.sleep(0.2)
    late = []
    for a in agents:
        if a.spec.name in waiting or a.spec.name in dead:
            console.log(
                f"[yellow]agent {a.spec.name} not subscribed within {timeout:.0f}s (alive={a.alive()})[/]"
            )
            late.append(a.spec.name)
    return late


FLEET_BARS = 8  # more agents than this: one progress bar for them all


def _label(agents: list[AgentProcess]) -> str:
    return agents[0].spec.name if len(agents) == 1 else f"{len(agents)} agents"


PUBLISH_WAIT_S = 30.0


def _wait_publishing(agents: list[AgentProcess], timeout: float) -> list[str]:
    """Wait until every agent with publications made its first attempt; return those that did
    not (an observation: an agent that cannot publish is the verdict's finding, not an error)."""
    deadline = time.monotonic() + timeout
    late = []
    for a in agents:
        if _total(a) and not a.wait_for(
            lambda x: x.counts["send_attempt"] + x.counts["sent"] + x.counts["dropped"] > 0,
            max(0.0, deadline - time.monotonic()),
        ):
            late.append(a.spec.name)
    return late


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
        # a fleet gets one bar for all its agents, not a bar each
        rows = [[a] for a in agents] if len(agents) <= FLEET_BARS else [agents]
        tasks = [progress.add_task(_label(r), total=sum(_total(a) for a in r)) for r in rows]
        deadline = time.monotonic() + timeout
        last, last_change = -1, time.monotonic()
        while time.monotonic() < deadline:
            for a in agents:
                a.poll()
            for task, r in zip(tasks, rows, strict=True):
                n = {k: sum(a.counts[k] for a in r) for k in ("sent", "dropped", "received")}
                progress.update(
                    task,
                    completed=n["sent"] + n["dropped"],
                    description=f"{_label(r)} sent={n['sent']} dropped={n['dropped']} "
                    f"received={n['received']}",
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
    several seconds after the heal, and quiet during that gap does not mean the run is over.
    Unless the run is observed complete sooner: every sent message received on every subscription
    that matches it and every connection up again, then quiet for `DONE_QUIET_S`."""
    start = time.monotonic()
    last_change = start
    while time.monotonic() < start + cap_s:
        now = time.monotonic()
        if any(r.get("event") == "received" for a in agents for r in a.poll()):
            last_change = now
        elif (now - start >= min_s and now - last_change >= quiet_s) or (
            now - last_change >= DONE_QUIET_S and _observed_complete(agents)
        ):
            return
        time.sleep(0.2)


DONE_QUIET_S = 1.0


def _observed_complete(agents: list[AgentProcess]) -> bool:
    """Every `sent` message received by every subscription whose filter matches its topic (MQTT
    matching; a destination it cannot judge, e.g. a queue shared by consumers, keeps this False),
    and every subscriber role's last connection record `connected`."""
    from spark_analysis.mqtt import match_py

    sent: dict[str, str] = {}
    for a in agents:
        roles: dict[str, str] = {}
        for r in a.records:
            ev = r.get("event")
            if ev == "sent":
                sent[str(r.get("msg_id"))] = str(r.get("topic"))
            elif ev in ("connected", "disconnected") and str(r.get("role")).startswith("subscriber"):
                roles[str(r.get("role"))] = str(ev)  # a publisher leaves once its publications are done
        if any(ev != "connected" for ev in roles.values()):
            return False
    for a in agents:
        got: dict[str, set[str]] = {}
        for r in a.records:
            if r.get("event") == "received":
                got.setdefault(str(r.get("subscription")), set()).add(str(r.get("msg_id")))
        for sub in a.spec.workload.get("subscriptions", []):
            f = str(sub["topic"])
            have = got.get(f, set())
            if any(mid not in have for mid, topic in sent.items() if match_py(f, topic)):
                return False
    return True


# Runs that publish fewer messages reconcile on a `small` (C1-only JIT) Spark session.
SMALL_RUN_MESSAGES = 100_000


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
    scenario: dict[str, Any] | None = None,
    subscribe_wait_s: float = 60.0,
    wait_traffic: bool = False,
) -> RunResult:
    """Run, reconcile and judge. `scenario` ({name, gates, params}) goes to run.json, so a re-judge
    from disk gates the same promises with the same bounds. `wait_traffic`: the schedule starts
    once every publisher made its first attempt (else when they are launched: a step at 0 s is a
    fault at start-up)."""
    t_start = time.monotonic()
    run_id, run_dir = new_run_dir(reports, label)
    result = RunResult(run_id, run_dir)
    phase = _Phases(result.phases_s)
    console.log(f"run {run_id}: folder {run_dir}")
    with Environment.up(topology, run_dir, run_id, seed=schedule.seed, backend=backend) as env:
        phase.mark("brokers_up")
        specs = agents(env)
        if reconcile:  # Spark gets ready while the run goes, so its reconcile finds it warm
            from spark_analysis import warmup

            planned = sum(int(p["count"]) for s in specs for p in s.workload.get("publications", []))
            warming = warmup.start(small=planned < SMALL_RUN_MESSAGES)
        env.record(
            agents=[s.redacted() for s in specs],
            schedule=schedule.model_dump(mode="json"),
            scenario=scenario or {"name": label},
        )
        obs: dict[str, Any] = {"masters": {g.name: env.backend.master(g.name) for g in topology.groups}}
        launched: dict[str, float] = {}
        procs: list[AgentProcess] = []

        def launch(spec: AgentSpec) -> AgentProcess:
            launched[spec.name] = time.time()
            return launch_agent(spec, run_dir, run_id)

        try:
            # Subscribing agents first; agents that only publish start once every subscription
            # exists (and, across a network, once demand had `warmup_s` to reach the bridges).
            subscribers = [s for s in specs if s.workload.get("subscriptions")]
            obs["not_subscribed"] = []
            for stage in sorted({s.stage for s in subscribers}):  # each stage launched at once
                started = [launch(s) for s in subscribers if s.stage == stage]
                procs += started
                if subscribe_wait_s:
                    obs["not_subscribed"] += _wait_subscribed(started, timeout=subscribe_wait_s)
            if len(subscribers) < len(specs):
                time.sleep(warmup_s)
                procs += [launch(s) for s in specs if s not in subscribers]
            phase.mark("subscribe")
            if wait_traffic:  # the schedule's clock starts with the traffic, so its faults land
                # mid-traffic on a loaded machine too (an agent's start-up can take seconds there)
                obs["not_publishing"] = _wait_publishing(procs, timeout=PUBLISH_WAIT_S)
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
            phase.mark("traffic")
            nemesis.wait(timeout=longest + 120)
            nemesis.heal_everything()
            phase.mark("faults_heal")
            result.nemesis_errors = nemesis.errors()
            # The settle floor counts from the last heal, so quiet publishing after it is not waited twice.
            healed = nemesis.last_step_end or time.monotonic()
            _settle(
                procs,
                min_s=max(0.0, healed + schedule.settle_s - time.monotonic()),
                quiet_s=min(3.0, schedule.settle_s),
                cap_s=schedule.settle_s + 30,
            )
            phase.mark("settle")
        except AgentError as e:
            raise RunError(str(e)) from None
        finally:
            obs["agents_exited_early"] = [a.spec.name for a in procs if not a.alive()]
            stopped: dict[str, float] = {}
            for a in procs:
                stopped[a.spec.name] = time.time()
                result.agent_exit[a.spec.name] = a.stop()
            obs.update(
                agents_launched_ts=launched,
                agents_stopped_ts=stopped,
                agent_exit=result.agent_exit,
                stalled=result.stalled,
                nemesis_errors=result.nemesis_errors,
            )
            phase.mark("agents_stop")
            obs["proxy_connections"] = _proxy_connections(env)
            env.record(observations=obs)
        result.takeovers_s = _takeovers(run_dir)
    phase.mark("teardown")
    result.wall_s = time.monotonic() - t_start
    if reconcile:
        warming.join(timeout=300)
        (result.verdict,) = finish([run_dir], policy=policy, phases=phase)
        result.reconcile_s = result.phases_s.get("reconcile", 0.0)
        result.summary = result.verdict_summary()
    env.record(phases_s=result.phases_s)  # the file outlives the environment
    manifest.write(run_dir, run_id)  # the run has ended: its evidence sealed (harness/contracts/manifest.py)
    return result


def finish(run_dirs: list[Path], policy: Any = None, phases: _Phases | None = None) -> list[Verdict]:
    """The one tail of every run: reconcile (one Spark job for all the folders), judge each, and
    render each one's report.html. Returns the verdicts in the order of `run_dirs`."""
    from harness.report.html import ReportError, render_report
    from harness.verdict import judge
    from spark_analysis.reconcile import reconcile as run_reconcile

    run_reconcile(list(run_dirs), policy=policy)
    if phases:
        phases.mark("reconcile")
    verdicts = [judge(d) for d in run_dirs]
    if phases:
        phases.mark("judge")
    for d in run_dirs:
        try:  # every reconciled run gets RUN_DIR/report.html and summary.md
            render_report(d)
        except (ReportError, OSError) as e:
            console.log(f"[yellow]report not rendered for {d.name}: {e}[/]")
    for d in run_dirs:  # sealed with their analysis (execute seals again once run.json is final)
        manifest.write(d)
    if phases:
        phases.mark("report")
    return verdicts


def _proxy_connections(env: Environment) -> dict[str, Any] | None:
    """Connections the fault proxy accepted per link over time (the brokers' side of a reconnect
    storm); None when the proxy keeps no counts (a real Toxiproxy)."""
    try:
        return env.proxy.connection_counts()
    except Exception:  # bookkeeping only: never fails a run
        return None


def _takeovers(run_dir: Path) -> list[float]:
    from harness.contracts.faultlog import read_windows

    windows = read_windows(run_dir / "faults.jsonl").windows
    return [float(w.params["takeover_s"]) for w in windows if w.end is not None and "takeover_s" in w.params]
