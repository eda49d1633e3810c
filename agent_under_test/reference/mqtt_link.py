"""The MQTT (paho-mqtt 2.x) link and transport."""

from __future__ import annotations

import contextlib
import itertools
import ssl
import threading
import time
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from agent_under_test.config import AgentConf, BrokerUrl
from agent_under_test.reference.link import (
    Link,
    LinkError,
    OnMessage,
    Transport,
    _describe,
    _socket_error_kind,
)

#: longest select() while waiting for a CONNACK or SUBACK: select returns when the packet comes, so
#: a longer slice only delays noticing a stop; 50 ms slices made 2,000 waiting roles of a packed
#: fleet wake 40,000 times a second and starve their own replies (issue 44)
WAIT_SLICE_S = 0.5


def _slice(deadline: float | None) -> float:
    if deadline is None:
        return WAIT_SLICE_S
    return max(0.0, min(WAIT_SLICE_S, deadline - time.monotonic()))


class MqttLink(Link):
    def __init__(
        self,
        conf: AgentConf,
        url: BrokerUrl,
        client_id: str,
        clean_session: bool,
        on_message: OnMessage | None,
        keepalive: int,
    ) -> None:
        super().__init__(url)
        self._on_message_cb = on_message
        self._acks: list[Any] = []
        self._tokens: dict[int, Any] = {}
        self._connack: int | None = None
        self._connack_reason = ""
        self._suback: dict[int, list[int]] = {}
        self._keepalive = keepalive
        c = mqtt.Client(
            callback_api_version=CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=clean_session,
            protocol=mqtt.MQTTv311,
            reconnect_on_failure=False,
        )
        c.max_inflight_messages_set(max(conf.publisher_inflight, 1))
        c.max_queued_messages_set(0)
        if conf.username:
            c.username_pw_set(conf.username, conf.password.get_secret_value() or None)
        if url.tls:
            c.tls_set(ca_certs=conf.ssl_ca)
        c.on_connect = self._on_connect
        c.on_disconnect = self._on_disconnect
        c.on_message = self._on_message
        c.on_publish = self._on_publish
        c.on_subscribe = self._on_subscribe
        self.client = c

    # paho callbacks (run on the owner thread, inside loop())
    def _on_connect(self, client: Any, userdata: Any, flags: Any, rc: Any, properties: Any) -> None:
        self._connack = 0 if not rc.is_failure else int(rc.value)
        self._connack_reason = str(rc)

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, rc: Any, properties: Any) -> None:
        if self.closed_reason is None:
            self.closed_reason = f"connection_lost: {rc}"

    def _on_message(self, client: Any, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        if self._on_message_cb is not None:
            self._on_message_cb(msg.topic, msg.payload)
        # paho sends PUBACK after this returns: logged first, acked second.

    def _on_publish(self, client: Any, userdata: Any, mid: int, rc: Any, properties: Any) -> None:
        token = self._tokens.pop(mid, None)
        if token is not None:
            self._acks.append(token)

    def _on_subscribe(self, client: Any, userdata: Any, mid: int, rcs: Any, properties: Any) -> None:
        self._suback[mid] = [int(r.value) for r in rcs]

    def raw_socket(self) -> Any:
        return self.client._sock

    def handshake(self, timeout: float | None, stop: threading.Event | None = None) -> None:
        c = self.client
        host, port = self.url.connect_host, self.url.port
        c.connect_timeout = timeout if timeout is not None else 3600.0 * 24
        try:
            c.connect(host, port, keepalive=self._keepalive)
        except (OSError, ssl.SSLError, ValueError) as e:
            self._abort()
            raise LinkError(_socket_error_kind(e), _describe(e)) from None
        started = time.monotonic()
        deadline = None if timeout is None else started + timeout
        while self._connack is None:
            if self.closed_reason is not None:
                self._abort()
                # paho closes a connection still waiting for CONNACK after `keepalive` seconds
                silent = time.monotonic() - started >= min(self._keepalive, timeout or self._keepalive) * 0.9
                if silent or "keep" in self.closed_reason.lower():
                    raise LinkError("timeout", f"no CONNACK within {time.monotonic() - started:.1f} s")
                raise LinkError("refused", "closed before CONNACK")
            if deadline is not None and time.monotonic() >= deadline:
                self._abort()
                raise LinkError("timeout", f"no CONNACK within {timeout:g} s")
            if stop is not None and stop.is_set():
                self._abort()
                raise LinkError("shutdown", "the agent is stopping")
            rc = c.loop(timeout=_slice(deadline))
            if rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS,) and self._connack is None:
                self._abort()
                raise LinkError("refused", f"closed before CONNACK ({mqtt.error_string(rc)})")
        if self._connack != 0:
            self._abort()
            raise LinkError("rejected", f"CONNACK {self._connack_reason}")

    def _abort(self) -> None:
        with contextlib.suppress(Exception):
            self.client._sock_close()  # no DISCONNECT packet on a half-open connection
        if self.closed_reason is None:
            self.closed_reason = "aborted"

    def pump(self, timeout: float) -> list[Any]:
        if self.closed_reason is None:
            rc = self.client.loop(timeout=max(timeout, 0.0))
            if rc != MQTTErrorCode.MQTT_ERR_SUCCESS and self.closed_reason is None:
                self.closed_reason = f"connection_lost: {mqtt.error_string(rc)}"
        elif timeout > 0:
            time.sleep(min(timeout, 0.05))
        acks, self._acks = self._acks, []
        return acks

    def last_inbound(self) -> float:
        # paho 2.1 keeps the time of the last packet read in _last_msg_in (time.monotonic()).
        return float(self.client._last_msg_in)

    def subscribe(self, topic_filter: str, qos: int, durable: bool, name: str, timeout: float | None) -> None:
        rc, mid = self.client.subscribe(topic_filter, qos)
        if rc != MQTTErrorCode.MQTT_ERR_SUCCESS or mid is None:
            raise LinkError("refused", f"SUBSCRIBE not sent ({mqtt.error_string(rc)})")
        deadline = None if timeout is None else time.monotonic() + timeout
        while mid not in self._suback:
            if self.closed_reason is not None:
                raise LinkError("refused", f"closed before SUBACK ({self.closed_reason})")
            if deadline is not None and time.monotonic() >= deadline:
                raise LinkError("timeout", f"no SUBACK within {timeout:g} s")
            self.pump(_slice(deadline))
        granted = self._suback.pop(mid)
        if any(g >= 0x80 for g in granted):
            raise LinkError("rejected", f"SUBACK refused {topic_filter!r}")

    def publish(self, topic: str, payload: bytes, qos: int, token: Any) -> None:
        info = self.client.publish(topic, payload, qos=qos)
        if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS:
            if self.closed_reason is None:
                self.closed_reason = f"connection_lost: publish {mqtt.error_string(info.rc)}"
            return
        if qos == 0:
            # No broker ack exists for QoS 0: "sent" means written to the socket.
            if info.is_published():
                self._acks.append(token)
            else:
                self._tokens[info.mid] = token
        else:
            self._tokens[info.mid] = token

    def close(self) -> None:
        if self.closed_reason is None:
            self.closed_reason = "closed"
            with contextlib.suppress(Exception):
                self.client.disconnect()
                self.client.loop(timeout=0.01)
        with contextlib.suppress(Exception):
            self.client._sock_close()


class MqttTransport(Transport):
    """MQTT links; a durable session's CONNECT goes only to a broker that has just answered a probe.

    A CONNECT sent to a frozen broker (SIGSTOPped, or its link black-holed) is replayed when it
    thaws. ActiveMQ steals the link for each replay of the same client id, restores the client's
    durable subscriptions, then closes it; racing the live connection, this can leave the live
    connection's subscription with no consumer: SUBACK granted, nothing ever delivered. So the
    durable client id is never queued at an unresponsive broker (the probe uses a throwaway,
    clean-session id), and after the broker was unresponsive it gets `settle_s` to close the
    connections it was still holding before the client id is presented again.
    """

    settle_s = 1.0

    def __init__(
        self,
        conf: AgentConf,
        keepalive: int | None = None,
        liveness_timeout: float | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        super().__init__(conf, keepalive, liveness_timeout, stop)
        self._probes = itertools.count(1)
        self._unresponsive: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def connect(
        self,
        url: BrokerUrl,
        client_id: str | None,
        durable: bool,
        on_message: OnMessage | None,
        timeout: float | None,
    ) -> Link:
        if durable and client_id:
            self._probe(url, client_id, timeout)
        link = MqttLink(self.conf, url, client_id or "", not durable, on_message, self.keepalive)
        self.track(link)
        link.handshake(timeout, self.stop)
        return link

    def _probe(self, url: BrokerUrl, client_id: str, timeout: float | None) -> None:
        key = (url.key, client_id)
        probe_id = f"{client_id}-probe-{next(self._probes)}"
        probe = MqttLink(self.conf, url, probe_id, True, None, self.keepalive)
        self.track(probe)
        try:
            probe.handshake(timeout, self.stop)
        except LinkError as e:
            if e.kind == "timeout":
                with self._lock:
                    self._unresponsive.add(key)
            raise
        probe.close()
        with self._lock:
            thawed = key in self._unresponsive
            self._unresponsive.discard(key)
        if thawed:
            self.stop.wait(self.settle_s)
