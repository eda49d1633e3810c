"""The stomp.py host-list agent (see the package docstring)."""

from __future__ import annotations

import contextlib
import heapq
import json
import random
import socket
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import stomp

from agent_under_test.config import (
    EXIT_CONFIG,
    AgentConf,
    BrokerUrl,
    Publication,
    Subscription,
    Workload,
    client_id,
    mqtt_topic,
    stomp_destination,
)
from agent_under_test.stomp_hostlist.listener import Listener
from harness.contracts.msglog import MessageLogWriter

#: on SIGTERM: the roles get this long to close politely, then the sockets still open are shut
#: down under them (a send blocked on a paused broker, a read), then the rest of the budget
POLITE_CLOSE_S = 0.5
SHUTDOWN_BUDGET_S = 7.0


@dataclass
class _PubConn:
    """The publisher's connection, kept across messages."""

    listener: Listener
    conn: Any = None
    url: BrokerUrl | None = None
    fails: int = 0
    connects: int = 0


def _payload(msg_id: str, payload_bytes: int) -> str:
    body = {"msg_id": msg_id, "sent_ts": time.time(), "pad": ""}
    raw = json.dumps(body, separators=(",", ":"))
    if len(raw) < payload_bytes:
        body["pad"] = "x" * (payload_bytes - len(raw))
        raw = json.dumps(body, separators=(",", ":"))
    return raw


class HostListAgent:
    def __init__(self, conf: AgentConf, workload: Workload, log_path: str | Path) -> None:
        if workload.protocol != "stomp":
            proto = workload.protocol
            print(
                f"agent_under_test.stomp_hostlist: protocol {proto!r} unsupported (only 'stomp')",
                file=sys.stderr,
            )
            raise SystemExit(EXIT_CONFIG)
        self.conf = conf
        self.wl = workload
        self.log = MessageLogWriter(log_path, workload.run, workload.agent)
        self.stop = threading.Event()
        self.rng = random.Random()
        self.urls = list(conf.urls)
        self._by_host = {(u.connect_host, u.port): u for u in self.urls}
        self._threads: list[threading.Thread] = []
        self._ready: list[threading.Event] = []
        self._seq = 0
        self._seq_lock = threading.Lock()
        self._open: dict[
            str, Any
        ] = {}  # role -> its connection (connecting or up): a shutdown interrupts them

    # ---- connections ------------------------------------------------------------------------
    def _rid(self, prefix: str) -> str:
        with self._seq_lock:
            self._seq += 1
            return f"{prefix}-{self._seq}"

    def _delay(self, attempt: int) -> float:
        d = min(self.conf.backoff_cap, self.conf.backoff_initial * (2**attempt))
        return self.rng.uniform(d / 2, d)

    def _connect(
        self, role: str, cid: str | None, listener: Listener, reason: str
    ) -> tuple[Any, BrokerUrl] | None:
        """One pass over mb.urls in order; the connection that completed the handshake, or None."""
        remaining = list(self.urls)
        k = self.conf.keepalive
        while remaining and not self.stop.is_set():
            conn = stomp.Connection12(
                host_and_ports=[(u.connect_host, u.port) for u in remaining],
                prefer_localhost=False,
                try_loopback_connect=False,
                reconnect_sleep_initial=self.conf.backoff_initial,
                reconnect_sleep_increase=1.0,
                reconnect_sleep_jitter=0.5,
                reconnect_sleep_max=self.conf.backoff_cap,
                reconnect_attempts_max=1,  # one TCP pass over the list; we own the outer loop
                timeout=self.conf.connect_timeout,
                heartbeats=(k * 1000, k * 500),
                heart_beat_receive_scale=3.0,
                auto_decode=False,
            )
            with self._seq_lock:  # stomp.py's reconnect sleep (backoff_initial) ends when it stops running
                self._open[role] = conn
            tls = [(u.connect_host, u.port) for u in remaining if u.tls]
            if tls:
                conn.set_ssl(for_hosts=tls, ca_certs=self.conf.ssl_ca)
            listener.host, listener.lost, listener.connected = None, None, False
            listener.errors.clear()
            conn.set_listener("agent", listener)
            headers = {"client-id": cid} if cid else {}
            user = self.conf.username or None
            pw = self.conf.password.get_secret_value() if user else None
            try:
                # wait=False: the handshake is awaited on the listener, which also looks at `stop`
                conn.connect(user, pw, wait=False, headers=headers, with_connect_command=True)
                why = listener.wait_connected(self.conf.connect_timeout)
                if why is not None:
                    raise ConnectionError(why)
            except Exception as e:
                with contextlib.suppress(Exception):
                    conn.transport.disconnect_socket()
                if listener.host is None:  # no host accepted TCP
                    for u in remaining:
                        self.log.write(
                            "disconnected", broker=u.key, role=role, reason="connect_failed: refused"
                        )
                    return None
                url = self._by_host[listener.host]
                why = listener.errors.get(None)
                detail = (
                    f"rejected: ERROR {why}"
                    if why
                    else f"refused: {e if isinstance(e, ConnectionError) else type(e).__name__}"
                )
                if self.stop.is_set():
                    return None
                self.log.write("disconnected", broker=url.key, role=role, reason=f"connect_failed: {detail}")
                # stomp.py tried the hosts before listener.host at TCP level and they refused
                for u in remaining[: remaining.index(url)]:
                    self.log.write("disconnected", broker=u.key, role=role, reason="connect_failed: refused")
                remaining = remaining[remaining.index(url) + 1 :]
                continue
            url = self._by_host[conn.transport.current_host_and_port]
            sock = conn.transport.socket
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.settimeout(self.conf.effective_liveness_timeout + 2.0)
            self.log.write("connected", broker=url.key, role=role, reason=reason)
            return conn, url
        return None

    # ---- subscribers ------------------------------------------------------------------------
    def _subscriber(self, index: int, sub: Subscription, ready: threading.Event) -> None:
        role = f"subscriber:{sub.topic}"
        cid = client_id(self.conf.client_id_prefix, self.wl.run, self.wl.agent, f"s{index}")
        broker: list[str] = [""]

        def on_message(frame: Any) -> None:
            body = frame.body if isinstance(frame.body, bytes) else str(frame.body).encode()
            msg_id = None
            with contextlib.suppress(ValueError, UnicodeDecodeError, AttributeError):
                msg_id = json.loads(body).get("msg_id")
            self.log.write(
                "received",
                msg_id=msg_id,
                topic=mqtt_topic(frame.headers.get("destination", "")),
                broker=broker[0],
                subscription=sub.topic,
            )
            if "ack" in frame.headers:
                with contextlib.suppress(Exception):
                    conn.ack(frame.headers["ack"])

        listener = Listener(self.stop, on_message)
        fails = 0
        reason = "initial"
        conn: Any = None
        while not self.stop.is_set():
            got = self._connect(role, cid, listener, reason)
            if got is None:
                self.stop.wait(self._delay(fails))
                fails += 1
                continue
            conn, url = got
            broker[0] = url.key
            reason = "reconnect"
            rid = self._rid("sub")
            headers = {"receipt": rid}
            ack = "auto"
            durable = sub.durable and sub.qos >= 1
            if sub.qos >= 1:
                ack = "client-individual"
                if durable:
                    headers["activemq.subscriptionName"] = cid
            why: str | None
            try:
                conn.subscribe(stomp_destination(sub.topic), id=cid, ack=ack, headers=headers)
                why = listener.wait_receipt(rid, self.conf.connect_timeout)
            except Exception as e:
                why = f"SUBSCRIBE not sent: {type(e).__name__}"
            if why is not None:
                with contextlib.suppress(Exception):
                    conn.disconnect()
                stopping = self.stop.is_set()
                self.log.write(
                    "disconnected",
                    broker=url.key,
                    role=role,
                    reason="shutdown" if stopping else f"subscribe_failed: {why}",
                )
                self.stop.wait(self._delay(fails))
                fails += 1
                continue
            self.log.write("subscribed", topic=sub.topic, broker=url.key, qos=sub.qos, durable=durable)
            ready.set()
            fails = 0
            with listener.cond:
                while listener.lost is None and not self.stop.is_set():
                    listener.cond.wait(0.25)
                lost = listener.lost
            with contextlib.suppress(Exception):
                conn.disconnect()
            with contextlib.suppress(Exception):
                conn.transport.disconnect_socket()
            self.log.write("disconnected", broker=url.key, role=role, reason=lost or "shutdown")
            if not self.stop.is_set():
                self.stop.wait(self._delay(0))

    # ---- publisher --------------------------------------------------------------------------
    def _publisher(self) -> None:
        pubs = self.wl.publications
        st = _PubConn(Listener(self.stop))
        t0 = time.monotonic()
        heap = [(t0, i, 0) for i, p in enumerate(pubs) if p.count > 0]
        heapq.heapify(heap)
        while heap and not self.stop.is_set():
            due, i, seq = heapq.heappop(heap)
            p = pubs[i]
            if seq + 1 < p.count:
                heapq.heappush(heap, (t0 + (seq + 1) / p.rate_per_s, i, seq + 1))
            if self.stop.wait(max(0.0, due - time.monotonic())):
                break
            msg_id = f"{self.wl.agent}-{i}-{seq}"
            sent, attempts = self._publish_one(st, p, msg_id, _payload(msg_id, p.payload_bytes))
            if not sent and not self.stop.is_set():
                self.log.write(
                    "dropped",
                    msg_id=msg_id,
                    topic=p.topic,
                    reason="publisher_timeout",
                    attempts=attempts,
                    handed_to_broker=False,  # a receipt is the hand-over; no receipt, not handed
                )
        if st.conn is not None and st.url is not None:
            with contextlib.suppress(Exception):
                st.conn.disconnect()
            reason = "shutdown" if self.stop.is_set() else "publications_complete"
            self.log.write("disconnected", broker=st.url.key, role="publisher", reason=reason)

    def _publish_one(self, st: _PubConn, p: Publication, msg_id: str, raw: str) -> tuple[bool, int]:
        """Send one message until the broker's receipt or the publisher timeout: (sent, attempts)."""
        role = "publisher"
        deadline = time.monotonic() + self.conf.publisher_timeout
        attempts = 0
        while not self.stop.is_set():
            if st.conn is None:
                got = self._connect(role, None, st.listener, "initial" if st.connects == 0 else "reconnect")
                if got is not None:
                    st.conn, st.url = got
                    st.connects += 1
                    st.fails = 0
            if st.conn is None or st.url is None:
                if attempts == 0:
                    attempts = 1
                    self.log.write(
                        "send_attempt",
                        msg_id=msg_id,
                        topic=p.topic,
                        broker=None,
                        attempt=1,
                        qos=p.qos,
                        reason="no_broker",
                    )
                if time.monotonic() >= deadline:
                    break
                self.stop.wait(min(self._delay(st.fails), max(0.0, deadline - time.monotonic())))
                st.fails += 1
                continue
            attempts += 1
            url = st.url
            self.log.write(
                "send_attempt", msg_id=msg_id, topic=p.topic, broker=url.key, attempt=attempts, qos=p.qos
            )
            why = self._send_with_receipt(st, p, raw)
            if why is None:
                self.log.write(
                    "sent", msg_id=msg_id, topic=p.topic, broker=url.key, attempts=attempts, qos=p.qos
                )
                return True, attempts
            with contextlib.suppress(Exception):
                st.conn.transport.disconnect_socket()
            self.log.write("disconnected", broker=url.key, role=role, reason=why)
            st.conn, st.url = None, None
            if time.monotonic() >= deadline:
                break
        return False, attempts

    def _send_with_receipt(self, st: _PubConn, p: Publication, raw: str) -> str | None:
        """None once the broker's receipt arrives; else why not."""
        rid = self._rid("r")
        try:
            st.conn.send(
                stomp_destination(p.topic),
                raw.encode(),
                headers={"receipt": rid, "persistent": "true" if p.qos >= 1 else "false"},
            )
            return st.listener.wait_receipt(rid, self.conf.effective_liveness_timeout)
        except Exception as e:
            return f"connection_lost: send {type(e).__name__}"

    # ---- lifecycle --------------------------------------------------------------------------
    def run(self) -> int:
        for i, sub in enumerate(self.wl.subscriptions):
            ev = threading.Event()
            t = threading.Thread(target=self._subscriber, args=(i, sub, ev), name=f"sub-{i}", daemon=True)
            self._ready.append(ev)
            self._threads.append(t)
            t.start()
        end = time.monotonic() + self.conf.subscribe_wait
        while not self.stop.is_set() and time.monotonic() < end and not all(e.is_set() for e in self._ready):
            time.sleep(0.05)  # the main thread never waits on `stop` (reference agent.run: the handler)
        if self.wl.publications and not self.stop.is_set():
            t = threading.Thread(target=self._publisher, name="pub", daemon=True)
            self._threads.append(t)
            t.start()
        while not self.stop.is_set():
            time.sleep(0.05)
        return self.shutdown()

    def shutdown(self) -> int:
        """The roles close politely for POLITE_CLOSE_S; a role still blocked then (a send into a
        paused broker under stomp.py's socket lock, a DISCONNECT that cannot be written) has its
        socket shut down under it and ends as on a lost link."""
        start = time.monotonic()
        for t in self._threads:
            t.join(max(0.0, start + POLITE_CLOSE_S - time.monotonic()))
        if any(t.is_alive() for t in self._threads):
            with self._seq_lock:
                conns = list(self._open.values())
            for conn in conns:
                _interrupt(conn)
        for t in self._threads:
            t.join(max(0.0, start + SHUTDOWN_BUDGET_S - time.monotonic()))
        self.log.close()
        return 0


def _interrupt(conn: Any) -> None:
    """Shut the connection's socket down at the file descriptor (no TLS call from this thread:
    stomp.py's receiver may be using the TLS object), which frees a blocked send or read."""
    transport = conn.transport
    transport.running = False
    sock = transport.socket
    if sock is not None:
        with contextlib.suppress(OSError):
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
