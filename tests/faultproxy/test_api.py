"""The HTTP API contract: shapes, status codes, partial updates, populate, reset."""

from __future__ import annotations

import http.client
import json
import socket
from typing import Any
from urllib.parse import urlsplit

import pytest

from harness.faultproxy.client import ToxiproxyClient, ToxiproxyError
from harness.faultproxy.launcher import FaultProxyHandle

from .util import TcpServer, closed_by_peer, connect, make_proxy, recv_exactly, roundtrip, unique

PROXY_KEYS = {"name", "listen", "upstream", "enabled", "toxics"}
TOXIC_KEYS = {"name", "type", "stream", "toxicity", "attributes"}


class Raw:
    """Raw HTTP against the server: status codes, headers and bodies as they are on the wire."""

    def __init__(self, url: str) -> None:
        u = urlsplit(url)
        self.host, self.port = u.hostname or "127.0.0.1", u.port or 8474

    def __call__(
        self, method: str, path: str, body: Any = None, raw: bytes | None = None, headers: dict | None = None
    ) -> tuple[int, Any, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
            conn.request(method, path, body=data, headers=headers or {})
            resp = conn.getresponse()
            payload = resp.read()
            try:
                doc = json.loads(payload) if payload else None
            except ValueError:
                doc = payload.decode()
            return resp.status, doc, resp
        finally:
            conn.close()


@pytest.fixture
def raw(fault_proxy: FaultProxyHandle, api: ToxiproxyClient) -> Raw:
    return Raw(fault_proxy.url)


def test_proxy_shapes_and_codes(raw: Raw, echo: TcpServer) -> None:
    name = unique()
    st, doc, resp = raw("POST", "/proxies", {"name": name, "listen": "127.0.0.1:0", "upstream": echo.addr})
    assert st == 201 and resp.getheader("Content-Type") == "application/json"
    assert set(doc) == PROXY_KEYS
    assert doc["enabled"] is True and doc["toxics"] == [] and doc["upstream"] == echo.addr
    host, port = doc["listen"].rsplit(":", 1)
    assert host == "127.0.0.1" and int(port) > 0  # port 0 resolved to the bound port

    st, doc2, _ = raw("POST", "/proxies", {"name": name, "listen": "127.0.0.1:0", "upstream": echo.addr})
    assert (st, doc2) == (409, {"error": "proxy already exists", "status": 409})

    st, listing, _ = raw("GET", "/proxies")
    assert st == 200 and listing[name] == doc
    st, one, _ = raw("GET", f"/proxies/{name}")
    assert (st, one) == (200, doc)

    st, body, _ = raw("DELETE", f"/proxies/{name}")
    assert (st, body) == (204, None)
    st, err, _ = raw("GET", f"/proxies/{name}")
    assert (st, err) == (404, {"error": "proxy not found", "status": 404})
    assert raw("DELETE", f"/proxies/{name}")[0] == 404


def test_toxic_shapes_defaults_and_codes(raw: Raw, api: ToxiproxyClient, echo: TcpServer) -> None:
    name, _ = make_proxy(api, echo.addr)
    st, t, _ = raw("POST", f"/proxies/{name}/toxics", {"type": "latency", "attributes": {"latency": 5}})
    assert st == 200  # Toxiproxy answers 200 (not 201) for a created toxic
    assert t == {
        "name": "latency_downstream",
        "type": "latency",
        "stream": "downstream",
        "toxicity": 1.0,
        "attributes": {"latency": 5, "jitter": 0},
    }
    st, err, _ = raw("POST", f"/proxies/{name}/toxics", {"type": "latency"})
    assert (st, err) == (409, {"error": "toxic already exists", "status": 409})
    st, t2, _ = raw(
        "POST", f"/proxies/{name}/toxics", {"type": "bandwidth", "stream": "upstream", "name": "bw"}
    )
    assert st == 200 and set(t2) == TOXIC_KEYS and t2["attributes"] == {"rate": 0}
    st, listed, _ = raw("GET", f"/proxies/{name}/toxics")
    assert st == 200 and [x["name"] for x in listed] == ["latency_downstream", "bw"]
    assert raw("GET", f"/proxies/{name}")[1]["toxics"] == listed
    assert raw("GET", f"/proxies/{name}/toxics/bw")[1] == t2
    assert raw("GET", f"/proxies/{name}/toxics/nope")[:2] == (
        404,
        {"error": "toxic not found", "status": 404},
    )
    assert raw("DELETE", f"/proxies/{name}/toxics/bw")[:2] == (204, None)
    assert raw("DELETE", f"/proxies/{name}/toxics/bw")[0] == 404
    assert raw("GET", "/proxies/nope/toxics")[0] == 404
    assert raw("POST", "/proxies/nope/toxics", {"type": "latency"})[0] == 404


def test_partial_updates_merge(raw: Raw, api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    api.add_toxic(name, "latency", latency=100, jitter=10)
    for method in ("POST", "PATCH"):  # POST is Toxiproxy's (and toxiproxy-python's) update verb
        st, t, _ = raw(method, f"/proxies/{name}/toxics/latency_downstream", {"attributes": {"latency": 7}})
        assert st == 200 and t["attributes"] == {"latency": 7, "jitter": 10} and t["toxicity"] == 1.0
    st, t, _ = raw("PATCH", f"/proxies/{name}/toxics/latency_downstream", {"toxicity": 0.25})
    assert t["toxicity"] == 0.25 and t["attributes"] == {"latency": 7, "jitter": 10}

    other = TcpServer(lambda c: c.sendall(b"OTHER"))
    try:
        st, p, _ = raw("PATCH", f"/proxies/{name}", {"upstream": other.addr})
        assert st == 200 and p["upstream"] == other.addr and p["listen"] == f"127.0.0.1:{port}"
        assert p["enabled"] is True and p["toxics"][0]["name"] == "latency_downstream"
        with connect(port) as s:
            assert recv_exactly(s, 5) == b"OTHER"
        st, p, _ = raw("POST", f"/proxies/{name}", {"enabled": False})
        assert st == 200 and p["enabled"] is False and p["upstream"] == other.addr
        st, p, _ = raw("POST", f"/proxies/{name}", {"enabled": True, "upstream": echo.addr})
        assert p["enabled"] is True and p["listen"] == f"127.0.0.1:{port}"
        assert roundtrip(port) < 5
    finally:
        other.close()


def test_populate_creates_replaces_and_leaves_unchanged(
    raw: Raw, api: ToxiproxyClient, echo: TcpServer
) -> None:
    a, b = unique("pop_a"), unique("pop_b")
    specs = [
        {"name": a, "listen": "127.0.0.1:0", "upstream": echo.addr, "enabled": True},
        {"name": b, "listen": "127.0.0.1:0", "upstream": echo.addr},
    ]
    st, doc, _ = raw("POST", "/populate", specs)
    assert st == 201 and set(doc) == {"proxies"}
    assert [p["name"] for p in doc["proxies"]] == [a, b]
    assert all(set(p) == PROXY_KEYS and p["enabled"] for p in doc["proxies"])
    listen = {p["name"]: p["listen"] for p in doc["proxies"]}

    # unchanged proxies are left alone: an open connection survives a second populate
    port_a = int(listen[a].rsplit(":", 1)[1])
    held = connect(port_a)
    held.sendall(b"1")
    assert recv_exactly(held, 1) == b"1"
    again = api.populate([{"name": a, "listen": listen[a], "upstream": echo.addr, "enabled": True}])
    assert again[0]["listen"] == listen[a]
    held.sendall(b"2")
    assert recv_exactly(held, 1) == b"2"

    # a changed upstream replaces the proxy (its connections are dropped)
    other = TcpServer(lambda c: c.sendall(b"NEW"))
    try:
        out = api.populate([{"name": a, "listen": listen[a], "upstream": other.addr, "enabled": True}])
        assert out[0]["upstream"] == other.addr and out[0]["listen"] == listen[a]
        assert closed_by_peer(held, 5)
        with connect(port_a) as s:
            assert recv_exactly(s, 3) == b"NEW"
    finally:
        held.close()
        other.close()

    # validation happens before anything is created
    bad = [{"name": unique("pop_c"), "upstream": echo.addr}, {"listen": "127.0.0.1:0", "upstream": echo.addr}]
    st, err, _ = raw("POST", "/populate", bad)
    assert st == 400 and err["status"] == 400 and "name" in err["error"]
    assert bad[0]["name"] not in api.proxies()
    assert raw("POST", "/populate", {"name": "x"})[0] == 400  # not an array


def test_reset_enables_and_removes_toxics(raw: Raw, api: ToxiproxyClient, echo: TcpServer) -> None:
    a, port_a = make_proxy(api, echo.addr)
    b, port_b = make_proxy(api, echo.addr)
    api.add_toxic(a, "latency", latency=2000)
    api.add_toxic(b, "timeout", stream="upstream", timeout=0)
    api.disable(b)
    assert raw("POST", "/reset")[:2] == (204, None)
    for n in (a, b):
        p = api.get_proxy(n)
        assert p["enabled"] is True and p["toxics"] == []
    assert roundtrip(port_a) < 1.5
    assert roundtrip(port_b) < 5


def test_version_is_json_and_browsers_refused(raw: Raw) -> None:
    st, doc, resp = raw("GET", "/version")
    assert st == 200 and resp.getheader("Content-Type") == "application/json"
    assert doc["version"].startswith("2.")
    st, text, _ = raw("GET", "/proxies", headers={"User-Agent": "Mozilla/5.0 (X11; Linux x86_64)"})
    assert st == 403 and "User agent not allowed" in text


def test_keep_alive_and_chunked_bodies(
    fault_proxy: FaultProxyHandle, api: ToxiproxyClient, echo: TcpServer
) -> None:
    raw = Raw(fault_proxy.url)
    conn = http.client.HTTPConnection(raw.host, raw.port, timeout=10)
    try:
        for _ in range(3):  # several requests on one connection
            conn.request("GET", "/version")
            resp = conn.getresponse()
            assert resp.status == 200 and json.loads(resp.read())["version"]
        name = unique()
        body = json.dumps({"name": name, "listen": "127.0.0.1:0", "upstream": echo.addr}).encode()
        conn.request("POST", "/proxies", body=iter([body[:10], body[10:]]), encode_chunked=True)
        resp = conn.getresponse()
        assert resp.status == 201 and json.loads(resp.read())["name"] == name
    finally:
        conn.close()


def test_client_errors_carry_status(api: ToxiproxyClient, echo: TcpServer) -> None:
    with pytest.raises(ToxiproxyError) as e:
        api.get_proxy("does-not-exist")
    assert e.value.status == 404 and e.value.message == "proxy not found"
    name, _ = make_proxy(api, echo.addr)
    with pytest.raises(ToxiproxyError) as e:
        api.create_proxy(name, "127.0.0.1:0", echo.addr)
    assert e.value.status == 409
    with pytest.raises(ToxiproxyError) as e:
        api.add_toxic(name, "nonsense")
    assert e.value.status == 400


def test_client_fault_helpers(api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    api.latency(name, 50, 5)
    api.latency(name, 60)  # upsert: a second call updates instead of failing with 409
    assert api.get_toxic(name, "latency_downstream")["attributes"] == {"latency": 60, "jitter": 0}
    api.bandwidth(name, 1000, stream="both")
    api.reset_peer(name, 1000, stream="upstream")
    api.slice(name, 100, 10, 5)
    api.limit(name, 10_000)
    api.slow_close(name, 10)
    names = sorted(t["name"] for t in api.toxics(name))
    assert names == sorted(
        [
            "latency_downstream",
            "bandwidth_upstream",
            "bandwidth_downstream",
            "reset_peer_upstream",
            "slicer_downstream",
            "limit_data_downstream",
            "slow_close_downstream",
        ]
    )
    api.down(name)
    assert api.get_proxy(name)["enabled"] is False
    api.heal(name)
    p = api.get_proxy(name)
    assert p["enabled"] is True and p["toxics"] == []
    other, _ = make_proxy(api, echo.addr)
    api.partition([name, other])
    for n in (name, other):
        assert sorted(t["name"] for t in api.toxics(n)) == ["timeout_downstream", "timeout_upstream"]
        assert all(t["attributes"] == {"timeout": 0} for t in api.toxics(n))
    api.heal(name)
    api.up(name)
    assert roundtrip(port) < 5


def test_bad_request_sweep_keeps_serving(raw: Raw, api: ToxiproxyClient, echo: TcpServer) -> None:
    name, port = make_proxy(api, echo.addr)
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", 0))
    blocker.listen(1)
    busy = blocker.getsockname()[1]
    t = f"/proxies/{name}/toxics"
    cases: list[tuple[str, str, bytes | None, Any]] = [
        ("POST", "/proxies", b"{not json", None),
        ("POST", "/proxies", b"", None),
        ("POST", "/proxies", None, [1, 2]),
        ("POST", "/proxies", None, {"listen": "127.0.0.1:0", "upstream": echo.addr}),
        ("POST", "/proxies", None, {"name": unique(), "listen": "127.0.0.1:0"}),
        ("POST", "/proxies", None, {"name": unique(), "listen": "nope", "upstream": echo.addr}),
        ("POST", "/proxies", None, {"name": unique(), "listen": "127.0.0.1:99999", "upstream": echo.addr}),
        ("POST", "/proxies", None, {"name": unique(), "listen": f"127.0.0.1:{busy}", "upstream": echo.addr}),
        (
            "POST",
            "/proxies",
            None,
            {"name": unique(), "listen": "127.0.0.1:0", "upstream": echo.addr, "enabled": 3},
        ),
        ("POST", f"/proxies/{name}", b"[", None),
        ("POST", f"/proxies/{name}", None, {"listen": f"127.0.0.1:{busy}"}),
        ("POST", t, b"{", None),
        ("POST", t, None, {"type": "nonsense"}),
        ("POST", t, None, {"attributes": {"latency": 1}}),
        ("POST", t, None, {"type": "latency", "stream": "sideways"}),
        ("POST", t, None, {"type": "latency", "attributes": {"latency": -1}}),
        ("POST", t, None, {"type": "bandwidth", "attributes": {"rate": "fast"}}),
        ("POST", t, None, {"type": "slicer", "attributes": {"average_size": 1.5}}),
        ("POST", t, None, {"type": "latency", "toxicity": 1.5}),
        ("POST", t, None, {"type": "latency", "toxicity": "all"}),
        ("POST", t, None, {"type": "latency", "attributes": [1]}),
        ("POST", "/populate", b"nope", None),
        (
            "POST",
            "/populate",
            None,
            [{"name": unique(), "listen": f"127.0.0.1:{busy}", "upstream": echo.addr}],
        ),
        ("GET", "/nowhere", None, None),
        ("DELETE", "/proxies", None, None),
        ("GET", "/reset", None, None),
        ("PUT", f"/proxies/{name}", None, {"enabled": True}),
    ]
    try:
        for method, path, body, doc in cases:
            st, err, _ = raw(method, path, body=doc, raw=body)
            assert 400 <= st < 500, (method, path, body, doc, st, err)
            assert isinstance(err, dict) and err["status"] == st and err["error"], (method, path, err)
        # a toxic with a bad update is refused and the toxic is unchanged
        api.add_toxic(name, "latency", latency=1)
        st, _, _ = raw("POST", f"{t}/latency_downstream", {"attributes": {"jitter": -5}})
        assert st == 400 and api.get_toxic(name, "latency_downstream")["attributes"]["jitter"] == 0
        api.remove_toxic(name, "latency_downstream")
        # malformed HTTP itself
        for junk in (
            b"GARBAGE\r\n\r\n",
            b"GET /version HTTP/1.1\r\nno-colon-header\r\n\r\n",
            b"POST /proxies HTTP/1.1\r\nContent-Length: x\r\n\r\n",
        ):
            with socket.create_connection((raw.host, raw.port), timeout=10) as s:
                s.sendall(junk)
                assert s.recv(100).startswith(b"HTTP/1.1 400 ")
    finally:
        blocker.close()
    # still serving: API, the existing proxy, and no half-created proxies
    assert api.version()
    assert roundtrip(port) < 5
    assert set(api.proxies()) == {name}
    assert api.get_proxy(name)["enabled"] is True


def test_expect_100_continue(raw: Raw, echo: TcpServer) -> None:
    """curl sends `Expect: 100-continue` for bodies over 1 KB and waits for the interim answer."""
    name = unique("curl")
    body = json.dumps({"name": name, "listen": "127.0.0.1:0", "upstream": echo.addr, "pad": "x" * 2000})
    head = (
        f"POST /proxies HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n"
    )
    with socket.create_connection((raw.host, raw.port), timeout=10) as s:
        s.sendall(head.encode())
        assert s.recv(100).startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        s.sendall(body.encode())
        answer = b""
        while chunk := s.recv(4096):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 201 Created\r\n"), answer
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1])["name"] == name
