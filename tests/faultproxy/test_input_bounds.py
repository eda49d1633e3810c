"""Issue 34, the fault proxy: loops, unknown toxic attributes, duplicate names, bad ports and
config files each give a clear error (HTTP 400 / exit 2), and the server keeps answering."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from harness.faultproxy.client import ToxiproxyClient, ToxiproxyError
from harness.faultproxy.relay import same_endpoint

from .util import TcpServer, unique


def _status(call) -> tuple[int, str]:  # type: ignore[no-untyped-def]
    with pytest.raises(ToxiproxyError) as info:
        call()
    return info.value.status, str(info.value)


@pytest.mark.parametrize(
    "upstream,listen,same",
    [
        ("127.0.0.1:5000", "127.0.0.1:5000", True),
        ("localhost:5000", "127.0.0.1:5000", True),
        ("0.0.0.0:5000", "127.0.0.1:5000", True),
        ("127.0.0.1:5000", "0.0.0.0:5000", True),
        ("[::1]:5000", "[::]:5000", True),
        ("LOCALHOST:5000", "[::1]:5000", True),
        (":5000", "127.0.0.1:5000", True),
        ("127.0.0.1:5001", "127.0.0.1:5000", False),
        ("broker-a:5000", "127.0.0.1:5000", False),
        ("127.0.0.1:0", "127.0.0.1:0", False),
    ],
)
def test_same_endpoint(upstream: str, listen: str, same: bool) -> None:
    assert same_endpoint(upstream, listen) is same


def test_a_proxy_may_not_dial_itself_or_another_proxy(api: ToxiproxyClient, echo: TcpServer) -> None:
    a = api.create_proxy(unique("a"), "127.0.0.1:0", echo.addr)
    port = int(a["listen"].rpartition(":")[2])
    for upstream in (a["listen"], f"localhost:{port}", f"0.0.0.0:{port}"):
        status, msg = _status(lambda u=upstream: api.create_proxy(unique("b"), "127.0.0.1:0", u))
        assert status == 400 and "listen address of proxy" in msg
    status, msg = _status(lambda: api.update_proxy(a["name"], upstream=a["listen"]))
    assert status == 400 and "its own listen address" in msg
    # the classic fd bomb: listen and upstream on one fixed port
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    status, msg = _status(lambda: api.create_proxy(unique("self"), f"127.0.0.1:{free}", f"localhost:{free}"))
    assert status == 400 and "its own listen address" in msg
    assert api.version()  # still answering
    assert api.get_proxy(a["name"])["upstream"] == echo.addr


def test_unknown_toxic_attribute_is_refused(api: ToxiproxyClient, echo: TcpServer) -> None:
    p = api.create_proxy(unique("t"), "127.0.0.1:0", echo.addr)
    status, msg = _status(lambda: api.add_toxic(p["name"], "latency", latncy=500))
    assert status == 400 and "unknown attribute 'latncy'" in msg and "latency, jitter" in msg
    api.add_toxic(p["name"], "latency", latency=5)
    status, msg = _status(lambda: api.update_toxic(p["name"], "latency_downstream", attributes={"jiter": 1}))
    assert status == 400 and "'jiter'" in msg
    assert api.toxics(p["name"])[0]["attributes"] == {"latency": 5, "jitter": 0}


def test_populate_refuses_duplicate_names(api: ToxiproxyClient, echo: TcpServer) -> None:
    name = unique("dup")
    body = [{"name": name, "upstream": echo.addr}, {"name": name, "upstream": echo.addr}]
    status, msg = _status(lambda: api.populate(body))
    assert status == 400 and "duplicate proxy name" in msg
    assert name not in api.proxies()  # nothing was created


def _server(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "harness.faultproxy", "--port", "0", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.mark.parametrize("port", ["70000", "-1", "x"])
def test_port_out_of_range_is_refused(port: str) -> None:
    out = _server("--port", port)
    assert out.returncode == 2 and "port" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.parametrize("kind", ["zero", "fifo", "dir", "big", "deep"])
def test_config_must_be_a_small_regular_file(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "cfg.json"
    if kind == "zero":
        path = Path("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "dir":
        path = tmp_path
    elif kind == "big":
        path.write_text("[" + " " * (5 << 20) + "]")
    else:
        path.write_text("[" * 100_000 + "]" * 100_000)
    out = _server("--config", str(path))
    assert out.returncode == 2, out
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("fault-proxy: cannot read config"), out.stderr


def test_a_request_target_like_an_authority_is_answered(api: ToxiproxyClient) -> None:
    """`PUT //[` closed the connection without an answer (urlsplit took `//[` for an authority;
    found by tests/fuzz/test_faultproxy_fuzz.py)."""
    import http.client
    from urllib.parse import urlsplit

    u = urlsplit(api.url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
    conn.request("PUT", "//[", body=b"null")
    resp = conn.getresponse()
    assert resp.status == 404 and b"error" in resp.read(), "an answer: the path names no route"
