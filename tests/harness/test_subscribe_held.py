"""The subscribe-held entry's byte limit (harness/catalog/held.py): a real paho client's CONNECT
passes whole, its SUBSCRIBE never does (issue 41 item 4). No broker: a plain socket reads what
the client sends."""

from __future__ import annotations

import socket
import threading

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion

from harness.agents.launch import SUBSCRIPTIONS
from harness.catalog.held import CONNECT_SLACK, SUB_AGENT, held_limit, mqtt_connect_len


def _sent_connect(client_id: str, username: str = "", password: str = "") -> bytes:
    """The bytes paho sends on connect (MQTT 3.1.1, durable session), read by a plain socket."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    c = mqtt.Client(
        callback_api_version=CallbackAPIVersion.VERSION2,
        client_id=client_id,
        clean_session=False,
        protocol=mqtt.MQTTv311,
    )
    if username:
        c.username_pw_set(username, password or None)
    t = threading.Thread(target=c.connect, args=("127.0.0.1", srv.getsockname()[1], 30), daemon=True)
    t.start()
    conn, _ = srv.accept()
    t.join(5)
    c.loop_write()
    conn.settimeout(2)
    data = conn.recv(4096)
    conn.close()
    srv.close()
    c.socket().close()
    return data


def test_connect_length_is_what_paho_sends():
    for cid in ("bfh-r-sub-1-s0", "bfh-" + "x" * 130 + "-s1"):  # one and two length bytes
        assert len(_sent_connect(cid)) == mqtt_connect_len(cid)
    assert len(_sent_connect("c", "user", "pw")) == mqtt_connect_len("c", "user", "pw")


def test_limit_passes_a_probe_connect_and_no_subscribe():
    run = "20261127-144000-subscribe-held-ab12"
    cid = f"bfh-{run}-{SUB_AGENT}-s0"
    limit = held_limit(run)
    assert mqtt_connect_len(f"{cid}-probe-999") <= limit
    shortest_subscribe = min(2 + 2 + 2 + len(f) + 1 for f in SUBSCRIPTIONS)
    assert limit - mqtt_connect_len(cid) == CONNECT_SLACK < shortest_subscribe
