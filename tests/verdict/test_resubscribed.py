"""One rule for restored sessions (issue 41, docs/agent-contract.md C-11), on hand-written runs:
a subscriber that reconnects and never subscribes again is back only when the broker witness saw
its consumer on the member its `connected` names, in `recovery`, the fleet promises and
`consumer_confirmed` alike. Pure logic, no broker."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from harness.verdict.checks import consumer_confirmed, recovery
from harness.verdict.checks.fleet import fleet_recovery, no_agent_left_behind, reconnect_storm
from harness.verdict.resubscribed import RESTORED, SUBSCRIBED, back_at
from harness.verdict.view import RunView, Window

A, B = "127.0.0.1:1001", "127.0.0.1:1002"
ROLE, TOPIC = "subscriber:t/#", "t/#"
KILL = Window("k1", "kill", "pair-1", 10.0, 14.0, {"group": "pair", "new_master": "pair-2"})


def _agent(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "conf": {"mb.urls": f"{A},{B}", "mb.publisher.timeout": "30"},
        "workload": {"subscriptions": [{"topic": TOPIC, "qos": 1, "durable": True}]},
    }


def run(names: list[str], fleet: bool = False) -> dict[str, Any]:
    return {
        "run": "r1",
        "scenario": {"params": {"fleet": len(names)} if fleet else {}},
        "links": [
            {"name": "pair-1-mqtt", "listen": A, "kind": "client", "broker": "pair-1"},
            {"name": "pair-2-mqtt", "listen": B, "kind": "client", "broker": "pair-2"},
        ],
        "brokers": {"pair-1": {"group": "pair"}, "pair-2": {"group": "pair"}},
        "agents": [_agent(n) for n in names],
        # stopped well past the recovery bound after the kill: `recovery` judges it
        "observations": {"masters": {"pair": "pair-1"}, "agents_stopped_ts": {n: 60.0 for n in names}},
    }


def rec(agent: str, ts: float, event: str, **kw: Any) -> dict[str, Any]:
    return {"ts": ts, "run": "r1", "agent": agent, "event": event, **kw}


def restored_log(agent: str, back_on: str = B) -> list[dict[str, Any]]:
    """Subscribed once on pair-1; after the kill reconnected to `back_on`, no SUBSCRIBE again."""
    return [
        rec(agent, 1.0, "connected", role=ROLE, broker=A, reason="initial"),
        rec(agent, 1.1, "subscribed", topic=TOPIC, broker=A, qos=1, durable=True),
        rec(agent, 10.1, "disconnected", role=ROLE, broker=A, reason="connection_lost: eof"),
        rec(agent, 14.5, "connected", role=ROLE, broker=back_on, reason="reconnect"),
        rec(agent, 20.0, "received", msg_id="m1", topic="t/a", broker=back_on, subscription=TOPIC),
    ]


def consumer(agent: str, ts: float, broker: str) -> dict[str, Any]:
    return {
        "ts": ts,
        "broker": broker,
        "event": "consumer_added",
        "client_id": f"bfh-r1-{agent}-s0",
        "destination": "t.>",
    }


def view(logs: dict[str, list[dict[str, Any]]], events: list[dict[str, Any]], fleet: bool = False) -> RunView:
    v = RunView(Path("/nonexistent"), {}, run(sorted(logs), fleet), logs, [KILL])
    v.__dict__["broker_events"] = events  # the cached witness records (brokers/events.jsonl)
    return v


WITNESSED = [consumer("a", 1.05, "pair-1"), consumer("a", 14.6, "pair-2")]


def test_restored_session_counts_once_the_witness_saw_it() -> None:
    v = view({"a": restored_log("a")}, WITNESSED)
    back = back_at(v, "a", ROLE, 10.1)
    assert back is not None and back.how == RESTORED and back.ts == 14.6
    assert recovery(v).ok
    c = consumer_confirmed(v)
    assert c.ok and "1 restored by the broker" in c.detail, c.detail


def test_never_on_the_agents_word_alone() -> None:
    # the witness ran and saw no consumer of it on the new master: `connected` + receiving is not back
    v = view({"a": restored_log("a")}, [consumer("a", 1.05, "pair-1")])
    assert back_at(v, "a", ROLE, 10.1) is None
    assert recovery(v).status == "fail"
    # a consumer on another member than its connection's proves nothing for it
    v = view({"a": restored_log("a", back_on=A)}, WITNESSED)
    assert back_at(v, "a", ROLE, 10.1) is None
    # nor another agent's consumer of the same destination (a fleet's members share it)
    v = view({"a": restored_log("a")}, [consumer("a", 1.05, "pair-1"), consumer("b", 14.6, "pair-2")])
    assert back_at(v, "a", ROLE, 10.1) is None


def test_a_consumer_seen_after_the_connection_ended_is_not_its() -> None:
    lost = rec("a", 15.0, "disconnected", role=ROLE, broker=B, reason="connection_lost: eof")
    log = [*restored_log("a")[:4], lost]
    v = view({"a": log}, [consumer("a", 1.05, "pair-1"), consumer("a", 16.0, "pair-2")])
    assert back_at(v, "a", ROLE, 10.1) is None


def test_subscribed_still_counts_and_comes_first() -> None:
    log = [*restored_log("a")[:4], rec("a", 14.7, "subscribed", topic=TOPIC, broker=B, qos=1, durable=True)]
    v = view({"a": log}, [consumer("a", 1.05, "pair-1")])
    got = back_at(v, "a", ROLE, 10.1)
    assert got is not None and got.how == SUBSCRIBED


def test_fleet_promises_share_the_rule() -> None:
    members = ["fleet-pair-0", "fleet-pair-1"]
    logs = {m: restored_log(m) for m in members}
    seen = [consumer(m, 1.05, "pair-1") for m in members] + [consumer(m, 14.6, "pair-2") for m in members]
    v = view(logs, seen, fleet=True)
    assert fleet_recovery(v).ok and no_agent_left_behind(v).ok
    assert "never" not in reconnect_storm(v).detail
    # one member's consumer never came back on the new master: it is left behind, and never back
    v = view(logs, seen[:-1], fleet=True)
    left = no_agent_left_behind(v)
    assert left.status == "fail" and left.evidence[0]["agent"] == "fleet-pair-1"
    assert fleet_recovery(v).status == "fail"


def test_a_subscriber_that_never_reconnects_still_fails() -> None:
    # never_resubscribes: its persistent session is kept by the broker, but it never comes back
    log = restored_log("fleet-pair-0")[:3]
    v = view({"fleet-pair-0": log}, [consumer("fleet-pair-0", 1.05, "pair-1")], fleet=True)
    assert recovery(v).status == "fail"
    assert no_agent_left_behind(v).status == "fail"
    assert fleet_recovery(v).status == "fail"
