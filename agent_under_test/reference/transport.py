"""MQTT (paho-mqtt 2.x) and STOMP (stomp.py 8.x) behind one small interface.

A `Link` is one established connection to one broker, owned by one thread (its subscriber or the
publisher). The owner calls `pump()` in a loop: it processes network events for at most `timeout`
seconds and returns the publish acknowledgements that arrived. Incoming messages are handed to the
`on_message` callback *before* the broker is acknowledged (the callback logs `received`), so a
kill -9 between the two gives a redelivery, never a loss.

Failures to connect raise `LinkError` with a `kind`:
- `refused`: TCP refused / reset / closed before the protocol handshake finished;
- `timeout`: no TCP connect or no CONNACK/CONNECTED within the connect timeout (black hole);
- `rejected`: the broker answered and refused (bad credentials, client id in use, not authorised);
- `tls`: TLS handshake or certificate failure.

The interface is in agent_under_test.reference.link, the protocols in mqtt_link and stomp_link;
their names stay importable from here.
"""

from __future__ import annotations

import threading

from agent_under_test.config import AgentConf
from agent_under_test.reference.link import (
    DISCONNECT_RECEIPT_S,
    RECEIVER_STOP_S,
    Link,
    LinkError,
    OnMessage,
    Transport,
)
from agent_under_test.reference.mqtt_link import MqttLink, MqttTransport
from agent_under_test.reference.stomp_link import StompLink, StompTransport

__all__ = [
    "DISCONNECT_RECEIPT_S",
    "RECEIVER_STOP_S",
    "Link",
    "LinkError",
    "MqttLink",
    "MqttTransport",
    "OnMessage",
    "StompLink",
    "StompTransport",
    "Transport",
    "make_transport",
]


def make_transport(
    protocol: str,
    conf: AgentConf,
    keepalive: int | None = None,
    liveness_timeout: float | None = None,
    stop: threading.Event | None = None,
) -> Transport:
    if protocol == "mqtt":
        return MqttTransport(conf, keepalive, liveness_timeout, stop)
    if protocol == "stomp":
        return StompTransport(conf, keepalive, liveness_timeout, stop)
    raise ValueError(f"unknown protocol {protocol!r}")
