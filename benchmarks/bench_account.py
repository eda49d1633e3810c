"""The broker's account benchmark: what the account plugin (harness/account) costs a broker.

Run: `.venv/bin/python -m pytest benchmarks/bench_account.py -m benchmark -s -p no:xdist`

Two standalone ActiveMQ brokers side by side, one with the plugin and one without
(`BFH_ACCOUNT=0`), each through the same path the runs use (harness local backend). Per run: one
paho client publishes BENCH_MSGS QoS 1 messages while one durable QoS 1 subscriber receives them
(every hook fires: arrival, dispatch, ack); the rate is messages per second until the last one is
received. Runs alternate between the brokers, in a rotating order; the cost is 1 - the median of
the per-round ratios (target: <= 5 %). Knobs: BENCH_RUNS, BENCH_MSGS.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.benchmark, pytest.mark.timeout(1800)]

RUNS = int(os.environ.get("BENCH_RUNS", "7"))
MSGS = int(os.environ.get("BENCH_MSGS", "3000"))
PAYLOAD = 256
TOPO = "name: bench\ngroups:\n  - name: solo\n    kind: standalone\n    connectors: [mqtt, openwire]\n"


def _start(run_dir: Path, account: bool) -> tuple[object, int]:
    from harness.backends.local import LocalBackend
    from harness.deploy.plan import make_plan
    from harness.topology import loads_topology

    plan = make_plan(loads_topology(TOPO), run_dir)
    backend = LocalBackend(plan, run_dir)
    before = os.environ.get("BFH_ACCOUNT")
    os.environ["BFH_ACCOUNT"] = "1" if account else "0"
    try:
        backend.start()
    finally:
        if before is None:
            os.environ.pop("BFH_ACCOUNT", None)
        else:
            os.environ["BFH_ACCOUNT"] = before
    backend.wait_master("solo")
    return backend, plan.brokers["solo-1"].ports["mqtt"]


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, int]]:
    started = []
    try:
        ports = {}
        for name, account in (("with the account", True), ("without", False)):
            backend, port = _start(tmp_path_factory.mktemp("bench-account"), account)
            started.append(backend)
            ports[name] = port
        yield ports
    finally:
        for b in started:
            b.close()  # type: ignore[attr-defined]


def _once(port: int, n: int, tag: str) -> float:
    """Messages per second from the first publish to the n-th receipt of a durable subscriber."""
    import paho.mqtt.client as mqtt

    got = [0]
    done, subscribed = threading.Event(), threading.Event()

    def on_message(client: mqtt.Client, userdata: object, msg: mqtt.MQTTMessage) -> None:
        got[0] += 1
        if got[0] >= n:
            done.set()

    def client(cid: str, clean: bool) -> mqtt.Client:
        c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cid, clean_session=clean)
        c.max_inflight_messages_set(20)
        c.max_queued_messages_set(0)
        return c

    sub = client(f"bench-sub-{tag}", False)
    sub.on_message = on_message
    sub.on_subscribe = lambda *a: subscribed.set()
    sub.connect("127.0.0.1", port, keepalive=60)
    sub.loop_start()
    pub = client(f"bench-pub-{tag}", True)
    pub.connect("127.0.0.1", port, keepalive=60)
    pub.loop_start()
    try:
        sub.subscribe("bench/account", qos=1)
        assert subscribed.wait(20), "no SUBACK"
        payload = b'{"msg_id":"m","pad":"' + b"p" * PAYLOAD + b'"}'
        t0 = time.perf_counter()
        for _ in range(n):
            pub.publish("bench/account", payload, qos=1)
        assert done.wait(300), f"only {got[0]}/{n} received"
        return n / (time.perf_counter() - t0)
    finally:
        for c in (pub, sub):
            c.disconnect()
            c.loop_stop()


def test_account_costs_the_broker_little(brokers: dict[str, int]) -> None:
    for k, port in brokers.items():  # warm up each broker's JIT and store
        _once(port, min(MSGS, 1000), f"warm-{k[:4]}")
    keys = list(brokers)
    rates: dict[str, list[float]] = {k: [] for k in keys}
    ratios: list[float] = []
    for r in range(RUNS):
        got = {}
        for k in keys[r % 2 :] + keys[: r % 2]:
            got[k] = _once(brokers[k], MSGS, f"{r}-{k[:4]}")
            rates[k].append(got[k])
        ratios.append(got["with the account"] / got["without"])
    cost = 1 - statistics.median(ratios)
    print()
    print(f"MQTT QoS 1, one publisher and one durable subscriber, {MSGS} x {PAYLOAD} B per run, {RUNS} runs")
    for k in keys:
        xs = rates[k]
        print(f"  {k:<18} median {statistics.median(xs):7.0f} msgs/s  (range {min(xs):.0f}-{max(xs):.0f})")
    verdict = "met" if cost <= 0.05 else "MISSED"
    print(f"account cost (1 - median paired ratio): {cost * 100:+.1f} %; target <= 5 %: {verdict}")
    assert cost < 0.5, "the account halves the broker's throughput"
