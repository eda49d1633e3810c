"""The STOMP (stomp.py 8.x) link and transport."""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections import deque
from typing import Any

import stomp

from agent_under_test.config import AgentConf, BrokerUrl, mqtt_topic, stomp_destination
from agent_under_test.reference.link import (
    DISCONNECT_RECEIPT_S,
    RECEIVER_STOP_S,
    Link,
    LinkError,
    OnMessage,
    Transport,
    _describe,
    _socket_error_kind,
)


class _StompListener(stomp.ConnectionListener):
    def __init__(self, link: StompLink) -> None:
        self.link = link

    def _touch(self) -> None:
        self.link._last_in = time.monotonic()

    def on_connected(self, frame: Any) -> None:
        self._touch()
        self.link._connected()

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
        stop: threading.Event | None = None,
    ) -> None:
        super().__init__(url)
        self._stop = stop if stop is not None else threading.Event()
        self._is_connected = False
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
    def _connected(self) -> None:
        with self._cond:
            self._is_connected = True
            self._cond.notify_all()

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
            # No wait=True: stomp.py would wait for CONNECTED with no timeout and no way to stop.
            self.conn.connect(user, pw, wait=False, headers=headers, with_connect_command=True)
        except stomp.exception.ConnectFailedException:
            self._abort()
            raise LinkError("refused", "connection refused or closed before CONNECTED") from None
        except (OSError, ssl.SSLError) as e:
            self._abort()
            raise LinkError(_socket_error_kind(e), _describe(e)) from None
        except Exception as e:  # stomp.py surfaces socket problems as assorted exceptions
            self._abort()
            raise LinkError("refused", _describe(e)) from None
        failure = self._await_connected(started)
        if failure is not None:
            self._abort()
            raise failure
        # The connect timeout was also the socket's read timeout; from now on liveness is the
        # heart-beats' and our watchdog's job, with the read timeout only as a backstop.
        sock = self.conn.transport.socket
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.settimeout(self._liveness_timeout + 2.0)
        self._last_in = time.monotonic()

    def _await_connected(self, started: float) -> LinkError | None:
        """Wait for CONNECTED; the reason to give up (ERROR, closed, timed out, stopping) if any."""
        deadline = None if self._timeout is None else started + self._timeout
        with self._cond:
            while not self._is_connected:
                if self._error_msg is not None:
                    return LinkError("rejected", f"ERROR {self._error_msg}")
                now = time.monotonic()
                if self.closed_reason is not None:
                    if self._timeout is not None and now - started >= 0.9 * self._timeout:
                        return LinkError("timeout", f"no CONNECTED frame within {self._timeout:g} s")
                    return LinkError("refused", "connection refused or closed before CONNECTED")
                if deadline is not None and now >= deadline:
                    return LinkError("timeout", f"no CONNECTED frame within {self._timeout:g} s")
                if self._stop.is_set():
                    return LinkError("shutdown", "the agent is stopping")
                self._cond.wait(0.05 if deadline is None else max(0.001, min(0.05, deadline - now)))
        return None

    def raw_socket(self) -> Any:
        return self.conn.transport.socket

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
            self.conf, url, client_id, on_message, self.keepalive, timeout, self.liveness_timeout, self.stop
        )
        self.track(link)
        link.handshake()
        return link
