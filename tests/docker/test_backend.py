"""The docker backend against real ActiveMQ containers (testcontainers containers on the locally
built image): the shared-volume store lock decides one master across containers, kill/isolate fail
over, and nothing labelled with the run outlives it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.backends.docker import RUN_LABEL, DockerBackend, leftovers
from harness.deploy.plan import make_plan
from harness.topology import builtin_topology

pytestmark = [pytest.mark.docker, pytest.mark.broker, pytest.mark.extended, pytest.mark.timeout(1800)]


def _backend(run_dir: Path, image: str) -> DockerBackend:
    return DockerBackend(make_plan(builtin_topology("pair"), run_dir), run_dir, image=image)


def test_store_lock_one_master_and_takeover_after_kill(tmp_path: Path, activemq_image: str) -> None:
    """Exactly one member serves while both run (the KahaDB lock on the shared volume holds across
    containers); after SIGKILL of the master the other member takes over; close removes everything."""
    be = _backend(tmp_path / "run", activemq_image)
    try:
        be.start()
        states = be.states()
        assert sorted(states.values()) == ["master", "slave"], states
        ours = be.client.containers.list(filters={"label": f"{RUN_LABEL}={be.run_id}"})
        assert len(ours) == 2 and all(c.labels.get("org.testcontainers") == "true" for c in ours)
        first = be.master("pair")
        assert first is not None and states[first] == "master"
        be.kill(first)
        second = be.wait_master("pair", timeout=60)
        assert second != first
        assert be.state(first) == "down"
        be.start_broker(first)  # comes back as the slave: the lock is held by `second`
        assert be.state(first) == "slave" and be.master("pair") == second
    finally:
        be.close()
    assert leftovers(be.run_id) == []


def test_isolate_partitions_the_master(tmp_path: Path, activemq_image: str) -> None:
    """A network disconnect makes the master unreachable through its published port; reconnect
    makes it reachable again."""
    import socket

    be = _backend(tmp_path / "run", activemq_image)
    try:
        be.start()
        m = be.master("pair")
        assert m is not None
        port = be.plan.brokers[m].ports["openwire"]

        def talks() -> bool:
            # A connect through docker's published port succeeds only if the broker answers:
            # OpenWire sends its WireFormatInfo first.
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
                    s.settimeout(3)
                    return len(s.recv(16)) > 0
            except OSError:
                return False

        assert talks()
        be.isolate(m)
        assert not talks()
        be.reconnect(m)
        deadline = time.monotonic() + 10
        while not talks() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert talks()
    finally:
        be.close()
    assert leftovers(be.run_id) == []


CHILD = """
import sys, time
from pathlib import Path
from harness.backends.docker import DockerBackend
from harness.deploy.plan import make_plan
from harness.topology import builtin_topology
run = Path(sys.argv[1]); be = DockerBackend(make_plan(builtin_topology("pair"), run), run, image=sys.argv[2])
be.start(); print(be.run_id, flush=True); time.sleep(600)
"""


def test_interrupted_run_leaves_nothing_after_cleanup(tmp_path: Path, activemq_image: str) -> None:
    """A harness killed with SIGKILL leaves labelled containers; the next start in the same run
    folder (or `clean_run`) removes them, and its own close leaves nothing with the run id."""
    run = tmp_path / "run"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(run), activemq_image],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    try:
        assert child.stdout is not None
        run_id = child.stdout.readline().strip()
        assert run_id, "child harness did not start its brokers"
        assert leftovers(run_id), "nothing was labelled with the run id"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert leftovers(run_id)  # the interrupted run left its containers behind
    be = _backend(run, activemq_image)
    assert be.run_id == run_id
    be.preflight()  # a new start in the same folder reaps them first
    assert leftovers(run_id) == []
    be.close()
    assert leftovers(run_id) == []
