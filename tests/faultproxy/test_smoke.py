"""Smoke tests: the server runs, relays, and the basic faults act on real sockets."""

from __future__ import annotations

import json
import re
import signal
import socket
import sys
import time
from pathlib import Path

import pytest

from harness import procs
from harness.faultproxy.client import ToxiproxyClient, ToxiproxyError
from harness.faultproxy.launcher import FaultProxyHandle, free_port

from .util import TcpServer, closed_by_peer, connect, make_proxy, recv_exactly, roundtrip, wait_for


def test_version_and_proxy_roundtrip(api: ToxiproxyClient, echo: TcpServer) -> None:
    v = api.version()
    assert isinstance(v, dict) and v["version"].startswith("2.")
    name, port = make_proxy(api, echo.addr)
    assert port != 0
    assert api.get_proxy(name)["listen"] == f"127.0.0.1:{port}"
    assert roundtrip(port, b"hello through the proxy") < 5


def test_latency_delays_each_roundtrip(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    api.latency(name, 1000)
    delayed = roundtrip(port)
    assert 0.99 <= delayed < 6, delayed
    api.heal(name)
    assert roundtrip(port) < 0.8


def test_black_hole_holds_then_heal(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    with connect(port) as s:
        s.sendall(b"a")
        assert recv_exactly(s, 1) == b"a"
        api.black_hole(name)
        s.sendall(b"dropped")
        s.settimeout(0.7)
        with pytest.raises(TimeoutError):
            s.recv(10)  # nothing comes back, and the connection stays open
    # a new connection is accepted but black-holed as well
    with connect(port) as s2:
        s2.sendall(b"x")
        s2.settimeout(0.5)
        with pytest.raises(TimeoutError):
            s2.recv(10)
        api.heal(name)  # removing the timeout toxic closes the connections it held
        assert closed_by_peer(s2, 5)
    assert roundtrip(port) < 5


def test_disable_closes_and_refuses_then_enable(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    s = connect(port)
    s.sendall(b"x")
    assert recv_exactly(s, 1) == b"x"
    api.down(name)
    assert closed_by_peer(s, 5)
    s.close()
    wait_for(lambda: echo.finished == echo.accepted == 1, 5)  # the upstream side is closed too
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    api.up(name)
    assert api.get_proxy(name)["listen"] == f"127.0.0.1:{port}"
    assert roundtrip(port) < 5


def test_launcher_and_sigterm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI's Toxiproxy spellings work, the ready line is printed, SIGTERM exits 0."""
    port = free_port()
    cmd = [sys.executable, "-m", "harness.faultproxy", "-host", "127.0.0.1", "-port", str(port), "-seed", "7"]
    proc = procs.spawn("fault-proxy-cli", cmd, tmp_path / "fp.log", pid_dir=tmp_path / "pids")
    try:
        client = ToxiproxyClient(f"http://127.0.0.1:{port}")
        client.wait_ready(15)
        echo = TcpServer(lambda c: c.sendall(c.recv(10)))
        try:
            name, lport = make_proxy(client, echo.addr)
            held = connect(lport)
            proc.signal(signal.SIGTERM)
            assert proc.wait(15) == 0
            assert closed_by_peer(held, 5)
            held.close()
        finally:
            echo.close()
        log = (tmp_path / "fp.log").read_text()
        assert re.search(rf"^fault-proxy listening on http://127\.0\.0\.1:{port}$", log, re.M), log
    finally:
        proc.kill()
    with pytest.raises(ToxiproxyError) as err:
        client.version()
    assert err.value.status == 0


def test_start_fault_proxy_external_url(fault_proxy: FaultProxyHandle, tmp_path: Path, monkeypatch) -> None:
    from harness.faultproxy.launcher import start_fault_proxy

    monkeypatch.setenv("TOXIPROXY_URL", fault_proxy.url)
    with start_fault_proxy(tmp_path) as handle:
        assert handle.kind == "external" and handle.proc is None
        assert handle.client.version()
    assert fault_proxy.client.version()  # the external server is untouched by stop()


def test_start_fault_proxy_reports_early_death(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from harness.faultproxy import launcher

    monkeypatch.delenv("TOXIPROXY_URL", raising=False)
    fake = tmp_path / "bin"
    fake.mkdir()
    script = fake / "toxiproxy-server"
    script.write_text("#!/bin/sh\necho 'boom: cannot start' >&2\nexit 3\n")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    t0 = time.monotonic()
    with pytest.raises(launcher.FaultProxyError, match="boom: cannot start"):
        launcher.start_fault_proxy(tmp_path / "run")
    assert time.monotonic() - t0 < 10
    wait_for(lambda: not list((tmp_path / "run" / "pids").glob("*.json")), 5)


def test_config_file_populates_at_start(tmp_path: Path, echo: TcpServer) -> None:
    lport = free_port()
    cfg = tmp_path / "toxiproxy.json"
    spec = [{"name": "from_config", "listen": f"127.0.0.1:{lport}", "upstream": echo.addr, "enabled": True}]
    cfg.write_text(json.dumps(spec))
    port = free_port()
    cmd = [sys.executable, "-m", "harness.faultproxy", "--port", str(port), "-config", str(cfg)]
    proc = procs.spawn("fault-proxy-config", cmd, tmp_path / "fp.log", pid_dir=tmp_path / "pids")
    try:
        client = ToxiproxyClient(f"http://127.0.0.1:{port}")
        client.wait_ready(15)
        assert client.get_proxy("from_config")["listen"] == f"127.0.0.1:{lport}"
        assert roundtrip(lport) < 5
    finally:
        assert proc.terminate() == 0


def test_launcher_spawns_toxiproxy_server_from_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With `toxiproxy-server` on PATH the launcher runs it with Toxiproxy's flags.

    The stand-in binary is the builtin server, which accepts the same single-dash flags.
    """
    from harness.faultproxy import launcher

    monkeypatch.delenv("TOXIPROXY_URL", raising=False)
    fake = tmp_path / "bin"
    fake.mkdir()
    script = fake / "toxiproxy-server"
    script.write_text(f'#!/bin/sh\necho "args: $*"\nexec {sys.executable} -m harness.faultproxy "$@"\n')
    script.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}:/usr/bin:/bin")
    with launcher.start_fault_proxy(tmp_path / "run", seed=5) as handle:
        assert handle.kind == "toxiproxy-server"
        assert handle.client.version()
        proc = handle.proc
        assert proc is not None and proc.alive()
    assert proc.wait(10) == 0
    log = (tmp_path / "run" / "fault-proxy.log").read_text()
    port = handle.url.rsplit(":", 1)[1]
    assert f"args: -host 127.0.0.1 -port {port} -seed 5" in log, log


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_event_loop_variants(loop: str, tmp_path: Path, echo: TcpServer) -> None:
    """The relay behaves the same on both event loops (uvloop is the optional 'fast' extra)."""
    if loop == "uvloop":
        pytest.importorskip("uvloop")
    port = free_port()
    cmd = [sys.executable, "-m", "harness.faultproxy", "--port", str(port), "--loop", loop]
    proc = procs.spawn(f"fault-proxy-{loop}", cmd, tmp_path / "fp.log", pid_dir=tmp_path / "pids")
    try:
        client = ToxiproxyClient(f"http://127.0.0.1:{port}")
        client.wait_ready(15)
        name, lport = make_proxy(client, echo.addr)
        assert roundtrip(lport, b"x" * 100_000) < 5
        client.latency(name, 300)
        assert roundtrip(lport) >= 0.29
        client.heal(name)
        client.reset_peer(name)
        with connect(lport) as s:
            s.sendall(b"x")
            with pytest.raises(ConnectionResetError):
                while s.recv(10):
                    pass
        client.heal(name)
        s = connect(lport)
        client.black_hole(name)
        s.sendall(b"x")
        assert not closed_by_peer(s, 0.5)
        client.down(name)
        assert closed_by_peer(s, 5)
        s.close()
    finally:
        assert proc.terminate() == 0
    assert f"loop {loop}" in (tmp_path / "fp.log").read_text()


def test_a_link_queues_a_fleets_connects(api: ToxiproxyClient, echo: TcpServer) -> None:
    """A listener queues LISTEN_BACKLOG pending connects (the kernel's somaxconn caps it), not
    asyncio's default 100: 1,000 fleet members connect 2,000 clients at once (docs/fleet.md)."""
    import subprocess

    from harness.faultproxy.registry import LISTEN_BACKLOG

    _, port = make_proxy(api, f"127.0.0.1:{echo.port}")
    out = subprocess.run(
        ["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True
    ).stdout.split()
    somaxconn = int(Path("/proc/sys/net/core/somaxconn").read_text())
    assert int(out[2]) == min(LISTEN_BACKLOG, somaxconn) > 100  # Send-Q of a listener: its backlog
