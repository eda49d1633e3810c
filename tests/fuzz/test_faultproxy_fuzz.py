"""Fuzz: the fault proxy's HTTP API (the real server, started as in tests/faultproxy/). Requests
on every route with hostile bodies: proxies whose upstream is their own or another proxy's listen
address (127.0.0.1/localhost/0.0.0.0), unknown and out-of-range toxic attributes, duplicate names,
raw garbage. Every answer is a success or a 4xx with a JSON error, never a 500, and the API
keeps answering."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness.faultproxy.launcher import FaultProxyHandle
from harness.faultproxy.toxics import TOXIC_ATTRIBUTES
from tests.faultproxy.util import TcpServer, builtin_fault_proxy, echo_handler

from .common import FUZZ, SCALARS, VALUES, Tally

NAMES = st.sampled_from(["p1", "p1", "p2", "p3"])
TOXICS = sorted(TOXIC_ATTRIBUTES)
TOXIC_NAMES = st.sampled_from(["t1", "t2", "latency_downstream"])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[FaultProxyHandle, TcpServer]]:
    echo = TcpServer(echo_handler)
    try:
        with builtin_fault_proxy(tmp_path_factory.mktemp("fuzz-proxy"), seed=7) as handle:
            yield handle, echo
    finally:
        echo.close()


class Api:
    def __init__(self, url: str) -> None:
        host, _, port = url.removeprefix("http://").partition(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=10)

    def __call__(self, method: str, path: str, body: bytes | None = None) -> tuple[int, Any]:
        self.conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
        resp = self.conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else None


@st.composite
def requests(draw: st.DrawFn, listens: list[str], echo: str) -> tuple[str, str, bytes | None]:
    """(method, path, body) on a route of the API."""
    name = draw(NAMES)
    ports = [a.rpartition(":")[2] for a in listens] or ["1"]
    port = draw(st.sampled_from(ports))
    address = st.sampled_from(
        [echo, "127.0.0.1:0", f"127.0.0.1:{port}", f"localhost:{port}", f"0.0.0.0:{port}", f":{port}"]
        + ["[::1]:0", "x", "127.0.0.1:99999", "127.0.0.1:-1", ""]
    )
    proxy = st.fixed_dictionaries(
        {},
        optional={"name": NAMES | SCALARS, "listen": address | SCALARS, "upstream": address | SCALARS,
                  "enabled": st.booleans() | SCALARS},
    )  # fmt: skip
    ttype = draw(st.sampled_from(TOXICS) | st.text(max_size=5))
    attr_keys = st.sampled_from([k for t in TOXICS for k in TOXIC_ATTRIBUTES[t]] + ["latncy", ""])
    toxic = st.fixed_dictionaries(
        {"type": st.just(ttype)},
        optional={"name": st.sampled_from(["t1", "t2"]) | SCALARS, "stream": st.sampled_from(
            ["upstream", "downstream", "UP", ""]) | SCALARS, "toxicity": SCALARS,
            "attributes": st.dictionaries(attr_keys, SCALARS, max_size=3) | SCALARS},
    )  # fmt: skip
    route = draw(
        st.sampled_from(["proxies", "proxy", "populate", "toxics", "toxic", "reset", "version", "other"])
    )
    allowed = {"proxies": "GET POST", "populate": "POST", "toxics": "GET POST", "reset": "POST"}
    methods = allowed.get(route, "GET POST PATCH DELETE").split()
    method = draw(st.sampled_from(methods)) if draw(st.integers(0, 9)) else "PUT"
    path, body = {
        "proxies": ("/proxies", proxy),
        "proxy": (f"/proxies/{name}", proxy),
        "populate": ("/populate", st.lists(proxy, max_size=3)),
        "toxics": (f"/proxies/{name}/toxics", toxic),
        "toxic": (
            f"/proxies/{name}/toxics/{draw(st.sampled_from(['t1', 't2', 'latency_downstream']))}",
            toxic,
        ),
        "reset": ("/reset", st.none()),
        "version": ("/version", st.none()),
        "other": (
            "/" + draw(st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=12)),
            VALUES,
        ),
    }[route]
    doc = draw(body | VALUES if draw(st.integers(0, 5)) == 0 else body)
    raw = draw(st.sampled_from([b"{", b"[" * 5000, b"\xff", b"1" * 5000, b"NaN"])) if draw(
        st.integers(0, 9)) == 0 else json.dumps(doc).encode()  # fmt: skip
    return method, path.replace(" ", "%20"), raw


def test_fault_proxy_api_fuzz(
    server: tuple[FaultProxyHandle, TcpServer], capsys: pytest.CaptureFixture[str]
) -> None:
    handle, echo = server
    api = Api(handle.url)
    tally = Tally()

    @FUZZ
    @given(data=st.data())
    def case(data: st.DataObject) -> None:
        status, proxies = api("GET", "/proxies")
        assert status == 200
        if "p1" not in proxies:  # something for the toxic routes to work on
            api("POST", "/proxies", json.dumps({"name": "p1", "upstream": echo.addr}).encode())
            proxies = api("GET", "/proxies")[1]
        listens = [p["listen"] for p in proxies.values()]
        for _ in range(data.draw(st.integers(1, 4))):
            method, path, body = data.draw(requests(listens, echo.addr))
            tally["requests"] += 1
            status, doc = api(method, path, body)
            assert status < 500, (method, path, body, status, doc)
            if status >= 400:
                assert isinstance(doc, dict) and doc.get("error"), doc
                tally[f"http {status}"] += 1
            else:
                tally["http 2xx"] += 1
        tally["cases"] += 1
        status, proxies = api("GET", "/proxies")
        assert status == 200
        for p in proxies.values():  # no proxy dials itself or another proxy
            assert p["upstream"] not in [q["listen"] for q in proxies.values()]
        if len(proxies) > 6:
            for n in proxies:
                api("DELETE", f"/proxies/{n}")

    case()
    with capsys.disabled():
        print("\n" + tally.report("fault-proxy API fuzz"))
    assert api("GET", "/version")[0] == 200
