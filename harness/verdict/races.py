"""ActiveMQ's own races that lose deliveries: named from the blame's evidence, with the rate
measured here (docs/scenarios.md, docs/fleet.md, docs/verdict.md "Broker races").

Under the `agent` gate (the default of `bfh run`, which judges an agent, and of a gated agent
command: `run_gate`, `default_gate`) a delivery lost or missed by the broker is not the agent's
failure: it is listed as a warning naming its race, its evidence and its measured rate.
`bfh validate` (the broker is the thing under test) and the pytest catalog's runs of the
reference agent keep the `all` gate, where such a loss fails (the conformance test then re-judges
a run whose only failures are named races under `agent`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

SCENARIOS_DOC = "docs/scenarios.md"


@dataclass(frozen=True)
class Race:
    name: str
    what: str
    marker: str  # a substring of a blamed row's evidence that names this race
    rate: str  # measured on this project's runs: how often, where
    doc: str
    unless: tuple[str, ...] = ()  # evidence with any of these too names another race, or none

    def named_by(self, lines: list[str]) -> bool:
        text = "\n".join(lines)
        return self.marker in text and not any(u in text for u in self.unless)


#: checked in order: the first whose marker is in a row's evidence names the row's race
KNOWN: tuple[Race, ...] = (
    Race(
        "bridge-demand",
        "a message acknowledged before the network bridge registered the remote consumers' demand "
        "(the bridge's network consumer on that member, the witness) is forwarded nowhere: a new "
        "master's bridge not up yet (its durable demand is named after the broker, NC-DS_<name>_<dest>, "
        "so the old master's does not carry over), or a new bridge whose remote subscribers are offline",
        "its network consumer came",  # the demand came after the ack (none ever: a filter, unnamed)
        "examples/ops kill:b: 1 of 100 on b->a in 1 extended-tier run (issue 42); 0 in 14 runs "
        "since (the publisher's first ack 0.035-0.70 s after the new master's bridge was up); STOMP "
        "over network-of-pairs, the subscriber side's master killed: 76 of 200 in the run that "
        "found it, MQTT: 0",
        "docs/verdict.md (Broker races); " + SCENARIOS_DOC + " (Known finding: STOMP subscribers ...)",
    ),
    Race(
        "bridge-demand",  # the same, in a run whose witness cannot say when the demand came
        "a message acknowledged before the network bridge registered the remote consumers' demand "
        "is forwarded nowhere",
        "bridge race across the network",
        "as above",
        SCENARIOS_DOC + " (Known finding: STOMP subscribers across a network of pairs)",
        unless=("no bridge event near", "demand for"),  # a filtered path; a demand that was there
    ),
    Race(
        "link-stealing",
        "a thawed master's replayed durable CONNECTs steal the link and leave a granted "
        "subscription dispatching nothing",
        "Stealing link",
        "hit once (pause-master, first soak, 109 lost); 0 lost in every later run of the naive "
        "reconnecting agent (5-25 stolen links each), 0 stolen links with the reference's probe",
        SCENARIOS_DOC + " (Known finding: a durable MQTT subscription goes silent ...)",
    ),
    Race(
        "durable-reactivation",
        "a message published while a durable subscription is reactivated on the new master is "
        "acknowledged and never delivered",
        "a consumer existed on",
        "stop-master: 1 message in 1 of 22 soak rounds; fleet-masterslave --fleet 100: 2 fan-in "
        "messages in 1 of 3 runs (docs/fleet.md), 3 in the run of issue 42",
        SCENARIOS_DOC + " (Known finding: a message published while a durable subscription is reactivated)",
        unless=("bridge race across the network",),  # across a network: the bridge's rules
    ),
    Race(
        "durable-backlog",
        "a durable subscription reactivated on the new master never got what was kept for it",
        "resubscribed durably on",
        "reference agent: 0 in every catalog run; no_connect_timeout on ordering: 74 of 80 in 1 of "
        "1 run, its first publication after the kill (its wildcard durable subscriptions made "
        "on the old master before any matching topic existed)",
        "docs/verdict.md (Broker races)",
    ),
    Race(
        "no-consumer",
        "a granted subscription with no consumer on the serving member",
        "granted subscription with no consumer",
        "not measured apart (the broker_consumers finding names it)",
        "docs/verdict.md (broker_consumers)",
    ),
)
UNNAMED = Race("unnamed", "a loss blamed on the broker that names no known race", "", "not measured", "")
#: the statuses a broker race can cost (a duplicate is never lost at-least-once)
LOSSES = ("lost", "missed")


class BrokerRace(UserWarning):
    """A passing agent gate's broker race (pytest's warnings summary lists it with its rate)."""


class BlamedRow(Protocol):
    msg_id: str
    subscriber: str
    status: str
    blame: str
    ts: float | None
    evidence: list[str]


def default_gate(gate: str | None, agent_cmd: str | None) -> str:
    """The gate of a pytest catalog run: the one asked for; else `agent` when an agent command is
    gated (a broker race must not fail its release by chance), `all` for the reference agent."""
    return gate or ("agent" if agent_cmd else "all")


def run_gate(gate: str | None) -> str:
    """The gate of `bfh run`: the one asked for, else `agent` whichever agent runs (the reference
    or a command): a run judges an agent, and a broker race is the broker's, warned with its rate."""
    return gate or "agent"


def race_of(evidence: Iterable[str]) -> Race:
    """The race an inferred row's evidence names (folders without the broker's account only)."""
    lines = list(evidence)
    return next((r for r in KNOWN if r.named_by(lines)), UNNAMED)


def race_for(b: BlamedRow) -> Race:
    """A row's race: from the broker's account, the one whose mechanism it shows (`race`, set by
    harness/verdict/fromaccount.py), never read from text; an inferred row's, from its evidence."""
    if getattr(b, "source", "inferred") == "account":
        name = getattr(b, "race", None)
        return next((r for r in KNOWN if r.name == name), UNNAMED)
    return race_of(b.evidence)


def findings(rows: Iterable[BlamedRow]) -> list[dict[str, Any]]:
    """The broker-blamed losses grouped by race: {race, what, count, rate, doc, evidence[:3]}."""
    out: dict[str, dict[str, Any]] = {}
    for b in rows:
        if b.blame != "broker" or b.status not in LOSSES:
            continue
        race = race_for(b)
        f = out.setdefault(
            race.name,
            {
                "race": race.name,
                "what": race.what,
                "count": 0,
                "rate": race.rate,
                "doc": race.doc,
                "evidence": [],
            },
        )
        f["count"] += 1
        if len(f["evidence"]) < 3:
            what = "; ".join(b.evidence)
            f["evidence"].append({"msg_id": b.msg_id, "agent": b.subscriber, "ts": b.ts, "what": what})
    return sorted(out.values(), key=lambda f: -int(f["count"]))


def finding_line(f: dict[str, Any]) -> str:
    """One line of the failure message: the race, its count, its measured rate, first evidence."""
    first = f["evidence"][0]["what"] if f.get("evidence") else ""
    return f"{f['race']}: {f['count']} lost by the broker ({f['what']}); measured: {f['rate']}; e.g. {first}"
