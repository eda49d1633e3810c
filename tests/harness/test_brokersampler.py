"""The brokers' usage sampler (harness/run/brokersampler.py) on a real process and real sockets:
accepted connections counted on the process's listening port (netlink sock_diag), its CPU in
cores, the file's round trip and its summary. No broker: this process stands in for one."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

from harness.contracts import brokerusage
from harness.run.brokersampler import BrokerSampler


def test_counts_accepted_connections_and_cpu(tmp_path: Path) -> None:
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    accepted = [server.accept()[0] for _ in clients]
    pids = {"b-1": os.getpid(), "b-2": None}  # b-2 is down: no entry
    s = BrokerSampler(tmp_path, pids.get, {"b-1": {port}, "b-2": {port + 1}})
    try:
        first = s.sample()["brokers"]
        assert set(first) == {"b-1"} and first["b-1"]["conns"] == 3 and first["b-1"]["cpu"] is None
        t = time.monotonic()
        while time.monotonic() - t < 0.3:  # burn some CPU
            sum(range(10_000))
        accepted.pop().close()
        clients.pop().close()
        second = s.sample()["brokers"]["b-1"]
        assert second["conns"] == 2
        assert second["cpu"] is not None and 0 < second["cpu"] <= (os.cpu_count() or 1) + 0.5
    finally:
        for c in clients + accepted:
            c.close()
        server.close()
    brokerusage.write(tmp_path, s.rows)
    assert brokerusage.read(tmp_path) == s.rows
    got = brokerusage.summarize(s.rows)["brokers"]["b-1"]
    assert got["conns_max"] == 3 and got["cpu_max"] == second["cpu"]


def test_reader_skips_what_is_not_a_sample(tmp_path: Path) -> None:
    (tmp_path / brokerusage.USAGE_FILE).write_text(
        '{"ts": 2, "brokers": {"a": {"conns": 1, "cpu": 0.5}}}\nnot json\n{"ts": "x"}\n'
        '{"ts": 1, "brokers": {"a": {"conns": null, "cpu": 0.1}}}\n{"ts": 3, "brokers": []}\n'
    )
    assert brokerusage.series(brokerusage.read(tmp_path)) == {"a": [(1.0, None, 0.1), (2.0, 1.0, 0.5)]}
