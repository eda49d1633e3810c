"""BrokerView and the observer's re-snapshot (issue 35, soak round 4): a consumer the first
replay missed and the re-replay found existed since some time before its record, so the view
before it is unknown, not "no consumer"; a claim within the tolerance of it is confirmed."""

from __future__ import annotations

from typing import Any

from harness.verdict.witness import BrokerView


def _e(ts: float, event: str, **kw: Any) -> dict[str, Any]:
    return {"ts": ts, "event": event, "broker": "pair-1", "source": "advisory", **kw}


def _added(ts: float, cid: str, **kw: Any) -> dict[str, Any]:
    return _e(ts, "consumer_added", client_id=cid, destination="instance.status.>", consumer_id=cid, **kw)


# the soak round 4 record, with the re-snapshot the fixed observer takes 1 s after its gap_end
SOAK_R4 = [
    _e(602.694, "observer_gap_start", reason="observer starting"),
    _e(603.860, "observer_gap_end"),
    _added(604.008, "s1", snapshot=True),
]


def test_a_resnapshot_find_is_unknown_before_and_present_from_its_record() -> None:
    w = BrokerView([*SOAK_R4, _added(604.950, "s0", snapshot=True, resnapshot=True)], {})
    assert w.has_consumer("pair-1", 603.892 + 2.0, {"s0"}, "instance.status.>") is True
    assert w.has_consumer("pair-1", 604.5, {"s0"}, "instance.status.>") is None  # not "no consumer"
    assert w.seen_between("pair-1", 603.892, 603.892 + 2.01, {"s0"}, "instance.status.>")


def test_without_the_resnapshot_the_missed_consumer_reads_as_absent() -> None:
    # what the old observer recorded: the view the checker then judged "before the consumer"
    w = BrokerView(SOAK_R4, {})
    assert w.has_consumer("pair-1", 603.892 + 2.0, {"s0"}, "instance.status.>") is False
    # a late, live (not re-snapshot) record keeps the earlier view "no consumer"
    w = BrokerView([*SOAK_R4, _added(606.5, "s0")], {})
    assert w.has_consumer("pair-1", 605.0, {"s0"}, "instance.status.>") is False


def test_the_first_replay_window_after_a_gap() -> None:
    w = BrokerView(SOAK_R4, {})
    assert w.replaying("pair-1", 603.892)  # the soak's claim: 32 ms after the observer's gap end
    assert not w.replaying("pair-1", 603.860 + 1.0)
    assert not w.replaying("pair-1", 603.0)  # inside the gap: in_gap's case, not this one
    assert w.in_gap("pair-1", 603.0)
