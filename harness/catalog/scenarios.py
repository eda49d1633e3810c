"""The scenario catalog: every scenario defined once, as data (harness/catalog/entries.py), built
and run here.

`pytest scenarios/` parametrizes over `SCENARIOS`; `bfh run NAME` and `bfh validate` run the same
entries, with the same gates and bounds (saved in run.json). The verdict is `harness.verdict`'s,
whoever runs the entry.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from harness.agents.fleet import FleetShape, fleet_factory, fleet_workload
from harness.agents.launch import AgentSpec, agent_factory, combine
from harness.catalog.entries import (
    FLEET_PARAMS,
    SCENARIOS,
    VARIANTS,
    Scenario,
    static_list_network,
    topology_named,
)
from harness.catalog.held import subscribe_held
from harness.deploy.plan import free_ports
from harness.faults.schedule import Schedule
from harness.run.runner import CATALOG_POLICY as POLICY
from harness.run.runner import AgentFactory, RunError, RunResult, execute
from harness.topology import Topology

#: the gate policy of runs that name none (harness.verdict.judge GATE_POLICIES; run(gate=...) overrides it)
GATE = "all"
NETWORK_WARMUP_S = 4.0  # time for a subscription's demand to reach the bridges before publishing
#: agents per group for every entry that takes a fleet (pytest --bfh-fleet sets it); None: each
#: fleet entry's own size
FLEET: int | None = None


class CatalogError(ValueError):
    """The scenario does not exist or does not apply to this topology."""


__all__ = ["SCENARIOS", "VARIANTS", "Scenario", "static_list_network", "topology_named"]


# -- building a run from an entry ----------------------------------------------------------------
@dataclass
class ScenarioRun:
    """A catalog entry built for one topology (not harness.deploy.plan.Plan, the ports and links)."""

    scenario: Scenario
    schedule: Schedule
    agents: AgentFactory
    warmup_s: float = 0.0

    def record(self) -> dict[str, Any]:
        sc = self.scenario
        return {"name": sc.name, "what": sc.what, "gates": sc.gates, "params": dict(sc.params)}


def _pair_groups(topology: Topology) -> list[str]:
    return [g.name for g in topology.groups if g.size > 1]


def _protocol(sc: Scenario, topology: Topology, group: str) -> str:
    if sc.protocol:
        return sc.protocol
    return "mqtt" if "mqtt" in topology.group(group).connectors else "stomp"


def _agent_user(topology: Topology) -> Any:
    return next((u for u in topology.users if not getattr(u, "bridge", False)), None)


def _hostile_first(group: str, protocol: str, count: int, command: str | None) -> AgentFactory:
    """mb.urls = a black hole (accepts, never answers), a dead port, the slave, then the master."""

    def make(env: Any) -> list[AgentSpec]:
        black = f"127.0.0.1:{free_ports(1)[0]}"
        members = [b.name for b in env.plan.members(group)]
        env.proxy.create_proxy("blackhole", black, env.plan.client_link(members[0], protocol).upstream)
        env.proxy.black_hole("blackhole")
        dead = f"127.0.0.1:{free_ports(1)[0]}"
        master = env.backend.master(group)

        def order(urls: list[str]) -> list[str]:
            by = dict(zip(members, urls, strict=True))
            slave = next(u for b, u in by.items() if b != master)
            return [black, dead, slave, by[master]]

        return agent_factory(group=group, protocol=protocol, count=count, url_order=order, command=command)(
            env
        )

    return make


def _agents(
    sc: Scenario, topology: Topology, command: str | None, command_protocol: str | None = None
) -> tuple[AgentFactory, dict[str, str]]:
    """The agent factory of an entry, and the targets its steps name; `command_protocol`, the one
    protocol the agent command speaks, replaces the entry's."""
    if sc.needs == "bridge":
        if not topology.bridges:
            raise CatalogError(
                f"scenario {sc.name!r} needs a network bridge; topology {topology.name!r} has none"
            )
        b = topology.bridges[0]
        proto = command_protocol or _protocol(sc, topology, b.target)
        return combine(
            agent_factory(name="sub-b", group=b.target, protocol=proto, count=0, command=command),
            agent_factory(
                name="pub-a",
                group=b.source,
                protocol=proto,
                subscriptions=(),
                count=sc.count,
                command=command,
            ),
        ), {"src": b.source, "dst": b.target}
    pairs = _pair_groups(topology)
    if not pairs:
        raise CatalogError(
            f"scenario {sc.name!r} needs a master/slave group; topology {topology.name!r} has none"
        )
    g = pairs[0]
    proto = command_protocol or _protocol(sc, topology, g)
    kw: dict[str, Any] = {
        "group": g,
        "protocol": proto,
        "count": sc.count,
        "rate": sc.rate,
        "timeout_s": sc.timeout_s,
        "qos": sc.qos,
        "durable": sc.durable,
    }
    if sc.agents == "fleet":
        groups = pairs if sc.topology != "pair" and len(pairs) > 1 else [g]
        fleet = fleet_factory(
            groups, fleet_shape(sc), protocol=proto, command=command, timeout_s=sc.timeout_s, qos=sc.qos
        )
        return fleet, {"group": g}
    if sc.agents == "hostile-first":
        return _hostile_first(g, proto, sc.count, command), {"group": g}
    if sc.agents == "subscribe-held":
        hold = int(sc.params.get("hold_ms", 5000))
        return subscribe_held(g, proto, sc.count, sc.rate, command, hold), {"group": g}
    if sc.needs == "users":
        user = _agent_user(topology)
        if user is None:
            raise CatalogError(f"scenario {sc.name!r} needs users; topology {topology.name!r} has none")
        password = "not-the-password" if sc.agents == "wrong-password" else user.password
        extra = {"mb.subscribe.wait": "2"} if sc.agents == "wrong-password" else {}
        tls = any(spec.tls for spec in topology.group(g).connectors.values())

        def make(env: Any) -> list[AgentSpec]:
            conf = {**extra, **({"mb.ssl.ca": str(env.plan.ca_file)} if tls else {})}
            return agent_factory(
                **kw, username=user.name, password=password, extra_conf=conf, command=command
            )(env)

        return make, {"group": g}
    return agent_factory(**kw, command=command), {"group": g}


def fleet_shape(sc: Scenario) -> FleetShape:
    """A fleet entry's workload at its size (harness.agents.fleet.fleet_workload)."""
    status = int(sc.params.get("status_count", FleetShape.status_count))
    count, rate, status = fleet_workload(sc.fleet, sc.count, sc.rate, status, sc.pinned)
    return FleetShape(sc.fleet, controller_count=count, controller_rate=rate, status_count=status)


def as_fleet(sc: Scenario, size: int | None) -> Scenario:
    """The entry with `size` agents per group (`--fleet N`): a fleet entry resized, or a
    single-agent entry's agent made a fleet; None keeps the entry as it is."""
    if size is None:
        return sc
    if size < 1:
        raise CatalogError(f"a fleet needs at least one agent, not {size}")
    if sc.agents not in ("fleet", "single"):
        raise CatalogError(f"scenario {sc.name!r} runs {sc.agents} agents; it takes no fleet")
    params = {**FLEET_PARAMS, **sc.params, "fleet": size}
    return replace(sc, agents="fleet", fleet=size, params=params)


def build(
    name: str | Scenario,
    topology: Topology,
    seed: int | None = None,
    agent_cmd: str | None = None,
    fleet: int | None = None,
    agent_protocol: str | None = None,
) -> ScenarioRun:
    sc = name if isinstance(name, Scenario) else SCENARIOS.get(name)
    if sc is None:
        raise CatalogError(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
    sc = as_fleet(sc, fleet if fleet is not None else (FLEET if sc.agents == "fleet" else None))
    if sc.agents == "fleet" and "fleet" not in sc.params:
        sc = replace(sc, params={**sc.params, "fleet": sc.fleet})
    if sc.needs == "users" and not topology.users:
        raise CatalogError(f"scenario {sc.name!r} needs users; topology {topology.name!r} has none")
    agents, where = _agents(sc, topology, agent_cmd, agent_protocol)
    steps = [s.model_copy(update={"target": s.target.format(**where)}) for s in sc.steps]
    schedule = Schedule(seed=sc.seed if seed is None else seed, steps=steps, settle_s=sc.settle_s)
    return ScenarioRun(sc, schedule, agents, NETWORK_WARMUP_S if sc.agents == "network" else 0.0)


def applies(sc: Scenario, topology: Topology) -> bool:
    try:
        build(sc, topology)
    except CatalogError:
        return False
    return True


@dataclass
class Outcome:
    name: str
    result: RunResult

    @property
    def verdict(self) -> str:
        v = self.result.verdict
        return v.verdict if v is not None else "error"  # never judged: not a fail

    @property
    def reasons(self) -> list[str]:
        """One line per broken promise (the failure message's lines)."""
        v = self.result.verdict
        return [] if v is None else v.message().splitlines()[1:-1]


def run(
    name: str | Scenario,
    topology: Topology,
    *,
    seed: int | None = None,
    agent_cmd: str | None = None,
    reports: Path = Path("reports"),
    backend: str = "local",
    show_progress: bool = True,
    schedule: Schedule | None = None,
    label: str | None = None,
    gate: str | None = None,
    fleet: int | None = None,
    agent_protocol: str | None = None,
) -> Outcome:
    """Run one catalog entry end to end (its own environment); judged and reported by the runner.
    `agent_protocol`: the one protocol `agent_cmd` speaks (its workload and mb.urls use it)."""
    plan = build(name, topology, seed, agent_cmd, fleet, agent_protocol)
    sc = plan.scenario
    try:
        result = execute(
            topology,
            plan.agents,
            schedule or plan.schedule,
            label=label or sc.name,
            reports=reports,
            backend=backend,
            show_progress=show_progress,
            policy=POLICY,
            warmup_s=plan.warmup_s,
            scenario=_gated(plan.record(), gate or GATE),
            subscribe_wait_s=float(sc.params.get("subscribe_wait_s", 60)),
        )
    except OSError as e:  # e.g. the agent command's binary does not exist; everything was stopped
        raise RunError(f"scenario {sc.name}: could not start a process: {e}") from None
    return Outcome(sc.name, result)


def _gated(record: dict[str, Any], gate: str) -> dict[str, Any]:
    """The gate policy goes into run.json's scenario params, so a re-judge agrees."""
    if gate == "all":
        return record
    return {**record, "params": {**record.get("params", {}), "gate": gate}}


def with_changes(name: str, **changes: Any) -> Scenario:
    """A catalog entry with some fields changed (a negative control's workload, say); a fleet's
    scaling (harness.agents.fleet.fleet_workload) leaves them as set."""
    pinned = frozenset(changes) | frozenset(changes.get("params") or ())
    return replace(SCENARIOS[name], **changes, pinned=pinned)


def names() -> list[str]:
    return list(SCENARIOS)


def default_scenarios(topology: Topology) -> list[str]:
    """What `bfh validate` runs without --scenarios: the failover of each kind the topology has."""
    out = ["masterslave"] if _pair_groups(topology) else []
    if topology.bridges:
        out.append("network")
    return out or ["baseline"]


def describe() -> list[dict[str, Any]]:
    return [
        {"name": s.name, "what": s.what, "gates": s.gates, "tags": list(s.tags)} for s in SCENARIOS.values()
    ]


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
    seed: int | None = None,
    agent_cmd: str | None = None,
    reports: Path = Path("reports"),
    backend: str = "local",
    show_progress: bool = True,
    gate: str | None = None,
    fleet: int | None = None,
) -> Validation:
    """Run each scenario (each brings its own environment up and down); errors that stop a
    scenario from running (not verdicts) end the validation with exit code 2."""
    from rich.console import Console

    from harness.report.html import headline, render_index

    console = Console(stderr=True, emoji=False)
    for n in scenarios:  # fail before anything starts
        build(n, topology, seed, agent_cmd, fleet)
    rows: list[dict[str, Any]] = []
    code = 0
    for i, n in enumerate(scenarios, 1):
        console.rule(f"[bold]{i}/{len(scenarios)} {n}[/]: {SCENARIOS[n].what}")
        out = run(
            n,
            topology,
            seed=seed,
            agent_cmd=agent_cmd,
            reports=reports,
            backend=backend,
            show_progress=show_progress,
            gate=gate,
            fleet=fleet,
        )
        head = headline(out.result.summary or {})
        rows.append(
            {
                "name": n,
                **head,
                "broken": (out.result.summary or {}).get("broken", []),
                "reasons": out.reasons,
                "run_dir": str(out.result.run_dir),
                "report": str(out.result.run_dir / "report.html"),
            }
        )
        colour = "green" if out.verdict == "pass" else "red"
        console.print(f"[{colour}]{n}: {out.verdict.upper()}[/] {out.result.run_dir / 'report.html'}")
        for line in out.reasons:
            console.print(f"  [red]{line.strip()}[/]")
        if out.verdict == "fail":
            code = 1
    index = render_index(
        rows,
        Path(reports) / f"validate-{time.strftime('%Y%m%d-%H%M%S')}-{topology.name}.html",
        f"bfh validate {topology.name}",
    )
    return Validation(topology.name, rows, index, code)
