"""Helpers of the backend/network tests: real STOMP clients over the fault proxy, log timing.

Clients are plain stomp.py 8.2 connections to the proxy addresses of a group (in member order,
like an agent's `mb.urls`): a producer that sends persistent messages and waits for each receipt
(resending on another member after a failure: at-least-once), and a consumer thread that
subscribes with client-individual acks and reconnects/resubscribes on any disconnect.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import ssl
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import stomp
from stomp.exception import ConnectFailedException, NotConnectedException, StompException

from harness.run.env import Environment
from harness.topology import Topology

LOG_TS = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def addr(url: str) -> tuple[str, int]:
    host, _, port = url.removeprefix("ssl://").rpartition(":")
    return host, int(port)


@contextlib.contextmanager
def env_up(topology: Topology, run_dir: Path, seed: int = 0) -> Iterator[Environment]:
    with Environment.up(topology, run_dir, seed=seed) as env:
        yield env


class _Listener(stomp.ConnectionListener):
    def __init__(self, owner: StompPeer) -> None:
        self.owner = owner

    def on_receipt(self, frame: Any) -> None:
        self.owner._receipt(frame.headers.get("receipt-id", ""))

    def on_message(self, frame: Any) -> None:
        self.owner._message(frame)

    def on_error(self, frame: Any) -> None:
        self.owner.errors.append(frame.body or str(frame.headers))
        self.owner._lost.set()

    def on_disconnected(self) -> None:
        self.owner._lost.set()


class StompPeer:
    """One logical client over a list of broker addresses (tried in order on every reconnect)."""

    def __init__(
        self,
        urls: list[str],
        user: str | None = None,
        password: str | None = None,
        ca_file: Path | None = None,
        name: str = "peer",
    ) -> None:
        self.urls = urls
        self.user, self.password = user, password
        self.ca_file = ca_file
        self.name = name
        self.conn: stomp.Connection | None = None
        self.connected_to: str | None = None
        self.errors: list[str] = []
        self._lost = threading.Event()
        self._receipts: dict[str, threading.Event] = {}
        self.connects = 0

    def _receipt(self, rid: str) -> None:
        ev = self._receipts.get(rid)
        if ev is not None:
            ev.set()

    def _message(self, frame: Any) -> None:  # consumers override
        pass

    def connect_once(self, url: str, timeout: float = 5.0) -> stomp.Connection:
        """One attempt at one address; raises ConnectFailedException (or StompException)."""
        conn = stomp.Connection([addr(url)], reconnect_attempts_max=1, heartbeats=(0, 0), timeout=timeout)
        if self.ca_file is not None or url.startswith("ssl://"):
            conn.set_ssl(
                for_hosts=[addr(url)],
                ca_certs=str(self.ca_file) if self.ca_file else None,
                ssl_version=ssl.PROTOCOL_TLS_CLIENT,
            )
        conn.set_listener("l", _Listener(self))
        conn.connect(self.user, self.password, wait=True)
        return conn

    def connect(self, deadline: float) -> None:
        last = ""
        while time.monotonic() < deadline:
            for url in self.urls:
                try:
                    self._lost.clear()
                    self.conn = self.connect_once(url)
                    self.connected_to = url
                    self.connects += 1
                    self.on_connected()
                    return
                except (ConnectFailedException, StompException, OSError) as e:
                    last = f"{url}: {type(e).__name__} {e}"
            time.sleep(0.3)
        raise TimeoutError(f"{self.name}: no broker of {self.urls} accepted a STOMP connection ({last})")

    def on_connected(self) -> None:
        pass

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.disconnect()
            self.conn = None


class Producer(StompPeer):
    """Sends persistent messages, each confirmed by a receipt; resends after any failure."""

    def __init__(self, urls: list[str], destination: str, **kw: Any) -> None:
        super().__init__(urls, name=kw.pop("name", "producer"), **kw)
        self.destination = destination
        self.sent: dict[str, float] = {}  # msg id -> first send time
        self.attempts = 0

    def send(self, msg_id: str, timeout: float = 60.0, receipt_wait: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.conn is None or self._lost.is_set():
                self.close()
                self.connect(deadline)
            rid = uuid.uuid4().hex
            ev = self._receipts[rid] = threading.Event()
            self.sent.setdefault(msg_id, time.time())
            self.attempts += 1
            try:
                assert self.conn is not None
                self.conn.send(self.destination, msg_id, headers={"persistent": "true", "receipt": rid})
                if ev.wait(receipt_wait):
                    return
            except (NotConnectedException, StompException, OSError):
                pass
            finally:
                self._receipts.pop(rid, None)
            self._lost.set()  # no receipt: reconnect and resend (at-least-once)
        raise TimeoutError(f"{self.name}: {msg_id} not confirmed within {timeout:.0f}s")


class Consumer(StompPeer):
    """Background subscriber: records every message body, reconnecting on any disconnect."""

    def __init__(self, urls: list[str], destination: str, **kw: Any) -> None:
        super().__init__(urls, name=kw.pop("name", "consumer"), **kw)
        self.destination = destination
        self.received: list[tuple[float, str]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"stomp-{self.name}", daemon=True)
        self.subscribed = threading.Event()

    def start(self, timeout: float = 60.0) -> Consumer:
        self._thread.start()
        if not self.subscribed.wait(timeout):
            raise TimeoutError(
                f"{self.name}: could not subscribe within {timeout:.0f}s; errors {self.errors[-3:]}"
            )
        return self

    def on_connected(self) -> None:
        assert self.conn is not None
        self.conn.subscribe(self.destination, id="1", ack="client-individual")
        self.subscribed.set()

    def _message(self, frame: Any) -> None:
        with self._lock:
            self.received.append((time.time(), frame.body))
        with contextlib.suppress(Exception):
            assert self.conn is not None
            self.conn.ack(frame.headers["message-id"], frame.headers.get("subscription", "1"))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.connect(time.monotonic() + 3600)
            except TimeoutError:
                continue
            while not self._stop.is_set() and not self._lost.wait(0.2):
                pass
            self.close()

    def stop(self) -> None:
        self._stop.set()
        self._lost.set()
        self._thread.join(10)
        self.close()

    def ids(self) -> Counter[str]:
        with self._lock:
            return Counter(body for _, body in self.received)

    def wait_for(self, expected: set[str], timeout: float) -> set[str]:
        """Wait until every id in `expected` was received; return the missing ones."""
        deadline = time.monotonic() + timeout
        while True:
            missing = expected - set(self.ids())
            if not missing or time.monotonic() > deadline:
                return missing
            time.sleep(0.2)


def log_time(line: str) -> float | None:
    m = LOG_TS.match(line)
    if not m:
        return None
    return dt.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def bridge_established(log: str, target: str) -> list[float]:
    """Times of "Network connection between vm://X#n and ... (target) has been established"."""
    out = []
    pat = re.compile(
        r"Network connection between vm://\S+ and \S+ \(" + re.escape(target) + r"\) has been established"
    )
    for line in log.splitlines():
        if pat.search(line):
            t = log_time(line)
            if t is not None:
                out.append(t)
    return out


def wait_log(backend: Any, broker: str, offset: int, pattern: str, timeout: float) -> float | None:
    """Wait until `pattern` appears in `broker`'s log after `offset`; return the line's time."""
    rx = re.compile(pattern)
    deadline = time.monotonic() + timeout
    while True:
        for line in backend.log_since(broker, offset).splitlines():
            if rx.search(line):
                return log_time(line)
        if time.monotonic() > deadline:
            return None
        time.sleep(0.2)
