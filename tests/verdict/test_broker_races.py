"""Blame's rules for a missing delivery, the known broker races it names, and the gate an agent
command gets (issue 42 item 5): pure logic on a RunView built in memory (no brokers)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.pytest_plugin.conformance.test_catalog import warn_broker_races
from harness.verdict import RunView
from harness.verdict import blame as blaming
from harness.verdict.checks import Check
from harness.verdict.checks.witness import lives
from harness.verdict.judge import Verdict, _agent_only
from harness.verdict.races import KNOWN, UNNAMED, BrokerRace, default_gate, findings, race_of, run_gate

A, B = "127.0.0.1:1001", "127.0.0.1:1002"
RUN = {
    "links": [
        {"name": "pair-1-mqtt", "listen": A, "kind": "client", "broker": "pair-1"},
        {"name": "pair-2-mqtt", "listen": B, "kind": "client", "broker": "pair-2"},
    ],
    "brokers": {"pair-1": {"group": "pair"}, "pair-2": {"group": "pair"}},
    "agents": [
        {"name": "a", "conf": {"mb.urls": f"{A},{B}"}, "workload": {"subscriptions": [{"topic": "t/#"}]}}
    ],
    "observations": {"masters": {"pair": "pair-1"}, "agents_launched_ts": {"a": 0.0}, "agent_exit": {"a": 0}},
}


def r(ts: float, event: str, **kw: Any) -> dict[str, Any]:
    return {"ts": ts, "agent": "a", "event": event, **kw}


def _blame(records: list[dict[str, Any]], t: float) -> tuple[str, list[str]]:
    v = RunView(Path("/nonexistent"), {"totals": {}}, RUN, {"a": records}, [])
    row = {"msg_id": "m1", "subscriber": "a", "subscription": "t/#", "status": "lost", "durable": True}
    subs = [s for s in lives(v) if s.topic == "t/#"]
    return blaming._missing(v, row, t, subs, False, {})


def test_first_subscription_after_the_ack_is_the_agents():
    """No session of the subscription existed when the message was acknowledged: nothing held it."""
    late = [
        r(20.0, "connected", role="subscriber:t/#", broker=B),
        r(20.1, "subscribed", topic="t/#", broker=B),
    ]
    blame, lines = _blame(late, t=10.0)
    assert blame == "agent", lines
    assert "first subscribed at 20.100" in lines[0]


def test_a_durable_session_away_then_back_is_the_brokers():
    """Subscribed durably before, away at the ack, back durably after: the broker kept nothing."""
    recs = [
        r(1.0, "connected", role="subscriber:t/#", broker=A),
        r(1.1, "subscribed", topic="t/#", broker=A, durable=True),
        r(5.0, "disconnected", role="subscriber:t/#", broker=A, reason="connection_lost"),
        r(12.0, "connected", role="subscriber:t/#", broker=B),
        r(12.1, "subscribed", topic="t/#", broker=B, durable=True),
    ]
    blame, lines = _blame(recs, t=10.0)
    assert blame == "broker", lines
    assert race_of(lines).name == "durable-backlog"
    never = recs[:3]
    assert _blame(never, t=10.0)[0] == "agent"  # away at the ack and never back
    clean = [*recs[:4], r(12.1, "subscribed", topic="t/#", broker=B, durable=False)]
    assert _blame(clean, t=10.0)[0] == "agent"  # back without a durable session


def test_a_session_the_broker_restored_counts_as_resubscribed():
    """C-11: a subscriber back on its restored durable session (no `subscribed` logged; in a run
    without the broker witness: reconnected and receiving) lost what the broker should have kept."""
    recs = [
        r(1.0, "connected", role="subscriber:t/#", broker=A),
        r(1.1, "subscribed", topic="t/#", broker=A, durable=True),
        r(5.0, "disconnected", role="subscriber:t/#", broker=A, reason="connection_lost"),
        r(12.0, "connected", role="subscriber:t/#", broker=B),
        r(13.0, "received", subscription="t/#", msg_id="m2"),
    ]
    blame, lines = _blame(recs, t=10.0)  # away at the ack, restored after
    assert blame == "broker" and "restored session" in lines[0], lines
    assert race_of(lines).name == "durable-backlog"
    assert _blame(recs, t=12.5)[0] == "broker"  # acknowledged while the restored session stood
    assert _blame(recs[:4], t=10.0)[0] == "agent"  # reconnected, never receiving: not back


def test_race_named_from_evidence_in_order():
    assert race_of(["bridge race across the network: x", "Stealing link y"]).name == "bridge-demand"
    assert race_of(
        ["a consumer existed on pair-2 (granted 1.0)", "WARN Stealing link for clientId c"]
    ).name == ("link-stealing")
    assert (
        race_of(["a consumer existed on pair-2 (granted 1.0); acknowledged ..."]).name
        == "durable-reactivation"
    )
    assert race_of(["something else"]) is UNNAMED
    # a consumer there and no bridge event near: no named race (e.g. a filter that forbids the path)
    filtered = [
        "a consumer existed on east-1 (granted 1.0)",
        "bridge race across the network: no bridge event near",
    ]
    assert race_of(filtered) is UNNAMED
    assert all(r.rate and r.doc for r in KNOWN)  # every known race says how often it was measured


def _row(blame: str, status: str = "lost", ev: str = "a consumer existed on pair-2") -> blaming.Blamed:
    return blaming.Blamed("m", "agent-1", "t/#", status, blame, 1.0, [ev])


def test_findings_group_the_brokers_losses_only():
    rows = [_row("broker"), _row("broker"), _row("agent"), _row("broker", "duplicated"), _row("unknown")]
    out = findings(rows)
    assert [(f["race"], f["count"]) for f in out] == [("durable-reactivation", 2)]
    assert out[0]["rate"] and out[0]["evidence"][0]["agent"] == "agent-1"


def test_agent_gate_fails_the_agents_losses_and_leaves_unknown_inconclusive():
    failed = Check("at_least_once", "fail", 3)
    assert _agent_only(failed, [_row("broker"), _row("broker")]).status == "pass"
    assert _agent_only(failed, [_row("broker"), _row("agent")]).status == "fail"
    unsure = _agent_only(failed, [_row("broker"), _row("unknown", ev="observer gap on pair-2")])
    assert unsure.status == "unknown" and "inconclusive" in unsure.detail


def test_message_lists_broker_races_as_warnings_under_the_agent_gate(tmp_path: Path):
    f = findings([_row("broker")])
    agent = Verdict("pass", [], [], tmp_path, gate="agent", findings=f).message()
    assert "WARNING (broker race, not gated) durable-reactivation: 1 lost" in agent
    assert "measured: stop-master" in agent
    strict = Verdict("fail", [], [], tmp_path, gate="all", findings=f).message()
    assert "  broker race durable-reactivation" in strict


@pytest.mark.parametrize(
    ("gate", "agent_cmd", "expected"),
    [
        (None, None, "all"),
        (None, "my-agent {config}", "agent"),
        ("all", "my-agent", "all"),
        ("agent", None, "agent"),
    ],
)
def test_default_gate(gate, agent_cmd, expected):
    assert default_gate(gate, agent_cmd) == expected


@pytest.mark.parametrize(("gate", "expected"), [(None, "agent"), ("all", "all"), ("agent", "agent")])
def test_run_gate_is_agent_unless_asked(gate, expected):
    assert run_gate(gate) == expected


def test_a_passing_agent_gate_warns_each_broker_race(tmp_path: Path):
    v = Verdict("pass", [], [], tmp_path, gate="agent", findings=findings([_row("broker"), _row("broker")]))
    with pytest.warns(
        BrokerRace, match=r"masterslave: durable-reactivation: 2 lost by the broker .*measured: "
    ):
        warn_broker_races(v, "masterslave")


def test_a_message_the_new_master_took_before_its_bridge_demand():
    """Across a network: the publisher's new master had no network consumer for the destination
    when it acknowledged the message (examples/ops kill:b, issue 42)."""
    v = RunView(Path("/nonexistent"), {"totals": {}}, RUN, {"a": []}, [])
    v.__dict__["broker_events"] = [
        {"ts": 9.9, "event": "observer_gap_start", "broker": "b-2"},
        {"ts": 10.0, "event": "broker_started", "broker": "b-2", "source": "log"},
        {"ts": 10.05, "event": "observer_gap_end", "broker": "b-2"},
        {"ts": 10.3, "event": "consumer_added", "broker": "b-2", "destination": "t.>", "network": True},
        {"ts": 10.3, "event": "consumer_added", "broker": "b-2", "destination": "u.>", "network": False},
    ]
    late = blaming._demand_line(v, "b-2", 10.2, "t.>")
    assert late == ["no bridge demand for t.> on b-2 at 10.200: its network consumer came 0.100 s after"]
    assert race_of(["a consumer existed on a-1", "bridge race across the network: x", *late]).name == (
        "bridge-demand"
    )
    there = blaming._demand_line(v, "b-2", 10.4, "t.>")
    assert there == ["the bridge's demand for t.> existed on b-2 at 10.400"]
    assert race_of(["a consumer existed on a-1", "bridge race across the network: x", *there]) is UNNAMED
    never = blaming._demand_line(v, "b-2", 10.4, "u.>")
    assert never == ["no bridge demand for u.> on b-2 at 10.400"]  # e.g. a filter: no race named
    assert race_of(["a consumer existed on a-1", "bridge race across the network: x", *never]) is UNNAMED
    assert blaming._demand_line(v, "b-2", 10.02, "t.>") == []  # the observer's gap: nothing said
