"""Where a delivery ended, from the broker's account alone (harness/account/journey.py): pure logic
on account records written by hand, one case per hop (the real broker's records are checked by
scenarios/test_account.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness.account.journey import Account

GROUPS = {"a-1": "a", "a-2": "a", "b-1": "b"}
SUB = "bfh-r-agent-s0"


GONE = {"ts": 3.0, "event": "consumer_removed", "broker": "a-1", "cid": "c1"}


def _account(
    tmp_path: Path, records: list[dict[str, Any]], unavailable: dict[str, str] | None = None
) -> Account:
    brokers = tmp_path / "brokers"
    brokers.mkdir(exist_ok=True)
    with (brokers / "account.jsonl").open("w") as f:
        for r in sorted(records, key=lambda r: r["ts"]):
            f.write(json.dumps(r) + "\n")
    (brokers / "account-gaps.json").write_text(json.dumps({"unavailable": unavailable or {}, "dropped": []}))
    acc = Account.load(tmp_path, GROUPS, {"m1"})
    assert acc is not None
    return acc


def consumer(
    ts: float, cid: str, broker: str = "a-1", durable: bool = True, client: str = SUB, **kw: Any
) -> dict[str, Any]:
    sub = "1:t/#" if durable else None
    return {"ts": ts, "event": "consumer_added", "broker": broker, "cid": cid, "client_id": client,
            "conn": f"conn-{cid}", "dest": "topic://t.>", "subscription": sub, "durable": durable,
            **kw}  # fmt: skip


def msg(ts: float, event: str, broker: str = "a-1", **kw: Any) -> dict[str, Any]:
    return {"ts": ts, "event": event, "broker": broker, "msg_id": "m1", "mid": "ID:1", **kw}


def test_dispatched_and_acked(tmp_path: Path) -> None:
    acc = _account(
        tmp_path,
        [consumer(1, "c1"), msg(2, "arrived"), msg(2.1, "dispatched", cid="c1"), msg(2.2, "acked", cid="c1")],
    )
    h = acc.hop("m1", {SUB})
    assert h.hop == "acked" and len(h.lines) == 3 and h.lines[2].startswith("[account a-1 2.200 acked]")


def test_a_dispatch_to_another_client_is_not_this_subscriptions(tmp_path: Path) -> None:
    recs = [consumer(1, "c1", client="someone-else"), consumer(1, "c2"), msg(2, "arrived"),
            msg(2.1, "dispatched", cid="c1"), msg(2.2, "acked", cid="c1")]  # fmt: skip
    h = _account(tmp_path, recs).hop("m1", {SUB})
    assert h.hop == "not_dispatched" and h.facts["attached"], h


def test_dispatched_never_acked_then_removed(tmp_path: Path) -> None:
    recs = [consumer(1, "c1"), msg(2, "arrived"), msg(2.1, "dispatched", cid="c1"),
            {"ts": 5.0, "event": "consumer_removed", "broker": "a-1", "cid": "c1"}]  # fmt: skip
    h = _account(tmp_path, recs).hop("m1", {SUB})
    assert h.hop == "not_acked" and h.facts["gone"] == 5.0


def test_held_while_a_durable_consumer_was_reactivated(tmp_path: Path) -> None:
    recs = [consumer(1, "c1", broker="a-1"), GONE,
            consumer(9.5, "c2", broker="a-2"), msg(10, "arrived", broker="a-2")]  # fmt: skip
    h = _account(tmp_path, recs).hop("m1", {SUB})
    assert h.hop == "not_dispatched" and h.facts["attached"] and h.facts["reactivated"] == 9.5


def test_kept_for_a_durable_subscription_that_came_back(tmp_path: Path) -> None:
    recs = [consumer(1, "c1", broker="a-1"), GONE,
            msg(10, "arrived", broker="a-2"), consumer(20, "c2", broker="a-2")]  # fmt: skip
    h = _account(tmp_path, recs).hop("m1", {SUB})
    assert h.hop == "not_dispatched" and not h.facts["attached"]
    assert h.facts["durable_sub"] and h.facts["back_durable"]


def test_a_clean_subscription_keeps_nothing(tmp_path: Path) -> None:
    recs = [consumer(1, "c1", durable=False), GONE,
            msg(10, "arrived"), consumer(20, "c2", durable=False)]  # fmt: skip
    h = _account(tmp_path, recs).hop("m1", {SUB})
    assert h.hop == "not_dispatched" and not h.facts["durable_sub"] and not h.facts["back_durable"]


def test_a_durable_subscription_deleted_by_a_clean_session(tmp_path: Path) -> None:
    recs = [consumer(1, "c1"), GONE,
            {"ts": 4.0, "event": "subscription_deleted", "broker": "a-1", "client_id": SUB,
             "subscription": "1:t/#"},
            msg(10, "arrived")]  # fmt: skip
    h = _account(tmp_path, recs).hop("m1", {SUB})
    assert not h.facts["durable_sub"] and any("deleted" in ln for ln in h.lines)


def test_never_forwarded_before_the_bridge_demand(tmp_path: Path) -> None:
    recs = [consumer(1, "c1", broker="b-1"), msg(2, "arrived", broker="a-1"),
            consumer(4, "n1", broker="a-1", durable=False, client="bridge", network=True)]  # fmt: skip
    h = _account(tmp_path, recs).hop("m1", {SUB})
    assert h.hop == "not_forwarded" and h.facts["demand_after"] == 4


def test_never_arrived_and_a_gap(tmp_path: Path) -> None:
    assert _account(tmp_path, [consumer(1, "c1")]).hop("m1", {SUB}).hop == "never_arrived"
    h = _account(tmp_path, [consumer(1, "c1")], {"a-2": "no JDK"}).hop("m1", {SUB})
    assert h.hop == "gap" and "a-2" in h.lines[0]


def test_a_folder_without_an_account(tmp_path: Path) -> None:
    assert Account.load(tmp_path, GROUPS, {"m1"}) is None


def test_a_virtual_topic_consumer_queue_is_durable(tmp_path: Path) -> None:
    """mqtt-virtual-topic-subscriptions: a durable MQTT subscription is a queue consumer with no
    subscription name; its queue keeps what it misses (the fleet topologies use it)."""
    queue = "queue://Consumer.bfh-r-agent-s0:AT_LEAST_ONCE.VirtualTopic.t.>"
    recs = [consumer(1, "c1", durable=False, dest=queue), GONE, msg(10, "arrived"),
            consumer(20, "c2", durable=False, dest=queue)]  # fmt: skip
    h = _account(tmp_path, recs).hop("m1", {SUB})
    assert h.facts["durable_sub"] and h.facts["back_durable"], h


def test_a_consumer_on_a_killed_master_ends_when_a_new_master_starts(tmp_path: Path) -> None:
    """A kill -9 leaves no consumer_removed: the group's next broker_started ends its consumers."""
    started = {"ts": 5.0, "event": "broker_started", "broker": "a-2", "broker_id": "ID:a-2"}
    recs = [consumer(1, "c1", broker="a-1"), started, msg(10, "arrived", broker="a-2")]
    h = _account(tmp_path, recs).hop("m1", {SUB})
    assert h.hop == "not_dispatched" and not h.facts["attached"] and h.facts["durable_sub"], h
