"""The other concurrency model, measured against packed threads (benchmarks/bench_packed.py): many
members' paho clients driven by one thread and one epoll loop (paho's external-loop API:
socket(), loop_read/loop_write/loop_misc). Only the traffic's cost, none of the reference's
failover semantics: its figures are a floor for what an event-loop agent would cost.

    python benchmarks/evloop_members.py HOST:PORT MEMBERS ROOT LOGDIR RUN

Each member: a durable subscriber client (ROOT/topology/#, its own client id), a publisher client
(30 status events at 2/s, QoS 1), its own JSON Lines log. SIGTERM ends it.
"""

from __future__ import annotations

import json
import selectors
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion


def client(cid: str, clean: bool) -> mqtt.Client:
    return mqtt.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=cid,
        clean_session=clean,
        protocol=mqtt.MQTTv311,
        reconnect_on_failure=False,
    )


def main() -> None:
    hostport, n, root, logdir, run = (
        sys.argv[1],
        int(sys.argv[2]),
        sys.argv[3],
        Path(sys.argv[4]),
        sys.argv[5],
    )
    host, port = hostport.rsplit(":", 1)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    sel = selectors.DefaultSelector()
    clients: list[mqtt.Client] = []
    pubs: list[tuple[mqtt.Client, str]] = []
    for i in range(n):
        name = f"ev-{root}-{i:03d}"
        log = (logdir / f"{name}.jsonl").open("a", encoding="utf-8")

        def on_message(c: Any, u: Any, msg: mqtt.MQTTMessage, log: Any = log, name: str = name) -> None:
            rec = {"ts": time.time(), "run": run, "agent": name, "event": "received", "topic": msg.topic}
            log.write(json.dumps(rec) + "\n")
            log.flush()

        sub = client(f"{name}-s0", False)
        sub.on_message = on_message
        sub.on_connect = lambda c, u, f, rc, p: c.subscribe(f"{root}/topology/#", 1)
        pub = client(f"{name}-pub", True)
        for c in (sub, pub):
            c.connect(host, int(port), keepalive=10)
            sel.register(c.socket(), selectors.EVENT_READ, c)
            clients.append(c)
        pubs.append((pub, f"{root}/status/{i:03d}"))
    t0, seq = time.monotonic(), 0
    while not stop.is_set():
        for key, _ev in sel.select(timeout=0.1):
            key.data.loop_read()
        for c in clients:
            if c.want_write():
                c.loop_write()
        if seq < 30 and time.monotonic() >= t0 + seq / 2.0:
            for pub, topic in pubs:
                pub.publish(topic, b"x" * 64, qos=1)
            seq += 1
        if int(time.monotonic() * 10) % 10 == 0:
            for c in clients:
                c.loop_misc()
    for c in clients:
        c.disconnect()


if __name__ == "__main__":
    main()
