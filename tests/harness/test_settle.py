"""The runner's settle ends early only when the run is observed complete: every sent message on
every matching subscription, every connection back up. Records as agents write them."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from harness.agents.launch import AgentProcess
from harness.run.traffic import observed_complete


def _agent(subs: list[str], records: list[dict[str, Any]]) -> AgentProcess:
    spec = SimpleNamespace(workload={"subscriptions": [{"topic": f} for f in subs]})
    return cast(AgentProcess, SimpleNamespace(spec=spec, records=records))


def _sent(mid: str, topic: str = "a/x") -> dict[str, Any]:
    return {"event": "sent", "msg_id": mid, "topic": topic}


def _recv(mid: str, sub: str) -> dict[str, Any]:
    return {"event": "received", "msg_id": mid, "subscription": sub}


def _conn(role: str, ev: str = "connected") -> dict[str, Any]:
    return {"event": ev, "role": role}


def test_complete_when_every_matching_subscription_has_every_message() -> None:
    recs = [_conn("publisher"), _conn("subscriber:a/#"), _sent("m1"), _sent("m2"), _sent("m3", "b/x")]
    recs += [_recv("m1", "a/#"), _recv("m2", "a/#")]
    assert observed_complete([_agent(["a/#", "c/+"], recs)])  # m3 matches neither filter


def test_a_missing_delivery_keeps_waiting() -> None:
    recs = [_conn("publisher"), _sent("m1"), _sent("m2"), _recv("m1", "a/#"), _recv("m2", "+/x")]
    assert not observed_complete([_agent(["a/#", "+/x"], recs)])  # m1 not on +/x yet


def test_a_subscriber_still_disconnected_keeps_waiting() -> None:
    recs = [_conn("publisher"), _conn("subscriber:a/#"), _sent("m1"), _recv("m1", "a/#")]
    recs.append(_conn("publisher", "disconnected"))  # done publishing: it may leave
    assert observed_complete([_agent(["a/#"], recs)])
    recs.append(_conn("subscriber:a/#", "disconnected"))
    assert not observed_complete([_agent(["a/#"], recs)])


def test_messages_from_another_agent_count_for_a_subscriber() -> None:
    publisher = _agent([], [_conn("publisher"), _sent("m1"), _sent("m2")])
    subscriber = _agent(["a/+"], [_conn("subscriber:a/+"), _recv("m1", "a/+")])
    assert not observed_complete([publisher, subscriber])
    subscriber.records.append(_recv("m2", "a/+"))
    assert observed_complete([publisher, subscriber])
