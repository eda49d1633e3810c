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

Over 500 lines: the MQTT and the STOMP link implement one interface and one failure taxonomy; kept
side by side so the two protocols classify a failure the same way.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import socket
import ssl
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as mqtt
import stomp
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from agent_under_test.config import AgentConf, BrokerUrl, mqtt_topic, stomp_destination

OnMessage = Callable[[str, bytes], None]

# A STOMP link's close: how long the broker's DISCONNECT receipt may take before the receiver is
# woken by force, and how long the woken receiver may take to end.
DISCONNECT_RECEIPT_S = 1.0
RECEIVER_STOP_S = 2.0


class LinkError(Exception):
    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


def _socket_error_kind(e: BaseException) -> str:
    if isinstance(e, ssl.SSLError | ssl.CertificateError):
        return "tls"
    if isinstance(e, TimeoutError | socket.timeout):
        return "timeout"
    return "refused"


def _describe(e: BaseException) -> str:
    if isinstance(e, OSError) and e.errno is not None:
        return errno.errorcode.get(e.errno, str(e.errno))
    text = str(e) or type(e).__name__
    return text.splitlines()[0][:200]


class Link(ABC):
    """One connection to one broker. Not thread-safe: one owner thread drives it."""

    def __init__(self, url: BrokerUrl) -> None:
        self.url = url
        self.broker = url.key
        self.closed_reason: str | None = None

    @abstractmethod
    def pump(self, timeout: float) -> list[Any]:
        """Process network I/O for up to `timeout` s; return the tokens of publishes acked since."""

    @abstractmethod
    def last_inbound(self) -> float:
        """time.monotonic() of the last bytes received from the broker."""

    @abstractmethod
    def subscribe(self, topic_filter: str, qos: int, durable: bool, name: str, timeout: float | None) -> None:
        """Subscribe and wait for the broker's confirmation; raise LinkError if refused or silent."""

    @abstractmethod
    def publish(self, topic: str, payload: bytes, qos: int, token: Any) -> None:
        """Send one message; its `token` is returned by a later pump() once the broker acked it."""

    @abstractmethod
    def close(self) -> None:
        """Disconnect (politely if possible); idempotent."""

    @property
    def closed(self) -> bool:
        return self.closed_reason is not None


class Transport(ABC):
    """Opens links to one broker with the protocol's handshake bounded by `timeout`."""

    def __init__(
        self, conf: AgentConf, keepalive: int | None = None, liveness_timeout: float | None = None
    ) -> None:
        self.conf = conf
        self.keepalive = keepalive if keepalive is not None else conf.keepalive
        self.liveness_timeout = liveness_timeout or conf.effective_liveness_timeout

    @abstractmethod
    def connect(
        self,
        url: BrokerUrl,
        client_id: str | None,
        durable: bool,
        on_message: OnMessage | None,
        timeout: float | None,
    ) -> Link: ...


# ---------------------------------------------------------------------------------------------
# MQTT
# ---------------------------------------------------------------------------------------------


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

    def handshake(self, timeout: float | None) -> None:
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
            rc = c.loop(timeout=0.05)
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
            self.pump(0.05)
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
        self, conf: AgentConf, keepalive: int | None = None, liveness_timeout: float | None = None
    ) -> None:
        super().__init__(conf, keepalive, liveness_timeout)
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
        link.handshake(timeout)
        return link

    def _probe(self, url: BrokerUrl, client_id: str, timeout: float | None) -> None:
        key = (url.key, client_id)
        probe_id = f"{client_id}-probe-{next(self._probes)}"
        probe = MqttLink(self.conf, url, probe_id, True, None, self.keepalive)
        try:
            probe.handshake(timeout)
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
            time.sleep(self.settle_s)


# ---------------------------------------------------------------------------------------------
# STOMP
# ---------------------------------------------------------------------------------------------


class _StompListener(stomp.ConnectionListener):
    def __init__(self, link: StompLink) -> None:
        self.link = link

    def _touch(self) -> None:
        self.link._last_in = time.monotonic()

    def on_connected(self, frame: Any) -> None:
        self._touch()

    def on_heartbeat(self) -> None:
        self._touch()

    def on_receipt(self, frame: Any) -> None:
        self._touch()
        self.link._receipt(frame.headers.get("receipt-id", ""))

    def on_error(self, frame: Any) -> None:
        self._touch()
        self.link._error(frame.headers.get("message", "ERROR frame"), frame.headers.get("receipt-id"))

    def on_message(self, frame: Any) -> None:
        self._touch()
        self.link._message(frame)

    def on_disconnected(self) -> None:
        self.link._lost("connection_lost: socket closed")

    def on_heartbeat_timeout(self) -> None:
        self.link._lost("liveness_timeout: heart-beat missed")


class StompLink(Link):
    def __init__(
        self,
        conf: AgentConf,
        url: BrokerUrl,
        client_id: str | None,
        on_message: OnMessage | None,
        keepalive: int,
        timeout: float | None,
        liveness_timeout: float,
    ) -> None:
        super().__init__(url)
        self.conf = conf
        self._liveness_timeout = liveness_timeout
        self._client_id = client_id
        self._on_message_cb = on_message
        self._cond = threading.Condition()
        self._acks: deque[Any] = deque()
        self._pending_receipts: dict[str, Any] = {}
        self._sub_receipts: dict[str, str | None] = {}
        self._error_msg: str | None = None
        self._last_in = time.monotonic()
        self._timeout = timeout
        # We send a heart-beat every `keepalive` s and ask the broker for one every keepalive/2 s:
        # ActiveMQ's write check can leave up to twice the asked interval between two beats, so
        # a healthy idle link still hears from the broker at least every `keepalive` seconds.
        hb_out, hb_in = keepalive * 1000, keepalive * 500
        self.conn = stomp.Connection12(
            host_and_ports=[(url.connect_host, url.port)],
            prefer_localhost=False,
            try_loopback_connect=False,
            reconnect_attempts_max=1,
            timeout=timeout,
            heartbeats=(hb_out, hb_in),
            auto_decode=False,
            heart_beat_receive_scale=3.0,
        )
        if url.tls:
            self.conn.set_ssl(for_hosts=[(url.connect_host, url.port)], ca_certs=conf.ssl_ca)
        self.conn.set_listener("agent", _StompListener(self))
        self._receipt_seq = 0

    # listener side (stomp.py receiver / heart-beat threads)
    def _receipt(self, rid: str) -> None:
        with self._cond:
            if rid in self._pending_receipts:
                self._acks.append(self._pending_receipts.pop(rid))
            elif rid in self._sub_receipts:
                self._sub_receipts[rid] = "ok"
            self._cond.notify_all()

    def _error(self, message: str, rid: str | None) -> None:
        with self._cond:
            if rid is not None and rid in self._sub_receipts:
                self._sub_receipts[rid] = message
            else:
                self._error_msg = message
                # ActiveMQ closes the connection after an ERROR frame.
                if self.closed_reason is None and self.conn.is_connected():
                    self.closed_reason = f"broker_error: {message}"
            self._cond.notify_all()

    def _lost(self, reason: str) -> None:
        with self._cond:
            if self.closed_reason is None:
                self.closed_reason = reason
            self._cond.notify_all()

    def _message(self, frame: Any) -> None:
        headers = frame.headers
        topic = mqtt_topic(headers.get("destination", ""))
        body = frame.body if isinstance(frame.body, bytes) else str(frame.body).encode()
        if self._on_message_cb is not None:
            self._on_message_cb(topic, body)
        ack_id = headers.get("ack")
        if ack_id is not None:  # client-individual: ack after logging
            with contextlib.suppress(Exception):
                self.conn.ack(ack_id)

    # owner side
    def handshake(self) -> None:
        headers = {"client-id": self._client_id} if self._client_id else {}
        user = self.conf.username or None
        pw = self.conf.password.get_secret_value() if user else None
        started = time.monotonic()
        try:
            self.conn.connect(user, pw, wait=True, headers=headers, with_connect_command=True)
        except stomp.exception.ConnectFailedException:
            self._abort()
            if self._error_msg is not None:
                raise LinkError("rejected", f"ERROR {self._error_msg}") from None
            elapsed = time.monotonic() - started
            if self._timeout is not None and elapsed >= 0.9 * self._timeout:
                raise LinkError("timeout", f"no CONNECTED frame within {self._timeout:g} s") from None
            raise LinkError("refused", "connection refused or closed before CONNECTED") from None
        except (OSError, ssl.SSLError) as e:
            self._abort()
            raise LinkError(_socket_error_kind(e), _describe(e)) from None
        except Exception as e:  # stomp.py surfaces socket problems as assorted exceptions
            self._abort()
            raise LinkError("refused", _describe(e)) from None
        # The connect timeout was also the socket's read timeout; from now on liveness is the
        # heart-beats' and our watchdog's job, with the read timeout only as a backstop.
        sock = self.conn.transport.socket
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.settimeout(self._liveness_timeout + 2.0)
        self._last_in = time.monotonic()

    def _abort(self) -> None:
        if self.closed_reason is None:
            self.closed_reason = "aborted"
        self._teardown(receipt_wait=0.0)

    def _teardown(self, receipt_wait: float) -> None:
        """Stop stomp.py's receiver before anyone else touches the socket.

        One TLS connection must not be used by two threads at once: stomp.py's receiver unwraps
        the socket itself when the DISCONNECT receipt comes, and an unwrap from this thread at
        the same moment corrupted the heap (the agent died with SIGABRT on a TLS shutdown). So
        the receiver gets `receipt_wait` s to finish on its own, then is woken by a plain
        shutdown of the file descriptor (no TLS call), and the socket is closed after it ends.
        """
        transport = self.conn.transport
        rx = transport.receiver_thread
        if rx is not None and rx is not threading.current_thread() and rx.is_alive():
            rx.join(receipt_wait)
            if rx.is_alive():
                transport.running = False
                sock = transport.socket
                if sock is not None:
                    with contextlib.suppress(OSError):
                        socket.socket.shutdown(sock, socket.SHUT_RDWR)
                rx.join(RECEIVER_STOP_S)
            if rx.is_alive():
                return  # never seen; leave the socket to its thread rather than race it
        with contextlib.suppress(Exception):
            transport.disconnect_socket()

    def _next_receipt(self, prefix: str) -> str:
        self._receipt_seq += 1
        return f"{prefix}-{self._receipt_seq}"

    def pump(self, timeout: float) -> list[Any]:
        with self._cond:
            if not self._acks and self.closed_reason is None and timeout > 0:
                self._cond.wait(timeout)
            acks = list(self._acks)
            self._acks.clear()
        return acks

    def last_inbound(self) -> float:
        return self._last_in

    def subscribe(self, topic_filter: str, qos: int, durable: bool, name: str, timeout: float | None) -> None:
        rid = self._next_receipt("sub")
        headers: dict[str, str] = {"receipt": rid}
        ack = "auto"
        if qos >= 1:
            ack = "client-individual"
            if durable:
                headers["activemq.subscriptionName"] = name
        with self._cond:
            self._sub_receipts[rid] = None
        try:
            self.conn.subscribe(stomp_destination(topic_filter), id=name, ack=ack, headers=headers)
        except Exception as e:
            raise LinkError("refused", f"SUBSCRIBE not sent ({_describe(e)})") from None
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._sub_receipts.get(rid) is None:
                if self.closed_reason is not None:
                    raise LinkError("refused", f"closed before subscription receipt ({self.closed_reason})")
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise LinkError("timeout", f"no subscription receipt within {timeout:g} s")
                self._cond.wait(0.1 if remaining is None else min(remaining, 0.1))
            result = self._sub_receipts.pop(rid)
        if result != "ok":
            raise LinkError("rejected", f"SUBSCRIBE refused: {result}")

    def publish(self, topic: str, payload: bytes, qos: int, token: Any) -> None:
        rid = self._next_receipt("r")
        headers = {"receipt": rid, "persistent": "true" if qos >= 1 else "false"}
        with self._cond:
            self._pending_receipts[rid] = token
        try:
            self.conn.send(stomp_destination(topic), payload, headers=headers)
        except Exception as e:
            with self._cond:
                self._pending_receipts.pop(rid, None)
                if self.closed_reason is None:
                    self.closed_reason = f"connection_lost: send {_describe(e)}"

    def close(self) -> None:
        receipt_wait = 0.0
        if self.closed_reason is None:
            self.closed_reason = "closed"
            with contextlib.suppress(Exception):
                self.conn.disconnect()
                receipt_wait = DISCONNECT_RECEIPT_S
        self._teardown(receipt_wait)


class StompTransport(Transport):
    def connect(
        self,
        url: BrokerUrl,
        client_id: str | None,
        durable: bool,
        on_message: OnMessage | None,
        timeout: float | None,
    ) -> Link:
        link = StompLink(
            self.conf, url, client_id, on_message, self.keepalive, timeout, self.liveness_timeout
        )
        link.handshake()
        return link


def make_transport(
    protocol: str, conf: AgentConf, keepalive: int | None = None, liveness_timeout: float | None = None
) -> Transport:
    if protocol == "mqtt":
        return MqttTransport(conf, keepalive, liveness_timeout)
    if protocol == "stomp":
        return StompTransport(conf, keepalive, liveness_timeout)
    raise ValueError(f"unknown protocol {protocol!r}")
