"""The PyPI client `toxiproxy-python` 0.1.1 works against the builtin server.

It has quirks the server must accept: POST (not PATCH) to update a proxy, `.json()` on every
POST answer, a client-side populate, and class-level host/port.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from harness.faultproxy.client import ToxiproxyClient
from harness.faultproxy.launcher import FaultProxyHandle

from .util import TcpServer, closed_by_peer, connect, recv_exactly, roundtrip

toxiproxy = pytest.importorskip("toxiproxy")


@pytest.fixture
def pyclient(fault_proxy: FaultProxyHandle, api: ToxiproxyClient) -> Iterator[object]:
    from toxiproxy.api import APIConsumer

    saved = (APIConsumer.host, APIConsumer.port)
    u = urlsplit(fault_proxy.url)
    server = toxiproxy.Toxiproxy()
    server.update_api_consumer(u.hostname, u.port)
    try:
        yield server
    finally:
        APIConsumer.host, APIConsumer.port = saved


def test_toxiproxy_python_lifecycle(pyclient, api: ToxiproxyClient, echo: TcpServer) -> None:
    server = pyclient
    assert server.running()
    assert b"version" in server.version()

    proxy = server.create(upstream=echo.addr, name="interop", listen="127.0.0.1:0")
    assert proxy.name == "interop" and proxy.enabled is True
    port = int(proxy.listen.rsplit(":", 1)[1])
    assert port > 0
    assert "interop" in server.proxies()
    assert roundtrip(port) < 5

    proxy.add_toxic(type="latency", attributes={"latency": 1000})
    toxics = proxy.toxics()
    assert list(toxics) == ["latency_downstream"]
    assert toxics["latency_downstream"].attributes == {"latency": 1000, "jitter": 0}
    assert roundtrip(port) >= 0.99

    held = connect(port)
    proxy.disable()
    assert proxy.enabled is False and api.get_proxy("interop")["enabled"] is False
    assert closed_by_peer(held, 5)
    held.close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    with proxy.down():
        assert api.get_proxy("interop")["enabled"] is False
    assert api.get_proxy("interop")["enabled"] is True  # down() re-enables on exit
    proxy.enable()

    assert proxy.destroy_toxic("latency_downstream") is True
    t0 = time.monotonic()
    with connect(port) as s:
        s.sendall(b"z")
        assert recv_exactly(s, 1) == b"z"
    assert time.monotonic() - t0 < 0.8

    # client-side populate: unchanged proxies are skipped, new ones created
    created = server.populate(
        [
            {"name": "interop", "listen": proxy.listen, "upstream": echo.addr},
            {"name": "interop2", "listen": "127.0.0.1:0", "upstream": echo.addr},
        ]
    )
    assert [p.name for p in created] == ["interop2"]
    assert server.reset() is True

    assert server.destroy(proxy) is True
    assert server.get_proxy("interop") is None
    server.destroy_all()
    assert server.proxies() == {}
