"""Fixtures of the fault-proxy tests: one real builtin server per session, real upstream sockets.

Upstreams run as threads of the test process (echo, sink); the proxy server is a child process
started through `harness.procs.spawn` (via the launcher) and stopped in a `finally`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.faultproxy.client import ToxiproxyClient
from harness.faultproxy.launcher import FaultProxyHandle

from .util import Sink, TcpServer, builtin_fault_proxy, echo_handler


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.faultproxy)


@pytest.fixture(scope="session")
def fault_proxy(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FaultProxyHandle]:
    with builtin_fault_proxy(tmp_path_factory.mktemp("faultproxy-run"), seed=1234) as handle:
        yield handle


@pytest.fixture
def api(fault_proxy: FaultProxyHandle) -> Iterator[ToxiproxyClient]:
    client = fault_proxy.client
    try:
        yield client
    finally:
        for name in list(client.proxies()):
            client.delete_proxy(name)


@pytest.fixture
def echo() -> Iterator[TcpServer]:
    srv = TcpServer(echo_handler)
    try:
        yield srv
    finally:
        srv.close()


@pytest.fixture
def sink() -> Iterator[Sink]:
    s = Sink()
    try:
        yield s
    finally:
        s.server.close()
