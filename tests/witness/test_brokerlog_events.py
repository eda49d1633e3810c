# ruff: noqa: E501  (real broker.log lines, kept whole)
"""Unit tests of the broker witness: broker.log signatures (on lines ActiveMQ 5.17.2 printed in
this harness's runs), the events file contract and `consumers_at`."""

from __future__ import annotations

import json
import time
from pathlib import Path

from harness.witness import events as ev
from harness.witness.brokerlog import parse_lines
from harness.witness.collect import collect
from harness.witness.events import consumers_at, has_consumer, read_events, topic_destination, write_events

# A slave of a pair: waits for the lock, takes it after the master's kill -9, starts serving.
SLAVE_LOG = """\
2026-11-24 12:53:33,559 | INFO  | Using Persistence Adapter: KahaDBPersistenceAdapter[/r/brokers/pair-store/kahadb] | org.apache.activemq.broker.BrokerService | main
2026-11-24 12:53:33,563 | INFO  | Database /r/brokers/pair-store/kahadb/lock is locked by another server. This broker is now in slave mode waiting a lock to be acquired | org.apache.activemq.store.SharedFileLocker | main
2026-11-24 12:53:42,613 | INFO  | KahaDB is version 7 | org.apache.activemq.store.kahadb.MessageDatabase | main
2026-11-24 12:53:42,790 | INFO  | Apache ActiveMQ 5.17.2 (pair-2, ID:vm-37861-1795524822655-0:1) is starting | org.apache.activemq.broker.BrokerService | main
2026-11-24 12:53:42,817 | INFO  | Apache ActiveMQ 5.17.2 (pair-2, ID:vm-37861-1795524822655-0:1) started | org.apache.activemq.broker.BrokerService | main
"""
# A master with a bridge to the other pair, MQTT link stealing, then the far master's kill.
BRIDGE_LOG = """\
2026-11-24 12:54:39,573 | INFO  | Network connection between vm://a-1#0 and tcp://127.0.0.1:22137 (b-1) has been established. | org.apache.activemq.network.DemandForwardingBridgeSupport | triggerStartAsyncNetworkBridgeCreation: remoteBroker=unconnected, localBroker= vm://a-1#0
2026-11-24 12:54:50,391 | WARN  | Stealing link for clientId thief From Connection Transport Connection to: tcp://127.0.0.1:45948 | org.apache.activemq.broker.region.RegionBroker | ActiveMQ Transport: tcp:///127.0.0.1:59604@22109
2026-11-24 12:54:52,424 | WARN  | Transport (tcp://127.0.0.1:22137) failed, not attempting to automatically reconnect | org.apache.activemq.transport.failover.FailoverTransport | ActiveMQ Transport: tcp:///127.0.0.1:22137@53000
java.io.EOFException
\tat org.apache.activemq.openwire.OpenWireFormat.unmarshal(OpenWireFormat.java:280)
2026-11-24 12:54:52,427 | WARN  | Network connection between vm://a-1#0 and unconnected shutdown due to a remote error: java.io.EOFException | org.apache.activemq.network.DemandForwardingBridgeSupport | ActiveMQ Transport: tcp:///127.0.0.1:22137@53000
2026-11-24 12:54:52,434 | INFO  | a-1 bridge to b-1 stopped | org.apache.activemq.network.DemandForwardingBridgeSupport | ActiveMQ BrokerService[a-1] Task-3
2026-11-24 12:54:53,439 | ERROR | Failed to connect to [tcp://127.0.0.1:22137, tcp://127.0.0.1:22138] after: 1 attempt(s) | org.apache.activemq.transport.failover.FailoverTransport | ActiveMQ Task-1
2026-11-24 12:54:55,457 | INFO  | Network connection between vm://a-1#4 and tcp://127.0.0.1:22138 (b-2) has been established. | org.apache.activemq.network.DemandForwardingBridgeSupport | triggerStartAsyncNetworkBridgeCreation: remoteBroker=unconnected, localBroker= vm://a-1#4
"""


def _epoch(text: str) -> float:
    date, ms = text.split(",")
    return time.mktime(time.strptime(date, "%Y-%m-%d %H:%M:%S")) + int(ms) / 1000


def test_slave_log_gives_waiting_then_acquired_then_started():
    recs = list(parse_lines(SLAVE_LOG.splitlines(), "pair-2"))
    assert [r["event"] for r in recs] == [ev.LOCK_WAITING, ev.LOCK_ACQUIRED, ev.BROKER_STARTED]
    waiting, acquired, started = recs
    assert waiting["ts"] == _epoch("2026-11-24 12:53:33,563")
    assert acquired["ts"] == _epoch("2026-11-24 12:53:42,613")  # first line after the wait
    assert acquired["waited_since"] == waiting["ts"]
    assert started["name"] == "pair-2" and started["ts"] == _epoch("2026-11-24 12:53:42,817")
    assert all(r["broker"] == "pair-2" and r["source"] == "log" and r["line"] for r in recs)


def test_master_without_wait_acquires_right_after_the_adapter():
    lines = SLAVE_LOG.splitlines()
    master = [lines[0], lines[3], lines[4]]  # no slave-mode line
    recs = list(parse_lines(master, "pair-1"))
    assert [r["event"] for r in recs] == [ev.LOCK_ACQUIRED, ev.BROKER_STARTED]
    assert "waited_since" not in recs[0]


def test_bridge_link_stealing_and_transport_signatures():
    recs = list(parse_lines(BRIDGE_LOG.splitlines(), "a-1"))
    assert [r["event"] for r in recs] == [
        ev.BRIDGE_ESTABLISHED,
        ev.LINK_STOLEN,
        ev.TRANSPORT_ERROR,
        ev.BRIDGE_FAILED,
        ev.BRIDGE_STOPPED,
        ev.BRIDGE_FAILED,
        ev.BRIDGE_ESTABLISHED,
    ]
    assert recs[0]["remote_broker"] == "b-1" and recs[-1]["remote_broker"] == "b-2"
    assert recs[1]["client_id"] == "thief" and "45948" in recs[1]["victim"]
    assert recs[2]["remote"] == "tcp://127.0.0.1:22137"
    assert recs[3]["error"] == "java.io.EOFException"
    assert recs[4]["remote_broker"] == "b-1"
    assert recs[5]["attempts"] == "1"


def test_unknown_and_torn_lines_are_skipped():
    assert list(parse_lines(["garbage", "2026-11-24 12:54", "\tat x.y(Z.java:1)"], "b")) == []


def _rec(ts, event, broker="b1", **kw):
    return {"ts": ts, "event": event, "broker": broker, "source": "advisory", **kw}


EVENTS = [
    _rec(0.0, ev.GAP_START, reason="observer starting"),
    _rec(1.0, ev.GAP_END),
    _rec(2.0, ev.CONSUMER_ADDED, client_id="c1", destination="topology.>", consumer_id="k1"),
    _rec(3.0, ev.CONSUMER_ADDED, client_id="c2", destination="a.b", consumer_id="k2"),
    _rec(4.0, ev.CONSUMER_REMOVED, client_id="c1", destination="topology.>", consumer_id="k1"),
    _rec(5.0, ev.GAP_START, reason="connection lost"),
    _rec(7.0, ev.GAP_END),
    _rec(7.1, ev.CONSUMER_ADDED, client_id="c2", destination="a.b", consumer_id="k2", snapshot=True),
    _rec(2.5, ev.CONSUMER_ADDED, broker="b2", client_id="c1", destination="topology.>", consumer_id="k9"),
]


def test_consumers_at_replays_adds_and_removes():
    assert consumers_at(EVENTS, "b1", 2.5).keys() == {"k1"}
    assert consumers_at(EVENTS, "b1", 3.0).keys() == {"k1", "k2"}  # at ts counts
    assert consumers_at(EVENTS, "b1", 4.5).keys() == {"k2"}
    assert consumers_at(EVENTS, "b1", 7.5).keys() == {"k2"}  # the snapshot after the gap


def test_consumers_at_is_unknown_in_gaps_and_before_the_first_window():
    assert consumers_at(EVENTS, "b1", 0.5) is None
    assert consumers_at(EVENTS, "b1", 6.0) is None
    assert consumers_at(EVENTS, "nobody", 3.0) is None
    assert consumers_at(list(reversed(EVENTS)), "b1", 3.0).keys() == {"k1", "k2"}  # order-free


def test_has_consumer_by_client_and_destination():
    assert has_consumer(EVENTS, "b1", 2.5, "c1", topic_destination("topology/#")) is True
    assert has_consumer(EVENTS, "b1", 4.5, "c1", "topology.>") is False
    assert has_consumer(EVENTS, "b1", 6.0, "c1", "topology.>") is None
    assert has_consumer(EVENTS, "b2", 2.4, "c1", "topology.>") is None  # b2 never seen: unknown


def test_topic_destination_swaps_separators_and_wildcards():
    assert topic_destination("instance/status/+") == "instance.status.*"
    assert topic_destination("a.b/#") == "a/b.>"


def test_events_file_sorted_and_tolerant(tmp_path: Path):
    path = tmp_path / "events.jsonl"
    write_events(path, [EVENTS[3], EVENTS[0], EVENTS[1]])
    with path.open("a") as f:
        f.write('{"ts": "x", "event": "consumer_added", "broker": "b1"}\n{"ts": 9.0, "ev')  # bad + torn
    bad: list[str] = []
    got = list(read_events(path, bad))
    assert [r["ts"] for r in got] == [0.0, 1.0, 3.0]
    assert len(bad) == 2
    assert list(read_events(tmp_path / "missing.jsonl")) == []


def test_collect_merges_observer_records_and_logs(tmp_path: Path):
    brokers = tmp_path / "brokers"
    (brokers / "pair-2").mkdir(parents=True)
    (brokers / "pair-2" / "broker.log").write_text(SLAVE_LOG)
    late = _epoch("2026-11-24 12:53:42,900")
    with (brokers / "observer.jsonl").open("w") as f:
        f.write(json.dumps(_rec(late, ev.GAP_END, broker="pair-2")) + "\n")
        f.write(json.dumps(_rec(0.0, ev.GAP_START, broker="pair-2")) + "\n")
    out = collect(tmp_path)
    got = [r["event"] for r in read_events(out)]
    assert got == [ev.GAP_START, ev.LOCK_WAITING, ev.LOCK_ACQUIRED, ev.BROKER_STARTED, ev.GAP_END]


def test_witness_connector_is_harness_only(tmp_path: Path):
    from harness.deploy.brokerconf import render_broker
    from harness.deploy.plan import make_plan, release_ports
    from harness.topology import builtin_topology

    plan = make_plan(builtin_topology("pair"), tmp_path)
    try:
        wports = {b.witness_port for b in plan.brokers.values()}
        assert None not in wports and len(wports) == len(plan.brokers)
        used = {p for b in plan.brokers.values() for p in b.ports.values()}
        used |= {lk.listen_port for lk in plan.links} | {lk.upstream_port for lk in plan.links}
        assert not wports & used  # never a link, never an agent's address
        urls = [u for c in ("mqtt", "stomp", "openwire") for u in plan.client_urls(c)]
        assert not any(u.endswith(f":{p}") for u in urls for p in wports)
        b = plan.members("pair")[0]
        xml = render_broker(plan, b)["activemq.xml"]
        assert f'name="bfh-witness" uri="tcp://127.0.0.1:{b.witness_port}"' in xml
    finally:
        release_ports(sorted(used | wports))
