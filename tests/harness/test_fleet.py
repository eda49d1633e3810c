"""The fleet workload's shape and the storm's arithmetic (no brokers: the figures themselves)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from harness.agents.fleet import FleetShape, fleet_factory, is_member
from harness.verdict.checks.fleetview import _peak
from spark_analysis.percentile import nearest_rank as percentile


class _Env:
    """What fleet_factory reads of a running environment: the group's client URLs."""

    def mb_urls(self, connector: str = "mqtt", group: str | None = None) -> list[str]:
        return ["127.0.0.1:1", "127.0.0.1:2"]


def test_fleet_is_fan_out_and_fan_in_in_stages() -> None:
    specs = fleet_factory(["pair"], FleetShape(3, instance_topics=True))(_Env())
    by = {s.name: s for s in specs}
    members = [s for s in specs if is_member(s.name)]
    assert [s.name for s in members] == ["fleet-pair-001", "fleet-pair-002", "fleet-pair-003"]
    assert by["ctl-sub-pair"].stage == 0 and all(s.stage == 1 for s in members)
    assert not by["ctl-pub-pair"].workload["subscriptions"]  # starts once every subscription exists
    topics: Any = [p["topic"] for p in by["ctl-pub-pair"].workload["publications"]]
    assert topics[0] == "topology/pair/TopologyEvent" and len(topics) == 4  # + 3 instance topics
    for m in members:
        subs = [s["topic"] for s in m.workload["subscriptions"]]
        assert subs[0] == "topology/pair/#" and subs[1].startswith("instance/notifier/pair/")
        assert m.workload["publications"][0]["topic"].startswith("instance/status/pair/")


def test_storm_peak_is_the_busiest_window() -> None:
    c = Counter({10: 5, 11: 5, 25: 30, 26: 1, 40: 2})
    assert _peak(c, 10) == (31.0, 2.5)  # buckets 25..34 of 0.1 s
    assert _peak(c, 20) == (41.0, 1.0)  # 10..29 holds both bursts
    assert _peak(Counter(), 10) == (0.0, 0.0)


def test_percentile_nearest_rank() -> None:
    xs = [float(x) for x in range(1, 101)]
    assert (percentile(xs, 50), percentile(xs, 95), percentile(xs, 100)) == (50.0, 95.0, 100.0)


def test_a_large_fleet_starts_in_waves() -> None:
    """1,000 members at once overflowed the proxy's and the broker's pending connects: waves of
    LAUNCH_WAVE, in member order, each after the previous wave's subscriptions."""
    from harness.agents.fleet import LAUNCH_WAVE

    specs = fleet_factory(["pair"], FleetShape(2 * LAUNCH_WAVE + 1))(_Env())
    stages = [s.stage for s in specs if is_member(s.name)]
    assert stages == [1] * LAUNCH_WAVE + [2] * LAUNCH_WAVE + [3]


def test_a_large_reference_fleet_paces_its_retries_and_pings() -> None:
    """The reference agent's 1 s retry cap and 2 s keepalive at 1,000 members asked a new master
    for 700 CONNECTs and 1,000 PINGREQs a second: none came back (issue 44). Small fleets keep the
    agent's defaults; an agent team's own agent gets no pacing (its own is under test)."""
    small = {s.name: s.conf for s in fleet_factory(["pair"], FleetShape(20))(_Env())}
    assert small["fleet-pair-001"]["mb.backoff.cap"] == "1" and small["fleet-pair-001"]["mb.keepalive"] == "2"
    big = {s.name: s.conf for s in fleet_factory(["pair"], FleetShape(1000))(_Env())}
    assert big["fleet-pair-1000"]["mb.backoff.cap"] == "10.7"  # 2,000 roles / (0.75 x 250/s)
    assert big["fleet-pair-1000"]["mb.keepalive"] == "10"  # 2,000 links / 200 pings/s
    assert big["ctl-pub-pair"]["mb.keepalive"] == "10" and "mb.backoff.cap" not in big["ctl-pub-pair"]
    own = fleet_factory(["pair"], FleetShape(1000), command="my-agent {conf}")(_Env())
    assert not any("mb.keepalive" in s.conf or "mb.backoff.cap" in s.conf for s in own)
