"""Mid-stream toxic changes lose and reorder nothing; many concurrent connections relay correctly."""

from __future__ import annotations

import hashlib
import random
import socket
import threading
import time
from collections.abc import Callable
from functools import partial

from harness.faultproxy.client import ToxiproxyClient, ToxiproxyError

from .util import Sink, TcpServer, closed_by_peer, connect, make_proxy, recv_exactly


def _chunks(seed: int, total: int) -> list[bytes]:
    rng = random.Random(seed)
    out, n = [], 0
    while n < total:
        size = min(rng.randint(1, 64 * 1024), total - n)
        out.append(rng.randbytes(size))
        n += size
    return out


def _toggler(
    api: ToxiproxyClient, name: str, streams: tuple[str, ...], stop: threading.Event
) -> Callable[[], int]:
    """Keep adding, updating and removing toxics on `name` until `stop`; returns a changes counter."""
    count = [0]

    def ops() -> list[Callable[[], object]]:
        out: list[Callable[[], object]] = []
        for s in streams:
            out += [
                partial(api.add_toxic, name, "latency", stream=s, latency=40, jitter=20),
                partial(api.update_toxic, name, f"latency_{s}", latency=10),
                partial(api.update_toxic, name, f"latency_{s}", latency=60),
                # the last toxic goes while chunks wait in it: they must still come first
                partial(api.remove_toxic, name, f"latency_{s}"),
                partial(api.add_toxic, name, "bandwidth", stream=s, rate=2_000),
                partial(api.remove_toxic, name, f"bandwidth_{s}"),
                partial(api.add_toxic, name, "slicer", stream=s, average_size=1500, size_variation=700),
                partial(api.add_toxic, name, "latency", stream=s, latency=30),
                partial(api.update_toxic, name, f"slicer_{s}", average_size=300, delay=10),
                partial(api.remove_toxic, name, f"slicer_{s}"),
                partial(api.remove_toxic, name, f"latency_{s}"),
                partial(api.add_toxic, name, "slow_close", stream=s, delay=5, toxicity=0.5),
                partial(api.remove_toxic, name, f"slow_close_{s}"),
            ]
        return out

    def run() -> None:
        seq = ops()
        i = 0
        while not stop.is_set():
            try:
                seq[i % len(seq)]()
                count[0] += 1
            except ToxiproxyError as exc:
                assert exc.status in (404, 409), exc
            i += 1
            time.sleep(0.03)  # long enough for chunks to queue up behind each toxic

    t = threading.Thread(target=run, daemon=True)
    t.start()

    def finish() -> int:
        stop.set()
        t.join(10)
        return count[0]

    return finish


def test_midstream_changes_keep_every_byte_in_order(api: ToxiproxyClient, sink: Sink) -> None:
    name, port = make_proxy(api, sink.server.addr)
    chunks = _chunks(7, 6 * 1024 * 1024)
    digest = hashlib.sha256(b"".join(chunks)).hexdigest()
    finish = _toggler(api, name, ("upstream",), threading.Event())
    try:
        with connect(port, timeout=60) as s:
            for c in chunks:
                s.sendall(c)
                time.sleep(0.01)  # spread the transfer over the toxic changes
            changes = finish()
            s.shutdown(socket.SHUT_WR)
            assert sink.done.wait(60)
    finally:
        finish()
    assert changes >= 10, changes
    assert sink.results == [(sum(map(len, chunks)), digest)]


def test_midstream_changes_both_directions_echo(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    chunks = _chunks(11, 3 * 1024 * 1024)
    total = sum(map(len, chunks))
    sent = hashlib.sha256(b"".join(chunks)).hexdigest()
    got = hashlib.sha256()
    received = [0]
    finish = _toggler(api, name, ("upstream", "downstream"), threading.Event())
    try:
        with connect(port, timeout=60) as s:

            def reader() -> None:
                while received[0] < total:
                    data = s.recv(1 << 18)
                    if not data:
                        return
                    got.update(data)
                    received[0] += len(data)

            t = threading.Thread(target=reader)
            t.start()
            for c in chunks:
                s.sendall(c)
                time.sleep(0.01)
            t.join(90)
            changes = finish()
    finally:
        finish()
    assert changes >= 10, changes
    assert received[0] == total
    assert got.hexdigest() == sent


def test_many_concurrent_connections(api: ToxiproxyClient, echo: TcpServer) -> None:
    n = 100
    name, port = make_proxy(api, echo.addr)
    socks = [connect(port, timeout=30) for _ in range(n)]  # all open at once
    try:
        api.latency(name, 100)  # every connection now relays through its toxic pipeline
        errors: list[str] = []
        t0 = time.monotonic()

        def worker(i: int, s: socket.socket) -> None:
            rng = random.Random(i)
            try:
                for _ in range(3):
                    payload = rng.randbytes(32 * 1024)
                    s.sendall(payload)
                    if recv_exactly(s, len(payload)) != payload:
                        errors.append(f"conn {i}: corrupted echo")
            except OSError as exc:
                errors.append(f"conn {i}: {exc}")

        threads = [threading.Thread(target=worker, args=(i, s)) for i, s in enumerate(socks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        elapsed = time.monotonic() - t0
        assert not errors, errors[:5]
        assert 0.3 <= elapsed < 30, elapsed  # three round trips of >= 100 ms each, in parallel
        assert echo.accepted == n
        api.disable(name)  # closes all of them, on both sides
        assert all(closed_by_peer(s, 10) for s in socks)
    finally:
        for s in socks:
            s.close()
