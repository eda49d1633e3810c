"""`bfh up/down/status`'s supervisor with a fake backend through the Backend protocol: the state
file says starting, then up with each group's master and every broker's state (kept current as the
backend changes), down when stopped, failed with the first line of the error; `down` and `up`
refuse or clean up by whether the recorded supervisor lives. No broker, seconds each."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from harness.backends.base import Backend
from harness.cli import supervisor
from harness.deploy.plan import make_plan
from tests.harness.fakes import FakeBackend


def _wait_for(reports: Path, status: str, timeout: float = 10.0, **want: Any) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    st: dict[str, Any] | None = None
    while time.monotonic() < deadline:
        st = supervisor.read_state(reports)
        if st and st.get("status") == status and all(st.get(k) == v for k, v in want.items()):
            return st
        time.sleep(0.02)
    raise AssertionError(f"state never {status} {want}: {st}")


class _Supervised:
    """`serve` in a thread over a fake environment whose backend is a FakeBackend."""

    def __init__(self, reports: Path, fail: str | None = None) -> None:
        self.reports = reports
        self.fail = fail
        self.backend: FakeBackend | None = None
        self.stop = threading.Event()
        self.code: int | None = None
        self.closed = False

    @contextmanager
    def env_up(self, topology: Any, run_dir: Path, run_id: str, backend: str) -> Iterator[Any]:
        assert backend == "fake"
        plan = make_plan(topology, run_dir)
        be: Backend = FakeBackend(plan)  # through the protocol, as Environment.up hands it over
        assert isinstance(be, Backend)
        self.backend = be  # type: ignore[assignment]
        if self.fail:
            raise RuntimeError(self.fail)
        try:
            yield SimpleNamespace(
                plan=plan, backend=be, fault_proxy=SimpleNamespace(url="http://127.0.0.1:1")
            )
        finally:
            self.closed = True

    def run(self) -> threading.Thread:
        def body() -> None:
            self.code = supervisor.serve(
                "pair", self.reports, "fake", env_up=self.env_up, stop_event=self.stop, interval=0.05
            )

        t = threading.Thread(target=body, daemon=True)
        t.start()
        return t


def test_up_then_down_states(tmp_path: Path) -> None:
    sup = _Supervised(tmp_path)
    t = sup.run()
    st = _wait_for(tmp_path, "up")
    assert st["masters"] == {"pair": "pair-1"}
    assert st["brokers"] == {"pair-1": "master", "pair-2": "slave"}
    assert "pair-1-mqtt" in st["proxies"] and st["client_urls"]["pair"]["mqtt"]
    assert st["alive"] is True and st["backend"] == "fake"
    assert sup.backend is not None
    sup.backend.kill("pair-1")  # the file follows the backend
    _wait_for(tmp_path, "up", masters={"pair": "pair-2"}, brokers={"pair-1": "down", "pair-2": "master"})
    sup.stop.set()
    t.join(10)
    assert sup.code == 0 and sup.closed
    assert supervisor.read_state(tmp_path)["status"] == "down"  # type: ignore[index]


def test_a_failed_start_is_reported_with_its_first_line(tmp_path: Path) -> None:
    sup = _Supervised(tmp_path, fail="port 61616 is already in use\nmore detail")
    t = sup.run()
    t.join(10)
    assert sup.code == 2
    st = supervisor.read_state(tmp_path)
    assert st is not None and st["status"] == "failed"
    assert st["error"] == "port 61616 is already in use"


def test_up_refuses_while_a_live_supervisor_holds_the_state(tmp_path: Path) -> None:
    sup = _Supervised(tmp_path)
    t = sup.run()
    try:
        _wait_for(tmp_path, "up")  # its pid is this test process: alive
        with pytest.raises(supervisor.UpError, match="already up"):
            supervisor.up("pair", tmp_path)
    finally:
        sup.stop.set()
        t.join(10)


def test_down_of_a_dead_supervisor_only_removes_its_state(tmp_path: Path) -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    supervisor._write(supervisor.state_path(tmp_path), {"pid": gone.pid, "status": "up", "topology": "pair"})
    st = supervisor.read_state(tmp_path)
    assert st is not None and st["alive"] is False
    assert supervisor.down(tmp_path, timeout=1) == st
    assert not supervisor.state_path(tmp_path).exists()
    assert supervisor.down(tmp_path) is None  # nothing up


def test_down_stops_a_live_supervisor_by_sigterm(tmp_path: Path) -> None:
    # Stands in for the detached supervisor: it records the signal it got. `down` may reap it
    # (it is our child here), so its exit status is gone; the marker file is the evidence.
    marker = tmp_path / "got"
    code = (
        "import signal, sys, time, pathlib\n"
        f"def term(n, f): pathlib.Path({str(marker)!r}).write_text(str(n)); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, term)\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        supervisor._write(supervisor.state_path(tmp_path), {"pid": child.pid, "status": "up"})
        assert supervisor.down(tmp_path, timeout=10) is not None
        assert marker.read_text() == str(int(signal.SIGTERM))
        assert not supervisor.state_path(tmp_path).exists()
    finally:
        child.kill()
        child.wait(5)
