"""One test per toxic: the effect on real bytes through a real proxy, timed with generous bounds."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import statistics
import sys
import threading
import time
from pathlib import Path

import pytest

from harness import procs
from harness.faultproxy.client import ToxiproxyClient
from harness.faultproxy.launcher import free_port

from .util import Sink, TcpServer, closed_by_peer, connect, make_proxy, recv_exactly, roundtrip


def _spaced_echo_delays(port: int, n: int, gap: float) -> list[float]:
    """Send n 8-byte messages `gap` apart through an echo proxy; return each one's round trip."""
    sent: list[float] = []
    delays: list[float] = []
    with connect(port) as s:

        def reader() -> None:
            for i in range(n):
                msg = recv_exactly(s, 8)
                assert msg == b"msg%05d" % i, msg  # order kept
                delays.append(time.monotonic() - sent[i])

        t = threading.Thread(target=reader)
        t.start()
        for i in range(n):
            sent.append(time.monotonic())
            s.sendall(b"msg%05d" % i)
            time.sleep(gap)
        t.join(30)
    assert len(delays) == n
    return delays


def test_latency_counts_from_each_chunks_arrival(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    api.add_toxic(name, "latency", latency=300)
    delays = _spaced_echo_delays(port, 6, 0.1)
    assert min(delays) >= 0.29, delays
    # summed, the k-th message would wait 0.3 + 0.2 k s (median 0.8 s, last 1.3 s); each waits
    # ~0.3 s from its own arrival
    assert statistics.median(delays) < 0.55, delays
    assert max(delays) < 1.2, delays


def test_latency_jitter_varies_within_bounds(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    api.add_toxic(name, "latency", latency=200, jitter=150)
    delays = _spaced_echo_delays(port, 8, 0.3)
    assert min(delays) >= 0.045, delays
    assert max(delays) < 1.5, delays
    assert max(delays) - min(delays) > 0.05, delays


def test_latency_upstream_stream_only(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    api.add_toxic(name, "latency", stream="upstream", latency=250)
    assert roundtrip(port) >= 0.24


def test_bandwidth_paces_throughput(api: ToxiproxyClient, sink: Sink) -> None:
    name, port = make_proxy(api, sink.server.addr)
    api.add_toxic(name, "bandwidth", stream="upstream", rate=100)  # 100 KB/s
    payload = os.urandom(150_000)
    t0 = time.monotonic()
    with connect(port) as s:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        assert sink.done.wait(20)
    elapsed = time.monotonic() - t0
    assert sink.results == [(len(payload), hashlib.sha256(payload).hexdigest())]
    assert 1.3 <= elapsed < 8, elapsed  # 150 KB at 100 KB/s = 1.5 s


def _bye_server() -> TcpServer:
    def handler(conn: socket.socket) -> None:
        conn.sendall(b"bye")

    return TcpServer(handler)


def _eof_after(port: int) -> float:
    with connect(port) as s:
        t0 = time.monotonic()
        assert recv_exactly(s, 3) == b"bye"
        assert s.recv(10) == b""
        return time.monotonic() - t0


def test_slow_close_delays_the_close(api: ToxiproxyClient) -> None:
    srv = _bye_server()
    try:
        name, port = make_proxy(api, srv.addr)
        assert _eof_after(port) < 0.8
        api.add_toxic(name, "slow_close", delay=1000)
        assert 0.95 <= _eof_after(port) < 6
    finally:
        srv.close()


def test_timeout_is_an_idle_timer_and_drops_data(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    api.add_toxic(name, "timeout", stream="upstream", timeout=1000)
    with connect(port) as s:
        s.settimeout(0.01)
        t_end = time.monotonic() + 1.5
        while time.monotonic() < t_end:  # input every 200 ms keeps restarting the timer
            s.sendall(b"k")
            try:
                got = s.recv(10)
            except TimeoutError:
                got = None
            assert got is None, f"expected nothing back (dropped, still open), got {got!r}"
            time.sleep(0.2)
        t0 = time.monotonic()
        assert closed_by_peer(s, 6)
        assert 0.7 <= time.monotonic() - t0 < 6


def test_timeout_zero_holds_until_removed(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    api.add_toxic(name, "timeout", stream="upstream", timeout=0)
    with connect(port) as s:
        s.sendall(b"lost")
        assert not closed_by_peer(s, 1.0)  # neither data nor close
        api.remove_toxic(name, "timeout_upstream")
        assert closed_by_peer(s, 5)


@pytest.mark.parametrize("timeout_ms", [0, 400])
def test_reset_peer_sends_rst(api: ToxiproxyClient, echo: TcpServer, timeout_ms: int) -> None:
    name, port = make_proxy(api, echo.addr)
    api.add_toxic(name, "reset_peer", timeout=timeout_ms)
    with connect(port) as s:
        t0 = time.monotonic()
        s.sendall(b"x")
        with pytest.raises(ConnectionResetError):
            while s.recv(10):
                pass
        elapsed = time.monotonic() - t0
    assert timeout_ms / 1000 - 0.01 <= elapsed < timeout_ms / 1000 + 5


def _reads_for(port: int, payload: bytes) -> tuple[int, bytes, float]:
    with connect(port) as s:
        t0 = time.monotonic()
        s.sendall(payload)
        buf = bytearray()
        reads = 0
        while len(buf) < len(payload):
            chunk = s.recv(65536)
            assert chunk
            reads += 1
            buf += chunk
        return reads, bytes(buf), time.monotonic() - t0


def test_slicer_cuts_data_into_delayed_pieces(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    payload = os.urandom(2000)
    reads, got, _ = _reads_for(port, payload)
    assert got == payload and reads <= 5
    api.slice(name, 10, 4, 2000)  # ~200 pieces of 6..14 bytes, 2 ms apart
    reads, got, elapsed = _reads_for(port, payload)
    assert got == payload
    assert reads >= 15, reads
    assert elapsed >= 0.25, elapsed


def test_limit_data_closes_after_n_bytes(api: ToxiproxyClient, sink: Sink) -> None:
    name, port = make_proxy(api, sink.server.addr)
    api.limit(name, 1000, stream="upstream")
    payload = os.urandom(5000)
    with connect(port) as s:
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            s.sendall(payload)
        assert closed_by_peer(s, 5)
    assert sink.done.wait(5)
    assert sink.results == [(1000, hashlib.sha256(payload[:1000]).hexdigest())]


def test_limit_data_hold_passes_n_bytes_then_holds_the_rest(api: ToxiproxyClient, echo: TcpServer) -> None:
    """`hold` (builtin only): the first `bytes` pass at once, the rest waits `hold` ms, then the
    connection goes on as if nothing happened: nothing lost, nothing closed."""
    name, port = make_proxy(api, echo.addr)
    api.limit(name, 3, stream="upstream", hold_ms=1500)
    with connect(port) as s:
        s.sendall(b"abc")
        assert recv_exactly(s, 3) == b"abc"
        t0 = time.monotonic()
        s.sendall(b"defg")
        assert recv_exactly(s, 4) == b"defg"
        assert time.monotonic() - t0 >= 1.4
        t0 = time.monotonic()
        s.sendall(b"h")  # after the hold: direct
        assert recv_exactly(s, 1) == b"h"
        assert time.monotonic() - t0 < 1.0
    with connect(port) as s:  # each connection is held on its own
        s.sendall(b"abcd")
        t0 = time.monotonic()
        assert recv_exactly(s, 4) == b"abcd"
        assert time.monotonic() - t0 >= 1.4


def test_limit_data_frames_passes_the_connect_frame_and_holds_what_follows(
    api: ToxiproxyClient, echo: TcpServer
) -> None:
    """`frames` (builtin only): the limit is the first whole MQTT frame, however long its client
    id, even when the SUBSCRIBE comes in the same write; every later frame waits `hold` ms."""
    name, port = make_proxy(api, echo.addr)
    api.limit(name, 0, stream="upstream", hold_ms=1500, frames=1)
    for cid in (b"r1", b"bfh-" + b"x" * 200):
        hello = bytes([0x10]) + _varint(10 + 2 + len(cid)) + b"\x00\x04MQTT\x04\x02\x00\x3c"
        hello += len(cid).to_bytes(2, "big") + cid
        subscribe = b"\x82\x08\x00\x01\x00\x03t/#\x01"
        with connect(port) as s:
            t0 = time.monotonic()
            s.sendall(hello + subscribe)
            assert recv_exactly(s, len(hello)) == hello
            assert time.monotonic() - t0 < 1.0, "the CONNECT is not held"
            assert recv_exactly(s, len(subscribe)) == subscribe
            assert time.monotonic() - t0 >= 1.4, "the SUBSCRIBE is held"


def _varint(n: int) -> bytes:
    out = b""
    while True:
        n, byte = n >> 7, n & 0x7F
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def test_refusing_upstream_closes_the_client(api: ToxiproxyClient) -> None:
    name, port = make_proxy(api, f"127.0.0.1:{free_port()}")
    with connect(port) as s:
        assert closed_by_peer(s, 5)


def _pattern(api: ToxiproxyClient, name: str, port: int, n: int) -> list[bool]:
    """Which of n successive connections the toxic affects.

    The toxic is `limit_data` 3 bytes with toxicity 0.5 (no timing involved): on an affected
    connection the first 3 one-byte echoes come back and then the proxy closes it; an unaffected
    one echoes all 5.
    """
    api.add_toxic(name, "limit_data", bytes=3, toxicity=0.5)
    out = []
    for _ in range(n):
        with connect(port) as s:
            echoed = 0
            for b in b"abcde":
                try:
                    s.sendall(bytes([b]))
                    got = recv_exactly(s, 1)
                except (ConnectionResetError, BrokenPipeError):
                    break
                if not got:
                    break
                assert got == bytes([b])
                echoed += 1
        assert echoed in (3, 5), echoed  # one roll holds for the whole connection
        out.append(echoed == 3)
    return out


def test_toxicity_rolled_per_connection_and_seeded(
    api: ToxiproxyClient, echo: TcpServer, tmp_path: Path
) -> None:
    name = "toxicity_probe"
    _, port = make_proxy(api, echo.addr, name=name)
    first = _pattern(api, name, port, 12)
    assert 1 <= sum(first) <= 11, first  # some connections affected, some not
    api.delete_proxy(name)
    _, port = make_proxy(api, echo.addr, name=name)
    assert _pattern(api, name, port, 12) == first  # same seed, proxy and connection numbers
    # another server process with the same --seed makes the same choices
    other = free_port()
    proc = procs.spawn(
        "fault-proxy-seed",
        [sys.executable, "-m", "harness.faultproxy", "--port", str(other), "--seed", "1234"],
        tmp_path / "seed.log",
        pid_dir=tmp_path / "pids",
    )
    try:
        c2 = ToxiproxyClient(f"http://127.0.0.1:{other}")
        c2.wait_ready(15)
        _, port2 = make_proxy(c2, echo.addr, name=name)
        assert _pattern(c2, name, port2, 12) == first
    finally:
        proc.terminate()


def test_toxicity_zero_never_applies(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    api.add_toxic(name, "limit_data", bytes=0, toxicity=0.0)
    assert all(roundtrip(port) < 5 for _ in range(5))  # a limit of 0 bytes would close at once
    api.update_toxic(name, "limit_data_downstream", toxicity=1.0)
    with connect(port) as s:
        s.sendall(b"x")
        assert closed_by_peer(s, 5)


def test_toxic_added_to_open_connection(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    with connect(port) as s:
        s.sendall(b"a")
        assert recv_exactly(s, 1) == b"a"
        api.latency(name, 1000)
        t0 = time.monotonic()
        s.sendall(b"b")
        assert recv_exactly(s, 1) == b"b"
        assert time.monotonic() - t0 >= 0.99
        api.update_toxic(name, "latency_downstream", latency=0)
        t0 = time.monotonic()
        s.sendall(b"c")
        assert recv_exactly(s, 1) == b"c"
        assert time.monotonic() - t0 < 0.8
