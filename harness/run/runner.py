"""One run: environment up, agents launched, schedule executed, healed, settled, reconciled.

`run_loop()` is the one run loop (agents started, traffic driven, faults applied, agents stopped,
all recorded); `execute()` drives it with a schedule (the catalog, `bfh run`, `bfh validate`,
generated chaos, the demo), HandRun with a test's own code. `finish()` is every run's one tail.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console

from harness.agents.launch import AgentError, AgentProcess, AgentSpec
from harness.agents.packed import launch_all
from harness.contracts import manifest, runrecord
from harness.faults.nemesis import Nemesis
from harness.faults.schedule import Schedule
from harness.run import members, traffic
from harness.run.brokersampler import BrokerSampler
from harness.run.env import REPORTS, Environment, new_run_dir
from harness.run.loadprobe import LoadProbe
from harness.topology import Topology
from harness.verdict import Verdict
from spark_analysis.policy import Policy

console = Console(stderr=True, emoji=False)
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


# Runs that publish fewer messages reconcile on a `small` (C1-only JIT) Spark session.
SMALL_RUN_MESSAGES = 100_000


class Loop:
    """A run in progress (yielded by `run_loop`): its environment, its agents, what the harness
    observed. The scheduled path calls launch -> drive -> settle; a test's own code (HandRun)
    launches agents and applies faults between them itself."""

    def __init__(self, env: Environment, result: RunResult, phase: _Phases) -> None:
        self.env, self.result, self.phase = env, result, phase
        self.specs: list[AgentSpec] = []
        self.agents: list[AgentProcess] = []
        self.launched: dict[str, float] = {}
        self.obs: dict[str, Any] = {
            "masters": {g.name: env.backend.master(g.name) for g in env.plan.topology.groups},
            "not_subscribed": [],
        }
        self.healed: float | None = None  # monotonic time the last fault ended
        self._stopped = False
        # the machine's load, for the verdict's overload rule; the agents' own CPU taken out of it
        self.load = LoadProbe.of(env, lambda: [a.proc.pid for a in self.agents])
        self.usage = BrokerSampler.of(env)  # the brokers' connections and CPU, for the report

    def _launch_batch(self, specs: list[AgentSpec]) -> list[AgentProcess]:
        """Launched at once; fleet members of the harness's own agent packed (harness.agents.packed),
        or the backend's own members (harness.run.members: --backend swarm)."""
        now = time.time()
        self.launched.update({s.name: now for s in specs})
        agents = members.launch(self.env, specs, launch_all)
        self.agents += agents
        return agents

    def launch(
        self, specs: list[AgentSpec], *, subscribe_wait_s: float = 60.0, warmup_s: float = 0.0
    ) -> list[AgentProcess]:
        """Subscribing agents first, stage by stage (each stage at once, then a shared wait for
        its subscriptions); agents that only publish once every subscription exists (and, across
        a network, once demand had `warmup_s` to reach the bridges)."""
        self.specs += specs
        self.env.record(agents=[s.redacted() for s in self.specs])
        subscribers = [s for s in specs if s.workload.get("subscriptions")]
        started: list[AgentProcess] = []
        for stage in sorted({s.stage for s in subscribers}):
            batch = self._launch_batch([s for s in subscribers if s.stage == stage])
            started += batch
            if subscribe_wait_s:
                self.obs["not_subscribed"] += traffic.wait_subscribed(batch, timeout=subscribe_wait_s)
        if len(subscribers) < len(specs):
            time.sleep(warmup_s)
            started += self._launch_batch([s for s in specs if s not in subscribers])
        self.phase.mark("subscribe")
        return started

    def drive(
        self,
        schedule: Schedule,
        *,
        show: bool = True,
        stall_s: float = 45.0,
        wait_traffic: bool = False,
        timeout: float | None = None,
    ) -> bool:
        """Apply the schedule while following the publishing until done (False: it stalled or
        timed out), then heal every fault. `wait_traffic`: the schedule's clock starts once every
        publisher made its first attempt, so its faults land mid-traffic on a loaded machine too."""
        if wait_traffic:
            self.obs["not_publishing"] = traffic.wait_publishing(self.agents, timeout=PUBLISH_WAIT_S)
        nemesis = Nemesis(self.env.faults, schedule)
        nemesis.start()
        longest = max((s.ends_at for s in schedule.steps), default=0.0)
        if timeout is None:
            timeout = _publish_budget(self.agents) + longest + 90
        finished = traffic.drive(
            self.agents, timeout=timeout, show=show, faults_over=nemesis.done, stall_s=stall_s
        )
        self.result.stalled = not finished
        self.phase.mark("traffic")
        nemesis.wait(timeout=longest + 120)
        nemesis.heal_everything()
        self.phase.mark("faults_heal")
        self.result.nemesis_errors = nemesis.errors()
        self.healed = nemesis.last_step_end or time.monotonic()
        return finished

    def settle(self, settle_s: float) -> None:
        """At least `settle_s` from the last heal, then until deliveries go quiet (traffic.settle)."""
        healed = self.healed or time.monotonic()
        traffic.settle(
            self.agents,
            min_s=max(0.0, healed + settle_s - time.monotonic()),
            quiet_s=min(3.0, settle_s),
            cap_s=settle_s + 30,
        )
        self.phase.mark("settle")

    def stop(self) -> None:
        """Stop every agent at once (SIGTERM to all, then one shared deadline) and record the
        observations; idempotent."""
        if self._stopped:
            return
        self._stopped = True
        self.obs["agents_exited_early"] = [a.spec.name for a in self.agents if not a.alive()]
        stopped = {a.spec.name: time.time() for a in self.agents}
        self.result.agent_exit.update(traffic.stop_all(self.agents))
        self.obs.update(
            agents_launched_ts=self.launched,
            agents_stopped_ts=stopped,
            agent_exit=self.result.agent_exit,
            stalled=self.result.stalled,
            nemesis_errors=self.result.nemesis_errors,
        )
        self.phase.mark("agents_stop")
        self.obs["load"] = self.load.stop()
        if self.usage is not None:
            self.obs["broker_usage"] = self.usage.stop()
        self.obs["proxy_connections"] = _proxy_connections(self.env)
        self.env.record(observations=self.obs)


PUBLISH_WAIT_S = 30.0


def _publish_budget(agents: list[AgentProcess]) -> float:
    """How long the publications take at their slowest rate, plus the publisher timeout (<= 600 s)."""
    budget = max(
        (
            traffic.total(a)
            / max(min((p["rate_per_s"] for p in a.spec.workload["publications"]), default=1.0), 0.1)
            for a in agents
            if traffic.total(a)
        ),
        default=0.0,
    )
    timeout_pub = max((float(a.spec.conf.get("mb.publisher.timeout", 900)) for a in agents), default=900.0)
    return budget + min(timeout_pub, 600)


@contextmanager
def run_loop(
    topology: Topology,
    *,
    label: str = "run",
    reports: Path = REPORTS,
    backend: str = "local",
    schedule: Schedule | None = None,
    scenario: dict[str, Any] | None = None,
) -> Iterator[Loop]:
    """The one run loop: a run folder, the environment up, the record started; the caller's
    body launches agents, drives traffic and applies faults (`Loop`); leaving it stops the agents,
    records what was observed and takes the environment down. `loop.result` holds the outcome."""
    t_start = time.monotonic()
    schedule = schedule or Schedule(steps=[])
    run_id, run_dir = new_run_dir(reports, label)
    result = RunResult(run_id, run_dir)
    phase = _Phases(result.phases_s)
    console.log(f"run {run_id}: folder {run_dir}")
    with Environment.up(topology, run_dir, run_id, seed=schedule.seed, backend=backend) as env:
        phase.mark("brokers_up")
        env.record(schedule=schedule.model_dump(mode="json"), scenario=scenario or {"name": label})
        loop = Loop(env, result, phase)
        loop.load.start()
        if loop.usage is not None:
            loop.usage.start()
        try:
            yield loop
        finally:
            loop.stop()
        result.takeovers_s = _takeovers(run_dir)
    phase.mark("teardown")
    result.wall_s = time.monotonic() - t_start


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
    """A scheduled run (`run_loop` driven with `schedule`), reconciled and judged (`finish`).
    `scenario` ({name, gates, params}) goes to run.json, so a re-judge from disk gates the same
    promises with the same bounds. `wait_traffic`: the schedule starts once every publisher made
    its first attempt (else when they are launched: a step at 0 s is a fault at start-up)."""
    warming = None
    try:
        with run_loop(
            topology, label=label, reports=reports, backend=backend, schedule=schedule, scenario=scenario
        ) as loop:
            specs = agents(loop.env)
            if reconcile:  # Spark gets ready while the run goes, so its reconcile finds it warm
                from spark_analysis import warmup

                planned = sum(int(p["count"]) for s in specs for p in s.workload.get("publications", []))
                warming = warmup.start(small=planned < SMALL_RUN_MESSAGES)
            loop.launch(specs, subscribe_wait_s=subscribe_wait_s, warmup_s=warmup_s)
            loop.drive(schedule, show=show_progress, stall_s=stall_s, wait_traffic=wait_traffic)
            loop.settle(schedule.settle_s)
    except AgentError as e:
        raise RunError(str(e)) from None
    result = loop.result
    if warming is not None:
        warming.join(timeout=300)
        from spark_analysis import warmup

        warmup.unnice()  # the run is over: its reconcile is the only work left
        (result.verdict,) = finish([result.run_dir], policy=policy, phases=loop.phase)
        result.reconcile_s = result.phases_s.get("reconcile", 0.0)
        result.summary = result.verdict_summary()
    runrecord.update(result.run_dir, phases_s=result.phases_s)  # the file outlives the environment
    manifest.write(result.run_dir, result.run_id)  # the run has ended: its evidence sealed
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
