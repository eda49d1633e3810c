"""Master/slave pair scenarios: the agent's `mb.urls` lists both members, each behind the fault proxy.

Every test runs real brokers, the fault proxy, the agent (the reference agent unless --agent-cmd)
and the Spark reconciliation, and asserts on summary.json; each docstring states its promise.
"""

from __future__ import annotations

import pytest

from agent_under_test.defects import command as defect_command
from harness.agents import agent_factory
from harness.plan import free_ports
from harness.runner import RunError
from harness.schedule import Schedule, Step
from harness.topology import builtin_topology
from scenarios.support import (
    agent_records,
    assert_no_loss,
    explain,
    fault_end_ts,
    fault_records,
    first_attempts,
    received_after,
)

pytestmark = [pytest.mark.masterslave, pytest.mark.broker, pytest.mark.spark]
PAIR = builtin_topology("pair")


def _schedule(*steps: Step, settle_s: float = 8.0) -> Schedule:
    return Schedule(seed=1, steps=list(steps), settle_s=settle_s)


def test_kill_master_no_loss(run_scenario):
    """Promise: kill -9 of the master mid-traffic loses no acknowledged QoS 1 message at any durable
    subscription, delivers nothing unexpected, and the agent receives again after the slave takes over."""
    r = run_scenario(
        PAIR, _schedule(Step(at=5, fault="kill", target="master:pair")), "kill-master", group="pair"
    )
    assert_no_loss(r, "kill -9 of the master")
    assert received_after(r.run_dir, "kill"), explain(
        r.summary, r.run_dir, "nothing received after the takeover"
    )


def test_negative_control_qos0_clean_session_sees_loss(run_scenario):
    """Negative control of the checker: the same kill with QoS 0 and clean sessions, published the
    way the real Stratos agent does (a publisher that is back before the subscribers), must show
    deliveries that never arrived (the checker can see loss)."""
    qos0 = defect_command("qos0_clean_session")
    r = run_scenario(
        PAIR,
        _schedule(Step(at=5, fault="kill", target="master:pair")),
        "qos0-control",
        own_agent=False,
        group="pair",
        qos=0,
        durable=False,
        command=qos0,
    )
    d = r.summary["deliveries"]
    assert d.get("lost", 0) + d.get("missed", 0) > 0, explain(
        r.summary, r.run_dir, "QoS 0 across a master kill lost nothing: the checker is blind"
    )


def test_graceful_stop_master_no_loss(run_scenario):
    """Promise: a graceful stop of the master loses nothing and the agent follows the slave."""
    r = run_scenario(
        PAIR, _schedule(Step(at=5, fault="stop", target="master:pair")), "stop-master", group="pair"
    )
    assert_no_loss(r, "graceful stop of the master")
    assert received_after(r.run_dir, "stop"), explain(
        r.summary, r.run_dir, "nothing received after the takeover"
    )


def test_flapping_masters_no_loss(run_scenario):
    """Promise: kill the master, let it come back as slave, kill the new master: the agent follows
    each takeover and loses nothing."""
    sched = _schedule(
        Step(at=3, fault="kill", target="master:pair", duration=5),
        Step(at=13, fault="kill", target="master:pair", duration=5),
    )
    r = run_scenario(PAIR, sched, "flapping", group="pair", count=200)
    assert_no_loss(r, "flapping masters")
    kills = [f for f in fault_records(r.run_dir) if f["event"] == "fault_end" and f["fault"] == "kill"]
    assert len({f["params"].get("new_master") for f in kills}) == 2, f"both members must have served: {kills}"


def test_paused_master_agent_keeps_retrying(run_scenario):
    """Promise: a master paused for 20 s keeps the lock (the slave cannot take over); the agent keeps
    retrying, drops nothing (timeout 900 s) and recovers without loss when the master resumes."""
    r = run_scenario(
        PAIR,
        _schedule(Step(at=4, fault="pause", target="master:pair", duration=20)),
        "paused-master",
        group="pair",
        count=150,
    )
    assert_no_loss(r, "master paused 20 s")
    assert r.summary["totals"]["dropped"] == 0, explain(
        r.summary, r.run_dir, "messages dropped during a pause"
    )
    assert received_after(r.run_dir, "pause"), explain(r.summary, r.run_dir, "nothing received after resume")


def test_both_down_shorter_than_publisher_timeout_no_drops(run_scenario):
    """Promise: with both members down for less than mb.publisher.timeout, every message is retried
    until a broker is back: no drops, no loss."""
    sched = _schedule(Step(at=4, fault="kill", target="members:pair", duration=8))
    r = run_scenario(PAIR, sched, "both-down-short", group="pair", timeout_s=40)
    assert_no_loss(r, "both members down shorter than the publisher timeout")
    assert r.summary["totals"]["dropped"] == 0, explain(
        r.summary, r.run_dir, "drops within the publisher timeout"
    )


def test_both_down_longer_than_publisher_timeout_drops_exactly(run_scenario):
    """Promise: with both members down longer than mb.publisher.timeout, exactly the messages whose
    outage outlasted the timeout are dropped (at first attempt + timeout), none is lost, and the
    agent recovers after the brokers return."""
    timeout = 4
    sched = _schedule(Step(at=4, fault="kill", target="members:pair", duration=14))
    r = run_scenario(PAIR, sched, "both-down-long", group="pair", timeout_s=timeout, count=320)
    assert_no_loss(r, "both members down longer than the publisher timeout", allow_drops=True)
    faults = fault_records(r.run_dir)
    down = min(f["ts"] for f in faults if f["fault"] == "kill" and f["event"] == "fault_start")
    up = min(f["ts"] for f in faults if f["fault"] == "start" and f["event"] == "fault_end")
    firsts = first_attempts(r.run_dir)
    drops = {x["msg_id"]: x for x in agent_records(r.run_dir, "dropped")}
    must = {m for m, t in firsts.items() if t >= down + 0.5 and t + timeout <= up - 0.5}
    must_not = {m for m, t in firsts.items() if t < down - 0.5 or t + timeout > up + 6}
    assert must, f"the outage produced no message that had to be dropped; run folder {r.run_dir}"
    assert must <= drops.keys(), explain(
        r.summary, r.run_dir, f"not dropped: {sorted(must - drops.keys())[:5]}"
    )
    assert not (drops.keys() & must_not), explain(
        r.summary, r.run_dir, f"dropped too early: {sorted(drops.keys() & must_not)[:5]}"
    )
    for m, rec in drops.items():
        assert rec["reason"] == "publisher_timeout"
        assert abs(rec["ts"] - firsts[m] - timeout) < 2.0, (
            f"{m} dropped {rec['ts'] - firsts[m]:.2f}s after first try"
        )
    assert r.summary["deliveries"]["dropped_expected"] > 0
    assert received_after(r.run_dir, "start"), explain(r.summary, r.run_dir, "agent did not recover")


def test_blackholed_master_link_detected_within_liveness_bound(run_scenario):
    """Promise: when the client links of a live master go silent (black hole), every connection to it
    is declared dead within the liveness bound (default ≤ 5 s; asserted ≤ 8 s), and after the heal
    the agent recovers without loss."""
    sched = _schedule(Step(at=4, fault="partition", target="master:pair", duration=12))
    r = run_scenario(PAIR, sched, "blackhole-master", group="pair")
    assert_no_loss(r, "black-holed master links")
    start = next(
        f for f in fault_records(r.run_dir) if f["fault"] == "partition" and f["event"] == "fault_start"
    )
    roles = {x["role"] for x in agent_records(r.run_dir, "connected") if x["ts"] < start["ts"]}
    detected = {}
    for x in agent_records(r.run_dir, "disconnected"):
        if x["ts"] >= start["ts"] and x["role"] not in detected:
            detected[x["role"]] = x["ts"] - start["ts"]
    assert roles and roles <= detected.keys(), (
        f"roles never noticed the black hole: {roles - detected.keys()}"
    )
    slow = {k: round(v, 2) for k, v in detected.items() if v > 8.0}
    assert not slow, f"black hole noticed too late (s): {slow}; run folder {r.run_dir}"


def test_degraded_links_no_loss(run_scenario):
    """Promise: latency with jitter, a bandwidth cap, sliced packets and TCP resets on the master's
    links lose no acknowledged message (duplicates from resends are allowed)."""
    m = "master:pair"
    sched = _schedule(
        Step(at=2, fault="latency", target=m, duration=5, params={"latency_ms": 300, "jitter_ms": 100}),
        Step(at=8, fault="bandwidth", target=m, duration=4, params={"rate_kbps": 8}),
        Step(
            at=13,
            fault="slicer",
            target=m,
            duration=4,
            params={"average_size": 16, "size_variation": 8, "delay_us": 200},
        ),
        Step(at=18, fault="reset_peer", target=m, duration=2, params={"timeout_ms": 200}),
    )
    r = run_scenario(PAIR, sched, "degraded", group="pair", count=220)
    assert_no_loss(r, "degraded links", allow_duplicates=True)


def test_first_available_ordering(run_scenario):
    """Promise: the agent connects to the first broker in mb.urls order that accepts, bounding every
    attempt: with a black-holed address (accepts TCP, never answers) and a dead one first and the
    slave listed before the master, it uses the master, then the slave after the master is killed."""
    seen: dict[str, list[str]] = {}

    def agents(env):
        black = f"127.0.0.1:{free_ports(1)[0]}"
        env.proxy.create_proxy("blackhole", black, env.plan.client_link("pair-1", "mqtt").upstream)
        env.proxy.black_hole("blackhole")
        dead = f"127.0.0.1:{free_ports(1)[0]}"

        def order(urls: list[str]) -> list[str]:
            seen["urls"] = urls
            return [black, dead, urls[1], urls[0]]

        return agent_factory(group="pair", url_order=order, command=run_scenario.agent_cmd)(env)

    try:
        r = run_scenario(
            PAIR, _schedule(Step(at=6, fault="kill", target="master:pair")), "ordering", agents=agents
        )
    except RunError as e:
        raise AssertionError(
            f"first-available ordering: the agent never got past the black-holed first URL "
            f"(connect attempts are not bounded by a connect timeout): {e}"
        ) from e
    master_url, slave_url = seen["urls"]
    kill = next(
        f["ts"] for f in fault_records(r.run_dir) if f["fault"] == "kill" and f["event"] == "fault_start"
    )
    conns = agent_records(r.run_dir, "connected")
    before = {c["broker"] for c in conns if c["ts"] < kill}
    after = {c["broker"] for c in conns if c["ts"] > kill + 0.5}
    assert before == {master_url}, f"before the kill connected to {before}, expected only {master_url}"
    assert after == {slave_url}, f"after the kill connected to {after}, expected only {slave_url}"
    # Every attempt is bounded: past the black hole and the dead port within a few connect timeouts.
    launched = (r.run_dir / "agents" / "agent-1" / "workload.json").stat().st_mtime
    first = min(c["ts"] for c in conns) - launched
    assert first < 10, (
        f"first connection {first:.1f}s after launch: the connect timeout does not bound attempts"
    )
    served = fault_end_ts(r.run_dir, "kill")
    back: dict[str, float] = {}
    for c in conns:
        if c["ts"] > kill:
            back[c["role"]] = min(back.get(c["role"], c["ts"] - served), c["ts"] - served)
    late = {k: round(v, 1) for k, v in back.items() if v > 10}
    assert not late, (
        f"roles reconnected late after the takeover (s): {late}: the connect timeout does not bound attempts"
    )
    assert_no_loss(r, "first-available ordering")


def test_one_connection_cut_others_keep_flowing(run_scenario):
    """Promise: each topic subscription has its own connection and fails over on its own: cutting
    one connection disturbs only the role that used it, one cut at a time."""
    sched = _schedule(Step(at=4, fault="sever", target="master:pair", params={"gap_s": 3}))
    r = run_scenario(PAIR, sched, "one-connection-cut", group="pair", count=200)
    assert_no_loss(r, "one connection cut at a time")
    cuts = [f for f in fault_records(r.run_dir) if f["fault"] == "sever" and f["event"] == "fault_start"]
    assert len(cuts) >= 3, f"expected a connection per subscription and the publisher, cut {len(cuts)}"
    disc = agent_records(r.run_dir, "disconnected")
    for c in cuts:
        hit = {d["role"] for d in disc if c["ts"] - 0.2 <= d["ts"] <= c["ts"] + 2.5}
        assert len(hit) <= 1, (
            f"one cut at {c['ts']:.2f} disturbed several roles {sorted(hit)}; run {r.run_dir}"
        )
    subs_hit = {d["role"] for d in disc if d["role"].startswith("subscriber:")}
    assert len(subs_hit) >= 2, f"each subscription should have been cut once, saw {subs_hit}"
