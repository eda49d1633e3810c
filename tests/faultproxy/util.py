"""Helpers of the fault-proxy tests: threaded upstream servers and socket utilities."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from harness.faultproxy.client import ToxiproxyClient
from harness.faultproxy.launcher import FaultProxyHandle, start_fault_proxy

_names = itertools.count(1)


@contextlib.contextmanager
def builtin_fault_proxy(run_dir: Path, seed: int) -> Iterator[FaultProxyHandle]:
    """The builtin server even when TOXIPROXY_URL names another (these tests are about it)."""
    env_url = os.environ.pop("TOXIPROXY_URL", None)
    try:
        handle = start_fault_proxy(run_dir, seed=seed)
    finally:
        if env_url is not None:
            os.environ["TOXIPROXY_URL"] = env_url
    try:
        yield handle
    finally:
        handle.stop()


class TcpServer:
    """A threaded TCP server on 127.0.0.1:<free>; `handler(conn)` runs per connection."""

    def __init__(self, handler: Callable[[socket.socket], None]) -> None:
        self.handler = handler
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(256)
        self.port = int(self.sock.getsockname()[1])
        self.addr = f"127.0.0.1:{self.port}"
        self.conns: list[socket.socket] = []
        self.accepted = 0
        self.finished = 0  # connections whose handler saw the peer go (EOF or error)
        self._stop = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept_loop, daemon=True)
        self._thread.start()

    def _accept_loop(self) -> None:
        while not self._stop:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with self._lock:
                self.conns.append(conn)
                self.accepted += 1
            threading.Thread(target=self._run, args=(conn,), daemon=True).start()

    def _run(self, conn: socket.socket) -> None:
        try:
            self.handler(conn)
        except OSError:
            pass
        finally:
            conn.close()
            with self._lock:
                self.finished += 1

    def close(self) -> None:
        self._stop = True
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        with self._lock:
            for c in self.conns:
                with contextlib.suppress(OSError):
                    c.shutdown(socket.SHUT_RDWR)
                c.close()
        self._thread.join(5)


def echo_handler(conn: socket.socket) -> None:
    while True:
        data = conn.recv(65536)
        if not data:
            return
        conn.sendall(data)


class Sink:
    """Upstream that reads everything, hashing it, and records each connection's digest."""

    def __init__(self) -> None:
        self.results: list[tuple[int, str]] = []
        self.done = threading.Event()
        self.server = TcpServer(self._handle)

    def _handle(self, conn: socket.socket) -> None:
        h = hashlib.sha256()
        n = 0
        while True:
            data = conn.recv(1 << 18)
            if not data:
                break
            h.update(data)
            n += len(data)
        self.results.append((n, h.hexdigest()))
        self.done.set()


def unique(prefix: str = "p") -> str:
    return f"{prefix}{next(_names)}_{os.getpid()}"


def make_proxy(api: ToxiproxyClient, upstream: str, name: str | None = None) -> tuple[str, int]:
    """Create a proxy on 127.0.0.1:0; returns (name, listen port)."""
    name = name or unique()
    p = api.create_proxy(name, "127.0.0.1:0", upstream)
    return name, int(p["listen"].rsplit(":", 1)[1])


def connect(port: int, timeout: float = 10.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s


def recv_exactly(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return bytes(buf)


def roundtrip(port: int, payload: bytes = b"ping") -> float:
    """Send `payload` through an echo proxy and time until it is back."""
    with connect(port) as s:
        t0 = time.monotonic()
        s.sendall(payload)
        got = recv_exactly(s, len(payload))
        assert got == payload
        return time.monotonic() - t0


def wait_for(pred: Callable[[], Any], timeout: float = 10.0, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout:.1f} s")
        time.sleep(interval)


def closed_by_peer(s: socket.socket, timeout: float = 10.0) -> bool:
    """True if the peer closed (EOF or reset) within `timeout`, reading and discarding data."""
    s.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except TimeoutError:
        return False
    return False
