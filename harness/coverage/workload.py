"""Traffic on every path at once: on each group a publisher (its own topic) and a subscriber with one
subscription per source group it measures. A path that must not deliver is watched best-effort
(QoS 0, not durable): what crosses it is counted, and nothing is owed."""

from __future__ import annotations

from typing import Any

from harness.agents.fleet import member_name
from harness.agents.launch import AgentSpec, agent_factory, combine
from harness.run.runner import AgentFactory
from harness.topology import Topology
from harness.topology.paths import TOPIC, PathPrediction


class CoverageError(ValueError):
    """The topology cannot be validated as asked (no common protocol, unknown group or fault)."""


def protocol_of(topology: Topology) -> str:
    """One protocol every group serves (MQTT first), so every path is measured the same way."""
    for proto in ("mqtt", "stomp"):
        if all(proto in g.connectors for g in topology.groups):
            return proto
    raise CoverageError(
        f"topology {topology.name!r}: no client protocol (mqtt or stomp) that every group serves; "
        "give every group an mqtt or stomp connector"
    )


def source_filter(group: str) -> str:
    return TOPIC.format(group=group).rsplit("/", 1)[0] + "/#"


def measured(preds: list[PathPrediction]) -> list[dict[str, Any]]:
    """The paths a run measures (run.json scenario.params.paths, read by the `paths` checker)."""
    return [
        {
            "from": p.source,
            "to": p.target,
            "publisher": f"pub-{p.source}",
            "subscriber": f"sub-{p.target}",
            "subscription": source_filter(p.source),
            "must": p.must,
            "routable": p.routable,
            "why": p.why,
        }
        for p in preds
        if p.must != "none"
    ]


def agents(
    topology: Topology,
    paths: list[dict[str, Any]],
    count: int,
    rate: float,
    timeout_s: int,
    command: str | None,
    fleet: int | None = None,
    command_protocol: str | None = None,
) -> AgentFactory:
    """With `fleet` N, each group's subscriber is N agents: `sub-<group>` (the one the paths
    promise reads) and N - 1 fleet members (harness/agents/fleet.py) with the same subscriptions."""
    proto = command_protocol or protocol_of(topology)  # the agent command's one protocol, if named
    factories = []
    for g in topology.groups:
        mine = [p for p in paths if p["to"] == g.name]
        if mine:
            factories.append(_subscriber(g.name, proto, mine, command))
            for i in range(2, (fleet or 1) + 1):
                factories.append(_subscriber(g.name, proto, mine, command, member_name(g.name, i)))
    for g in topology.groups:
        if any(p["from"] == g.name for p in paths):
            factories.append(
                agent_factory(
                    name=f"pub-{g.name}",
                    group=g.name,
                    protocol=proto,
                    subscriptions=(),
                    topic=TOPIC.format(group=g.name),
                    count=count,
                    rate=rate,
                    timeout_s=timeout_s,
                    command=command,
                )
            )
    return combine(*factories)


def _subscriber(
    group: str, proto: str, paths: list[dict[str, Any]], command: str | None, name: str | None = None
) -> AgentFactory:
    base = agent_factory(
        name=name or f"sub-{group}",
        group=group,
        protocol=proto,
        subscriptions=tuple(p["subscription"] for p in paths),
        count=0,
        command=command,
    )
    best_effort = {p["subscription"] for p in paths if p["must"] == "not"}

    def make(env: Any) -> list[AgentSpec]:
        specs = base(env)
        for spec in specs:
            for sub in spec.workload.get("subscriptions", []):
                if sub["topic"] in best_effort:
                    sub.update(qos=0, durable=False)
        return specs

    return make
