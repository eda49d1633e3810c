"""Blame from the broker's account (harness/verdict/fromaccount.py): the rules that turn a hop into
whose fault it is, on account records and agent records written by hand (no brokers)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.verdict import RunView, fromaccount

CID = "bfh-r1-a-s0"
RUN = {
    "run": "r1",
    "brokers": {"p-1": {"group": "p"}, "p-2": {"group": "p"}},
    "agents": [{"name": "a", "conf": {}, "workload": {"subscriptions": [{"topic": "t/#"}]}}],
    "observations": {"agents_stopped_ts": {"a": 100.0}},
}
ROW = {"msg_id": "m1", "subscriber": "a", "subscription": "t/#", "status": "lost", "ack_ts": 10.0}


def _view(tmp_path: Path, account: list[dict[str, Any]], records: list[dict[str, Any]]) -> RunView:
    (tmp_path / "brokers").mkdir(parents=True)
    with (tmp_path / "brokers" / "account.jsonl").open("w") as f:
        for r in account:
            f.write(json.dumps(r) + "\n")
    (tmp_path / "brokers" / "account-gaps.json").write_text('{"unavailable": {}, "dropped": []}')
    return RunView(tmp_path, {"totals": {}}, RUN, {"a": records}, [])


def added(ts: float, cid: str, broker: str = "p-1", durable: bool = True) -> dict[str, Any]:
    return {"ts": ts, "event": "consumer_added", "broker": broker, "cid": cid, "client_id": CID,
            "conn": cid, "dest": "topic://t.>", "subscription": "1:t/#" if durable else None,
            "durable": durable}  # fmt: skip


def removed(ts: float, cid: str, broker: str = "p-1") -> dict[str, Any]:
    return {"ts": ts, "event": "consumer_removed", "broker": broker, "cid": cid}


ARRIVED = {"ts": 10.0, "event": "arrived", "broker": "p-1", "msg_id": "m1", "mid": "ID:1"}


def _blame(tmp_path: Path, account: list[dict[str, Any]], records: list[dict[str, Any]] | None = None) -> str:
    v = _view(tmp_path, account, records or [])
    acc = fromaccount.load(v, {"m1"})
    assert acc is not None
    blame, _, hop = fromaccount.missing(v, acc, ROW)
    return f"{blame} {hop.hop}"


def test_an_attached_consumer_the_broker_never_served_is_the_brokers(tmp_path: Path) -> None:
    assert _blame(tmp_path, [added(1, "c1"), ARRIVED]) == "broker not_dispatched"


def test_a_stuck_consumer_the_broker_expired_unnoticed_is_the_agents(tmp_path: Path) -> None:
    """Attached, never dispatched (its prefetch full of unacked messages), then expired by the
    broker, and the agent logged no loss: a stuck client, not a broker that held the message."""
    assert _blame(tmp_path, [added(1, "c1"), ARRIVED, removed(20, "c1")]) == "agent not_dispatched"


def test_the_same_removal_logged_by_the_agent_stays_the_brokers(tmp_path: Path) -> None:
    lost = {
        "ts": 20.5,
        "agent": "a",
        "event": "disconnected",
        "role": "subscriber:t/#",
        "reason": "connection_lost",
    }
    got = _blame(tmp_path, [added(1, "c1"), ARRIVED, removed(20, "c1")], [lost])
    assert got == "broker not_dispatched"


def test_a_removal_as_the_harness_stops_the_agent_is_no_silence(tmp_path: Path) -> None:
    assert _blame(tmp_path, [added(1, "c1"), ARRIVED, removed(99.5, "c1")]) == "broker not_dispatched"


def test_a_clean_session_before_the_durable_one_came_back_is_the_agents(tmp_path: Path) -> None:
    deleted = {
        "ts": 12.0,
        "event": "subscription_deleted",
        "broker": "p-2",
        "client_id": CID,
        "subscription": None,
    }
    recs = [added(1, "c1"), removed(5, "c1"), ARRIVED, deleted, added(15, "c2", broker="p-2")]
    assert _blame(tmp_path, recs) == "agent not_dispatched"
    recs.remove(deleted)
    assert _blame(tmp_path / "x", recs) == "broker not_dispatched"  # the durable backlog
