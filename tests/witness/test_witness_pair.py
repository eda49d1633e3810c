"""The broker witness on a real pair: kill -9 the master, and events.jsonl tells the story from
the brokers' side (consumer on the first master, a gap for the killed member, the lock taken by
the slave, the consumer on the new master)."""

from __future__ import annotations

import time
from pathlib import Path

import paho.mqtt.client as mqtt

from harness.run.env import Environment
from harness.topology import builtin_topology
from harness.verdict.witness import BrokerView
from harness.witness import events as ev
from harness.witness.events import has_consumer, read_events

CLIENT = "witness-test-sub"


def _subscribe(url: str) -> mqtt.Client:
    host, _, port = url.rpartition(":")
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=CLIENT, clean_session=False)
    c.connect(host, int(port))
    c.loop_start()
    c.subscribe("topology/#", 1)
    return c


def _wait_for(path: Path, pred, timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(pred(r) for r in read_events(path)):
            return
        time.sleep(0.2)


def _watched_master(env: Environment, run: Path) -> tuple[str, dict[str, str], Path]:
    """The pair's master, each member's MQTT URL and the observer's file, once it sees the master."""
    master = env.backend.master("pair")
    assert master
    urls = dict(zip([b.name for b in env.plan.members("pair")], env.mb_urls("mqtt", "pair"), strict=True))
    observed = run / "brokers" / "observer.jsonl"
    _wait_for(observed, lambda r: r["event"] == ev.GAP_END and r["broker"] == master)
    return master, urls, observed


def test_kill_master_seen_by_the_witness(tmp_path: Path):
    run = tmp_path / "run"
    with Environment.up(builtin_topology("pair"), run, witness=True) as env:
        first, urls, observed = _watched_master(env, run)
        c = _subscribe(urls[first])
        _wait_for(observed, lambda r: r["event"] == ev.CONSUMER_ADDED and r.get("client_id") == CLIENT)
        t_sub = time.time()
        c.loop_stop()
        env.faults.kill(first)  # waits for the takeover
        second = env.backend.master("pair")
        assert second and second != first
        c2 = _subscribe(urls[second])
        _wait_for(observed, lambda r: r["event"] == ev.CONSUMER_ADDED and r["broker"] == second)
        t_new = time.time()
        c2.disconnect()
        c2.loop_stop()

    recs = list(read_events(run / "brokers" / "events.jsonl"))
    assert [r["ts"] for r in recs] == sorted(r["ts"] for r in recs)

    def first_ts(event: str, broker: str, **kw: object) -> float:
        hits = [
            r["ts"]
            for r in recs
            if r["event"] == event and r["broker"] == broker and all(r.get(k) == v for k, v in kw.items())
        ]
        assert hits, f"no {event} {kw} on {broker}: {[(r['event'], r['broker']) for r in recs]}"
        return hits[0]

    on_first = first_ts(ev.CONSUMER_ADDED, first, client_id=CLIENT, destination="topology.>")
    gap = min(
        r["ts"] for r in recs if r["event"] == ev.GAP_START and r["broker"] == first and r["ts"] > on_first
    )
    acquired = first_ts(ev.LOCK_ACQUIRED, second)
    waited = [r for r in recs if r["event"] == ev.LOCK_WAITING and r["broker"] == second]
    on_second = first_ts(ev.CONSUMER_ADDED, second, client_id=CLIENT, destination="topology.>")
    assert waited and waited[0]["ts"] < on_first  # the slave waited from the start
    assert on_first < gap < acquired < on_second
    # the killed member stays in a gap to the end; the question later checkers ask
    assert has_consumer(recs, first, t_sub, CLIENT, "topology.>") is True
    assert has_consumer(recs, first, t_new, CLIENT, "topology.>") is None
    assert has_consumer(recs, second, t_new, CLIENT, "topology.>") is True
    assert has_consumer(recs, second, t_sub, CLIENT, "topology.>") is None  # slave: not served
    # the observer never subscribes to the agents' topics, nor shows itself
    assert not any(str(r.get("client_id", "")).startswith("bfh-witness") for r in recs)


def test_virtual_topic_subscription_is_seen_as_its_topic(tmp_path: Path):
    """pair-fleet's MQTT connector makes a durable subscription a virtual topic's queue
    (`Consumer.<client>:AT_LEAST_ONCE.VirtualTopic.topology.>`): the observer sees that consumer,
    the witness answers for the topic it serves, and a publish to the topic still reaches it."""
    run = tmp_path / "run"
    got: list[bytes] = []
    with Environment.up(builtin_topology("pair-fleet"), run, witness=True) as env:
        master, urls, observed = _watched_master(env, run)
        c = _subscribe(urls[master])
        c.on_message = lambda _c, _u, m: got.append(m.payload)
        _wait_for(observed, lambda r: r["event"] == ev.CONSUMER_ADDED and r.get("client_id") == CLIENT)
        t_sub = time.time()
        host, _, port = urls[master].rpartition(":")
        pub = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="witness-test-pub")
        pub.connect(host, int(port))
        pub.loop_start()
        pub.publish("topology/pair/TopologyEvent", b"e1", qos=1).wait_for_publish(10)
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.1)
        for cl in (pub, c):
            cl.disconnect()
            cl.loop_stop()

    assert got == [b"e1"]
    recs = list(read_events(run / "brokers" / "events.jsonl"))
    added = [r for r in recs if r["event"] == ev.CONSUMER_ADDED and r.get("client_id") == CLIENT]
    assert [r["destination"] for r in added] == [
        f"queue://Consumer.{CLIENT}:AT_LEAST_ONCE.VirtualTopic.topology.>"
    ]
    assert ev.served_topic(added[0]["destination"]) == "topology.>"
    assert has_consumer(recs, master, t_sub, CLIENT, "topology.>") is True
    view = BrokerView(recs, {})
    assert view.has_consumer(master, t_sub, {CLIENT}, "topology.>") is True
    assert view.has_consumer(master, t_sub, {CLIENT}, "instance.>") is False
