"""BrokerView (harness.verdict.witness): consumer state from the broker event log, unknown in
observer gaps, known empty on a killed member or a slave waiting for the lock."""

from __future__ import annotations

from harness.verdict.blame import _duplicate
from harness.verdict.witness import BrokerView


def _e(ts, event, broker="b1", **kw):
    return {"ts": ts, "event": event, "broker": broker, "source": kw.pop("source", "advisory"), **kw}


def _added(ts, cid="c1", dest="t.>", **kw):
    return _e(ts, "consumer_added", client_id=cid, destination=dest, consumer_id=f"{cid}:{ts}", **kw)


BASE = [_e(0.0, "observer_gap_start"), _e(1.0, "observer_gap_end")]


def test_consumer_present_absent_and_unknown_in_gaps():
    w = BrokerView(
        [
            *BASE,
            _added(2.0),
            _e(5.0, "consumer_removed", client_id="c1", destination="t.>", consumer_id="c1:2.0"),
            _e(8.0, "observer_gap_start"),
            _e(9.0, "observer_gap_end"),
        ],
        {},
    )
    assert w.has_consumer("b1", 0.5, {"c1"}, "t.>") is None  # before the observer saw anything
    assert w.has_consumer("b1", 1.5, {"c1"}, "t.>") is False
    assert w.has_consumer("b1", 3.0, {"c1"}, "t.>") is True
    assert w.has_consumer("b1", 3.0, {"c2"}, "t.>") is False
    assert w.has_consumer("b1", 3.0, None, "t.>") is True  # destination alone
    assert w.has_consumer("b1", 6.0, {"c1"}, "t.>") is False
    assert w.has_consumer("b1", 8.5, {"c1"}, "t.>") is None  # a gap is unknown, not empty
    assert w.has_consumer("b2", 3.0, {"c1"}, "t.>") is None  # never observed


def test_gap_closes_open_consumers_and_snapshot_replay_is_unknown():
    w = BrokerView(
        [
            *BASE,
            _added(2.0),
            _e(4.0, "observer_gap_start"),
            _e(6.0, "observer_gap_end"),
            _added(6.3, snapshot=True),
        ],
        {},
    )
    assert w.has_consumer("b1", 6.1, {"c1"}, "t.>") is None  # its replay is still on its way
    assert w.has_consumer("b1", 6.5, {"c1"}, "t.>") is True


def test_killed_member_and_waiting_slave_hold_no_consumer():
    recs = [
        *BASE,
        _added(2.0),
        _e(3.0, "store_lock_waiting", broker="b2", source="log"),
        _e(9.0, "broker_started", broker="b2", source="log"),
        _e(0.5, "broker_started", broker="b1", source="log"),
    ]
    w = BrokerView(recs, {"b1": [(4.0, float("inf"), "kill (f001-kill)")]})
    assert w.has_consumer("b1", 5.0, {"c1"}, "t.>") is False
    assert w.down_reason("b1", 5.0) == "kill (f001-kill)"
    assert w.has_consumer("b2", 5.0, {"c1"}, "t.>") is False  # a slave serves no client
    assert w.master_at(["b1", "b2"], 5.0) == "b1"
    assert w.master_at(["b1", "b2"], 9.5) == "b2"


def test_link_stolen_found_by_client_id():
    w = BrokerView(
        [*BASE, _e(3.0, "link_stolen", client_id="c1", source="log", line="Stealing link for clientId c1")],
        {},
    )
    assert [r["line"] for r in w.stolen("b1", {"c1"}, 0, 10)] == ["Stealing link for clientId c1"]
    assert w.stolen("b1", {"c2"}, 0, 10) == []


def test_duplicate_blame():
    once = [{"event": "send_attempt", "ts": 1.0}, {"event": "sent", "ts": 1.1}]
    assert _duplicate(once)[0] == "broker"
    again = [*once, {"event": "send_attempt", "ts": 2.0}, {"event": "sent", "ts": 2.1}]
    assert _duplicate(again)[0] == "agent"
