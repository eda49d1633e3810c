"""Named scenarios usable outside pytest (`bfh validate`, `bfh run NAME`).

Each scenario builds a Schedule over the topology's groups and bridges and an agent factory, the
same shapes as scenarios/test_masterslave.py and scenarios/test_network.py, runs them through
`harness.runner.execute`, and adds the checks a summary.json cannot express (bridge log spam, a
stalled agent, failed fault steps) as extra reasons, saved to RUN_DIR/extra-checks.json so the
report shows them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.agents import agent_factory, combine
from harness.runner import AgentFactory, RunError, RunResult, execute
from harness.schedule import Schedule, Step
from harness.topology import Topology
from spark_analysis.policy import Policy

# Same policy as the conformance suite: at-least-once allows duplicates (reported, not limited).
POLICY = Policy(max_duplicates=None)
BRIDGE_FAILURE = re.compile(
    r"Could not (start|connect) network bridge|Network connection between .* shut ?down"
)
# A bridge to a master/slave pair legitimately fails a few times around a takeover; one that keeps
# failing (seed 002's static:(master,slave) retrying the slave) shows many more.
MAX_BRIDGE_FAILURES = 6
NETWORK_WARMUP_S = 4.0


class CatalogError(ValueError):
    """The scenario does not exist or does not apply to this topology."""


@dataclass
class Plan:
    schedule: Schedule
    agents: AgentFactory
    warmup_s: float = 0.0
    checks: list[Callable[[RunResult], list[str]]] = field(default_factory=list)


@dataclass
class Outcome:
    name: str
    result: RunResult
    reasons: list[str]  # extra reasons (beyond summary.json's)

    @property
    def verdict(self) -> str:
        s = self.result.summary or {}
        return "pass" if s.get("verdict") == "pass" and not self.reasons else "fail"


def _protocol(topology: Topology, group: str) -> str:
    return "mqtt" if "mqtt" in topology.group(group).connectors else "stomp"


def _pair_groups(topology: Topology) -> list[str]:
    return [g.name for g in topology.groups if g.size > 1]


def bridge_failures(run_dir: Path) -> int:
    """WARN lines of failed bridge connects across every broker log of a run."""
    n = 0
    for log in run_dir.glob("brokers/*/broker.log"):
        n += sum(1 for line in log.read_text(errors="replace").splitlines() if BRIDGE_FAILURE.search(line))
    return n


def _common_checks(r: RunResult) -> list[str]:
    out = [f"fault step failed: {e}" for e in r.nemesis_errors]
    if r.stalled:
        out.append("the agent stopped publishing (stalled)")
    s = r.summary or {}
    if s and not s.get("totals", {}).get("acknowledged"):
        out.append("vacuous: nothing was acknowledged")
    return out


def _bridge_check(r: RunResult) -> list[str]:
    n = bridge_failures(r.run_dir)
    if n > MAX_BRIDGE_FAILURES:
        return [
            f"network bridges failed to connect {n} times (limit {MAX_BRIDGE_FAILURES}): a bridge keeps "
            "retrying a broker that cannot serve (static:(master,slave) to a pair? use masterslave:)"
        ]
    return []


def _single_group_plan(
    topology: Topology, seed: int, steps: Callable[[str], list[Step]], count: int, command: str | None
) -> Plan:
    pairs = _pair_groups(topology)
    if not pairs:
        raise CatalogError(f"topology {topology.name!r} has no master/slave group")
    g = pairs[0]
    return Plan(
        Schedule(seed=seed, steps=steps(g), settle_s=8.0),
        agent_factory(group=g, protocol=_protocol(topology, g), count=count, command=command),
    )


def _network_plan(
    topology: Topology, seed: int, steps: Callable[[str, str], list[Step]], command: str | None
) -> Plan:
    if not topology.bridges:
        raise CatalogError(f"topology {topology.name!r} has no bridges")
    b = topology.bridges[0]
    src, dst = b.source, b.target
    proto = _protocol(topology, dst)
    agents = combine(
        agent_factory(name="sub-b", group=dst, protocol=proto, count=0, command=command),
        agent_factory(name="pub-a", group=src, protocol=proto, subscriptions=(), count=100, command=command),
    )
    return Plan(
        Schedule(seed=seed, steps=steps(src, dst), settle_s=15.0), agents, NETWORK_WARMUP_S, [_bridge_check]
    )


Builder = Callable[[Topology, int, str | None], Plan]

SCENARIOS: dict[str, tuple[str, Builder]] = {
    "baseline": (
        "no fault: traffic through the first master/slave group",
        lambda t, seed, cmd: _single_group_plan(t, seed, lambda g: [], 60, cmd),
    ),
    "masterslave": (
        "kill -9 the master of the first master/slave group mid-traffic",
        lambda t, seed, cmd: _single_group_plan(
            t, seed, lambda g: [Step(at=3, fault="kill", target=f"master:{g}")], 80, cmd
        ),
    ),
    "stop-master": (
        "graceful stop of the master of the first master/slave group",
        lambda t, seed, cmd: _single_group_plan(
            t, seed, lambda g: [Step(at=3, fault="stop", target=f"master:{g}")], 80, cmd
        ),
    ),
    "pause-master": (
        "pause (SIGSTOP) the master for 10 s: the agent keeps retrying",
        lambda t, seed, cmd: _single_group_plan(
            t, seed, lambda g: [Step(at=3, fault="pause", target=f"master:{g}", duration=10)], 80, cmd
        ),
    ),
    "network": (
        "publisher on a bridge's source, durable subscriber on its target; kill the target's master",
        lambda t, seed, cmd: _network_plan(
            t, seed, lambda src, dst: [Step(at=5, fault="kill", target=f"master:{dst}")], cmd
        ),
    ),
    "bridge-partition": (
        "black-hole every bridge for 10 s; messages wait and arrive after the heal",
        lambda t, seed, cmd: _network_plan(
            t, seed, lambda src, dst: [Step(at=4, fault="partition", target="bridges", duration=10)], cmd
        ),
    ),
}


def names() -> list[str]:
    return list(SCENARIOS)


def default_scenarios(topology: Topology) -> list[str]:
    """What `bfh validate` runs without --scenarios: the failover of each kind the topology has."""
    out = ["masterslave"] if _pair_groups(topology) else []
    if topology.bridges:
        out.append("network")
    return out or ["baseline"]


def build(name: str, topology: Topology, seed: int = 1, agent_cmd: str | None = None) -> Plan:
    if name not in SCENARIOS:
        raise CatalogError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    return SCENARIOS[name][1](topology, seed, agent_cmd)


def run(
    name: str,
    topology: Topology,
    *,
    seed: int = 1,
    agent_cmd: str | None = None,
    reports: Path = Path("reports"),
    backend: str = "local",
    show_progress: bool = True,
    schedule: Schedule | None = None,
) -> Outcome:
    """Run one catalog scenario end to end (its own environment), judge it, render its report."""
    from harness.reporting import render_report

    plan = build(name, topology, seed, agent_cmd)
    try:
        result = execute(
            topology,
            plan.agents,
            schedule or plan.schedule,
            label=name,
            reports=reports,
            backend=backend,
            show_progress=show_progress,
            policy=POLICY,
            warmup_s=plan.warmup_s,
        )
    except OSError as e:  # e.g. the agent command's binary does not exist; everything was stopped
        raise RunError(f"scenario {name}: could not start a process: {e}") from None
    reasons = _common_checks(result)
    for check in plan.checks:
        reasons += check(result)
    (result.run_dir / "extra-checks.json").write_text(
        json.dumps({"reasons": reasons}, indent=2), encoding="utf-8"
    )
    if result.summary is not None:
        render_report(result.run_dir, reasons)
    return Outcome(name, result, reasons)


def describe() -> list[dict[str, Any]]:
    return [{"name": n, "what": w} for n, (w, _) in SCENARIOS.items()]


def one_line(e: BaseException) -> str:
    """An error as one line (topology errors list their problems on several)."""
    return " ".join(part.strip() for part in str(e).splitlines() if part.strip()) or repr(e)


@dataclass
class Validation:
    topology: str
    rows: list[dict[str, Any]]
    index: Path | None
    exit_code: int  # 0 all pass, 1 some fail, 2 could not run


def validate(
    topology: Topology,
    scenarios: list[str],
    *,
    seed: int = 1,
    agent_cmd: str | None = None,
    reports: Path = Path("reports"),
    backend: str = "local",
    show_progress: bool = True,
) -> Validation:
    """Run each scenario (each brings its own environment up and down); errors that stop a
    scenario from running (not verdicts) end the validation with exit code 2."""
    import time

    from rich.console import Console

    from harness.reporting import headline, render_index

    console = Console(stderr=True)
    for n in scenarios:  # fail before anything starts
        build(n, topology, seed, agent_cmd)
    rows: list[dict[str, Any]] = []
    code = 0
    for i, n in enumerate(scenarios, 1):
        console.rule(f"[bold]{i}/{len(scenarios)} {n}[/]: {SCENARIOS[n][0]}")
        out = run(
            n,
            topology,
            seed=seed,
            agent_cmd=agent_cmd,
            reports=reports,
            backend=backend,
            show_progress=show_progress,
        )
        head = headline(out.result.summary or {})
        head["verdict"] = out.verdict
        rows.append(
            {
                "name": n,
                **head,
                "reasons": [
                    r.get("what", r) if isinstance(r, dict) else r
                    for r in (out.result.summary or {}).get("reasons", [])
                ]
                + out.reasons,
                "run_dir": str(out.result.run_dir),
                "report": str(out.result.run_dir / "report.html"),
            }
        )
        colour = "green" if out.verdict == "pass" else "red"
        console.print(f"[{colour}]{n}: {out.verdict.upper()}[/] {out.result.run_dir / 'report.html'}")
        if out.verdict != "pass":
            code = 1
    index = render_index(
        rows,
        Path(reports) / f"validate-{time.strftime('%Y%m%d-%H%M%S')}-{topology.name}.html",
        f"bfh validate {topology.name}",
    )
    return Validation(topology.name, rows, index, code)
