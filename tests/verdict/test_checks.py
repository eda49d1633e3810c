"""The checkers on hand-written runs (pure logic, no broker): each promise passes on a correct
history and is named, with evidence, on a broken one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from harness.verdict import PROMISES, RunView, VerdictError, judge
from harness.verdict.checks import (
    bounded_retry,
    connect_timeout,
    first_available,
    independent_connections,
    liveness,
    non_vacuous,
    publish_latency,
    publisher_timeout,
    recovery,
    subscription_confirmed,
)
from harness.verdict.judge import Verdict, judged_summary
from harness.verdict.view import Window

A, B = "127.0.0.1:1001", "127.0.0.1:1002"  # the proxies of pair-1 and pair-2
RUN = {
    "links": [
        {"name": "pair-1-mqtt", "listen": A, "kind": "client", "broker": "pair-1"},
        {"name": "pair-2-mqtt", "listen": B, "kind": "client", "broker": "pair-2"},
    ],
    "brokers": {"pair-1": {"group": "pair"}, "pair-2": {"group": "pair"}},
    "agents": [
        {
            "name": "a",
            "conf": {"mb.urls": f"{A},{B}", "mb.publisher.timeout": "4"},
            "workload": {"subscriptions": [{"topic": "t/#", "qos": 1}], "publications": [{"topic": "t/x"}]},
        }
    ],
    "observations": {"masters": {"pair": "pair-1"}, "agents_launched_ts": {"a": 0.0}, "agent_exit": {"a": 0}},
}
SUMMARY = {"totals": {"attempted": 1, "acknowledged": 1}, "policy": {"settle_s": 10.0}}


def r(ts: float, event: str, **kw: Any) -> dict[str, Any]:
    return {"ts": ts, "agent": "a", "event": event, **kw}


def view(records: list[dict[str, Any]], faults: list[Window] = (), run: dict | None = None, **summary: Any):
    return RunView(Path("/nonexistent"), {**SUMMARY, **summary}, run or RUN, {"a": records}, list(faults))


HEALTHY = [
    r(0.2, "connected", role="subscriber:t/#", broker=A),
    r(0.3, "subscribed", topic="t/#", broker=A),
    r(0.4, "connected", role="publisher", broker=A),
    r(1.0, "send_attempt", msg_id="m1", broker=A),
    r(1.1, "sent", msg_id="m1"),
    r(1.2, "received", msg_id="m1"),
]


@pytest.mark.parametrize(
    "check",
    [
        publisher_timeout,
        liveness,
        first_available,
        connect_timeout,
        recovery,
        subscription_confirmed,
        publish_latency,
    ],
)
def test_healthy_history_passes(check):
    assert check(view(HEALTHY)).ok


def test_publisher_timeout_both_ways():
    early = view([*HEALTHY, r(2.0, "send_attempt", msg_id="m2"), r(2.5, "dropped", msg_id="m2", reason="x")])
    c = publisher_timeout(early)
    assert c.status == "fail" and "dropped 0.5 s" in c.evidence[0]["what"]
    late = view(
        [
            *HEALTHY,
            r(2.0, "send_attempt", msg_id="m2"),
            r(9.0, "send_attempt", msg_id="m2"),
            r(9.1, "sent", msg_id="m2"),
        ]
    )
    assert "attempted 7.0 s after" in publisher_timeout(late).evidence[0]["what"]
    never = view([*HEALTHY, r(2.0, "send_attempt", msg_id="m2"), r(20.0, "received", msg_id="x")])
    assert "neither sent nor dropped" in publisher_timeout(never).evidence[0]["what"]
    on_time = view(
        [
            *HEALTHY,
            r(2.0, "send_attempt", msg_id="m2"),
            r(6.1, "dropped", msg_id="m2", reason="publisher_timeout"),
        ]
    )
    assert publisher_timeout(on_time).ok


def test_liveness_bound_on_a_silent_broker():
    pause = Window("f1", "pause", "pair-1", 2.0, 30.0)
    slow = view(
        [*HEALTHY, r(17.0, "disconnected", role="subscriber:t/#", broker=A, reason="liveness")], [pause]
    )
    c = liveness(slow)
    assert c.status == "fail" and c.fault == "f1" and c.evidence[0]["role"] in ("subscriber:t/#", "publisher")
    fast = view(
        [
            *HEALTHY,
            r(5.0, "disconnected", role="subscriber:t/#", broker=A, reason="liveness"),
            r(5.5, "disconnected", role="publisher", broker=A, reason="liveness"),
        ],
        [pause],
    )
    assert liveness(fast).ok


def test_first_available_follows_the_master():
    kill = Window("f1", "kill", "pair-1", 2.0, 4.0, {"group": "pair", "new_master": "pair-2"})
    right = [*HEALTHY, r(10.0, "connected", role="publisher", broker=B)]
    assert first_available(view(right, [kill])).ok
    skipped = [r(0.2, "connected", role="publisher", broker=B)]  # the master (first URL) was serving
    assert first_available(view(skipped)).status == "fail"
    near = [r(4.5, "connected", role="publisher", broker=A)]  # right after a takeover: not judged
    assert first_available(view(near, [kill])).status == "n/a"


def test_connect_timeout_and_recovery():
    late = [
        r(15.0, "connected", role="subscriber:t/#", broker=A),
        r(15.5, "connected", role="publisher", broker=A),
    ]
    assert connect_timeout(view(late)).status == "fail"
    part = Window("f1", "partition", "pair-1", 2.0, 6.0)
    gone = [
        *HEALTHY,
        r(3.0, "disconnected", role="subscriber:t/#", broker=A, reason="liveness"),
        r(60.0, "received", msg_id="z"),
    ]
    assert recovery(view(gone, [part])).status == "fail"
    connected_only = [*gone, r(8.0, "connected", role="subscriber:t/#", broker=A)]
    assert recovery(view(connected_only, [part])).status == "fail", "back means subscribed again"
    back = [*connected_only, r(8.1, "subscribed", topic="t/#", broker=A)]
    assert recovery(view(back, [part])).ok
    stalled = view(HEALTHY, run={**RUN, "observations": {**RUN["observations"], "stalled": True}})
    assert recovery(stalled).status == "fail"


def test_subscription_confirmed_needs_a_live_connection():
    early = [r(0.1, "subscribed", topic="t/#", broker=A), *HEALTHY[:1]]
    c = subscription_confirmed(view(early))
    assert c.status == "fail" and c.count == 1


def test_independent_connections_and_bounded_retry():
    cut = Window("f1", "sever", "pair-1-mqtt", 5.0, 8.0)
    both = [
        *HEALTHY,
        r(5.1, "disconnected", role="subscriber:t/#", broker=A, reason="x"),
        r(5.2, "disconnected", role="publisher", broker=A, reason="x"),
    ]
    assert independent_connections(view(both, [cut])).status == "fail"
    second = Window("f2", "sever", "pair-1-mqtt", 8.0, 11.0)  # each connection cut once
    assert independent_connections(view(both[:-1], [cut, second])).ok
    shared = independent_connections(view(both[:-1], [cut]))  # two roles, one connection
    assert shared.status == "fail" and "carried 2 roles" in shared.evidence[0]["what"]
    assert independent_connections(view(HEALTHY)).status == "n/a"
    spin = [
        r(1 + i * 0.01, "disconnected", role="publisher", broker=A, reason="connect_failed: rejected")
        for i in range(100)
    ]
    assert bounded_retry(view(spin)).status == "fail"
    calm = [
        r(1 + i * 0.5, "disconnected", role="publisher", broker=A, reason="connect_failed: rejected")
        for i in range(20)
    ]
    assert bounded_retry(view(calm)).ok


def test_publish_latency_counts_only_healthy_time():
    slow = [*HEALTHY, r(2.0, "send_attempt", msg_id="m2", broker=A), r(9.0, "sent", msg_id="m2")]
    assert publish_latency(view(slow)).status == "fail"
    assert publish_latency(view(slow, [Window("f1", "kill", "pair-1", 3.0, 5.0)])).ok


@pytest.mark.parametrize(
    ("receipt", "said"),
    [
        (None, None),
        (2.1, "within the bound, so the acks came back late"),
        (8.5, "late too (a backlog at the broker, or a late send"),
    ],
)
def test_publish_latency_says_whether_the_late_messages_were_received_late(receipt, said):
    """The detail puts the acks' lateness beside the receipts': a late receipt puts the delay before
    the broker's dispatch, a prompt one on the ack's way back (docs/fleet.md, at 1/s)."""
    got = [r(receipt, "received", msg_id="m2", subscription="t/#", broker=A)] if receipt else []
    slow = sorted(
        [*HEALTHY, r(2.0, "send_attempt", msg_id="m2", broker=A), *got, r(9.0, "sent", msg_id="m2")],
        key=lambda x: x["ts"],
    )
    c = publish_latency(view(slow))
    assert c.status == "fail" and c.count == 1
    if said is None:
        assert c.detail == "slow publishes on a serving broker"
    else:
        assert said in c.detail and "1 of them received" in c.detail, c.detail
        assert f"median {receipt - 2.0:.1f} s after the first attempt against 7.0 s for the ack" in c.detail


def test_vacuous_runs_fail():
    assert non_vacuous(view([], totals={"attempted": 0, "acknowledged": 0})).status == "fail"
    quiet = Window("f1", "kill", "pair-1", 100.0, 101.0)
    assert non_vacuous(view(HEALTHY, [quiet])).status == "fail"
    assert non_vacuous(view(HEALTHY)).ok


def _run_dir(tmp_path: Path, summary: dict | None, logs: bool = True) -> Path:
    d = tmp_path / "run"
    (d / "analysis").mkdir(parents=True)
    (d / "run.json").write_text(json.dumps({**RUN, "scenario": {"name": "t", "gates": ["at_least_once"]}}))
    if summary is not None:
        (d / "analysis" / "summary.json").write_text(json.dumps(summary))
    if logs:
        (d / "agents" / "a").mkdir(parents=True)
        (d / "agents" / "a" / "messages.jsonl").write_text("".join(json.dumps(x) + "\n" for x in HEALTHY))
    return d


def test_judge_gates_and_writes_the_table(tmp_path: Path):
    # the reconciliation counts 2 lost (its examples: m1); the policy's limit (0) makes it a violation
    lost = {**SUMMARY, "deliveries": {"lost": 2}, "examples": {"lost": ["m1"]}}
    v = judge(_run_dir(tmp_path, lost))
    assert v.verdict == "fail" and v.broken == ["at_least_once"]
    assert "BROKEN at_least_once: 2" in v.message() and "msg_id=m1" in v.message()
    analysis = tmp_path / "run" / "analysis"
    saved = json.loads((analysis / "verdict.json").read_text())
    assert saved["verdict"] == "fail" and {c["promise"] for c in saved["checks"]} == {*PROMISES, "evidence"}
    # the judge leaves the reconciliation's summary.json as it was written
    assert json.loads((analysis / "summary.json").read_text()) == lost
    assert judged_summary(tmp_path / "run")["verdict"] == "fail"
    tolerated = {**lost, "policy": {**lost["policy"], "max_lost": 2}}  # the limit is the policy's
    assert judge(_run_dir(tmp_path / "tolerated", tolerated)).verdict == "pass"
    again = judge(tmp_path / "run")  # re-judging from disk gives the same verdict
    assert (again.verdict, again.broken) == (v.verdict, v.broken)


def test_nothing_to_judge_is_an_error(tmp_path: Path):
    bare = _run_dir(tmp_path, SUMMARY, logs=False)
    (bare / "run.json").write_text("{}")  # not a harness run: nobody says agents ran
    with pytest.raises(VerdictError, match="message logs"):
        judge(bare)
    nothing = {**SUMMARY, "totals": {"attempted": 0, "acknowledged": 0}}
    ran = _run_dir(tmp_path / "ran", nothing, logs=False)  # agents ran and logged nothing: a fail
    assert judge(ran).verdict == "fail"
    with pytest.raises(VerdictError, match="summary"):
        judge(_run_dir(tmp_path / "x", None))


def test_failure_message_says_whose_fault_the_anomalies_are(tmp_path: Path):
    counts = {"agent": 0, "broker": 1, "fault": 0, "unknown": 0}
    broker_only = Verdict("fail", [], ["at_least_once"], tmp_path, broken=["at_least_once"],
                          blame={"lost": counts, "duplicated": {**counts, "broker": 2}})  # fmt: skip
    msg = broker_only.message("stop-master")
    assert "blame: lost broker=1; duplicated broker=2 (none on the agent: `--gate agent`" in msg
    mixed = Verdict("fail", [], [], tmp_path, blame={"lost": {**counts, "agent": 3, "unknown": 1}})
    assert mixed.blame_line() == "lost agent=3 broker=1 unknown=1"  # no hint: the agent is blamed
    assert Verdict("pass", [], [], tmp_path, blame={"lost": dict.fromkeys(counts, 0)}).blame_line() == ""


def test_allowed_duplicates_apart_from_broken_promises(tmp_path: Path):
    """QoS 1 redeliveries are what at-least-once allows: never a blame, their own line."""
    none = dict.fromkeys(("agent", "broker", "fault", "unknown", "allowed"), 0)
    contract = {
        "allowed": {"lost": 0, "missed": 0, "duplicated": 3},
        "breaks": {"lost": 0, "missed": 0, "duplicated": 1},
    }
    v = Verdict(
        "fail", [], [], tmp_path, blame={"duplicated": {**none, "allowed": 3, "agent": 1}}, contract=contract
    )
    assert v.blame_line() == "duplicated agent=1"
    msg = v.message()
    assert "allowed by the contract (no promise broken): duplicated=3" in msg, msg
    only_allowed = Verdict("pass", [], [], tmp_path, blame={"duplicated": {**none, "allowed": 2}})
    assert only_allowed.blame_line() == ""
