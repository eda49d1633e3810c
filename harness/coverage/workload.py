"""Traffic of every family on every path at once (harness/topology/traffic.py): on the controllers'
group a controller-side publisher (`ctl-pub-<g>`) and subscriber (`ctl-sub-<g>`), on every group an
agent-side pair (`pub-<g>`, `sub-<g>`). A publisher publishes every event topic of the families it
produces; a subscriber subscribes each family it consumes on the family's filter. A flow (family,
producer group, consumer group) is told from the others by (publisher, subscriber, subscription).

A flow that must not deliver is watched best-effort: the reconciliation owes a pair at least once
only when both the publication and the subscription are (QoS >= 1, durable), so the side whose
every flow of the family is forbidden publishes or subscribes it at QoS 0, not durable."""

from __future__ import annotations

import dataclasses
from typing import Any

from harness.agents.fleet import member_name
from harness.agents.launch import AgentSpec, agent_factory, combine
from harness.run.runner import AgentFactory
from harness.topology import Topology
from harness.topology.paths import PathPrediction
from harness.topology.traffic import Family, families

OWED = ("deliver", "report")  # flows measured at the family's own QoS and durability


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


def publisher_name(family: Family, group: str) -> str:
    return f"ctl-pub-{group}" if family.source == "controller" else f"pub-{group}"


def subscriber_name(family: Family, group: str) -> str:
    return f"ctl-sub-{group}" if family.target == "controller" else f"sub-{group}"


def jsonable(v: Any) -> Any:
    """The prediction's `blocked_by` for run.json: its fields and its sentence (`text`)."""
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        describe = getattr(v, "describe", None)
        text = describe() if callable(describe) else None
        return {**dataclasses.asdict(v), **({"text": str(text)} if text else {})}
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    return v if v is None or isinstance(v, (str, int, float, bool, dict)) else str(v)


def measured(topology: Topology, preds: list[PathPrediction]) -> list[dict[str, Any]]:
    """The flows a run measures (run.json scenario.params.paths, read by the `paths` checker):
    every traffic prediction that is not `none`, with its agents, topics and modes."""
    fams = {f.name: f for f in families(topology)}
    flows = [p for p in preds if p.must != "none" and p.family in fams]
    owed_from = {(publisher_name(fams[p.family], p.source), p.family) for p in flows if p.must in OWED}
    owed_into = {(subscriber_name(fams[p.family], p.target), p.family) for p in flows if p.must in OWED}
    out = []
    for p in flows:
        f = fams[p.family]
        pub, sub = publisher_name(f, p.source), subscriber_name(f, p.target)
        owed_sub = (sub, f.name) in owed_into
        entry: dict[str, Any] = {
            "from": p.source,
            "to": p.target,
            "family": f.name,
            "publisher": pub,
            "subscriber": sub,
            "subscription": f.topic,
            "events": f.event_topics(),
            "qos": f.qos if (pub, f.name) in owed_from else 0,
            "sub_qos": f.qos if owed_sub else 0,
            "durable": f.durable if owed_sub else False,
            "must": p.must,
            "routable": p.routable,
            "why": p.why,
        }
        blocked = getattr(p, "blocked_by", None)
        if blocked:
            entry["blocked_by"] = jsonable(blocked)
        out.append(entry)
    _watchers(out)
    return out


def _watchers(entries: list[dict[str, Any]]) -> None:
    """A subscriber subscribes a filter once (workload.json): when two families on one filter need
    different modes, the other mode goes on a watcher agent of the same group (`watch-<g>`)."""
    modes: dict[tuple[str, str], list[tuple[int, bool]]] = {}
    for e in entries:
        mode = (e["sub_qos"], e["durable"])
        seen = modes.setdefault((e["subscriber"], e["subscription"]), [])
        if mode not in seen:
            seen.append(mode)
        i = seen.index(mode)
        if i:
            e["subscriber"] = f"watch{i if i > 1 else ''}-{e['to']}"


def caveats(entries: list[dict[str, Any]]) -> list[str]:
    """Forbidden flows that still ride an at-least-once pair: their publisher and subscriber carry
    the family at least once for other paths, so the run's at_least_once owes what they block."""
    return [
        f"path {e['from']} → {e['to']} [{e['family']}] is declared deliver: false, but {e['publisher']} "
        f"and {e['subscriber']} carry {e['family']} at least once for other paths: what it blocks "
        "counts as lost in at_least_once"
        for e in entries
        if e["must"] == "not" and e["qos"] >= 1 and e["durable"] and e["sub_qos"] >= 1
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
    """Every subscriber, then every publisher, of the flows in `paths`; each publisher sends `count`
    messages at `rate` per event topic. With `fleet` N, each agent-side subscriber is N agents:
    `sub-<group>` (the one the paths promise reads) and N - 1 fleet members
    (harness/agents/fleet.py) with the same subscriptions."""
    proto = command_protocol or protocol_of(topology)  # the agent command's one protocol, if named
    subs: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {}
    pubs: dict[str, tuple[str, dict[str, dict[str, Any]]]] = {}
    for e in paths:
        topics = subs.setdefault(e["subscriber"], (e["to"], {}))[1]
        topics.setdefault(
            e["subscription"], {"topic": e["subscription"], "qos": e["sub_qos"], "durable": e["durable"]}
        )
        events = pubs.setdefault(e["publisher"], (e["from"], {}))[1]
        for t in e["events"]:
            pub = {"topic": t, "qos": e["qos"], "count": count, "rate_per_s": rate, "payload_bytes": 256}
            old = events.setdefault(t, pub)
            old["qos"] = max(old["qos"], e["qos"])
    factories = []
    for name, (group, topics) in subs.items():
        factories.append(_agent(name, group, proto, command, timeout_s, list(topics.values()), []))
        if name.startswith("sub-"):
            for i in range(2, (fleet or 1) + 1):
                factories.append(
                    _agent(member_name(group, i), group, proto, command, timeout_s, list(topics.values()), [])
                )
    for name, (group, events) in pubs.items():
        factories.append(_agent(name, group, proto, command, timeout_s, [], list(events.values())))
    return combine(*factories)


def _agent(
    name: str,
    group: str,
    proto: str,
    command: str | None,
    timeout_s: int,
    subscriptions: list[dict[str, Any]],
    publications: list[dict[str, Any]],
) -> AgentFactory:
    base = agent_factory(
        name=name,
        group=group,
        protocol=proto,
        subscriptions=tuple(s["topic"] for s in subscriptions),
        count=0,
        timeout_s=timeout_s,
        command=command,
    )

    def make(env: Any) -> list[AgentSpec]:
        specs = base(env)
        for spec in specs:
            spec.workload["subscriptions"] = [dict(s) for s in subscriptions]
            spec.workload["publications"] = [dict(p) for p in publications]
        return specs

    return make
